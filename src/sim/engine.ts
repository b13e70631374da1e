/**
 * The simulation loop: a simulated clock advancing in steps of
 * `stepSeconds`, the same world, demand, events and resolver phases for
 * every policy (one policy run after the other, in one process).
 *
 * Each step, at t = step × dt:
 *   1. events due by t apply to the truth (capacity, cluster lost, report
 *      delay);
 *   2. every live cluster's front node reports (cluster_load: capacity,
 *      load, available) into the DNS server's real ClusterTable; the load
 *      is that of `delaySteps` steps ago (the report delay rounded up to
 *      whole steps, at least one: a report describes the past step);
 *   3. every prefix whose cached answer expired by t re-queries (its
 *      resolver honours the TTL: it re-queries at the first step at or after
 *      expiry, and the next expiry is a whole number of TTLs after the
 *      previous, so the phases stay spread as the resolvers' first queries
 *      were, uniformly over one TTL). The TTL is the answer's: the
 *      scenario's `ttlSeconds`, or the one the policy gave that answer
 *      (Steerer.ttlOf: the `mapping` policy's adaptive TTLs);
 *   4. demand is fluid over the step: each unit's demand (its region's
 *      daily curve × flash crowds × its share) splits evenly over its
 *      prefixes and lands on the cluster each prefix was answered with.
 *      Demand on a lost cluster is unserved.
 *
 * Resolvers are tracked in cohorts (cohorts()): the prefixes of a unit in
 * one draw class whose TTL phases fall in one bin re-query together and
 * get one answer. Per cohort: its answer (Uint8), next expiry (Float64)
 * and size. Per (unit, cluster): how many of the unit's prefixes are
 * answered with the cluster, from which loads and RTT sums are exact each
 * step.
 */
import type { ClusterTable } from '../dns/cluster_state.ts';
import { QualityMetrics, type QualitySummary, type Window } from './metrics.ts';
import type { Scenario } from './scenario.ts';
import { simClusterTable, type Steerer } from './steerers.ts';
import { dailyFactor, rng, type World } from './world.ts';

export interface OracleResult {
  /** Σ demand × RTT of the optimum, and the demand it serves. */
  readonly cost: number;
  readonly served: number;
  readonly unserved: number;
  readonly solveMs: number;
}

/** Computes the optimum for the units' demand and the clusters' capacities (0 for a lost cluster). */
export type Oracle = (demand: Float64Array, capacity: Float64Array) => OracleResult;

export interface Series {
  readonly t: number[];
  /** Per cluster, load / capacity at each point (null: lost). */
  readonly util: (number | null)[][];
  readonly rttMs: number[];
  /** Answer changes as a share of prefixes per minute, averaged since the previous point. */
  readonly changesShare: number[];
  readonly overloaded: number[];
  readonly queriesPerSecond: number[];
}

export interface PolicyRun {
  readonly policy: string;
  readonly summary: QualitySummary;
  readonly series: Series;
  readonly wallMs: number;
}

export interface OracleSample {
  readonly t: number;
  readonly rttMs: number;
  readonly served: number;
  readonly unserved: number;
  readonly solveMs: number;
}

/** Cohorts per unit: [start[u], start[u + 1]); class, prefixes and first expiry of each. */
export interface Cohorts {
  readonly start: Uint32Array;
  readonly cls: Uint8Array;
  readonly size: Uint32Array;
  readonly phase: Float64Array;
}

export type SteererFactory = (clusters: ClusterTable) => Steerer;

const NONE = 255;

export class Simulation {
  readonly scenario: Readonly<Scenario>;
  readonly world: World;
  readonly dt: number;
  readonly steps: number;
  readonly oracleSteps: number;
  readonly seriesSteps: number;
  readonly #seed: number;
  /** Demand per prefix of each unit per unit of its region's demand. */
  readonly #unitDpp: Float64Array;
  readonly #oracle: Oracle;
  readonly oracleSamples = new Map<number, OracleSample>();
  readonly excluded: Window[];

  constructor(scenario: Readonly<Scenario>, world: World, seed: number, oracle: Oracle) {
    this.scenario = scenario;
    this.world = world;
    this.dt = scenario.stepSeconds;
    this.steps = Math.floor(scenario.durationSeconds / this.dt);
    this.oracleSteps = Math.max(1, Math.round(scenario.oracleEverySeconds / this.dt));
    this.seriesSteps = Math.max(1, Math.round(Math.max(this.dt, scenario.durationSeconds / 300) / this.dt));
    this.#seed = seed;
    this.#unitDpp = new Float64Array(world.units);
    for (let u = 0; u < world.units; u++) this.#unitDpp[u] = (world.unitShare[u] ?? 0) / Math.max(1, (world.unitStart[u + 1] ?? 0) - (world.unitStart[u] ?? 0));
    this.#oracle = oracle;
    const settle = scenario.steadySettleSeconds;
    this.excluded = [{ from: 0, to: settle }, ...scenario.events.map((e) => ({ from: e.at, to: (e.type === 'flash-crowd' ? e.until : e.at) + settle }))];
  }

  /**
   * The resolvers' cohorts for a policy that distinguishes `classes` draw
   * classes: per unit, per class, per phase bin, the prefixes that
   * re-query together. Each prefix's first expiry is uniform over one TTL
   * (drawn in prefix order from the seed, so every policy sees the same
   * phases) and rounded down to one of `phaseBins` bins; prefix i of a unit
   * is in class i mod classes. A cohort's prefixes share unit, class and
   * phase, so they get the same answers: the engine tracks cohorts, not
   * prefixes, and counts changes and queries in prefixes.
   */
  cohorts(classes: number): Cohorts {
    const w = this.world;
    const B = this.scenario.phaseBins;
    const ttl = this.scenario.ttlSeconds;
    const rand = rng(this.#seed ^ 0x5eed);
    const start = new Uint32Array(w.units + 1);
    const cls: number[] = [];
    const size: number[] = [];
    const phase: number[] = [];
    const bins = new Uint32Array(classes * B);
    for (let u = 0; u < w.units; u++) {
      bins.fill(0);
      const n = (w.unitStart[u + 1] ?? 0) - (w.unitStart[u] ?? 0);
      for (let i = 0; i < n; i++) {
        const b = Math.min(B - 1, Math.floor(rand() * B));
        const k = (i % classes) * B + b;
        bins[k] = (bins[k] ?? 0) + 1;
      }
      for (let k = 0; k < classes * B; k++) {
        if ((bins[k] ?? 0) === 0) continue;
        cls.push(Math.floor(k / B));
        size.push(bins[k] ?? 0);
        phase.push(((k % B) * ttl) / B);
      }
      start[u + 1] = size.length;
    }
    return { start, cls: Uint8Array.from(cls), size: Uint32Array.from(size), phase: Float64Array.from(phase) };
  }

  /** Each region's demand at time t (daily curve × flash crowds). */
  regionDemand(t: number, out: Float64Array): void {
    const s = this.scenario;
    const w = this.world;
    for (let r = 0; r < out.length; r++) out[r] = (w.regionPeak[r] ?? 0) * dailyFactor(t, w.regionUtcOffset[r] ?? 0, s.demand.peakHour, s.demand.troughRatio);
    for (const e of s.events) {
      if (e.type !== 'flash-crowd' || t < e.at || t >= e.until) continue;
      const r = w.regionNames.indexOf(e.region);
      const ramp = e.rampSeconds > 0 ? Math.min(1, (t - e.at) / e.rampSeconds, (e.until - t) / e.rampSeconds) : 1;
      out[r] = (out[r] ?? 0) * (1 + (e.factor - 1) * Math.max(0, ramp));
    }
  }

  run(name: string, factory: SteererFactory): PolicyRun {
    const started = performance.now();
    const s = this.scenario;
    const w = this.world;
    const C = w.clusterNames.length;
    const U = w.units;
    const R = w.regionNames.length;
    const dt = this.dt;
    const ttl = s.ttlSeconds;
    const table = simClusterTable(s, w);
    const steerer = factory(table);
    const metrics = new QualityMetrics(w.prefixes, this.excluded);
    const co = this.cohorts(steerer.classes);
    const ans = new Uint8Array(co.size.length).fill(NONE);
    const next = Float64Array.from(co.phase);
    const count = new Int32Array(U * C);
    const capacity = Float64Array.from(w.capacity);
    const alive = new Uint8Array(C).fill(1);
    const load = new Float64Array(C);
    const demand = new Float64Array(R);
    const unitDemand = new Float64Array(U);
    const oracleCap = new Float64Array(C);
    const events = [...s.events].sort((a, b) => a.at - b.at);
    let ev = 0;
    let delaySteps = Math.max(1, Math.ceil(s.reportDelaySeconds / dt - 1e-9));
    // Loads of past steps, for delayed reports (ring of 1 + the longest delay seen).
    let hist: Float64Array[] = [];
    const series: Series = { t: [], util: Array.from({ length: C }, () => []), rttMs: [], changesShare: [], overloaded: [], queriesPerSecond: [] };
    let winChanges = 0;
    let winQueries = 0;
    let winSteps = 0;
    const unitDpp = this.#unitDpp;
    const rtt = w.rtt;
    const { start: cohortStart, cls: cohortCls, size: cohortSize } = co;
    const ttlOf = steerer.ttlOf?.bind(steerer);

    for (let step = 0; step < this.steps; step++) {
      const t = step * dt;
      const nowMs = t * 1000;
      // 1. Events.
      for (; ev < events.length && (events[ev]?.at ?? Infinity) <= t; ev++) {
        const e = events[ev];
        if (!e) continue;
        if (e.type === 'cluster-lost') {
          const c = w.clusterNames.indexOf(e.cluster);
          if (alive[c] === 1) metrics.lost(c, e.at);
          alive[c] = 0;
        } else if (e.type === 'capacity') {
          const c = w.clusterNames.indexOf(e.cluster);
          capacity[c] = (capacity[c] ?? 0) * e.factor;
        } else if (e.type === 'report-delay') {
          delaySteps = Math.max(1, Math.ceil(e.seconds / dt - 1e-9));
        }
      }
      if (hist.length < delaySteps + 1) hist = [...hist, ...Array.from({ length: delaySteps + 1 - hist.length }, () => new Float64Array(C))];
      // 2. Reports of the live clusters, describing the load of delaySteps ago.
      const past = step - delaySteps >= 0 ? hist[(step - delaySteps) % hist.length] : undefined;
      for (let c = 0; c < C; c++) {
        if (alive[c] !== 1) continue;
        const cap = capacity[c] ?? 0;
        const l = past ? (past[c] ?? 0) : 0;
        table.receive({ cluster: w.clusterNames[c] ?? '', vips: [], capacity: cap, load: l, available: Math.max(0, cap - l), serversUp: cap > 0 ? 1 : 0, serversTotal: 1 }, nowMs);
      }
      steerer.beginStep(step, nowMs);
      // 3. Re-queries at TTL expiry.
      let changes = 0;
      let queries = 0;
      for (let u = 0; u < U; u++) {
        const end = cohortStart[u + 1] ?? 0;
        const base = u * C;
        for (let k = cohortStart[u] ?? 0; k < end; k++) {
          const due = next[k] ?? Infinity;
          if (due > t) continue;
          const n = cohortSize[k] ?? 0;
          const a = steerer.answer(u, cohortCls[k] ?? 0, n);
          const old = ans[k] ?? NONE;
          if (a !== old && a >= 0) {
            if (old !== NONE) {
              changes += n;
              count[base + old] = (count[base + old] ?? 0) - n;
            }
            count[base + a] = (count[base + a] ?? 0) + n;
            ans[k] = a;
          }
          queries += n;
          // The answer's TTL (the policy's, or the scenario's); at least a
          // second (TTL 0: the resolver asks again at the next step).
          const tt = ttlOf === undefined ? ttl : Math.max(1, ttlOf(u, cohortCls[k] ?? 0));
          next[k] = due + tt * Math.max(1, Math.ceil((t - due) / tt + 1e-9));
        }
      }
      // 4. Fluid demand over the step.
      this.regionDemand(t, demand);
      load.fill(0);
      let rttSum = 0;
      let served = 0;
      for (let u = 0; u < U; u++) {
        const f = (demand[w.unitRegion[u] ?? 0] ?? 0) * (unitDpp[u] ?? 0);
        unitDemand[u] = (demand[w.unitRegion[u] ?? 0] ?? 0) * (w.unitShare[u] ?? 0);
        const base = u * C;
        for (let c = 0; c < C; c++) {
          const n = count[base + c] ?? 0;
          if (n === 0) continue;
          const d = f * n;
          load[c] = (load[c] ?? 0) + d;
          if (alive[c] === 1) {
            rttSum += d * (rtt[base + c] ?? 0);
            served += d;
          }
        }
      }
      hist[step % hist.length]?.set(load);
      steerer.observeDemand?.(unitDemand);
      metrics.observe({ t, dt, load, capacity, alive, rttSum, served, changes, queries });
      // Oracle samples from the end of the warm-up on (until every resolver has asked once, a policy serves only part of the demand).
      if (step % this.oracleSteps === 0 && t >= ttl) {
        let o = this.oracleSamples.get(step);
        if (!o) {
          for (let c = 0; c < C; c++) oracleCap[c] = alive[c] === 1 ? (capacity[c] ?? 0) : 0;
          const r = this.#oracle(unitDemand, oracleCap);
          o = { t, rttMs: r.served > 0 ? r.cost / r.served : NaN, served: r.served, unserved: r.unserved, solveMs: r.solveMs };
          this.oracleSamples.set(step, o);
        }
        metrics.oracleSample(rttSum, served, o.rttMs * o.served, o.served);
      }
      winChanges += changes;
      winQueries += queries;
      winSteps++;
      if (step % this.seriesSteps === 0 || step === this.steps - 1) {
        series.t.push(t);
        for (let c = 0; c < C; c++) series.util[c]?.push(alive[c] === 1 && (capacity[c] ?? 0) > 0 ? (load[c] ?? 0) / (capacity[c] ?? 1) : null);
        series.rttMs.push(served > 0 ? rttSum / served : NaN);
        series.changesShare.push(w.prefixes > 0 ? (winChanges / w.prefixes) * (60 / (winSteps * dt)) : 0);
        let over = 0;
        for (let c = 0; c < C; c++) if (alive[c] === 1 && (load[c] ?? 0) > (capacity[c] ?? 0) * (1 + 1e-9)) over++;
        series.overloaded.push(over);
        series.queriesPerSecond.push(winQueries / (winSteps * dt));
        winChanges = 0;
        winQueries = 0;
        winSteps = 0;
      }
    }
    return { policy: name, summary: metrics.summary(), series, wallMs: performance.now() - started };
  }
}
