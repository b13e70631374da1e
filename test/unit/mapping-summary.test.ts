import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { summarizeMapping } from '../../src/dns/mapping/summary.ts';
import { MappingTable, type MappingEntry, type RecomputeStats } from '../../src/dns/mapping/table.ts';
import { prng } from '../helpers/packets.ts';

const e = (cluster: number, demand: number, rttMs = 10, since = 0, ttl = 5): MappingEntry => ({ cluster, demand, rttMs, since, ttl });
const stats = (capacity: number[]): RecomputeStats => ({ at: 0, prefixes: 0, eligible: 0, units: 0, moved: 0, unserved: 0, meanRttMs: 0, solveMs: 0, totalMs: 0, headroom: 0.5, capacity, assigned: capacity.map(() => 0) });

describe('summarizeMapping', () => {
  const cases: { name: string; entries: [string, MappingEntry][]; top: number; want: string[] }[] = [
    { name: 'by demand, most first', entries: [['4:a', e(0, 1)], ['4:b', e(1, 3)], ['4:c', e(0, 2)]], top: 10, want: ['b', 'c', 'a'] },
    { name: 'bounded to top', entries: [['4:a', e(0, 1)], ['4:b', e(1, 3)], ['4:c', e(0, 2)]], top: 2, want: ['b', 'c'] },
    { name: 'ties by key, whatever the order in', entries: [['4:d', e(0, 2)], ['4:b', e(0, 2)], ['4:c', e(0, 2)], ['4:a', e(0, 1)]], top: 3, want: ['b', 'c', 'd'] },
    { name: 'top 0: no list', entries: [['4:a', e(0, 1)]], top: 0, want: [] },
    { name: 'empty table', entries: [], top: 5, want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const s = summarizeMapping(c.entries, ['c1', 'c2'], undefined, c.top, 0);
      assert.deepEqual(
        s.top.map((p) => p.prefix),
        c.want,
      );
    });
  }

  it('per cluster: prefixes, summed demand, the solve\'s capacity (null before the first recompute)', () => {
    const entries: [string, MappingEntry][] = [['4:198.18.11.0/24', e(0, 1.5)], ['6:2001:2::/56', e(1, 2)], ['4:198.18.12.0/24', e(0, 2.5)]];
    assert.deepEqual(summarizeMapping(entries, ['c1', 'c2', 'c3'], stats([4, 9, 0]), 10, 0).clusters, [
      { name: 'c1', prefixes: 2, demand: 4, capacity: 4 },
      { name: 'c2', prefixes: 1, demand: 2, capacity: 9 },
      { name: 'c3', prefixes: 0, demand: 0, capacity: 0 },
    ]);
    assert.deepEqual(
      summarizeMapping(entries, ['c1', 'c2'], undefined, 10, 0).clusters.map((c) => c.capacity),
      [null, null],
    );
  });

  it('a prefix row: the key without its family tag, cluster name, demand, RTT, TTL, seconds on its cluster', () => {
    const s = summarizeMapping([['6:2001:2:0:12::/64', e(1, 2, 80, 1000, 30)]], ['c1', 'c2'], undefined, 5, 4500);
    assert.deepEqual(s.top, [{ prefix: '2001:2:0:12::/64', cluster: 'c2', demand: 2, rttMs: 80, ttl: 30, sinceSeconds: 3.5 }]);
  });

  it('random tables: the list is the sort of the whole table cut at top', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const r = prng(seed);
      const entries: [string, MappingEntry][] = Array.from({ length: 200 }, (_, i) => [`4:k${String(i)}`, e(Math.floor(r() * 3), Math.floor(r() * 20))]);
      const top = 1 + Math.floor(r() * 30);
      const want = [...entries]
        .sort((x, y) => y[1].demand - x[1].demand || (x[0] < y[0] ? -1 : 1))
        .slice(0, top)
        .map(([k]) => k.slice(2));
      assert.deepEqual(
        summarizeMapping(entries, ['a', 'b', 'c'], undefined, top, 0).top.map((p) => p.prefix),
        want,
        `seed ${String(seed)}`,
      );
    }
  });

  it('from a real recompute: demand, RTT and capacity are the solve\'s', () => {
    const t = new MappingTable(2, { nearest: 4, rttQuantumMs: 1, movePenaltyMs: 5, headroom: 0.5, ttlMin: 5, ttlMax: 60, nearCapacity: 0.9, freshRttSeconds: 0, stableSeconds: 100, trendSeconds: 0 });
    // Cluster 0 (capacity 4, headroom 0.5: 2) is the nearest to all three; room for two of them.
    const p = (key: string, rtt: number[]): { key: string; demand: number; rtt: Float64Array; rttAt: number } => ({ key, demand: 1, rtt: Float64Array.from(rtt), rttAt: -1e9 });
    t.recompute([p('4:a', [10, 300]), p('4:b', [10, 200]), p('4:c', [10, 60])], [{ usable: true, capacity: 4, load: 0 }, { usable: true, capacity: 100, load: 0 }], 0);
    const s = summarizeMapping(t.entries(), ['c1', 'c2'], t.last, 10, 0);
    assert.deepEqual(s.clusters, [
      { name: 'c1', prefixes: 2, demand: 2, capacity: 2 },
      { name: 'c2', prefixes: 1, demand: 1, capacity: 50 },
    ]);
    assert.deepEqual(
      s.top.map((x) => [x.prefix, x.cluster, x.rttMs]),
      [
        ['a', 'c1', 10],
        ['b', 'c1', 10],
        ['c', 'c2', 60],
      ],
    );
  });
});
