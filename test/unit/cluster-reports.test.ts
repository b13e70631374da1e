/**
 * One view of a cluster from several front nodes (src/control/cluster-reports.ts),
 * and its two users: the DNS server's cluster table and the front node's
 * overflow table. Table-driven on an injected clock: each row is a report
 * or a check at a time; staleMs is 3000 throughout.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClusterReports, type HaRole } from '../../src/control/cluster-reports.ts';
import type { Body } from '../../src/control/messages.ts';
import { ClusterTable } from '../../src/dns/cluster_state.ts';
import { LeastLoadedClusters } from '../../src/front/least_loaded_clusters.ts';

const STALE = 3000;

function body(available: number, role?: HaRole, serversUp = 2, cluster = 'c1'): Body<'cluster_load'> {
  return { cluster, vips: ['198.19.1.1'], capacity: 100, load: 100 - available, available, serversUp, serversTotal: 2, ...(role !== undefined ? { role } : {}) };
}

type Step =
  | { at: number; from: string; report: Body<'cluster_load'> }
  | { at: number; expect: { up: boolean; source?: string | undefined; available?: number; capacity?: number } };

interface Case {
  name: string;
  steps: Step[];
}

const cases: Case[] = [
  {
    name: 'one front (no role: single) keeps the cluster up while it reports',
    steps: [
      { at: 0, expect: { up: false, source: undefined } },
      { at: 0, from: 'c1', report: body(40) },
      { at: 0, expect: { up: true, source: 'c1', available: 40, capacity: 100 } },
      { at: 3000, expect: { up: true, source: 'c1' } },
      { at: 3001, expect: { up: false, source: undefined } },
    ],
  },
  {
    name: 'a pair: the master\'s figures, never the backup\'s higher available while the master is fresh',
    steps: [
      { at: 0, from: 'fa', report: body(20, 'master') },
      { at: 100, from: 'fb', report: body(90, 'backup') },
      { at: 200, expect: { up: true, source: 'fa', available: 20, capacity: 100 } },
      { at: 2900, from: 'fb', report: body(95, 'backup') },
      { at: 3000, expect: { up: true, source: 'fa', available: 20 } },
    ],
  },
  {
    name: 'the master falls silent: the backup carries the cluster; both silent: down after staleMs',
    steps: [
      { at: 0, from: 'fa', report: body(20, 'master') },
      { at: 1000, from: 'fb', report: body(90, 'backup') },
      { at: 3001, expect: { up: true, source: 'fb', available: 90 } },
      { at: 3500, from: 'fb', report: body(80, 'backup') },
      { at: 6500, expect: { up: true, source: 'fb', available: 80 } },
      { at: 6501, expect: { up: false, source: undefined } },
    ],
  },
  {
    name: 'a role flip: the new master\'s figures, the old master (now backup) ignored',
    steps: [
      { at: 0, from: 'fa', report: body(20, 'master') },
      { at: 0, from: 'fb', report: body(90, 'backup') },
      { at: 500, from: 'fb', report: body(70, 'master') },
      { at: 600, from: 'fa', report: body(10, 'backup') },
      { at: 700, expect: { up: true, source: 'fb', available: 70 } },
    ],
  },
  {
    name: 'two masters for a moment (split brain): the freshest master\'s figures',
    steps: [
      { at: 0, from: 'fa', report: body(20, 'master') },
      { at: 10, from: 'fb', report: body(60, 'master') },
      { at: 20, expect: { up: true, source: 'fb', available: 60 } },
      { at: 30, from: 'fa', report: body(25, 'master') },
      { at: 40, expect: { up: true, source: 'fa', available: 25 } },
    ],
  },
  {
    name: 'a third, unexpected node: kept and shown; its backup figures are not used while a master is fresh',
    steps: [
      { at: 0, from: 'fa', report: body(20, 'master') },
      { at: 0, from: 'fb', report: body(90, 'backup') },
      { at: 50, from: 'fc', report: body(99, 'backup') },
      { at: 60, expect: { up: true, source: 'fa', available: 20 } },
    ],
  },
  {
    name: 'up while ANY fresh report has servers up (the master says none, the backup some); figures stay the master\'s',
    steps: [
      { at: 0, from: 'fa', report: body(0, 'master', 0) },
      { at: 0, from: 'fb', report: body(50, 'backup', 2) },
      { at: 10, expect: { up: true, source: 'fa', available: 0 } },
      { at: 3001, expect: { up: false, source: undefined } },
    ],
  },
  {
    name: 'capacity never doubled: a pair reporting the same servers shows one capacity',
    steps: [
      { at: 0, from: 'fa', report: body(50, 'master') },
      { at: 0, from: 'fb', report: body(50, 'backup') },
      { at: 1, expect: { up: true, source: 'fa', available: 50, capacity: 100 } },
    ],
  },
];

function run(c: Case, check: (at: number, want: Extract<Step, { expect: unknown }>['expect']) => void, receive: (from: string, b: Body<'cluster_load'>, at: number) => void): void {
  for (const s of c.steps) {
    if ('report' in s) receive(s.from, s.report, s.at);
    else check(s.at, s.expect);
  }
}

describe('cluster reports: one view from several front nodes', () => {
  for (const c of cases) {
    it(c.name, () => {
      const r = new ClusterReports(STALE);
      run(
        c,
        (at, want) => {
          assert.equal(r.isUp('c1', at), want.up, `up at ${at}`);
          const src = r.source('c1', at);
          if ('source' in want) assert.equal(src?.node, want.source, `source at ${at}`);
          if (want.available !== undefined) assert.equal(src?.available, want.available, `available at ${at}`);
          if (want.capacity !== undefined) assert.equal(src?.capacity, want.capacity, `capacity at ${at}`);
        },
        (from, b, at) => r.receive(from, b, at),
      );
    });
  }

  it('at most maxNodes per cluster: the stalest is replaced, counted', () => {
    const r = new ClusterReports(STALE, 3);
    r.receive('a', body(1, 'master'), 0);
    r.receive('b', body(2, 'backup'), 10);
    r.receive('c', body(3, 'backup'), 20);
    r.receive('a', body(4, 'master'), 30); // a refreshed: b is now the stalest
    r.receive('d', body(5, 'backup'), 40);
    assert.deepEqual(r.nodes('c1').map((n) => n.node).sort(), ['a', 'c', 'd']);
    assert.equal(r.replaced, 1);
    assert.equal(r.reportCount('c1'), 4);
    assert.equal(r.nextStaleAt('c1', 40), 20 + STALE);
  });
});

describe('the DNS cluster table with front-node pairs', () => {
  for (const c of cases) {
    it(c.name, () => {
      const t = new ClusterTable([{ name: 'c1', vips: ['198.19.1.1'] }], 1, 3);
      const rec = t.byName('c1');
      assert.ok(rec);
      run(
        c,
        (at, want) => {
          assert.equal(t.isUp(rec, at), want.up, `up at ${at}`);
          if (want.available !== undefined) assert.equal(rec.available, want.available, `available at ${at}`);
          if (want.capacity !== undefined) assert.equal(rec.capacity, want.capacity, `capacity at ${at}`);
          if (want.source !== undefined) assert.equal(rec.source, want.source);
          assert.equal(t.isUsable(rec, at), want.up && rec.available > 0);
        },
        (from, b, at) => t.receive(b, at, from),
      );
    });
  }

  it('one front without a node name: the sender is the cluster, as before', () => {
    const t = new ClusterTable([{ name: 'c1', vips: ['198.19.1.1'] }], 1, 3);
    const rec = t.byName('c1');
    assert.ok(rec);
    assert.ok(t.receive(body(40), 0));
    assert.deepEqual(t.nodes(rec).map((n) => [n.node, n.role]), [['c1', 'single']]);
    assert.equal(t.state(rec, 0), 'up');
    assert.equal(t.staleAt(rec), 3000);
    assert.equal(t.state(rec, 3001), 'down');
    assert.equal(rec.available, 40, 'the last figures stay on show once down');
  });
});

describe('the front node\'s overflow table with another cluster\'s pair', () => {
  for (const c of cases) {
    it(c.name, () => {
      const l = new LeastLoadedClusters('self', 1, 3);
      run(
        c,
        (at, want) => {
          const p = l.peersAt(at).get('c1');
          const fresh = p !== undefined && l.isFresh(p, at);
          assert.equal(l.list(at).length > 0, fresh, `listed at ${at}`);
          if (want.up && want.available !== undefined) assert.equal(p?.available, want.available, `available at ${at}`);
          if (want.source !== undefined) assert.equal(p?.source, want.source);
        },
        (from, b, at) => {
          l.receive(b, at, from);
        },
      );
    });
  }

  it('our own cluster\'s reports (our pair partner\'s) are ignored', () => {
    const l = new LeastLoadedClusters('c1', 1, 3);
    l.receive(body(40, 'master'), 0, 'c1-b');
    assert.equal(l.peersAt(0).size, 0);
  });
});
