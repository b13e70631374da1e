/**
 * The gatekeeper side of distributed throttling (seed 004), as a library
 * the front node's throttle checkpoint calls: it remembers the masters'
 * DELAY_UNTIL per (domain, identifier), answers "how long must this request
 * wait" without allocating, and sends accounting.
 *
 * Identifiers, per family (issue 23):
 *  - IPv4: the source address masked to the domain's `prefixLength`, as a
 *    uint32 key (keyOf). On the wire the dotted address, with "/<len>"
 *    when the prefix is shorter than 32 (198.51.100.0/24).
 *  - IPv6: the source address masked to the domain's `prefixLength6`
 *    (default /64: one subscriber's LAN, RFC 6177). On the wire its RFC
 *    5952 text with "/<len>" when shorter than 128 (2001:db8:1:2::/64).
 *    The key is a seeded 52-bit hash of the masked words in [2^32, 2^53)
 *    (ipv6Key below), disjoint from IPv4 keys, so one delay table per domain
 *    holds both families; two IPv6 prefixes share a key only on a hash
 *    collision (~2^-52 per pair; the seed, drawn per process, keeps a
 *    client from choosing one). The key is not reversible, so account()
 *    takes the address words too and the ring keeps the masked words for
 *    the wire text.
 *  - An IPv6 source that is IPv4-mapped (::ffff:a.b.c.d) is the IPv4
 *    client a.b.c.d (the same key and identifier).
 *
 * The front checkpoint, per new connection (SYN) of a throttled service
 * (`src` the client number: IPv4 u32 or IPv6 >= 2^32, front/client6.ts;
 * its address words at w[at..at+3]):
 *   const d = gk.domain('www');                    // once, at configuration
 *   const key = gk.keyOf(d, src, w, at);           // a number, no allocation
 *   const wait = gk.delayFor(d, key, now);         // ms; 0: pass now
 *   if (wait === 0)                { pass;           gk.account(ACCEPTED, d, key, w, at, now) }
 *   else if (wait <= d.maxDelayMs && a hold slot is free)
 *                                  { hold the SYN;   gk.account(DELAYED,  d, key, w, at, now, now + wait) }
 *   else                           { RST;            gk.account(REJECTED, d, key, w, at, now) }
 * `now` is the wall clock in ms since the epoch (Date.now()): the masters
 * compare times from every front node, so it is the one shared clock.
 *
 * account() writes into a fixed ring of typed arrays (no allocation); the
 * ring is encoded and sent once per event-loop turn. A full ring drops and
 * counts. REJECTED may be sampled (rejectedSample) to spare the masters.
 *
 * Masters: control is heard from every configured master; accounting goes
 * to one, the active master: the first whose accounting socket completed
 * its handshake, kept while it stays connected, replaced by the next
 * connected one when it disconnects (failover). Sending to one master at a
 * time keeps each request charged once when masters share Redis.
 *
 * Resync: whenever the active master changes or one of its sockets
 * (re)connects, a new session id is drawn and RESYNC is sent for every
 * domain, again every resyncRetryMs until RESYNC_DONE for that session
 * arrives (a SUB that just connected may miss the first messages).
 */
import { Publisher, Subscriber } from 'zeromq';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import { formatIPv4Address, parseIPv4Address, prefixMask } from '../packet/address.ts';
import { formatIPv6Address, parseIPv6Address, prefixWordMask } from '../packet/address6.ts';
import { CLIENT6_BASE, hashWords } from '../front/client6.ts';
import type { GatekeeperConfig } from './config.ts';
import { DECODE_REJECTS, decodeControl, encodeAccounting, newControl, topicOf, type Control, type DecodeReject } from './protocol.ts';
import { SendQueue } from './send_queue.ts';
import { CurveSockets, type HandshakeCounters } from '../control/curve.ts';
import { throttleProfile } from './curve_profile.ts';
import { ACCEPTED, DELAYED, REJECTED, type AccountKind, type ThrottleLimiter } from '../shaping/limiters.ts';

// The account kinds are the shaping engine's (it declares the limiter the
// gatekeeper implements); re-exported as the gatekeeper's own vocabulary.
export { ACCEPTED, DELAYED, REJECTED, type AccountKind };

const KIND_NAMES = ['ACCEPTED', 'DELAYED', 'REJECTED'] as const;

/** A DELAY_UNTIL further ahead than this is refused as garbage (a broken clock would lock clients out). */
const MAX_AHEAD_MS = 86_400_000;

/** The IPv6 key seeds: drawn once per process (keys live in this process only; the wire carries text). */
const SEEDS = crypto.getRandomValues(new Uint32Array(2));
const SEED_HI = SEEDS[0] ?? 0;
const SEED_LO = SEEDS[1] ?? 0;

/** The key of IPv6 prefix words (already masked): in [2^32, 2^53), see the file comment. */
function ipv6Key(w0: number, w1: number, w2: number, w3: number): number {
  return CLIENT6_BASE * (1 + (hashWords(w0, w1, w2, w3, SEED_HI) & 0xfffff)) + hashWords(w0, w1, w2, w3, SEED_LO);
}

export interface GatekeeperDomainCounters {
  accepted: number;
  delayed: number;
  rejected: number;
  /** REJECTED not sent (sampling). */
  rejectedNotSent: number;
  /** DELAY_UNTIL stored (later than what was known). */
  delaysStored: number;
  /** Remembered delays dropped because the table was full (fail open). */
  evicted: number;
  resynced: number;
}

export interface GatekeeperDomain {
  readonly name: string;
  readonly index: number;
  readonly prefixLength: number;
  /** uint32 mask of prefixLength bits. */
  readonly mask: number;
  /** IPv6 clients: the prefix length of their identifier. */
  readonly prefixLength6: number;
  /** The four u32 word masks of prefixLength6 bits. */
  readonly mask6: Uint32Array;
  readonly maxDelayMs: number;
  /** identifier key -> next allowable time (ms since the epoch). */
  readonly delays: Map<number, number>;
  readonly counters: GatekeeperDomainCounters;
  /** The current resync session was answered for this domain. */
  resyncDone: boolean;
}

/** The `throttle` part of the front node's status: what Gatekeeper.status() returns. */
export interface GatekeeperStatus {
  readonly name: string;
  /** The master accounting goes to; null while none is connected. */
  readonly activeMaster: string | null;
  /** The current resync session id. */
  readonly session: string;
  readonly masters: readonly { readonly accounting: string; readonly connected: boolean; readonly sent: number; readonly dropped: number }[];
  readonly counters: Readonly<GatekeeperCounters>;
  readonly handshakes: Readonly<HandshakeCounters>;
  readonly domains: readonly ({ readonly name: string; readonly delays: number; readonly resyncDone: boolean } & Readonly<GatekeeperDomainCounters>)[];
}

interface MasterLink {
  readonly index: number;
  readonly accounting: string;
  readonly pub: Publisher;
  readonly sub: Subscriber;
  readonly out: SendQueue;
  connected: boolean;
}

export interface GatekeeperCounters {
  accountingQueued: number;
  accountingDropped: number;
  controlReceived: number;
  controlRejected: Record<DecodeReject, number>;
  unknownDomain: number;
  /** DELAY_UNTIL for an identifier that is not an address/prefix of the domain's length (IPv4 or IPv6). */
  badIdentifier: number;
  /** DELAY_UNTIL already in the past on arrival. */
  passed: number;
  resyncSessions: number;
  resyncsSent: number;
  failovers: number;
}

export class Gatekeeper implements ThrottleLimiter {
  readonly config: Readonly<GatekeeperConfig>;
  readonly counters: GatekeeperCounters = {
    accountingQueued: 0,
    accountingDropped: 0,
    controlReceived: 0,
    controlRejected: Object.fromEntries(DECODE_REJECTS.map((r) => [r, 0])) as Record<DecodeReject, number>,
    unknownDomain: 0,
    badIdentifier: 0,
    passed: 0,
    resyncSessions: 0,
    resyncsSent: 0,
    failovers: 0,
  };
  readonly #domains: GatekeeperDomain[] = [];
  readonly #byName = new Map<string, GatekeeperDomain>();
  readonly #log: Logger;
  readonly #limited: LimitedLog;
  readonly #sockets: CurveSockets;
  readonly #links: MasterLink[] = [];
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #timers: NodeJS.Timeout[] = [];
  #active = -1;
  #session = '';
  #seq = 0;
  #stopped = false;
  // The accounting ring (account() -> #flush()).
  readonly #rKind: Uint8Array;
  readonly #rDomain: Uint32Array;
  readonly #rKey: Float64Array;
  /** Stride 4: an IPv6 entry's masked address words (the wire text is made from them). */
  readonly #rWords: Uint32Array;
  readonly #rTs: Float64Array;
  readonly #rDelayed: Float64Array;
  readonly #rDebug: (string | undefined)[];
  #rHead = 0;
  #rCount = 0;
  #flushScheduled = false;
  readonly #flushBound = (): void => {
    this.#flush();
  };
  readonly #ctl: Control = newControl();

  private constructor(cfg: Readonly<GatekeeperConfig>, sockets: CurveSockets, log: Logger, now: () => number, random: () => number) {
    this.config = cfg;
    this.#sockets = sockets;
    this.#log = log;
    this.#limited = new LimitedLog(log);
    this.#now = now;
    this.#random = random;
    cfg.domains.forEach((d, index) => {
      const gd: GatekeeperDomain = {
        name: d.name,
        index,
        prefixLength: d.prefixLength,
        mask: prefixMask(d.prefixLength),
        prefixLength6: d.prefixLength6,
        mask6: Uint32Array.from([0, 1, 2, 3], (w) => prefixWordMask(d.prefixLength6, w)),
        maxDelayMs: d.maxDelaySeconds * 1000,
        delays: new Map(),
        counters: { accepted: 0, delayed: 0, rejected: 0, rejectedNotSent: 0, delaysStored: 0, evicted: 0, resynced: 0 },
        resyncDone: false,
      };
      this.#domains.push(gd);
      this.#byName.set(d.name, gd);
    });
    const n = cfg.queueLength;
    this.#rKind = new Uint8Array(n);
    this.#rDomain = new Uint32Array(n);
    this.#rKey = new Float64Array(n);
    this.#rWords = new Uint32Array(n * 4);
    this.#rTs = new Float64Array(n);
    this.#rDelayed = new Float64Array(n);
    this.#rDebug = new Array<string | undefined>(n).fill(undefined);
  }

  /** Connects to every master; resolves at once (connections complete in the background). */
  static async start(cfg: Readonly<GatekeeperConfig>, log: Logger, opts: { now?: () => number; random?: () => number } = {}): Promise<Gatekeeper> {
    const sockets = await CurveSockets.create(cfg.name, cfg.control, throttleProfile(cfg.control), log);
    const g = new Gatekeeper(cfg, sockets, log, opts.now ?? Date.now, opts.random ?? Math.random);
    try {
      cfg.masters.forEach((m, index) => {
        g.#link(index, m.accounting, m.control, m.publicKey);
      });
    } catch (err) {
      g.stop();
      throw err;
    }
    g.#timers.push(
      setInterval(() => {
        g.#retryResync();
      }, cfg.resyncRetryMs).unref(),
      setInterval(() => {
        g.sweep(g.#now());
      }, 1000).unref(),
    );
    return g;
  }

  #link(index: number, accounting: string, control: string, publicKey: string | undefined): void {
    const opts = this.#sockets.client(publicKey);
    const pub = new Publisher({ ...opts, sendHighWaterMark: 100_000 });
    const sub = new Subscriber({ ...opts, receiveHighWaterMark: 100_000 });
    const link: MasterLink = { index, accounting, pub, sub, out: new SendQueue(pub, this.config.queueLength), connected: false };
    this.#links.push(link);
    this.#sockets.watch(pub, `accounting ${accounting}`);
    this.#sockets.watch(sub, `control ${control}`);
    pub.events.on('handshake', () => {
      link.connected = true;
      if (this.#active === -1 || this.#active === index) this.#activate(index, this.#active === -1 ? 'connected' : 'reconnected');
    });
    pub.events.on('disconnect', () => {
      link.connected = false;
      if (this.#active !== index) return;
      const next = this.#links.find((l) => l.connected);
      if (next) {
        this.counters.failovers++;
        this.#activate(next.index, `master ${accounting} disconnected`);
      } else {
        this.#active = -1;
        this.#log.warn({ master: accounting }, 'no throttling master connected: delays known stay until they pass, accounting is dropped');
      }
    });
    sub.events.on('handshake', () => {
      if (this.#active === index) this.#newSession();
    });
    for (const d of this.#domains) sub.subscribe(topicOf(d.name));
    pub.connect(accounting);
    sub.connect(control);
    void this.#receive(sub, control);
  }

  #activate(index: number, why: string): void {
    this.#active = index;
    this.#log.info({ master: this.#links[index]?.accounting, why }, 'throttling master active');
    this.#newSession();
  }

  #newSession(): void {
    this.#session = `${this.config.name}.${process.pid}.${++this.#seq}`;
    this.counters.resyncSessions++;
    for (const d of this.#domains) d.resyncDone = false;
    this.#retryResync();
  }

  #retryResync(): void {
    const link = this.#links[this.#active];
    if (link === undefined || this.#stopped) return;
    const now = this.#now();
    for (const d of this.#domains) {
      if (d.resyncDone) continue;
      if (link.out.push(encodeAccounting(d.name, 'RESYNC', this.#session, now))) this.counters.resyncsSent++;
    }
  }

  /** The domain's handle, or undefined when not configured. Resolve once, not per request. */
  domain(name: string): GatekeeperDomain | undefined {
    return this.#byName.get(name);
  }

  get domains(): readonly GatekeeperDomain[] {
    return this.#domains;
  }

  /**
   * The identifier key of a client in this domain: `src` is the client
   * number (an IPv4 address as u32, or >= 2^32 for an IPv6 client whose
   * address is the four words at src6[at..at+3]). Allocation-free.
   */
  keyOf(d: GatekeeperDomain, src: number, src6: Uint32Array, at: number): number {
    if (src < CLIENT6_BASE) return (src & d.mask) >>> 0;
    const w0 = src6[at] ?? 0;
    const w1 = src6[at + 1] ?? 0;
    const w2 = src6[at + 2] ?? 0;
    const w3 = src6[at + 3] ?? 0;
    if (w0 === 0 && w1 === 0 && w2 === 0xffff) return (w3 & d.mask) >>> 0; // IPv4-mapped: that IPv4 client
    const m = d.mask6;
    return ipv6Key((w0 & (m[0] ?? 0)) >>> 0, (w1 & (m[1] ?? 0)) >>> 0, (w2 & (m[2] ?? 0)) >>> 0, (w3 & (m[3] ?? 0)) >>> 0);
  }

  /** ms the request must wait before it may be served; 0 when now. Allocation-free. */
  delayFor(d: GatekeeperDomain, key: number, now: number): number {
    const until = d.delays.get(key);
    return until === undefined || until <= now ? 0 : until - now;
  }

  /**
   * Queues one accounting message; false when it was not queued (ring full,
   * or REJECTED left out by sampling). `key` is keyOf's for the client
   * whose address words are at src6[at..at+3] (read only for an IPv6 key).
   * `delayedTo` is required for DELAYED.
   */
  account(kind: AccountKind, d: GatekeeperDomain, key: number, src6: Uint32Array, at: number, ts: number, delayedTo = NaN, debug?: string): boolean {
    if (kind === ACCEPTED) d.counters.accepted++;
    else if (kind === DELAYED) d.counters.delayed++;
    else {
      d.counters.rejected++;
      const p = this.config.rejectedSample;
      if (p < 1 && (p === 0 || this.#random() >= p)) {
        d.counters.rejectedNotSent++;
        return false;
      }
    }
    const n = this.#rKind.length;
    if (this.#rCount >= n) {
      this.counters.accountingDropped++;
      return false;
    }
    const i = (this.#rHead + this.#rCount) % n;
    this.#rKind[i] = kind;
    this.#rDomain[i] = d.index;
    this.#rKey[i] = key;
    if (key >= CLIENT6_BASE) {
      const m = d.mask6;
      const w = this.#rWords;
      w[i * 4] = (src6[at] ?? 0) & (m[0] ?? 0);
      w[i * 4 + 1] = (src6[at + 1] ?? 0) & (m[1] ?? 0);
      w[i * 4 + 2] = (src6[at + 2] ?? 0) & (m[2] ?? 0);
      w[i * 4 + 3] = (src6[at + 3] ?? 0) & (m[3] ?? 0);
    }
    this.#rTs[i] = ts;
    this.#rDelayed[i] = delayedTo;
    this.#rDebug[i] = debug;
    this.#rCount++;
    this.counters.accountingQueued++;
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(this.#flushBound);
    }
    return true;
  }

  /**
   * The wire identifier of a key in a domain; an IPv6 key's text is made
   * from its masked words at words[at..at+3] (the key is a hash). Slow path.
   */
  identifier(d: GatekeeperDomain, key: number, words?: Uint32Array, at = 0): string {
    if (key < CLIENT6_BASE) {
      const a = formatIPv4Address(key);
      return d.prefixLength === 32 ? a : `${a}/${d.prefixLength}`;
    }
    const a = formatIPv6Address((words ?? new Uint32Array(4)).subarray(at, at + 4));
    return d.prefixLength6 === 128 ? a : `${a}/${d.prefixLength6}`;
  }

  #flush(): void {
    this.#flushScheduled = false;
    const link = this.#links[this.#active];
    const n = this.#rKind.length;
    while (this.#rCount > 0) {
      const i = this.#rHead;
      this.#rHead = (i + 1) % n;
      this.#rCount--;
      const debug = this.#rDebug[i];
      this.#rDebug[i] = undefined;
      if (link === undefined) {
        this.counters.accountingDropped++;
        continue;
      }
      const d = this.#domains[this.#rDomain[i] ?? 0] as GatekeeperDomain;
      const kind = this.#rKind[i] ?? 0;
      const delayed = this.#rDelayed[i] ?? NaN;
      const frames = encodeAccounting(d.name, KIND_NAMES[kind] ?? 'ACCEPTED', this.identifier(d, this.#rKey[i] ?? 0, this.#rWords, i * 4), this.#rTs[i] ?? 0, kind === DELAYED ? delayed : undefined, debug);
      if (!link.out.push(frames)) this.counters.accountingDropped++;
    }
  }

  async #receive(sub: Subscriber, where: string): Promise<void> {
    try {
      for await (const frames of sub) this.deliver(frames);
    } catch (err) {
      if (!sub.closed) this.#log.error({ err, socket: where }, 'throttling control receive loop ended');
    }
  }

  /** Checks and applies one control message. Never throws (public for the fuzz test). */
  deliver(frames: readonly Buffer[]): void {
    const now = this.#now();
    const c = this.#ctl;
    const bad = decodeControl(frames, now, MAX_AHEAD_MS, c);
    if (bad !== undefined) {
      this.counters.controlRejected[bad]++;
      this.#limited.warn(`reject:${bad}`, { reason: bad }, 'throttling control message dropped');
      return;
    }
    this.counters.controlReceived++;
    const d = this.#byName.get(c.domain);
    if (d === undefined) {
      this.counters.unknownDomain++;
      return;
    }
    if (c.kind === 'RESYNC_DONE') {
      if (c.identifier === this.#session && !d.resyncDone) {
        d.resyncDone = true;
        d.counters.resynced++;
      }
      return;
    }
    const key = this.#parseIdentifier(d, c.identifier);
    if (key === undefined) {
      this.counters.badIdentifier++;
      return;
    }
    if (c.value <= now) {
      this.counters.passed++;
      return;
    }
    this.remember(d, key, c.value, now);
  }

  /**
   * The key of a DELAY_UNTIL's identifier: an IPv4 address/prefix of the
   * domain's prefixLength, or an IPv6 one (canonical text, checked by the
   * decoder) of its prefixLength6, host bits clear; else undefined.
   */
  #parseIdentifier(d: GatekeeperDomain, id: string): number | undefined {
    const slash = id.indexOf('/');
    if (id.includes(':')) {
      if (slash >= 0 ? id.slice(slash + 1) !== String(d.prefixLength6) : d.prefixLength6 !== 128) return undefined;
      const w = parseIPv6Address(slash >= 0 ? id.slice(0, slash) : id);
      if (w === undefined || (w[0] === 0 && w[1] === 0 && w[2] === 0xffff)) return undefined;
      const m = d.mask6;
      for (let k = 0; k < 4; k++) if ((((w[k] ?? 0) & (m[k] ?? 0)) >>> 0) !== w[k]) return undefined;
      return ipv6Key(w[0] ?? 0, w[1] ?? 0, w[2] ?? 0, w[3] ?? 0);
    }
    if (slash >= 0 ? id.slice(slash + 1) !== String(d.prefixLength) : d.prefixLength !== 32) return undefined;
    const addr = parseIPv4Address(slash >= 0 ? id.slice(0, slash) : id);
    if (addr === undefined || (addr & d.mask) >>> 0 !== addr) return undefined;
    return addr;
  }

  /** Stores a delay (the later time wins); bounded, oldest dropped when full. */
  remember(d: GatekeeperDomain, key: number, until: number, now: number): void {
    const prev = d.delays.get(key);
    if (prev !== undefined && prev >= until) return;
    if (prev === undefined && d.delays.size >= this.config.maxIdentifiers) {
      sweepDelays(d.delays, now);
      if (d.delays.size >= this.config.maxIdentifiers) {
        const first = d.delays.keys().next();
        if (first.done !== true) d.delays.delete(first.value);
        d.counters.evicted++;
      }
    }
    d.delays.set(key, until);
    d.counters.delaysStored++;
  }

  /** Drops delays that have passed. */
  sweep(now: number): void {
    for (const d of this.#domains) sweepDelays(d.delays, now);
  }

  get activeMaster(): string | undefined {
    return this.#links[this.#active]?.accounting;
  }

  /** Every domain answered the current resync session. */
  get resynced(): boolean {
    return this.#active >= 0 && this.#domains.every((d) => d.resyncDone);
  }

  status(): GatekeeperStatus {
    return {
      name: this.config.name,
      activeMaster: this.activeMaster ?? null,
      session: this.#session,
      masters: this.#links.map((l) => ({ accounting: l.accounting, connected: l.connected, sent: l.out.sent, dropped: l.out.dropped })),
      counters: this.counters,
      handshakes: this.#sockets.handshakes,
      domains: this.#domains.map((d) => ({ name: d.name, delays: d.delays.size, resyncDone: d.resyncDone, ...d.counters })),
    };
  }

  /** Per master, in configured order: its accounting endpoint, connection, messages sent and dropped by its socket queue (metrics; slow path). */
  masterLinks(): { accounting: string; connected: boolean; sent: number; dropped: number }[] {
    return this.#links.map((l) => ({ accounting: l.accounting, connected: l.connected, sent: l.out.sent, dropped: l.out.dropped }));
  }

  /**
   * Takes over the counts of the gatekeeper this one replaces (a front
   * node's reload changed the throttle section or its domains), by domain
   * and master endpoint, so counters stay monotonic. Not the delays: the
   * resync brings them back from the masters.
   */
  inheritCounts(old: Gatekeeper): void {
    const c = this.counters as unknown as Record<string, number | Record<string, number>>;
    for (const [k, v] of Object.entries(old.counters)) {
      if (typeof v === 'number') c[k] = (c[k] as number) + v;
    }
    for (const [r, v] of Object.entries(old.counters.controlRejected)) this.counters.controlRejected[r as DecodeReject] += v;
    for (const d of this.#domains) {
      const o = old.domain(d.name);
      if (o === undefined) continue;
      for (const k of Object.keys(d.counters) as (keyof GatekeeperDomainCounters)[]) d.counters[k] += o.counters[k];
    }
    for (const l of this.#links) {
      const o = old.#links.find((x) => x.accounting === l.accounting);
      if (o === undefined) continue;
      l.out.sent += o.out.sent;
      l.out.dropped += o.out.dropped;
    }
  }

  /** Resolves when queued accounting was handed to the active master's socket (tests). */
  async flush(): Promise<void> {
    this.#flush();
    await this.#links[this.#active]?.out.drain();
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    for (const l of this.#links) {
      l.pub.close();
      l.sub.close();
    }
    this.#sockets.release();
  }
}

function sweepDelays(m: Map<number, number>, now: number): void {
  for (const [k, until] of m) if (until <= now) m.delete(k);
}
