/**
 * The front node's status: what FrontDaemon.status() builds, the admin
 * socket's `status` command and GET /status send as JSON, `sluice status`
 * renders (src/cli/status.ts) and the dashboard reads (src/dashboard/state.ts).
 * One type for the three, so a changed field fails the type check in each.
 *
 * Invariant: every value survives JSON as it is (numbers are finite; a
 * figure that may have none is typed `| null` and sent as null), so what
 * the readers get is this type.
 */
import type { LogStats } from '../nflog/log.ts';
import type { QueueStats } from '../nfqueue/queue.ts';
import type { CheckpointStatus, Shaper } from '../shaping/shaper.ts';
import type { GatekeeperStatus } from '../throttle/gatekeeper.ts';
import type { AdmissionStatus } from './admission.ts';
import type { ConnectionTable } from './connections.ts';
import type { FrontControlStatus } from './control.ts';
import type { RulesHealthStatus } from './rules-health.ts';
import type { FallbackWriterStatus } from './fallback.ts';
import type { GuardCount } from './vip-guard.ts';
import type { EngineCounters } from './engine.ts';
import type { ServerRuntime } from './service.ts';

export interface FrontServerStatus {
  readonly name: string;
  /** The configured or admin-set state, or down (its agent stopped reporting). */
  readonly state: ServerRuntime['state'] | 'down';
  readonly active: number;
  readonly decided: number;
  /** Concurrent connections (configured) or new connections/s (estimated); null: no limit. */
  readonly capacity: number | null;
  /** Whether the capacity is estimated from the agent's load reports. */
  readonly estimated: boolean;
  /** New connections/s sent to it recently (estimated mode). */
  readonly rate: number;
}

export interface FrontServiceStatus {
  readonly name: string;
  readonly overflowed: number;
  readonly servers: readonly FrontServerStatus[];
  readonly overflow: readonly { readonly cluster: string; readonly decided: number; readonly freeCapacity: number }[];
}

/** The checkpoints (src/shaping/): the held pool, the engine's counts, each checkpoint. */
export type FrontShapingStatus = {
  readonly heldNow: number;
  readonly maxHeld: number;
  readonly checkpoints: readonly CheckpointStatus[];
} & Readonly<Shaper['counts']>;

export interface FrontStatus {
  readonly cluster: string;
  readonly uptimeSeconds: number;
  /** The engine's counters (malformed packets are counted by parse status in `malformed`). */
  readonly counters: Readonly<Omit<EngineCounters, 'malformed'>>;
  /** Malformed packets by parse status name, the statuses seen only. */
  readonly malformed: Readonly<Record<string, number>>;
  readonly records: { readonly active: number; readonly recycled: number } & Readonly<ConnectionTable['counts']>;
  readonly admin: { readonly handled: number; readonly rejected: number };
  /** The periodic check of our rules (rules-health.ts): checks, repairs, failures. */
  readonly rules: RulesHealthStatus;
  /** Packets (and bytes) to a VIP that got no DNAT decision, dropped by the kernel's VIP guard: as last read by the rule check. */
  readonly vipGuard: GuardCount;
  /** The daemon-down fallback map's writer. */
  readonly fallback: FallbackWriterStatus;
  /** The NFQUEUE's counters, while it is bound. */
  readonly queue?: Readonly<QueueStats> | undefined;
  /** The NFLOG group's counters, while it is bound. */
  readonly log?: Readonly<LogStats> | undefined;
  /** With checkpoints configured. */
  readonly shaping?: FrontShapingStatus;
  /** With a control section. */
  readonly control?: FrontControlStatus;
  /** While the gatekeeper (distributed throttling) runs. */
  readonly throttle?: GatekeeperStatus;
  /** With an admission section. */
  readonly admission?: AdmissionStatus | undefined;
  readonly services: readonly FrontServiceStatus[];
}
