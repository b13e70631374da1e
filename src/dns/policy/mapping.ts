/**
 * `mapping`: the cluster a global assignment gave the client's prefix
 * (src/dns/mapping/table.ts, recomputed every few seconds), looked up in
 * O(1); the rest of the order (for `answers` > 1) as `rtt` ranks it. A
 * prefix not in the table (no demand yet, no RTT, or no room near it), or
 * whose assigned cluster is not a candidate now (down or full since the
 * last recompute), gets the `rtt` policy's answer: the fallback.
 *
 * The ranking carries the prefix's adaptive TTL (short while its assignment
 * may move, long while it holds); the fallback leaves the name's `ttl`.
 */
import type { Candidate, Policy, PolicyInput, Ranking } from './policy.ts';
import { rttPolicy } from './rtt.ts';

/** What the policy needs of the assignment: an O(1) lookup. */
export interface MappingLookup {
  lookup(key: string): { readonly cluster: number; readonly ttl: number } | undefined;
}

export function mappingPolicy(capacityWeight: number, table: MappingLookup | undefined): Policy {
  const rtt = rttPolicy(capacityWeight);
  return {
    name: 'mapping',
    rank(input: PolicyInput): Ranking {
      const e = input.prefixKey !== undefined ? table?.lookup(input.prefixKey) : undefined;
      const r = rtt.rank(input);
      if (e === undefined) return { order: r.order, reason: `mapping-fallback:${r.reason}` };
      let chosen: Candidate | undefined;
      for (const c of input.candidates) if (c.index === e.cluster) chosen = c;
      if (chosen === undefined) return { order: r.order, reason: `mapping-fallback:unusable:${r.reason}` };
      const first = chosen;
      return { order: [first, ...r.order.filter((c) => c !== first)], reason: `mapping:${first.name}`, ttl: e.ttl };
    },
  };
}
