/**
 * `capacity`: clusters drawn at random in proportion to their free capacity
 * (seed 000's rule for redirecting between clusters, applied at the DNS
 * level), without replacement, so a two-answer response holds two distinct
 * clusters. Used on its own, and by `rtt` for clients with no RTT yet.
 */
import type { Candidate, Policy, PolicyInput, Ranking } from './policy.ts';

export function weightedOrder(candidates: readonly Candidate[], random: () => number): Candidate[] {
  const pool = [...candidates];
  const out: Candidate[] = [];
  while (pool.length > 0) {
    let total = 0;
    for (const c of pool) total += c.available;
    let x = random() * total;
    let pick = pool.length - 1;
    for (let i = 0; i < pool.length; i++) {
      x -= pool[i]?.available ?? 0;
      if (x < 0) {
        pick = i;
        break;
      }
    }
    out.push(...pool.splice(pick, 1));
  }
  return out;
}

export const capacityPolicy: Policy = {
  name: 'capacity',
  rank(input: PolicyInput): Ranking {
    return { order: weightedOrder(input.candidates, () => input.random()), reason: 'capacity-weighted' };
  },
};
