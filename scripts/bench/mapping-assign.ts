/**
 * Benchmark: the exact min-cost assignment solver (src/dns/mapping/assign.ts)
 * at mapping-policy sizes. One process, no network; run under the shared lock:
 *
 *   flock /tmp/sluice-netns.lock node_modules/.bin/node scripts/bench/mapping-assign.ts [--units 5000,20000] [--clusters 50] [--reps 5]
 *
 * Instance: clusters and units at random points on a sphere (seeded), cost =
 * great-circle RTT in ms (2 x distance / (2/3 c)) plus 2 ms, 5% of pairs
 * forbidden (Infinity); demand lognormal-ish; capacities random weights scaled
 * so total demand / total capacity = the load factor. Loads 0.5 (nearly all at
 * the nearest cluster), 0.9 (many clusters full: chains of displacement) and
 * 1.3 (overloaded: unserved demand). Prints the median and max solve CPU time
 * (user + system, so that other load on the shared cores does not count) per
 * case as a table and JSON.
 */
import { parseArgs } from 'node:util';
import { solveAssignment } from '../../src/dns/mapping/assign.ts';

const { values } = parseArgs({
  options: {
    units: { type: 'string', default: '1000,5000,20000' },
    clusters: { type: 'string', default: '50' },
    loads: { type: 'string', default: '0.5,0.9,1.3' },
    reps: { type: 'string', default: '5' },
  },
});

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function point(r: () => number): [number, number] {
  return [Math.asin(2 * r() - 1), 2 * Math.PI * r()];
}

function instance(U: number, C: number, load: number, seed: number) {
  const r = prng(seed);
  const cl = Array.from({ length: C }, () => point(r));
  const demand = new Float64Array(U);
  const cost = new Float64Array(U * C);
  let total = 0;
  for (let u = 0; u < U; u++) {
    const [la, lo] = point(r);
    const d = Math.exp(2 * r()) * (0.5 + r());
    demand[u] = d;
    total += d;
    for (let c = 0; c < C; c++) {
      const [lb, lob] = cl[c] ?? [0, 0];
      const cos = Math.sin(la) * Math.sin(lb) + Math.cos(la) * Math.cos(lb) * Math.cos(lo - lob);
      const km = 6371 * Math.acos(Math.min(1, Math.max(-1, cos)));
      cost[u * C + c] = r() < 0.05 ? Infinity : 2 + (2 * km) / 200;
    }
  }
  const w = Array.from({ length: C }, () => 0.3 + r());
  const ws = w.reduce((a, b) => a + b, 0);
  const capacity = Float64Array.from(w, (x) => (x / ws) * (total / load));
  return { units: U, clusters: C, demand, capacity, cost };
}

// Warm-up (JIT): not measured.
for (const load of [0.5, 1.3]) solveAssignment(instance(2000, 50, load, 1));

const rows: { units: number; clusters: number; load: number; medianMs: number; maxMs: number; unservedShare: number; meanCost: number }[] = [];
for (const C of values.clusters.split(',').map(Number)) {
  for (const U of values.units.split(',').map(Number)) {
    for (const load of values.loads.split(',').map(Number)) {
      const times: number[] = [];
      let unservedShare = 0;
      let meanCost = 0;
      for (let rep = 0; rep < Number(values.reps); rep++) {
        const p = instance(U, C, load, 1000 + rep);
        const c0 = process.cpuUsage();
        const a = solveAssignment(p);
        const c1 = process.cpuUsage(c0);
        times.push((c1.user + c1.system) / 1e3);
        const total = p.demand.reduce((x, y) => x + y, 0);
        unservedShare = a.unserved / total;
        meanCost = a.cost / (total - a.unserved);
      }
      times.sort((a, b) => a - b);
      rows.push({
        units: U,
        clusters: C,
        load,
        medianMs: Number((times[times.length >> 1] ?? 0).toFixed(1)),
        maxMs: Number((times[times.length - 1] ?? 0).toFixed(1)),
        unservedShare: Number(unservedShare.toFixed(4)),
        meanCost: Number(meanCost.toFixed(2)),
      });
      const row = rows[rows.length - 1];
      if (row === undefined) continue;
      process.stdout.write(
        `U=${String(U).padStart(6)} C=${C} load ${load.toFixed(2)}: median ${row.medianMs} ms, max ${row.maxMs} ms, unserved ${(100 * row.unservedShare).toFixed(1)}%, mean RTT ${row.meanCost} ms\n`,
      );
    }
  }
}
process.stdout.write(JSON.stringify({ bench: 'mapping-assign', node: process.version, rows }) + '\n');
