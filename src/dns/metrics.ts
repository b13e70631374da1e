/**
 * sluice_dns_*: the DNS server's metrics, read at scrape time from the
 * answerer's and socket server's counters, the steering counts, the cluster
 * and client tables, the probe scheduler and the control plane. Nothing
 * here runs on the answer path (src/metrics/collect.ts).
 *
 * Labels: rcode, transport, reasons, cluster names (the config's, at most
 * 64), table names: all bounded. Never a client address or prefix.
 */
import type { Registry } from 'prom-client';
import type { AdminSocket } from '../admin/socket.ts';
import type { Answerer } from './answerer.ts';
import type { ClusterTable } from './cluster_state.ts';
import type { DnsConfig } from './config.ts';
import type { DnsControl } from './control.ts';
import type { HighRateTable } from './high_rate.ts';
import type { MappingService } from './mapping/service.ts';
import type { ProbeScheduler } from './probe_scheduler.ts';
import { RRL_KIND_NAMES, type ResponseRateLimiter } from './rrl.ts';
import type { RttTable } from './rtt_table.ts';
import type { ZoneTransfers } from './transfer/axfr.ts';
import type { Notifier } from './transfer/notify.ts';
import type { DnsServer } from './server.ts';
import type { StickyTable } from './sticky.ts';
import type { WorkerPool } from './workers.ts';
import type { OpsServer } from '../http/ops_server.ts';
import { counterFrom, counterOf, gaugeFrom, gaugeOf, type Sample } from '../metrics/collect.ts';
import { registerControlMetrics } from '../metrics/control.ts';
import { BucketHistogram } from '../metrics/histogram.ts';
import { registerHttpMetrics } from '../metrics/http.ts';

/** The parts of the DNS server its metrics read (DnsDaemon has them). */
export interface DaemonParts {
  readonly config: Readonly<DnsConfig>;
  readonly answerer: Answerer;
  readonly rrl: ResponseRateLimiter | undefined;
  readonly transfers: ZoneTransfers;
  readonly notifier: Notifier;
  readonly server: DnsServer;
  readonly clusters: ClusterTable;
  readonly rtt: RttTable;
  readonly highRate: HighRateTable;
  readonly sticky: StickyTable;
  readonly probes: ProbeScheduler;
  readonly mapping: MappingService;
  readonly reloads: number;
  readonly reloadsRefused: number;
  /** The primary's worker pool (workers > 1); undefined in a single process. */
  readonly pool: Pick<WorkerPool, 'count' | 'alive' | 'died' | 'replaced' | 'sendFailed'> | undefined;
}

export interface DnsMetricsSource {
  readonly daemon: DaemonParts;
  control(): DnsControl | undefined;
  admin(): Pick<AdminSocket, 'handled' | 'rejected'> | undefined;
  ops(): OpsServer | undefined;
}

const CLUSTER_STATES = ['up', 'full', 'down', 'unknown'] as const;

export function registerDnsMetrics(registry: Registry, src: DnsMetricsSource): void {
  const d = src.daemon;
  const a = (): DaemonParts['answerer']['counters'] => d.answerer.counters;
  const perCluster = (f: (c: DaemonParts['clusters']['clusters'][number]) => number): Sample<'cluster'>[] => d.clusters.clusters.map((c) => [{ cluster: c.name }, f(c)] as const);

  gaugeFrom(registry, 'sluice_dns_info', 'This DNS server: its control-plane name (value 1).', ['name'], () => [[{ name: d.config.name }, 1]]);

  // Worker processes (workers > 1): no samples in a single process.
  gaugeFrom(registry, 'sluice_dns_workers', 'Server processes configured, and alive now (fewer alive than configured: one died and its replacement is not serving yet).', ['of'], () =>
    d.pool === undefined
      ? []
      : [
          [{ of: 'configured' }, d.pool.count],
          [{ of: 'alive' }, d.pool.alive],
        ],
  );
  counterFrom(registry, 'sluice_dns_workers_died_total', 'Server processes that died while serving (each is logged with its exit code and signal, and replaced).', [], () => (d.pool === undefined ? [] : [[{}, d.pool.died]]));
  counterFrom(registry, 'sluice_dns_workers_replaced_total', 'Replacement server processes that started serving.', [], () => (d.pool === undefined ? [] : [[{}, d.pool.replaced]]));
  counterFrom(registry, 'sluice_dns_worker_messages_lost_total', 'Messages from the primary to a server process that was exiting (its replacement gets the state).', [], () => (d.pool === undefined ? [] : [[{}, d.pool.sendFailed]]));

  // Queries and responses (Answerer counters).
  counterFrom(registry, 'sluice_dns_queries_total', 'Queries received, by transport.', ['transport'], () => [
    [{ transport: 'udp' }, a().udp],
    [{ transport: 'tcp' }, a().tcp],
  ]);
  counterFrom(registry, 'sluice_dns_responses_total', 'Responses sent, by rcode.', ['rcode'], () => {
    const c = a();
    return [
      [{ rcode: 'NOERROR' }, c.answered + c.nodata + c.referral],
      [{ rcode: 'NXDOMAIN' }, c.nxdomain],
      [{ rcode: 'SERVFAIL' }, c.servfail],
      [{ rcode: 'REFUSED' }, c.refused],
      [{ rcode: 'FORMERR' }, c.formerr],
      [{ rcode: 'NOTIMP' }, c.notimp],
      [{ rcode: 'BADVERS' }, c.badvers],
    ];
  });
  counterFrom(registry, 'sluice_dns_noerror_responses_total', 'NOERROR responses, by kind: answer (records), nodata, referral.', ['kind'], () => [
    [{ kind: 'answer' }, a().answered],
    [{ kind: 'nodata' }, a().nodata],
    [{ kind: 'referral' }, a().referral],
  ]);
  counterFrom(registry, 'sluice_dns_queries_dropped_total', 'Queries answered with nothing: ignored (not a query) or rrl (over the response rate limit).', ['reason'], () => [
    [{ reason: 'ignored' }, a().ignored],
    [{ reason: 'rrl' }, a().rrlDropped],
  ]);
  counterOf(registry, 'sluice_dns_rrl_slipped_total', 'Rate-limited responses sent truncated (TC) instead of dropped.', () => a().rrlSlipped);
  counterFrom(registry, 'sluice_dns_rrl_limited_total', 'Rate-limited UDP responses, by the kind of response counted (response, nodata, wildcard, referral, nxdomain, error) and action (drop, slip).', ['kind', 'action'], () => {
    const r = d.rrl;
    if (r === undefined) return [];
    return RRL_KIND_NAMES.flatMap((kind, i) => [[{ kind, action: 'drop' }, r.dropped[i] ?? 0] as const, [{ kind, action: 'slip' }, r.slipped[i] ?? 0] as const]);
  });
  counterFrom(registry, 'sluice_dns_rrl_would_limit_total', 'rrl.logOnly: responses sent although over the limit, by kind.', ['kind'], () => {
    const r = d.rrl;
    return r === undefined ? [] : RRL_KIND_NAMES.map((kind, i) => [{ kind }, r.wouldLimit[i] ?? 0] as const);
  });
  gaugeFrom(registry, 'sluice_dns_rrl_entries', 'Responses tracked in the RRL table (prefix x response), and the slots it has.', ['of'], () => {
    const r = d.rrl;
    return r === undefined ? [] : [[{ of: 'used' }, r.size], [{ of: 'slots' }, r.capacity]];
  });
  counterFrom(registry, 'sluice_dns_rrl_evicted_total', 'RRL entries replaced while inside their window (the table is small for the traffic: raise rrl.maxEntries).', [], () => (d.rrl === undefined ? [] : [[{}, d.rrl.evicted]]));
  counterOf(registry, 'sluice_dns_truncated_responses_total', 'Responses sent truncated (TC set).', () => a().truncated);
  counterFrom(registry, 'sluice_dns_malformed_queries_total', 'Messages refused by the parser, by reason (answered FORMERR/NOTIMP or ignored).', ['reason'], () => [...d.answerer.rejects].map(([k, n]) => [{ reason: k }, n] as const));
  counterFrom(registry, 'sluice_dns_answer_cache_lookups_total', 'Encoded-answer cache lookups, by result.', ['result'], () => [
    [{ result: 'hit' }, a().cacheHits],
    [{ result: 'miss' }, a().cacheMisses],
  ]);
  counterFrom(registry, 'sluice_dns_identity_queries_total', 'CH queries (server identity), by name and result: answered, or refused (turned off in `identity`, or a type other than TXT); name "other": any other CH query (refused).', ['name', 'result'], () => {
    const id = d.answerer.identity;
    if (id === undefined) return [];
    return [...[...id.answered].map(([name, n]) => [{ name, result: 'answered' }, n] as const), ...[...id.refused].map(([name, n]) => [{ name, result: 'refused' }, n] as const), [{ name: 'other', result: 'refused' }, id.other] as const];
  });
  counterOf(registry, 'sluice_dns_answer_encode_errors_total', 'Answers that could not be encoded (answered SERVFAIL).', () => a().encodeErrors);

  // Zone transfers and NOTIFY.
  counterFrom(registry, 'sluice_dns_transfers_total', 'Zone transfer requests (AXFR/IXFR over TCP), by result: served, refused (not allowed), tsig_failed (NOTAUTH), notauth (a zone we do not serve).', ['result'], () => {
    const t = d.transfers.counters;
    return [[{ result: 'served' }, t.served], [{ result: 'refused' }, t.refused], [{ result: 'tsig_failed' }, t.tsigFailed], [{ result: 'notauth' }, t.notAuth]];
  });
  counterOf(registry, 'sluice_dns_transfer_records_total', 'Records sent in zone transfers.', () => d.transfers.counters.records);
  counterFrom(registry, 'sluice_dns_notify_total', 'NOTIFY messages to secondaries, by result: sent (each attempt), answered, failed (no answer after every retry).', ['result'], () => {
    const n = d.notifier.counters;
    return [[{ result: 'sent' }, n.sent], [{ result: 'answered' }, n.answered], [{ result: 'failed' }, n.failed]];
  });

  // Steering.
  counterOf(registry, 'sluice_dns_steered_responses_total', 'Answers to steered names (A/AAAA/ANY) holding steered addresses sent (a family no usable cluster has is answered from the zone and not counted here).', () => a().steered);
  counterFrom(registry, 'sluice_dns_steered_answers_total', 'Steered answers sent, by chosen cluster (each cluster in an answer counts once).', ['cluster'], () =>
    d.clusters.clusters.map((c) => [{ cluster: c.name }, d.answerer.steeredByCluster[c.index] ?? 0] as const),
  );
  counterOf(registry, 'sluice_dns_steered_fallback_total', 'Steered answers from the fallback (no usable cluster: all VIPs or the sorry addresses).', () => a().steeredFallback);
  counterFrom(registry, 'sluice_dns_steering_decisions_total', 'Steering decisions computed (memoised answers reuse one), by reason.', ['reason'], () => [...d.answerer.steering.reasons].map(([k, n]) => [{ reason: k }, n] as const));

  // Sockets.
  gaugeFrom(registry, 'sluice_dns_tcp_connections', 'Open TCP connections.', [], () => [[{}, d.server.tcpConnections]]);
  counterFrom(registry, 'sluice_dns_tcp_connections_total', 'TCP connections, by outcome (refused: over tcp.maxConnections).', ['outcome'], () => [
    [{ outcome: 'accepted' }, d.server.counters.tcpAccepted],
    [{ outcome: 'refused' }, d.server.counters.tcpRefused],
  ]);
  counterFrom(registry, 'sluice_dns_tcp_closed_total', 'TCP connections we closed, by reason.', ['reason'], () => [
    [{ reason: 'idle' }, d.server.counters.tcpIdleClosed],
    [{ reason: 'bad_frame' }, d.server.counters.tcpBadFrames],
  ]);
  counterOf(registry, 'sluice_dns_udp_errors_total', 'UDP socket errors (failed sends included).', () => d.server.counters.udpErrors);
  counterOf(registry, 'sluice_dns_udp_batches_total', 'UDP batches read with one recvmmsg and answered with one call (udpIo batch); UDP queries over this is the mean batch size.', () => d.server.counters.udpBatches);
  counterFrom(registry, 'sluice_dns_reloads_total', 'Reloads, by result.', ['result'], () => [
    [{ result: 'applied' }, d.reloads],
    [{ result: 'refused' }, d.reloadsRefused],
  ]);
  counterFrom(registry, 'sluice_dns_admin_requests_total', 'Admin socket requests, by result.', ['result'], () => {
    const s = src.admin();
    return [
      [{ result: 'handled' }, s?.handled ?? 0],
      [{ result: 'rejected' }, s?.rejected ?? 0],
    ];
  });

  // Clusters, as the front nodes report them.
  gaugeFrom(registry, 'sluice_dns_cluster_capacity', 'Cluster capacity last reported (new connections/s).', ['cluster'], () => perCluster((c) => c.capacity));
  gaugeFrom(registry, 'sluice_dns_cluster_load', 'Cluster load last reported (new connections/s).', ['cluster'], () => perCluster((c) => c.load));
  gaugeFrom(registry, 'sluice_dns_cluster_available', 'Cluster free capacity last reported.', ['cluster'], () => perCluster((c) => c.available));
  gaugeFrom(registry, 'sluice_dns_cluster_utilization', 'Cluster load over capacity, last reported (absent without capacity).', ['cluster'], () => perCluster((c) => (c.capacity > 0 ? c.load / c.capacity : NaN)));
  gaugeFrom(registry, 'sluice_dns_cluster_servers', 'Servers per cluster last reported, by whether they take new connections.', ['cluster', 'usable'], () =>
    d.clusters.clusters.flatMap((c) => [
      [{ cluster: c.name, usable: 'true' }, c.serversUp] as const,
      [{ cluster: c.name, usable: 'false' }, c.serversTotal - c.serversUp] as const,
    ]),
  );
  gaugeFrom(registry, 'sluice_dns_cluster_state', 'Cluster state, one series per state with value 1 for the current one.', ['cluster', 'state'], () => {
    const now = performance.now();
    return d.clusters.clusters.flatMap((c) => {
      const st = d.clusters.state(c, now);
      return CLUSTER_STATES.map((s) => [{ cluster: c.name, state: s }, s === st ? 1 : 0] as const);
    });
  });
  gaugeFrom(
    registry,
    'sluice_dns_cluster_node_report_age_seconds',
    'Seconds since each front node of a cluster last reported, by its role (a pair shows two nodes; at most 8 per cluster). The cluster is down only when every node\'s age passes reportSeconds × downAfterIntervals.',
    ['cluster', 'node', 'role'],
    () => {
      const now = performance.now();
      return d.clusters.clusters.flatMap((c) => d.clusters.nodes(c).map((r) => [{ cluster: c.name, node: r.node, role: r.role }, (now - r.at) / 1000] as const));
    },
  );
  gaugeFrom(registry, 'sluice_dns_cluster_node_source', 'The front node whose report the cluster\'s figures come from now (value 1; its master while fresh).', ['cluster', 'node'], () =>
    d.clusters.clusters.flatMap((c) => (c.source !== undefined ? [[{ cluster: c.name, node: c.source }, 1] as const] : [])),
  );
  counterOf(registry, 'sluice_dns_cluster_nodes_replaced_total', 'Front nodes forgotten because a cluster already had 8 reporting (a misconfiguration: two fronts sending under one node name, or more than a pair).', () => d.clusters.reports.replaced);
  counterFrom(registry, 'sluice_dns_cluster_reports_total', 'cluster_load reports applied, by cluster.', ['cluster'], () => perCluster((c) => c.reports));
  counterOf(registry, 'sluice_dns_cluster_reports_unknown_total', 'cluster_load reports naming a cluster not configured.', () => d.clusters.unknownReports);

  // Per-client tables (bounded by steering.maxPrefixes).
  gaugeFrom(registry, 'sluice_dns_table_entries', 'Entries of the bounded per-client-prefix tables and caches.', ['table'], () => [
    [{ table: 'rtt' }, d.rtt.size],
    [{ table: 'high_rate' }, d.highRate.size],
    [{ table: 'sticky' }, d.sticky.size],
    [{ table: 'mapping' }, d.mapping.table.size],
    [{ table: 'mapping_demand' }, d.mapping.demand.size],
    [{ table: 'probe_pending' }, d.probes.pending],
    [{ table: 'answer_cache' }, d.answerer.cacheSize],
  ]);
  counterFrom(registry, 'sluice_dns_table_evictions_total', 'Entries evicted from the full per-client tables.', ['table'], () => [
    [{ table: 'rtt' }, d.rtt.evicted],
    [{ table: 'high_rate' }, d.highRate.evicted],
    [{ table: 'sticky' }, d.sticky.evicted],
    [{ table: 'mapping_demand' }, d.mapping.demand.evicted],
  ]);

  // Policy `mapping`: the assignment's recomputes (src/dns/mapping/).
  counterOf(registry, 'sluice_dns_mapping_recomputes_total', 'Recomputes of the mapping assignment.', () => d.mapping.table.recomputes);
  counterOf(registry, 'sluice_dns_mapping_moved_prefixes_total', 'Client prefixes the mapping assignment moved to another cluster, over all recomputes.', () => d.mapping.table.movedTotal);
  gaugeOf(registry, 'sluice_dns_mapping_load_estimate', 'The load (new connections/s) the per-prefix query shares were last scaled to: the front nodes\' reports held at their peak and falling with the demand half-life.', () => d.mapping.loadEstimate);
  gaugeOf(registry, 'sluice_dns_mapping_units', 'Map units (groups of prefixes) of the last recompute.', () => d.mapping.table.last?.units ?? 0);
  gaugeOf(registry, 'sluice_dns_mapping_solve_seconds', 'Wall time of the last recompute\'s min-cost solve.', () => (d.mapping.table.last?.solveMs ?? 0) / 1000);
  gaugeOf(registry, 'sluice_dns_mapping_unserved', 'Demand (new connections/s) the last recompute could not place at a near cluster: those prefixes are answered as policy rtt does.', () => d.mapping.table.last?.unserved ?? 0);
  counterOf(registry, 'sluice_dns_high_rate_reports_total', 'High-rate clients reported by the front nodes.', () => d.highRate.reported);

  // RTT probes and results.
  counterFrom(registry, 'sluice_dns_probe_targets_total', 'Probe targets: requested (queued), dropped (pending set full), sent (in rtt_probe_request).', ['outcome'], () => [
    [{ outcome: 'requested' }, d.probes.requested],
    [{ outcome: 'dropped' }, d.probes.dropped],
    [{ outcome: 'sent' }, d.probes.sent],
  ]);
  counterOf(registry, 'sluice_dns_probe_requests_sent_total', 'rtt_probe_request messages published to the front nodes.', () => src.control()?.probeRequestsSent ?? 0);
  counterFrom(registry, 'sluice_dns_rtt_results_total', 'RTT results received: applied (asked for by this server), shared (asked for by another DNS server: filed under the target\'s prefix), unknown_target (not filed), unknown_cluster (whole messages from an unconfigured cluster).', ['outcome'], () => [
    [{ outcome: 'applied' }, d.rtt.results - d.rtt.shared],
    [{ outcome: 'shared' }, d.rtt.shared],
    [{ outcome: 'unknown_target' }, d.rtt.unknownTargets],
    [{ outcome: 'unknown_cluster' }, src.control()?.unknownClusterResults ?? 0],
  ]);
  counterFrom(registry, 'sluice_dns_rtt_no_reply_total', 'Applied RTT results where no probe was answered, by cluster.', ['cluster'], () => perCluster((c) => d.rtt.noReply[c.index] ?? 0));
  new BucketHistogram(registry, 'sluice_dns_rtt_seconds', 'Averaged RTTs of the applied probe results, by cluster (no per-client labels).', ['cluster'], () =>
    d.clusters.clusters.flatMap((c) => {
      const b = d.rtt.rttSeconds[c.index];
      return b ? [[{ cluster: c.name }, b] as const] : [];
    }),
  );

  registerControlMetrics(registry, () => src.control()?.node);
  registerHttpMetrics(registry, 'sluice_dns', () => src.ops());
}
