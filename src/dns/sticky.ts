/**
 * Stickiness: a client keeps its cluster while that cluster stays usable
 * (up, with free capacity), for up to stickySeconds after its last answer.
 * Without it, a client whose RTTs are close to equal could flip between
 * clusters and lose server-side state (sessions, caches) each time.
 *
 * Bounded: at most maxClients entries, the least recently answered evicted.
 *
 * This is the one piece of steering state that is each DNS server's own
 * (what it answered before), not derived from the front nodes' reports:
 * with several DNS servers, two of them agree on a sticky prefix when they
 * first answered it from the same reports, and may differ for up to
 * stickySeconds otherwise (docs/operations.md, "Several DNS servers").
 */
export class StickyTable {
  readonly #map = new Map<string, { cluster: number; at: number }>();
  readonly #max: number;
  readonly #ttlMs: number;
  evicted = 0;

  constructor(maxClients: number, stickySeconds: number) {
    this.#max = maxClients;
    this.#ttlMs = stickySeconds * 1000;
  }

  get size(): number {
    return this.#map.size;
  }

  /** The cluster index this client sticks to, or -1. */
  get(key: string, now: number): number {
    const e = this.#map.get(key);
    return e !== undefined && now - e.at <= this.#ttlMs ? e.cluster : -1;
  }

  set(key: string, cluster: number, now: number): void {
    if (this.#map.has(key)) this.#map.delete(key);
    else if (this.#map.size >= this.#max) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) {
        this.#map.delete(oldest.value);
        this.evicted++;
      }
    }
    this.#map.set(key, { cluster, at: now });
  }
}
