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
import type { FrontLinkStatus } from './fronts.ts';
import type { CheckCounters, CheckKind, CheckResultState } from './health-check.ts';
import type { ReportedHealth } from './health.ts';
import type { OperatorCounters, OperatorVerb } from './operator-state.ts';

/** The server's health as the agent reports it, and its two inputs (`sluice agent ctl show`). */
export interface AgentHealthStatus {
  readonly state: ReportedHealth;
  readonly reason: string;
  readonly sinceSeconds: number;
  readonly transitions: number;
  /** Load reports sent at once on a health change. */
  readonly reportsAtOnce: number;
  /** Load reports sent at once when the front node (re)connected. */
  readonly reportsOnConnect: number;
  /** The operator's verb, from the state file (`source` file) or set by ctl. */
  readonly operator: { readonly verb: OperatorVerb; readonly reason: string; readonly source: 'none' | 'file' | 'ctl'; readonly file: string; readonly lastError?: string } & Readonly<OperatorCounters>;
  readonly check: { readonly kind: CheckKind; readonly state: CheckResultState | 'off' | 'pending'; readonly reason: string } & Readonly<CheckCounters>;
}

export interface AgentStatus {
  /** Always true: tells an agent's status from the other daemons'. */
  readonly agent: true;
  readonly name: string;
  /** The front nodes' endpoints it reports to, comma-separated. */
  readonly front: string;
  /** Each front node: its endpoint, whether it is connected, messages sent and dropped (absent from agents older than issue 21). */
  readonly fronts?: readonly FrontLinkStatus[] | undefined;
  readonly uptimeSeconds: number;
  readonly reports: { readonly load: number; readonly requestRate: number; readonly sampleErrors: number };
  /** The last load report sent; absent before the first. */
  readonly lastLoad?: Body<'load_report'> | undefined;
  readonly accessLog: { readonly path: string } & Readonly<FollowerCounters>;
  /** The control plane's counters, once it is up. */
  readonly control?: Readonly<ControlCounters> | undefined;
  readonly reloads: number;
  readonly reloadsRefused: number;
  /** Absent from agents older than the health checks. */
  readonly health?: AgentHealthStatus | undefined;
}
