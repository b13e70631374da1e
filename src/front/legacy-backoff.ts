/**
 * How often the legacy resync reads the kernel's whole flow table
 * (flow-ends.ts): the records adopted at a start may belong to flows that
 * never report their end (created while no daemon listened, with the
 * default net.netfilter.nf_conntrack_events=2), so a resync frees those
 * whose flows are gone. Most adopted flows were created while the previous
 * daemon listened and do report their end: then every resync finds nothing
 * the events missed, and on a node that restarted over a million
 * long-lived flows each one still costs a read of the whole table (~1 s of
 * CPU) every reconcileSeconds for as long as the flows live.
 *
 * So the resync backs off while it finds nothing: after a legacy resync
 * that freed no record, the next comes two periods later, then four, up to
 * LEGACY_BACKOFF_MAX periods; one that freed any starts again at every
 * period. Cost of the bound: a record whose flow ended without an event
 * holds its server's count at most LEGACY_BACKOFF_MAX periods (8 min at
 * the default 30 s) instead of one.
 *
 * Pure: due() is asked once per period, done() told after each legacy
 * resync; table tests drive it (test/unit/legacy-backoff.test.ts).
 */

/** Most periods between two legacy resyncs. */
export const LEGACY_BACKOFF_MAX = 16;

export class LegacyBackoff {
  /** Periods from one legacy resync to the next (1: every period). */
  periods = 1;
  /** Periods the backoff skipped (status). */
  skipped = 0;
  #wait = 0;

  /** One period has passed with `legacy` legacy records: resync now? */
  due(legacy: number): boolean {
    if (legacy === 0) {
      // None left: a later start's adoption begins from every period again.
      this.periods = 1;
      this.#wait = 0;
      return false;
    }
    if (this.#wait > 0) {
      this.#wait--;
      this.skipped++;
      return false;
    }
    return true;
  }

  /** A legacy resync ended having freed `freed` records (flows gone without an event we saw). */
  done(freed: number): void {
    this.periods = freed > 0 ? 1 : Math.min(this.periods * 2, LEGACY_BACKOFF_MAX);
    this.#wait = this.periods - 1;
  }
}
