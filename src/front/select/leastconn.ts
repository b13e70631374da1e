/**
 * Weighted least connections (IPVS wlc): the eligible server with the
 * smallest active/weight. Compared by cross-multiplication (a.active *
 * b.weight < b.active * a.weight), as IPVS does, to avoid division. Ties
 * rotate: the scan starts after the previous choice, so equal servers take
 * turns instead of the first one taking every tie.
 */
import { eligible, type Backend, type Selector } from './backend.ts';

export class LeastConnections implements Selector {
  readonly method = 'leastconn';
  #last = -1;

  rebuild(_backends: readonly Backend[]): void {
    this.#last = -1;
  }

  pick(backends: readonly Backend[], _client: number): number {
    const n = backends.length;
    let best = -1;
    let bestB: Backend | undefined;
    for (let k = 1; k <= n; k++) {
      const i = (this.#last + k) % n;
      const b = backends[i];
      if (b === undefined || !eligible(b)) continue;
      if (bestB === undefined || b.active * bestB.weight < bestB.active * b.weight) {
        best = i;
        bestB = b;
      }
    }
    if (best >= 0) this.#last = best;
    return best;
  }
}
