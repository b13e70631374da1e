/**
 * `sluice ctl`: talks to a running front node's admin socket
 * (src/front/admin.ts). Exit 0 when the daemon says ok, 1 when it refuses,
 * 2 on usage errors. Changes are kept in the daemon's state file and
 * survive a reload and a restart until `revert` or `clear`.
 */
import { parseArgs } from 'node:util';
import { adminRequest } from '../admin/client.ts';
import type { Command } from './command.ts';

const USAGE = `usage: sluice ctl [--socket PATH] status
       sluice ctl [--socket PATH] drain|enable|disable|remove SERVICE SERVER
       sluice ctl [--socket PATH] weight|capacity SERVICE SERVER VALUE
       sluice ctl [--socket PATH] add SERVICE SERVER ADDRESS[:PORT] [weight=N] [capacity=N]
       sluice ctl [--socket PATH] revert SERVICE SERVER   (back to the config file)
       sluice ctl [--socket PATH] clear                   (every server back to the file)
       sluice ctl [--socket PATH] reload
  default socket: /run/sluice/front.sock`;

export function buildRequest(args: readonly string[]): Record<string, unknown> | string {
  const [cmd, service, server, value] = args;
  switch (cmd) {
    case 'status':
    case 'reload':
    case 'clear':
      return args.length === 1 ? { cmd } : `${cmd} takes no arguments`;
    case 'add':
      return addRequest(args.slice(1));
    case 'revert':
    case 'drain':
    case 'enable':
    case 'disable':
    case 'remove':
      return args.length === 3 ? { cmd, service, server } : `${cmd} takes SERVICE SERVER`;
    case 'weight':
    case 'capacity': {
      const v = Number(value);
      if (args.length !== 4 || !Number.isFinite(v)) return `${cmd} takes SERVICE SERVER NUMBER`;
      return { cmd, service, server, value: v };
    }
    default:
      return `unknown command ${JSON.stringify(cmd ?? '')}`;
  }
}

/** `add SERVICE SERVER ADDRESS[:PORT] [weight=N] [capacity=N]`; the daemon validates the values with the config schema. */
function addRequest(args: readonly string[]): Record<string, unknown> | string {
  const usage = 'add takes SERVICE SERVER ADDRESS[:PORT] [weight=N] [capacity=N]';
  const [service, server, where, ...opts] = args;
  if (service === undefined || server === undefined || where === undefined) return usage;
  const m = /^([^:]+)(?::(\d+))?$/.exec(where);
  if (!m) return `${usage}: ${JSON.stringify(where)} is not ADDRESS[:PORT]`;
  const req: Record<string, unknown> = { cmd: 'add', service, server, address: m[1] };
  if (m[2] !== undefined) req['port'] = Number(m[2]);
  for (const o of opts) {
    const kv = /^(weight|capacity)=(.+)$/.exec(o);
    const v = Number(kv?.[2]);
    if (!kv || !Number.isFinite(v)) return `${usage}: ${JSON.stringify(o)} is not weight=N or capacity=N`;
    req[kv[1] ?? ''] = v;
  }
  return req;
}

export const ctlCommand: Command = {
  name: 'ctl',
  summary: 'administer a running front node (status, drain, enable, disable, weight, capacity, add, remove, revert, clear, reload)',
  usage: USAGE,
  run(argv) {
    let socket: string;
    let rest: string[];
    try {
      const p = parseArgs({ args: [...argv], allowPositionals: true, options: { socket: { type: 'string', default: '/run/sluice/front.sock' } } });
      socket = p.values.socket;
      rest = p.positionals;
    } catch (err) {
      console.error(`sluice ctl: ${(err as Error).message}\n${USAGE}`);
      return Promise.resolve(2);
    }
    const req = buildRequest(rest);
    if (typeof req === 'string') {
      console.error(`sluice ctl: ${req}\n${USAGE}`);
      return Promise.resolve(2);
    }
    return adminRequest(socket, req).then(
      (reply) => {
        if (reply.ok === true) {
          console.log(reply.status !== undefined ? JSON.stringify(reply.status, null, 2) : 'ok');
          return 0;
        }
        console.error(`sluice ctl: ${reply.error ?? 'refused'}`);
        return 1;
      },
      (err: unknown) => {
        console.error(`sluice ctl: ${(err as Error).message}`);
        return 1;
      },
    );
  },
};
