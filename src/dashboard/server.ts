/**
 * The dashboard's HTTP server (read-only):
 *
 *   GET /             the page (src/dashboard/page.ts), self-contained
 *   GET /api/state    the latest DashboardState as JSON
 *   GET /api/events   Server-Sent Events: the state after every poll round
 *   GET /api/history  the last 10 minutes per cluster and server as JSON
 *                     (history.ts; ?cluster=NAME for one cluster); also
 *                     at /history.json
 *   GET /api/charts   the same drawn as SVG documents (charts.ts), which
 *                     the page shows as images; drawn once per poll round
 *
 * Anything else is 404 (405 for a method other than GET/HEAD). Event
 * streams are bounded (MAX_STREAMS); past it a client gets 503 and the page
 * falls back to polling /api/state.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log/logger.ts';
import { chartsOf } from './charts.ts';
import { pageHtml } from './page.ts';
import type { Poller } from './poller.ts';

export const MAX_STREAMS = 32;

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // Inline script and style only; the page loads nothing from anywhere else.
  'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
} as const;

export class DashboardServer {
  readonly #server: Server;
  readonly #poller: Poller;
  readonly #log: Logger;
  readonly #page: string;
  readonly #streams = new Set<ServerResponse>();
  requests = 0;
  refused = 0;
  /** The charts of the last round drawn (any number of pages share one drawing per round). */
  #charts: { round: number; body: string } | undefined;

  constructor(poller: Poller, log: Logger, title: string) {
    this.#poller = poller;
    this.#log = log;
    this.#page = pageHtml(title);
    this.#server = createServer((req, res) => {
      this.#handle(req, res);
    });
    this.#server.on('clientError', (_err, sock) => {
      this.refused++;
      sock.destroy();
    });
  }

  get streams(): number {
    return this.#streams.size;
  }

  listen(host: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve(this.#server.address() as AddressInfo);
      });
    });
  }

  close(): Promise<void> {
    for (const s of this.#streams) s.end();
    this.#streams.clear();
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => {
      resolve();
    }));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests++;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      this.#send(res, 405, 'text/plain; charset=utf-8', 'only GET\n', { allow: 'GET, HEAD' });
      return;
    }
    const [path, query] = (req.url ?? '/').split('?', 2);
    switch (path) {
      case '/':
      case '/index.html':
        this.#send(res, 200, 'text/html; charset=utf-8', this.#page);
        return;
      case '/api/state':
        this.#send(res, 200, 'application/json', JSON.stringify(this.#poller.latest));
        return;
      case '/api/events':
        this.#events(req, res);
        return;
      case '/api/history':
      case '/history.json': {
        const cluster = new URLSearchParams(query ?? '').get('cluster') ?? undefined;
        this.#send(res, 200, 'application/json', JSON.stringify(this.#poller.history.toJSON(this.#poller.now(), cluster)));
        return;
      }
      case '/api/charts':
        this.#send(res, 200, 'application/json', this.#chartsBody());
        return;
      default:
        this.#send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
    }
  }

  #chartsBody(): string {
    const round = this.#poller.rounds;
    if (this.#charts?.round !== round) this.#charts = { round, body: JSON.stringify(chartsOf(this.#poller.history, this.#poller.now())) };
    return this.#charts.body;
  }

  #send(res: ServerResponse, code: number, type: string, body: string, extra: Record<string, string> = {}): void {
    res.writeHead(code, { 'content-type': type, 'cache-control': 'no-store', ...SECURITY_HEADERS, ...extra });
    res.end(res.req.method === 'HEAD' ? undefined : body);
  }

  #events(req: IncomingMessage, res: ServerResponse): void {
    if (this.#streams.size >= MAX_STREAMS) {
      this.refused++;
      this.#log.warn({ streams: this.#streams.size }, 'event stream refused: too many open');
      this.#send(res, 503, 'text/plain; charset=utf-8', `at most ${MAX_STREAMS} event streams; poll /api/state\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive', ...SECURITY_HEADERS });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    this.#streams.add(res);
    const write = (s: unknown): void => {
      // A client that stops reading is dropped rather than buffered without bound.
      if (res.writableLength > 1024 * 1024) {
        res.destroy();
        return;
      }
      res.write(`data: ${JSON.stringify(s)}\n\n`);
    };
    res.write('retry: 2000\n\n');
    write(this.#poller.latest);
    const unsubscribe = this.#poller.subscribe(write);
    const done = (): void => {
      unsubscribe();
      this.#streams.delete(res);
    };
    res.on('close', done);
    res.on('error', done);
  }
}
