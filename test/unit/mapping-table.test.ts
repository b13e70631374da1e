import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MappingTable, type MappingClusterInput, type MappingOptions, type MappingPrefixInput } from '../../src/dns/mapping/table.ts';
import { prng } from '../helpers/packets.ts';

const OPTS: MappingOptions = { nearest: 4, rttQuantumMs: 1, movePenaltyMs: 5, headroom: 1, ttlMin: 5, ttlMax: 60, nearCapacity: 0.9, freshRttSeconds: 0, stableSeconds: 100, trendSeconds: 0 };

function prefix(key: string, demand: number, rtt: number[], rttAt = -1e9): MappingPrefixInput {
  return { key, demand, rtt: Float64Array.from(rtt), rttAt };
}
function cluster(capacity: number, usable = true, load = 0): MappingClusterInput {
  return { usable, capacity, load };
}
function assignment(t: MappingTable): Record<string, number> {
  const rows: [string, number][] = [...t.entries()].map(([k, e]) => [k, e.cluster]);
  return Object.fromEntries(rows.sort((x, y) => (x[0] < y[0] ? -1 : 1)));
}

describe('MappingTable: capacity', () => {
  it('the nearest cluster has room for 2 of the 3 that prefer it: the one with the smallest RTT penalty moves', () => {
    const t = new MappingTable(2, OPTS);
    const ps = [prefix('p0', 1, [10, 50]), prefix('p1', 1, [10, 20]), prefix('p2', 1, [10, 30]), prefix('p3', 1, [40, 15])];
    const s = t.recompute(ps, [cluster(2), cluster(10)], 0);
    assert.deepEqual(assignment(t), { p0: 0, p1: 1, p2: 0, p3: 1 });
    assert.equal(s.unserved, 0);
    assert.equal(s.moved, 0);
  });

  const cases: { name: string; caps: number[]; headroom: number; load: number[]; want: Record<string, number> }[] = [
    { name: 'all fit at the nearest', caps: [10, 10], headroom: 1, load: [0, 0], want: { a: 0, b: 0, c: 1 } },
    { name: 'headroom 0.25 of 4 leaves room for 1', caps: [4, 10], headroom: 0.25, load: [0, 0], want: { a: 0, b: 1, c: 1 } },
    { name: 'load from elsewhere (not mapped) takes room', caps: [4, 10], headroom: 1, load: [2, 0], want: { a: 0, b: 0, c: 1 } },
    // Load the unmapped prefixes' own demand (3) cannot explain is from elsewhere: of the residual 7, 4/7 is
    // other load, 2.86 on cluster 0, which leaves room for 1.
    { name: 'more load from elsewhere leaves room for 1', caps: [4, 10], headroom: 1, load: [5, 2], want: { a: 0, b: 1, c: 1 } },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = new MappingTable(2, { ...OPTS, headroom: c.headroom });
      // a and b prefer cluster 0 (b by less), c prefers cluster 1.
      t.recompute([prefix('a', 1, [10, 60]), prefix('b', 1, [10, 25]), prefix('c', 1, [30, 10])], [cluster(c.caps[0]!, true, c.load[0]), cluster(c.caps[1]!, true, c.load[1])], 0);
      assert.deepEqual(assignment(t), c.want);
    });
  }

  it('random instances: no cluster gets more than its capacity (split units included)', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const r = prng(seed);
      const C = 5;
      // Coarse RTTs: many prefixes share a unit, so units get split across clusters.
      const ps = Array.from({ length: 200 }, (_, i) => prefix(`k${i}`, 0.5 + r() * 2, Array.from({ length: C }, () => 10 * (1 + Math.floor(r() * 4)))));
      const caps = Array.from({ length: C }, () => 30 + Math.floor(r() * 60));
      const t = new MappingTable(C, OPTS);
      for (let round = 0; round < 3; round++) {
        t.recompute(ps, caps.map((k) => cluster(k)), round * 1000);
        const load = new Array<number>(C).fill(0);
        const byKey = new Map(ps.map((p) => [p.key, p.demand]));
        for (const [k, e] of t.entries()) load[e.cluster]! += byKey.get(k)!;
        load.forEach((l, c) => {
          assert.ok(l <= caps[c]! + 1e-9, `seed ${seed} round ${round}: cluster ${c} has ${l} > ${caps[c]}`);
        });
        // Nearly all demand placed when capacity is ample (only straddlers without room fall back).
        const total = caps.reduce((x, y) => x + y, 0);
        const placed = load.reduce((x, y) => x + y, 0);
        const want = ps.reduce((x, p) => x + p.demand, 0);
        if (total >= want * 1.5) assert.ok(placed >= want - 3 * 2.5, `seed ${seed}: placed ${placed} of ${want}`);
      }
    }
  });
});

describe('MappingTable: hysteresis', () => {
  it('equal costs: the first choice holds through 50 recomputes with RTT jitter below the penalty', () => {
    const t = new MappingTable(2, OPTS);
    const r = prng(7);
    const ps = () => Array.from({ length: 20 }, (_, i) => prefix(`p${i}`, 1, [20 + r() * 3, 20 + r() * 3]));
    t.recompute(ps(), [cluster(100), cluster(100)], 0);
    const first = assignment(t);
    assert.equal(Object.keys(first).length, 20);
    for (let i = 1; i <= 50; i++) {
      const s = t.recompute(ps(), [cluster(100), cluster(100)], i * 5000);
      assert.equal(s.moved, 0, `recompute ${i} moved ${s.moved}`);
    }
    assert.deepEqual(assignment(t), first);
    assert.equal(t.movedTotal, 0);
  });

  const moves: { name: string; rtt: [number, number]; moves: boolean }[] = [
    { name: 'gain 2 ms < penalty 5: stays', rtt: [12, 10], moves: false },
    { name: 'gain 5 ms = penalty: stays (a tie keeps the current cluster)', rtt: [15, 10], moves: false },
    { name: 'gain 9 ms > penalty: moves', rtt: [12, 3], moves: true },
  ];
  for (const m of moves) {
    it(m.name, () => {
      const t = new MappingTable(2, OPTS);
      t.recompute([prefix('p', 1, [10, 12])], [cluster(10), cluster(10)], 0);
      assert.equal(t.lookup('p')?.cluster, 0);
      const s = t.recompute([prefix('p', 1, m.rtt)], [cluster(10), cluster(10)], 5000);
      assert.equal(t.lookup('p')?.cluster, m.moves ? 1 : 0);
      assert.equal(s.moved, m.moves ? 1 : 0);
    });
  }

  it('capacity forces a move whatever the penalty, and the prefix with the cheapest move goes', () => {
    const t = new MappingTable(2, OPTS);
    const ps = [prefix('a', 1, [10, 80]), prefix('b', 1, [10, 30])];
    t.recompute(ps, [cluster(10), cluster(10)], 0);
    assert.deepEqual(assignment(t), { a: 0, b: 0 });
    const s = t.recompute(ps, [cluster(1), cluster(10)], 5000);
    assert.deepEqual(assignment(t), { a: 0, b: 1 });
    assert.equal(s.moved, 1);
  });
});

describe('MappingTable: fallback (no entry)', () => {
  const cases: { name: string; p: MappingPrefixInput; clusters: MappingClusterInput[] }[] = [
    { name: 'no RTT at all', p: prefix('x', 1, [NaN, NaN]), clusters: [cluster(10), cluster(10)] },
    { name: 'no reply from any cluster', p: prefix('x', 1, [Infinity, Infinity]), clusters: [cluster(10), cluster(10)] },
    { name: 'no demand', p: prefix('x', 0, [10, 20]), clusters: [cluster(10), cluster(10)] },
    { name: 'measured only to an unusable cluster', p: prefix('x', 1, [10, NaN]), clusters: [cluster(10, false), cluster(10)] },
    // 'ok' takes cluster 0's 1; x (5) fits neither in the rest of 0 nor in 1's 3, even beyond its nearest.
    { name: 'no room at any cluster, even beyond the nearest (nearest 1)', p: prefix('x', 5, [10, 20]), clusters: [cluster(1), cluster(3)] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = new MappingTable(2, { ...OPTS, nearest: 1 });
      const s = t.recompute([c.p, prefix('ok', 1, [5, 5])], c.clusters, 0);
      assert.equal(t.lookup('x'), undefined);
      assert.notEqual(t.lookup('ok'), undefined);
      assert.equal(s.prefixes, 1);
    });
  }
});

describe('MappingTable: demand beyond the nearest clusters spills', () => {
  it('nearest 1: x does not fit at its nearest (1 of 5), the second solve with every cluster places it at the next one', () => {
    const t = new MappingTable(3, { ...OPTS, nearest: 1 });
    const s = t.recompute([prefix('x', 5, [10, 20, 30]), prefix('y', 1, [10, 40, 50])], [cluster(1), cluster(100), cluster(100)], 0);
    assert.deepEqual([t.lookup('x')?.cluster, t.lookup('y')?.cluster], [1, 0]);
    assert.equal(s.unserved, 0);
  });
});

describe('MappingTable: demand beyond headroom × capacity', () => {
  // Two clusters of 10, headroom 0.5; n prefixes of demand 1, each its own unit, half nearest to each cluster.
  const cases: { name: string; n: number; headroom: number; unserved: number }[] = [
    { name: '8 fit in 0.5 × 20: headroom kept', n: 8, headroom: 0.5, unserved: 0 },
    { name: '12 do not: raised to 12/20 = 0.6, all placed', n: 12, headroom: 0.6, unserved: 0 },
    { name: '20 fill the capacity itself: raised to 1', n: 20, headroom: 1, unserved: 0 },
    { name: '24 exceed it: 1, and 4 unserved (real)', n: 24, headroom: 1, unserved: 4 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = new MappingTable(2, { ...OPTS, headroom: 0.5 });
      const ps = Array.from({ length: c.n }, (_, i) => prefix(`p${String(i).padStart(2, '0')}`, 1, i % 2 === 0 ? [10 + i, 40] : [40, 10 + i]));
      const s = t.recompute(ps, [cluster(10), cluster(10)], 0);
      assert.ok(Math.abs(s.headroom - c.headroom) < 1e-5, `headroom ${s.headroom}`);
      assert.ok(Math.abs(s.unserved - c.unserved) < 1e-6, `unserved ${s.unserved}`);
      assert.equal(s.prefixes, c.n - c.unserved);
      const load = [0, 0];
      for (const [, e] of t.entries()) load[e.cluster]! += 1;
      for (const l of load) assert.ok(l <= 10 * s.headroom + 1e-6, `load ${l} beyond ${s.headroom} x 10`);
    });
  }

  it('a straddling member that fits whole in no share goes where the headroom\'s slack takes it, not to the fallback', () => {
    // a and b (1 each, one unit) prefer cluster 0; c (1) prefers 1. Headroom 0.75 of 2 + 2 = 3 = the demand: the
    // solve puts 1.5 of {a, b} on 0 and 0.5 on 1 (with c: 1.5, full). b straddles 0.5 + 0.5 and fits in neither
    // share's room (0 left at both); cluster 0's slack (0.25 × 2) takes its other half: 2 on cluster 0 = its capacity.
    const t = new MappingTable(2, { ...OPTS, headroom: 0.75 });
    const s = t.recompute([prefix('a', 1, [10, 30]), prefix('b', 1, [10, 30]), prefix('c', 1, [30, 10])], [cluster(2), cluster(2)], 0);
    assert.equal(s.unserved, 0);
    assert.deepEqual(assignment(t), { a: 0, b: 0, c: 1 });
  });
});

describe('MappingTable: a rising demand is planned ahead (trendSeconds)', () => {
  // p (nearest 0) had demand `d0` at t = 0 and has `d` at t = `dt` s. Cluster 0 holds `cap0`, cluster 1 plenty.
  // The plan is d + (d - avg), avg = d0 + (1 - exp(-dt / trend)) (d - d0) where d rose.
  const cases: { name: string; d0: number; d: number; dt: number; trend: number; cap0: number; cluster: number }[] = [
    { name: 'no trend: 3 fits in 3.3, stays', d0: 2, d: 3, dt: 10, trend: 0, cap0: 3.3, cluster: 0 },
    { name: '2 to 3 in 10 s, 10 s average: 3 + (3 - 2.632) = 3.37 > 3.3, moves now', d0: 2, d: 3, dt: 10, trend: 10, cap0: 3.3, cluster: 1 },
    { name: '2 to 3 in 10 s, 2 s average: 3 + 0.007 fits in 3.3, stays', d0: 2, d: 3, dt: 10, trend: 2, cap0: 3.3, cluster: 0 },
    { name: 'a jitter of +5% in 1 s, 30 s average: 10.5 + 0.48 fits in 11, stays', d0: 10, d: 10.5, dt: 1, trend: 30, cap0: 11, cluster: 0 },
    { name: 'a jump beyond twice (1 to 3) is no trend: 3 fits in 3.3, stays', d0: 1, d: 3, dt: 10, trend: 10, cap0: 3.3, cluster: 0 },
    { name: 'no demand before: new, not rising', d0: 0, d: 3, dt: 10, trend: 10, cap0: 3.3, cluster: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = new MappingTable(2, { ...OPTS, trendSeconds: c.trend });
      const cl = [cluster(c.cap0), cluster(100)];
      t.recompute([prefix('p', c.d0, [10, 30])], cl, 0);
      if (c.d0 > 0) assert.equal(t.lookup('p')?.cluster, 0);
      t.recompute([prefix('p', c.d, [10, 30])], cl, c.dt * 1000);
      assert.equal(t.lookup('p')?.cluster, c.cluster);
    });
  }
  it('a steady rise: the plan tends to the demand trendSeconds ahead', () => {
    // 1/s for 200 s, recomputed every second, 20 s average: sampled each second the average lags by
    // (1 - a) / a = 19.5 (a = 1 - exp(-1/20)), so at t = 199 s (demand 299) the plan is 318.5.
    const t = new MappingTable(2, { ...OPTS, trendSeconds: 20 });
    for (let s = 0; s <= 199; s++) t.recompute([prefix('p', 100 + s, [10, 30])], [cluster(318), cluster(1000)], s * 1000);
    assert.equal(t.lookup('p')?.cluster, 1, 'planned above 318');
    const u = new MappingTable(2, { ...OPTS, trendSeconds: 20 });
    for (let s = 0; s <= 199; s++) u.recompute([prefix('p', 100 + s, [10, 30])], [cluster(319), cluster(1000)], s * 1000);
    assert.equal(u.lookup('p')?.cluster, 0, 'planned below 319');
  });
  it('falling: planned as it is, no credit for the fall', () => {
    // p falls from 3 to 2 (-0.1/s); q (2, new) arrives. Planned at 2, p leaves q 1.5 of cluster 0's 3.5:
    // q goes to cluster 1. (Credited 10 s ahead, p would be 1 and q would fit.)
    const t = new MappingTable(2, { ...OPTS, trendSeconds: 10 });
    const cl = [cluster(3.5), cluster(100)];
    t.recompute([prefix('p', 3, [10, 30])], cl, 0);
    t.recompute([prefix('p', 2, [10, 30]), prefix('q', 2, [10, 12])], cl, 10_000);
    assert.deepEqual(assignment(t), { p: 0, q: 1 });
  });
});

describe('MappingTable: grouping and determinism', () => {
  it('prefixes with the same quantized RTT row and current cluster form one unit', () => {
    const t = new MappingTable(3, { ...OPTS, rttQuantumMs: 5 });
    const s = t.recompute([prefix('a', 1, [10, 20, 30]), prefix('b', 2, [11, 21, 29]), prefix('c', 1, [10, 40, 30]), prefix('d', 1, [NaN, 20, 30])], [cluster(10), cluster(10), cluster(10)], 0);
    assert.equal(s.units, 3); // {a, b}, {c}, {d}
    assert.equal(s.eligible, 4);
  });

  it('the same inputs in any order give the same table (two DNS servers agree)', () => {
    for (let seed = 1; seed <= 10; seed++) {
      const r = prng(seed * 13);
      const C = 6;
      const ps = Array.from({ length: 300 }, (_, i) => prefix(`4:10.${i >> 8}.${i & 255}.0/24`, 0.5 + Math.floor(r() * 4), Array.from({ length: C }, () => (r() < 0.1 ? NaN : 5 + Math.floor(r() * 60)))));
      const caps = Array.from({ length: C }, () => cluster(60 + r() * 100));
      const shuffled = [...ps];
      for (let i = shuffled.length - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
      }
      const t1 = new MappingTable(C, OPTS);
      const t2 = new MappingTable(C, OPTS);
      for (let round = 0; round < 2; round++) {
        t1.recompute(ps, caps, round * 1000);
        t2.recompute(shuffled, caps, round * 1000);
        assert.deepEqual(assignment(t1), assignment(t2), `seed ${seed} round ${round}`);
      }
    }
  });
});

describe('MappingTable: adaptive TTL', () => {
  it('fresh RTT: ttlMin; stable: rises to ttlMax over stableSeconds; near capacity: ttlMin', () => {
    const o = { ...OPTS, freshRttSeconds: 30, stableSeconds: 100 };
    const t = new MappingTable(2, o);
    const cl = [cluster(100), cluster(100)];
    t.recompute([prefix('p', 1, [10, 20], 0)], cl, 1000);
    assert.equal(t.lookup('p')?.ttl, o.ttlMin, 'fresh RTT');
    t.recompute([prefix('p', 1, [10, 20], 0)], cl, 51_000);
    assert.equal(t.lookup('p')?.ttl, Math.round(o.ttlMin + (o.ttlMax - o.ttlMin) * 0.5), 'half way to stable');
    t.recompute([prefix('p', 1, [10, 20], 0)], cl, 500_000);
    assert.equal(t.lookup('p')?.ttl, o.ttlMax, 'stable');
    t.recompute([prefix('p', 1, [10, 20], 0)], [cluster(1.05), cluster(100)], 600_000);
    assert.equal(t.lookup('p')?.cluster, 0);
    assert.equal(t.lookup('p')?.ttl, o.ttlMin, 'its cluster is near capacity');
  });
});
