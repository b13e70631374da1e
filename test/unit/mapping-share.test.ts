import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DemandMeter } from '../../src/dns/mapping/demand.ts';
import { encodeDemand, mergeDemand, MappingPublisher, type MappingWire } from '../../src/dns/mapping/share.ts';
import { MappingTable, type MappingOptions } from '../../src/dns/mapping/table.ts';

const OPTS: MappingOptions = { nearest: 4, rttQuantumMs: 1, movePenaltyMs: 5, headroom: 1, ttlMin: 5, ttlMax: 60, nearCapacity: 0.9, freshRttSeconds: 0, stableSeconds: 100, trendSeconds: 0 };

function pairs(flat: readonly (string | number)[]): [string, number][] {
  const out: [string, number][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as number]);
  return out;
}

describe('mapping share: a worker\'s demand report', () => {
  const cases: { name: string; counts: [string, number][]; limit: number; want: [string, number][] }[] = [
    { name: 'under the limit: every prefix with a count, in the map\'s order', counts: [['4:b', 3], ['4:a', 5]], limit: 10, want: [['4:b', 3], ['4:a', 5]] },
    { name: 'zero counts are not sent', counts: [['4:a', 0], ['4:b', 2]], limit: 10, want: [['4:b', 2]] },
    { name: 'beyond the limit: the busiest, ties by key', counts: [['4:c', 1], ['4:b', 7], ['4:a', 1], ['4:d', 9]], limit: 3, want: [['4:d', 9], ['4:b', 7], ['4:a', 1]] },
    { name: 'nothing counted: an empty report', counts: [], limit: 3, want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(pairs(encodeDemand(new Map(c.counts), c.limit)), c.want);
    });
  }

  it('drain() gives the counts since the last drain and empties the meter', () => {
    const m = new DemandMeter(100, 10, 0);
    for (const k of ['4:a', '4:a', '4:b']) m.note(k);
    assert.deepEqual([...m.drain()], [['4:a', 2], ['4:b', 1]]);
    assert.equal(m.size, 0);
    assert.deepEqual([...m.drain()], []);
  });

  it('two workers\' reports merged give the rates one process seeing every query has', () => {
    const one = new DemandMeter(100, 10, 0);
    const primary = new DemandMeter(100, 10, 0);
    const w = [new DemandMeter(100, 10, 0), new DemandMeter(100, 10, 0)];
    // 3 intervals of 1 s; the queries of each prefix spread over both workers unevenly.
    const plan: [string, number, number][][] = [
      [['4:a', 30, 10], ['4:b', 0, 7]],
      [['4:a', 5, 25], ['4:b', 4, 4], ['6:c', 1, 0]],
      [['4:a', 0, 40], ['6:c', 2, 2]],
    ];
    plan.forEach((interval, i) => {
      for (const [k, n0, n1] of interval) {
        for (let j = 0; j < n0; j++) w[0]?.note(k);
        for (let j = 0; j < n1; j++) w[1]?.note(k);
        for (let j = 0; j < n0 + n1; j++) one.note(k);
      }
      for (const x of w) mergeDemand(primary, encodeDemand(x.drain(), 100));
      const t = (i + 1) * 1000;
      assert.deepEqual([...primary.update(t)].sort(), [...one.update(t)].sort(), `interval ${i}`);
    });
  });

  it('malformed pairs are skipped', () => {
    const m = new DemandMeter(100, 10, 0);
    assert.equal(mergeDemand(m, ['4:a', 2, 7, 3, '4:b', -1, '4:c', 'x', '4:d', 1, '4:e']), 2);
    assert.deepEqual([...m.drain()], [['4:a', 2], ['4:d', 1]]);
  });
});

describe('mapping share: the table sent to the workers', () => {
  type Table = [string, { cluster: number; ttl: number }][];
  const steps: { name: string; table: Table; wantSet: number; wantDel: number }[] = [
    { name: 'first table: every entry', table: [['4:a', { cluster: 0, ttl: 5 }], ['4:b', { cluster: 1, ttl: 5 }]], wantSet: 2, wantDel: 0 },
    { name: 'unchanged: nothing to send', table: [['4:a', { cluster: 0, ttl: 5 }], ['4:b', { cluster: 1, ttl: 5 }]], wantSet: 0, wantDel: 0 },
    { name: 'a TTL rose and a prefix came', table: [['4:a', { cluster: 0, ttl: 9 }], ['4:b', { cluster: 1, ttl: 5 }], ['6:c', { cluster: 1, ttl: 5 }]], wantSet: 2, wantDel: 0 },
    { name: 'a prefix moved and one left', table: [['4:a', { cluster: 1, ttl: 5 }], ['6:c', { cluster: 1, ttl: 5 }]], wantSet: 1, wantDel: 1 },
    { name: 'the table emptied', table: [], wantSet: 0, wantDel: 2 },
    { name: 'and filled again', table: [['4:b', { cluster: 0, ttl: 7 }]], wantSet: 1, wantDel: 0 },
  ];

  function view(t: MappingTable): Record<string, [number, number]> {
    return Object.fromEntries([...t.entries()].map(([k, e]) => [k, [e.cluster, e.ttl]]));
  }
  // Through JSON, as IPC carries it.
  function carry(t: MappingTable, w: MappingWire, now: number): void {
    const x = JSON.parse(JSON.stringify(w)) as MappingWire;
    t.applyShared(x.full, x.set, x.del, now);
  }

  it('deltas applied in order, and a late worker\'s full table, equal the primary\'s table at every step', () => {
    const pub = new MappingPublisher();
    const early = new MappingTable(2, OPTS);
    steps.forEach((s, i) => {
      const d = pub.delta(s.table);
      assert.equal(d.set.length / 3, s.wantSet, `${s.name}: set`);
      assert.equal(d.del.length, s.wantDel, `${s.name}: del`);
      carry(early, d, i);
      const late = new MappingTable(2, OPTS);
      late.applyShared(false, ['4:stale', 0, 5], [], 0);
      carry(late, pub.full(), i);
      const want = Object.fromEntries(s.table.map(([k, e]) => [k, [e.cluster, e.ttl]]));
      assert.deepEqual(view(early), want, `${s.name}: delta`);
      assert.deepEqual(view(late), want, `${s.name}: full`);
    });
  });

  it('an entry keeps its `since` while its cluster holds; a cluster outside the config is skipped', () => {
    const t = new MappingTable(2, OPTS);
    t.applyShared(true, ['4:a', 0, 5, '4:b', 2, 5], [], 10);
    t.applyShared(false, ['4:a', 0, 9], [], 20);
    assert.equal(t.lookup('4:a')?.since, 10);
    assert.equal(t.lookup('4:b'), undefined);
    t.applyShared(false, ['4:a', 1, 5], [], 30);
    assert.equal(t.lookup('4:a')?.since, 30);
  });
});
