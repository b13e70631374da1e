/**
 * The DNS glue of the `mapping` policy: counts queries per prefix for the
 * names it steers, and on each recompute feeds the pure MappingTable
 * (table.ts) from the live tables. The timer is the daemon's; this class
 * only computes when asked, with the time given (tests drive it directly).
 *
 * Inputs of a recompute:
 *   clusters  up (a fresh report with servers up) with the reported capacity
 *             and load; a full cluster stays in (its mapped prefixes may stay
 *             as long as the solve finds them room).
 *   demand    per prefix, in the clusters' unit (new connections/s): a prefix
 *             a front node reports with a request rate (high_rate_clients) has
 *             that rate; the others share the rest of the clusters' total load
 *             in proportion to their smoothed query rates. That load is held:
 *             it rises at once with the reports and falls no faster than the
 *             demand half-life (loadEstimate below). With no load reported
 *             yet the shares are scaled to a millionth of the total capacity:
 *             everything fits and each prefix goes to its nearest.
 *   RTTs      the RTT table's current measurements of the prefix.
 * At most `maxPrefixes` prefixes, those with the highest demand: the
 * recompute runs on the event loop, and this bounds its time.
 */
import type { ClusterTable } from '../cluster_state.ts';
import type { DnsConfig } from '../config.ts';
import type { HighRateTable } from '../high_rate.ts';
import type { RttTable } from '../rtt_table.ts';
import { DemandMeter } from './demand.ts';
import { MappingTable, type MappingClusterInput, type MappingEntry, type MappingPrefixInput, type RecomputeStats } from './table.ts';

export interface MappingSources {
  readonly clusters: ClusterTable;
  readonly rtt: RttTable;
  readonly highRate: HighRateTable;
}

export class MappingService {
  readonly table: MappingTable;
  readonly demand: DemandMeter;
  readonly recomputeSeconds: number;
  readonly maxPrefixes: number;
  readonly #src: MappingSources;
  /** Prefixes with demand left out by maxPrefixes at the last recompute. */
  leftOut = 0;
  /**
   * The load the query shares were last scaled to (new connections/s).
   * Invariant: at each recompute it is max(the reported load the shares
   * stand for, its previous value decayed with the demand half-life). Why
   * held: the reports are a sample of a count that jitters (downloads
   * ending and starting between two reports), and the shares are smoothed
   * over the half-life while the load was not; a 25 % dip of one report
   * made a prefix that had been moved off a full cluster fit there again,
   * and it moved back on one of two DNS servers
   * (test/netns/dns-mapping-capacity.test.ts, CI 2026-11-26). Rising at
   * once keeps a flash crowd from overfilling a cluster; falling with the
   * half-life is what the shares themselves do.
   */
  loadEstimate = 0;
  #loadAt: number;
  readonly #loadTauMs: number;

  constructor(cfg: Readonly<DnsConfig>, src: MappingSources, now: number) {
    const m = cfg.steering.mapping;
    this.#src = src;
    this.recomputeSeconds = m.recomputeSeconds;
    this.maxPrefixes = m.maxPrefixes;
    this.table = new MappingTable(cfg.clusters.length, m);
    this.demand = new DemandMeter(cfg.steering.maxPrefixes, m.demandHalfLifeSeconds, now);
    this.#loadAt = now;
    this.#loadTauMs = (m.demandHalfLifeSeconds * 1000) / Math.LN2;
  }

  /** Per query of a `mapping` name: O(1). */
  noteQuery(key: string): void {
    this.demand.note(key);
  }

  /** O(1): the prefix's assignment, or undefined (the policy falls back). */
  lookup(key: string): MappingEntry | undefined {
    return this.table.lookup(key);
  }

  recompute(now: number): RecomputeStats {
    const { clusters, rtt, highRate } = this.#src;
    const C = clusters.clusters.length;
    const cl: MappingClusterInput[] = clusters.clusters.map((c) => {
      const up = clusters.isUp(c, now);
      return { usable: up, capacity: up ? c.capacity : 0, load: up ? c.load : 0 };
    });
    const rates = this.demand.update(now);
    let totalLoad = 0;
    let totalCapacity = 0;
    for (const c of cl) {
      totalLoad += c.load;
      totalCapacity += c.capacity;
    }
    let reported = 0;
    let queries = 0;
    const reportedRate = new Map<string, number>();
    for (const [k, r] of rates) {
      const hr = highRate.rate(k, now);
      if (hr > 0) {
        reportedRate.set(k, hr);
        reported += hr;
      } else queries += r;
    }
    const dt = Math.max(0, now - this.#loadAt);
    this.#loadAt = now;
    this.loadEstimate = Math.max(totalLoad - reported, this.loadEstimate * Math.exp(-dt / this.#loadTauMs));
    const scale = queries > 0 ? Math.max(this.loadEstimate, 1e-6 * totalCapacity) / queries : 0;
    // The busiest maxPrefixes (ties by key: the same choice on every server).
    let keys = [...rates.keys()];
    const demandOf = (k: string): number => reportedRate.get(k) ?? (rates.get(k) ?? 0) * scale;
    this.leftOut = Math.max(0, keys.length - this.maxPrefixes);
    if (this.leftOut > 0) keys = keys.sort((x, y) => demandOf(y) - demandOf(x) || (x < y ? -1 : 1)).slice(0, this.maxPrefixes);
    // One buffer for every RTT row of this recompute (the table reads them only during it).
    const rows = new Float64Array(keys.length * C);
    const prefixes: MappingPrefixInput[] = [];
    for (const k of keys) {
      const row = rows.subarray(prefixes.length * C, (prefixes.length + 1) * C);
      if (rtt.current(k, now, row) === 0) continue;
      prefixes.push({ key: k, demand: demandOf(k), rtt: row, rttAt: rtt.newest(k) });
    }
    return this.table.recompute(prefixes, cl, now);
  }
}
