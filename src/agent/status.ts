/**
 * A server agent's status: what AgentDaemon.status() builds, the admin
 * socket's `status` command and GET /status send as JSON, and `sluice
 * status --agent` renders (renderAgentStatus, src/cli/status.ts). One type
 * for both ends, so a changed field fails the type check in each.
 *
 * Invariant: every value survives JSON as it is (numbers are finite).
 */
import type { Body } from '../control/messages.ts';
import type { ControlCounters } from '../control/node.ts';
import type { FollowerCounters } from './access-log.ts';

export interface AgentStatus {
  /** Always true: tells an agent's status from the other daemons'. */
  readonly agent: true;
  readonly name: string;
  /** The front node's endpoint it reports to. */
  readonly front: string;
  readonly uptimeSeconds: number;
  readonly reports: { readonly load: number; readonly requestRate: number; readonly sampleErrors: number };
  /** The last load report sent; absent before the first. */
  readonly lastLoad?: Body<'load_report'> | undefined;
  readonly accessLog: { readonly path: string } & Readonly<FollowerCounters>;
  /** The control plane's counters, once it is up. */
  readonly control?: Readonly<ControlCounters> | undefined;
  readonly reloads: number;
  readonly reloadsRefused: number;
}
