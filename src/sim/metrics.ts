/**
 * The steering quality metrics of issue 24, part 2, accumulated step by
 * step (each step is `dt` seconds of fluid demand at the step's rates):
 *
 *   (a) demand-weighted mean RTT of the served demand, and the same at the
 *       oracle's sample steps against the oracle's (ratio > 1: worse);
 *   (b) overload: seconds that a live cluster's load exceeded its capacity
 *       while another live cluster had room (load below capacity), summed
 *       over clusters (cluster-seconds);
 *   (c) stability: answer changes (a re-query answered with another cluster
 *       than the prefix's previous answer) as a share of all prefixes per
 *       minute, averaged over the steady-state steps (outside the excluded
 *       windows: warm-up and after events), with the worst steady step;
 *   (d) recovery: after a cluster is lost, the time until no prefix is
 *       answered with it any more (its demand fully re-served elsewhere),
 *       at step resolution;
 *   (e) utilization spread: per step, over live clusters with capacity,
 *       max − min and the standard deviation of load / capacity, averaged
 *       over time.
 *
 * Pure: arrays in, numbers out; no clock.
 */

export interface StepObservation {
  readonly t: number;
  readonly dt: number;
  /** Demand answered with each cluster (new connections/s), served or not. */
  readonly load: Float64Array;
  readonly capacity: Float64Array;
  /** 1 while the cluster is alive (serves), 0 once lost. */
  readonly alive: Uint8Array;
  /** Σ demand × RTT over served demand, and the served demand (demand answered with a live cluster). */
  readonly rttSum: number;
  readonly served: number;
  /** Prefixes whose answer changed this step; re-queries this step. */
  readonly changes: number;
  readonly queries: number;
}

export interface Window {
  readonly from: number;
  readonly to: number;
}

export interface QualitySummary {
  readonly meanRttMs: number;
  readonly meanRttAtOracleSamplesMs: number;
  readonly oracleRttMs: number;
  /** meanRttAtOracleSamples / oracleRtt. */
  readonly rttVsOracle: number;
  readonly overloadClusterSeconds: number;
  /** Demand-seconds answered with a lost cluster (clients failing). */
  readonly unservedDemandSeconds: number;
  readonly steadyChangesPerMinuteShare: number;
  readonly steadyChangesPerMinuteShareMax: number;
  readonly steadySeconds: number;
  /** Per lost cluster: seconds from the loss until nothing is answered with it (null: not within the run). */
  readonly recoverySeconds: readonly { cluster: number; at: number; seconds: number | null }[];
  readonly utilSpreadMean: number;
  readonly utilStdMean: number;
  readonly queriesPerSecond: number;
}

export class QualityMetrics {
  readonly #prefixes: number;
  readonly #excluded: readonly Window[];
  #rttSum = 0;
  #served = 0;
  #unserved = 0;
  #sampleRttSum = 0;
  #sampleServed = 0;
  #oracleCost = 0;
  #oracleServed = 0;
  #overload = 0;
  #steadyShareSum = 0;
  #steadyShareMax = 0;
  #steadySeconds = 0;
  #spreadSum = 0;
  #stdSum = 0;
  #utilSeconds = 0;
  #queries = 0;
  #seconds = 0;
  readonly #losses: { cluster: number; at: number; seconds: number | null }[] = [];

  constructor(prefixes: number, excluded: readonly Window[]) {
    this.#prefixes = prefixes;
    this.#excluded = excluded;
  }

  isSteady(t: number): boolean {
    for (const w of this.#excluded) if (t >= w.from && t < w.to) return false;
    return true;
  }

  /** A cluster is lost at `at` (recovery is timed from here). */
  lost(cluster: number, at: number): void {
    this.#losses.push({ cluster, at, seconds: null });
  }

  observe(o: StepObservation): void {
    const { dt, load, capacity, alive } = o;
    this.#seconds += dt;
    this.#rttSum += o.rttSum * dt;
    this.#served += o.served * dt;
    this.#queries += o.queries;
    const C = load.length;
    let room = 0;
    let min = Infinity;
    let max = -Infinity;
    let sum = 0;
    let sum2 = 0;
    let n = 0;
    for (let c = 0; c < C; c++) {
      const cap = capacity[c] ?? 0;
      const l = load[c] ?? 0;
      if (alive[c] !== 1) {
        this.#unserved += l * dt;
        continue;
      }
      if (cap <= 0) continue;
      if (l < cap) room++;
      const u = l / cap;
      min = Math.min(min, u);
      max = Math.max(max, u);
      sum += u;
      sum2 += u * u;
      n++;
    }
    // (b): an overloaded cluster is never one with room, so "another had room" is room > 0.
    if (room > 0) {
      for (let c = 0; c < C; c++) {
        const cap = capacity[c] ?? 0;
        if (alive[c] === 1 && cap > 0 && (load[c] ?? 0) > cap * (1 + 1e-9)) this.#overload += dt;
      }
    }
    if (n > 0) {
      const mean = sum / n;
      this.#spreadSum += (max - min) * dt;
      this.#stdSum += Math.sqrt(Math.max(0, sum2 / n - mean * mean)) * dt;
      this.#utilSeconds += dt;
    }
    if (this.isSteady(o.t) && this.#prefixes > 0) {
      const share = (o.changes / this.#prefixes) * (60 / dt);
      this.#steadyShareSum += share * dt;
      this.#steadyShareMax = Math.max(this.#steadyShareMax, share);
      this.#steadySeconds += dt;
    }
    for (const l of this.#losses) {
      if (l.seconds === null && o.t >= l.at && (load[l.cluster] ?? 0) === 0) l.seconds = o.t - l.at;
    }
  }

  /** At an oracle sample step: the policy's Σ demand × RTT and served demand, and the oracle's cost and served demand. */
  oracleSample(rttSum: number, served: number, oracleCost: number, oracleServed: number): void {
    this.#sampleRttSum += rttSum;
    this.#sampleServed += served;
    this.#oracleCost += oracleCost;
    this.#oracleServed += oracleServed;
  }

  summary(): QualitySummary {
    const meanAt = this.#sampleServed > 0 ? this.#sampleRttSum / this.#sampleServed : NaN;
    const oracle = this.#oracleServed > 0 ? this.#oracleCost / this.#oracleServed : NaN;
    return {
      meanRttMs: this.#served > 0 ? this.#rttSum / this.#served : NaN,
      meanRttAtOracleSamplesMs: meanAt,
      oracleRttMs: oracle,
      rttVsOracle: meanAt / oracle,
      overloadClusterSeconds: this.#overload,
      unservedDemandSeconds: this.#unserved,
      steadyChangesPerMinuteShare: this.#steadySeconds > 0 ? this.#steadyShareSum / this.#steadySeconds : NaN,
      steadyChangesPerMinuteShareMax: this.#steadyShareMax,
      steadySeconds: this.#steadySeconds,
      recoverySeconds: this.#losses.map((l) => ({ ...l })),
      utilSpreadMean: this.#utilSeconds > 0 ? this.#spreadSum / this.#utilSeconds : NaN,
      utilStdMean: this.#utilSeconds > 0 ? this.#stdSum / this.#utilSeconds : NaN,
      queriesPerSecond: this.#seconds > 0 ? this.#queries / this.#seconds : 0,
    };
  }
}
