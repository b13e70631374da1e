import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIPv4Address } from '../../src/packet/address.ts';
import type { Backend } from '../../src/front/select/backend.ts';
import { ByRequests } from '../../src/front/select/byrequests.ts';
import { CapacityProportional } from '../../src/front/select/capacity.ts';
import { LeastConnections } from '../../src/front/select/leastconn.ts';
import { Maglev, populateMaglev } from '../../src/front/select/maglev.ts';

function pool(spec: Record<string, number>, opts: { capacity?: boolean; disabled?: string[] } = {}): Backend[] {
  return Object.entries(spec).map(([id, v]) => ({
    id,
    weight: v,
    capacity: opts.capacity === true ? v : Infinity,
    active: 0,
    get load() {
      return this.active; // config capacities: load is the active count
    },
    usable: !(opts.disabled ?? []).includes(id),
  }));
}

function names(backends: Backend[], picks: number[]): string {
  return picks.map((i) => backends[i]?.id ?? '-').join(' ');
}

describe('byrequests (seed 003 vectors)', () => {
  it('25/25/25/25 with b disabled: the seed lbstatus table, then a c d a c d ...', () => {
    const b = pool({ a: 25, b: 25, c: 25, d: 25 }, { disabled: ['b'] });
    const s = new ByRequests();
    const rows: number[][] = [];
    const picks: number[] = [];
    for (let n = 0; n < 3; n++) {
      picks.push(s.pick(b, 0));
      rows.push([...s.status()]);
    }
    assert.deepEqual(rows, [
      [-50, 0, 25, 25],
      [-25, 0, -25, 50],
      [0, 0, 0, 0],
    ]);
    for (let n = 0; n < 9; n++) picks.push(s.pick(b, 0));
    assert.equal(names(b, picks), 'a c d a c d a c d a c d');
  });

  it('lbfactor 1/1/1/1 behaves exactly as 25/25/25/25', () => {
    const run = (w: number): string => {
      const b = pool({ a: w, b: w, c: w, d: w }, { disabled: ['b'] });
      const s = new ByRequests();
      return names(b, Array.from({ length: 12 }, () => s.pick(b, 0)));
    };
    assert.equal(run(1), run(25));
  });

  it('1/4/1: b gets 4 times the requests of a and of c', () => {
    const b = pool({ a: 1, b: 4, c: 1 });
    const s = new ByRequests();
    const counts = new Map<string, number>();
    for (let n = 0; n < 60; n++) {
      const id = b[s.pick(b, 0)]?.id ?? '-';
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(counts), { a: 10, b: 40, c: 10 });
  });

  it('70/30: the seed ten-step lbstatus table, 7 a and 3 b, then it repeats', () => {
    const b = pool({ a: 70, b: 30 });
    const s = new ByRequests();
    const rows: number[][] = [];
    const picks: number[] = [];
    for (let n = 0; n < 10; n++) {
      picks.push(s.pick(b, 0));
      rows.push([...s.status()]);
    }
    assert.deepEqual(rows, [
      [-30, 30],
      [40, -40],
      [10, -10],
      [-20, 20],
      [-50, 50],
      [20, -20],
      [-10, 10],
      [-40, 40],
      [30, -30],
      [0, 0],
    ]);
    const first = names(b, picks);
    assert.equal(first.split(' ').filter((x) => x === 'a').length, 7);
    const second = names(b, Array.from({ length: 10 }, () => s.pick(b, 0)));
    assert.equal(second, first);
  });

  it('no usable worker: -1', () => {
    const b = pool({ a: 1 }, { disabled: ['a'] });
    assert.equal(new ByRequests().pick(b, 0), -1);
  });
});

describe('capacity (remaining capacity, deterministic)', () => {
  it('idle servers: exactly proportional to capacity over a cycle', () => {
    const b = pool({ s1: 100, s2: 200, s3: 300 }, { capacity: true });
    const s = new CapacityProportional();
    const counts = [0, 0, 0];
    for (let n = 0; n < 600; n++) counts[s.pick(b, 0)]!++;
    assert.deepEqual(counts, [100, 200, 300]);
  });

  it('follows remaining capacity, not raw capacity', () => {
    const b = pool({ s1: 100, s2: 100 }, { capacity: true });
    b[0]!.active = 80; // 20 left vs 100 left
    const s = new CapacityProportional();
    const counts = [0, 0];
    for (let n = 0; n < 120; n++) counts[s.pick(b, 0)]!++;
    assert.deepEqual(counts, [20, 100]);
  });

  it('skips full and unusable servers; -1 when all are full (overflow)', () => {
    const b = pool({ s1: 10, s2: 10, s3: 10 }, { capacity: true, disabled: ['s3'] });
    b[0]!.active = 10;
    const s = new CapacityProportional();
    assert.equal(s.pick(b, 0), 1);
    b[1]!.active = 12;
    assert.equal(s.pick(b, 0), -1);
  });

  it('the same state gives the same sequence (no randomness)', () => {
    const seq = (): number[] => {
      const b = pool({ s1: 3, s2: 5, s3: 7 }, { capacity: true });
      const s = new CapacityProportional();
      return Array.from({ length: 30 }, () => s.pick(b, 0));
    };
    assert.deepEqual(seq(), seq());
  });
});

describe('leastconn (weighted, IPVS wlc)', () => {
  const table: { name: string; weights: number[]; active: number[]; expect: number }[] = [
    { name: 'fewest active', weights: [1, 1, 1], active: [3, 1, 2], expect: 1 },
    { name: 'weight halves the load', weights: [1, 2], active: [1, 1], expect: 1 },
    { name: 'weight does not beat many more connections', weights: [1, 2], active: [1, 5], expect: 0 },
  ];
  for (const c of table) {
    it(c.name, () => {
      const b = c.weights.map((w, i) => ({ id: `s${i}`, weight: w, capacity: Infinity, active: c.active[i] ?? 0, load: c.active[i] ?? 0, usable: true }));
      assert.equal(new LeastConnections().pick(b, 0), c.expect);
    });
  }
  it('ties rotate instead of always taking the first server', () => {
    const b = pool({ a: 1, b: 1, c: 1 });
    const s = new LeastConnections();
    assert.equal(names(b, Array.from({ length: 6 }, () => s.pick(b, 0))), 'a b c a b c');
  });
  it('connections that stay open spread evenly', () => {
    const b = pool({ a: 1, b: 1, c: 1 });
    const s = new LeastConnections();
    for (let n = 0; n < 30; n++) b[s.pick(b, 0)]!.active++;
    assert.deepEqual(
      b.map((x) => x.active),
      [10, 10, 10],
    );
  });
});

describe('maglev', () => {
  // Table 1 of the Maglev paper: M = 7, B0 (offset 3, skip 4), B1 (0, 2), B2 (3, 1).
  const B0 = { offset: 3, skip: 4, weight: 1 };
  const B1 = { offset: 0, skip: 2, weight: 1 };
  const B2 = { offset: 3, skip: 1, weight: 1 };

  it('reproduces the paper lookup table: B1 B0 B1 B0 B2 B2 B0', () => {
    assert.deepEqual(Array.from(populateMaglev(7, [B0, B1, B2])), [1, 0, 1, 0, 2, 2, 0]);
  });

  it('after B1 is removed: B0 B0 B0 B0 B2 B2 B2', () => {
    // inputs are [B0, B2]: index 1 is B2
    assert.deepEqual(Array.from(populateMaglev(7, [B0, B2])), [0, 0, 0, 0, 1, 1, 1]);
  });

  const clients = Array.from({ length: 20000 }, (_, i) => (parseIPv4Address('198.18.0.0') ?? 0) + i * 7);

  it('spreads clients evenly over equal servers (±3% of a third)', () => {
    const b = pool({ s1a: 1, s1b: 1, s1c: 1 });
    const m = new Maglev();
    m.rebuild(b);
    const counts = [0, 0, 0];
    for (const c of clients) counts[m.pick(b, c)]!++;
    for (const n of counts) assert.ok(Math.abs(n / clients.length - 1 / 3) < 0.03, String(counts));
  });

  it('weights: a server of weight 2 gets about twice the table', () => {
    const b = pool({ s1a: 1, s1b: 2 });
    const m = new Maglev();
    m.rebuild(b);
    const owners = m.tableOwners();
    const share = owners.filter((o) => o === 1).length / owners.length;
    assert.ok(Math.abs(share - 2 / 3) < 0.01, String(share));
  });

  it('a restarted front node maps every client the same way (no state)', () => {
    const b = pool({ s1a: 1, s1b: 1, s1c: 1 });
    const m1 = new Maglev();
    const m2 = new Maglev();
    m1.rebuild(b);
    m2.rebuild(pool({ s1a: 1, s1b: 1, s1c: 1 }));
    for (const c of clients.slice(0, 2000)) assert.equal(m1.pick(b, c), m2.pick(b, c));
  });

  it('draining a server moves its clients and almost nobody else', () => {
    const b = pool({ s1a: 1, s1b: 1, s1c: 1 });
    const m = new Maglev();
    m.rebuild(b);
    const before = clients.map((c) => m.pick(b, c));
    b[1]!.usable = false;
    m.rebuild(b);
    const after = clients.map((c) => m.pick(b, c));
    let kept = 0;
    let others = 0;
    for (let i = 0; i < clients.length; i++) {
      assert.notEqual(after[i], 1);
      if (before[i] !== 1) {
        others++;
        if (after[i] === before[i]) kept++;
      }
    }
    assert.ok(kept / others > 0.99, `${kept}/${others} kept`);
  });

  it('a full server is skipped by probing; -1 when all are full', () => {
    const b = pool({ s1a: 1, s1b: 1 });
    b.forEach((x) => (x.capacity = 5));
    const m = new Maglev();
    m.rebuild(b);
    const c = clients.find((x) => m.pick(b, x) === 0) ?? 0;
    b[0]!.active = 5;
    assert.equal(m.pick(b, c), 1);
    b[1]!.active = 5;
    assert.equal(m.pick(b, c), -1);
  });
});
