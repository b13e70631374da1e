/**
 * `sluice agent ctl`: the operator's verbs on a server, through its agent's
 * admin socket (src/agent/agent.ts), like HAProxy's agent-check verbs:
 *   drain [REASON]   no new connections from the front node; established ones finish
 *   maint [REASON]   the same, shown as maintenance
 *   ready | up       back in service
 *   show [--json]    the reported health, the operator's verb and the check
 * The agent writes the verb to its state file (stateFile.path), so it
 * survives a restart; writing that file by hand does the same. Exit 0 when
 * the agent took it, 1 when it refused or cannot be reached, 2 on a usage
 * error.
 */
import { parseArgs } from 'node:util';
import { adminRequest } from '../admin/client.ts';
import type { AgentHealthStatus } from '../agent/status.ts';
import { renderAgentHealth } from './status.ts';

export const AGENT_CTL_USAGE = `usage: sluice agent ctl [--socket PATH] drain|maint [REASON...]
       sluice agent ctl [--socket PATH] ready|up
       sluice agent ctl [--socket PATH] show [--json]
  default socket: /run/sluice/agent.sock`;

/** The admin request for the arguments, or a usage error. */
export function buildAgentRequest(args: readonly string[]): Record<string, unknown> | string {
  const [verb, ...rest] = args;
  switch (verb) {
    case 'drain':
    case 'maint':
      return { cmd: 'set', verb, reason: rest.join(' ') };
    case 'ready':
    case 'up':
      return rest.length === 0 ? { cmd: 'set', verb, reason: '' } : `${verb} takes no arguments`;
    case 'show':
      return rest.length === 0 ? { cmd: 'show' } : 'show takes no arguments';
    default:
      return `unknown verb ${JSON.stringify(verb ?? '')}: drain, maint, ready (or up), show`;
  }
}

export async function agentCtl(argv: readonly string[]): Promise<number> {
  let socket: string;
  let json: boolean;
  let rest: string[];
  try {
    const p = parseArgs({ args: [...argv], allowPositionals: true, options: { socket: { type: 'string', default: '/run/sluice/agent.sock' }, json: { type: 'boolean', default: false } } });
    socket = p.values.socket;
    json = p.values.json;
    rest = p.positionals;
  } catch (err) {
    console.error(`sluice agent ctl: ${(err as Error).message}\n${AGENT_CTL_USAGE}`);
    return 2;
  }
  const req = buildAgentRequest(rest);
  if (typeof req === 'string') {
    console.error(`sluice agent ctl: ${req}\n${AGENT_CTL_USAGE}`);
    return 2;
  }
  try {
    const reply = (await adminRequest(socket, req)) as { ok?: boolean; error?: string; health?: AgentHealthStatus };
    if (reply.ok !== true) {
      console.error(`sluice agent ctl: ${reply.error ?? 'refused'}`);
      return 1;
    }
    if (reply.health === undefined) {
      console.error('sluice agent ctl: the agent answered without its health (an older agent?)');
      return 1;
    }
    console.log(json ? JSON.stringify(reply.health, null, 2) : renderAgentHealth(reply.health));
    return 0;
  } catch (err) {
    console.error(`sluice agent ctl: ${(err as Error).message}`);
    return 1;
  }
}
