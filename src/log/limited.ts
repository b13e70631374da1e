/**
 * Log lines about untrusted input are rate limited: a flood of bad packets,
 * queries or messages must not become a flood of log lines (the disk and the
 * log pipeline are resources too). At most one line per key per interval;
 * the lines dropped in between are reported as `suppressed` on the next one.
 * Counters, not logs, are the complete record.
 */
import type { Logger } from './logger.ts';

export class LimitedLog {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #state = new Map<string, { last: number; suppressed: number }>();

  constructor(log: Logger, intervalMs = 1000) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  warn(key: string, fields: Record<string, unknown>, msg: string, now: number = Date.now()): void {
    let s = this.#state.get(key);
    if (!s) {
      if (this.#state.size >= 1024) this.#state.clear(); // keys are reasons, few; bound anyway
      s = { last: -Infinity, suppressed: 0 };
      this.#state.set(key, s);
    }
    if (now - s.last < this.#intervalMs) {
      s.suppressed++;
      return;
    }
    this.#log.warn({ ...fields, suppressed: s.suppressed }, msg);
    s.last = now;
    s.suppressed = 0;
  }
}
