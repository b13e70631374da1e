/**
 * `sluice dashboard`: the live web view of a site, read from its daemons'
 * status (admin sockets or ops HTTP servers). Read-only; it changes nothing
 * on the daemons. Prints its URL on stdout once listening, runs until
 * SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { Poller } from '../dashboard/poller.ts';
import { DashboardServer } from '../dashboard/server.ts';
import { parseSource, type StatusSource } from '../dashboard/source.ts';
import { InvalidArgumentError } from '../errors/errors.ts';
import { componentLogger } from '../log/logger.ts';
import type { Command } from './command.ts';

const USAGE = `usage: sluice dashboard --source NAME=SRC [--source NAME=SRC ...]
                       [--listen HOST:PORT] [--interval SECONDS] [--timeout SECONDS] [--title TEXT]

  SRC is a daemon's admin socket (unix:/run/sluice/front.sock) or its ops
  HTTP server (http://10.0.0.1:9100, read at /status). Give every front node
  and DNS server of the site. Default listen 127.0.0.1:8080, interval 1 s,
  timeout 0.8 s (a source slower than that is shown down).`;

export interface DashboardArgs {
  host: string;
  port: number;
  sources: StatusSource[];
  intervalMs: number;
  timeoutMs: number;
  title: string;
}

/** Parses the command line; throws InvalidArgumentError (or parseArgs' TypeError) on a usage error. */
export function parseDashboardArgs(argv: readonly string[]): DashboardArgs {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      listen: { type: 'string', default: '127.0.0.1:8080' },
      source: { type: 'string', multiple: true },
      interval: { type: 'string', default: '1' },
      timeout: { type: 'string', default: '0.8' },
      title: { type: 'string', default: 'Sluice site' },
    },
  });
  const m = /^(\[[0-9a-fA-F:]+\]|[^:]+):(\d{1,5})$/.exec(values.listen);
  const port = Number(m?.[2]);
  if (!m || !(port >= 0 && port <= 65535)) throw new InvalidArgumentError(`--listen "${values.listen}": expected HOST:PORT (e.g. 127.0.0.1:8080; port 0 picks a free one)`);
  const host = (m[1] ?? '').replace(/^\[|\]$/g, '');
  const interval = Number(values.interval);
  if (!(interval >= 0.2 && interval <= 60)) throw new InvalidArgumentError('--interval must be a number of seconds in [0.2, 60]');
  const timeout = Number(values.timeout);
  if (!(timeout > 0 && timeout <= interval * 10)) throw new InvalidArgumentError('--timeout must be a positive number of seconds, at most 10 intervals');
  const sources = (values.source ?? []).map(parseSource);
  if (sources.length === 0) throw new InvalidArgumentError('at least one --source is required');
  const names = new Set<string>();
  for (const s of sources) {
    if (names.has(s.name)) throw new InvalidArgumentError(`--source name "${s.name}" appears twice`);
    names.add(s.name);
  }
  return { host, port, sources, intervalMs: interval * 1000, timeoutMs: timeout * 1000, title: values.title };
}

export const dashboardCommand: Command = {
  name: 'dashboard',
  summary: 'serve a live web dashboard of the site (clusters, servers, connections/s, top clients, DNS choices)',
  usage: USAGE,
  async run(argv) {
    let args: DashboardArgs;
    try {
      args = parseDashboardArgs(argv);
    } catch (err) {
      if (err instanceof InvalidArgumentError || (err instanceof TypeError && 'code' in err)) {
        console.error(`sluice dashboard: ${err.message}\n\n${USAGE}`);
        return 2;
      }
      throw err;
    }
    const log = componentLogger('dashboard');
    const poller = new Poller(args.sources, { intervalMs: args.intervalMs, timeoutMs: args.timeoutMs });
    const server = new DashboardServer(poller, log, args.title);
    let addr;
    try {
      addr = await server.listen(args.host, args.port);
    } catch (err) {
      console.error(`sluice dashboard: cannot listen on ${args.host}:${args.port}: ${(err as Error).message}`);
      return 1;
    }
    poller.start();
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    console.log(`sluice dashboard: http://${host}:${addr.port}/`);
    log.info({ listen: `${host}:${addr.port}`, sources: args.sources.map((s) => `${s.name}=${s.address}`) }, 'dashboard ready');
    return new Promise<number>((resolve) => {
      const stop = (): void => {
        poller.stop();
        void server.close().then(() => {
          resolve(0);
        });
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    });
  },
};
