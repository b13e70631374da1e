/**
 * New connections per second per server and per service, as
 * `ipvsadm -Ln --rate` shows CPS: derived from the daemon's monotonic
 * `decided` counters, sampled on the daemon's own tick (once a second,
 * never per packet), over a sliding window of the last `windowSamples`
 * samples.
 *
 *   rate = (newest count - oldest count) / (newest time - oldest time)
 *
 * One clock (the caller's, ms) stamps every sample, so no two processes'
 * clocks are compared. A key not sampled in a tick is forgotten (its
 * server or service is gone); a count that went down (a server removed and
 * added back starts at 0) restarts that key's window.
 */
interface Ring {
  readonly t: Float64Array;
  readonly v: Float64Array;
  /** Samples held (<= capacity). */
  n: number;
  /** Index of the next write. */
  head: number;
  /** The tick that last sampled it. */
  tick: number;
}

export class RateWindow {
  readonly #capacity: number;
  readonly #rings = new Map<string, Ring>();
  #tick = 0;

  /** `windowSamples` >= 2: the rate spans windowSamples - 1 intervals. */
  constructor(windowSamples: number) {
    this.#capacity = Math.max(2, Math.floor(windowSamples));
  }

  /** Starts a tick: keys not sampled before the next begin() are forgotten then. */
  begin(): void {
    for (const [k, r] of this.#rings) if (r.tick !== this.#tick) this.#rings.delete(k);
    this.#tick++;
  }

  sample(key: string, count: number, nowMs: number): void {
    let r = this.#rings.get(key);
    if (r) {
      const last = r.v[(r.head + this.#capacity - 1) % this.#capacity] ?? 0;
      if (count < last) r.n = 0;
    } else {
      r = { t: new Float64Array(this.#capacity), v: new Float64Array(this.#capacity), n: 0, head: 0, tick: this.#tick };
      this.#rings.set(key, r);
    }
    r.t[r.head] = nowMs;
    r.v[r.head] = count;
    r.head = (r.head + 1) % this.#capacity;
    if (r.n < this.#capacity) r.n++;
    r.tick = this.#tick;
  }

  /** Per second over the window; 0 until a key has two samples. */
  rate(key: string): number {
    const r = this.#rings.get(key);
    if (!r || r.n < 2) return 0;
    const newest = (r.head + this.#capacity - 1) % this.#capacity;
    const oldest = (r.head + this.#capacity - r.n) % this.#capacity;
    const dt = (r.t[newest] ?? 0) - (r.t[oldest] ?? 0);
    return dt > 0 ? (((r.v[newest] ?? 0) - (r.v[oldest] ?? 0)) * 1000) / dt : 0;
  }

  get size(): number {
    return this.#rings.size;
  }
}

/** The keys the daemon samples under. */
export const serviceRateKey = (service: string): string => service;
export const serverRateKey = (service: string, server: string): string => `${service}\u0000${server}`;
