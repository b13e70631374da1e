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
 * cost proper. Arcs into X have hi = +1, arcs out of X hi = -1. So a path
 * to X is taken only when no path to real free capacity exists (maximum flow
 * first), and a path X -> b (an unserved unit gets served at b instead of the
 * current one, served count unchanged) is taken when it lowers the cost: the
 * result is the min-cost flow among maximum flows, exactly, with no big-M
 * constant to lose precision to.
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

/** Min-heap of (key, unit, stamp) with lazy deletion; grows by doubling. */
class ArcHeap {
  keys = new Float64Array(4);
  units = new Int32Array(4);
  stamps = new Int32Array(4);
  size = 0;

  push(key: number, unit: number, stamp: number): void {
    if (this.size === this.keys.length) {
      const n = this.size * 2;
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

export function solveAssignment(p: AssignProblem): Assignment {
  checkProblem(p);
  const U = p.units;
  const C = p.clusters;
  const N = C + 1; // node C is X, "unserved"
  const X = C;
  const cost = p.cost;

  let totalDemand = 0;
  for (let u = 0; u < U; u++) totalDemand += (p.demand[u] ?? 0);
  // Below this, a flow or a capacity is zero (float residue of subtractions).
  const eps = 1e-12 * Math.max(totalDemand, 1e-300);

  const f = new Float64Array(U * N); // flow incl. the X column
  const stamp = new Int32Array(U * N); // bumped each time f[w][a] turns positive
  const cap = new Float64Array(C);
  for (let c = 0; c < C; c++) cap[c] = (p.capacity[c] ?? 0);
  const heaps: (ArcHeap | undefined)[] = new Array<ArcHeap | undefined>(N * N);
  const ph = new Float64Array(N);
  const pl = new Float64Array(N);

  const dh = new Float64Array(N);
  const dl = new Float64Array(N);
  const done = new Uint8Array(N);
  const pred = new Int32Array(N);
  const predUnit = new Int32Array(N);

  /** Unit-side cost of node a for unit w: cost[w][a], 0 for X. */
  const nodeCost = (w: number, a: number): number => (a === X ? 0 : (cost[w * C + a] ?? 0));

  /** f[w][a] turned positive: w now offers arcs a -> b for every b it may use. */
  const enter = (w: number, a: number): void => {
    const s = (stamp[w * N + a] = (stamp[w * N + a] ?? 0) + 1);
    const ca = nodeCost(w, a);
    for (let b = 0; b < N; b++) {
      if (b === a) continue;
      const cb = nodeCost(w, b);
      if (cb === Infinity) continue;
      const h = a * N + b;
      let heap = heaps[h];
      if (heap === undefined) heaps[h] = heap = new ArcHeap();
      heap.push(cb - ca, w, s);
    }
  };

  /** The cheapest live arc a -> b: its unit, or -1. Drops stale tops. */
  const top = (a: number, b: number): number => {
    const heap = heaps[a * N + b];
    if (heap === undefined) return -1;
    while (heap.size > 0) {
      const w = (heap.units[0] ?? 0);
      const i = w * N + a;
      if ((f[i] ?? 0) > 0 && stamp[i] === heap.stamps[0]) return w;
      heap.pop();
    }
    return -1;
  };

  for (let u = 0; u < U; u++) {
    let rem = (p.demand[u] ?? 0);
    const row = u * C;
    while (rem > eps) {
      // Dijkstra over the C + 1 nodes with reduced (hi, lo) costs. Initial
      // labels are u's direct arcs (any shift is fine: only differences matter).
      for (let c = 0; c < C; c++) {
        const k = (cost[row + c] ?? 0);
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

      let t: number;
      for (;;) {
        let a = -1;
        for (let v = 0; v < N; v++) {
          if (done[v] === 1 || dh[v] === Infinity) continue;
          if (a < 0 || (dh[v] ?? 0) < (dh[a] ?? 0) || (dh[v] === dh[a] && (dl[v] ?? 0) < (dl[a] ?? 0))) a = v;
        }
        // X is always reachable from u, so a sink is always found first.
        if (a < 0) throw new Error('assignment: no sink reachable (invariant broken)');
        done[a] = 1;
        if (a === X || (cap[a] ?? 0) > eps) {
          t = a;
          break;
        }
        const ha = (dh[a] ?? 0) + (ph[a] ?? 0);
        const la = (dl[a] ?? 0) + (pl[a] ?? 0);
        for (let b = 0; b < N; b++) {
          if (done[b] === 1) continue;
          const w = top(a, b);
          if (w < 0) continue;
          const arcHi = (b === X ? 1 : 0) - (a === X ? 1 : 0);
          const nh = ha + arcHi - (ph[b] ?? 0);
          const nl = la + (heaps[a * N + b]?.keys[0] ?? 0) - (pl[b] ?? 0);
          if (nh < (dh[b] ?? 0) || (nh === dh[b] && nl < (dl[b] ?? 0))) {
            dh[b] = nh;
            dl[b] = nl;
            pred[b] = a;
            predUnit[b] = w;
          }
        }
      }

      // Potentials: finalized nodes by their distance, the rest by the sink's.
      const th = (dh[t] ?? 0);
      const tl = (dl[t] ?? 0);
      for (let v = 0; v < N; v++) {
        if (done[v] === 1) {
          ph[v] = (ph[v] ?? 0) + (dh[v] ?? 0);
          pl[v] = (pl[v] ?? 0) + (dl[v] ?? 0);
        } else {
          ph[v] = (ph[v] ?? 0) + th;
          pl[v] = (pl[v] ?? 0) + tl;
        }
      }

      // Bottleneck along the path.
      let delta = rem;
      if (t !== X && (cap[t] ?? 0) < delta) delta = (cap[t] ?? 0);
      for (let v = t; (pred[v] ?? 0) >= 0; v = (pred[v] ?? 0)) {
        const x = f[(predUnit[v] ?? 0) * N + (pred[v] ?? 0)] ?? 0;
        if (x < delta) delta = x;
      }
      // Apply: each arc a -(w)-> b moves delta of w from a to b.
      let v = t;
      while ((pred[v] ?? 0) >= 0) {
        const a = (pred[v] ?? 0);
        const w = (predUnit[v] ?? 0);
        const ib = w * N + v;
        const wasZero = (f[ib] ?? 0) <= 0;
        f[ib] = (f[ib] ?? 0) + delta;
        if (wasZero) enter(w, v);
        const ia = w * N + a;
        const left = (f[ia] ?? 0) - delta;
        f[ia] = left > eps ? left : 0;
        v = a;
      }
      const iu = u * N + v;
      const wasZero = (f[iu] ?? 0) <= 0;
      f[iu] = (f[iu] ?? 0) + delta;
      if (wasZero) enter(u, v);
      if (t !== X) {
        const left = (cap[t] ?? 0) - delta;
        cap[t] = left > eps ? left : 0;
      }
      rem -= delta;
    }
  }

  const flow = new Float64Array(U * C);
  let total = 0;
  let unserved = 0;
  for (let u = 0; u < U; u++) {
    for (let c = 0; c < C; c++) {
      const x = (f[u * N + c] ?? 0);
      if (x > 0) {
        flow[u * C + c] = x;
        total += x * (cost[u * C + c] ?? 0);
      }
    }
    unserved += (f[u * N + X] ?? 0);
  }
  return { flow, cost: total, unserved };
}
