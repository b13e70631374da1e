/**
 * Per-prefix demand as seen by the DNS server: the rate of queries for the
 * `mapping` names from each client prefix, smoothed (exponentially weighted,
 * half-life halfLifeSeconds) at each recompute. Counting is O(1) per query
 * (one Map lookup and an increment; a new prefix adds one entry). Bounded:
 * at most maxPrefixes; a new prefix beyond that evicts the oldest-created
 * one, counted.
 *
 * A query rate is a proxy for load: service.ts scales the rates into the
 * clusters' unit (new connections/s) before the solve.
 */
interface Counter {
  count: number;
  rate: number;
}

export class DemandMeter {
  readonly #map = new Map<string, Counter>();
  readonly #max: number;
  readonly #tauMs: number;
  #last: number;
  evicted = 0;

  constructor(maxPrefixes: number, halfLifeSeconds: number, now: number) {
    this.#max = maxPrefixes;
    this.#tauMs = (halfLifeSeconds * 1000) / Math.LN2;
    this.#last = now;
  }

  get size(): number {
    return this.#map.size;
  }

  note(key: string): void {
    this.add(key, 1);
  }

  /** `n` queries of `key` at once (a DNS worker's report, share.ts). */
  add(key: string, n: number): void {
    const e = this.#map.get(key);
    if (e !== undefined) {
      e.count += n;
      return;
    }
    if (this.#map.size >= this.#max) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) {
        this.#map.delete(oldest.value);
        this.evicted++;
      }
    }
    this.#map.set(key, { count: n, rate: 0 });
  }

  /**
   * A DNS worker's side (share.ts): the counts since the last call, and the
   * meter emptied (the primary smooths them; the worker keeps no rates).
   */
  drain(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [k, e] of this.#map) if (e.count > 0) out.set(k, e.count);
    this.#map.clear();
    return out;
  }

  /**
   * Folds the counts since the last call into the smoothed rates (per
   * second) and returns them; prefixes whose rate decayed below minRate are
   * forgotten. The first interval's rate is the plain count / interval.
   */
  update(now: number, minRate = 1e-3): Map<string, number> {
    const dt = now - this.#last;
    this.#last = now;
    const out = new Map<string, number>();
    if (dt <= 0) {
      for (const [k, e] of this.#map) if (e.rate > 0) out.set(k, e.rate);
      return out;
    }
    const alpha = 1 - Math.exp(-dt / this.#tauMs);
    for (const [k, e] of this.#map) {
      const inst = (e.count * 1000) / dt;
      e.rate = e.rate === 0 ? inst : e.rate + alpha * (inst - e.rate);
      e.count = 0;
      if (e.rate < minRate) this.#map.delete(k);
      else out.set(k, e.rate);
    }
    return out;
  }
}
