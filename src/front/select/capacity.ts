/**
 * Seed 000's method: each new connection goes to a server in proportion to
 * its remaining capacity (capacity - active). The proportion is realised by
 * smooth weighted round robin (the byrequests/nginx scheme) whose weights are
 * re-read on every pick, so the spread follows load as it changes, with no
 * randomness: the same state always gives the same choice.
 *
 * A server at or above capacity has weight 0 and is skipped; when every
 * server is so, pick() returns -1 and the front node overflows to another
 * cluster (seed 000's "load on each server > capacity").
 */
import type { Backend, Selector } from './backend.ts';

export class CapacityProportional implements Selector {
  readonly method = 'capacity';
  #current = new Float64Array(0);

  rebuild(backends: readonly Backend[]): void {
    if (this.#current.length !== backends.length) this.#current = new Float64Array(backends.length);
  }

  pick(backends: readonly Backend[], _client: number): number {
    if (this.#current.length !== backends.length) this.rebuild(backends);
    const cur = this.#current;
    let best = -1;
    let total = 0;
    for (let i = 0; i < backends.length; i++) {
      const b = backends[i];
      if (b === undefined || !b.usable) continue;
      const remaining = b.capacity - b.active;
      if (!(remaining > 0)) continue;
      // Infinity capacity would swamp the sums: treat it as weight 1 relative
      // to finite ones only when all are infinite (validated configs avoid it).
      const w = Number.isFinite(remaining) ? remaining : 1;
      cur[i] = (cur[i] ?? 0) + w;
      total += w;
      if (best < 0 || (cur[i] ?? 0) > (cur[best] ?? 0)) best = i;
    }
    if (best >= 0) cur[best] = (cur[best] ?? 0) - total;
    return best;
  }
}
