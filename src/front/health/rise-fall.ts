/**
 * HAProxy's and keepalived's debouncing of check results: an up server goes
 * down after `fall` failed checks in a row, a down one comes up after `rise`
 * passed checks in a row. A result that agrees with the current state
 * resets the opposite run, so isolated failures (one lost SYN) never take a
 * server out, and one lucky answer never brings a dead one back.
 *
 * Pure and synchronous: the scheduler feeds it results, tests feed it tables.
 */
export type RiseFallState = 'up' | 'down';

export class RiseFall {
  readonly rise: number;
  readonly fall: number;
  state: RiseFallState;
  /** Passed checks in a row (reset by a failure). */
  passes = 0;
  /** Failed checks in a row (reset by a pass). */
  failures = 0;

  constructor(rise: number, fall: number, initial: RiseFallState) {
    this.rise = rise;
    this.fall = fall;
    this.state = initial;
  }

  /** Feeds one result; returns true when it changed the state. */
  result(ok: boolean): boolean {
    if (ok) {
      this.passes++;
      this.failures = 0;
      if (this.state === 'down' && this.passes >= this.rise) {
        this.state = 'up';
        return true;
      }
    } else {
      this.failures++;
      this.passes = 0;
      if (this.state === 'up' && this.failures >= this.fall) {
        this.state = 'down';
        return true;
      }
    }
    return false;
  }

  /**
   * Down now, whatever the run of failures (the passive check's verdict:
   * health.refusedLimit). Up again only after `rise` passes, as after a
   * fall. Returns true when it changed the state.
   */
  markDown(): boolean {
    this.passes = 0;
    if (this.state === 'down') return false;
    this.state = 'down';
    return true;
  }
}
