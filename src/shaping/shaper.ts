/**
 * Evaluation of the checkpoint lists for new connections (seed 001): the
 * service's list, then the cluster's, then (after the server is chosen)
 * the chosen server's. Every rule whose condition holds applies, in order.
 * A request over a limit waits in that rule's queue; when the queue lets
 * it go it resumes at the next rule, and may wait again further on. "In
 * the end, the task will have waited the amount of time required to pass
 * all checkpoints."
 *
 * Outcomes: Pass (pool.target[slot] is the chosen server or overflow
 * target), Held (its verdict comes later through host.settle), Reject
 * (TCP reset) or Drop (silent), NoTarget (nothing to choose), Retransmit
 * (a SYN of a connection that is already held: it must not queue twice;
 * the original's verdict is still pending, so this copy is dropped).
 *
 * Counts given back: every concurrent count a request took (counter and
 * concurrency-limit rules) is listed with it; a rejection gives them back
 * at once; an admission hands them to its connection record (commit), and
 * the record's end (FIN, RST, idle free, eviction) gives them back
 * (releaseConnection). A count given back to a concurrency-limit key whose
 * queue has waiters pokes that queue.
 *
 * No allocation per request: requests are numbers in HeldPool slots.
 */
import { Action, Checkpoint, Kind, LEVEL_NAMES, Level, type CheckpointSink } from './checkpoint.ts';
import type { CheckpointConfig } from './config.ts';
import { HeldPool, MAX_ACQUIRED } from './held.ts';
import type { Scheduler } from './queue.ts';
import { ACCEPTED, ADMISSION_NOT_CONFIGURED, AdmissionVerdict, DELAYED, REJECTED, type AdmissionLimiter, type ThrottleLimiter } from './limiters.ts';

export const Outcome = { Pass: 0, Held: 1, Reject: 2, Drop: 3, NoTarget: 4, Retransmit: 5 } as const;

export interface ShapingHost {
  /** Chooses a target for a request of service `service` from `src` (server index, overflow code, or -1). */
  choose(service: number, src: number): number;
  /** A held request's evaluation ended with `outcome` (Pass: commit() its counts). Its slot is freed after. */
  settle(slot: number, outcome: number, now: number): void;
}

/** Where the checkpoint lists come from: the front node's config, by level. */
export interface ShapingLayout {
  readonly cluster: readonly CheckpointConfig[];
  readonly services: readonly {
    /** The service's name: a gatekeeper rule's default domain. */
    readonly name?: string;
    readonly checkpoints: readonly CheckpointConfig[];
    readonly servers: readonly { readonly checkpoints: readonly CheckpointConfig[] }[];
  }[];
  /** Overflow cluster names, in target order (action steer). */
  readonly overflow: readonly string[];
}

export interface ShaperOptions {
  readonly maxHeld: number;
  /** Connection records the front node tracks (connection slots are < this). */
  readonly connections: number;
  /** Target codes at or above this are overflow targets (no server-level rules). */
  readonly overflowBase: number;
  /** One scheduler per checkpoint queue, by the checkpoint's index in `all` (called once each, while constructing). */
  readonly scheduler: (rule: number) => Scheduler;
}

export class Shaper implements CheckpointSink {
  readonly pool: HeldPool;
  readonly all: Checkpoint[] = [];
  readonly #cluster: Checkpoint[] = [];
  readonly #byService: Checkpoint[][] = [];
  readonly #byServer: Checkpoint[][][] = [];
  readonly #overflowBase: number;
  /** Per connection slot: the counts its request took (width #width). */
  readonly #width: number;
  readonly #connCount: Uint8Array;
  readonly #connRule: Int32Array;
  readonly #connEntry: Int32Array;
  readonly counts = { evaluated: 0, passed: 0, held: 0, rejected: 0, steered: 0, retransmits: 0, poolFull: 0, countsDropped: 0 };
  host: ShapingHost | undefined;

  constructor(layout: ShapingLayout, opts: ShaperOptions) {
    this.pool = new HeldPool(opts.maxHeld);
    this.#overflowBase = opts.overflowBase;
    const make = (cfg: CheckpointConfig, level: number, service: number, server: number): Checkpoint => {
      const steerTo = typeof cfg.action === 'object' ? layout.overflow.indexOf(cfg.action.steer) : -1;
      const index = this.all.length;
      const domain = cfg.domain ?? layout.services[service]?.name;
      const cp = new Checkpoint(index, cfg, { level, service, server, steerTo, domain }, this.pool, opts.scheduler(index), this);
      this.all.push(cp);
      return cp;
    };
    layout.services.forEach((svc, s) => {
      this.#byService.push(svc.checkpoints.map((c) => make(c, Level.Service, s, -1)));
    });
    for (const c of layout.cluster) this.#cluster.push(make(c, Level.Cluster, -1, -1));
    layout.services.forEach((svc, s) => {
      this.#byServer.push(svc.servers.map((srv, k) => srv.checkpoints.map((c) => make(c, Level.Server, s, k))));
    });
    for (const cp of this.all) {
      const ref = cp.counterName;
      if (ref !== undefined) cp.counterRef = this.all.find((x) => x.name === ref);
    }
    const acquiring = this.all.filter((c) => c.kind === Kind.Counter || c.kind === Kind.ConcurrencyLimit).length;
    this.#width = Math.min(MAX_ACQUIRED, acquiring);
    const n = this.#width > 0 ? opts.connections : 0;
    this.#connCount = new Uint8Array(n);
    this.#connRule = new Int32Array(n * this.#width);
    this.#connEntry = new Int32Array(n * this.#width);
  }

  get enabled(): boolean {
    return this.all.length > 0;
  }

  /**
   * Takes over the counts of the checkpoints this one replaces (a reload):
   * a checkpoint keeps its counts under the same name (names are unique on
   * a front node), so the metrics' `_total` series stay monotonic. Only
   * counts: tables, queues and held requests start afresh. Slow path.
   */
  inheritCounts(old: Shaper): void {
    add(this.counts, old.counts);
    for (const cp of this.all) {
      const o = old.all.find((x) => x.name === cp.name);
      if (o === undefined) continue;
      add(cp.counts, o.counts);
      add(cp.rejects, o.rejects);
      add(cp.table.counts, o.table.counts);
      if (cp.queue && o.queue) add(cp.queue.counts, o.queue.counts);
      if (cp.holds && o.holds) add(cp.holds.counts, o.holds.counts);
    }
  }

  /**
   * Connects the gatekeeper checkpoints to the running gatekeeper (or
   * detaches them: undefined). Returns the domains it does not know (those
   * rules pass everything, counted untracked). Slow path.
   */
  attachGatekeeper(gk: ThrottleLimiter | undefined): string[] {
    const missing: string[] = [];
    for (const cp of this.all) {
      if (cp.kind !== Kind.Gatekeeper) continue;
      cp.gatekeeper = gk;
      cp.gatekeeperDomain = gk?.domain(cp.domain);
      if (gk !== undefined && cp.gatekeeperDomain === undefined) missing.push(cp.domain);
    }
    return missing;
  }

  /** Connects the admission checkpoints to the front node's admission hierarchy (undefined: detach). Slow path. */
  attachAdmission(h: AdmissionLimiter | undefined): void {
    for (const cp of this.all) if (cp.kind === Kind.Admission) cp.admission = h;
  }

  /** Whether any checkpoint is of kind admission. */
  get hasAdmission(): boolean {
    return this.all.some((cp) => cp.kind === Kind.Admission);
  }

  /**
   * The throttling domains of the gatekeeper rules with their identifier
   * prefix lengths per family (first rule wins; config validation makes the
   * IPv4 lengths agree).
   */
  gatekeeperDomains(): { name: string; prefixLength: number; prefixLength6: number; maxDelayMs: number }[] {
    const out: { name: string; prefixLength: number; prefixLength6: number; maxDelayMs: number }[] = [];
    for (const cp of this.all) {
      if (cp.kind !== Kind.Gatekeeper || cp.holds === undefined) continue;
      const known = out.find((d) => d.name === cp.domain);
      if (known) known.maxDelayMs = Math.max(known.maxDelayMs, cp.holds.maxDelayMs);
      else out.push({ name: cp.domain, prefixLength: Math.clz32(~cp.keyMask >>> 0), prefixLength6: cp.prefixLength6, maxDelayMs: cp.holds.maxDelayMs });
    }
    return out;
  }

  /** Bytes held by the per-connection count lists (status). */
  get connectionBytes(): number {
    return this.#connCount.byteLength + this.#connRule.byteLength + this.#connEntry.byteLength;
  }

  /**
   * Evaluates a new connection's SYN. Pass: pool.target[pool.scratch] is
   * the target and commit(pool.scratch, connSlot) must follow.
   */
  begin(id: number, connKey: number, src: number, src6: Uint32Array, dstPort: number, service: number, now: number): number {
    if (this.pool.heldSlot(connKey) >= 0) {
      this.counts.retransmits++;
      return Outcome.Retransmit;
    }
    this.counts.evaluated++;
    return this.#run(this.pool.start(id, connKey, src, src6, dstPort, service), now);
  }

  #list(level: number, service: number, target: number): readonly Checkpoint[] | undefined {
    if (level === Level.Service) return this.#byService[service];
    if (level === Level.Cluster) return this.#cluster;
    if (target < 0 || target >= this.#overflowBase) return undefined;
    return this.#byServer[service]?.[target];
  }

  #run(slot: number, now: number): number {
    const pool = this.pool;
    const src = pool.src[slot] ?? 0;
    const dstPort = pool.dstPort[slot] ?? 0;
    const s = pool.service[slot] ?? 0;
    for (let level = pool.level[slot] ?? 0; level <= Level.Server; level++) {
      if (level === Level.Server && (pool.target[slot] ?? -1) < 0) {
        const t = this.host?.choose(s, src) ?? -1;
        if (t < 0) return this.#end(slot, Outcome.NoTarget, now);
        pool.target[slot] = t;
      }
      const target = pool.target[slot] ?? -1;
      const list = this.#list(level, s, target);
      const first = level === pool.level[slot] ? (pool.rule[slot] ?? 0) : 0;
      pool.level[slot] = level;
      if (list === undefined) continue;
      for (let i = first; i < list.length; i++) {
        const cp = list[i];
        if (cp === undefined || !cp.matches(src, pool.src6, slot * 4, dstPort, s, target, now)) continue;
        cp.counts.matched++;
        if (cp.kind === Kind.Gatekeeper) {
          const out = this.#gatekeeper(slot, cp, level, i, src, now);
          if (out < 0) continue;
          return out;
        }
        if (cp.kind === Kind.Admission) {
          const out = this.#admission(slot, cp, s, src, dstPort, now);
          if (out < 0) continue;
          return out;
        }
        const table = cp.table;
        const e = table.acquire(cp.keyOf(src, pool.src6, slot * 4, s, target), now);
        if (e < 0) {
          cp.counts.untracked++;
          continue;
        }
        cp.noteWords6(e, src, pool.src6, slot * 4);
        table.total[e] = (table.total[e] ?? 0) + 1;
        if (cp.kind === Kind.Counter) {
          table.freq.add(e, now);
          this.#take(slot, cp, e, now);
          if (cp.action === Action.Reject) {
            cp.counts.rejected++;
            cp.rejects.action++;
            return this.#end(slot, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
          }
          if (cp.action === Action.Steer && cp.steerTo >= 0) {
            cp.counts.steered++;
            this.counts.steered++;
            pool.target[slot] = this.#overflowBase + cp.steerTo;
            return this.#end(slot, Outcome.Pass, now);
          }
          cp.counts.passed++;
          continue;
        }
        const queue = cp.queue;
        if (queue === undefined) continue; // limit kinds always have one
        if (!queue.waiting(e) && cp.pass(e, now)) {
          if (cp.kind === Kind.ConcurrencyLimit) this.#record(slot, cp, e, now);
          cp.counts.passed++;
          continue;
        }
        // Over the limit (or others of this key already wait): wait here,
        // unless the queue is full (checked first: no slot copy for nothing).
        if (queue.full) {
          queue.counts.refused++;
          cp.counts.rejected++;
          cp.rejects.queueFull++;
          return this.#end(slot, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
        }
        const held = pool.hold(slot);
        if (held < 0) {
          this.counts.poolFull++;
          cp.counts.rejected++;
          cp.rejects.heldPoolFull++;
          return this.#end(slot, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
        }
        pool.level[held] = level;
        pool.rule[held] = i;
        pool.waitRule[held] = cp.index;
        if (!queue.enqueue(e, held, now)) {
          cp.counts.rejected++;
          cp.rejects.queueFull++;
          const out = this.#end(held, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
          // A request just copied out of the scratch slot is settled by the
          // caller through the return value: give its slot back now.
          if (held !== slot) pool.free(held);
          return out;
        }
        table.queued[e] = (table.queued[e] ?? 0) + 1;
        cp.counts.held++;
        this.counts.held++;
        return Outcome.Held;
      }
    }
    return this.#end(slot, Outcome.Pass, now);
  }

  /**
   * A gatekeeper rule (seed 004): the masters' delay for this key decides.
   * 0: pass (ACCEPTED); up to queue.maxDelayMs with a hold free: held until
   * then (DELAYED, charged at that time); else rejected (REJECTED). -1: go
   * on to the next rule; otherwise the outcome. `now` is the engine's
   * clock; the gatekeeper compares wall-clock times (shared with the
   * masters), so Date.now() is read here once per request.
   */
  #gatekeeper(slot: number, cp: Checkpoint, level: number, rule: number, src: number, now: number): number {
    const gk = cp.gatekeeper;
    const d = cp.gatekeeperDomain;
    const holds = cp.holds;
    if (gk === undefined || d === undefined || holds === undefined) {
      // Not connected to a gatekeeper (starting, or its domain unknown): fail open.
      cp.counts.untracked++;
      return -1;
    }
    // Both families: an IPv6 client is keyed by its address words (the
    // domain's IPv6 prefix), which account() reads again for the wire text.
    const words = this.pool.src6;
    const at = slot * 4;
    const key = gk.keyOf(d, src, words, at);
    const wall = Date.now();
    const wait = gk.delayFor(d, key, wall);
    if (wait === 0) {
      gk.account(ACCEPTED, d, key, words, at, wall);
      cp.counts.passed++;
      return -1;
    }
    let held = -1;
    if (wait > holds.maxDelayMs) cp.rejects.maxDelay++;
    else if (holds.full) {
      holds.counts.refused++;
      cp.rejects.queueFull++;
    } else {
      held = this.pool.hold(slot);
      if (held < 0) {
        this.counts.poolFull++;
        cp.rejects.heldPoolFull++;
      }
    }
    if (held < 0) {
      gk.account(REJECTED, d, key, words, at, wall);
      cp.counts.rejected++;
      return this.#end(slot, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
    }
    const pool = this.pool;
    pool.level[held] = level;
    pool.rule[held] = rule;
    pool.waitRule[held] = cp.index;
    holds.add(held, now + wait, now); // cannot refuse: not full (checked above)
    gk.account(DELAYED, d, key, words, at, wall, wall + wait);
    cp.counts.held++;
    this.counts.held++;
    return Outcome.Held;
  }

  /**
   * An admission rule (seed 002): the hierarchy's buckets decide, at once.
   * -1: admitted (or not configured for this service, or not attached):
   * go on to the next rule; otherwise the rejection.
   */
  #admission(slot: number, cp: Checkpoint, service: number, src: number, dstPort: number, now: number): number {
    const h = cp.admission;
    if (h === undefined) {
      cp.counts.untracked++;
      return -1;
    }
    const v = h.admit(service, src, this.pool.src6, slot * 4, dstPort, now);
    if (v === AdmissionVerdict.Admit) {
      cp.counts.passed++;
      return -1;
    }
    if (v === ADMISSION_NOT_CONFIGURED) {
      cp.counts.untracked++;
      return -1;
    }
    cp.counts.rejected++;
    if (v === AdmissionVerdict.OperationLocal || v === AdmissionVerdict.ServiceLocal) cp.rejects.admissionLocal++;
    else cp.rejects.admissionCluster++;
    return this.#end(slot, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
  }

  /** Counter rules take a concurrent count too (for status and conditions). */
  #take(slot: number, cp: Checkpoint, e: number, now: number): void {
    cp.table.concurrent[e] = (cp.table.concurrent[e] ?? 0) + 1;
    this.#record(slot, cp, e, now);
  }

  #record(slot: number, cp: Checkpoint, e: number, now: number): void {
    if (this.pool.acquire(slot, cp.index, e)) return;
    // More counting rules on one path than MAX_ACQUIRED: not kept.
    this.counts.countsDropped++;
    cp.release(e, now);
  }

  #end(slot: number, outcome: number, now: number): number {
    if (outcome === Outcome.Pass) this.counts.passed++;
    else {
      this.counts.rejected++;
      this.#releaseRequest(slot, now);
    }
    return outcome;
  }

  #releaseRequest(slot: number, now: number): void {
    const pool = this.pool;
    const n = pool.acquiredCount[slot] ?? 0;
    for (let k = 0; k < n; k++) {
      this.all[pool.acquiredRule[slot * MAX_ACQUIRED + k] ?? 0]?.release(pool.acquiredEntry[slot * MAX_ACQUIRED + k] ?? 0, now);
    }
    pool.acquiredCount[slot] = 0;
  }

  /** CheckpointSink: a held request left rule `rule`'s queue. */
  left(rule: number, held: number, entry: number, passed: boolean, now: number): void {
    const pool = this.pool;
    const cp = this.all[rule];
    let outcome: number;
    if (cp === undefined) outcome = this.#end(held, Outcome.Drop, now);
    else if (!passed) {
      cp.counts.rejected++;
      cp.rejects.maxDelay++;
      outcome = this.#end(held, cp.silentReject ? Outcome.Drop : Outcome.Reject, now);
    } else {
      if (cp.kind === Kind.ConcurrencyLimit) this.#record(held, cp, entry, now);
      pool.rule[held] = (pool.rule[held] ?? 0) + 1;
      pool.waitRule[held] = -1;
      outcome = this.#run(held, now);
      if (outcome === Outcome.Held) return;
    }
    this.host?.settle(held, outcome, now);
    pool.acquiredCount[held] = 0;
    pool.free(held);
  }

  /** Hands request `slot`'s counts to connection record `conn` (-1: untracked, give them back now). */
  commit(slot: number, conn: number, now: number): void {
    const pool = this.pool;
    const n = pool.acquiredCount[slot] ?? 0;
    if (n === 0) {
      if (conn >= 0 && conn < this.#connCount.length) this.#connCount[conn] = 0;
      return;
    }
    if (conn < 0 || conn >= this.#connCount.length) {
      this.#releaseRequest(slot, now);
      return;
    }
    const w = this.#width;
    const kept = Math.min(n, w);
    for (let k = 0; k < kept; k++) {
      this.#connRule[conn * w + k] = pool.acquiredRule[slot * MAX_ACQUIRED + k] ?? 0;
      this.#connEntry[conn * w + k] = pool.acquiredEntry[slot * MAX_ACQUIRED + k] ?? 0;
    }
    for (let k = kept; k < n; k++) this.all[pool.acquiredRule[slot * MAX_ACQUIRED + k] ?? 0]?.release(pool.acquiredEntry[slot * MAX_ACQUIRED + k] ?? 0, now);
    this.#connCount[conn] = kept;
    pool.acquiredCount[slot] = 0;
  }

  /** Connection record `conn` ended: give back its counts. */
  releaseConnection(conn: number, now: number): void {
    if (conn < 0 || conn >= this.#connCount.length) return;
    const n = this.#connCount[conn] ?? 0;
    if (n === 0) return;
    this.#connCount[conn] = 0;
    const w = this.#width;
    for (let k = 0; k < n; k++) this.all[this.#connRule[conn * w + k] ?? 0]?.release(this.#connEntry[conn * w + k] ?? 0, now);
  }

  /** Expires idle keys (slow path, from a timer). */
  sweep(now: number, maxPerTable: number): number {
    let n = 0;
    for (const cp of this.all) n += cp.table.sweep(now, maxPerTable);
    return n;
  }
}

/** to[k] += from[k] for every count of `to` (same-shaped count records). */
function add<T extends Record<string, number>>(to: T, from: Readonly<T>): void {
  for (const k of Object.keys(to) as (keyof T)[]) (to[k] as number) += from[k];
}

export interface CheckpointStatus {
  readonly name: string;
  readonly level: string;
  readonly kind: string;
  readonly limit: number | null;
  readonly counts: Checkpoint['counts'];
  readonly rejects: Checkpoint['rejects'];
  readonly table: { readonly keys: number; readonly capacity: number; readonly memoryBytes: number; readonly created: number; readonly expired: number; readonly evicted: number; readonly full: number };
  readonly top: readonly { readonly key: string; readonly ratePerSecond: number; readonly concurrent: number; readonly total: number; readonly queued: number }[];
  readonly queue: { readonly length: number; readonly maxLength: number; readonly oldestWaitMs: number; readonly maxDelayMs: number; readonly enqueued: number; readonly refused: number; readonly admitted: number; readonly expired: number } | null;
}

const KIND_NAMES = ['counter', 'rate-limit', 'concurrency-limit', 'gatekeeper', 'admission'] as const;

/** Status of every checkpoint: table sizes, the `top` busiest keys (by rate, then concurrent), queues. Slow path. */
export function shapingStatus(shaper: Shaper, now: number, top: number, keyName: (cp: Checkpoint, key: number, slot: number) => string): CheckpointStatus[] {
  return shaper.all.map((cp) => {
    const t = cp.table;
    const rows: { key: string; ratePerSecond: number; concurrent: number; total: number; queued: number }[] = [];
    t.forEach((slot, key) => {
      rows.push({ key: keyName(cp, key, slot), ratePerSecond: Math.round(t.freq.ratePerSecond(slot, now) * 100) / 100, concurrent: t.concurrent[slot] ?? 0, total: t.total[slot] ?? 0, queued: t.queued[slot] ?? 0 });
    });
    rows.sort((a, b) => b.ratePerSecond - a.ratePerSecond || b.concurrent - a.concurrent || b.total - a.total);
    const q = cp.queue ?? cp.holds;
    const oldest = q?.oldestSince();
    return {
      name: cp.name,
      level: LEVEL_NAMES[cp.level] ?? '?',
      kind: KIND_NAMES[cp.kind] ?? '?',
      limit: cp.limit === Infinity ? null : cp.limit,
      counts: { ...cp.counts },
      rejects: { ...cp.rejects },
      table: { keys: t.size, capacity: t.capacity, memoryBytes: t.memoryBytes(), ...t.counts },
      top: rows.slice(0, top),
      queue: q ? { length: q.length, maxLength: q.maxLength, oldestWaitMs: oldest === undefined ? 0 : Math.round(now - oldest), maxDelayMs: q.maxDelayMs, ...q.counts } : null,
    };
  });
}
