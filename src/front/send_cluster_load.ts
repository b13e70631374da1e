/**
 * Cluster load to DNS (seed 000: "periodically ... or when load condition
 * changes significantly"): a cluster_load message every `everySeconds`, and
 * at once when available capacity moved by more than `changeFraction` of
 * the cluster's capacity since the last one sent.
 */
export interface ClusterLoadFigures {
  capacity: number;
  load: number;
  available: number;
  serversUp: number;
  serversTotal: number;
}

export class ClusterLoadReporter {
  readonly everyMs: number;
  readonly changeFraction: number;
  #lastSent = -Infinity;
  #lastAvailable = NaN;
  periodic = 0;
  onChange = 0;

  constructor(everySeconds: number, changeFraction: number) {
    this.everyMs = everySeconds * 1000;
    this.changeFraction = changeFraction;
  }

  /** Called every tick; returns why a message is due, or undefined. */
  due(f: ClusterLoadFigures, now: number): 'periodic' | 'change' | undefined {
    if (now - this.#lastSent >= this.everyMs) return 'periodic';
    const scale = Math.max(f.capacity, 1);
    if (Math.abs(f.available - this.#lastAvailable) > this.changeFraction * scale) return 'change';
    return undefined;
  }

  sent(f: ClusterLoadFigures, why: 'periodic' | 'change', now: number): void {
    this.#lastSent = now;
    this.#lastAvailable = f.available;
    if (why === 'periodic') this.periodic++;
    else this.onChange++;
  }
}
