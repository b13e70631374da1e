/**
 * The throttling master (seed 004): receives accounting from gatekeepers,
 * applies GCRA per (domain, identifier) with the domain's rule, and
 * publishes DELAY_UNTIL when, and only when, the identifier's next request
 * is not allowed now. It also answers RESYNC (protocol.ts).
 *
 * Charging: ACCEPTED is charged at max(request time, now), DELAYED at
 * max(delayed-to, now) (the time the request is actually served; a request
 * cannot be charged before the master hears of it, as in Smockron), REJECTED
 * is counted and never charged (the request was not served).
 *
 * Sockets: accounting SUB and control PUB, each bound here (CURVE server,
 * ZAP domains "accounting" and "control", one allowlist) or connected to a
 * master-proxy (sharding by domain: the SUB subscribes to exactly the
 * configured domains' topics, so the proxy forwards only those).
 *
 * Flow control: Redis charges are pipelined; at most MAX_IN_FLIGHT are
 * outstanding, beyond that the receive loop waits (ZeroMQ then queues up to
 * its high-water mark and drops past it, counted by nobody: PUB/SUB).
 */
import { Publisher, Subscriber } from 'zeromq';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import type { MasterConfig, RuleConfig, SocketEnd } from './config.ts';
import { gcraRule, nextAllowed, type GcraRule } from './gcra.ts';
import { DECODE_REJECTS, decodeAccounting, encodeControl, newAccounting, topicOf, type Accounting, type AccountingLimits, type DecodeReject } from './protocol.ts';
import { SendQueue } from './send_queue.ts';
import { CurveSockets, type HandshakeCounters } from '../control/curve.ts';
import { throttleProfile } from './curve_profile.ts';
import type { ThrottleStore } from './store.ts';
import { MemoryStore } from './store_memory.ts';
import { RedisStore } from './store_redis.ts';

const MAX_IN_FLIGHT = 4096;
/** Session ids waiting for a domain's running resync; beyond it they wait for their retry. */
const MAX_RESYNC_WAITERS = 1024;

export interface DomainCounters {
  accepted: number;
  delayed: number;
  rejected: number;
  resyncs: number;
  /** DELAY_UNTIL published after a charge. */
  published: number;
  /** DELAY_UNTIL published by resyncs. */
  replayed: number;
  storeErrors: number;
}

export interface DomainState {
  readonly name: string;
  rule: GcraRule;
  config: RuleConfig;
  readonly counters: DomainCounters;
  /** Identifiers tracked, refreshed by the status timer (Redis counts by SCAN). */
  tracked: number;
  resyncRunning: boolean;
  readonly resyncWaiters: Set<string>;
}

export interface MasterCounters {
  received: number;
  rejected: Record<DecodeReject, number>;
  unknownDomain: number;
  /** Charges completed by the store (the messages fully processed). */
  charged: number;
  storeErrors: number;
}

/** The master's part of `sluice master`'s status (MasterStatus, status.ts): what Master.status() returns. */
export interface MasterCoreStatus {
  readonly name: string;
  readonly store: ThrottleStore['kind'];
  readonly counters: Readonly<MasterCounters> & {
    /** DELAY_UNTIL handed to the control socket, and dropped at its full queue. */
    readonly published: number;
    readonly publishDropped: number;
    readonly publishQueue: number;
    /** Charges waiting for the store. */
    readonly inFlight: number;
    /** Identifiers the memory store evicted at its bound (0 with Redis). */
    readonly evicted: number;
  };
  readonly handshakes: Readonly<HandshakeCounters>;
  /** ZAP handshakes of the two sockets. */
  readonly zap: { readonly accounting: { readonly accepted: number; readonly refused: number }; readonly control: { readonly accepted: number; readonly refused: number } };
  readonly domains: readonly ({ readonly name: string; readonly requests: number; readonly periodSeconds: number; readonly burst: number; readonly tracked: number } & Readonly<DomainCounters>)[];
}

function newDomain(r: RuleConfig): DomainState {
  return {
    name: r.name,
    rule: gcraRule(r.requests, r.periodSeconds * 1000, r.burst),
    config: r,
    counters: { accepted: 0, delayed: 0, rejected: 0, resyncs: 0, published: 0, replayed: 0, storeErrors: 0 },
    tracked: 0,
    resyncRunning: false,
    resyncWaiters: new Set(),
  };
}

export async function openStore(c: MasterConfig['store']): Promise<ThrottleStore> {
  if (c.kind === 'memory') return new MemoryStore(c.maxIdentifiers);
  return RedisStore.open({ host: c.host, port: c.port, path: c.path, db: c.db, keyPrefix: c.keyPrefix, commandTimeoutMs: c.commandTimeoutMs });
}

export class Master {
  config: Readonly<MasterConfig>;
  readonly store: ThrottleStore;
  readonly counters: MasterCounters = { received: 0, rejected: Object.fromEntries(DECODE_REJECTS.map((r) => [r, 0])) as Record<DecodeReject, number>, unknownDomain: 0, charged: 0, storeErrors: 0 };
  readonly domains = new Map<string, DomainState>();
  readonly #log: Logger;
  readonly #limited: LimitedLog;
  readonly #sockets: CurveSockets;
  readonly #sub: Subscriber;
  readonly #pub: Publisher;
  readonly #out: SendQueue;
  readonly #msg: Accounting = newAccounting();
  readonly #limits: AccountingLimits;
  readonly #timers: NodeJS.Timeout[] = [];
  /** Injected in tests; the wall clock (ms since the epoch) otherwise. */
  readonly #now: () => number;
  #inFlight = 0;
  #wake: (() => void) | undefined;
  #stopped = false;

  private constructor(cfg: Readonly<MasterConfig>, store: ThrottleStore, sockets: CurveSockets, log: Logger, now: () => number) {
    this.config = cfg;
    this.store = store;
    this.#sockets = sockets;
    this.#log = log;
    this.#limited = new LimitedLog(log);
    this.#now = now;
    this.#limits = { maxAgeMs: cfg.control.maxAgeSeconds * 1000, maxFutureMs: 5000, maxDelayMs: cfg.maxDelaySeconds * 1000 };
    for (const r of cfg.domains) this.domains.set(r.name, newDomain(r));
    this.#sub = new Subscriber({ ...this.#options(cfg.accounting, 'accounting'), receiveHighWaterMark: 100_000 });
    this.#pub = new Publisher({ ...this.#options(cfg.publish, 'control'), sendHighWaterMark: 100_000 });
    sockets.watch(this.#sub, 'accounting');
    sockets.watch(this.#pub, 'control');
    this.#out = new SendQueue(this.#pub, 100_000);
  }

  #options(end: SocketEnd, zapDomain: string): Record<string, unknown> {
    return end.listen !== undefined ? this.#sockets.server(zapDomain, this.config.control.allow) : this.#sockets.client(end.publicKey);
  }

  /** Opens the store, binds or connects both sockets, starts receiving. */
  static async start(cfg: Readonly<MasterConfig>, log: Logger, opts: { now?: () => number; store?: ThrottleStore } = {}): Promise<Master> {
    const now = opts.now ?? Date.now;
    const store = opts.store ?? (await openStore(cfg.store));
    let sockets: CurveSockets;
    try {
      sockets = await CurveSockets.create(cfg.name, cfg.control, throttleProfile(cfg.control), log);
    } catch (err) {
      await store.close();
      throw err;
    }
    const m = new Master(cfg, store, sockets, log, now);
    try {
      await m.#open(m.#sub, cfg.accounting);
      await m.#open(m.#pub, cfg.publish);
    } catch (err) {
      await m.stop();
      throw err;
    }
    for (const d of m.domains.keys()) m.#sub.subscribe(topicOf(d));
    void m.#receive();
    m.#timers.push(
      setInterval(() => {
        m.store.sweep(m.#now());
      }, 1000).unref(),
      setInterval(() => {
        void m.refreshTracked();
      }, 5000).unref(),
    );
    log.info({ name: cfg.name, accounting: cfg.accounting, publish: cfg.publish, store: cfg.store.kind, domains: [...m.domains.keys()] }, 'throttling master ready');
    return m;
  }

  async #open(sock: Subscriber | Publisher, end: SocketEnd): Promise<void> {
    if (end.listen !== undefined) await sock.bind(end.listen);
    else if (end.connect !== undefined) sock.connect(end.connect);
  }

  async #receive(): Promise<void> {
    try {
      for await (const frames of this.#sub) {
        this.handle(frames);
        if (this.#inFlight >= MAX_IN_FLIGHT) await new Promise<void>((r) => (this.#wake = r));
      }
    } catch (err) {
      if (!this.#sub.closed) this.#log.error({ err }, 'accounting receive loop ended');
    }
  }

  /** Checks and applies one accounting message. Never throws (public for the fuzz test and the benchmark). */
  handle(frames: readonly Buffer[]): void {
    const now = this.#now();
    const m = this.#msg;
    const bad = decodeAccounting(frames, now, this.#limits, m);
    if (bad !== undefined) {
      this.counters.rejected[bad]++;
      this.#limited.warn(`reject:${bad}`, { reason: bad }, 'accounting message dropped');
      return;
    }
    this.counters.received++;
    const d = this.domains.get(m.domain);
    if (d === undefined) {
      this.counters.unknownDomain++;
      this.#limited.warn('unknown-domain', { domain: m.domain }, 'accounting for a domain this master does not throttle');
      return;
    }
    let at: number;
    switch (m.kind) {
      case 'REJECTED':
        d.counters.rejected++;
        return;
      case 'RESYNC':
        d.counters.resyncs++;
        void this.resync(d, m.identifier);
        return;
      case 'ACCEPTED':
        d.counters.accepted++;
        at = m.ts > now ? m.ts : now;
        break;
      case 'DELAYED':
        d.counters.delayed++;
        at = m.delayedTo > now ? m.delayedTo : now;
        break;
    }
    const r = this.store.charge(d.name, m.identifier, at, d.rule);
    if (typeof r === 'number') {
      this.#charged(d, m.identifier, r, now);
      return;
    }
    const id = m.identifier;
    this.#inFlight++;
    r.then(
      (tat) => {
        this.#settle();
        this.#charged(d, id, tat, this.#now());
      },
      (err: unknown) => {
        this.#settle();
        d.counters.storeErrors++;
        this.counters.storeErrors++;
        this.#limited.warn('store', { err }, 'throttle store update failed; no delay published (fails open)');
      },
    );
  }

  #settle(): void {
    this.#inFlight--;
    const w = this.#wake;
    if (w !== undefined && this.#inFlight < MAX_IN_FLIGHT / 2) {
      this.#wake = undefined;
      w();
    }
  }

  #charged(d: DomainState, identifier: string, tat: number, now: number): void {
    this.counters.charged++;
    const next = nextAllowed(d.rule, tat);
    if (next <= now) return;
    d.counters.published++;
    this.#out.push(encodeControl(d.name, 'DELAY_UNTIL', identifier, next));
  }

  /**
   * Publishes every future delay of the domain, then RESYNC_DONE for each
   * session that asked. Requests arriving while one runs wait for it and
   * get one more pass (a delay set meanwhile is also published by its charge).
   */
  async resync(d: DomainState, session: string): Promise<void> {
    if (d.resyncRunning) {
      if (d.resyncWaiters.size < MAX_RESYNC_WAITERS) d.resyncWaiters.add(session);
      return;
    }
    d.resyncRunning = true;
    let sessions = [session];
    try {
      for (let pass = 0; pass < 8 && sessions.length > 0; pass++) {
        const now = this.#now();
        const n = await this.store.scan(d.name, now, (id, tat) => {
          const next = nextAllowed(d.rule, tat);
          if (next > now) {
            d.counters.replayed++;
            this.#out.push(encodeControl(d.name, 'DELAY_UNTIL', id, next));
          }
        });
        for (const s of sessions) this.#out.push(encodeControl(d.name, 'RESYNC_DONE', s, n));
        sessions = [...d.resyncWaiters];
        d.resyncWaiters.clear();
      }
    } catch (err) {
      d.counters.storeErrors++;
      this.counters.storeErrors++;
      this.#limited.warn('resync', { err, domain: d.name }, 'resync failed; the gatekeeper will ask again');
    } finally {
      d.resyncRunning = false;
    }
  }

  /** Applies a reloaded config's domains and allowlist; sockets and store need a restart. */
  reload(next: Readonly<MasterConfig>): string[] {
    const restart: string[] = (['name', 'accounting', 'publish', 'store', 'adminSocket', 'http'] as const).filter((k) => JSON.stringify(next[k]) !== JSON.stringify(this.config[k]));
    if (JSON.stringify(next.control) !== JSON.stringify({ ...this.config.control, allow: next.control.allow })) restart.push('control');
    for (const r of next.domains) {
      const d = this.domains.get(r.name);
      if (d === undefined) {
        this.domains.set(r.name, newDomain(r));
        this.#sub.subscribe(topicOf(r.name));
      } else {
        d.rule = gcraRule(r.requests, r.periodSeconds * 1000, r.burst);
        d.config = r;
      }
    }
    const keep = new Set(next.domains.map((r) => r.name));
    for (const name of [...this.domains.keys()]) {
      if (!keep.has(name)) {
        this.domains.delete(name);
        this.#sub.unsubscribe(topicOf(name));
      }
    }
    if (this.config.accounting.listen !== undefined) this.#sockets.allow('accounting', next.control.allow);
    if (this.config.publish.listen !== undefined) this.#sockets.allow('control', next.control.allow);
    this.config = { ...next, name: this.config.name, control: { ...this.config.control, allow: next.control.allow }, accounting: this.config.accounting, publish: this.config.publish, store: this.config.store, adminSocket: this.config.adminSocket, http: this.config.http };
    return restart;
  }

  async refreshTracked(): Promise<void> {
    for (const d of this.domains.values()) {
      try {
        d.tracked = await this.store.tracked(d.name);
      } catch {
        /* counted by the charges that fail; status shows the last value */
      }
    }
  }

  status(): MasterCoreStatus {
    return {
      name: this.config.name,
      store: this.store.kind,
      counters: { ...this.counters, published: this.#out.sent, publishDropped: this.#out.dropped, publishQueue: this.#out.length, inFlight: this.#inFlight, evicted: this.store instanceof MemoryStore ? this.store.evicted : 0 },
      handshakes: this.#sockets.handshakes,
      zap: { accounting: this.#sockets.zapCounters('accounting'), control: this.#sockets.zapCounters('control') },
      domains: [...this.domains.values()].map((d) => ({
        name: d.name,
        requests: d.config.requests,
        periodSeconds: d.config.periodSeconds,
        burst: d.config.burst,
        tracked: this.store instanceof MemoryStore ? this.store.tracked(d.name) : d.tracked,
        ...d.counters,
      })),
    };
  }

  /** The publish queue (DELAY_UNTIL, RESYNC_DONE): sent, dropped (queue full or socket closed), send errors, waiting now. */
  get publishCounts(): { readonly sent: number; readonly dropped: number; readonly errors: number; readonly queued: number } {
    const q = this.#out;
    return { sent: q.sent, dropped: q.dropped, errors: q.errors, queued: q.length };
  }

  /** Charges handed to the store and not answered yet (Redis; the memory store answers at once). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Failed CURVE handshakes on the accounting and publish sockets. */
  get handshakes(): Readonly<HandshakeCounters> {
    return this.#sockets.handshakes;
  }

  /** ZAP results of one bound socket (zeros when it connects to a proxy instead). */
  zapCounters(socket: 'accounting' | 'control'): { accepted: number; refused: number } {
    return this.#sockets.zapCounters(socket);
  }

  /** Identifiers tracked in a domain: exact for the memory store, the last periodic count (every 5 s) for Redis. */
  trackedIn(d: DomainState): number {
    return this.store instanceof MemoryStore ? this.store.tracked(d.name) : d.tracked;
  }

  /** Identifiers the memory store dropped at store.maxIdentifiers (0 for Redis, which expires keys itself). */
  get evicted(): number {
    return this.store instanceof MemoryStore ? this.store.evicted : 0;
  }

  /** Resolves when every DELAY_UNTIL queued so far was handed to the socket (tests). */
  flush(): Promise<void> {
    return this.#out.drain();
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    this.#wake?.();
    this.#sub.close();
    this.#pub.close();
    this.#sockets.release();
    await this.store.close();
  }
}
