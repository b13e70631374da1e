/**
 * The `mapping` policy's global assignment of client prefixes to clusters
 * (issue 24, part 4), as a pure class: inputs in (per-prefix demand and RTTs,
 * per-cluster capacity and load, the time), a table out. No timers, sockets
 * or logs: the DNS glue (service.ts) feeds it from the live tables on a timer,
 * the simulator feeds it from a scenario on a simulated clock.
 *
 * A recompute:
 *   0. Planned demand: a prefix's demand, plus how far it stands above its
 *      own average over the last trendSeconds (an EWMA), where it does: on
 *      a steady rise that is the rise over the next trendSeconds; a jitter
 *      adds no more than itself (see recompute()).
 *   1. Eligible prefixes: demand > 0 and a finite RTT to at least one usable
 *      cluster. Everyone else is left out of the table, and the policy
 *      answers them as `rtt` does (the fallback).
 *   2. Candidates per prefix: the `nearest` usable clusters by measured RTT
 *      (ties by cluster index), plus its current cluster if still usable and
 *      measured (so it can stay). Other clusters are not allowed (Infinity):
 *      a mapping system sends a client to one of its near clusters or not at
 *      all; demand that fits nowhere near is unserved and falls back to `rtt`.
 *   3. Map units: prefixes with the same current cluster and the same
 *      candidates with the same quantized RTTs (round(rtt / rttQuantumMs))
 *      form one unit; its demand is the members' sum. The unit's cost per
 *      unit of demand to candidate c is quantized RTT + (c is not its current
 *      cluster ? movePenaltyMs : 0): the hysteresis. A prefix moves only when
 *      the RTT gain pays the penalty, or when capacity forces it.
 *      The solve is exact for the quantized costs: the grouping costs at most
 *      rttQuantumMs / 2 of RTT per unit of demand.
 *   4. Capacity per cluster: headroom × capacity, less its part of the load
 *      that does not come from this solve's prefixes (the reported loads'
 *      total minus the eligible demand, placed in proportion to each
 *      cluster's load beyond what the previous table put there); 0 for an
 *      unusable cluster. When demand is left unserved with every usable
 *      cluster a candidate, the headroom is raised (the same for every
 *      cluster, at most to 1) just enough for the demand to fit, and the
 *      solve runs again: demand the world has room for is never left to
 *      the fallback.
 *   5. solveAssignment (exact min-cost maximum flow, assign.ts). A unit split
 *      across clusters splits its members (sorted by key) in proportion: the
 *      shares laid end to end, its current cluster's first; a member covered
 *      by one share goes there; a member straddling shares goes to the one
 *      covering most of it whose room (capacity the solve left free, and
 *      what straddlers gave back) takes the rest, else the one covering
 *      most of it whose room plus slack (the capacity the headroom held
 *      back) takes the rest, else it gets no entry. So no cluster gets more
 *      than its capacity, and beyond headroom × capacity only straddlers.
 *      Members beyond the served share get no entry either (fallback).
 *
 * Determinism: the units are ordered by their signature text and members by
 * key before the solve, and the solver is deterministic, so two DNS servers
 * with the same inputs compute the same table whatever order their maps were
 * filled in (docs/steering.md: why this rather than publishing one table).
 *
 * TTL per prefix (adaptive, within [ttlMin, ttlMax]): ttlMin while its
 * assignment is likely to move (its cluster is at nearCapacity or more of
 * the capacity the solve gave it, or its newest RTT is younger than
 * freshRttSeconds); otherwise rising linearly from ttlMin to ttlMax over
 * stableSeconds since the prefix last changed cluster.
 */
import { solveAssignment } from './assign.ts';

export interface MappingOptions {
  /** Candidate clusters per prefix: its nearest usable measured ones. */
  readonly nearest: number;
  /** RTT quantum of the grouping (ms). */
  readonly rttQuantumMs: number;
  /** Added to the cost of every cluster but the prefix's current one (ms of RTT per unit of demand). */
  readonly movePenaltyMs: number;
  /** Share of a cluster's capacity the assignment may fill. */
  readonly headroom: number;
  /** A prefix whose demand rose since the last recompute is planned at its demand that far ahead on that slope (s). */
  readonly trendSeconds: number;
  readonly ttlMin: number;
  readonly ttlMax: number;
  /** Utilization (of the capacity the solve had) at which a cluster's prefixes get ttlMin. */
  readonly nearCapacity: number;
  readonly freshRttSeconds: number;
  readonly stableSeconds: number;
}

export interface MappingPrefixInput {
  /** The client prefix key (client_prefix.ts form). */
  readonly key: string;
  /** Demand in the clusters' capacity unit (new connections/s). */
  readonly demand: number;
  /** RTT (ms) per cluster index: NaN unknown, Infinity no reply. */
  readonly rtt: Float64Array;
  /** When its newest RTT was measured (same clock as `now`). */
  readonly rttAt: number;
}

export interface MappingClusterInput {
  readonly usable: boolean;
  /** Capacity and current load, new connections/s. */
  readonly capacity: number;
  readonly load: number;
}

export interface MappingEntry {
  readonly cluster: number;
  readonly ttl: number;
  /** Its demand and its (quantized) RTT to `cluster` in the recompute that placed it (status). */
  readonly demand: number;
  readonly rttMs: number;
  /** When it last got a different cluster, or first got one (same clock as `now`). */
  readonly since: number;
}

export interface RecomputeStats {
  readonly at: number;
  /** Prefixes in the table. */
  readonly prefixes: number;
  /** Prefixes considered (eligible) and the map units they formed. */
  readonly eligible: number;
  readonly units: number;
  /** Prefixes whose cluster changed (present before and after). */
  readonly moved: number;
  /** Demand the solve could not place near its prefixes (those get the fallback). */
  readonly unserved: number;
  /** Demand-weighted mean RTT (ms) of the served demand, quantized costs without penalties. */
  readonly meanRttMs: number;
  /** The headroom the solve used: the configured one, or higher when the demand did not fit in it. */
  readonly headroom: number;
  /** Wall time of the solve alone and of the whole recompute (ms). */
  readonly solveMs: number;
  readonly totalMs: number;
  /** Per cluster index: the capacity the solve had for the eligible demand, and the demand it placed there. */
  readonly capacity: readonly number[];
  readonly assigned: readonly number[];
}

interface Entry {
  cluster: number;
  ttl: number;
  demand: number;
  rttMs: number;
  /** When the prefix last got a different cluster (or first got one). */
  since: number;
}

interface DemandSeen {
  /** The demand's exponentially weighted average, time constant trendSeconds. */
  readonly slow: number;
  readonly at: number;
}

interface Unit {
  readonly sig: string;
  readonly current: number;
  readonly cands: readonly number[];
  readonly q: readonly number[];
  readonly members: MappingPrefixInput[];
  demand: number;
}

export class MappingTable {
  readonly clusters: number;
  readonly opts: MappingOptions;
  readonly #table = new Map<string, Entry>();
  readonly #clock: () => number;
  /** Each prefix's demand at the last recompute (the trend's other end); only the last recompute's prefixes. */
  #seen = new Map<string, DemandSeen>();
  last: RecomputeStats | undefined;
  recomputes = 0;
  movedTotal = 0;

  /** `clock` times the solve (wall time, ms); the simulator may pass its own. */
  constructor(clusters: number, opts: MappingOptions, clock: () => number = () => performance.now()) {
    this.clusters = clusters;
    this.opts = opts;
    this.#clock = clock;
  }

  get size(): number {
    return this.#table.size;
  }

  /** O(1): the prefix's cluster and TTL, or undefined (fallback). */
  lookup(key: string): MappingEntry | undefined {
    return this.#table.get(key);
  }

  /**
   * A DNS worker's table: the primary's, as share.ts sends it (a full table
   * or a delta), instead of a recompute of its own. Only cluster and TTL
   * are kept (the lookup's); demand and RTT stay in the primary's table,
   * which status shows. An entry whose cluster is not one of this config's
   * is skipped (a worker and primary always share the config; a restart
   * key).
   */
  applyShared(full: boolean, set: readonly unknown[], del: readonly unknown[], now: number): void {
    if (full) this.#table.clear();
    for (const k of del) if (typeof k === 'string') this.#table.delete(k);
    for (let i = 0; i + 2 < set.length; i += 3) {
      const k = set[i];
      const c = set[i + 1];
      const ttl = set[i + 2];
      if (typeof k !== 'string' || typeof c !== 'number' || typeof ttl !== 'number' || !(c >= 0 && c < this.clusters)) continue;
      const was = this.#table.get(k);
      this.#table.set(k, { cluster: c, ttl, demand: 0, rttMs: 0, since: was !== undefined && was.cluster === c ? was.since : now });
    }
  }

  /** Every entry (status, the simulator). */
  entries(): IterableIterator<[string, MappingEntry]> {
    return this.#table.entries();
  }

  recompute(prefixes: Iterable<MappingPrefixInput>, clusters: readonly MappingClusterInput[], now: number): RecomputeStats {
    const t0 = this.#clock();
    const C = this.clusters;
    const o = this.opts;
    const prev = this.#table;

    const usable = new Uint8Array(C);
    for (let c = 0; c < C; c++) usable[c] = clusters[c]?.usable === true ? 1 : 0;
    // Candidates: the `nearest` clusters of each prefix. When that leaves
    // demand unserved (a flash crowd beyond its region's clusters, a lost
    // cluster's region), the solve runs once more with every usable
    // measured cluster a candidate, so demand spills to the next-nearest
    // clusters with room instead of falling back to the greedy `rtt`
    // answer and overloading its own region (measured in the simulator's
    // flash crowd: 62,730 overloaded cluster-seconds with the fallback).
    let K = Math.max(1, o.nearest);
    // Headroom of this solve: o.headroom, unless the world's demand is
    // beyond headroom × capacity (then raised, see below).
    let h = o.headroom;
    let solveMs = 0;
    let units: Map<string, Unit>;
    let mappedLoad: Float64Array;
    let all: MappingPrefixInput[];
    let eligible: number;
    let list: Unit[];
    let U: number;
    let demand: Float64Array;
    let capacity: Float64Array;
    let a: ReturnType<typeof solveAssignment>;
    // Planned demand: the demand given, plus how far it stands above its
    // own average over the last trendSeconds (an EWMA of time constant
    // trendSeconds), where it stands above. On a steady rise of slope s the
    // average lags by s x trendSeconds, so the plan is the demand
    // trendSeconds ahead. The table takes effect only as the resolvers'
    // caches expire (a TTL), and the loads it is checked against are a
    // report old: planning for the demand of now on a rising curve put the
    // simulator's flash crowd over capacity in its ramp. A jitter adds no
    // more than itself (a slope taken between two recomputes a second
    // apart multiplied a 5% jitter of the testbed's load reports 30-fold,
    // and moved a prefix that fitted). The plan is below twice the demand
    // by construction. Falling demand is planned as it is (no credit taken
    // for a fall). `now` is the demand given, for the load bookkeeping
    // (what the reports show).
    let input: MappingPrefixInput[] = [];
    const actual: MappingPrefixInput[] = [];
    let planned = false;
    const nowDemand = new Map<MappingPrefixInput, number>();
    const seen = new Map<string, DemandSeen>();
    for (const p of prefixes) {
      const before = this.#seen.get(p.key);
      let d = p.demand;
      let slow = p.demand;
      // No average yet (a new prefix), or a jump beyond twice it: a change
      // of regime (the DNS glue's first load report scales every demand
      // from a placeholder to real), not a slope; the average starts anew.
      if (before !== undefined && before.slow > 0 && p.demand <= 2 * before.slow && now > before.at && o.trendSeconds > 0) {
        slow = before.slow + (1 - Math.exp(-(now - before.at) / (o.trendSeconds * 1000))) * (p.demand - before.slow);
        if (p.demand > slow) d = p.demand + (p.demand - slow);
      }
      seen.set(p.key, { slow, at: now });
      const q = d === p.demand ? p : { key: p.key, demand: d, rtt: p.rtt, rttAt: p.rttAt };
      if (q !== p) planned = true;
      nowDemand.set(q, p.demand);
      input.push(q);
      actual.push(p);
    }
    this.#seen = seen;
    for (;;) {
      // Demand the previous assignment put on each cluster (at today's demand).
      units = new Map<string, Unit>();
      mappedLoad = new Float64Array(C);
      all = [];
      eligible = 0;
      let eligibleNow = 0;
      const best = new Int32Array(K + 1);
      for (const p of input) {
        if (!(p.demand > 0)) continue;
        const pe = prev.get(p.key);
        // The K nearest usable measured clusters, by (RTT, index): a partial
        // insertion sort (C × K), not a sort of the whole row.
        let n = 0;
        let currentOk = false;
        for (let c = 0; c < C; c++) {
          const r = p.rtt[c] ?? NaN;
          if (usable[c] === 0 || !Number.isFinite(r)) continue;
          if (pe !== undefined && pe.cluster === c) currentOk = true;
          if (n === K && r >= (p.rtt[best[K - 1] ?? 0] ?? 0)) continue;
          let j = n === K ? K - 2 : n - 1;
          while (j >= 0 && (p.rtt[best[j] ?? 0] ?? 0) > r) {
            best[j + 1] = best[j] ?? 0;
            j--;
          }
          best[j + 1] = c;
          if (n < K) n++;
        }
        if (n === 0) continue;
        eligible++;
        all.push(p);
        const dNow = nowDemand.get(p) ?? p.demand;
        eligibleNow += dNow;
        if (pe !== undefined) mappedLoad[pe.cluster] = (mappedLoad[pe.cluster] ?? 0) + dNow;
        const cands = Array.from(best.subarray(0, n));
        const current = pe !== undefined && currentOk ? pe.cluster : -1;
        if (current >= 0 && !cands.includes(current)) cands.push(current);
        cands.sort((a, b) => a - b);
        const q = cands.map((c) => Math.round((p.rtt[c] ?? 0) / o.rttQuantumMs));
        let sig = `${current}|`;
        for (let i = 0; i < cands.length; i++) sig += `${cands[i]}:${q[i]},`;
        let u = units.get(sig);
        if (u === undefined) units.set(sig, (u = { sig, current, cands, q, members: [], demand: 0 }));
        u.members.push(p);
        u.demand += p.demand;
      }

      // Deterministic order: by signature, members by key.
      list = [...units.values()].sort((a, b) => (a.sig < b.sig ? -1 : a.sig > b.sig ? 1 : 0));
      for (const u of list) u.members.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));

      U = list.length;
      demand = new Float64Array(U);
      const cost = new Float64Array(U * C).fill(Infinity);
      list.forEach((u, i) => {
        demand[i] = u.demand;
        u.cands.forEach((c, j) => {
          cost[i * C + c] = (u.q[j] ?? 0) * o.rttQuantumMs + (c === u.current ? 0 : o.movePenaltyMs);
        });
      });
      // Other load: what the clusters carry beyond this solve's demand (load
      // this server does not see). Only its total is known: the reported
      // loads minus the eligible demand. Where it sits is estimated from the
      // residuals (reported load minus what the previous table put there),
      // shares only. Not the residuals themselves: reports lag the table by
      // the report delay and the resolvers' TTL, so right after a change the
      // residuals hold this solve's own demand (still where the fallback or
      // an older table sent it), and taking that away from the capacity left
      // those prefixes unmapped and flapped (measured in the simulator: a
      // unit alternating between two clusters every few recomputes).
      let eligibleDemand = 0;
      for (const u of list) eligibleDemand += u.demand;
      let loadTotal = 0;
      let residualTotal = 0;
      const residual = new Float64Array(C);
      for (let c = 0; c < C; c++) {
        const k = clusters[c];
        if (k === undefined || !k.usable) continue;
        loadTotal += k.load;
        residual[c] = Math.max(0, k.load - (mappedLoad[c] ?? 0));
        residualTotal += residual[c] ?? 0;
      }
      const otherTotal = Math.max(0, loadTotal - eligibleNow);
      capacity = new Float64Array(C);
      for (let c = 0; c < C; c++) {
        const k = clusters[c];
        if (k === undefined || !k.usable) continue;
        const other = residualTotal > 0 ? (otherTotal * (residual[c] ?? 0)) / residualTotal : 0;
        capacity[c] = Math.max(0, h * k.capacity - other);
      }

      const ts = this.#clock();
      a = solveAssignment({ units: U, clusters: C, demand, capacity, cost });
      solveMs += this.#clock() - ts;
      if (!(a.unserved > 1e-9 * Math.max(1, eligibleDemand))) break;
      if (K < C) {
        K = C;
        continue;
      }
      // The plan is a forecast; the headroom is the margin kept for what
      // nobody forecast. When the plan does not fit the world, the demand
      // of now is solved first (a 1.9x step in the simulator, planned
      // ahead, was beyond the world's capacity and sent the unserved
      // remainder to the fallback, onto full clusters).
      if (planned) {
        planned = false;
        input = actual;
        continue;
      }
      // Every usable cluster is a candidate and demand is still unserved:
      // the world's load is beyond headroom × its capacity. Unserved demand
      // gets the fallback (`rtt`), which sends it to its nearest clusters,
      // already full: measured in the simulator's flash crowd (world demand
      // at 0.91-0.93 of its capacity from 11:20 UTC), 9,280 overloaded
      // cluster-seconds. So the headroom is raised, the same for every
      // cluster, just enough for the demand to fit: Σ max(0, h × cap − other)
      // ≥ h × Σ cap − otherTotal ≥ eligibleDemand. Up to 1: beyond the
      // capacity itself, the unserved demand is real.
      let capTotal = 0;
      for (let c = 0; c < C; c++) if (clusters[c]?.usable === true) capTotal += clusters[c]?.capacity ?? 0;
      const need = capTotal > 0 ? ((eligibleDemand + otherTotal) / capTotal) * (1 + 1e-6) : Infinity;
      if (h >= 1 || !(need > h)) break;
      h = Math.min(1, need);
    }

    // Members to clusters; the new table. room[c]: capacity the solve left
    // free at c, which a member straddling two of its unit's shares may use.
    const room = new Float64Array(C);
    for (let c = 0; c < C; c++) {
      let used = 0;
      for (let i = 0; i < U; i++) used += a.flow[i * C + c] ?? 0;
      room[c] = (capacity[c] ?? 0) - used;
    }
    // slack[c]: the part of c's capacity the headroom held back from the
    // solve. A straddling member that fits whole in no share's room may
    // use it (below): the alternative, no entry, answers it as `rtt` does,
    // which sends it to its nearest cluster, full in a flash crowd (all the
    // straddlers of a region herding onto the same one).
    const slack = new Float64Array(C);
    for (let c = 0; c < C; c++) {
      const k = clusters[c];
      if (k !== undefined && k.usable && (capacity[c] ?? 0) > 0) slack[c] = Math.max(0, (1 - h) * k.capacity);
    }
    let total = 0;
    for (let i = 0; i < U; i++) total += demand[i] ?? 0;
    const tol = 1e-9 * Math.max(1, total);
    const next = new Map<string, Entry>();
    const assigned = new Float64Array(C);
    let moved = 0;
    let rttSum = 0;
    let served = 0;
    const segs: number[] = [];
    const overlap = new Float64Array(C);
    list.forEach((u, i) => {
      // Shares laid end to end: the current cluster's first (its members stay put), then by index.
      segs.length = 0;
      if (u.current >= 0 && (a.flow[i * C + u.current] ?? 0) > 0) segs.push(u.current);
      for (const c of u.cands) if (c !== u.current && (a.flow[i * C + c] ?? 0) > 0) segs.push(c);
      let cum = 0;
      for (const p of u.members) {
        const lo = cum;
        const hi = cum + p.demand;
        cum = hi;
        // How much of [lo, hi) each share covers.
        let edge = 0;
        let best = -1;
        let bestShare = 0;
        for (const s of segs) {
          const f = a.flow[i * C + s] ?? 0;
          const x = Math.max(0, Math.min(hi, edge + f) - Math.max(lo, edge));
          overlap[s] = x;
          edge += f;
          // A member may go to a share it covers if the part beyond the share fits in the room left there.
          if (x > 0 && p.demand - x <= (room[s] ?? 0) + tol && x > bestShare + tol) {
            best = s;
            bestShare = x;
          }
        }
        if (best < 0) {
          // No share takes it whole within the headroom: the one covering
          // most of it whose slack takes the rest (room may go negative, by
          // at most the slack: never beyond the cluster's capacity).
          for (const s of segs) {
            const x = overlap[s] ?? 0;
            if (x > 0 && p.demand - x <= (room[s] ?? 0) + (slack[s] ?? 0) + tol && x > bestShare + tol) {
              best = s;
              bestShare = x;
            }
          }
        }
        for (const s of segs) {
          const x = overlap[s] ?? 0;
          overlap[s] = 0;
          // The parts of the member's demand the chosen cluster does not carry are freed.
          if (s !== best) room[s] = (room[s] ?? 0) + x;
          else room[s] = (room[s] ?? 0) - (p.demand - x);
        }
        if (best < 0) continue; // beyond the served share, or no room for it whole even in the slack: fallback
        const c = best;
        const j = u.cands.indexOf(c);
        const rtt = (u.q[j] ?? 0) * o.rttQuantumMs;
        rttSum += rtt * p.demand;
        served += p.demand;
        assigned[c] = (assigned[c] ?? 0) + p.demand;
        const pe = prev.get(p.key);
        if (pe !== undefined && pe.cluster !== c) moved++;
        next.set(p.key, { cluster: c, ttl: o.ttlMin, demand: p.demand, rttMs: rtt, since: pe !== undefined && pe.cluster === c ? pe.since : now });
      }
    });

    // TTLs: short while the assignment may move, longer while it holds.
    const byKey = new Map<string, MappingPrefixInput>();
    for (const p of all) byKey.set(p.key, p);
    for (const [key, e] of next) {
      const p = byKey.get(key);
      const cap = capacity[e.cluster] ?? 0;
      const hot = cap <= 0 || (assigned[e.cluster] ?? 0) >= o.nearCapacity * cap;
      const fresh = p !== undefined && now - p.rttAt < o.freshRttSeconds * 1000;
      if (hot || fresh) e.ttl = o.ttlMin;
      else {
        const s = o.stableSeconds > 0 ? Math.min(1, (now - e.since) / (o.stableSeconds * 1000)) : 1;
        e.ttl = Math.round(o.ttlMin + (o.ttlMax - o.ttlMin) * s);
      }
    }

    prev.clear();
    for (const [k, e] of next) prev.set(k, e);
    this.recomputes++;
    this.movedTotal += moved;
    const stats: RecomputeStats = {
      at: now,
      prefixes: next.size,
      eligible,
      units: U,
      moved,
      unserved: a.unserved,
      meanRttMs: served > 0 ? rttSum / served : 0,
      headroom: h,
      solveMs,
      totalMs: this.#clock() - t0,
      capacity: Array.from(capacity),
      assigned: Array.from(assigned),
    };
    this.last = stats;
    return stats;
  }
}
