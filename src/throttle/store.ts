/**
 * Where the master keeps each identifier's GCRA state (its TAT, gcra.ts).
 * Two implementations: store_memory.ts (one master, state lost with it) and
 * store_redis.ts (several masters share it; one can die without losing it).
 *
 * Contract: charge() applies TAT := max(TAT, at) + T atomically for one
 * (domain, identifier) and returns the new TAT; charges of one identifier
 * apply in the order charge() was called. A state whose TAT has passed may
 * be dropped at any time (it is equivalent to none).
 */
import type { GcraRule } from './gcra.ts';

export interface ThrottleStore {
  readonly kind: 'memory' | 'redis';
  /** New TAT (ms since the epoch). Memory answers at once, Redis by promise. */
  charge(domain: string, identifier: string, at: number, rule: GcraRule): number | Promise<number>;
  /** Calls `visit` for every identifier of `domain` whose TAT is after `now` (resync). */
  scan(domain: string, now: number, visit: (identifier: string, tat: number) => void): Promise<number>;
  /** Identifiers tracked (memory: exact; Redis: keys under our prefix, approximate). */
  tracked(domain: string): number | Promise<number>;
  /** Drops passed states (memory); a no-op where the store expires them itself. */
  sweep(now: number): void;
  close(): Promise<void>;
}
