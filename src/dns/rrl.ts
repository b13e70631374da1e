/**
 * Response rate limiting by response, as BIND's RRL counts (and NSD's
 * rrl-* options similarly): a spoofed-source flood makes us send answers to
 * a victim, and what such a flood repeats is one response. So the unit
 * limited is an identical response to one client prefix:
 *
 *   kind      identity (besides the prefix)        rate
 *   RESPONSE  qname, qtype                         responsesPerSecond
 *   NODATA    qname (any qtype)                    responsesPerSecond
 *   WILDCARD  the zone, qtype (synthesised names)  responsesPerSecond
 *   REFERRAL  the delegation point                 responsesPerSecond
 *   NXDOMAIN  the zone (any name below it)         nxdomainsPerSecond
 *   ERROR     none (REFUSED, FORMERR, SERVFAIL...) errorsPerSecond
 *
 * A large resolver asking many different names is therefore never limited,
 * while one asking for the same name (or random names of one zone,
 * NXDOMAIN) beyond the rate is. A rate of 0 does not limit that kind.
 *
 * Accounting per entry (BIND's): a balance credited `rate` per second,
 * capped at `rate` (one second of burst), debited 1 per response, floored
 * at -window × rate. A response is sent while the balance is >= 0; so a
 * flood that stops must stay quiet for up to `window` seconds before that
 * response flows again, and an entry idle for longer than `window` starts
 * afresh. Over the limit, a response is dropped, except every slip-th one,
 * which goes out truncated (TC, no records): a real client behind the
 * prefix retries over TCP, which a spoofer cannot complete. TCP responses
 * are never limited (the caller does not ask).
 *
 * Memory is fixed at construction: a 4-way set-associative table of
 * typed arrays (the next power of two >= maxEntries slots); a new entry
 * takes a free slot of its set or evicts the set's least recently used one.
 * Identities are two independent 32-bit hashes (prefix and response
 * hashed once, elsewhere: hashText), so check() allocates nothing.
 */
import { parseIPv4Address } from '../packet/address.ts';
import { parseIPv6Address } from '../packet/address6.ts';
import type { SourcePrefixes } from '../packet/source_prefixes.ts';
import { prefixOfAddress, type PrefixLengths } from './client_prefix.ts';

export const RrlVerdict = { SEND: 0, DROP: 1, SLIP: 2 } as const;
export type RrlVerdict = (typeof RrlVerdict)[keyof typeof RrlVerdict];

export const RrlKind = { RESPONSE: 0, NODATA: 1, WILDCARD: 2, REFERRAL: 3, NXDOMAIN: 4, ERROR: 5 } as const;
export type RrlKind = (typeof RrlKind)[keyof typeof RrlKind];
export const RRL_KIND_NAMES = ['response', 'nodata', 'wildcard', 'referral', 'nxdomain', 'error'] as const;

export interface RrlOptions {
  /** Identical responses per second per prefix (RESPONSE, NODATA, WILDCARD, REFERRAL); 0 = unlimited. */
  readonly responsesPerSecond: number;
  /** NXDOMAIN responses per zone per second per prefix; 0 = unlimited. */
  readonly nxdomainsPerSecond: number;
  /** Error responses per second per prefix; 0 = unlimited. */
  readonly errorsPerSecond: number;
  readonly slip: number;
  /** Seconds (see the module comment). */
  readonly window: number;
  readonly maxEntries: number;
  /** Count what would be limited, send everything. */
  readonly logOnly: boolean;
}

const WAYS = 4;

/** Two independent 32-bit FNV-1a hashes of a string (char codes), as a pair in `out`. */
export function hashText(s: string, out: Uint32Array = new Uint32Array(2)): Uint32Array {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  out[0] = a >>> 0;
  out[1] = b >>> 0;
  return out;
}

/** murmur3's finaliser: spreads every input bit over the word. */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class ResponseRateLimiter {
  readonly #rates: Float64Array;
  readonly #slip: number;
  readonly #window: number;
  readonly #logOnly: boolean;
  readonly #mask: number;
  readonly #k1: Uint32Array;
  readonly #k2: Uint32Array;
  readonly #used: Uint8Array;
  readonly #balance: Float64Array;
  readonly #last: Float64Array;
  readonly #limited: Uint32Array;
  /** Responses dropped / slipped / that log-only mode let through although over the limit, by RrlKind. */
  readonly dropped = new Float64Array(RRL_KIND_NAMES.length);
  readonly slipped = new Float64Array(RRL_KIND_NAMES.length);
  readonly wouldLimit = new Float64Array(RRL_KIND_NAMES.length);
  /** Entries replaced while still inside their window (the table is too small for the traffic). */
  evicted = 0;
  #entries = 0;

  constructor(opts: RrlOptions) {
    this.#rates = Float64Array.from([opts.responsesPerSecond, opts.responsesPerSecond, opts.responsesPerSecond, opts.responsesPerSecond, opts.nxdomainsPerSecond, opts.errorsPerSecond]);
    this.#slip = opts.slip;
    this.#window = opts.window;
    this.#logOnly = opts.logOnly;
    let slots = WAYS;
    while (slots < opts.maxEntries) slots *= 2;
    this.#mask = slots / WAYS - 1;
    this.#k1 = new Uint32Array(slots);
    this.#k2 = new Uint32Array(slots);
    this.#used = new Uint8Array(slots);
    this.#balance = new Float64Array(slots);
    this.#last = new Float64Array(slots);
    this.#limited = new Uint32Array(slots);
  }

  /** Slots in use (never more than the table holds). */
  get size(): number {
    return this.#entries;
  }

  get capacity(): number {
    return this.#used.length;
  }

  /**
   * One response of `kind` to the prefix hashed as (p1, p2), its identity
   * hashed as (r1, r2); `now` in ms (performance.now()).
   */
  check(p1: number, p2: number, kind: RrlKind, r1: number, r2: number, now: number): RrlVerdict {
    const rate = this.#rates[kind] ?? 0;
    if (rate <= 0) return RrlVerdict.SEND;
    const k1 = fmix((p1 ^ Math.imul(r1, 0x9e3779b1) ^ kind) >>> 0);
    const k2 = fmix((p2 + r2 + Math.imul(kind + 1, 0x27d4eb2f)) >>> 0);
    const base = (k1 & this.#mask) * WAYS;
    let slot = -1;
    let free = -1;
    let lru = -1;
    for (let i = base; i < base + WAYS; i++) {
      if (this.#used[i] === 0) {
        if (free < 0) free = i;
      } else if (this.#k1[i] === k1 && this.#k2[i] === k2) {
        slot = i;
        break;
      } else if (lru < 0 || (this.#last[i] ?? 0) < (this.#last[lru] ?? 0)) lru = i;
    }
    const floor = -this.#window * rate;
    let balance: number;
    if (slot < 0) {
      if (free >= 0) {
        slot = free;
        this.#entries++;
      } else {
        slot = lru;
        if (now - (this.#last[slot] ?? 0) <= this.#window * 1000) this.evicted++;
      }
      this.#used[slot] = 1;
      this.#k1[slot] = k1;
      this.#k2[slot] = k2;
      this.#limited[slot] = 0;
      balance = rate;
    } else {
      const elapsed = (now - (this.#last[slot] ?? now)) / 1000;
      if (elapsed > this.#window) {
        balance = rate;
        this.#limited[slot] = 0;
      } else balance = Math.min(rate, (this.#balance[slot] ?? 0) + Math.max(0, elapsed) * rate);
    }
    this.#last[slot] = now;
    balance -= 1;
    if (balance < floor) balance = floor;
    this.#balance[slot] = balance;
    if (balance >= 0) return RrlVerdict.SEND;
    if (this.#logOnly) {
      this.wouldLimit[kind] = (this.wouldLimit[kind] ?? 0) + 1;
      return RrlVerdict.SEND;
    }
    const n = (this.#limited[slot] = (this.#limited[slot] ?? 0) + 1);
    if (this.#slip > 0 && n % this.#slip === 0) {
      this.slipped[kind] = (this.slipped[kind] ?? 0) + 1;
      return RrlVerdict.SLIP;
    }
    this.dropped[kind] = (this.dropped[kind] ?? 0) + 1;
    return RrlVerdict.DROP;
  }
}

/** What the answerer needs to limit: the table, the prefix lengths responses are counted per, the exempt prefixes. */
export interface RrlSetup {
  readonly limiter: ResponseRateLimiter;
  readonly lengths: PrefixLengths;
  readonly exempt: SourcePrefixes;
}

/** A source address as RRL sees it: its prefix hashed, or not limited (exempt, or not an address). */
export interface RrlSource {
  readonly limited: boolean;
  readonly p1: number;
  readonly p2: number;
}

const UNLIMITED: RrlSource = Object.freeze({ limited: false, p1: 0, p2: 0 });

/** Computed once per source address (the answerer caches it). */
export function rrlSource(address: string, setup: RrlSetup): RrlSource {
  const prefix = prefixOfAddress(address, setup.lengths);
  if (prefix === undefined) return UNLIMITED;
  if (setup.exempt.count4 + setup.exempt.count6 > 0) {
    const v4 = parseIPv4Address(address);
    if (v4 !== undefined ? setup.exempt.has4(v4) : isExempt6(address, setup.exempt)) return UNLIMITED;
  }
  const h = hashText(prefix.key);
  return { limited: true, p1: h[0] ?? 0, p2: h[1] ?? 0 };
}

function isExempt6(address: string, exempt: SourcePrefixes): boolean {
  const zone = address.indexOf('%');
  const words = parseIPv6Address(zone >= 0 ? address.slice(0, zone) : address);
  return words !== undefined && exempt.has6(words, 0);
}

/** A response's identity: its kind and the hashes of what makes two responses identical (module comment). */
export interface RrlIdentity {
  readonly kind: RrlKind;
  readonly r1: number;
  readonly r2: number;
}

export function rrlIdentity(kind: RrlKind, name: string, qtype: number): RrlIdentity {
  const h = hashText(`${name}|${qtype}`);
  return { kind, r1: h[0] ?? 0, r2: h[1] ?? 0 };
}

/** Every error response shares one identity per prefix. */
export const RRL_ERROR: RrlIdentity = Object.freeze(rrlIdentity(RrlKind.ERROR, '', 0));
