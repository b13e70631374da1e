/**
 * What `sluice status --dns` and the dashboard show of the mapping
 * assignment: per cluster, the prefixes mapped there and their demand
 * beside the capacity the last solve had for it; and the `top` assigned
 * prefixes by demand, each with its cluster, RTT and TTL.
 *
 * Bounded whatever the table's size: one pass over the entries, keeping the
 * top list in a sorted array of at most `top` (an insertion costs O(top)),
 * so a status request over the largest table (steering.mapping.maxPrefixes)
 * does not sort it. Order: demand descending, ties by key, so two DNS
 * servers with the same table show the same list.
 */
import type { MappingEntry, RecomputeStats } from './table.ts';

export interface MappingClusterSummary {
  readonly name: string;
  readonly prefixes: number;
  /** Sum of its prefixes' demand (the clusters' load unit). */
  readonly demand: number;
  /** The capacity the last solve had for mapped demand there (headroom × capacity less other load); null before the first recompute. */
  readonly capacity: number | null;
}

export interface MappingPrefixSummary {
  /** The prefix without its family tag ("198.18.11.0/24"). */
  readonly prefix: string;
  readonly cluster: string;
  readonly demand: number;
  readonly rttMs: number;
  readonly ttl: number;
  /** Seconds since it got this cluster. */
  readonly sinceSeconds: number;
}

export interface MappingSummary {
  readonly clusters: readonly MappingClusterSummary[];
  readonly top: readonly MappingPrefixSummary[];
}

/** x before y in the top list: more demand first, then the smaller key. */
function before(xd: number, xk: string, yd: number, yk: string): boolean {
  return xd > yd || (xd === yd && xk < yk);
}

export function summarizeMapping(entries: Iterable<[string, MappingEntry]>, clusterNames: readonly string[], last: RecomputeStats | undefined, top: number, now: number): MappingSummary {
  const C = clusterNames.length;
  const prefixes = new Array<number>(C).fill(0);
  const demand = new Array<number>(C).fill(0);
  const best: [string, MappingEntry][] = [];
  for (const [k, e] of entries) {
    if (e.cluster >= 0 && e.cluster < C) {
      prefixes[e.cluster] = (prefixes[e.cluster] ?? 0) + 1;
      demand[e.cluster] = (demand[e.cluster] ?? 0) + e.demand;
    }
    if (top <= 0) continue;
    const tail = best[best.length - 1];
    if (best.length === top && tail !== undefined && !before(e.demand, k, tail[1].demand, tail[0])) continue;
    let i = best.length;
    while (i > 0) {
      const p = best[i - 1];
      if (p === undefined || !before(e.demand, k, p[1].demand, p[0])) break;
      i--;
    }
    best.splice(i, 0, [k, e]);
    if (best.length > top) best.pop();
  }
  return {
    clusters: clusterNames.map((name, c) => ({ name, prefixes: prefixes[c] ?? 0, demand: demand[c] ?? 0, capacity: last === undefined ? null : (last.capacity[c] ?? 0) })),
    top: best.map(([k, e]) => ({ prefix: k.slice(2), cluster: clusterNames[e.cluster] ?? `#${String(e.cluster)}`, demand: e.demand, rttMs: e.rttMs, ttl: e.ttl, sinceSeconds: Math.max(0, (now - e.since) / 1000) })),
  };
}
