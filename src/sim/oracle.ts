/**
 * The oracle of metric (a): the optimum assignment of the map units'
 * demand to the clusters' capacities, minimising Σ demand × RTT, by the
 * exact min-cost flow solver the `mapping` policy also uses
 * (src/dns/mapping/assign.ts). Map units are the simulator's grouping:
 * prefixes that share an RTT row and a demand curve (world.ts), so the
 * optimum over units is the optimum over prefixes when a unit's demand may
 * be split between clusters (a fluid relaxation: the optimum over whole
 * prefixes can only be equal or worse, so the figure is a lower bound).
 */
import { solveAssignment } from '../dns/mapping/assign.ts';
import type { Oracle } from './engine.ts';
import type { World } from './world.ts';

export function exactOracle(w: World): Oracle {
  const cost = w.rtt;
  const units = w.units;
  const clusters = w.clusterNames.length;
  return (demand, capacity) => {
    const t0 = performance.now();
    const a = solveAssignment({ units, clusters, demand, capacity, cost });
    let total = 0;
    for (let u = 0; u < units; u++) total += demand[u] ?? 0;
    return { cost: a.cost, served: total - a.unserved, unserved: a.unserved, solveMs: performance.now() - t0 };
  };
}
