/**
 * `capacity`: clusters drawn in proportion to their free capacity (seed
 * 000's rule for redirecting between clusters, applied at the DNS level),
 * without replacement, so a two-answer response holds two distinct
 * clusters. Used on its own, and by `rtt` for clients with no RTT yet.
 *
 * The draw is not random: each candidate's uniform number comes from a hash
 * of the steered name, the client's prefix and the cluster's name
 * (steer.ts), so every DNS server given the same cluster_load reports gives
 * a prefix the same answer (issue 21: several servers, one view). Over
 * many prefixes the shares still follow free capacity. The order is the
 * weighted sampling without replacement of Efraimidis and Spirakis: each
 * candidate gets the key −ln(u) / available and the smallest key comes
 * first (P(first) = available / Σ available, and so on down the list). It
 * is also stable: when one cluster's free capacity changes, a prefix moves
 * only if that cluster's key crosses another's, so most prefixes keep
 * their cluster (as in weighted rendezvous hashing).
 */
import type { Candidate, Policy, PolicyInput, Ranking } from './policy.ts';

/** Candidates in weighted order; `draw(c)` is c's uniform number in (0, 1). Ties keep the candidates' order. */
export function weightedOrder(candidates: readonly Candidate[], draw: (c: Candidate) => number): Candidate[] {
  const keyed = candidates.map((c) => {
    const u = Math.min(Math.max(draw(c), Number.MIN_VALUE), 1 - Number.EPSILON);
    // available > 0 for every candidate (the pipeline filters the full ones); guard anyway.
    return { c, key: c.available > 0 ? -Math.log(u) / c.available : Infinity };
  });
  keyed.sort((a, b) => a.key - b.key || a.c.index - b.c.index);
  return keyed.map((k) => k.c);
}

export const capacityPolicy: Policy = {
  name: 'capacity',
  rank(input: PolicyInput): Ranking {
    return { order: weightedOrder(input.candidates, (c) => input.draw(c)), reason: 'capacity-weighted' };
  },
};
