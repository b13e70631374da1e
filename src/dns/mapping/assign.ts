/**
 * Exact min-cost assignment of map units (client prefix groups) to clusters:
 * the transportation problem with capacities, solved as a min-cost maximum
 * flow. It is the mapping policy's solver and the simulator's oracle, so it
 * must be exact (not a heuristic) and fast with few clusters and many units.
 *
 * Method: successive shortest paths, one unit at a time, on a graph of C + 1
 * nodes only (the C clusters and X, a virtual "unserved" cluster of unlimited
 * capacity). The unit nodes of the bipartite flow network are contracted away:
 * a residual path cluster a -> unit w -> cluster b (move some of w's demand
 * from a to b, which frees room at a) becomes one arc a -> b of cost
 * cost[w][b] - cost[w][a], and only the cheapest such w matters. Per ordered
 * pair (a, b) a lazy-deletion binary heap keeps the units that have flow at a,
 * keyed by that difference (costs are static, so keys never change; an entry
 * is stale when its unit's flow at a dropped to zero since it was pushed).
 *
 * Costs are lexicographic pairs (hi, lo): hi counts unserved demand, lo is the
 * cost proper. Arcs into X have hi = +1. So a path to X is taken only when no
 * path to real free capacity exists (maximum flow first), and a path
 * a -(w)-> X (w, served at a, becomes unserved so that u takes its place) is
 * taken when it lowers the cost: the result is the min-cost flow among
 * maximum flows, exactly, with no big-M constant to lose precision to. X is
 * always a sink, so arcs out of X are never needed: a path X -> b ... would
 * have to end at free capacity that an unserved unit could already reach,
 * which the closure argument below excludes.
 *
 * Invariant (Johnson potentials): with ph/pl the node potentials, every
 * residual arc's reduced cost is >= 0 lexicographically, so Dijkstra is valid.
 * Adding unit u keeps the previous units' flow optimal (standard successive
 * shortest path argument); a unit whose demand cannot reach free capacity now
 * never can later (the set it reaches is closed under residual arcs), so the
 * order of units affects neither the cost nor the unserved amount, only which
 * of several equal-cost optima is returned. That choice is deterministic:
 * same inputs, same flow (the mapping policy relies on it across DNS servers).
 *
 * Complexity: O(C) per unit whose cheapest cluster has room; O(C^2) heap peeks
 * per augmentation when clusters are full; each augmentation exhausts the
 * unit, fills a cluster or empties one (unit, cluster) flow.
 */
import { InvalidArgumentError } from '../../errors/errors.ts';

export interface AssignProblem {
  readonly units: number; // U map units (client prefix groups)
  readonly clusters: number; // C clusters
  readonly demand: Float64Array; // length U, >= 0 (load, e.g. new connections/s)
  readonly capacity: Float64Array; // length C, >= 0
  readonly cost: Float64Array; // U*C row-major, cost per unit of demand (RTT ms); Infinity = not allowed
}

export interface Assignment {
  readonly flow: Float64Array; // U*C, demand of unit u served by cluster c (fractional splits allowed)
  readonly cost: number; // sum flow*cost
  readonly unserved: number; // demand beyond what capacity allows (min-cost maximum flow)
}

const EMPTY_F64 = new Float64Array(0);
const EMPTY_I32 = new Int32Array(0);

/** Min-heap of (key, unit, stamp) with lazy deletion; grows by doubling. */
class ArcHeap {
  // Storage is allocated on the first push: a solve creates (C+1)^2 heaps and
  // most stay empty; thousands of typed-array allocations cost more than a
  // light solve.
  keys = EMPTY_F64;
  units = EMPTY_I32;
  stamps = EMPTY_I32;
  size = 0;

  push(key: number, unit: number, stamp: number): void {
    if (this.size === this.keys.length) {
      const n = Math.max(8, this.size * 2);
      const k = new Float64Array(n);
      k.set(this.keys);
      const u = new Int32Array(n);
      u.set(this.units);
      const s = new Int32Array(n);
      s.set(this.stamps);
      this.keys = k;
      this.units = u;
      this.stamps = s;
    }
    let i = this.size++;
    // Ties broken by unit index so the chosen unit (hence the flow) is deterministic.
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pk = (this.keys[p] ?? 0);
      if (pk < key || (pk === key && (this.units[p] ?? 0) < unit)) break;
      this.keys[i] = pk;
      this.units[i] = (this.units[p] ?? 0);
      this.stamps[i] = (this.stamps[p] ?? 0);
      i = p;
    }
    this.keys[i] = key;
    this.units[i] = unit;
    this.stamps[i] = stamp;
  }

  pop(): void {
    const last = --this.size;
    if (last === 0) return;
    const key = (this.keys[last] ?? 0);
    const unit = (this.units[last] ?? 0);
    const stamp = (this.stamps[last] ?? 0);
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= last) break;
      const r = c + 1;
      if (r < last) {
        const ck = (this.keys[c] ?? 0);
        const rk = (this.keys[r] ?? 0);
        if (rk < ck || (rk === ck && (this.units[r] ?? 0) < (this.units[c] ?? 0))) c = r;
      }
      const ck = (this.keys[c] ?? 0);
      if (key < ck || (key === ck && unit < (this.units[c] ?? 0))) break;
      this.keys[i] = ck;
      this.units[i] = (this.units[c] ?? 0);
      this.stamps[i] = (this.stamps[c] ?? 0);
      i = c;
    }
    this.keys[i] = key;
    this.units[i] = unit;
    this.stamps[i] = stamp;
  }
}

/** A growable list of (unit, stamp). */
class UnitList {
  units = EMPTY_I32;
  stamps = EMPTY_I32;
  size = 0;

  push(unit: number, stamp: number): void {
    if (this.size === this.units.length) {
      const n = Math.max(16, this.size * 2);
      const u = new Int32Array(n);
      u.set(this.units);
      const s = new Int32Array(n);
      s.set(this.stamps);
      this.units = u;
      this.stamps = s;
    }
    this.units[this.size] = unit;
    this.stamps[this.size++] = stamp;
  }
}

function checkProblem(p: AssignProblem): void {
  const { units: U, clusters: C } = p;
  if (!Number.isInteger(U) || U < 0) throw new InvalidArgumentError(`assignment: units must be an integer >= 0, got ${U}`);
  if (!Number.isInteger(C) || C < 0) throw new InvalidArgumentError(`assignment: clusters must be an integer >= 0, got ${C}`);
  if (p.demand.length !== U) throw new InvalidArgumentError(`assignment: demand has length ${p.demand.length}, expected units = ${U}`);
  if (p.capacity.length !== C) throw new InvalidArgumentError(`assignment: capacity has length ${p.capacity.length}, expected clusters = ${C}`);
  if (p.cost.length !== U * C) throw new InvalidArgumentError(`assignment: cost has length ${p.cost.length}, expected units*clusters = ${U * C}`);
  for (let u = 0; u < U; u++) {
    const d = (p.demand[u] ?? 0);
    if (!(d >= 0 && d < Infinity)) throw new InvalidArgumentError(`assignment: demand[${u}] = ${d}; must be finite and >= 0`);
  }
  for (let c = 0; c < C; c++) {
    const k = (p.capacity[c] ?? 0);
    // Infinity capacity is allowed: an unlimited cluster.
    if (!(k >= 0)) throw new InvalidArgumentError(`assignment: capacity[${c}] = ${k}; must be >= 0`);
  }
  for (let i = 0; i < U * C; i++) {
    const x = (p.cost[i] ?? 0);
    if (Number.isNaN(x) || x === -Infinity) throw new InvalidArgumentError(`assignment: cost[${i}] = ${x}; must be finite or +Infinity`);
  }
}

/**
 * One solve. A class with typed-array fields and small methods rather than one
 * large closure-heavy function: V8 optimizes the hot loops (select, relax,
 * heap top) as separate small functions and does not deoptimize the whole
 * solve when one of them sees a new shape.
 */
class Solver {
  readonly U: number;
  readonly C: number;
  readonly N: number; // C + 1 nodes; node C is X, "unserved"
  readonly X: number;
  readonly cost: Float64Array;
  readonly eps: number;
  readonly f: Float64Array; // U*N flow incl. the X column
  readonly stamp: Int32Array; // U*N, bumped each time f[w][a] turns positive
  readonly cap: Float64Array; // residual capacity per cluster
  readonly heaps: ArcHeap[]; // N*N, arcs a -> b
  // The live top of each heap, dense (N*N, fits in cache): relax reads only
  // these. Invariant: topUnit[h] is the unit of heap h's smallest live entry
  // (-1 if none) and topKey[h] its key. Kept by pushArc (a smaller entry) and
  // leave (the top's unit lost its flow at a); heaps are touched only then.
  readonly topKey: Float64Array;
  readonly topUnit: Int32Array;
  // Units entering node a are only listed (members[a], with the stamp they
  // entered with) until a is next relaxed from (flush). Most clusters of a
  // lightly loaded problem never fill, and most units then cost O(1) to place
  // instead of C heap pushes. active[a]: a's heaps hold entries.
  readonly active: Uint8Array;
  readonly members: UnitList[];
  readonly ph: Float64Array; // potentials (hi, lo)
  readonly pl: Float64Array;
  readonly dh: Float64Array; // Dijkstra labels (hi, lo), reduced
  readonly dl: Float64Array;
  readonly done: Uint8Array;
  readonly pred: Int32Array; // previous node on the path, -1 = u's direct arc
  readonly predUnit: Int32Array; // the unit whose demand moves along that arc

  constructor(p: AssignProblem) {
    const U = p.units;
    const C = p.clusters;
    const N = C + 1;
    this.U = U;
    this.C = C;
    this.N = N;
    this.X = C;
    this.cost = p.cost;
    let totalDemand = 0;
    for (let u = 0; u < U; u++) totalDemand += p.demand[u] ?? 0;
    // Below this, a flow or a capacity is zero (float residue of subtractions).
    this.eps = 1e-12 * Math.max(totalDemand, 1e-300);
    this.f = new Float64Array(U * N);
    this.stamp = new Int32Array(U * N);
    this.cap = Float64Array.from(p.capacity);
    this.heaps = Array.from({ length: N * N }, () => new ArcHeap());
    this.topKey = new Float64Array(N * N);
    this.topUnit = new Int32Array(N * N).fill(-1);
    this.active = new Uint8Array(N);
    this.members = Array.from({ length: N }, () => new UnitList());
    this.ph = new Float64Array(N);
    this.pl = new Float64Array(N);
    this.dh = new Float64Array(N);
    this.dl = new Float64Array(N);
    this.done = new Uint8Array(N);
    this.pred = new Int32Array(N);
    this.predUnit = new Int32Array(N);
  }

  /** Unit-side cost of node a for unit w: cost[w][a], 0 for X. */
  nodeCost(w: number, a: number): number {
    return a === this.X ? 0 : (this.cost[w * this.C + a] ?? 0);
  }

  pushArcs(w: number, a: number, s: number): void {
    const N = this.N;
    const ca = this.nodeCost(w, a);
    for (let b = 0; b < N; b++) {
      if (b === a) continue;
      const cb = this.nodeCost(w, b);
      if (cb === Infinity) continue;
      const h = a * N + b;
      const key = cb - ca;
      this.heaps[h]?.push(key, w, s);
      const tu = this.topUnit[h] ?? -1;
      const tk = this.topKey[h] ?? 0;
      if (tu < 0 || key < tk || (key === tk && w < tu)) {
        this.topKey[h] = key;
        this.topUnit[h] = w;
      }
    }
  }

  /** f[w][a] dropped to zero: heap tops of row a that were w's are refreshed. */
  leave(w: number, a: number): void {
    if (this.active[a] === 0) return;
    const N = this.N;
    for (let b = 0; b < N; b++) {
      const h = a * N + b;
      if (this.topUnit[h] !== w) continue;
      const heap = this.heaps[h];
      const t = heap === undefined ? -1 : this.top(heap, a);
      this.topUnit[h] = t;
      this.topKey[h] = t < 0 || heap === undefined ? 0 : (heap.keys[0] ?? 0);
    }
  }

  /**
   * f[w][a] turned positive: w now offers arcs a -> b for every b it may use.
   * They are only listed here; flush() pushes them into row a's heaps when a
   * is next relaxed from. Units that enter and leave a between two such
   * moments (common in the chains of a tight solve) are never pushed.
   */
  enter(w: number, a: number): void {
    const i = w * this.N + a;
    const s = (this.stamp[i] ?? 0) + 1;
    this.stamp[i] = s;
    if (a !== this.X) this.members[a]?.push(w, s); // X is never relaxed from (see above)
  }

  /** Pushes the listed, still live units of node a into its heaps. */
  flush(a: number): void {
    this.active[a] = 1;
    const list = this.members[a];
    if (list === undefined) return;
    for (let i = 0; i < list.size; i++) {
      const w = list.units[i] ?? 0;
      const s = list.stamps[i] ?? 0;
      const j = w * this.N + a;
      if ((this.f[j] ?? 0) > 0 && this.stamp[j] === s) this.pushArcs(w, a, s);
    }
    list.size = 0;
  }

  /** The cheapest live arc a -> b: its unit, or -1. Drops stale tops. */
  top(heap: ArcHeap, a: number): number {
    while (heap.size > 0) {
      const w = heap.units[0] ?? 0;
      const i = w * this.N + a;
      if ((this.f[i] ?? 0) > 0 && this.stamp[i] === heap.stamps[0]) return w;
      heap.pop();
    }
    return -1;
  }

  /** Dijkstra labels start at u's direct arcs (any shift: only differences matter). */
  init(u: number): void {
    const { C, X, dh, dl, ph, pl, done, pred, predUnit, cost } = this;
    const row = u * C;
    for (let c = 0; c < C; c++) {
      const k = cost[row + c] ?? 0;
      done[c] = 0;
      pred[c] = -1;
      predUnit[c] = -1;
      if (k === Infinity) {
        dh[c] = Infinity;
        dl[c] = Infinity;
      } else {
        dh[c] = -(ph[c] ?? 0);
        dl[c] = k - (pl[c] ?? 0);
      }
    }
    done[X] = 0;
    pred[X] = -1;
    predUnit[X] = -1;
    dh[X] = 1 - (ph[X] ?? 0);
    dl[X] = -(pl[X] ?? 0);
  }

  /** The unfinished node with the smallest label, or -1. */
  select(): number {
    const { N, dh, dl, done } = this;
    let a = -1;
    let ah = Infinity;
    let al = Infinity;
    for (let v = 0; v < N; v++) {
      if (done[v] === 1) continue;
      const h = dh[v] ?? Infinity;
      if (h === Infinity) continue;
      const l = dl[v] ?? Infinity;
      if (a < 0 || h < ah || (h === ah && l < al)) {
        a = v;
        ah = h;
        al = l;
      }
    }
    return a;
  }

  relax(a: number): void {
    const { N, X, dh, dl, ph, pl, done, pred, predUnit, topKey, topUnit } = this;
    const ha = (dh[a] ?? 0) + (ph[a] ?? 0);
    const la = (dl[a] ?? 0) + (pl[a] ?? 0);
    const base = a * N;
    for (let b = 0; b < N; b++) {
      if (done[b] === 1) continue;
      const w = topUnit[base + b] ?? -1;
      if (w < 0) continue;
      const nh = ha + (b === X ? 1 : 0) - (ph[b] ?? 0);
      const nl = la + (topKey[base + b] ?? 0) - (pl[b] ?? 0);
      const bh = dh[b] ?? Infinity;
      if (nh < bh || (nh === bh && nl < (dl[b] ?? Infinity))) {
        dh[b] = nh;
        dl[b] = nl;
        pred[b] = a;
        predUnit[b] = w;
      }
    }
  }

  /** Shortest path from u to a sink (X or a cluster with room); returns the sink. */
  shortestPath(u: number): number {
    this.init(u);
    for (;;) {
      // Invariant: X has a finite label from init() on and is a sink, so
      // select() returns X at the latest; a < 0 cannot happen (X stands in).
      const a = this.select();
      if (a < 0) return this.X;
      this.done[a] = 1;
      if (a === this.X || (this.cap[a] ?? 0) > this.eps) return a;
      if ((this.members[a]?.size ?? 0) > 0) this.flush(a);
      this.relax(a);
    }
  }

  /** Potentials: finalized nodes by their distance, the rest by the sink's. */
  updatePotentials(t: number): void {
    const { N, dh, dl, ph, pl, done } = this;
    const th = dh[t] ?? 0;
    const tl = dl[t] ?? 0;
    for (let v = 0; v < N; v++) {
      const fin = done[v] === 1;
      ph[v] = (ph[v] ?? 0) + (fin ? (dh[v] ?? 0) : th);
      pl[v] = (pl[v] ?? 0) + (fin ? (dl[v] ?? 0) : tl);
    }
  }

  /** Moves up to rem of u's demand along the path to t; returns the amount. */
  augment(u: number, t: number, rem: number): number {
    const { N, X, f, cap, pred, predUnit, eps } = this;
    let delta = rem;
    if (t !== X && (cap[t] ?? 0) < delta) delta = cap[t] ?? 0;
    for (let v = t; (pred[v] ?? -1) >= 0; v = pred[v] ?? -1) {
      const x = f[(predUnit[v] ?? 0) * N + (pred[v] ?? 0)] ?? 0;
      if (x < delta) delta = x;
    }
    // Each arc a -(w)-> b moves delta of w from a to b.
    let v = t;
    for (;;) {
      const a = pred[v] ?? -1;
      if (a < 0) break;
      const w = predUnit[v] ?? 0;
      const ib = w * N + v;
      const before = f[ib] ?? 0;
      f[ib] = before + delta;
      if (before <= 0) this.enter(w, v);
      const ia = w * N + a;
      const left = (f[ia] ?? 0) - delta;
      if (left > eps) f[ia] = left;
      else {
        f[ia] = 0;
        this.leave(w, a);
      }
      v = a;
    }
    const iu = u * N + v;
    const before = f[iu] ?? 0;
    f[iu] = before + delta;
    if (before <= 0) this.enter(u, v);
    if (t !== X) {
      const left = (cap[t] ?? 0) - delta;
      cap[t] = left > eps ? left : 0;
    }
    return delta;
  }

  place(u: number, demand: number): void {
    let rem = demand;
    while (rem > this.eps) {
      const t = this.shortestPath(u);
      this.updatePotentials(t);
      rem -= this.augment(u, t, rem);
    }
  }
}

export function solveAssignment(p: AssignProblem): Assignment {
  checkProblem(p);
  const s = new Solver(p);
  const { U, C, N, X, f } = s;
  for (let u = 0; u < U; u++) s.place(u, p.demand[u] ?? 0);

  const flow = new Float64Array(U * C);
  let total = 0;
  let unserved = 0;
  for (let u = 0; u < U; u++) {
    for (let c = 0; c < C; c++) {
      const x = f[u * N + c] ?? 0;
      if (x > 0) {
        flow[u * C + c] = x;
        total += x * (p.cost[u * C + c] ?? 0);
      }
    }
    unserved += f[u * N + X] ?? 0;
  }
  return { flow, cost: total, unserved };
}
