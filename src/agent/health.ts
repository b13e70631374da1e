/**
 * The server's health as its agent reports it (load_report's `health` and
 * `healthReason`), from the operator's verb (operator-state.ts) and the
 * agent's own check (health-check.ts). By precedence, the first that holds:
 *
 *   maint   the operator set maint (whatever the check says)
 *   down    the check says down
 *   drain   the operator set drain
 *   up      otherwise (the check passes, is pending, or is off)
 *
 * The same order as the front node's combination (src/front/health/
 * server-health.ts), so the front shows what the server says. A check
 * still pending (before its first result, bounded by its timeout at start)
 * does not say down.
 */
import type { CheckResultState } from './health-check.ts';
import type { OperatorVerb } from './operator-state.ts';

export type ReportedHealth = 'up' | 'down' | 'drain' | 'maint';
export const REPORTED_HEALTH: readonly ReportedHealth[] = ['up', 'down', 'drain', 'maint'];

export interface HealthInputs {
  readonly verb: OperatorVerb;
  readonly verbReason: string;
  readonly check: CheckResultState | 'off' | 'pending';
  readonly checkReason: string;
}

/** The reported state and its reason (at most 200 characters, the message's bound). */
export function reportedHealth(i: HealthInputs): { state: ReportedHealth; reason: string } {
  const by = (what: string, why: string): string => (why === '' ? what : `${what}: ${why}`);
  let r: { state: ReportedHealth; reason: string };
  if (i.verb === 'maint') r = { state: 'maint', reason: by('operator set maint', i.verbReason) };
  else if (i.check === 'down') r = { state: 'down', reason: by('check failed', i.checkReason) };
  else if (i.verb === 'drain') r = { state: 'drain', reason: by('operator set drain', i.verbReason) };
  else if (i.check === 'up') r = { state: 'up', reason: by('check passed', i.checkReason) };
  else r = { state: 'up', reason: i.check === 'pending' ? 'first check pending' : 'no check configured' };
  return { state: r.state, reason: r.reason.slice(0, 200) };
}

/**
 * Bounds the reports sent at once on a health change: at most one per
 * `minGapMs`; a change inside the gap is sent when the gap ends (one
 * pending send at most). Pure apart from the timer it is given.
 */
export class ReportPacer {
  readonly minGapMs: number;
  #last = -Infinity;
  #pending: NodeJS.Timeout | undefined;

  constructor(minGapMs: number) {
    this.minGapMs = minGapMs;
  }

  /** A report was sent (at interval or at once) at `now`. */
  sent(now: number): void {
    this.#last = now;
  }

  /** Sends now if the gap allows, else once when it ends. */
  request(now: number, send: () => void): void {
    if (this.#pending) return;
    const wait = this.#last + this.minGapMs - now;
    if (wait <= 0) {
      send();
      return;
    }
    this.#pending = setTimeout(() => {
      this.#pending = undefined;
      send();
    }, wait);
  }

  stop(): void {
    clearTimeout(this.#pending);
    this.#pending = undefined;
  }
}
