import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { solveAssignment, type AssignProblem, type Assignment } from '../../src/dns/mapping/assign.ts';
import { InvalidArgumentError } from '../../src/errors/errors.ts';
import { prng } from '../helpers/packets.ts';

const I = Infinity;

function problem(demand: number[], capacity: number[], cost: number[][]): AssignProblem {
  return {
    units: demand.length,
    clusters: capacity.length,
    demand: Float64Array.from(demand),
    capacity: Float64Array.from(capacity),
    cost: Float64Array.from(cost.flat()),
  };
}

/** Feasibility of a returned assignment, and that cost/unserved match its flow. */
function checkFeasible(p: AssignProblem, a: Assignment, tol = 1e-9): void {
  const { units: U, clusters: C } = p;
  let served = 0;
  let total = 0;
  for (let u = 0; u < U; u++) {
    let row = 0;
    for (let c = 0; c < C; c++) {
      const x = a.flow[u * C + c]!;
      assert.ok(x >= 0, `flow[${u}][${c}] = ${x} < 0`);
      if (p.cost[u * C + c] === Infinity) assert.equal(x, 0, `flow on a forbidden pair ${u},${c}`);
      else total += x * p.cost[u * C + c]!;
      row += x;
    }
    assert.ok(row <= p.demand[u]! + tol, `unit ${u} served ${row} > demand ${p.demand[u]}`);
    served += row;
  }
  for (let c = 0; c < C; c++) {
    let col = 0;
    for (let u = 0; u < U; u++) col += a.flow[u * C + c]!;
    assert.ok(col <= p.capacity[c]! + tol, `cluster ${c} load ${col} > capacity ${p.capacity[c]}`);
  }
  const demand = p.demand.reduce((s, d) => s + d, 0);
  assert.ok(Math.abs(demand - served - a.unserved) <= tol * Math.max(1, demand), `unserved ${a.unserved} != ${demand - served}`);
  assert.ok(Math.abs(total - a.cost) <= tol * Math.max(1, Math.abs(total)), `cost ${a.cost} != sum flow*cost ${total}`);
}

/**
 * Brute force over integral assignments (integral demands and capacities have
 * an integral optimum: the constraint matrix is totally unimodular). Best is
 * the maximum served, then the minimum cost.
 */
function bruteForce(p: AssignProblem): { served: number; cost: number } {
  const { units: U, clusters: C } = p;
  const options: number[][][] = [];
  for (let u = 0; u < U; u++) {
    const out: number[][] = [];
    const x = new Array<number>(C).fill(0);
    const rec = (c: number, left: number): void => {
      if (c === C) {
        out.push([...x]);
        return;
      }
      const max = p.cost[u * C + c] === Infinity ? 0 : left;
      for (let k = 0; k <= max; k++) {
        x[c] = k;
        rec(c + 1, left - k);
      }
      x[c] = 0;
    };
    rec(0, p.demand[u]!);
    options.push(out);
  }
  const load = new Array<number>(C).fill(0);
  let best = { served: -1, cost: Infinity };
  const rec = (u: number, served: number, cost: number): void => {
    if (u === U) {
      if (served > best.served || (served === best.served && cost < best.cost - 1e-12)) best = { served, cost };
      return;
    }
    for (const x of options[u]!) {
      let ok = true;
      for (let c = 0; c < C; c++) if (load[c]! + x[c]! > p.capacity[c]!) ok = false;
      if (!ok) continue;
      let s = 0;
      let k = 0;
      for (let c = 0; c < C; c++) {
        load[c]! += x[c]!;
        s += x[c]!;
        if (x[c]! > 0) k += x[c]! * p.cost[u * C + c]!;
      }
      rec(u + 1, served + s, cost + k);
      for (let c = 0; c < C; c++) load[c]! -= x[c]!;
    }
  };
  rec(0, 0, 0);
  return best;
}

/**
 * Optimality certificate, independent of the solver: no negative cycle in the
 * residual graph of units, clusters, an unserved cluster of cost M (M above any
 * path cost, so serving more always wins) and a sink (Bellman-Ford).
 */
function hasNegativeCycle(p: AssignProblem, a: Assignment, M: number, tol: number): boolean {
  const { units: U, clusters: C } = p;
  const X = U + C;
  const T = U + C + 1;
  const n = U + C + 2;
  const arcs: [number, number, number][] = [];
  const colUse = new Array<number>(C).fill(0);
  let unservedTotal = 0;
  for (let u = 0; u < U; u++) {
    let row = 0;
    for (let c = 0; c < C; c++) {
      const k = p.cost[u * C + c]!;
      const x = a.flow[u * C + c]!;
      row += x;
      colUse[c]! += x;
      if (k === Infinity) continue;
      arcs.push([u, U + c, k]);
      if (x > tol) arcs.push([U + c, u, -k]);
    }
    arcs.push([u, X, M]);
    const uns = p.demand[u]! - row;
    unservedTotal += uns;
    if (uns > tol) arcs.push([X, u, -M]);
  }
  for (let c = 0; c < C; c++) {
    if (p.capacity[c]! - colUse[c]! > tol) arcs.push([U + c, T, 0]);
    if (colUse[c]! > tol) arcs.push([T, U + c, 0]);
  }
  arcs.push([X, T, 0]);
  if (unservedTotal > tol) arcs.push([T, X, 0]);
  const d = new Array<number>(n).fill(0);
  for (let i = 0; i < n; i++) {
    let changed = false;
    for (const [s, t, w] of arcs) {
      if (d[s]! + w < d[t]! - 1e-9) {
        d[t] = d[s]! + w;
        changed = true;
      }
    }
    if (!changed) return false;
  }
  return true;
}

describe('solveAssignment: hand-computed cases', () => {
  const cases: { name: string; p: AssignProblem; flow: number[][]; cost: number; unserved: number }[] = [
    {
      name: 'both fit at their nearest',
      p: problem([2, 3], [10, 10], [[1, 5], [7, 2]]),
      flow: [[2, 0], [0, 3]],
      cost: 2 + 6,
      unserved: 0,
    },
    {
      name: 'capacity binding: the unit with the smaller penalty moves (u0: +10, u1: +40)',
      p: problem([1, 1], [1, 1], [[10, 20], [10, 50]]),
      flow: [[0, 1], [1, 0]],
      cost: 20 + 10,
      unserved: 0,
    },
    {
      name: 'capacity binding via a chain: u2 displaces u1 which displaces u0',
      p: problem([1, 1, 1], [1, 1, 1], [[1, 2, 30], [1, 2, 40], [50, 1, 60]]),
      // optimum: u2 at c1 (1), u1 at c0 (1), u0 at c2 (30) = 32; alternatives cost more
      flow: [[0, 0, 1], [1, 0, 0], [0, 1, 0]],
      cost: 32,
      unserved: 0,
    },
    {
      name: 'unserved demand: more demand than total capacity',
      p: problem([3], [1, 1], [[5, 7]]),
      flow: [[1, 1]],
      cost: 12,
      unserved: 1,
    },
    {
      name: 'Infinity costs: u0 may use c1 only, so u1 takes c0',
      p: problem([1, 1], [1, 1], [[I, 5], [1, 2]]),
      flow: [[0, 1], [1, 0]],
      cost: 6,
      unserved: 0,
    },
    {
      name: 'a unit with no allowed cluster is unserved whatever the room',
      p: problem([2, 1], [5, 5], [[I, I], [3, 4]]),
      flow: [[0, 0], [1, 0]],
      cost: 3,
      unserved: 2,
    },
    {
      name: 'maximum flow first: serving both beats the cheaper single assignment',
      p: problem([1, 1], [1, 1], [[1, I], [2, 100]]),
      flow: [[1, 0], [0, 1]],
      cost: 101,
      unserved: 0,
    },
    {
      name: 'same served amount, cheaper unit served: the later unit displaces the earlier into unserved',
      p: problem([1, 1], [1], [[50], [1]]),
      flow: [[0], [1]],
      cost: 1,
      unserved: 1,
    },
    {
      name: 'fractional split across clusters',
      p: problem([1.5], [1, 1], [[1, 2]]),
      flow: [[1, 0.5]],
      cost: 2,
      unserved: 0,
    },
    {
      name: 'zero demand and zero capacity',
      p: problem([0, 2], [0, 3], [[1, 1], [1, 4]]),
      flow: [[0, 0], [0, 2]],
      cost: 8,
      unserved: 0,
    },
    {
      name: 'unlimited capacity cluster',
      p: problem([4, 4], [I, 1], [[9, 1], [9, 2]]),
      flow: [[3, 1], [4, 0]],
      cost: 27 + 1 + 36,
      unserved: 0,
    },
    { name: 'no units', p: problem([], [1, 2], []), flow: [], cost: 0, unserved: 0 },
    { name: 'no clusters', p: problem([2, 3], [], [[], []]), flow: [[], []], cost: 0, unserved: 5 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const a = solveAssignment(c.p);
      checkFeasible(c.p, a);
      assert.deepEqual(Array.from(a.flow), c.flow.flat());
      assert.equal(a.cost, c.cost);
      assert.equal(a.unserved, c.unserved);
    });
  }
});

describe('solveAssignment: against brute force on random small instances', () => {
  const shapes: { U: number; C: number; maxD: number; maxCap: number; infShare: number; seeds: number }[] = [
    { U: 1, C: 3, maxD: 4, maxCap: 3, infShare: 0.2, seeds: 40 },
    { U: 3, C: 2, maxD: 3, maxCap: 4, infShare: 0.15, seeds: 60 },
    { U: 4, C: 3, maxD: 3, maxCap: 4, infShare: 0.15, seeds: 60 },
    { U: 5, C: 2, maxD: 2, maxCap: 3, infShare: 0.3, seeds: 60 },
    { U: 3, C: 4, maxD: 2, maxCap: 2, infShare: 0, seeds: 40 },
  ];
  for (const s of shapes) {
    it(`U=${s.U} C=${s.C} demand<=${s.maxD} capacity<=${s.maxCap} Infinity share ${s.infShare}: ${s.seeds} seeds`, () => {
      let withUnserved = 0;
      let binding = 0;
      for (let seed = 1; seed <= s.seeds; seed++) {
        const r = prng(seed * 7919 + s.U * 31 + s.C);
        const demand = Array.from({ length: s.U }, () => Math.floor(r() * (s.maxD + 1)));
        const capacity = Array.from({ length: s.C }, () => Math.floor(r() * (s.maxCap + 1)));
        const cost = Array.from({ length: s.U }, () =>
          Array.from({ length: s.C }, () => (r() < s.infShare ? I : 1 + Math.round(r() * 990) / 10)),
        );
        const p = problem(demand, capacity, cost);
        const a = solveAssignment(p);
        checkFeasible(p, a);
        const b = bruteForce(p);
        const total = demand.reduce((x, y) => x + y, 0);
        assert.ok(Math.abs(total - a.unserved - b.served) < 1e-9, `seed ${seed}: served ${total - a.unserved}, brute force ${b.served}`);
        assert.ok(Math.abs(a.cost - b.cost) < 1e-9, `seed ${seed}: cost ${a.cost}, brute force ${b.cost}`);
        if (a.unserved > 0) withUnserved++;
        // Binding: the optimum is dearer than everyone at their cheapest allowed cluster.
        const greedy = cost.reduce((x, row, u) => x + demand[u]! * Math.min(...row.filter((k) => k < I), I), 0);
        if (a.unserved === 0 && a.cost > greedy + 1e-9) binding++;
      }
      // The instances must exercise the interesting cases, or the test proves little.
      assert.ok(withUnserved > 0, 'no instance had unserved demand');
      if (s.maxCap >= s.maxD) assert.ok(binding > 0, 'no instance had binding capacity');
    });
  }
});

describe('solveAssignment: larger random instances', () => {
  const shapes: { U: number; C: number; load: number; seeds: number }[] = [
    { U: 40, C: 5, load: 0.7, seeds: 10 },
    { U: 60, C: 8, load: 1.0, seeds: 10 },
    { U: 80, C: 6, load: 1.4, seeds: 10 },
  ];
  for (const s of shapes) {
    it(`U=${s.U} C=${s.C} demand/capacity ${s.load}: no negative residual cycle, scale invariant, deterministic`, () => {
      for (let seed = 1; seed <= s.seeds; seed++) {
        const r = prng(seed * 104729 + s.U);
        const demand = Array.from({ length: s.U }, () => r() * 10);
        const total = demand.reduce((x, y) => x + y, 0);
        const w = Array.from({ length: s.C }, () => 0.2 + r());
        const wsum = w.reduce((x, y) => x + y, 0);
        const capacity = w.map((x) => (x / wsum) * (total / s.load));
        const cost = Array.from({ length: s.U }, () => Array.from({ length: s.C }, () => (r() < 0.1 ? I : 1 + r() * 200)));
        const p = problem(demand, capacity, cost);
        const a = solveAssignment(p);
        checkFeasible(p, a, 1e-7);
        assert.equal(hasNegativeCycle(p, a, 1e6, 1e-9), false, `seed ${seed}: residual graph has a negative cycle (not optimal)`);
        if (s.load > 1) assert.ok(a.unserved > 0, `seed ${seed}: overloaded but nothing unserved`);
        const k = 0.37;
        const scaled = solveAssignment(problem(demand.map((d) => d * k), capacity.map((c) => c * k), cost));
        assert.ok(Math.abs(scaled.cost - a.cost * k) <= 1e-7 * a.cost, `seed ${seed}: scaled cost ${scaled.cost} vs ${a.cost * k}`);
        assert.ok(Math.abs(scaled.unserved - a.unserved * k) <= 1e-7 * total, `seed ${seed}: scaled unserved`);
        assert.deepEqual(solveAssignment(p).flow, a.flow, `seed ${seed}: not deterministic`);
      }
    });
  }

  it('the certificate check itself catches a suboptimal flow', () => {
    const p = problem([1, 1], [1, 1], [[10, 20], [10, 50]]);
    const bad: Assignment = { flow: Float64Array.from([1, 0, 0, 1]), cost: 60, unserved: 0 };
    assert.equal(hasNegativeCycle(p, bad, 1e6, 1e-9), true);
    assert.equal(hasNegativeCycle(p, solveAssignment(p), 1e6, 1e-9), false);
  });
});

describe('solveAssignment: input checks', () => {
  const bad: [string, AssignProblem][] = [
    ['demand length', { ...problem([1], [1], [[1]]), demand: Float64Array.from([1, 2]) }],
    ['capacity length', { ...problem([1], [1], [[1]]), capacity: Float64Array.from([]) }],
    ['cost length', { ...problem([1], [1], [[1]]), cost: Float64Array.from([1, 2]) }],
    ['negative demand', problem([-1], [1], [[1]])],
    ['NaN demand', problem([NaN], [1], [[1]])],
    ['negative capacity', problem([1], [-1], [[1]])],
    ['NaN cost', problem([1], [1], [[NaN]])],
    ['-Infinity cost', problem([1], [1], [[-I]])],
  ];
  for (const [name, p] of bad) {
    it(`rejects ${name}`, () => {
      assert.throws(() => solveAssignment(p), InvalidArgumentError);
    });
  }
});
