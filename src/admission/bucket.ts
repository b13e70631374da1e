/**
 * Seed 002's rate-limiting bucket: a sliding window of one second that
 * starts with the first request of positive weight out of a quiesce state
 * (idle, no active window), and lasts until the next quiesce state.
 *
 * Windows follow each other every `windowMs` from that first request (not
 * from the wall clock's second), so a burst after an idle period gets the
 * whole limit at once. Within the current window the tokens taken are
 * `cur`; those of the window before are `prev`. The tokens counted against
 * the limit at time t are
 *
 *     cur + prev * (1 - (t - start) / windowMs)
 *
 * i.e. the previous window's tokens weighted by how much of it the last
 * second still overlaps (the sliding part, as HAProxy's freq_ctr does for
 * fixed periods). A request of cost c is admitted when that plus c does not
 * exceed the limit. This bounds the average rate over any one-second span
 * near `limit`, whatever the shape of the arrivals.
 *
 * Quiesce: once a whole window passed with nothing taken (prev and cur both
 * 0 after moving on), the bucket forgets its window; the next request
 * starts a new one at its own time.
 *
 * Invariants: 0 <= cur, 0 <= prev; start < 0 exactly in quiesce. The limit
 * may change at any time (a cluster allocation); tokens already taken stay
 * counted. A limit of Infinity admits everything (still counted, for rates).
 * No allocation: plain numbers; time is the caller's (tests inject it).
 */
export class SlidingBucket {
  limit: number;
  readonly windowMs: number;
  /** Start of the current window (ms), or -1 in quiesce. */
  start = -1;
  cur = 0;
  prev = 0;

  constructor(limit: number, windowMs = 1000) {
    this.limit = limit;
    this.windowMs = windowMs;
  }

  get quiesced(): boolean {
    return this.start < 0;
  }

  /** Moves the window on to `now` (no-op in quiesce or within the window). */
  advance(now: number): void {
    if (this.start < 0) return;
    const w = this.windowMs;
    const k = Math.floor((now - this.start) / w);
    if (k <= 0) return;
    if (k === 1) {
      this.prev = this.cur;
      this.start += w;
    } else {
      this.prev = 0;
      this.start += k * w;
    }
    this.cur = 0;
    if (this.prev === 0) this.start = -1;
  }

  /** Tokens counted against the limit at `now` (after advance(now)). */
  used(now: number): number {
    if (this.start < 0) return 0;
    const left = 1 - (now - this.start) / this.windowMs;
    return this.cur + this.prev * (left > 0 ? left : 0);
  }

  /** Whether `cost` more tokens fit at `now` (advances the window). */
  fits(cost: number, now: number): boolean {
    if (cost <= 0) return true;
    this.advance(now);
    return this.used(now) + cost <= this.limit;
  }

  /** Takes `cost` tokens (after fits() said yes, or to count regardless). */
  take(cost: number, now: number): void {
    if (cost <= 0) return;
    this.advance(now);
    if (this.start < 0) this.start = now;
    this.cur += cost;
  }

  /** fits() then take(): one bucket on its own. */
  admit(cost: number, now: number): boolean {
    if (!this.fits(cost, now)) return false;
    this.take(cost, now);
    return true;
  }
}
