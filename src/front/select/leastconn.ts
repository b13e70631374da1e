/**
 * Weighted least connections (IPVS wlc): the eligible server with the
 * smallest active/weight. Compared by cross-multiplication (a.active *
 * b.weight < b.active * a.weight), as IPVS does, to avoid division. Ties
 * rotate: the scan starts after the previous choice, so equal servers take
 * turns instead of the first one taking every tie.
 */
import { eligible, type Backend, type Selector } from './backend.ts';

/**
 * a.active / a.weight < b.active / b.weight, cross-multiplied. A server in
 * slow start (share < 1) counts as (active + 1) / (weight x share),
 * HAProxy's leastconn key: with the plain ratio an idle ramping server
 * (0 active) would win every pick however small its share.
 */
function less(a: Backend, b: Backend): boolean {
  const sa = a.share ?? 1;
  const sb = b.share ?? 1;
  const ka = sa < 1 ? a.active + 1 : a.active;
  const kb = sb < 1 ? b.active + 1 : b.active;
  return ka * b.weight * sb < kb * a.weight * sa;
}

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
      if (bestB === undefined || less(b, bestB)) {
        best = i;
        bestB = b;
      }
    }
    if (best >= 0) this.#last = best;
    return best;
  }
}
