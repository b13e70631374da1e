/**
 * One mapping table for every DNS worker (workers.ts, issue 25): the
 * primary alone computes it, from the demand its workers saw, and sends
 * the workers what they answer from. The pieces here are pure (no IPC):
 *
 *   demand  a worker's query counts per prefix since its last report, as a
 *           flat array [key, count, key, count, ...] (a JSON array of
 *           strings and numbers: the cheapest form IPC's JSON serialises),
 *           at most `limit` prefixes (the busiest; ties by key), sent when
 *           the primary asks, once per recompute. The primary adds every
 *           worker's counts into its one DemandMeter, which then smooths
 *           them exactly as a single process does.
 *   table   what a worker needs of an entry is its cluster and TTL (the
 *           policy's O(1) lookup): the primary sends the entries whose
 *           cluster or TTL changed and the keys that left, flat
 *           [key, cluster, ttl, ...] and [key, ...], or the whole table to
 *           a new worker. Deltas go over one ordered channel per worker,
 *           after the full table that worker got, so applying them in
 *           order gives the primary's table.
 */
import type { DemandMeter } from './demand.ts';

export interface MappingWire {
  /** true: `set` is the whole table (the worker's entries not in it are removed). */
  readonly full: boolean;
  /** [key, cluster, ttl, key, cluster, ttl, ...] */
  readonly set: readonly (string | number)[];
  /** Keys that left the table (a delta only). */
  readonly del: readonly string[];
}

/** What a worker's table needs of an entry. */
export interface SharedEntry {
  readonly cluster: number;
  readonly ttl: number;
}

/**
 * The counts of `counts` (key -> queries since the last report) as a flat
 * array, the `limit` busiest (ties by key, the same choice every time).
 * Only beyond the limit is there a sort (O(n log n), once per recompute).
 */
export function encodeDemand(counts: ReadonlyMap<string, number>, limit: number): (string | number)[] {
  let list = [...counts].filter(([, n]) => n > 0);
  if (list.length > limit) list = list.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, limit);
  const out: (string | number)[] = new Array<string | number>(list.length * 2);
  list.forEach(([k, n], i) => {
    out[2 * i] = k;
    out[2 * i + 1] = n;
  });
  return out;
}

/** Adds a worker's report (encodeDemand) into the primary's meter; malformed pairs are skipped. Returns the prefixes added. */
export function mergeDemand(meter: DemandMeter, flat: readonly unknown[]): number {
  let n = 0;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const k = flat[i];
    const c = flat[i + 1];
    if (typeof k !== 'string' || typeof c !== 'number' || !(c > 0)) continue;
    meter.add(k, c);
    n++;
  }
  return n;
}

/**
 * The primary's side: remembers what it sent (the workers' table), and
 * turns each new table into the delta against it.
 */
export class MappingPublisher {
  /** key -> cluster and TTL, as every worker holds it after the last delta. */
  readonly #sent = new Map<string, SharedEntry>();

  get size(): number {
    return this.#sent.size;
  }

  /** The delta from the last table sent to `entries`; it becomes the table sent. Empty set and del: nothing changed. */
  delta(entries: Iterable<[string, SharedEntry]>): MappingWire {
    const set: (string | number)[] = [];
    const seen = new Set<string>();
    for (const [k, e] of entries) {
      seen.add(k);
      const was = this.#sent.get(k);
      if (was !== undefined && was.cluster === e.cluster && was.ttl === e.ttl) continue;
      this.#sent.set(k, { cluster: e.cluster, ttl: e.ttl });
      set.push(k, e.cluster, e.ttl);
    }
    const del: string[] = [];
    for (const k of this.#sent.keys()) if (!seen.has(k)) del.push(k);
    for (const k of del) this.#sent.delete(k);
    return { full: false, set, del };
  }

  /** The whole table sent so far (a new or replacement worker). */
  full(): MappingWire {
    const set: (string | number)[] = [];
    for (const [k, e] of this.#sent) set.push(k, e.cluster, e.ttl);
    return { full: true, set, del: [] };
  }
}
