/**
 * When each server's check runs: every `intervalMs` per target, with
 *  - spreading: targets added together with the same interval get first
 *    due times evenly spaced over one interval (1,000 servers checked every
 *    second start one millisecond apart, not all at once), and keep that
 *    phase afterwards;
 *  - bounded concurrency: at most `maxInFlight` checks run at a time; a due
 *    check beyond that waits in a FIFO and starts when one ends;
 *  - no pile-up: a target whose previous check is still running or waiting
 *    when the next is due skips that turn (counted), so a slow server never
 *    has two checks at once.
 *
 * Time comes from the caller (poll(now)), so tests drive it with a fake
 * clock; start() adds the real timer: one setTimeout armed for the next due
 * time (at least MIN_TICK_MS away), never one timer per target. Nothing
 * here is on the packet path: a check is one socket and its callbacks.
 */
import type { CheckResult } from './result.ts';

/** Shortest wait between two polls: at most 100 wakeups/s however many targets. */
export const MIN_TICK_MS = 10;
/** Checks in flight at most (sockets the checker holds open at once). */
export const DEFAULT_MAX_IN_FLIGHT = 64;

export interface ScheduledTarget {
  /** Identity across set() calls: a target with the same key keeps its phase. */
  readonly key: string;
  readonly intervalMs: number;
  run(): Promise<CheckResult>;
}

interface Entry<T extends ScheduledTarget> {
  target: T;
  nextAt: number;
  running: boolean;
  waiting: boolean;
  removed: boolean;
}

export class HealthScheduler<T extends ScheduledTarget> {
  readonly maxInFlight: number;
  readonly #onResult: (target: T, result: CheckResult, now: number) => void;
  readonly #now: () => number;
  #entries = new Map<string, Entry<T>>();
  readonly #waiting: Entry<T>[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #started = false;
  #stopped = false;
  inFlight = 0;
  /** Checks started, and turns skipped because the previous check of that target had not ended. */
  started = 0;
  skipped = 0;
  /** Most checks in flight at once (status: how close to the bound). */
  peakInFlight = 0;

  constructor(opts: { readonly maxInFlight?: number; readonly now: () => number; readonly onResult: (target: T, result: CheckResult, now: number) => void }) {
    this.maxInFlight = opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.#now = opts.now;
    this.#onResult = opts.onResult;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** When `key` is next due (tests, status). */
  nextAt(key: string): number | undefined {
    return this.#entries.get(key)?.nextAt;
  }

  /**
   * Replaces the set of targets: those whose key remains keep their phase
   * (and a running check's result still counts); removed ones stop (a
   * running check's result is dropped); new ones are spread over one
   * interval from now, per interval value.
   */
  set(targets: readonly T[]): void {
    const now = this.#now();
    const next = new Map<string, Entry<T>>();
    const fresh: T[] = [];
    for (const t of targets) {
      const e = this.#entries.get(t.key);
      if (e && !next.has(t.key) && e.target.intervalMs === t.intervalMs) {
        // Kept in place: a running or waiting check reports to the new target.
        e.target = t;
        next.set(t.key, e);
      } else fresh.push(t);
    }
    const byInterval = new Map<number, T[]>();
    for (const t of fresh) {
      const g = byInterval.get(t.intervalMs);
      if (g) g.push(t);
      else byInterval.set(t.intervalMs, [t]);
    }
    for (const [interval, group] of byInterval) {
      group.forEach((t, i) => next.set(t.key, { target: t, nextAt: now + (interval * i) / group.length, running: false, waiting: false, removed: false }));
    }
    for (const [key, e] of this.#entries) if (next.get(key) !== e) e.removed = true;
    for (let i = this.#waiting.length - 1; i >= 0; i--) if (this.#waiting[i]?.removed === true) this.#waiting.splice(i, 1);
    this.#entries = next;
    if (this.#started) this.#arm(0);
  }

  /** Starts every due check (within the bound); returns ms until the next due time (Infinity: none). */
  poll(): number {
    const now = this.#now();
    let soonest = Infinity;
    for (const e of this.#entries.values()) {
      if (e.nextAt <= now) {
        const interval = e.target.intervalMs;
        // Keep the phase; after a stall, the next turn after now.
        e.nextAt += interval;
        if (e.nextAt <= now) e.nextAt += Math.ceil((now - e.nextAt) / interval + 1e-9) * interval;
        if (e.running || e.waiting) this.skipped++;
        else if (this.inFlight < this.maxInFlight) this.#start(e);
        else {
          e.waiting = true;
          this.#waiting.push(e);
        }
      }
      if (e.nextAt < soonest) soonest = e.nextAt;
    }
    return soonest - now;
  }

  #start(e: Entry<T>): void {
    e.running = true;
    this.inFlight++;
    this.started++;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    let p: Promise<CheckResult>;
    try {
      p = e.target.run();
    } catch (err) {
      p = Promise.resolve({ outcome: 'error', reason: (err as Error).message });
    }
    p.then(
      (r) => {
        this.#ended(e, r);
      },
      (err: unknown) => {
        this.#ended(e, { outcome: 'error', reason: err instanceof Error ? err.message : String(err) });
      },
    );
  }

  #ended(e: Entry<T>, r: CheckResult): void {
    this.inFlight--;
    e.running = false;
    if (!e.removed && !this.#stopped) this.#onResult(e.target, r, this.#now());
    while (this.inFlight < this.maxInFlight && this.#waiting.length > 0 && !this.#stopped) {
      const w = this.#waiting.shift();
      if (w === undefined) break;
      w.waiting = false;
      if (!w.removed) this.#start(w);
    }
  }

  /** Runs the timer: polls when the next check is due. */
  start(): void {
    this.#started = true;
    this.#arm(0);
  }

  #arm(ms: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      const wait = this.poll();
      if (Number.isFinite(wait)) this.#arm(Math.max(MIN_TICK_MS, Math.ceil(wait)));
    }, ms);
    this.#timer.unref();
  }

  /** Stops the timer; results of checks still running are dropped. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#waiting.length = 0;
  }
}
