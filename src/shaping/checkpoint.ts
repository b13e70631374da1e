/**
 * One checkpoint rule at run time (seed 001: "a test, a rate counter and a
 * queue"): its condition, its criterion (pattern extraction: the request's
 * key), its stick table, and for the limit kinds its queue and gate.
 *
 * Requests are described by plain numbers (the client number: IPv4
 * address as uint32, or for IPv6 a number >= 2^32 (front/client6.ts) with
 * the address's four words beside it in the held pool; destination port,
 * service index, server index or -1): no objects per request. Conditions
 * and key extraction allocate nothing.
 *
 * IPv6 client keys (criterion source or source-prefix): the address
 * masked to 128 bits or to `prefixLength6` (default /64), hashed to a
 * number in [2^32, 2^53) with a seed drawn at start (ipv6Key): disjoint
 * from IPv4 keys (< 2^32), so one table holds both families. Two IPv6
 * prefixes share a key only on a 52-bit hash collision (~2^-52 per pair),
 * and the seed keeps a client from choosing addresses that collide with
 * another's key. `when.sourceIn` lists prefixes of both families
 * (packet/source_prefixes.ts): an IPv4 client (number < 2^32) is matched
 * against the IPv4 ones exactly as before, an IPv6 client by its four
 * words (the held pool's src6) against the IPv6 ones.
 *
 * Kinds:
 *  counter            counts every request the condition lets in (rate,
 *                     concurrent, total), then applies the action
 *  rate-limit         passes while the key's frequency counter admits one
 *                     more (freq_ctr.ts), else the request waits in the queue
 *  concurrency-limit  passes while the key's concurrent count < limit, else
 *                     waits; a count is given back when the connection ends
 *  gatekeeper         asks the front node's gatekeeper (distributed
 *                     throttling, a ThrottleLimiter: limiters.ts) how long the
 *                     key must wait: passes, is held until then (TimedHolds),
 *                     or is rejected when that is past queue.maxDelayMs;
 *                     no stick table (the masters keep the state)
 *  admission          asks the front node's admission hierarchy (an
 *                     AdmissionLimiter: limiters.ts; service and operation
 *                     token buckets, local and cluster-wide) whether the
 *                     connection fits: passes or is rejected, never waits;
 *                     no stick table (the buckets keep the state)
 */
import type { CheckpointConfig } from './config.ts';
import { StickTable } from './stick_table.ts';
import { WaitQueue, type HeldLinks, type QueueGate, type Scheduler } from './queue.ts';
import { TimedHolds } from './timed_holds.ts';
import { prefixMask } from '../packet/address.ts';
import { SourcePrefixes } from '../packet/source_prefixes.ts';
import { formatIPv6Address, formatPrefix6, prefixWordMask } from '../packet/address6.ts';
import { CLIENT6_BASE, hashWords } from '../front/client6.ts';
import type { AdmissionLimiter, ThrottleDomain, ThrottleLimiter } from './limiters.ts';

export const Kind = { Counter: 0, RateLimit: 1, ConcurrencyLimit: 2, Gatekeeper: 3, Admission: 4 } as const;
export const Criterion = { Source: 0, SourcePrefix: 1, Service: 2, Server: 3, None: 4 } as const;
export const Action = { Continue: 0, Reject: 1, Steer: 2 } as const;
export const Measure = { Rate: 0, Concurrent: 1, Total: 2 } as const;
export const Level = { Service: 0, Cluster: 1, Server: 2 } as const;
export const LEVEL_NAMES = ['service', 'cluster', 'server'] as const;

const KIND_CODES = { counter: Kind.Counter, 'rate-limit': Kind.RateLimit, 'concurrency-limit': Kind.ConcurrencyLimit, gatekeeper: Kind.Gatekeeper, admission: Kind.Admission } as const;
const CRITERION_CODES = { source: Criterion.Source, 'source-prefix': Criterion.SourcePrefix, service: Criterion.Service, server: Criterion.Server, none: Criterion.None } as const;
const MEASURE_CODES = { rate: Measure.Rate, concurrent: Measure.Concurrent, total: Measure.Total } as const;

/** The IPv6 key seeds: drawn once per process (keys live in memory only). */
const SEEDS = crypto.getRandomValues(new Uint32Array(2));
const SEED_HI = SEEDS[0] ?? 0;
const SEED_LO = SEEDS[1] ?? 0;

/**
 * The checkpoint key of an IPv6 client: the four words at words[at..at+3]
 * masked to `length` bits, hashed into [2^32, 2^53) (see the file comment).
 */
export function ipv6Key(words: Uint32Array, at: number, length: number): number {
  const w0 = ((words[at] ?? 0) & prefixWordMask(length, 0)) >>> 0;
  const w1 = ((words[at + 1] ?? 0) & prefixWordMask(length, 1)) >>> 0;
  const w2 = ((words[at + 2] ?? 0) & prefixWordMask(length, 2)) >>> 0;
  const w3 = ((words[at + 3] ?? 0) & prefixWordMask(length, 3)) >>> 0;
  const hi = hashWords(w0, w1, w2, w3, SEED_HI) & 0xfffff;
  return CLIENT6_BASE * (1 + hi) + hashWords(w0, w1, w2, w3, SEED_LO);
}

/** Receives requests leaving a queue (the Shaper). */
export interface CheckpointSink {
  left(rule: number, held: number, entry: number, passed: boolean, now: number): void;
}

/** Where a checkpoint is attached, and (kind gatekeeper) its throttling domain. */
export interface CheckpointPlace {
  readonly level: number;
  readonly service: number;
  readonly server: number;
  readonly steerTo: number;
  /** Kind gatekeeper: the configured domain, else the service's name. */
  readonly domain?: string | undefined;
}

export class Checkpoint implements QueueGate {
  /** Index among all checkpoints of the front node (acquisition lists name rules by it). */
  readonly index: number;
  readonly name: string;
  readonly level: number;
  /** Where the list is attached: service index (service and server levels), server index (server level), else -1. */
  readonly service: number;
  readonly server: number;
  readonly kind: number;
  readonly criterion: number;
  readonly keyMask: number;
  /** Criterion source-prefix: the IPv6 prefix length (source: 128). Kind gatekeeper: the domain's IPv6 identifier length, `prefixLength6` whatever the criterion (config.ts). */
  readonly prefixLength6: number;
  readonly limit: number;
  readonly action: number;
  /** Overflow target index for Action.Steer. */
  readonly steerTo: number;
  readonly steerCluster: string;
  readonly silentReject: boolean;
  readonly table: StickTable;
  /**
   * For client-keyed tables: the masked IPv6 words behind each slot's key
   * (4 per slot, written by noteWords6 when an IPv6 client takes the
   * slot), because an IPv6 key is a one-way hash and status must show the
   * prefix. A slot's words are valid while its key is >= 2^32.
   */
  readonly words6: Uint32Array | undefined;
  readonly queue: WaitQueue | undefined;
  /** Kind gatekeeper: its held SYNs, each until its own time. */
  readonly holds: TimedHolds | undefined;
  /** Kind gatekeeper: the throttling domain's name. */
  readonly domain: string;
  /** Kind gatekeeper: set by Shaper.attachGatekeeper once the gatekeeper runs; unset, requests pass (counted untracked). */
  gatekeeper: ThrottleLimiter | undefined;
  gatekeeperDomain: ThrottleDomain | undefined;
  /** Kind admission: set by Shaper.attachAdmission; unset, requests pass (counted untracked). */
  admission: AdmissionLimiter | undefined;
  /** `when.sourceIn`, undefined when not given. */
  readonly #sources: SourcePrefixes | undefined;
  readonly #ports: Int32Array;
  /** Resolved after all checkpoints exist (a condition may name a later rule). */
  counterRef: Checkpoint | undefined;
  readonly #refName: string | undefined;
  readonly #measure: number;
  readonly #above: number;
  readonly #below: number;
  readonly #sink: CheckpointSink;
  /** Requests this rule applied to, passed at once, rejected (queue full, deadline, pool full, action), untracked (table full). */
  readonly counts = { matched: 0, passed: 0, held: 0, rejected: 0, steered: 0, untracked: 0 };
  /**
   * counts.rejected by reason (their sum): the queue at maxLength, a wait
   * past maxDelayMs, every held slot in use (shaping.maxHeld), the rule's
   * own `reject` action, an admission rule's local or cluster limits. Plain integers read by the metrics at scrape time.
   */
  readonly rejects = { queueFull: 0, maxDelay: 0, heldPoolFull: 0, action: 0, admissionLocal: 0, admissionCluster: 0 };

  constructor(
    index: number,
    cfg: CheckpointConfig,
    where: CheckpointPlace,
    links: HeldLinks,
    scheduler: Scheduler,
    sink: CheckpointSink,
  ) {
    this.index = index;
    this.name = cfg.name;
    this.level = where.level;
    this.service = where.service;
    this.server = where.server;
    this.kind = KIND_CODES[cfg.kind];
    this.criterion = CRITERION_CODES[cfg.criterion];
    this.keyMask = cfg.criterion === 'source-prefix' ? prefixMask(cfg.prefixLength) : 0xffffffff;
    this.prefixLength6 = cfg.criterion === 'source-prefix' || cfg.kind === 'gatekeeper' ? cfg.prefixLength6 : 128;
    this.limit = cfg.limit ?? Infinity;
    const act = cfg.action;
    this.action = act === 'continue' ? Action.Continue : act === 'reject' ? Action.Reject : Action.Steer;
    this.steerTo = where.steerTo;
    this.steerCluster = typeof act === 'object' ? act.steer : '';
    this.silentReject = cfg.reject === 'drop';
    this.#sink = sink;
    const gk = this.kind === Kind.Gatekeeper;
    this.domain = gk ? (where.domain ?? '') : '';
    // Gatekeeper and admission rules keep no per-key state here: a one-key table keeps the shape uniform.
    this.table = new StickTable(gk || this.kind === Kind.Admission ? 1 : cfg.table.size, cfg.periodMs, cfg.table.expireSeconds * 1000);
    const byClient = !gk && this.kind !== Kind.Admission && (this.criterion === Criterion.Source || this.criterion === Criterion.SourcePrefix);
    this.words6 = byClient ? new Uint32Array(this.table.capacity * 4) : undefined;
    this.queue = this.kind === Kind.Counter || this.kind === Kind.Admission || gk ? undefined : new WaitQueue(cfg.table.size, links, cfg.queue.maxLength, cfg.queue.maxDelayMs, this, scheduler);
    this.holds = gk ? new TimedHolds(links.next.length, cfg.queue.maxLength, cfg.queue.maxDelayMs, { released: (held, now) => { this.#sink.left(this.index, held, -1, true, now); } }, scheduler) : undefined;
    const sourceIn = cfg.when?.sourceIn;
    this.#sources = sourceIn === undefined || sourceIn.length === 0 ? undefined : new SourcePrefixes(sourceIn);
    this.#ports = Int32Array.from(cfg.when?.destinationPort ?? []);
    const c = cfg.when?.counter;
    this.#refName = c?.name;
    this.#measure = c ? MEASURE_CODES[c.measure] : Measure.Rate;
    this.#above = c?.above ?? -Infinity;
    this.#below = c?.below ?? Infinity;
  }

  /** Name of the rule a counter condition reads, if any. */
  get counterName(): string | undefined {
    return this.#refName;
  }

  /**
   * This rule's key for a request (criterion: pattern extraction). `src` is
   * the client number; an IPv6 one (>= 2^32) is keyed by its address, the
   * words at src6[at..at+3] (ipv6Key).
   */
  /** Records the masked IPv6 words of the client that holds `slot` (no-op for IPv4 clients and other criteria; allocation-free). */
  noteWords6(slot: number, src: number, src6: Uint32Array, at: number): void {
    const w = this.words6;
    if (w === undefined || src < CLIENT6_BASE) return;
    const len = this.prefixLength6;
    for (let i = 0; i < 4; i++) w[slot * 4 + i] = ((src6[at + i] ?? 0) & prefixWordMask(len, i)) >>> 0;
  }

  /** The client prefix behind an IPv6 key in `slot`, as text (status; slow path). */
  prefix6Of(slot: number): string {
    const w = this.words6;
    if (w === undefined) return '?';
    const a = w.slice(slot * 4, slot * 4 + 4);
    return this.prefixLength6 >= 128 ? formatIPv6Address(a) : formatPrefix6(a, this.prefixLength6);
  }

  keyOf(src: number, src6: Uint32Array, at: number, service: number, server: number): number {
    switch (this.criterion) {
      case Criterion.Source:
        return src >= CLIENT6_BASE ? ipv6Key(src6, at, 128) : src >>> 0;
      case Criterion.SourcePrefix:
        return src >= CLIENT6_BASE ? ipv6Key(src6, at, this.prefixLength6) : (src & this.keyMask) >>> 0;
      case Criterion.Service:
        return service;
      case Criterion.Server:
        return server;
      default:
        return 0;
    }
  }

  /** A measure of this rule's counter for a request's key (0 when the key is not in the table). */
  measure(measure: number, src: number, src6: Uint32Array, at: number, service: number, server: number, now: number): number {
    if (this.criterion === Criterion.Server && server < 0) return 0;
    const e = this.table.find(this.keyOf(src, src6, at, service, server));
    if (e < 0) return 0;
    if (measure === Measure.Rate) return this.table.freq.estimate(e, now);
    if (measure === Measure.Concurrent) return this.table.concurrent[e] ?? 0;
    return this.table.total[e] ?? 0;
  }

  /** Whether the condition holds (no condition: always). */
  matches(src: number, src6: Uint32Array, at: number, dstPort: number, service: number, server: number, now: number): boolean {
    const sources = this.#sources;
    if (sources !== undefined && !(src >= CLIENT6_BASE ? sources.has6(src6, at) : sources.has4(src))) return false;
    const np = this.#ports.length;
    if (np > 0) {
      let hit = false;
      for (let k = 0; k < np && !hit; k++) hit = this.#ports[k] === dstPort;
      if (!hit) return false;
    }
    const ref = this.counterRef;
    if (ref !== undefined) {
      const v = ref.measure(this.#measure, src, src6, at, service, server, now);
      if (!(v > this.#above && v < this.#below)) return false;
    }
    return true;
  }

  // QueueGate: the queue asks when its head may pass and lets it pass.
  readyAt(entry: number, now: number): number {
    if (this.kind === Kind.RateLimit) return this.table.freq.nextAdmitAt(entry, now, this.limit);
    return (this.table.concurrent[entry] ?? 0) < this.limit ? now : Infinity;
  }

  pass(entry: number, now: number): boolean {
    if (this.kind === Kind.RateLimit) return this.table.freq.take(entry, now, this.limit);
    const c = this.table.concurrent[entry] ?? 0;
    if (c >= this.limit) return false;
    this.table.concurrent[entry] = c + 1;
    return true;
  }

  left(held: number, entry: number, passed: boolean, now: number): void {
    if (entry >= 0) this.table.queued[entry] = (this.table.queued[entry] ?? 1) - 1;
    this.#sink.left(this.index, held, entry, passed, now);
  }

  /** The timer of this rule's queue or holds fired. */
  fire(now: number): void {
    this.queue?.fire(now);
    this.holds?.fire(now);
  }

  /** Gives back one concurrent count of `entry` (a connection ended, or its request was rejected further on). */
  release(entry: number, now: number): void {
    const c = this.table.concurrent[entry] ?? 0;
    if (c > 0) this.table.concurrent[entry] = c - 1;
    this.queue?.poke(entry, now);
  }
}
