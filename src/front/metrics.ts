/**
 * sluice_front_*: the front node's metrics, read at scrape time from the
 * engine's counters, the services' per-server state, the connection table,
 * the queue (ours and the kernel's view), the FIN/RST log, the control plane and the RTT
 * prober. Nothing here runs on the packet path (src/metrics/collect.ts).
 *
 * Labels: service and server names (the config's, at most 31 x 63, the mark layout's limits),
 * overflow and peer cluster names, checkpoint names (unique per front
 * node, at most 32 per list), drop and reject reasons, parse statuses,
 * event and error kinds: all bounded. Never a client address (nor any
 * stick-table key).
 */
import type { Registry } from 'prom-client';
import type { ConntrackEventsStats } from '../conntrack/events.ts';
import type { LogStats } from '../nflog/log.ts';
import type { FlowEnds } from './flow-ends.ts';
import type { FlowExpiry } from './flow-expiry.ts';
import type { QueueStats } from '../nfqueue/queue.ts';
import { parseStatusName } from '../packet/ipv4.ts';
import type { FrontConfig } from './config.ts';
import type { ConnectionTable } from './connections.ts';
import type { FrontControl } from './control.ts';
import type { FrontEngine } from './engine.ts';
import { clusterLoadOf } from './receive_server_load.ts';
import { AGENT_HEALTH } from './health/server-health.ts';
import type { RulesHealthStatus } from './rules-health.ts';
import type { OverridesStatus } from './override-store.ts';
import type { OpsServer } from '../http/ops_server.ts';
import { LEVEL_NAMES, type Checkpoint } from '../shaping/checkpoint.ts';
import type { Shaper } from '../shaping/shaper.ts';
import type { Gatekeeper } from '../throttle/gatekeeper.ts';
import { byKey, counterFrom, counterOf, gaugeFrom, gaugeOf, type Labels, type Sample } from '../metrics/collect.ts';
import { registerControlMetrics } from '../metrics/control.ts';
import { BucketHistogram } from '../metrics/histogram.ts';
import { registerHttpMetrics } from '../metrics/http.ts';
import type { KernelQueueStats } from '../metrics/kernel_queue.ts';
import type { HealthChecker } from './health/checker.ts';
import { CHECK_OUTCOMES } from './health/result.ts';
import { HEALTH_STATES, type HealthState } from './health/server-health.ts';
import type { FallbackWriterStatus } from './fallback.ts';
import type { KernelScheduleStatus } from './kernel-schedule.ts';
import { SHED_REASONS, type ShedReason } from './shed.ts';
import type { SynproxyAutoStatus } from './synproxy-auto.ts';
import type { LoopTurns } from './loop-turns.ts';
import type { GuardCount } from './vip-guard.ts';
import type { TableCountsStatus } from './table-counters.ts';
import { HA_ROLES, type HaRoleMachine } from './ha/role.ts';
import type { SyncFigures, SyncStateReader } from './ha/sync-state.ts';

/** What the front daemon exposes to its metrics (FrontDaemon implements it). */
export interface FrontMetricsSource {
  readonly config: Readonly<FrontConfig>;
  readonly engine: FrontEngine;
  readonly table: ConnectionTable;
  queueStats(): QueueStats | undefined;
  logStats(): LogStats | undefined;
  /** Conntrack destroy events (flow-ends.ts); absent in unit tests. */
  readonly flowEnds?: FlowEnds;
  /** Flows of servers gone down deleted from conntrack (flow-expiry.ts). */
  readonly flowExpiry?: FlowExpiry;
  ctEventStats?(): ConntrackEventsStats | undefined;
  kernelQueue(): KernelQueueStats | undefined;
  adminCounts(): { handled: number; rejected: number };
  /** The periodic check of our rules (rules-health.ts). */
  rulesHealth(): RulesHealthStatus;
  /** The VIP guard's kernel drop counter, as last read by the rule check (vip-guard.ts). */
  vipGuardCount(): GuardCount;
  /** The same for `table ip6 sluice` (zero without IPv6 services). */
  vipGuardCount6(): GuardCount;
  /** The kernel's fallback flows and stray LAN drops (table-counters.ts). */
  tableCounts(): TableCountsStatus;
  /** The daemon-down fallback map's writer (fallback.ts). */
  fallbackStatus(): FallbackWriterStatus;
  /** The kernel SYN schedule's writer (kernel-schedule.ts). */
  scheduleStatus(): KernelScheduleStatus;
  /** What the node shed so far, by reason (shed.ts). */
  shed(): Readonly<Record<ShedReason, number>>;
  /** SYN cookies per capable service (synproxy-auto.ts); absent: unit tests. */
  synproxyStatus?(): SynproxyAutoStatus;
  control(): FrontControl | undefined;
  ops(): OpsServer | undefined;
  /** The gatekeeper (distributed throttling) while it runs. */
  gatekeeper(): Gatekeeper | undefined;
  /** The `sluice ctl` overrides and their state file (override-store.ts). */
  readonly overrides: { status(): OverridesStatus };
  /** Records adopted from the kernel's flows at start, and those corrected to the kernel's server (daemon.ts). */
  readonly adopted?: number;
  readonly corrected?: number;
  /** The active health checks and the transitions counted by the daemon (absent: no checks, e.g. unit tests). */
  readonly health?: HealthChecker;
  readonly healthTransitions?: Readonly<Record<HealthState, number>>;
  /** The role in a front-node pair and conntrackd's sync figures (absent: unit tests). */
  readonly ha?: HaRoleMachine;
  readonly sync?: SyncStateReader;
  /** The event loop's per-turn CPU time (loop-turns.ts); absent: unit tests, or the addon refused it. */
  readonly loopTurns?: LoopTurns | undefined;
}

/** Peer clusters exposed at most (peers are whoever reports cluster_load; keep the series bounded). */
const MAX_PEER_CLUSTERS = 64;

type SL = 'service' | 'server';

export function registerFrontMetrics(registry: Registry, src: FrontMetricsSource): void {
  const turns = src.loopTurns;
  if (turns !== undefined) {
    // Beside nodejs_eventloop_lag_max_seconds (wall clock, scheduler waits included): the daemon's own longest turn.
    gaugeOf(registry, 'sluice_front_loop_turn_cpu_max_seconds', "Longest event-loop turn since the last scrape, in the loop thread's CPU time (excludes waiting for a CPU: compare nodejs_eventloop_lag_max_seconds).", () => turns.takeMaxSeconds());
    counterOf(registry, 'sluice_front_loop_turns_total', 'Event-loop turns.', () => turns.turns);
  }
  const c = (): FrontEngine['counters'] => src.engine.counters;
  const services = (): FrontEngine['services'] => src.engine.services;
  const perServer = (f: (s: FrontEngine['services'][number]['servers'][number]) => number): Sample<SL>[] =>
    services().flatMap((svc) => svc.servers.map((b) => [{ service: svc.name, server: b.id }, f(b)] as const));

  gaugeFrom(registry, 'sluice_front_info', 'This front node: its cluster (value 1).', ['cluster'], () => [[{ cluster: src.config.cluster }, 1]]);

  // ctl changes kept over the file (connections/s per server: rate(sluice_front_connections_decided_total)).
  gaugeOf(registry, 'sluice_front_ctl_overrides', 'Servers whose `sluice ctl` override (drain, weight, capacity, add, remove) is in force over the configuration file.', () => src.overrides.status().count);
  counterOf(registry, 'sluice_front_ctl_overrides_stale_total', 'ctl overrides (or fields of one) dropped at a start or reload because the configuration file changed what they were made against.', () => src.overrides.status().staleTotal);
  counterOf(registry, 'sluice_front_state_file_errors_total', 'State file reads refused (corrupt: overrides ignored) and writes failed (the ctl change refused).', () => src.overrides.status().stateFileErrors);

  // Packets and decisions (FrontEngine counters).
  counterOf(registry, 'sluice_front_packets_total', 'Packets the engine examined (connection setup and teardown only).', () => c().packets);
  counterOf(registry, 'sluice_front_syn_packets_total', 'Client SYNs to a TCP service.', () => c().syn);
  counterFrom(registry, 'sluice_front_shed_total', 'What the node shed, by reason: dropped (no_target, malformed, no_record, teardown_no_record, unexpected, checkpoint), decided but not recorded (table_full), lost by a socket (queue_lost, log_lost). SYN cookies: /proc/net/stat/synproxy.', ['reason'], () => {
    const s = src.shed();
    return SHED_REASONS.map((reason) => [{ reason }, s[reason]] as const);
  });
  counterOf(registry, 'sluice_front_kernel_decided_total', 'New connections the kernel decided from the schedule (no SYN waited for the daemon), recorded from their log copies; also in the decided totals.', () => c().kernelDecided);
  counterOf(registry, 'sluice_front_schedule_writes_total', 'Rewrites of the kernel SYN schedule after the servers\' state changed materially.', () => src.scheduleStatus().writes);
  counterOf(registry, 'sluice_front_schedule_whole_rewrites_total', 'Whole rewrites of the kernel SYN schedule (map flushed and refilled) because a write raced with a rule install and what the kernel held was unknown.', () => src.scheduleStatus().rewrites);
  counterOf(registry, 'sluice_front_schedule_write_failures_total', 'Rewrites of the kernel SYN schedule that nft refused (retried each second; SYNs follow the previous schedule).', () => src.scheduleStatus().writeFailures);
  const sp = (): SynproxyAutoStatus['services'] => src.synproxyStatus?.().services ?? [];
  gaugeFrom(registry, 'sluice_front_synproxy_engaged', 'Whether SYN cookies answer this service\'s SYNs now (1) or not (0): mode on always, auto while under a SYN flood.', ['service'], () => sp().map((x) => [{ service: x.service }, x.engaged ? 1 : 0]));
  counterFrom(registry, 'sluice_front_synproxy_transitions_total', 'SYN cookies engaged (to=engaged) or disengaged (to=disengaged) by the auto mode, by service.', ['service', 'to'], () => sp().flatMap((x) => [[{ service: x.service, to: 'engaged' }, x.engagedTotal], [{ service: x.service, to: 'disengaged' }, x.disengagedTotal]] as const));
  gaugeFrom(registry, 'sluice_front_syn_rate', 'Client SYNs per second to this service at the last one-second reading (kernel counts, cookies engaged or not).', ['service'], () => sp().map((x) => [{ service: x.service }, x.synRate]));
  counterOf(registry, 'sluice_front_synproxy_read_failures_total', 'Readings of the kernel\'s SYN counts that failed (SYN cookies stay as they are).', () => src.synproxyStatus?.().readFailures ?? 0);
  counterOf(registry, 'sluice_front_synproxy_write_failures_total', 'Writes of the engaged SYN cookie sets that nft refused (retried at the next reading).', () => src.synproxyStatus?.().writeFailures ?? 0);
  gaugeOf(registry, 'sluice_front_schedule_elements', 'Slots of the kernel SYN schedule that hold a target.', () => src.scheduleStatus().elements);
  counterOf(registry, 'sluice_front_syn_retransmits_total', 'Retransmitted SYNs of a recorded connection (same server again).', () => c().synRetransmits);
  counterOf(registry, 'sluice_front_syn_unanswered_total', 'Retransmitted SYNs whose flow had seen no reply from its server (copied by the rules for the passive check), whether or not a record named the server.', () => c().synUnanswered);
  counterOf(registry, 'sluice_front_udp_flows_total', 'First datagrams of UDP flows to a UDP service.', () => c().udpFlows);
  counterFrom(registry, 'sluice_front_connections_decided_total', 'New connections decided for a server of this cluster, by service, server and the service\'s method.', ['service', 'server', 'method'], () => {
    const out: Sample<'service' | 'server' | 'method'>[] = [];
    const cfg = src.config.services;
    for (const svc of services()) {
      const method = cfg.find((s) => s.name === svc.name)?.method ?? 'unknown';
      for (const b of svc.servers) out.push([{ service: svc.name, server: b.id, method }, b.decided]);
    }
    return out;
  });
  counterFrom(registry, 'sluice_front_connections_overflowed_total', 'New connections sent to another cluster (every server here full), by service and cluster.', ['service', 'cluster'], () =>
    services().flatMap((svc) => svc.overflow.map((o) => [{ service: svc.name, cluster: o.cluster }, o.decided] as const)),
  );
  counterOf(registry, 'sluice_front_connections_untracked_total', 'Connections decided without a record (connection table full).', () => c().untracked);
  counterOf(registry, 'sluice_front_connections_resumed_total', 'Packets of recorded connections the kernel had no flow for, sent to their server again.', () => c().resumed);
  counterOf(registry, 'sluice_front_log_records_total', 'FIN/RST copies read from the NFLOG group (not in sluice_front_packets_total).', () => c().logged);
  counterOf(registry, 'sluice_front_log_malformed_total', 'FIN/RST copies the parser refused (the packets themselves were forwarded).', () => c().loggedMalformed);
  counterFrom(registry, 'sluice_front_connections_finished_total', 'Connection records finished, by who ended them (client FIN/RST or server RST).', ['by'], () => [
    [{ by: 'client' }, c().finishes],
    [{ by: 'server_reset' }, c().serverResets],
  ]);
  counterFrom(registry, 'sluice_front_packets_dropped_total', 'Packets dropped by the engine, by reason.', ['reason'], () => {
    let malformed = 0;
    for (const n of c().malformed) malformed += n;
    return [
      [{ reason: 'malformed' }, malformed],
      [{ reason: 'no_target' }, c().noTarget],
      [{ reason: 'no_record' }, c().noRecord],
      [{ reason: 'teardown_no_record' }, c().teardownNoRecord],
      [{ reason: 'unexpected' }, c().unexpectedDropped],
    ];
  });
  counterFrom(registry, 'sluice_front_malformed_packets_total', 'Malformed packets (dropped), by parse status.', ['status'], () =>
    parseStatusName.flatMap((name, i) => (i === 0 ? [] : [[{ status: name }, c().malformed[i] ?? 0] as const])),
  );
  counterOf(registry, 'sluice_front_unexpected_packets_total', 'Packets the rules should not have queued (accepted or dropped).', () => c().unexpected);

  // Servers: capacity, utilization, active connections.
  gaugeFrom(registry, 'sluice_front_server_active_connections', 'Connections recorded active per server.', ['service', 'server'], () => perServer((b) => b.active));
  gaugeFrom(registry, 'sluice_front_server_capacity', 'Server capacity: configured concurrent connections (unit=connections) or estimated new connections/s from agent reports (unit=connections_per_second). Absent: no limit.', ['service', 'server', 'unit'], () =>
    services().flatMap((svc) => svc.servers.map((b) => [{ service: svc.name, server: b.id, unit: b.estimated ? 'connections_per_second' : 'connections' }, b.capacity] as const)),
  );
  gaugeFrom(registry, 'sluice_front_server_utilization', 'Server load over capacity (active connections, or new connections/s when the capacity is estimated); absent without a capacity.', ['service', 'server'], () =>
    perServer((b) => (Number.isFinite(b.capacity) && b.capacity > 0 ? b.load / b.capacity : NaN)),
  );
  gaugeFrom(registry, 'sluice_front_server_rate', 'New connections per second sent to the server recently (with agent reports).', ['service', 'server'], () => perServer((b) => b.rate));
  gaugeFrom(registry, 'sluice_front_server_weight', 'Server weight (configured or set by the admin socket).', ['service', 'server'], () => perServer((b) => b.weight));
  gaugeFrom(registry, 'sluice_front_server_state', 'Server state, one series per state with value 1 for the current one (down: its health is down or maint, see sluice_front_server_health).', ['service', 'server', 'state'], () =>
    services().flatMap((svc) =>
      svc.servers.flatMap((b) => {
        const now = b.down || b.health.state === 'down' || b.health.state === 'maint' ? 'down' : b.state;
        return (['active', 'drain', 'disabled', 'down'] as const).map((st) => [{ service: svc.name, server: b.id, state: st }, st === now ? 1 : 0] as const);
      }),
    ),
  );
  // Health (src/front/health/): combined state, transitions, checks.
  gaugeFrom(registry, 'sluice_front_server_health', 'Server health combined from the front node\'s check and the agent, one series per state with value 1 for the current one; only up takes new connections.', ['service', 'server', 'state'], () =>
    services().flatMap((svc) => svc.servers.flatMap((b) => HEALTH_STATES.map((st) => [{ service: svc.name, server: b.id, state: st }, st === b.health.state ? 1 : 0] as const))),
  );
  gaugeFrom(registry, 'sluice_front_server_slow_start_share', 'Slow start: the share of its normal traffic the server gets now (1: not ramping).', ['service', 'server'], () => perServer((b) => b.share));
  counterFrom(registry, 'sluice_front_health_transitions_total', 'Server health transitions, by the state entered.', ['to'], () => HEALTH_STATES.map((st) => [{ to: st }, src.healthTransitions?.[st] ?? 0] as const));
  counterFrom(registry, 'sluice_front_health_checks_total', 'Active health check results, by outcome (ok, refused, timeout, status, body, error).', ['outcome'], () =>
    CHECK_OUTCOMES.map((o) => [{ outcome: o }, src.health?.outcomes[o] ?? 0] as const),
  );
  gaugeOf(registry, 'sluice_front_health_checks_in_flight', 'Active health checks running now (bounded by the checker\'s limit).', () => src.health?.scheduler.inFlight ?? 0);
  counterFrom(registry, 'sluice_front_server_refused_total', 'Connections the server refused (its reset answered the client\'s SYN), seen on the data path: the passive check\'s input (health.refusedLimit).', ['service', 'server'], () => perServer((b) => b.refused));
  counterFrom(registry, 'sluice_front_server_unanswered_total', 'Retransmitted SYNs to the server that it had not answered (no reply in the flow), seen on the data path: the passive check\'s input (health.unansweredLimit).', ['service', 'server'], () => perServer((b) => b.unanswered));
  counterOf(registry, 'sluice_front_health_unanswered_downs_total', 'Servers the passive check took down: health.unansweredLimit unanswered retransmitted SYNs since their last passed check.', () => src.health?.unansweredDowns ?? 0);
  counterOf(registry, 'sluice_front_health_refused_downs_total', 'Servers the passive check took down: health.refusedLimit refused connections since their last passed check.', () => src.health?.refusedDowns ?? 0);
  counterOf(registry, 'sluice_front_health_checks_skipped_total', 'Checks due while the previous check of the same server had not ended (skipped, not stacked).', () => src.health?.scheduler.skipped ?? 0);

  const cluster = (): ReturnType<typeof clusterLoadOf> => clusterLoadOf(services());
  gaugeOf(registry, 'sluice_front_cluster_capacity', 'Sum of the usable servers\' capacities (as reported to DNS).', () => cluster().capacity);
  gaugeOf(registry, 'sluice_front_cluster_load', 'Sum of the usable servers\' loads (as reported to DNS).', () => cluster().load);
  gaugeOf(registry, 'sluice_front_cluster_available', 'Capacity minus load, floored at 0 (as reported to DNS).', () => cluster().available);
  gaugeFrom(registry, 'sluice_front_cluster_servers', 'Servers of this cluster, by whether they take new connections.', ['usable'], () => {
    const k = cluster();
    return [
      [{ usable: 'true' }, k.serversUp],
      [{ usable: 'false' }, k.serversTotal - k.serversUp],
    ];
  });
  gaugeFrom(registry, 'sluice_front_overflow_free_capacity', 'Free capacity of each overflow cluster, as last configured or reported.', ['service', 'cluster'], () =>
    services().flatMap((svc) => svc.overflow.map((o) => [{ service: svc.name, cluster: o.cluster }, o.freeCapacity] as const)),
  );

  // Connection table.
  gaugeFrom(registry, 'sluice_front_connection_records', 'Connection records, by state (recycled: finished, kept for late packets).', ['state'], () => [
    [{ state: 'active' }, src.table.active],
    [{ state: 'recycled' }, src.table.recycled],
  ]);
  counterFrom(registry, 'sluice_front_connection_records_adopted_total', 'Records built from the kernel\'s flows at start (a restart adopts the connections established before it), and adopted records corrected to the server the kernel NATs the flow to.', ['how'], () => [
    [{ how: 'adopted' }, src.adopted ?? 0],
    [{ how: 'corrected' }, src.corrected ?? 0],
  ]);
  gaugeOf(registry, 'sluice_front_connection_records_max', 'Connection records at most (connections.max).', () => src.table.capacity);
  counterFrom(registry, 'sluice_front_connection_record_events_total', 'Connection table events (full: no free record, the connection went untracked).', ['event'], () => byKey('event', src.table.counts));

  // The NFQUEUE: our side (native counters) and the kernel's.
  const q = (): QueueStats | undefined => src.queueStats();
  counterOf(registry, 'sluice_front_queue_packets_total', 'Packets received from the NFQUEUE.', () => q()?.packets ?? 0);
  counterOf(registry, 'sluice_front_queue_batches_total', 'Batches received from the NFQUEUE.', () => q()?.batches ?? 0);
  counterOf(registry, 'sluice_front_queue_verdicts_total', 'Verdicts sent to the kernel.', () => q()?.verdicts ?? 0);
  gaugeOf(registry, 'sluice_front_queue_max_batch', 'Largest batch seen.', () => q()?.maxBatch ?? 0);
  counterOf(registry, 'sluice_front_queue_lost_packets_total', 'Packets the kernel numbered for our queue that never reached us (the socket buffer was full): not queued by the kernel, accepted unsteered (fail-open); they owe no verdict.', () => q()?.lost ?? 0);
  counterFrom(registry, 'sluice_front_queue_errors_total', 'NFQUEUE errors by kind (overruns: the socket buffer overflowed and packets were lost to us).', ['kind'], () => {
    const s = q();
    if (!s) return [];
    return [
      [{ kind: 'send' }, s.sendErrors],
      [{ kind: 'kernel' }, s.kernelErrors],
      [{ kind: 'overrun' }, s.overruns],
      [{ kind: 'bad_message' }, s.badMessages],
      [{ kind: 'recv' }, s.recvErrors],
      [{ kind: 'truncated_read' }, s.truncatedReads],
      [{ kind: 'callback' }, s.callbackErrors],
    ];
  });
  // The NFLOG group (FIN/RST copies): lost records stay active until reconcile frees them.
  const l = (): LogStats | undefined => src.logStats();
  counterOf(registry, 'sluice_front_log_batches_total', 'Batches of FIN/RST copies received from the NFLOG group.', () => l()?.batches ?? 0);
  counterOf(registry, 'sluice_front_log_datagrams_total', 'Datagrams received from the NFLOG group (the kernel batches records into them).', () => l()?.datagrams ?? 0);
  counterOf(registry, 'sluice_front_log_lost_records_total', 'FIN/RST copies lost before we read them (gaps in their sequence numbers); their records are freed by reconcile.', () => l()?.lost ?? 0);
  counterFrom(registry, 'sluice_front_log_errors_total', 'NFLOG errors by kind (overrun: the socket buffer overflowed, ENOBUFS; the records are counted in lost_records).', ['kind'], () => {
    const s = l();
    if (!s) return [];
    return [
      [{ kind: 'overrun' }, s.overruns],
      [{ kind: 'bad_message' }, s.badMessages],
      [{ kind: 'recv' }, s.recvErrors],
      [{ kind: 'truncated_read' }, s.truncatedReads],
      [{ kind: 'callback' }, s.callbackErrors],
    ];
  });
  // Conntrack destroy events: a record is freed when the kernel destroys its flow (flow-ends.ts).
  const ev = (): ConntrackEventsStats | undefined => src.ctEventStats?.();
  counterOf(registry, 'sluice_front_ct_events_total', 'Conntrack destroy events received (every flow of the namespace, ours or not).', () => ev()?.events ?? 0);
  counterFrom(registry, 'sluice_front_ct_event_outcomes_total', 'Conntrack destroy events by outcome: freed (a record was freed), no_record, stale (a port reuse: the previous flow\'s event), no_service, foreign (not our mark), other_family.', ['outcome'], () => {
    const f = src.flowEnds?.counts;
    if (!f) return [];
    return [
      [{ outcome: 'freed' }, f.freed],
      [{ outcome: 'no_record' }, f.noRecord],
      [{ outcome: 'stale' }, f.stale],
      [{ outcome: 'no_service' }, f.noService],
      [{ outcome: 'foreign' }, f.foreign],
      [{ outcome: 'other_family' }, f.otherFamily],
    ];
  });
  counterFrom(registry, 'sluice_front_ct_event_errors_total', 'Conntrack event socket errors by kind (overrun: the socket buffer overflowed, ENOBUFS: events were lost and a resync follows).', ['kind'], () => {
    const s = ev();
    if (!s) return [];
    return [
      [{ kind: 'overrun' }, s.overruns],
      [{ kind: 'bad_message' }, s.badMessages],
      [{ kind: 'recv' }, s.recvErrors],
      [{ kind: 'truncated_read' }, s.truncatedReads],
      [{ kind: 'callback' }, s.callbackErrors],
    ];
  });
  counterFrom(registry, 'sluice_front_resyncs_total', 'Full reads of the kernel\'s flow table to free records of ended flows, by reason: overrun (events lost), legacy (adopted records whose flows report no end remain), periodic (no conntrack events).', ['reason'], () => {
    const r = src.flowEnds?.resyncs;
    return r ? [[{ reason: 'overrun' }, r.overrun], [{ reason: 'legacy' }, r.legacy], [{ reason: 'periodic' }, r.periodic]] : [];
  });
  counterFrom(registry, 'sluice_front_flow_expiries_total', 'Expiries of the flows a server gone down cannot answer (unreplied TCP, UDP), by result: ok, or failed (logged with its cause).', ['result'], () => {
    const x = src.flowExpiry;
    return x ? [[{ result: 'ok' }, x.runs], [{ result: 'failed' }, x.failures]] : [];
  });
  counterFrom(registry, 'sluice_front_flows_expired_total', 'Flows of servers gone down deleted from conntrack so that their next packet is decided again, by outcome: deleted, or gone (ended before the delete).', ['outcome'], () => {
    const x = src.flowExpiry;
    return x ? [[{ outcome: 'deleted' }, x.deleted], [{ outcome: 'gone' }, x.gone]] : [];
  });
  counterOf(registry, 'sluice_front_resync_yields_total', 'Times a resync held its read of the kernel\'s flow table back because destroy events were waiting to be read (each wait at most 100 ms).', () => src.flowEnds?.resyncYields ?? 0);
  gaugeOf(registry, 'sluice_front_connection_records_legacy', 'Records adopted from the kernel\'s table whose flows may report no end (only a resync frees them).', () => src.table.legacy);
  gaugeOf(registry, 'sluice_front_legacy_resync_periods', 'Periods (connections.reconcileSeconds) between two legacy resyncs now: 1, doubling up to 16 while they free nothing the destroy events missed.', () => src.flowEnds?.legacyBackoff.periods ?? 1);
  // Labelled by queue number: absent (not 0) while the kernel shows no queue of ours.
  gaugeFrom(registry, 'sluice_front_kernel_queue_length', 'Packets waiting in the kernel for a verdict (/proc/net/netfilter/nfnetlink_queue).', ['queue'], () => {
    const k = src.kernelQueue();
    return k ? [[{ queue: String(src.config.queue) }, k.waiting]] : [];
  });
  counterFrom(registry, 'sluice_front_kernel_queue_dropped_total', 'Packets the kernel dropped at our queue: queue_full (without fail-open) or user (could not be delivered to us).', ['queue', 'reason'], () => {
    const k = src.kernelQueue();
    const queue = String(src.config.queue);
    return k
      ? [
          [{ queue, reason: 'queue_full' }, k.queueDropped],
          [{ queue, reason: 'user' }, k.userDropped],
        ]
      : [];
  });

  counterFrom(registry, 'sluice_front_admin_requests_total', 'Admin socket requests, by result.', ['result'], () => {
    const a = src.adminCounts();
    return [
      [{ result: 'handled' }, a.handled],
      [{ result: 'rejected' }, a.rejected],
    ];
  });

  // Our rules, read back every rules.checkSeconds (rules-health.ts).
  const rules = (): RulesHealthStatus => src.rulesHealth();
  counterFrom(registry, 'sluice_front_vip_guard_dropped_packets_total', 'Packets to a VIP that got no DNAT decision, dropped by the kernel\'s VIP guard (counter vip_guard_drops of nft table ip sluice, family ipv4, and ip6 sluice, family ipv6); read at each rule check.', ['family'], () => [
    [{ family: 'ipv4' }, src.vipGuardCount().packets],
    [{ family: 'ipv6' }, src.vipGuardCount6().packets],
  ]);
  counterFrom(registry, 'sluice_front_fallback_flows_total', 'New flows the kernel\'s fallback spread sent to a server with no daemon\'s verdict (nft counter fallback_flows; includes those counted before this start, while no daemon ran); read at each rule check.', ['family'], () => {
    const c = src.tableCounts().fallbackFlows;
    return [
      [{ family: 'ipv4' }, c.ipv4],
      [{ family: 'ipv6' }, c.ipv6],
    ];
  });
  counterFrom(registry, 'sluice_front_stray_lan_packets_dropped_total', 'TCP packets from the LAN with no flow (INVALID, or NEW without a SYN), dropped instead of forwarded un-NATed (nft counter stray_replies; seen on a pair\'s new master before its flows are committed); read at each rule check.', ['family'], () => {
    const c = src.tableCounts().strayReplies;
    return [
      [{ family: 'ipv4' }, c.ipv4],
      [{ family: 'ipv6' }, c.ipv6],
    ];
  });
  counterFrom(registry, 'sluice_front_vip_guard_dropped_bytes_total', 'Bytes of those packets, by family.', ['family'], () => [
    [{ family: 'ipv4' }, src.vipGuardCount().bytes],
    [{ family: 'ipv6' }, src.vipGuardCount6().bytes],
  ]);
  counterOf(registry, 'sluice_front_fallback_writes_total', 'Rewrites of the daemon-down fallback map after the usable servers changed.', () => src.fallbackStatus().writes);
  counterOf(registry, 'sluice_front_fallback_write_failures_total', 'Rewrites of the fallback map that nft refused (the next change or a rule repair writes it again).', () => src.fallbackStatus().writeFailures);
  gaugeOf(registry, 'sluice_front_fallback_usable_servers', 'Servers the daemon-down fallback spreads new connections over (usable when last written).', () => src.fallbackStatus().usableServers);
  counterOf(registry, 'sluice_front_rules_checks_total', 'Checks of our rules (rules.checkSeconds): read and compared, or found unchanged.', () => rules().checks);
  counterOf(registry, 'sluice_front_rules_checks_unchanged_total', 'Checks that read nothing: no nf_tables transaction was committed since a check found the rules intact.', () => rules().unchanged);
  counterOf(registry, 'sluice_front_rules_repaired_total', 'Checks that found our rules removed or changed by someone else and reinstalled them.', () => rules().repaired);
  counterOf(registry, 'sluice_front_rules_repair_failures_total', 'Reinstalls of our rules that failed (iptables refused); retried every check period.', () => rules().repairFailures);
  counterOf(registry, 'sluice_front_rules_check_failures_total', 'Checks that could not read our rules (iptables-save failed or timed out).', () => rules().checkFailures);

  registerHaMetrics(registry, src);
  registerShapingMetrics(registry, () => src.engine.shaper);
  registerThrottleMetrics(registry, () => src.gatekeeper());
  registerFrontControlMetrics(registry, () => src.control());
  registerControlMetrics(registry, () => src.control()?.node);
  registerHttpMetrics(registry, 'sluice_front', () => src.ops());
}

const AGENT_HEALTH_SERIES = [...AGENT_HEALTH, 'none'] as const;

/**
 * The front-node pair (src/front/ha/): the role (1 for the current one),
 * its changes, the role/address mismatches, and conntrackd's figures as
 * last read (every 5 s; absent while unknown, so a stale value never shows).
 */
function registerHaMetrics(registry: Registry, src: FrontMetricsSource): void {
  gaugeFrom(registry, 'sluice_front_ha_role', 'This node\'s role in a front-node pair: 1 for the current role (single without an ha section).', ['role'], () => {
    const now = src.ha?.role ?? 'single';
    return HA_ROLES.map((r) => [{ role: r }, r === now ? 1 : 0] as const);
  });
  counterFrom(registry, 'sluice_front_ha_transitions_total', 'Role changes since start, by the role entered (keepalived\'s notify hook, or the address found at start).', ['to'], () => HA_ROLES.filter((r) => r !== 'single').map((r) => [{ to: r }, src.ha?.transitions[r] ?? 0] as const));
  counterOf(registry, 'sluice_front_ha_role_mismatch_total', 'Times the role and the uplink virtual address disagreed for longer than 3 advert intervals plus 5 s for the notify hook (a hook missing or failed).', () => src.ha?.mismatches ?? 0);
  gaugeOf(registry, 'sluice_front_ha_sync_readable', '1 when the last `conntrackd -s` read gave figures; 0 when it failed (the reason is in status) or without a pair.', () => (src.sync?.state.state === 'ok' ? 1 : 0));
  const figures = (): SyncFigures | undefined => {
    const st = src.sync?.state;
    return st?.state === 'ok' ? st.figures : undefined;
  };
  gaugeFrom(registry, 'sluice_front_ha_sync_flows', 'Flows in conntrackd\'s caches: internal (this node\'s, replicated to the peer), external (the peer\'s, committed at a takeover).', ['cache'], () => {
    const f = figures();
    return f ? [[{ cache: 'internal' }, f.internal], [{ cache: 'external' }, f.external]] : [];
  });
  gaugeFrom(registry, 'sluice_front_ha_sync_packets', 'Sync packets conntrackd sent and received since it started (its own counter: a conntrackd restart resets it).', ['direction'], () => {
    const f = figures();
    return f ? [[{ direction: 'sent' }, f.packetsSent], [{ direction: 'received' }, f.packetsReceived]] : [];
  });
  gaugeFrom(registry, 'sluice_front_ha_sync_errors', 'Sync send and receive errors, and malformed and lost messages (lost ones FTFW resends), since conntrackd started.', ['kind'], () => {
    const f = figures();
    return f
      ? [
          [{ kind: 'send' }, f.sendErrors],
          [{ kind: 'receive' }, f.receiveErrors],
          [{ kind: 'malformed' }, f.malformed],
          [{ kind: 'lost' }, f.lost],
        ]
      : [];
  });
}

/** Agent reports, client-rate table, peer clusters and RTT probes (present with a control section). */
function registerFrontControlMetrics(registry: Registry, control: () => FrontControl | undefined): void {
  const est = (): NonNullable<FrontControl['estimator']> | undefined => control()?.estimator;
  const records = (f: (r: NonNullable<FrontControl['estimator']>['records'] extends Map<string, infer R> ? R : never) => number): Sample<'server'>[] =>
    [...(est()?.records.values() ?? [])].map((r) => [{ server: r.name }, f(r)] as const);
  counterFrom(registry, 'sluice_front_agent_reports_total', 'Load reports received from each server\'s agent.', ['server'], () => records((r) => r.reports));
  counterOf(registry, 'sluice_front_agent_reports_unknown_server_total', 'Load reports naming a server no service has.', () => est()?.unknownServer ?? 0);
  gaugeFrom(registry, 'sluice_front_agent_utilization', 'Utilization in each server\'s last load report (its agent\'s utilization source; 1 = full).', ['server'], () => records((r) => (r.reports > 0 ? r.utilization : NaN)));
  gaugeFrom(registry, 'sluice_front_agent_cpu', 'CPU share in each server\'s last load report.', ['server'], () => records((r) => (r.reports > 0 ? r.cpu : NaN)));
  gaugeFrom(registry, 'sluice_front_agent_health', 'The health each server\'s agent last reported (its own check and the operator\'s drain/maint), one series per state with value 1 for the current one; none: its reports carry no health (an older agent, or no report yet).', ['server', 'state'], () =>
    [...(est()?.records.values() ?? [])].flatMap((r) => AGENT_HEALTH_SERIES.map((st) => [{ server: r.name, state: st }, r.health === st ? 1 : 0] as const)),
  );

  gaugeOf(registry, 'sluice_front_client_rate_entries', 'Clients tracked for request rates (high-rate detection).', () => control()?.clients.clients.size ?? 0);
  counterFrom(registry, 'sluice_front_client_rate_events_total', 'Request-rate table events: dropped (table full), expired.', ['event'], () => {
    const t = control()?.clients;
    return t
      ? [
          [{ event: 'dropped' }, t.dropped],
          [{ event: 'expired' }, t.expired],
        ]
      : [];
  });

  gaugeFrom(registry, 'sluice_front_peer_cluster_available', 'Free capacity other clusters last reported (cluster_load).', ['cluster'], () =>
    [...(control()?.clusters.peers.values() ?? [])].slice(0, MAX_PEER_CLUSTERS).map((p) => [{ cluster: p.cluster }, p.available] as const),
  );

  const probe = (): NonNullable<FrontControl['prober']>['counters'] | undefined => control()?.prober?.counters;
  counterOf(registry, 'sluice_front_probe_requests_total', 'rtt_probe_request messages taken by the prober.', () => probe()?.requests ?? 0);
  counterOf(registry, 'sluice_front_probe_requests_ignored_total', 'rtt_probe_request messages ignored because probing is off.', () => control()?.probeCounts.ignoredRequests ?? 0);
  counterOf(registry, 'sluice_front_probe_requests_not_master_total', 'rtt_probe_request messages ignored because this node is the backup of a pair (the master probes).', () => control()?.probeCounts.notMaster ?? 0);
  counterFrom(registry, 'sluice_front_probe_targets_total', 'Probe targets: requested, deduped (already pending), cached (finished less than probe.dedupSeconds ago: its result is reported again, no probe), dropped (too many pending), finished.', ['outcome'], () => {
    const p = probe();
    return p
      ? [
          [{ outcome: 'requested' }, p.requested],
          [{ outcome: 'deduped' }, p.deduped],
          [{ outcome: 'cached' }, p.cached],
          [{ outcome: 'dropped' }, p.dropped],
          [{ outcome: 'finished' }, p.finished],
        ]
      : [];
  });
  counterFrom(registry, 'sluice_front_probe_echoes_total', 'Probes the prober sent (each may try several methods in turn: sluice_front_probe_method_probes_total), and their outcomes (replied, timed_out).', ['outcome'], () => {
    const p = probe();
    return p
      ? [
          [{ outcome: 'sent' }, p.echoesSent],
          [{ outcome: 'replied' }, p.replies],
          [{ outcome: 'timed_out' }, p.timeouts],
        ]
      : [];
  });
  counterFrom(registry, 'sluice_front_probe_results_total', 'Probe results: reported (published as rtt_results) or dropped (too many waiting).', ['outcome'], () => {
    const p = probe();
    return p
      ? [
          [{ outcome: 'reported' }, p.reported],
          [{ outcome: 'dropped' }, p.resultsDropped],
        ]
      : [];
  });
  gaugeFrom(registry, 'sluice_front_probe_cached_results', 'Finished probe results kept for probe.dedupSeconds (bounded by probe.maxTargets).', [], () => {
    const p = control()?.prober;
    return p ? [[{}, p.cachedResults]] : [];
  });
  counterOf(registry, 'sluice_front_probe_cache_evictions_total', 'Cached probe results evicted before probe.dedupSeconds passed (probe.maxTargets were cached).', () => probe()?.cacheEvicted ?? 0);
  counterOf(registry, 'sluice_front_probe_socket_errors_total', 'Raw socket errors of the prober (ICMP and TCP).', () => control()?.probeCounts.pingerErrors ?? 0);
  // Per probe method (icmp, tcp:<port>): bounded by the config's methods list (at most 8).
  counterFrom(registry, 'sluice_front_probe_method_probes_total', 'Probes per method (icmp, tcp:<port>) and outcome: sent, answered, timed_out (no answer within probe.timeoutMs, or refused).', ['method', 'outcome'], () =>
    (control()?.probeMethods() ?? []).flatMap((m) => [
      [{ method: m.method, outcome: 'sent' }, m.sent] as const,
      [{ method: m.method, outcome: 'answered' }, m.answered] as const,
      [{ method: m.method, outcome: 'timed_out' }, m.timeouts] as const,
    ]),
  );
  counterFrom(registry, 'sluice_front_probe_tcp_answers_total', 'TCP probe answers by kind: syn_ack (open port; we reset the half-open connection) or rst (closed port); and rst_sent, the resets we sent.', ['method', 'kind'], () =>
    (control()?.probeMethods() ?? []).flatMap((m) =>
      m.tcp
        ? [
            [{ method: m.method, kind: 'syn_ack' }, m.tcp.synAcks] as const,
            [{ method: m.method, kind: 'rst' }, m.tcp.rsts] as const,
            [{ method: m.method, kind: 'rst_sent' }, m.tcp.resetsSent] as const,
          ]
        : [],
    ),
  );
  gaugeFrom(registry, 'sluice_front_probe_method_targets', 'Targets whose last probe answer came by this method (the per-target memory, bounded by probe.methodMemory).', ['method'], () =>
    (control()?.probeMethods() ?? []).map((m) => [{ method: m.method }, m.targets] as const),
  );
  counterFrom(registry, 'sluice_front_probe_method_choice_total', 'Per-target method choice: fell_back (answered by a later method than the one tried first), cheaper_retry (a target remembered at a costlier method tried from the first again), evicted (forgotten: memory full).', ['event'], () => {
    const c = control()?.probeChoice;
    return c
      ? [
          [{ event: 'fell_back' }, c.fellBack],
          [{ event: 'cheaper_retry' }, c.cheaperRetries],
          [{ event: 'evicted' }, c.evicted],
        ]
      : [];
  });
  gaugeFrom(registry, 'sluice_front_probe_pending_targets', 'Probe targets pending, by stage.', ['stage'], () => {
    const s = control()?.prober?.status();
    return s
      ? [
          [{ stage: 'queued' }, s.queued],
          [{ stage: 'sending' }, s.sending],
          [{ stage: 'awaiting' }, s.awaiting],
        ]
      : [];
  });
  new BucketHistogram(registry, 'sluice_front_probe_rtt_seconds', 'RTT of each answered ICMP echo probe (all targets together).', [], () => {
    const p = control()?.prober;
    return p ? [[{}, p.rtt] as const] : [];
  });
}

type CL = 'checkpoint' | 'level';

/**
 * Checkpoints (src/shaping/): per checkpoint, labelled by its configured
 * name and level (service, cluster, server). Absent without checkpoints.
 * The counts are the shaper's own integers; a reload that rebuilds the
 * checkpoints carries them over by name (Shaper.inheritCounts).
 */
function registerShapingMetrics(registry: Registry, shaper: () => Shaper | undefined): void {
  const labels = (cp: Checkpoint): Labels<CL> => ({ checkpoint: cp.name, level: LEVEL_NAMES[cp.level] ?? 'unknown' });
  const each = (f: (cp: Checkpoint) => number): Sample<CL>[] => (shaper()?.all ?? []).map((cp) => [labels(cp), f(cp)] as const);
  // A limit rule's WaitQueue or a gatekeeper rule's TimedHolds: both hold SYNs.
  const queued = (f: (q: NonNullable<Checkpoint['queue'] | Checkpoint['holds']>, cp: Checkpoint) => number): Sample<CL>[] =>
    (shaper()?.all ?? []).flatMap((cp) => {
      const q = cp.queue ?? cp.holds;
      return q ? [[labels(cp), f(q, cp)] as const] : [];
    });

  counterFrom(registry, 'sluice_front_checkpoint_matched_total', 'New connections a checkpoint applied to (its condition held).', ['checkpoint', 'level'], () => each((cp) => cp.counts.matched));
  counterFrom(registry, 'sluice_front_checkpoint_admitted_total', 'New connections a checkpoint let go on: at once (queued=false; counter rules with action continue, limit rules under their limit) or after waiting in its queue (queued=true).', ['checkpoint', 'level', 'queued'], () =>
    (shaper()?.all ?? []).flatMap((cp) => {
      const out: Sample<CL | 'queued'>[] = [[{ ...labels(cp), queued: 'false' }, cp.counts.passed]];
      const q = cp.queue ?? cp.holds;
      if (q) out.push([{ ...labels(cp), queued: 'true' }, q.counts.admitted]);
      return out;
    }),
  );
  counterFrom(registry, 'sluice_front_checkpoint_held_total', 'SYNs over a checkpoint\'s limit that waited in its queue (each leaves admitted or rejected at max_delay).', ['checkpoint', 'level'], () => each((cp) => cp.counts.held));
  counterFrom(registry, 'sluice_front_checkpoint_rejected_total', 'New connections a checkpoint rejected, by reason: queue_full (queue.maxLength), max_delay (waited queue.maxDelayMs), held_pool_full (shaping.maxHeld SYNs held), action (a counter rule with action reject), admission_local / admission_cluster (an admission rule\'s local limits, or this member\'s allocation of the cluster limits).', ['checkpoint', 'level', 'reason'], () =>
    (shaper()?.all ?? []).flatMap((cp) => {
      const l = labels(cp);
      const r = cp.rejects;
      return [
        [{ ...l, reason: 'queue_full' }, r.queueFull],
        [{ ...l, reason: 'max_delay' }, r.maxDelay],
        [{ ...l, reason: 'held_pool_full' }, r.heldPoolFull],
        [{ ...l, reason: 'action' }, r.action],
        [{ ...l, reason: 'admission_local' }, r.admissionLocal],
        [{ ...l, reason: 'admission_cluster' }, r.admissionCluster],
      ] as const;
    }),
  );
  counterFrom(registry, 'sluice_front_checkpoint_steered_total', 'New connections a counter rule steered to an overflow cluster (action steer), by that cluster.', ['checkpoint', 'level', 'cluster'], () =>
    (shaper()?.all ?? []).flatMap((cp) => (cp.steerCluster !== '' ? [[{ ...labels(cp), cluster: cp.steerCluster }, cp.counts.steered] as const] : [])),
  );
  counterFrom(registry, 'sluice_front_checkpoint_untracked_total', 'New connections let through a checkpoint uncounted: its stick table was full of busy keys.', ['checkpoint', 'level'], () => each((cp) => cp.counts.untracked));

  gaugeFrom(registry, 'sluice_front_checkpoint_queue_length', 'SYNs waiting in a checkpoint\'s queue now (limit kinds).', ['checkpoint', 'level'], () => queued((q) => q.length));
  gaugeFrom(registry, 'sluice_front_checkpoint_queue_max_length', 'queue.maxLength of a checkpoint (limit kinds).', ['checkpoint', 'level'], () => queued((q) => q.maxLength));
  gaugeFrom(registry, 'sluice_front_checkpoint_queue_oldest_wait_seconds', 'How long the longest-waiting SYN of a checkpoint\'s queue has waited (0: empty).', ['checkpoint', 'level'], () => {
    const now = performance.now();
    return queued((q) => {
      const since = q.oldestSince();
      return since === undefined ? 0 : Math.max(0, now - since) / 1000;
    });
  });
  gaugeFrom(registry, 'sluice_front_checkpoint_table_entries', 'Keys in a checkpoint\'s stick table now.', ['checkpoint', 'level'], () => each((cp) => cp.table.size));
  gaugeFrom(registry, 'sluice_front_checkpoint_table_capacity', 'Keys a checkpoint\'s stick table holds at most (table.size).', ['checkpoint', 'level'], () => each((cp) => cp.table.capacity));
  gaugeFrom(registry, 'sluice_front_checkpoint_table_memory_bytes', 'Memory of a checkpoint\'s stick table: its preallocated arrays plus an estimate for the key map.', ['checkpoint', 'level'], () => each((cp) => cp.table.memoryBytes()));
  counterFrom(registry, 'sluice_front_checkpoint_table_events_total', 'Stick table events: created (a new key), expired (idle past table.expireSeconds), evicted (the least recently used idle key, to make room), full (no idle key to evict: the request went untracked).', ['checkpoint', 'level', 'event'], () =>
    (shaper()?.all ?? []).flatMap((cp) => byKey('event', cp.table.counts).map(([l, v]) => [{ ...labels(cp), ...l }, v] as const)),
  );

  gaugeOf(registry, 'sluice_front_shaping_held', 'SYNs held in all checkpoint queues now.', () => shaper()?.pool.held ?? 0);
  gaugeOf(registry, 'sluice_front_shaping_held_max', 'SYNs held at most in all checkpoint queues together (shaping.maxHeld).', () => shaper()?.pool.capacity ?? 0);
  counterFrom(registry, 'sluice_front_shaping_events_total', 'Checkpoint evaluation of new connections: evaluated, then passed, held, rejected or steered; retransmits (a held SYN\'s retransmit, dropped), pool_full (rejected at shaping.maxHeld), counts_dropped (more counting rules on one path than kept per connection).', ['event'], () => {
    const s = shaper();
    return s ? byKey('event', s.counts) : [];
  });
}

/**
 * The gatekeeper (distributed throttling, src/throttle/gatekeeper.ts):
 * decisions per domain, accounting sent to the masters, control received.
 * Labels: domain names (the gatekeeper checkpoints'), master endpoints
 * (configured, at most 8), reject reasons of the protocol decoder. A
 * replaced gatekeeper's counts are carried over (FrontDaemon), so the
 * `_total` series stay monotonic across reloads.
 */
export function registerThrottleMetrics(registry: Registry, gatekeeper: () => Gatekeeper | undefined): void {
  const domains = (f: (d: Gatekeeper['domains'][number]) => number): Sample<'domain'>[] => (gatekeeper()?.domains ?? []).map((d) => [{ domain: d.name }, f(d)] as const);
  counterFrom(registry, 'sluice_front_throttle_requests_total', 'New connections a gatekeeper checkpoint decided, by domain and outcome: accepted (passed at once), delayed (held until the masters\' next allowable time), rejected (the delay was past queue.maxDelayMs, or no hold was free).', ['domain', 'outcome'], () =>
    (gatekeeper()?.domains ?? []).flatMap((d) => [
      [{ domain: d.name, outcome: 'accepted' }, d.counters.accepted],
      [{ domain: d.name, outcome: 'delayed' }, d.counters.delayed],
      [{ domain: d.name, outcome: 'rejected' }, d.counters.rejected],
    ] as const),
  );
  counterFrom(registry, 'sluice_front_throttle_rejected_unsent_total', 'REJECTED accounting left out by sampling (throttle.rejectedSample), by domain.', ['domain'], () => domains((d) => d.counters.rejectedNotSent));
  gaugeFrom(registry, 'sluice_front_throttle_delays', 'Delays (clients that must wait) the gatekeeper remembers now, by domain.', ['domain'], () => domains((d) => d.delays.size));
  counterFrom(registry, 'sluice_front_throttle_delays_stored_total', 'DELAY_UNTIL messages that moved a client\'s next allowable time later, by domain.', ['domain'], () => domains((d) => d.counters.delaysStored));
  counterFrom(registry, 'sluice_front_throttle_delays_evicted_total', 'Remembered delays dropped because throttle.maxIdentifiers was reached (those clients pass: fail open), by domain.', ['domain'], () => domains((d) => d.counters.evicted));
  counterFrom(registry, 'sluice_front_throttle_accounting_total', 'Accounting messages: queued (by the checkpoints), dropped (queue full or no master connected), sent and unsent by master (its socket\'s send queue).', ['result', 'master'], () => {
    const g = gatekeeper();
    if (!g) return [];
    const out: Sample<'result' | 'master'>[] = [
      [{ result: 'queued', master: '' }, g.counters.accountingQueued],
      [{ result: 'dropped', master: '' }, g.counters.accountingDropped],
    ];
    for (const m of g.masterLinks()) out.push([{ result: 'sent', master: m.accounting }, m.sent], [{ result: 'unsent', master: m.accounting }, m.dropped]);
    return out;
  });
  gaugeFrom(registry, 'sluice_front_throttle_master_connected', 'Whether the gatekeeper\'s accounting socket to a master is connected (1), and which one is active (active="true").', ['master', 'active'], () => {
    const g = gatekeeper();
    if (!g) return [];
    const active = g.activeMaster;
    return g.masterLinks().map((m) => [{ master: m.accounting, active: String(m.accounting === active) }, m.connected ? 1 : 0] as const);
  });
  counterFrom(registry, 'sluice_front_throttle_control_total', 'Control messages from the masters: received (applied), or refused by reason.', ['result'], () => {
    const g = gatekeeper();
    if (!g) return [];
    return [[{ result: 'received' }, g.counters.controlReceived] as const, ...Object.entries(g.counters.controlRejected).map(([r, v]) => [{ result: r }, v] as const)];
  });
  counterFrom(registry, 'sluice_front_throttle_events_total', 'Gatekeeper events: resync_sessions (new session: start, master change, reconnect), resyncs_sent, failovers (active master changed), unknown_domain, bad_identifier, passed (a delay already over on arrival).', ['event'], () => {
    const g = gatekeeper();
    if (!g) return [];
    const c = g.counters;
    return [
      [{ event: 'resync_sessions' }, c.resyncSessions],
      [{ event: 'resyncs_sent' }, c.resyncsSent],
      [{ event: 'failovers' }, c.failovers],
      [{ event: 'unknown_domain' }, c.unknownDomain],
      [{ event: 'bad_identifier' }, c.badIdentifier],
      [{ event: 'passed' }, c.passed],
    ] as const;
  });
}
