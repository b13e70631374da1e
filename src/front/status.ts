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
import type { ConntrackEventsStats } from '../conntrack/events.ts';
import type { LogStats } from '../nflog/log.ts';
import type { FlowEnds } from './flow-ends.ts';
import type { QueueStats } from '../nfqueue/queue.ts';
import type { CheckpointStatus, Shaper } from '../shaping/shaper.ts';
import type { GatekeeperStatus } from '../throttle/gatekeeper.ts';
import type { AdmissionStatus } from './admission.ts';
import type { ConnectionTable } from './connections.ts';
import type { FrontControlStatus } from './control.ts';
import type { RulesHealthStatus } from './rules-health.ts';
import type { FallbackWriterStatus } from './fallback.ts';
import type { KernelScheduleStatus } from './kernel-schedule.ts';
import type { ShedReason } from './shed.ts';
import type { SynproxyAutoStatus } from './synproxy-auto.ts';
import type { GuardCount } from './vip-guard.ts';
import type { TableCountsStatus } from './table-counters.ts';
import type { EngineCounters } from './engine.ts';
import type { ServerRuntime } from './service.ts';
import type { ServerCheckStatus } from './health/checker.ts';
import type { AgentHealth, CheckState, HealthState } from './health/server-health.ts';
import type { OverridesStatus } from './override-store.ts';
import type { Failover, HaRole } from './ha/role.ts';
import type { SyncState } from './ha/sync-state.ts';
import type { ServerOverrideStatus } from './overrides.ts';

/** A server's health (src/front/health/server-health.ts): the combined state and its sources. */
export interface FrontServerHealthStatus {
  /** The combined state: only `up` takes new connections. */
  readonly state: HealthState;
  /** Which source decided it, and what it said. */
  readonly reason: string;
  /** Seconds since the combined state last changed (since start if never). */
  readonly sinceSeconds: number;
  readonly transitions: number;
  /** The front node's check after rise/fall ('off': kind none) and its last reason. */
  readonly check: CheckState;
  readonly checkReason: string;
  /** The agent's own report ('none': no report with health yet). */
  readonly agent: AgentHealth | 'none';
  readonly agentReason: string;
  /** The agent stopped reporting. */
  readonly silent: boolean;
  /** Slow start: the share of its normal traffic it gets now (1: none). */
  readonly share: number;
  /** The active check's counters, when the service has one. */
  readonly checks?: ServerCheckStatus | undefined;
}

export interface FrontServerStatus {
  readonly name: string;
  /** The configured or admin-set state, or down (its health is down or maint: a check failed, its agent says so, or it stopped reporting). */
  readonly state: ServerRuntime['state'] | 'down';
  readonly active: number;
  readonly decided: number;
  /** Connections it refused since start (its reset answered the SYN; the passive check's input). */
  readonly refused: number;
  /** Retransmitted SYNs to it it had not answered, since start (the passive check's other input). */
  readonly unanswered: number;
  /** Concurrent connections (configured) or new connections/s (estimated); null: no limit. */
  readonly capacity: number | null;
  /** Whether the capacity is estimated from the agent's load reports. */
  readonly estimated: boolean;
  /** New connections/s sent to it recently (estimated mode). */
  readonly rate: number;
  /** Its address and port on the LAN. */
  readonly address: string;
  readonly port: number;
  readonly weight: number;
  /** The configured or ctl-set state (active, drain, disabled). */
  readonly admin: ServerRuntime['state'];
  /** Its combined health (health/server-health.ts), its sources and why (absent from daemons older than health checks). */
  readonly health?: FrontServerHealthStatus;
  /** New connections/s decided for it over the rate window (rates.ts), as ipvsadm's CPS. */
  readonly cps: number;
  /** How a ctl override differs from the file (null: as the file says). */
  readonly override: ServerOverrideStatus | null;
}

export interface FrontServiceStatus {
  readonly name: string;
  readonly vip: string;
  readonly port: number;
  readonly protocol: 'tcp' | 'udp';
  readonly method: string;
  /** New connections/s to the service (its servers' and overflow) over the rate window. */
  readonly cps: number;
  /** Servers of the file that `sluice ctl remove` took out (overrides). */
  readonly removed: readonly string[];
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

/** Health checks and transitions over the whole node. */
export interface FrontHealthStatus {
  /** Transitions since start, by the state entered. */
  readonly transitions: Readonly<Record<HealthState, number>>;
  /** Check results since start, by outcome. */
  readonly outcomes: Readonly<Record<string, number>>;
  readonly inFlight: number;
  readonly peakInFlight: number;
  readonly maxInFlight: number;
  /** Checks due while the previous one of the same server had not ended (skipped). */
  readonly skipped: number;
  readonly targets: number;
  /** Times the usable set changed (one cluster_load each). */
  readonly usableChanges: number;
  /** Selector rebuilds (services whose usable set changed; at most one round per 100 ms). */
  readonly selectorRebuilds: number;
  /** Servers gone down whose unanswerable flows were expired (runs, failures) and the flows deleted or already gone (flow-expiry.ts). */
  readonly flowExpiry: { readonly runs: number; readonly failures: number; readonly deleted: number; readonly gone: number };
}

/** This node's place in a front-node pair (src/front/ha/); role 'single' and no peer without `ha`. */
export interface FrontHaStatus {
  /** This node's name (the config's `node`, else the cluster's). */
  readonly node: string;
  readonly role: HaRole;
  /** Why it has this role (keepalived's notify, or the start). */
  readonly reason: string;
  /** ISO time of the last role change (the start if none). */
  readonly since: string;
  /** Role changes since start, by the role entered. */
  readonly transitions: Readonly<Record<HaRole, number>>;
  /** Notify commands received (repeats included). */
  readonly notifies: number;
  /** Whether this host held the uplink virtual address at the last check (null: not checked, no pair). */
  readonly holdsUplinkVirtualAddress: boolean | null;
  /** Role and address disagree now (longer than 3 advert intervals plus 5 s for the notify hook). */
  readonly mismatch: boolean;
  readonly mismatches: number;
  readonly peer: { readonly name: string; readonly uplinkAddress: string; readonly lanAddress: string; readonly syncAddress: string } | null;
  readonly virtual: { readonly uplink: string; readonly lan: string } | null;
  /** conntrackd's figures as last read ('off' without a pair). */
  readonly sync: SyncState;
  /** The last time this node became master from another role (null: never since start). */
  readonly lastFailover: Failover | null;
}

export interface FrontStatus {
  readonly cluster: string;
  /** Absent from daemons older than front-node pairs. */
  readonly ha?: FrontHaStatus;
  readonly uptimeSeconds: number;
  /** The engine's counters (malformed packets are counted by parse status in `malformed`). */
  readonly counters: Readonly<Omit<EngineCounters, 'malformed'>>;
  /** Malformed packets by parse status name, the statuses seen only. */
  readonly malformed: Readonly<Record<string, number>>;
  /**
   * adopted: records built from the kernel's flows at this start (a restart
   * picks up the connections established before it); corrected: adopted
   * records moved to the server the kernel NATs their flow to.
   */
  readonly records: { readonly active: number; readonly recycled: number; readonly adopted: number; readonly corrected: number } & Readonly<ConnectionTable['counts']>;
  readonly admin: { readonly handled: number; readonly rejected: number };
  /** The periodic check of our rules (rules-health.ts): checks, repairs, failures. */
  readonly rules: RulesHealthStatus;
  /** Packets (and bytes) to a VIP that got no DNAT decision, dropped by the kernel's VIP guard: as last read by the rule check. */
  readonly vipGuard: GuardCount;
  /** The same for IPv6 VIPs (`table ip6 sluice`'s own guard counter); zero on an IPv4-only node. */
  readonly vipGuard6: GuardCount;
  /** The kernel's fallback flows and stray LAN drops, running totals per family (table-counters.ts). */
  readonly kernelCounts: TableCountsStatus;
  /** The daemon-down fallback map's writer. */
  readonly fallback: FallbackWriterStatus;
  /** The kernel SYN schedule's writer (kernel-schedule.ts): services on it, writes, elements. */
  readonly kernelSchedule: KernelScheduleStatus;
  /** What the node shed, by reason (shed.ts). */
  readonly shed: Readonly<Record<ShedReason, number>>;
  /** SYN cookies per capable service (synproxy-auto.ts): mode, engaged now, SYN rate, transitions. */
  readonly synproxy?: SynproxyAutoStatus;
  /** The NFQUEUE's counters, while it is bound. */
  readonly queue?: Readonly<QueueStats> | undefined;
  /** The NFLOG group's counters, while it is bound. */
  readonly log?: Readonly<LogStats> | undefined;
  /**
   * Conntrack destroy events (flow-ends.ts): the socket's counters (absent:
   * events unavailable), the events by outcome (freed: a record freed), the
   * resyncs by reason, and the adopted records only a resync can free.
   */
  readonly flowEnds?: Readonly<FlowEnds['counts']> & {
    readonly events: Readonly<ConntrackEventsStats> | undefined;
    readonly resyncs: Readonly<FlowEnds['resyncs']>;
    /** Times a resync held its read back for backlogged events. */
    readonly resyncYields: number;
    readonly legacyRecords: number;
    /** Periods (reconcileSeconds) between legacy resyncs now (1..16: legacy-backoff.ts), and the periods skipped so. */
    readonly legacyResyncPeriods: number;
    readonly legacyResyncsSkipped: number;
  };
  /** With checkpoints configured. */
  readonly shaping?: FrontShapingStatus;
  /** With a control section. */
  readonly control?: FrontControlStatus;
  /** While the gatekeeper (distributed throttling) runs. */
  readonly throttle?: GatekeeperStatus;
  /** With an admission section. */
  readonly admission?: AdmissionStatus | undefined;
  /** The ctl overrides and their state file. */
  readonly overrides: OverridesStatus;
  /** The window of `cps` (seconds). */
  readonly rateWindowSeconds: number;
  /** Absent from daemons older than health checks. */
  readonly health?: FrontHealthStatus;
  readonly services: readonly FrontServiceStatus[];
}
