/**
 * The `mapping` policy in the simulator: the DNS server's own MappingTable
 * (src/dns/mapping/table.ts: candidates, map units, hysteresis, the exact
 * solve, capacity, per-prefix answers) driven on the simulated clock.
 *
 * Inputs, as the daemon's MappingService gives them:
 *   - per simulator unit, `mappingClasses` prefixes of the table (the
 *     unit's prefix i is in class i mod mappingClasses), each with its
 *     share of the unit's demand (by its share of the unit's prefixes) as measured over the previous step
 *     (observeDemand: the daemon's demand meter also lags the traffic) and
 *     the unit's RTT row, measured at time 0. They share the RTT row, so
 *     the table puts them in one of its map units and splits it between
 *     clusters by whole classes, as it splits a daemon's map unit by
 *     whole member prefixes;
 *   - per cluster its usable state, capacity and load from the same
 *     ClusterTable the other policies read (reports, with their delay).
 * The table is recomputed every `steering.mapping.recomputeSeconds` of
 * simulated time (at most once a step). A unit the table leaves out
 * (no demand yet, unserved near its prefixes) gets the `rtt` policy's
 * answer, as in the daemon. With `mappingTtl: adaptive` (the default) an
 * answer from the table carries the TTL the table gave its prefix, and the
 * resolvers cache it that long (the engine's ttlOf); fallback answers and
 * `mappingTtl: fixed` have the scenario's `ttlSeconds`.
 */
import { ClusterTable } from '../dns/cluster_state.ts';
import { MappingTable, type MappingClusterInput, type MappingPrefixInput } from '../dns/mapping/table.ts';
import type { Scenario } from './scenario.ts';
import { PolicySteerer, type Steerer } from './steerers.ts';
import type { World } from './world.ts';

export class MappingSteerer implements Steerer {
  readonly name = 'mapping';
  readonly classes: number;
  readonly table: MappingTable;
  readonly #fallback: PolicySteerer;
  readonly #clusters: ClusterTable;
  readonly #w: World;
  readonly #demand: Float64Array;
  readonly #keys: string[];
  readonly #answer: Int32Array;
  /** TTL per table prefix from the last recompute (0: no entry, the fallback's TTL). */
  readonly #ttl: Float64Array;
  readonly #fixedTtl: number;
  readonly #adaptive: boolean;
  /** Each class's share of its unit's prefixes (prefix i of a unit is in class i mod K: the first classes may hold one more). */
  readonly #share: Float64Array;
  readonly #everyMs: number;
  #lastMs = -Infinity;
  /** Units answered by the fallback (rtt) instead of the table, over the run. */
  fallbacks = 0;

  constructor(s: Readonly<Scenario>, w: World, clusters: ClusterTable) {
    const m = s.mapping;
    this.table = new MappingTable(w.clusterNames.length, m, () => 0);
    this.#everyMs = m.recomputeSeconds * 1000;
    this.#fallback = new PolicySteerer(s, w, 'rtt', clusters);
    this.#clusters = clusters;
    this.#w = w;
    this.classes = s.mappingClasses;
    this.#demand = new Float64Array(w.units);
    const n = w.units * this.classes;
    this.#keys = Array.from({ length: n }, (_, k) => `u${String(Math.floor(k / this.classes))}c${String(k % this.classes)}`);
    this.#answer = new Int32Array(n).fill(-1);
    this.#ttl = new Float64Array(n);
    this.#fixedTtl = s.ttlSeconds;
    this.#adaptive = s.mappingTtl === 'adaptive';
    this.#share = new Float64Array(n);
    for (let u = 0; u < w.units; u++) {
      const size = (w.unitStart[u + 1] ?? 0) - (w.unitStart[u] ?? 0);
      for (let c = 0; c < this.classes; c++) this.#share[u * this.classes + c] = size > 0 ? (c < size ? Math.floor((size - c - 1) / this.classes) + 1 : 0) / size : 0;
    }
  }

  /** The demand each unit put on the clusters over the step that just ended. */
  observeDemand(unitDemand: Float64Array): void {
    this.#demand.set(unitDemand);
  }

  beginStep(step: number, nowMs: number): void {
    this.#fallback.beginStep(step, nowMs);
    if (nowMs - this.#lastMs < this.#everyMs) return;
    this.#lastMs = nowMs;
    const t = this.#clusters;
    const cl: MappingClusterInput[] = t.clusters.map((c) => {
      // Up, as the daemon's MappingService reads it: a full cluster still has capacity to assign (isUsable would drop it).
      const up = t.isUp(c, nowMs);
      return { usable: up, capacity: up ? c.capacity : 0, load: up ? c.load : 0 };
    });
    const C = this.#w.clusterNames.length;
    const prefixes: MappingPrefixInput[] = [];
    const K = this.classes;
    for (let k = 0; k < this.#keys.length; k++) {
      const u = Math.floor(k / K);
      prefixes.push({ key: this.#keys[k] ?? '', demand: (this.#demand[u] ?? 0) * (this.#share[k] ?? 0), rtt: this.#w.rtt.subarray(u * C, (u + 1) * C), rttAt: 0 });
    }
    this.table.recompute(prefixes, cl, nowMs);
    for (let k = 0; k < this.#keys.length; k++) {
      const e = this.table.lookup(this.#keys[k] ?? '');
      this.#answer[k] = e?.cluster ?? -1;
      this.#ttl[k] = e?.ttl ?? 0;
    }
  }

  ttlOf(unit: number, cls: number): number {
    const k = unit * this.classes + cls;
    return this.#adaptive && (this.#answer[k] ?? -1) >= 0 ? (this.#ttl[k] ?? 0) : this.#fixedTtl;
  }

  answer(unit: number, cls: number): number {
    const a = this.#answer[unit * this.classes + cls] ?? -1;
    if (a >= 0) return a;
    this.fallbacks++;
    // The rtt policy's answer for the unit (its one class: rtt draws only without RTTs).
    return this.#fallback.answer(unit, 0);
  }
}
