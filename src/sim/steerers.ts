/**
 * The policies the simulator compares, behind one small interface. The
 * engine asks `answer(unit, cls)` for every prefix whose resolver
 * re-queries in a step; `beginStep` runs once per step after the reports
 * of that step were applied to the DNS server's cluster table.
 *
 *   - `rtt`, `capacity` (PipelineSteerer, or PolicySteerer for speed): Sluice's own steering pipeline (src/dns/steer.ts:
 *     Steering with the real ClusterTable, RttTable, sticky, high-rate and
 *     probe tables, and the policies of src/dns/policy/), asked about one
 *     representative client prefix per (map unit, draw class). A unit's
 *     prefixes share its RTT row, so the `rtt` policy gives them one answer
 *     (it draws only for prefixes without RTTs); `capacity` draws per
 *     prefix from a hash, so a unit is asked about `drawClasses` distinct
 *     prefixes and its prefixes spread over them (prefix i of a unit is in
 *     class i mod drawClasses).
 *   - `nearest`: latency routing (Route 53's): the lowest-RTT cluster that
 *     is up, whatever its load.
 *   - `round-robin`: round-robin DNS over the clusters that are up: each
 *     query gets the next cluster in turn (to one resolver: any of them).
 *
 * Decisions are cached per (unit, class) for the step: the pipeline's
 * inputs change only when reports arrive, which is once per step.
 */
import { InvariantError } from '../errors/errors.ts';
import { componentLogger } from '../log/logger.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { prefixOfAddress, type ClientPrefix } from '../dns/client_prefix.ts';
import { ClusterTable } from '../dns/cluster_state.ts';
import { dnsConfigSchema, type DnsConfig } from '../dns/config.ts';
import { HighRateTable } from '../dns/high_rate.ts';
import { prefixDraw } from '../dns/policy/draw.ts';
import { makePolicy } from '../dns/policy/index.ts';
import type { Candidate, Policy } from '../dns/policy/policy.ts';
import { ProbeScheduler } from '../dns/probe_scheduler.ts';
import { RttTable } from '../dns/rtt_table.ts';
import { Steering, type SteeredName } from '../dns/steer.ts';
import { StickyTable } from '../dns/sticky.ts';
import type { Scenario } from './scenario.ts';
import { rng, type World } from './world.ts';

export interface Steerer {
  readonly name: string;
  /** Draw classes per unit the engine distinguishes (1: every prefix of a unit is answered alike). */
  readonly classes: number;
  beginStep(step: number, nowMs: number): void;
  /** The cluster index answered to the `prefixes` prefixes of a cohort of `unit` in draw class `cls`. */
  answer(unit: number, cls: number, prefixes: number): number;
  /**
   * The TTL (seconds) of the answer answer() just gave for (unit, cls), when
   * the policy sets one per answer; absent: the scenario's ttlSeconds.
   */
  ttlOf?(unit: number, cls: number): number;
  /** The demand of each unit over the step just simulated (a policy that measures demand reads it here). */
  observeDemand?(unitDemand: Float64Array): void;
}

/** The VIP of cluster i in the simulation (198.19.0.0/16; never sent anywhere). */
export function simVip(i: number): string {
  return `198.19.${String(i >> 8)}.${String(i & 0xff)}`;
}

export const SIM_NAME = 'www.sim.test';

/** A DNS server's configuration for the simulated clusters, through the daemon's own schema (its defaults apply). */
export function simDnsConfig(s: Readonly<Scenario>, w: World, policy: 'rtt' | 'capacity'): Readonly<DnsConfig> {
  return dnsConfigSchema.parse({
    name: 'sim',
    listen: ['198.18.0.53:53'],
    zones: [{ file: '/dev/null', origin: 'sim.test' }],
    clusters: w.clusterNames.map((name, i) => ({ name, vips: [simVip(i)] })),
    steering: {
      names: [{ name: SIM_NAME, policy, ttl: Math.min(86400, Math.round(s.ttlSeconds)) }],
      capacityWeight: s.capacityWeight,
      reportSeconds: s.reportSeconds,
      downAfterIntervals: s.downAfterIntervals,
      // The simulator assumes probing keeps every prefix's RTTs current: they never expire within a run.
      rttExpireSeconds: 86400 * 7,
      maxPrefixes: 10_000_000,
    },
  });
}

/** The DNS server's view of the clusters for one policy run: the engine feeds reports into it. */
export function simClusterTable(s: Readonly<Scenario>, w: World): ClusterTable {
  return new ClusterTable(
    w.clusterNames.map((name, i) => ({ name, vips: [simVip(i)] })),
    s.reportSeconds,
    s.downAfterIntervals,
  );
}

/** Per-step cache of decisions per (unit, class). */
class DecisionCache {
  readonly value: Int32Array;
  readonly stamp: Int32Array;
  constructor(size: number) {
    this.value = new Int32Array(size);
    this.stamp = new Int32Array(size).fill(-1);
  }
}

export class PipelineSteerer implements Steerer {
  readonly name: string;
  readonly classes: number;
  readonly #steering: Steering;
  readonly #sn: SteeredName;
  readonly #prefixes: ClientPrefix[];
  readonly #cache: DecisionCache;
  readonly #C: number;
  #step = -1;
  #now = 0;
  fallbacks = 0;

  constructor(s: Readonly<Scenario>, w: World, policy: 'rtt' | 'capacity', clusters: ClusterTable) {
    this.name = policy;
    this.classes = policy === 'capacity' ? s.drawClasses : 1;
    const cfg = simDnsConfig(s, w, policy);
    const lengths = { ipv4: cfg.steering.ipv4Prefix, ipv6: cfg.steering.ipv6Prefix };
    const C = w.clusterNames.length;
    this.#C = C;
    const rtt = new RttTable(C, cfg.steering.maxPrefixes, cfg.steering.rttExpireSeconds, lengths);
    const log = componentLogger('simulate');
    this.#steering = new Steering(
      cfg,
      {
        clusters,
        rtt,
        highRate: new HighRateTable(cfg.steering.maxPrefixes, cfg.steering.highRateExpireSeconds, lengths),
        sticky: new StickyTable(cfg.steering.maxPrefixes, cfg.steering.stickySeconds),
        probes: new ProbeScheduler(cfg.probe, 0),
        log,
      },
      // The memo must not outlive a step: the engine asks once per (unit, class) and step anyway.
      1,
    );
    const sn = this.#steering.names.get(SIM_NAME);
    if (!sn) throw new InvariantError('simulate: the steered name is missing from its own configuration');
    this.#sn = sn;
    // One /24 per (unit, class), 10.0.0.0 upwards; each gets the unit's RTT row, measured at time 0.
    const n = w.units * this.classes;
    this.#prefixes = new Array<ClientPrefix>(n);
    for (let k = 0; k < n; k++) {
      const p = simPrefix(k, lengths);
      this.#prefixes[k] = p;
      const u = Math.floor(k / this.classes);
      for (let c = 0; c < C; c++) rtt.set(p.key, c, w.rtt[u * C + c] ?? Infinity, 3, 3, 0);
    }
    this.#cache = new DecisionCache(n);
  }

  beginStep(step: number, nowMs: number): void {
    this.#step = step;
    this.#now = nowMs;
    this.#steering.changed();
  }

  answer(unit: number, cls: number): number {
    const k = unit * this.classes + cls;
    if (this.#cache.stamp[k] === this.#step) return this.#cache.value[k] ?? -1;
    const p = this.#prefixes[k];
    if (!p) return -1;
    const d = this.#steering.decide(this.#sn, p, this.#now);
    // Fallback `all` answers every VIP: the client takes one; spread by the prefix like a resolver's shuffle.
    const c = d.fallback ? (this.fallbacks++, k % this.#C) : (d.a.clusterIndexes[0] ?? -1);
    this.#cache.stamp[k] = this.#step;
    this.#cache.value[k] = c;
    return c;
  }
}

/** The synthetic client prefix of (unit, class) k: one /24 each, 10.0.0.0 upwards (no traffic is ever sent). */
export function simPrefix(k: number, lengths: { ipv4: number; ipv6: number }): ClientPrefix {
  const p = prefixOfAddress(formatIPv4Address(((10 << 24) + (k << 8) + 1) >>> 0), lengths);
  if (!p) throw new InvariantError('simulate: bad synthetic prefix');
  return p;
}

/**
 * The same decisions as PipelineSteerer without the per-query pipeline:
 * the candidates are built once per step from the same ClusterTable the
 * way steer.ts builds them (usable clusters, free share, available), and
 * the policy's own rank() orders them for each (unit, class), with the
 * unit's RTT row (every cluster measured, as the pipeline's RttTable holds
 * it) and the same hash draws (prefixDraw of the same synthetic prefix),
 * precomputed. test/unit/sim.test.ts checks that both give the same run.
 */
export class PolicySteerer implements Steerer {
  readonly name: string;
  readonly classes: number;
  readonly #policy: Policy;
  readonly #clusters: ClusterTable;
  readonly #rows: Float64Array[];
  readonly #draws: Float64Array;
  readonly #cache: DecisionCache;
  readonly #C: number;
  #candidates: Candidate[] = [];
  #step = -1;
  fallbacks = 0;

  constructor(s: Readonly<Scenario>, w: World, policy: 'rtt' | 'capacity', clusters: ClusterTable) {
    this.name = policy;
    this.classes = policy === 'capacity' ? s.drawClasses : 1;
    this.#policy = makePolicy(policy, { capacityWeight: s.capacityWeight });
    this.#clusters = clusters;
    const C = w.clusterNames.length;
    this.#C = C;
    this.#rows = Array.from({ length: w.units }, (_, u) => w.rtt.subarray(u * C, (u + 1) * C));
    const cfg = simDnsConfig(s, w, policy);
    const lengths = { ipv4: cfg.steering.ipv4Prefix, ipv6: cfg.steering.ipv6Prefix };
    const n = w.units * this.classes;
    this.#draws = new Float64Array(n * C);
    for (let k = 0; k < n; k++) {
      const key = simPrefix(k, lengths).key;
      for (let c = 0; c < C; c++) this.#draws[k * C + c] = prefixDraw(SIM_NAME, key, w.clusterNames[c] ?? '');
    }
    this.#cache = new DecisionCache(n);
  }

  beginStep(step: number, nowMs: number): void {
    this.#step = step;
    const t = this.#clusters;
    this.#candidates = t.clusters.filter((c) => t.isUsable(c, nowMs)).map((c) => ({ index: c.index, name: c.name, free: ClusterTable.freeFraction(c), available: c.available }));
  }

  answer(unit: number, cls: number): number {
    const k = unit * this.classes + cls;
    if (this.#cache.stamp[k] === this.#step) return this.#cache.value[k] ?? -1;
    let c: number;
    if (this.#candidates.length === 0) {
      this.fallbacks++;
      c = k % this.#C;
    } else {
      const base = k * this.#C;
      const draws = this.#draws;
      const rtt = this.#rows[unit] ?? new Float64Array(this.#C);
      c = this.#policy.rank({ candidates: this.#candidates, rtt, measured: this.#C, draw: (x) => draws[base + x.index] ?? 0.5 }).order[0]?.index ?? -1;
    }
    this.#cache.stamp[k] = this.#step;
    this.#cache.value[k] = c;
    return c;
  }
}

export class NearestSteerer implements Steerer {
  readonly name = 'nearest';
  readonly classes = 1;
  readonly #w: World;
  readonly #clusters: ClusterTable;
  readonly #up: Uint8Array;
  readonly #cache: DecisionCache;
  #step = -1;

  constructor(w: World, clusters: ClusterTable) {
    this.#w = w;
    this.#clusters = clusters;
    this.#up = new Uint8Array(w.clusterNames.length);
    this.#cache = new DecisionCache(w.units);
  }

  beginStep(step: number, nowMs: number): void {
    this.#step = step;
    for (const c of this.#clusters.clusters) this.#up[c.index] = this.#clusters.isUp(c, nowMs) ? 1 : 0;
  }

  answer(unit: number): number {
    if (this.#cache.stamp[unit] === this.#step) return this.#cache.value[unit] ?? -1;
    const C = this.#up.length;
    let best = -1;
    let bestRtt = Infinity;
    for (let c = 0; c < C; c++) {
      const r = this.#w.rtt[unit * C + c] ?? Infinity;
      if (this.#up[c] === 1 && r < bestRtt) {
        best = c;
        bestRtt = r;
      }
    }
    // Nothing up: the nearest of all (a latency record set without health answers anyway).
    if (best < 0) for (let c = 0; c < C; c++) if ((this.#w.rtt[unit * C + c] ?? Infinity) < bestRtt) [best, bestRtt] = [c, this.#w.rtt[unit * C + c] ?? Infinity];
    this.#cache.stamp[unit] = this.#step;
    this.#cache.value[unit] = best;
    return best;
  }
}

export class RoundRobinSteerer implements Steerer {
  readonly name = 'round-robin';
  readonly classes = 1;
  readonly #clusters: ClusterTable;
  readonly #rand: () => number;
  #up: number[] = [];

  constructor(clusters: ClusterTable, seed: number) {
    this.#clusters = clusters;
    this.#rand = rng(seed ^ 0x2b0b1);
  }

  beginStep(_step: number, nowMs: number): void {
    this.#up = this.#clusters.clusters.filter((c) => this.#clusters.isUp(c, nowMs)).map((c) => c.index);
    if (this.#up.length === 0) this.#up = this.#clusters.clusters.map((c) => c.index);
  }

  /**
   * Where a query falls in the rotation depends on every other client's
   * queries since: to a resolver it is a uniform draw over the clusters
   * (a counter per cohort would line up with the cohorts' fixed order and
   * hand a cohort the same cluster every time).
   */
  answer(): number {
    return this.#up[Math.floor(this.#rand() * this.#up.length)] ?? -1;
  }
}
