/**
 * Seed 000's method: each new connection goes to a server in proportion to
 * its remaining capacity (capacity - load). The proportion is realised by
 * smooth weighted round robin (the byrequests/nginx scheme) whose weights are
 * re-read on every pick, so the spread follows load as it changes, with no
 * randomness: the same state always gives the same choice.
 *
 * A server in slow start gets its remaining capacity times its share.
 * A server at or above capacity has weight 0 and is skipped; when every
 * server is so, pick() returns -1 and the front node overflows to another
 * cluster (seed 000's "load on each server > capacity").
 */
import type { Backend, Selector } from './backend.ts';
import { smoothPick } from './smooth.ts';

export class CapacityProportional implements Selector {
  readonly method = 'capacity';
  #current = new Float64Array(0);
  #weights = new Float64Array(0);

  rebuild(backends: readonly Backend[]): void {
    if (this.#current.length !== backends.length) {
      this.#current = new Float64Array(backends.length);
      this.#weights = new Float64Array(backends.length);
    }
  }

  pick(backends: readonly Backend[], _client: number): number {
    if (this.#current.length !== backends.length) this.rebuild(backends);
    const w = this.#weights;
    for (let i = 0; i < backends.length; i++) {
      const b = backends[i];
      const remaining = b !== undefined && b.usable ? b.capacity - b.load : 0;
      // An unlimited server counts as weight 1 (validated configs give the
      // capacity method finite capacities).
      w[i] = remaining > 0 ? (Number.isFinite(remaining) ? remaining : 1) * (b?.share ?? 1) : 0;
    }
    return smoothPick(backends.length, this.#current, w);
  }
}
