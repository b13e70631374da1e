/**
 * The real Scheduler for a checkpoint queue: one Node timer, re-armed only
 * when the queue's earliest wake time changes (a new head, a hand-over),
 * never per packet. `clock` is the same clock the engine decides with
 * (performance.now()).
 */
import type { Scheduler } from './queue.ts';

export class TimerScheduler implements Scheduler {
  readonly #fire: (now: number) => void;
  readonly #clock: () => number;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(fire: (now: number) => void, clock: () => number = () => performance.now()) {
    this.#fire = fire;
    this.#clock = clock;
  }

  arm(at: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (at === Infinity) return;
    // Timers fire at whole-ms granularity, possibly late, never early: the
    // queue compares with the clock at firing time.
    this.#timer = setTimeout(this.#run, Math.max(0, Math.ceil(at - this.#clock())));
  }

  readonly #run = (): void => {
    this.#timer = undefined;
    this.#fire(this.#clock());
  };

  /** Stops the timer (shutdown, or the checkpoints were rebuilt). */
  close(): void {
    this.arm(Infinity);
  }
}
