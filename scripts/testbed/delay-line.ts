/**
 * A delay line for NFQUEUE packet ids: the WAN namespace's stand-in for
 * netem (this kernel has none).
 *
 * Each packet carries its one-way delay (µs) in its mark, set by the WAN's
 * mangle rules per client/cluster path. Packets with the same delay form a
 * FIFO whose due times are non-decreasing (same delay, arrival order), so a
 * ring per delay class suffices: only heads are ever compared. Order within
 * a path is kept, as on a real link.
 *
 * A ~1 ms ticker runs while anything is held (no timer objects per packet);
 * a packet is released at the first tick at or after due - SLACK_MS, so
 * the error is within [-0.5, +1] ms plus event-loop latency.
 *
 * Invariants: held = sum of ring sizes; the ticker runs iff held > 0.
 */

export const SLACK_MS = 0.5;

export interface Ticker {
  start(fn: () => void): void;
  stop(): void;
}

export interface DelayLineOptions {
  readonly capacityPerClass: number;
  readonly maxClasses: number;
  now(): number;
  readonly ticker: Ticker;
  release(id: number): void;
  /** Called once after each tick that released something (to flush verdicts in one go). */
  afterRelease(): void;
}

class Ring {
  readonly delayUs: number;
  readonly ids: Uint32Array;
  readonly due: Float64Array;
  head = 0;
  size = 0;
  constructor(delayUs: number, capacity: number) {
    this.delayUs = delayUs;
    this.ids = new Uint32Array(capacity);
    this.due = new Float64Array(capacity);
  }
}

export class DelayLine {
  readonly #o: DelayLineOptions;
  readonly #rings: Ring[] = [];
  readonly #byDelay = new Map<number, Ring>();
  #held = 0;
  /** Packets refused because their class ring was full or too many classes existed. */
  overflows = 0;
  released = 0;

  constructor(opts: DelayLineOptions) {
    this.#o = opts;
  }

  get held(): number {
    return this.#held;
  }

  /** Holds packet `id` for `delayUs`; false if it cannot be held (caller releases it now). */
  push(id: number, delayUs: number): boolean {
    let ring = this.#byDelay.get(delayUs);
    if (ring === undefined) {
      if (this.#rings.length >= this.#o.maxClasses) {
        this.overflows++;
        return false;
      }
      ring = new Ring(delayUs, this.#o.capacityPerClass);
      this.#rings.push(ring);
      this.#byDelay.set(delayUs, ring);
    }
    const cap = ring.ids.length;
    if (ring.size === cap) {
      this.overflows++;
      return false;
    }
    const at = (ring.head + ring.size) % cap;
    ring.ids[at] = id;
    ring.due[at] = this.#o.now() + delayUs / 1000;
    ring.size++;
    if (this.#held++ === 0) this.#o.ticker.start(this.tick);
    return true;
  }

  /** Releases every packet that is due. Bound so it can be handed to a timer as is. */
  readonly tick = (): void => {
    const limit = this.#o.now() + SLACK_MS;
    let n = 0;
    for (const ring of this.#rings) {
      const cap = ring.ids.length;
      while (ring.size > 0 && (ring.due[ring.head] ?? 0) <= limit) {
        this.#o.release(ring.ids[ring.head] ?? 0);
        ring.head = (ring.head + 1) % cap;
        ring.size--;
        n++;
      }
    }
    this.#settle(n);
  };

  /** Releases everything now (shutdown). */
  releaseAll(): void {
    let n = 0;
    for (const ring of this.#rings) {
      const cap = ring.ids.length;
      while (ring.size > 0) {
        this.#o.release(ring.ids[ring.head] ?? 0);
        ring.head = (ring.head + 1) % cap;
        ring.size--;
        n++;
      }
    }
    this.#settle(n);
  }

  #settle(n: number): void {
    if (n === 0) return;
    this.#held -= n;
    this.released += n;
    this.#o.afterRelease();
    if (this.#held === 0) this.#o.ticker.stop();
  }
}

/** The real ticker: setInterval at 1 ms while active. */
export function intervalTicker(): Ticker {
  let handle: ReturnType<typeof setInterval> | undefined;
  return {
    start(fn) {
      handle ??= setInterval(fn, 1);
    },
    stop() {
      if (handle !== undefined) clearInterval(handle);
      handle = undefined;
    },
  };
}
