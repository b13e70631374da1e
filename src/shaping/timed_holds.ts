/**
 * Held requests that each wait until a time known when they are held: a
 * gatekeeper checkpoint's holds (the masters said when the client's next
 * request may pass; src/throttle/gatekeeper.ts). Unlike WaitQueue there is
 * no gate to ask again: a request leaves, admitted, at its own time.
 *
 * A binary min-heap of held slots ordered by release time; only the
 * earliest arms the one timer (the injected Scheduler), as in WaitQueue.
 * Times are the engine's clock (performance.now()), not the wall clock.
 *
 * Bounds: at most maxLength requests (add() refuses beyond, and the caller
 * checks `full` first); slots are HeldPool slots (< slots), so the arrays
 * are preallocated: no allocation per request.
 */
import type { Scheduler } from './queue.ts';

export interface HoldSink {
  /** A held request's time came: it leaves admitted. */
  released(held: number, now: number): void;
}

export class TimedHolds {
  readonly maxLength: number;
  readonly maxDelayMs: number;
  readonly counts = { enqueued: 0, refused: 0, admitted: 0, expired: 0 };
  readonly #at: Float64Array;
  readonly #since: Float64Array;
  readonly #heap: Int32Array;
  #size = 0;
  #armedAt = Infinity;
  readonly #sink: HoldSink;
  readonly #scheduler: Scheduler;

  /** `slots`: held-slot indexes are below it (HeldPool capacity + 1). */
  constructor(slots: number, maxLength: number, maxDelayMs: number, sink: HoldSink, scheduler: Scheduler) {
    this.maxLength = Math.min(maxLength, slots);
    this.maxDelayMs = maxDelayMs;
    this.#at = new Float64Array(slots);
    this.#since = new Float64Array(slots);
    this.#heap = new Int32Array(this.maxLength);
    this.#sink = sink;
    this.#scheduler = scheduler;
  }

  get length(): number {
    return this.#size;
  }

  get full(): boolean {
    return this.#size >= this.maxLength;
  }

  /** When the timer is armed for (Infinity: not armed). */
  get armedAt(): number {
    return this.#armedAt;
  }

  /** Holds `held` until `at`; false (counted) when full. */
  add(held: number, at: number, now: number): boolean {
    if (this.#size >= this.maxLength) {
      this.counts.refused++;
      return false;
    }
    this.#at[held] = at;
    this.#since[held] = now;
    let i = this.#size++;
    this.#heap[i] = held;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = this.#heap[parent] ?? 0;
      if ((this.#at[p] ?? 0) <= at) break;
      this.#heap[i] = p;
      i = parent;
    }
    this.#heap[i] = held;
    this.counts.enqueued++;
    this.#rearm();
    return true;
  }

  /** The timer: every request whose time has come leaves (bounded by the number held). */
  fire(now: number): void {
    this.#armedAt = Infinity;
    for (let guard = this.#size; guard > 0 && this.#size > 0; guard--) {
      const h = this.#heap[0] ?? 0;
      if ((this.#at[h] ?? 0) > now) break;
      this.#pop();
      this.counts.admitted++;
      this.#sink.released(h, now);
    }
    this.#rearm();
  }

  /** Hold time of the longest-held request, or undefined (status; slow path). */
  oldestSince(): number | undefined {
    let oldest = Infinity;
    for (let k = 0; k < this.#size; k++) oldest = Math.min(oldest, this.#since[this.#heap[k] ?? 0] ?? Infinity);
    return oldest === Infinity ? undefined : oldest;
  }

  #pop(): void {
    const last = this.#heap[--this.#size] ?? 0;
    if (this.#size === 0) return;
    const at = this.#at[last] ?? 0;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.#size) break;
      const r = l + 1;
      let c = l;
      if (r < this.#size && (this.#at[this.#heap[r] ?? 0] ?? 0) < (this.#at[this.#heap[l] ?? 0] ?? 0)) c = r;
      const child = this.#heap[c] ?? 0;
      if ((this.#at[child] ?? 0) >= at) break;
      this.#heap[i] = child;
      i = c;
    }
    this.#heap[i] = last;
  }

  #rearm(): void {
    const at = this.#size > 0 ? (this.#at[this.#heap[0] ?? 0] ?? Infinity) : Infinity;
    if (at === this.#armedAt) return;
    this.#armedAt = at;
    this.#scheduler.arm(at);
  }
}
