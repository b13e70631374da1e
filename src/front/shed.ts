/**
 * What the front node sheds, by reason, in one place: `sluice status`
 * (`shed`), /metrics (`sluice_front_shed_total{reason}`) and a log line
 * written at most once per interval with what was shed since the previous
 * one. Each reason is a counter kept elsewhere (the engine, the queue's and
 * the log group's readers, the connection table); this module only names
 * and sums them, off the packet path (status, scrape, a 1 s timer).
 *
 *   no_target        a SYN with no server and no overflow cluster (dropped)
 *   table_full       a connection decided but not recorded (the table at
 *                    connections.max: the kernel still carries it)
 *   malformed        queued packets the parser refused (dropped)
 *   no_record        a non-SYN without a flow or a record (dropped)
 *   teardown_no_record  a FIN or RST without a flow or a record (dropped)
 *   unexpected       packets the rules should not have queued (dropped)
 *   checkpoint       SYNs a checkpoint rejected (reset or dropped)
 *   queue_lost       packets the queue's socket dropped (the kernel passed
 *                    them fail-open, unsteered: the fallback's)
 *   log_lost         FIN/RST/SYN copies the log group's socket dropped
 *                    (records stay until reconcile, or are missing)
 * SYN cookies are the kernel's: /proc/net/stat/synproxy counts them.
 */
import type { EngineCounters } from './engine.ts';

export const SHED_REASONS = ['no_target', 'table_full', 'malformed', 'no_record', 'teardown_no_record', 'unexpected', 'checkpoint', 'queue_lost', 'log_lost'] as const;
export type ShedReason = (typeof SHED_REASONS)[number];

export function shedCounts(c: EngineCounters, queueLost: number, logLost: number): Record<ShedReason, number> {
  let malformed = 0;
  for (const n of c.malformed) malformed += n;
  return {
    no_target: c.noTarget,
    table_full: c.untracked,
    malformed,
    no_record: c.noRecord,
    teardown_no_record: c.teardownNoRecord,
    unexpected: c.unexpectedDropped,
    checkpoint: c.shapingRejected,
    queue_lost: queueLost,
    log_lost: logLost,
  };
}

/** What this needs of a pino Logger. */
export interface ShedLogger {
  warn(obj: Record<string, unknown>, msg: string): void;
}

export const SHED_LOG_INTERVAL_MS = 10_000;

/**
 * The rate-limited log of shedding: poll() from a timer with the current
 * totals; a line at most every `minIntervalMs`, carrying each reason's count
 * since the previous line (none when nothing was shed).
 */
export class ShedLog {
  readonly #log: ShedLogger;
  readonly #minIntervalMs: number;
  #reported: Record<string, number> | undefined;
  #lastLineAt = -Infinity;

  constructor(log: ShedLogger, minIntervalMs = SHED_LOG_INTERVAL_MS) {
    this.#log = log;
    this.#minIntervalMs = minIntervalMs;
  }

  poll(totals: Record<ShedReason, number>, nowMs: number): boolean {
    const prev = this.#reported;
    if (prev === undefined) {
      // The first reading is the baseline (counts from before, e.g. a replaced queue's).
      this.#reported = { ...totals };
      return false;
    }
    if (nowMs - this.#lastLineAt < this.#minIntervalMs) return false;
    const since: Record<string, number> = {};
    let any = false;
    for (const r of SHED_REASONS) {
      // A counter that went back (a reopened queue) counts from 0 again.
      const d = totals[r] - (prev[r] ?? 0);
      const delta = d < 0 ? totals[r] : d;
      if (delta > 0) {
        since[r] = delta;
        any = true;
      }
    }
    if (!any) return false;
    this.#log.warn({ shed: since }, 'shedding: packets or connections dropped, unrecorded or lost since the previous line (counts by reason; status `shed`, metric sluice_front_shed_total)');
    this.#reported = { ...totals };
    this.#lastLineAt = nowMs;
    return true;
  }
}
