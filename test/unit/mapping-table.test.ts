import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MappingTable, type MappingClusterInput, type MappingOptions, type MappingPrefixInput } from '../../src/dns/mapping/table.ts';
import { prng } from '../helpers/packets.ts';

const OPTS: MappingOptions = { nearest: 4, rttQuantumMs: 1, movePenaltyMs: 5, headroom: 1, ttlMin: 5, ttlMax: 60, nearCapacity: 0.9, freshRttSeconds: 0, stableSeconds: 100 };

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
