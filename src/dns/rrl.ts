/**
 * Response rate limiting (the idea of BIND's RRL) against reflection: a
 * spoofed-source flood makes us send answers to a victim, so responses over
 * UDP to one client prefix are limited to responsesPerSecond (token bucket,
 * burst of one second's worth). Over the limit a response is dropped, except
 * every slip-th one, which is sent truncated (TC, no records): a real client
 * behind that prefix retries over TCP, which a spoofer cannot complete, so
 * legitimate clients still get answers while the reflected volume stays
 * tiny. slip 0 drops them all. TCP responses are never limited.
 *
 * Bounded: at most maxEntries prefixes; beyond that the oldest entry is
 * dropped (an attacker cycling prefixes only resets buckets of prefixes that
 * are quiet anyway).
 */
export const RrlVerdict = { SEND: 0, DROP: 1, SLIP: 2 } as const;
export type RrlVerdict = (typeof RrlVerdict)[keyof typeof RrlVerdict];

interface Bucket {
  tokens: number;
  last: number;
  over: number;
}

export class ResponseRateLimiter {
  readonly #map = new Map<string, Bucket>();
  readonly #rate: number;
  readonly #slip: number;
  readonly #max: number;
  dropped = 0;
  slipped = 0;

  constructor(opts: { responsesPerSecond: number; slip: number; maxEntries: number }) {
    this.#rate = opts.responsesPerSecond;
    this.#slip = opts.slip;
    this.#max = opts.maxEntries;
  }

  get size(): number {
    return this.#map.size;
  }

  check(key: string, now: number): RrlVerdict {
    let b = this.#map.get(key);
    if (!b) {
      if (this.#map.size >= this.#max) {
        const oldest = this.#map.keys().next();
        if (oldest.done !== true) this.#map.delete(oldest.value);
      }
      b = { tokens: this.#rate, last: now, over: 0 };
      this.#map.set(key, b);
    } else {
      b.tokens = Math.min(this.#rate, b.tokens + ((now - b.last) / 1000) * this.#rate);
      b.last = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return RrlVerdict.SEND;
    }
    b.over++;
    if (this.#slip > 0 && b.over % this.#slip === 0) {
      this.slipped++;
      return RrlVerdict.SLIP;
    }
    this.dropped++;
    return RrlVerdict.DROP;
  }
}
