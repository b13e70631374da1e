/**
 * `sluice ctl`: talks to a running front node's admin socket
 * (src/front/admin.ts). Exit 0 when the daemon says ok, 1 when it refuses,
 * 2 on usage errors.
 */
import { parseArgs } from 'node:util';
import { adminRequest } from '../admin/client.ts';
import type { Command } from './command.ts';

const USAGE = `usage: sluice ctl [--socket PATH] status
       sluice ctl [--socket PATH] drain|enable|disable|remove SERVICE SERVER
       sluice ctl [--socket PATH] weight|capacity SERVICE SERVER VALUE
       sluice ctl [--socket PATH] reload
  default socket: /run/sluice/front.sock`;

export function buildRequest(args: readonly string[]): Record<string, unknown> | string {
  const [cmd, service, server, value] = args;
  switch (cmd) {
    case 'status':
    case 'reload':
      return args.length === 1 ? { cmd } : `${cmd} takes no arguments`;
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

export const ctlCommand: Command = {
  name: 'ctl',
  summary: "administer a running front node (status, drain, enable, disable, remove, weight, capacity, reload)",
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
