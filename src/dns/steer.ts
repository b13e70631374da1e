/**
 * The steering pipeline for one steered name and one client prefix:
 *
 *   1. candidates: clusters up with free capacity (cluster_state.ts);
 *   2. none: the name's fallback (all VIPs, sorry addresses, or SERVFAIL);
 *   3. a high-rate client (reported by a front node): clusters with the most
 *      free capacity first;
 *   4. sticky names: the client's previous cluster while it stays usable;
 *   5. otherwise the name's policy ranks the candidates (policy/);
 *   and, whenever the client's prefix lacks a current RTT to some usable
 *   cluster, a probe of it is requested (probe_scheduler.ts). An ECS
 *   prefix whose probes all went unanswered is ranked by its resolver's
 *   RTTs instead, and the resolver's address is probed (client_prefix.ts).
 *
 * One decision serves both address families. The pipeline ranks clusters,
 * whatever VIPs they have; an A answer holds the IPv4 VIPs of the first
 * `answers` clusters in that order that have IPv4 VIPs, an AAAA answer the
 * IPv6 VIPs of the first that have IPv6 VIPs. With dual-stack clusters the
 * two answers name the same clusters, so a dual-stack client reaches one
 * cluster whichever family it connects with. A cluster without IPv6 VIPs is
 * passed over for AAAA rather than answered with NODATA: an IPv6-only
 * client then reaches the nearest cluster that can serve it instead of no
 * cluster at all (what a GSLB operator expects). A family gets no
 * addresses only when no usable cluster has VIPs of it (or, in fallback,
 * no configured VIP or sorry address is of it); the answerer then answers
 * that type from the zone (NODATA with the SOA, unless the zone holds
 * static records of the type there). Either way the outcome for a family
 * does not depend on the client's prefix beyond what the ranking does.
 *
 * Decisions are memoised per (name, prefix) until the steering state
 * changes (any cluster report, RTT result or high-rate report bumps the
 * epoch), memoMs pass, or a cluster that was usable would go stale
 * (whichever comes first): the answer a client gets is the same either way
 * (its TTL outlives the memo), and the per-query cost stays a map lookup.
 * The memo is also the "recent clients" view of `sluice status`; it is
 * bounded (least recently decided evicted).
 */
import { isIPv4 } from 'node:net';
import type { Logger } from '../log/logger.ts';
import type { ClientPrefix } from './client_prefix.ts';
import { ClusterTable, type ClusterRecord } from './cluster_state.ts';
import type { DnsConfig } from './config.ts';
import type { HighRateTable } from './high_rate.ts';
import { prefixDraw } from './policy/draw.ts';
import { makePolicy } from './policy/index.ts';
import type { MappingLookup } from './policy/mapping.ts';
import type { Candidate, Policy } from './policy/policy.ts';
import type { ProbeScheduler } from './probe_scheduler.ts';
import type { RttTable } from './rtt_table.ts';
import type { StickyTable } from './sticky.ts';

type SteeredConfig = DnsConfig['steering']['names'][number];

export interface SteeredName {
  readonly config: SteeredConfig;
  readonly policy: Policy;
}

/** One family's answer of a decision. */
export interface FamilyAnswer {
  /** The addresses (empty: no usable cluster, or no fallback address, has this family). */
  readonly vips: readonly string[];
  /** The clusters they belong to, by index in the cluster table (answers counted per cluster without a lookup). */
  readonly clusterIndexes: readonly number[];
  /** Identifies the answer's content (for the encoded-answer cache). */
  readonly answerKey: string;
}

export interface Decision {
  readonly name: string;
  readonly prefix: string;
  /** The A answer: IPv4 VIPs. */
  readonly a: FamilyAnswer;
  /** The AAAA answer: IPv6 VIPs, from the same ranking. */
  readonly aaaa: FamilyAnswer;
  /** Both answers' addresses, A's first (status, logs; empty with servfail). */
  readonly vips: readonly string[];
  /** The clusters either answer holds, in order of preference. */
  readonly clusters: readonly string[];
  readonly clusterIndexes: readonly number[];
  readonly reason: string;
  readonly servfail: boolean;
  /** No usable cluster: the name's fallback answered. */
  readonly fallback: boolean;
  /** The answer depends on the client's prefix (ECS scope = prefix length), else scope 0. */
  readonly scoped: boolean;
  readonly at: number;
  readonly epoch: number;
  /** The memo holds it until then: memoMs, but never past the moment a cluster it relied on goes stale. */
  readonly validUntil: number;
  /** The TTL the policy set (`mapping`), else undefined: the name's `ttl`. */
  readonly ttl: number | undefined;
}

export interface SteeringParts {
  readonly clusters: ClusterTable;
  readonly rtt: RttTable;
  readonly highRate: HighRateTable;
  readonly sticky: StickyTable;
  readonly probes: ProbeScheduler;
  readonly log: Logger;
  /** The `mapping` policy's assignment (mapping/service.ts); absent: `mapping` names answer as `rtt`. */
  readonly mapping?: (MappingLookup & { noteQuery(key: string): void }) | undefined;
}

export class Steering {
  readonly names: ReadonlyMap<string, SteeredName>;
  readonly #p: SteeringParts;
  readonly #memo = new Map<string, Decision>();
  /**
   * The memo key of (name, prefix key), built once: a key concatenated per
   * query is a fresh string to hash on every lookup, one found here has its
   * hash cached. Per steered name; cleared when it outgrows the memo.
   */
  readonly #keys = new Map<SteeredName, Map<string, string>>();
  readonly #memoMax: number;
  readonly #memoMs: number;
  readonly #rttScratch: Float64Array;
  /** Fallback `all`: every configured VIP, per family. */
  readonly #allVips4: readonly string[];
  readonly #allVips6: readonly string[];
  /** Bumped on every change of steering state; memoised decisions of older epochs are recomputed. */
  epoch = 0;
  decisions = 0;
  readonly reasons = new Map<string, number>();

  constructor(cfg: Readonly<DnsConfig>, parts: SteeringParts, memoMs = 1000) {
    this.#p = parts;
    this.names = new Map(cfg.steering.names.map((n) => [n.name, { config: n, policy: makePolicy(n.policy, { capacityWeight: cfg.steering.capacityWeight, mapping: parts.mapping }) }]));
    this.#memoMax = Math.max(1024, cfg.steering.recentClients);
    this.#memoMs = memoMs;
    this.#rttScratch = new Float64Array(parts.clusters.clusters.length);
    const all = [...new Set(cfg.clusters.flatMap((c) => c.vips))];
    this.#allVips4 = all.filter((a) => isIPv4(a));
    this.#allVips6 = all.filter((a) => !isIPv4(a));
  }

  changed(): void {
    this.epoch++;
  }

  /** Takes over the counts of the Steering this one replaces (reload): they count since start. */
  inheritCounts(prev: Steering): void {
    this.decisions += prev.decisions;
    for (const [k, n] of prev.reasons) this.reasons.set(k, (this.reasons.get(k) ?? 0) + n);
  }

  decide(sn: SteeredName, prefix: ClientPrefix, now: number): Decision {
    // The mapping policy's demand: every query of its names counts, memoised or not.
    if (sn.policy.name === 'mapping') this.#p.mapping?.noteQuery(prefix.key);
    const key = this.#keyOf(sn, prefix.key);
    const m = this.#memo.get(key);
    if (m !== undefined && m.epoch === this.epoch && now < m.validUntil) return m;
    const d = this.#compute(sn, prefix, now);
    if (m !== undefined) this.#memo.delete(key);
    else if (this.#memo.size >= this.#memoMax) {
      const oldest = this.#memo.keys().next();
      if (oldest.done !== true) this.#memo.delete(oldest.value);
    }
    this.#memo.set(key, d);
    this.decisions++;
    const kind = d.reason.split(':', 1)[0] ?? d.reason;
    this.reasons.set(kind, (this.reasons.get(kind) ?? 0) + 1);
    if (this.#p.log.isLevelEnabled('debug')) this.#p.log.debug({ name: d.name, client: prefix.key.slice(2), answer: d.vips, clusters: d.clusters, reason: d.reason }, 'steering decision');
    return d;
  }

  #keyOf(sn: SteeredName, prefixKey: string): string {
    let keys = this.#keys.get(sn);
    if (keys === undefined) {
      keys = new Map();
      this.#keys.set(sn, keys);
    }
    let key = keys.get(prefixKey);
    if (key === undefined) {
      key = `${sn.config.name}|${prefixKey}`;
      if (keys.size >= this.#memoMax) keys.clear();
      keys.set(prefixKey, key);
    }
    return key;
  }

  /** Latest decisions, newest first (status). */
  recent(limit: number): Decision[] {
    return [...this.#memo.values()].slice(-limit).reverse();
  }

  #compute(sn: SteeredName, prefix: ClientPrefix, now: number): Decision {
    const p = this.#p;
    const cfg = sn.config;
    const candidates: Candidate[] = [];
    let validUntil = now + this.#memoMs;
    for (const c of p.clusters.clusters) {
      const usable = p.clusters.isUsable(c, now);
      // Any fresh report going stale may change the answer: a usable cluster
      // may go down, or a pair's master falling silent hands the figures to
      // its backup (which may have room where the master had none).
      if (c.reports > 0) validUntil = Math.min(validUntil, p.clusters.staleAt(c) + 1e-3);
      if (!usable) continue;
      candidates.push({ index: c.index, name: c.name, free: ClusterTable.freeFraction(c), available: c.available });
    }
    const rtt = this.#rttScratch;
    let measured = p.rtt.current(prefix.key, now, rtt);
    // An ECS subnet whose probe target answered no probe at all (every
    // current RTT "no reply"): its resolver's RTTs stand in, and the
    // resolver is probed instead. The subnet is probed again once its
    // no-reply results expire (rtt.expireSeconds).
    let probed = prefix;
    if (prefix.resolver !== undefined && measured > 0 && noReply(rtt)) {
      probed = prefix.resolver;
      measured = p.rtt.current(probed.key, now, rtt);
    }
    // Probe when some usable cluster has no current RTT for this prefix.
    if (probed.probeTarget !== undefined && candidates.some((c) => Number.isNaN(rtt[c.index] ?? NaN))) {
      if (p.probes.request(probed.key, probed.probeTarget, now)) p.rtt.expect(probed.probeTarget, probed.key);
    }
    if (candidates.length === 0) {
      const f = cfg.fallback;
      const v4 = f.mode === 'all' ? this.#allVips4 : f.mode === 'sorry' ? f.addresses.filter((a) => isIPv4(a)) : [];
      const v6 = f.mode === 'all' ? this.#allVips6 : f.mode === 'sorry' ? f.addresses.filter((a) => !isIPv4(a)) : [];
      return this.#decision(cfg, prefix, family(v4, []), family(v6, []), [], `fallback:${f.mode}:no-usable-cluster`, f.mode === 'servfail', true, false, now, validUntil);
    }
    let order: readonly Candidate[];
    let reason: string;
    let scoped = true;
    let ttl: number | undefined;
    const stuck = cfg.sticky ? p.sticky.get(prefix.key, now) : -1;
    const stuckCandidate = stuck >= 0 ? candidates.find((c) => c.index === stuck) : undefined;
    if (p.highRate.isHighRate(prefix.key, now)) {
      order = [...candidates].sort((a, b) => b.available - a.available);
      reason = `high-rate:most-free:${order[0]?.name ?? ''}`;
    } else if (stuckCandidate !== undefined) {
      order = [stuckCandidate, ...candidates.filter((c) => c !== stuckCandidate)];
      reason = `sticky:${stuckCandidate.name}`;
    } else {
      const r = sn.policy.rank({ candidates, rtt, measured, prefixKey: prefix.key, draw: (c) => prefixDraw(cfg.name, prefix.key, c.name) });
      order = r.order;
      reason = probed === prefix ? r.reason : `${r.reason};via-resolver:${probed.key.slice(2)}`;
      ttl = r.ttl;
      scoped = sn.policy.name !== 'capacity' && measured > 0;
    }
    if (cfg.sticky && order[0] !== undefined) p.sticky.set(prefix.key, order[0].index, now);
    const records = order.map((c) => p.clusters.clusters[c.index]).filter((c): c is ClusterRecord => c !== undefined);
    const a = pick(records, cfg.answers, 'vips4');
    const aaaa = pick(records, cfg.answers, 'vips6');
    // Say so when a family's first cluster is not the ranking's first (it has no VIPs of that family).
    const top = records[0];
    if (top !== undefined && a.first !== undefined && a.first !== top) reason += `;a:${a.first.name}`;
    if (top !== undefined && aaaa.first !== undefined && aaaa.first !== top) reason += `;aaaa:${aaaa.first.name}`;
    const held = records.filter((c) => a.held.has(c) || aaaa.held.has(c));
    return this.#decision(cfg, prefix, a.answer, aaaa.answer, held, reason, false, false, scoped, now, validUntil, ttl);
  }

  #decision(cfg: SteeredConfig, prefix: ClientPrefix, a: FamilyAnswer, aaaa: FamilyAnswer, held: readonly ClusterRecord[], reason: string, servfail: boolean, fallback: boolean, scoped: boolean, now: number, validUntil: number, ttl?: number): Decision {
    return {
      name: cfg.name,
      prefix: prefix.key.slice(2),
      a,
      aaaa,
      vips: [...a.vips, ...aaaa.vips],
      clusters: held.map((c) => c.name),
      clusterIndexes: held.map((c) => c.index),
      reason,
      servfail,
      fallback,
      scoped,
      at: now,
      epoch: this.epoch,
      validUntil,
      ttl,
    };
  }
}

/** True when every current RTT (not NaN) is "no reply" (Infinity); false when none is current. */
function noReply(rtt: Float64Array): boolean {
  let any = false;
  for (const r of rtt) {
    if (Number.isNaN(r)) continue;
    if (r !== Infinity) return false;
    any = true;
  }
  return any;
}

function family(vips: readonly string[], clusterIndexes: readonly number[]): FamilyAnswer {
  return { vips, clusterIndexes, answerKey: vips.join(',') };
}

/** The first `answers` clusters of the ranking that have VIPs of the family, and their VIPs. */
function pick(ranked: readonly ClusterRecord[], answers: number, key: 'vips4' | 'vips6'): { answer: FamilyAnswer; held: Set<ClusterRecord>; first: ClusterRecord | undefined } {
  const held = new Set<ClusterRecord>();
  const vips: string[] = [];
  const indexes: number[] = [];
  for (const c of ranked) {
    if (held.size >= answers) break;
    if (c[key].length === 0) continue;
    held.add(c);
    indexes.push(c.index);
    vips.push(...c[key]);
  }
  return { answer: family(vips, indexes), held, first: held.values().next().value };
}
