/**
 * The DNS server's status: what DnsDaemon.status() builds, the admin
 * socket's `status` command and GET /status send as JSON, `sluice status
 * --dns` renders (src/cli/dns-status.ts) and the dashboard reads
 * (src/dashboard/state.ts). One type for the three, so a changed field
 * fails the type check in each.
 *
 * Invariant: every value survives JSON as it is (numbers are finite; a
 * figure that may have none is typed `| null` and sent as null).
 */
import type { AnswererCounters } from './answerer.ts';
import type { DnsControlStatus } from './control.ts';
import type { ServerCounters } from './server.ts';

/** Prefixes listed in the mapping status's `top` at most. */
export const MAPPING_STATUS_TOP = 20;

export interface DnsClusterStatus {
  readonly name: string;
  /** DNS's opinion of the cluster from the front node's reports. */
  readonly state: 'up' | 'full' | 'down' | 'unknown';
  readonly vips: readonly string[];
  readonly capacity: number;
  readonly load: number;
  readonly available: number;
  readonly serversUp: number;
  readonly serversTotal: number;
  readonly reports: number;
  /** null before the first report. */
  readonly lastReportAgeSeconds: number | null;
  /** The front node the figures come from now (its master while fresh); null before the first report. */
  readonly source: string | null;
  /** Every front node reporting this cluster (a pair shows two), with its role and report age. */
  readonly nodes: readonly { readonly node: string; readonly role: 'single' | 'master' | 'backup'; readonly ageSeconds: number; readonly fresh: boolean; readonly reports: number }[];
}

/** One recent steering decision. */
export interface DnsSteeringChoice {
  readonly name: string;
  /** The client's prefix. */
  readonly client: string;
  readonly answer: readonly string[];
  readonly clusters: readonly string[];
  readonly reason: string;
  readonly ageSeconds: number;
}

export interface DnsMappingStatus {
  /** Prefixes in the assignment table, and prefixes with a measured query rate. */
  readonly prefixes: number;
  readonly demandPrefixes: number;
  /** Prefixes with demand left out of the last recompute by steering.mapping.maxPrefixes (answered as `rtt`). */
  readonly leftOut: number;
  /** The load (new connections/s) the query shares were last scaled to: the reports' peak, falling with the demand half-life. */
  readonly loadEstimate: number;
  readonly recomputes: number;
  readonly movedTotal: number;
  /**
   * The assignment per cluster: prefixes mapped there, their demand, and the
   * capacity the last solve had there (null before it). Demand is in the
   * clusters' load unit (what the front nodes report).
   */
  readonly clusters: readonly { readonly name: string; readonly prefixes: number; readonly demand: number; readonly capacity: number | null }[];
  /** The assigned prefixes with the most demand (at most MAPPING_STATUS_TOP; ties by prefix). */
  readonly top: readonly { readonly prefix: string; readonly cluster: string; readonly demand: number; readonly rttMs: number; readonly ttl: number; readonly sinceSeconds: number }[];
  readonly last: {
    /** When it ran (wall clock, ISO 8601). */
    readonly at: string;
    readonly ageSeconds: number;
    readonly eligible: number;
    readonly units: number;
    readonly moved: number;
    readonly unserved: number;
    readonly meanRttMs: number;
    readonly solveMs: number;
    readonly totalMs: number;
  } | null;
}

export interface DnsStatus {
  readonly name: string;
  readonly uptimeSeconds: number;
  readonly zones: readonly { readonly origin: string; readonly serial: number; readonly records: number }[];
  /** With `workers` > 1: the worker processes (counters are their sums, reported every 50 ms when they change). */
  readonly workers?: { readonly count: number; readonly alive: number; readonly died: number; readonly replaced: number; readonly sendFailed: number; readonly pids: readonly number[] };
  readonly counters: Readonly<AnswererCounters> & Readonly<ServerCounters> & { readonly tcpConnections: number; readonly reloads: number; readonly reloadsRefused: number };
  /** Messages the parser refused, by reason. */
  readonly rejects: Readonly<Record<string, number>>;
  readonly clusters: readonly DnsClusterStatus[];
  readonly steering: { readonly decisions: number; readonly reasons: Readonly<Record<string, number>>; readonly recent: readonly DnsSteeringChoice[] };
  readonly rtt: {
    readonly prefixes: number;
    readonly evicted: number;
    readonly results: number;
    readonly unknownTargets: number;
    /** Results of probes another DNS server asked for, filed under the target's prefix. */
    readonly shared: number;
    /** The latest measured clients: RTT in ms per cluster name, 'no-reply', or null (not measured). */
    readonly recent: readonly { readonly client: string; readonly rttMs: Readonly<Record<string, number | string | null>> }[];
  };
  readonly highRate: { readonly tracked: number; readonly evicted: number; readonly clients: readonly { readonly prefix: string; readonly rate: number; readonly cluster: string; readonly ageSeconds: number }[] };
  readonly probes: { readonly pending: number; readonly requested: number; readonly dropped: number; readonly sent: number };
  readonly sticky: { readonly clients: number; readonly evicted: number };
  /** Policy `mapping`: the assignment's size and its last recompute (null before the first). Optional: older servers send none. */
  readonly mapping?: DnsMappingStatus | undefined;
  readonly cache: { readonly entries: number };
  /** Zone transfers served and refused, NOTIFYs sent and answered (src/dns/transfer/). */
  readonly transfer?: { readonly served: number; readonly refused: number; readonly tsigFailed: number; readonly notAuth: number; readonly messages: number; readonly records: number; readonly notifySent: number; readonly notifyAnswered: number; readonly notifyFailed: number; readonly notifyPending: number } | undefined;
  /** Response rate limiting, when on: table use and limited responses by kind. */
  readonly rrl?: { readonly entries: number; readonly slots: number; readonly evicted: number; readonly dropped: Readonly<Record<string, number>>; readonly slipped: Readonly<Record<string, number>>; readonly wouldLimit: Readonly<Record<string, number>> } | undefined;
  /** With a control section. */
  readonly control?: DnsControlStatus | undefined;
  readonly admin: { readonly handled: number; readonly rejected: number };
}
