/**
 * `rtt`: the nearest cluster, weighed with free capacity.
 *
 *   cost(cluster) = rtt_ms × (1 + capacityWeight × (1 − free))
 *
 * where free is the cluster's free share of capacity (0..1). Lowest cost
 * wins. With capacityWeight 1 a cluster at 10% free looks 1.9× farther than
 * it is, so a nearly full near cluster loses to an idle one under twice as
 * far; capacityWeight 0 is pure RTT. A full cluster (free 0) is never a
 * candidate at all (the pipeline filters it), whatever the weight.
 *
 * Clusters without a current RTT for the client rank after measured ones
 * (in capacity order); a cluster that did not answer probes (Infinity)
 * ranks after those. A client with no RTT at all gets the capacity-weighted
 * answer (and the pipeline asks the front nodes to probe it).
 */
import { weightedOrder } from './capacity.ts';
import type { Candidate, Policy, PolicyInput, Ranking } from './policy.ts';

export function rttPolicy(capacityWeight: number): Policy {
  return {
    name: 'rtt',
    rank(input: PolicyInput): Ranking {
      if (input.measured === 0) {
        return { order: weightedOrder(input.candidates, (c) => input.draw(c)), reason: 'no-rtt:capacity-weighted' };
      }
      const cost = (c: Candidate): number => {
        const r = input.rtt[c.index] ?? NaN;
        if (Number.isNaN(r)) return Number.MAX_VALUE; // unmeasured: after measured
        return r * (1 + capacityWeight * (1 - c.free));
      };
      const order = [...input.candidates].sort((a, b) => {
        const d = cost(a) - cost(b);
        return d !== 0 && !Number.isNaN(d) ? d : b.available - a.available;
      });
      const best = order[0];
      const r = best ? (input.rtt[best.index] ?? NaN) : NaN;
      return { order, reason: best ? `rtt:${best.name}=${Number.isFinite(r) ? r.toFixed(1) : String(r)}ms,free=${best.free.toFixed(2)}` : 'rtt:none' };
    },
  };
}
