/**
 * The log line for packets lost to the queue's socket (QueueStats.lost):
 * polled from a timer, never from the packet path, and written at most once
 * per `minIntervalMs`, carrying everything lost since the previous line. A
 * flood that overruns the socket for minutes writes one line per interval,
 * not one per overrun.
 */
/** What this needs of a pino Logger. */
export interface WarnLog {
  warn(obj: Record<string, unknown>, msg: string): void;
}

export const LOSS_LOG_INTERVAL_MS = 10_000;

export class QueueLossLog {
  readonly #log: WarnLog;
  readonly #minIntervalMs: number;
  /** `lost` as of the previous line (or the first poll). */
  #reported = -1;
  #lastLineAt = -Infinity;

  constructor(log: WarnLog, minIntervalMs = LOSS_LOG_INTERVAL_MS) {
    this.#log = log;
    this.#minIntervalMs = minIntervalMs;
  }

  /** Given the queue's `lost` total (undefined: queue not open) and a monotonic time; true if a line was written. */
  poll(queue: number, lost: number | undefined, overruns: number, nowMs: number): boolean {
    if (lost === undefined) return false;
    // A reopened queue counts from 0 again.
    if (this.#reported < 0 || lost < this.#reported) this.#reported = 0;
    const since = lost - this.#reported;
    if (since === 0 || nowMs - this.#lastLineAt < this.#minIntervalMs) return false;
    this.#log.warn(
      { queue, lost: since, lostTotal: lost, overruns },
      'packets lost before reaching the daemon (socket receive buffer full): the kernel accepted them unsteered (fail-open); no verdict is owed',
    );
    this.#reported = lost;
    this.#lastLineAt = nowMs;
    return true;
  }
}
