/**
 * Apache mod_lbmethod_byrequests, exactly (seed 003):
 *
 *   for each usable worker: lbstatus += lbfactor; total += lbfactor;
 *                           if lbstatus > candidate.lbstatus: candidate = worker
 *   candidate.lbstatus -= total
 *
 * The comparison is strict, so ties go to the earlier worker; disabled
 * workers neither accumulate nor count in the total. The sum of lbstatus of
 * usable workers stays constant, which is why the schedule repeats.
 * Here "usable" also excludes servers at capacity (they are full), and a
 * server in slow start has lbfactor weight x share.
 */
import { eligible, type Backend, type Selector } from './backend.ts';
import { smoothPick } from './smooth.ts';

export class ByRequests implements Selector {
  readonly method = 'byrequests';
  #status = new Float64Array(0);
  #weights = new Float64Array(0);

  rebuild(backends: readonly Backend[]): void {
    if (this.#status.length !== backends.length) {
      this.#status = new Float64Array(backends.length);
      this.#weights = new Float64Array(backends.length);
    }
  }

  pick(backends: readonly Backend[], _client: number): number {
    if (this.#status.length !== backends.length) this.rebuild(backends);
    const w = this.#weights;
    for (let i = 0; i < backends.length; i++) {
      const b = backends[i];
      w[i] = b !== undefined && eligible(b) ? b.weight * (b.share ?? 1) : 0;
    }
    return smoothPick(backends.length, this.#status, w);
  }

  /** lbstatus of each worker (for tests and status output). */
  status(): readonly number[] {
    return Array.from(this.#status);
  }
}
