/**
 * Sliding-window event counters over a period (HAProxy's freq_ctr idea:
 * the current period's count plus the previous period's, weighted by the
 * part of the previous period still inside the window). Struct-of-arrays:
 * one counter per index, no object per counter, no allocation per event.
 *
 * Exact semantics (times in ms from an injected clock, any real values):
 *  - A counter's periods are aligned on its first event: reset(i, t) starts
 *    period [t, t + P).
 *  - Rotation at time t (start s): if t - s >= 2P, both counts are 0 and the
 *    new period starts at t (the counter was idle for a whole window);
 *    else if t - s >= P, prev := curr, curr := 0, s := s + P.
 *  - Estimate at t (after rotation): E(t) = curr + floor(prev * r / P) with
 *    r = s + P - t, the part of the previous period still in the window.
 *    E is the number of events in the last P ms, under the assumption that
 *    the previous period's events were evenly spread.
 *  - admits(i, t, limit): E(t) < limit. A limit of N per period therefore
 *    lets exactly N events through in a burst, then one more each time the
 *    weighted previous count drops by one (every P/prev ms): a sustained
 *    load settles at N per P.
 *  - nextAdmitAt(i, t, limit): the least time t' >= t on the 1 ms grid
 *    above the exact boundary at which admits() would hold with no further
 *    events; see the method for the derivation.
 */
import { InvalidArgumentError } from '../errors/errors.ts';

export class FreqCounters {
  readonly periodMs: number;
  readonly #curr: Float64Array;
  readonly #prev: Float64Array;
  readonly #start: Float64Array;

  constructor(capacity: number, periodMs: number) {
    if (!(periodMs > 0)) throw new InvalidArgumentError(`periodMs must be > 0, got ${periodMs}`);
    this.periodMs = periodMs;
    this.#curr = new Float64Array(capacity);
    this.#prev = new Float64Array(capacity);
    this.#start = new Float64Array(capacity);
  }

  /** Starts counter i afresh at time now (a new key). */
  reset(i: number, now: number): void {
    this.#curr[i] = 0;
    this.#prev[i] = 0;
    this.#start[i] = now;
  }

  #rotate(i: number, now: number): void {
    const p = this.periodMs;
    const s = this.#start[i] ?? 0;
    const age = now - s;
    if (age < p) return;
    if (age >= 2 * p) {
      this.#prev[i] = 0;
      this.#curr[i] = 0;
      this.#start[i] = now;
      return;
    }
    this.#prev[i] = this.#curr[i] ?? 0;
    this.#curr[i] = 0;
    this.#start[i] = s + p;
  }

  /** E(t): events in the last period (see the file comment). */
  estimate(i: number, now: number): number {
    this.#rotate(i, now);
    const p = this.periodMs;
    const r = (this.#start[i] ?? 0) + p - now;
    return (this.#curr[i] ?? 0) + Math.floor(((this.#prev[i] ?? 0) * r) / p);
  }

  /** Counts one event at time now. */
  add(i: number, now: number): void {
    this.#rotate(i, now);
    this.#curr[i] = (this.#curr[i] ?? 0) + 1;
  }

  /** Whether one more event at `now` stays within `limit` per period. */
  admits(i: number, now: number, limit: number): boolean {
    return this.estimate(i, now) < limit;
  }

  /** admits() then add() if it does: one call on the hot path. */
  take(i: number, now: number, limit: number): boolean {
    if (this.estimate(i, now) >= limit) return false;
    this.#curr[i] = (this.#curr[i] ?? 0) + 1;
    return true;
  }

  /**
   * Least time >= now when admits(i, t, limit) holds if no event is added
   * meanwhile. With c = curr, q = prev, k = limit - 1 - c:
   *  - k >= 0: admitted iff floor(q r / P) <= k iff r < (k + 1) P / q, i.e.
   *    t > b = s + P - (k + 1) P / q. The answer is now if now > b, else
   *    floor(b) + 1 (the first whole ms past the boundary).
   *  - k < 0 (c >= limit): nothing until the next period, where q' = c and
   *    k' = limit - 1, so b = s + 2P - limit P / c (>= s + P).
   * The result is exact for integer-ms clocks; for fractional clocks it is
   * within 1 ms after the boundary (never before it).
   */
  nextAdmitAt(i: number, now: number, limit: number): number {
    this.#rotate(i, now);
    const p = this.periodMs;
    const c = this.#curr[i] ?? 0;
    const q = this.#prev[i] ?? 0;
    const s = this.#start[i] ?? 0;
    const k = limit - 1 - c;
    let b: number;
    if (k >= 0) {
      if (q === 0) return now;
      b = s + p - ((k + 1) * p) / q;
    } else {
      if (limit <= 0) return Infinity;
      b = s + 2 * p - (limit * p) / c;
    }
    return now > b ? now : Math.floor(b) + 1;
  }

  /** Events per second, from the estimate (status and metrics). */
  ratePerSecond(i: number, now: number): number {
    return (this.estimate(i, now) * 1000) / this.periodMs;
  }
}
