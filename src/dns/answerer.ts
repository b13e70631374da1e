/**
 * The DNS hot path: one entry function, `respond`, from query octets to a
 * response written in the ResponseWriter's buffer (its length returned; 0 =
 * send nothing). Every exit is counted, by reason. No logging, no await, and
 * no allocation on the common path beyond the name and prefix keys: answers
 * are encoded once (by dns2, wire/body.ts) and copied behind the query's
 * question; steering decisions are memoised (steer.ts).
 *
 * Order of checks, each with its RFC:
 *   parse + guard (wire/query.ts): not a query -> drop; FORMERR; NOTIMP
 *   EDNS version > 0 -> BADVERS (RFC 6891 §6.1.3)
 *   class CH -> server identity (identity.ts: id.server, hostname.bind,
 *     version.bind/.server TXT), else REFUSED; rate limited like any answer
 *   class other than IN/ANY -> REFUSED; AXFR/IXFR -> REFUSED (here only over
 *     UDP: over TCP the server offers every message to transfer/ first)
 *   name outside our zones -> REFUSED (authoritative only, RA clear)
 *   steered name, type A/AAAA/ANY -> steering decision, one per client
 *     prefix for both families (ECS scope = client prefix length when the
 *     answer depends on it); a family no usable cluster has VIPs of falls
 *     through to the zone data (NODATA with the SOA as a rule)
 *   anything else -> zone data (AA, NXDOMAIN/NODATA + SOA, referral, CNAME)
 *   UDP: response rate limiting by response (rrl.ts), once the response
 *     is known: its identity (kind, name, type) is hashed when the answer
 *     is encoded and cached with it, so the check hashes nothing; size
 *     limit min(requestor's EDNS size, ours) or 512 without EDNS, TC
 *     beyond it. A slipped response is sent with TC and no records.
 */
import { prefixOfAddress, prefixOfEcs, type ClientPrefix, type PrefixLengths } from './client_prefix.ts';
import { RRL_ERROR, RrlKind, RrlVerdict, rrlIdentity, rrlSource, type RrlIdentity, type RrlSetup, type RrlSource } from './rrl.ts';
import type { Decision, FamilyAnswer, Steering } from './steer.ts';
import type { Identity } from './identity.ts';
import { encodeBody, type Body } from './wire/body.ts';
import { Parse, ParsedQuery, parseQuery, QCLASS, QTYPE, RCODE, type RejectReason } from './wire/query.ts';
import { MAX_MESSAGE, ResponseWriter } from './wire/response.ts';
import type { RR } from './zone/records.ts';
import type { Answer, Zone, ZoneSet } from './zone/zone.ts';

export interface AnswererCounters {
  queries: number;
  udp: number;
  tcp: number;
  ignored: number;
  formerr: number;
  notimp: number;
  badvers: number;
  refused: number;
  servfail: number;
  nxdomain: number;
  nodata: number;
  answered: number;
  referral: number;
  steered: number;
  /** Steered answers from the name's fallback (no usable cluster: all VIPs or the sorry addresses). */
  steeredFallback: number;
  truncated: number;
  rrlDropped: number;
  rrlSlipped: number;
  cacheHits: number;
  cacheMisses: number;
  encodeErrors: number;
}

const CACHE_MAX = 100_000;

/** An encoded answer with its RRL identity (computed once, with the encoding). */
interface Cached {
  readonly body: Body;
  readonly rrl: RrlIdentity;
}
const SOURCES_MAX = 65_536;

export class Answerer {
  readonly writer = new ResponseWriter();
  readonly counters: AnswererCounters = {
    queries: 0,
    udp: 0,
    tcp: 0,
    ignored: 0,
    formerr: 0,
    notimp: 0,
    badvers: 0,
    refused: 0,
    servfail: 0,
    nxdomain: 0,
    nodata: 0,
    answered: 0,
    referral: 0,
    steered: 0,
    steeredFallback: 0,
    truncated: 0,
    rrlDropped: 0,
    rrlSlipped: 0,
    cacheHits: 0,
    cacheMisses: 0,
    encodeErrors: 0,
  };
  readonly rejects = new Map<RejectReason, number>();
  /** Steered answers sent, by cluster index (each cluster an answer holds counts once). */
  readonly steeredByCluster: Float64Array;
  readonly #q = new ParsedQuery();
  readonly #cache = new Map<string, Cached>();
  /**
   * A steering decision's encoded bodies, by query type (A, AAAA, ANY): what
   * #cached holds under the key the decision makes (name, TTL and VIPs are
   * the decision's), found without building that key per query. Weak: a
   * decision replaced (memo expiry, reload) takes its bodies with it.
   */
  readonly #byDecision = new WeakMap<Decision, (Cached | undefined)[]>();
  /** Query name -> its zone (ZoneSet.find walks the name's suffixes). Cleared on replace and when full. */
  readonly #zoneOf = new Map<string, Zone | null>();
  zones: ZoneSet;
  steering: Steering;
  /** CH TXT identity answers; undefined: every CH query is REFUSED. Replaced on reload. */
  identity: Identity | undefined;
  readonly #rrl: RrlSetup | undefined;
  /** Source address text -> its RRL prefix hash (or exempt). Cleared when full. */
  readonly #rrlSources = new Map<string, RrlSource>();
  readonly #lengths: PrefixLengths;
  readonly #udpPayload: number;
  /** Source address text -> its prefix: parsing it per query costs more than a lookup. Cleared when full. */
  readonly #sources = new Map<string, ClientPrefix | undefined>();

  /** `opts.clusters`: how many clusters steering chooses among (fixed for the process: a change needs a restart). */
  constructor(zones: ZoneSet, steering: Steering, opts: { rrl: RrlSetup | undefined; lengths: PrefixLengths; udpPayload: number; clusters: number; identity?: Identity }) {
    this.steeredByCluster = new Float64Array(opts.clusters);
    this.identity = opts.identity;
    this.zones = zones;
    this.steering = steering;
    this.#rrl = opts.rrl;
    this.#lengths = opts.lengths;
    this.#udpPayload = opts.udpPayload;
  }

  /** New zone data or steering configuration: encoded answers are stale. */
  replace(zones: ZoneSet, steering: Steering): void {
    this.zones = zones;
    this.steering = steering;
    this.#cache.clear();
    this.#zoneOf.clear();
  }

  get cacheSize(): number {
    return this.#cache.size;
  }

  /**
   * Answers one query from `source` (the peer address as the socket gives
   * it). Returns the response length in `writer.buf`, 0 to send nothing.
   */
  respond(msg: Uint8Array, len: number, source: string, tcp: boolean, now: number): number {
    const c = this.counters;
    const q = this.#q;
    c.queries++;
    if (tcp) c.tcp++;
    else c.udp++;
    const status = parseQuery(msg, len, q);
    if (status !== Parse.OK) {
      this.rejects.set(q.reject ?? 'short', (this.rejects.get(q.reject ?? 'short') ?? 0) + 1);
      if (status === Parse.IGNORE) {
        c.ignored++;
        return 0;
      }
      const rcode = status === Parse.NOTIMP ? RCODE.NOTIMP : RCODE.FORMERR;
      const v = tcp ? RrlVerdict.SEND : this.#limit(source, RRL_ERROR, now);
      if (v === RrlVerdict.DROP) return 0;
      if (status === Parse.NOTIMP) c.notimp++;
      else c.formerr++;
      return this.#error(msg, q, rcode, v);
    }
    if (q.edns && q.ednsVersion > 0) {
      q.ecs = false; // RFC 6891 §6.1.3: a BADVERS response carries only the OPT
      const v = tcp ? RrlVerdict.SEND : this.#limit(source, RRL_ERROR, now);
      if (v === RrlVerdict.DROP) return 0;
      c.badvers++;
      return this.#error(msg, q, RCODE.BADVERS, v);
    }
    if (q.qclass === QCLASS.CH) {
      const id = this.identity?.answer(q.name, q.qtype);
      if (id === undefined) return this.#refused(msg, q, tcp, source, now);
      // Rate limited like any answer (version.bind is a classic reflection query); CH queries are rare: the identity is hashed per query.
      const v = tcp ? RrlVerdict.SEND : this.#limit(source, rrlIdentity(RrlKind.RESPONSE, q.name, q.qtype), now);
      if (v === RrlVerdict.DROP) return 0;
      const limit = v === RrlVerdict.SLIP ? 0 : tcp ? MAX_MESSAGE : q.edns ? Math.min(q.udpSize, this.#udpPayload) : 512;
      c.answered++;
      const n = this.writer.answer(msg, q, id, limit, this.#udpPayload, 0);
      c.truncated = this.writer.truncated;
      return n;
    }
    if ((q.qclass !== QCLASS.IN && q.qclass !== QCLASS.ANY) || q.qtype === QTYPE.AXFR || q.qtype === QTYPE.IXFR) {
      return this.#refused(msg, q, tcp, source, now);
    }
    const zone = this.#findZone(q.name);
    if (zone === undefined) return this.#refused(msg, q, tcp, source, now);

    let body: Cached | undefined;
    let scope = 0;
    let chosen: readonly number[] | undefined;
    let fallback = false;
    const sn = this.steering.names.get(q.name);
    if (sn !== undefined && (q.qtype === QTYPE.A || q.qtype === QTYPE.AAAA || q.qtype === QTYPE.ANY)) {
      // An ECS option with a source prefix names the client (RFC 7871 §7.1.1),
      // family 1 or 2 alike; source 0 (or none) leaves the query's source.
      const fromEcs = q.ecs && q.ecsSource > 0;
      const prefix: ClientPrefix | undefined = fromEcs ? prefixOfEcs(q.ecsFamily, q.ecsSource, q.ecsAddress, this.#lengths, this.#sourcePrefix(source)) : this.#sourcePrefix(source);
      if (prefix === undefined) return this.#servfail(msg, q, tcp, source, now);
      // One decision per (name, prefix) for every type: A and AAAA from one client prefix name the same clusters.
      const d = this.steering.decide(sn, prefix, now);
      if (d.servfail) return this.#servfail(msg, q, tcp, source, now);
      const a = q.qtype === QTYPE.AAAA ? NO_ADDRESSES : d.a;
      const aaaa = q.qtype === QTYPE.A ? NO_ADDRESSES : d.aaaa;
      // A family no usable cluster has VIPs of is answered from the zone below (NODATA with the SOA as a rule).
      if (a.vips.length + aaaa.vips.length > 0) {
        chosen = q.qtype === QTYPE.A ? a.clusterIndexes : q.qtype === QTYPE.AAAA ? aaaa.clusterIndexes : d.clusterIndexes;
        fallback = d.fallback;
        // The scope is the part of the ECS address the answer depends on: none when the source address decided.
        if (d.scoped && fromEcs) scope = prefix.length;
        const ttl = d.ttl ?? sn.config.ttl;
        const slot = q.qtype === QTYPE.A ? 0 : q.qtype === QTYPE.AAAA ? 1 : 2;
        let bodies = this.#byDecision.get(d);
        body = bodies?.[slot];
        if (body !== undefined) c.cacheHits++;
        else {
          body = this.#cached(`s${q.qtype}|${q.name}|${ttl}|${a.answerKey}|${aaaa.answerKey}`, () => ({
            body: encodeBody(q.name, q.oddName, q.qtype, { answer: [...a.vips.map((address) => addressRecord(q.name, ttl, QTYPE.A, address)), ...aaaa.vips.map((address) => addressRecord(q.name, ttl, QTYPE.AAAA, address))], authority: [], additional: [] }, RCODE.NOERROR, true),
            rrl: rrlIdentity(RrlKind.RESPONSE, q.name, q.qtype),
          }));
          if (body === undefined) return this.#servfail(msg, q, tcp, source, now);
          if (bodies === undefined) {
            bodies = [undefined, undefined, undefined];
            this.#byDecision.set(d, bodies);
          }
          bodies[slot] = body;
        }
      }
    }
    if (body === undefined) {
      body = this.#cached(`z${q.qtype}|${q.name}`, () => {
        const a = zone.lookup(q.name, q.qtype);
        // A steered name without static data of this type is NODATA, not NXDOMAIN: the name exists.
        const rcode = sn !== undefined && a.rcode === RCODE.NXDOMAIN ? RCODE.NOERROR : a.rcode;
        return { body: encodeBody(q.name, q.oddName, q.qtype, a, rcode, a.aa), rrl: classify(a, rcode, zone, q.name, q.qtype) };
      });
    }
    if (body === undefined) return this.#servfail(msg, q, tcp, source, now);
    const v = tcp ? RrlVerdict.SEND : this.#limit(source, body.rrl, now);
    if (v === RrlVerdict.DROP) return 0;
    const limit = v === RrlVerdict.SLIP ? 0 : tcp ? MAX_MESSAGE : q.edns ? Math.min(q.udpSize, this.#udpPayload) : 512;
    if (chosen !== undefined) {
      c.steered++;
      if (fallback) c.steeredFallback++;
      const by = this.steeredByCluster;
      for (let i = 0; i < chosen.length; i++) {
        const k = chosen[i] ?? -1;
        if (k >= 0 && k < by.length) by[k] = (by[k] ?? 0) + 1;
      }
    }
    const b = body.body;
    if (b.rcode === RCODE.NXDOMAIN) c.nxdomain++;
    else if (!b.aa) c.referral++;
    else if (b.an === 0) c.nodata++;
    else c.answered++;
    const n = this.writer.answer(msg, q, b, limit, this.#udpPayload, scope);
    c.truncated = this.writer.truncated;
    return n;
  }

  #findZone(name: string): Zone | undefined {
    let z = this.#zoneOf.get(name);
    if (z === undefined) {
      z = this.zones.find(name) ?? null;
      if (this.#zoneOf.size >= CACHE_MAX) this.#zoneOf.clear(); // random-name floods: bounded, cheap to refill
      this.#zoneOf.set(name, z);
    }
    return z ?? undefined;
  }

  #sourcePrefix(source: string): ClientPrefix | undefined {
    let p = this.#sources.get(source);
    if (p === undefined && !this.#sources.has(source)) {
      p = prefixOfAddress(source, this.#lengths);
      if (this.#sources.size >= SOURCES_MAX) this.#sources.clear();
      this.#sources.set(source, p);
    }
    return p;
  }

  /**
   * The RRL verdict for one UDP response of identity `id` to `source`,
   * counted (a drop ends the query: rrlDropped is its outcome counter).
   */
  #limit(source: string, id: RrlIdentity, now: number): RrlVerdict {
    const rrl = this.#rrl;
    if (rrl === undefined) return RrlVerdict.SEND;
    let src = this.#rrlSources.get(source);
    if (src === undefined) {
      src = rrlSource(source, rrl);
      if (this.#rrlSources.size >= SOURCES_MAX) this.#rrlSources.clear();
      this.#rrlSources.set(source, src);
    }
    if (!src.limited) return RrlVerdict.SEND;
    const v = rrl.limiter.check(src.p1, src.p2, id.kind, id.r1, id.r2, now);
    if (v === RrlVerdict.DROP) this.counters.rrlDropped++;
    else if (v === RrlVerdict.SLIP) this.counters.rrlSlipped++;
    return v;
  }

  /** An error response; slipped: with TC set (it carries no records anyway, TC asks for TCP). */
  #error(msg: Uint8Array, q: ParsedQuery, rcode: number, v: RrlVerdict): number {
    const n = this.writer.error(msg, q, rcode, this.#udpPayload);
    if (v === RrlVerdict.SLIP) {
      this.writer.buf[2] = (this.writer.buf[2] ?? 0) | 0x02;
      this.counters.truncated = ++this.writer.truncated;
    }
    return n;
  }

  #refused(msg: Uint8Array, q: ParsedQuery, tcp: boolean, source: string, now: number): number {
    const v = tcp ? RrlVerdict.SEND : this.#limit(source, RRL_ERROR, now);
    if (v === RrlVerdict.DROP) return 0;
    this.counters.refused++;
    return this.#error(msg, q, RCODE.REFUSED, v);
  }

  #servfail(msg: Uint8Array, q: ParsedQuery, tcp: boolean, source: string, now: number): number {
    const v = tcp ? RrlVerdict.SEND : this.#limit(source, RRL_ERROR, now);
    if (v === RrlVerdict.DROP) return 0;
    this.counters.servfail++;
    return this.#error(msg, q, RCODE.SERVFAIL, v);
  }

  /**
   * The encoded body for `key`, from the cache or from `encode()` (dns2
   * throws on records it cannot encode, a zone validation bug: SERVFAIL).
   */
  #cached(key: string, encode: () => Cached): Cached | undefined {
    const hit = this.#cache.get(key);
    if (hit !== undefined) {
      this.counters.cacheHits++;
      return hit;
    }
    this.counters.cacheMisses++;
    try {
      const body = encode();
      if (this.#cache.size >= CACHE_MAX) this.#cache.clear(); // random-name floods: bounded, cheap to refill
      this.#cache.set(key, body);
      return body;
    } catch {
      this.counters.encodeErrors++;
      return undefined;
    }
  }
}

/**
 * The RRL identity of a zone answer (rrl.ts): NXDOMAIN per zone, referrals
 * per delegation, NODATA per name, wildcard answers per zone and type
 * (every name a wildcard synthesises is one response), else name and type.
 */
function classify(a: Answer, rcode: number, zone: Zone, qname: string, qtype: number): RrlIdentity {
  if (rcode === RCODE.NXDOMAIN) return rrlIdentity(RrlKind.NXDOMAIN, zone.origin, 0);
  if (a.kind === 'referral') return rrlIdentity(RrlKind.REFERRAL, a.authority[0]?.name ?? zone.origin, 0);
  if (a.answer.length === 0) return rrlIdentity(RrlKind.NODATA, qname, 0);
  if (!zone.has(qname)) return rrlIdentity(RrlKind.WILDCARD, zone.origin, qtype);
  return rrlIdentity(RrlKind.RESPONSE, qname, qtype);
}

function addressRecord(name: string, ttl: number, type: typeof QTYPE.A | typeof QTYPE.AAAA, address: string): RR {
  return { name, type, class: 1, ttl, address };
}

/** The family a query type does not ask for. */
const NO_ADDRESSES: FamilyAnswer = Object.freeze({ vips: [], clusterIndexes: [], answerKey: '' });
