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
 *   class other than IN/ANY -> REFUSED; AXFR/IXFR -> REFUSED (no transfers)
 *   name outside our zones -> REFUSED (authoritative only, RA clear)
 *   steered name, type A/AAAA/ANY -> steering decision, one per client
 *     prefix for both families (ECS scope = client prefix length when the
 *     answer depends on it); a family no usable cluster has VIPs of falls
 *     through to the zone data (NODATA with the SOA as a rule)
 *   anything else -> zone data (AA, NXDOMAIN/NODATA + SOA, referral, CNAME)
 *   UDP: response rate limiting per client prefix (rrl.ts); size limit
 *     min(requestor's EDNS size, ours) or 512 without EDNS, TC beyond it.
 */
import { prefixOfAddress, prefixOfEcs, type ClientPrefix, type PrefixLengths } from './client_prefix.ts';
import type { ResponseRateLimiter } from './rrl.ts';
import { RrlVerdict } from './rrl.ts';
import type { FamilyAnswer, Steering } from './steer.ts';
import { encodeBody, type Body } from './wire/body.ts';
import { Parse, ParsedQuery, parseQuery, QCLASS, QTYPE, RCODE, type RejectReason } from './wire/query.ts';
import { MAX_MESSAGE, ResponseWriter } from './wire/response.ts';
import type { RR } from './zone/records.ts';
import type { ZoneSet } from './zone/zone.ts';

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
  readonly #cache = new Map<string, Body>();
  zones: ZoneSet;
  steering: Steering;
  readonly #rrl: ResponseRateLimiter | undefined;
  readonly #lengths: PrefixLengths;
  readonly #udpPayload: number;
  /** Source address text -> its prefix: parsing it per query costs more than a lookup. Cleared when full. */
  readonly #sources = new Map<string, ClientPrefix | undefined>();

  /** `opts.clusters`: how many clusters steering chooses among (fixed for the process: a change needs a restart). */
  constructor(zones: ZoneSet, steering: Steering, opts: { rrl: ResponseRateLimiter | undefined; lengths: PrefixLengths; udpPayload: number; clusters: number }) {
    this.steeredByCluster = new Float64Array(opts.clusters);
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
      if (!tcp && !this.#rrlAllows(source, now)) return 0;
      if (status === Parse.NOTIMP) c.notimp++;
      else c.formerr++;
      return this.writer.error(msg, q, status === Parse.NOTIMP ? RCODE.NOTIMP : RCODE.FORMERR, this.#udpPayload);
    }
    let slip = false;
    if (!tcp && this.#rrl !== undefined) {
      const src = this.#sourcePrefix(source);
      const v = src === undefined ? RrlVerdict.SEND : this.#rrl.check(src.key, now);
      if (v === RrlVerdict.DROP) {
        c.rrlDropped++;
        return 0;
      }
      if (v === RrlVerdict.SLIP) {
        c.rrlSlipped++;
        slip = true;
      }
    }
    if (q.edns && q.ednsVersion > 0) {
      c.badvers++;
      q.ecs = false; // RFC 6891 §6.1.3: a BADVERS response carries only the OPT
      return this.writer.error(msg, q, RCODE.BADVERS, this.#udpPayload);
    }
    if ((q.qclass !== QCLASS.IN && q.qclass !== QCLASS.ANY) || q.qtype === QTYPE.AXFR || q.qtype === QTYPE.IXFR) {
      c.refused++;
      return this.writer.error(msg, q, RCODE.REFUSED, this.#udpPayload);
    }
    const zone = this.zones.find(q.name);
    if (zone === undefined) {
      c.refused++;
      return this.writer.error(msg, q, RCODE.REFUSED, this.#udpPayload);
    }
    const limit = slip ? 0 : tcp ? MAX_MESSAGE : q.edns ? Math.min(q.udpSize, this.#udpPayload) : 512;

    let body: Body | undefined;
    let scope = 0;
    let chosen: readonly number[] | undefined;
    let fallback = false;
    const sn = this.steering.names.get(q.name);
    if (sn !== undefined && (q.qtype === QTYPE.A || q.qtype === QTYPE.AAAA || q.qtype === QTYPE.ANY)) {
      // An ECS option with a source prefix names the client (RFC 7871 §7.1.1),
      // family 1 or 2 alike; source 0 (or none) leaves the query's source.
      const fromEcs = q.ecs && q.ecsSource > 0;
      const prefix: ClientPrefix | undefined = fromEcs ? prefixOfEcs(q.ecsFamily, q.ecsSource, q.ecsAddress, this.#lengths, this.#sourcePrefix(source)) : this.#sourcePrefix(source);
      if (prefix === undefined) {
        c.servfail++;
        return this.writer.error(msg, q, RCODE.SERVFAIL, this.#udpPayload);
      }
      // One decision per (name, prefix) for every type: A and AAAA from one client prefix name the same clusters.
      const d = this.steering.decide(sn, prefix, now);
      if (d.servfail) {
        c.servfail++;
        return this.writer.error(msg, q, RCODE.SERVFAIL, this.#udpPayload);
      }
      const a = q.qtype === QTYPE.AAAA ? NO_ADDRESSES : d.a;
      const aaaa = q.qtype === QTYPE.A ? NO_ADDRESSES : d.aaaa;
      // A family no usable cluster has VIPs of is answered from the zone below (NODATA with the SOA as a rule).
      if (a.vips.length + aaaa.vips.length > 0) {
        chosen = q.qtype === QTYPE.A ? a.clusterIndexes : q.qtype === QTYPE.AAAA ? aaaa.clusterIndexes : d.clusterIndexes;
        fallback = d.fallback;
        // The scope is the part of the ECS address the answer depends on: none when the source address decided.
        if (d.scoped && fromEcs) scope = prefix.length;
        const ttl = sn.config.ttl;
        body = this.#cached(`s${q.qtype}|${q.name}|${ttl}|${a.answerKey}|${aaaa.answerKey}`, () =>
          encodeBody(q.name, q.oddName, q.qtype, { answer: [...a.vips.map((address) => addressRecord(q.name, ttl, QTYPE.A, address)), ...aaaa.vips.map((address) => addressRecord(q.name, ttl, QTYPE.AAAA, address))], authority: [], additional: [] }, RCODE.NOERROR, true),
        );
        if (body === undefined) {
          c.servfail++;
          return this.writer.error(msg, q, RCODE.SERVFAIL, this.#udpPayload);
        }
      }
    }
    if (body === undefined) {
      body = this.#cached(`z${q.qtype}|${q.name}`, () => {
        const a = zone.lookup(q.name, q.qtype);
        // A steered name without static data of this type is NODATA, not NXDOMAIN: the name exists.
        const rcode = sn !== undefined && a.rcode === RCODE.NXDOMAIN ? RCODE.NOERROR : a.rcode;
        return encodeBody(q.name, q.oddName, q.qtype, a, rcode, a.aa);
      });
    }
    if (body === undefined) {
      c.servfail++;
      return this.writer.error(msg, q, RCODE.SERVFAIL, this.#udpPayload);
    }
    if (chosen !== undefined) {
      c.steered++;
      if (fallback) c.steeredFallback++;
      const by = this.steeredByCluster;
      for (let i = 0; i < chosen.length; i++) {
        const k = chosen[i] ?? -1;
        if (k >= 0 && k < by.length) by[k] = (by[k] ?? 0) + 1;
      }
    }
    if (body.rcode === RCODE.NXDOMAIN) c.nxdomain++;
    else if (!body.aa) c.referral++;
    else if (body.an === 0) c.nodata++;
    else c.answered++;
    const n = this.writer.answer(msg, q, body, limit, this.#udpPayload, scope);
    c.truncated = this.writer.truncated;
    return n;
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

  #rrlAllows(source: string, now: number): boolean {
    if (this.#rrl === undefined) return true;
    const src = this.#sourcePrefix(source);
    if (src === undefined) return true;
    const v = this.#rrl.check(src.key, now);
    if (v === RrlVerdict.DROP) {
      this.counters.rrlDropped++;
      return false;
    }
    return true; // error responses carry nothing worth slipping: send or drop
  }

  /**
   * The encoded body for `key`, from the cache or from `encode()` (dns2
   * throws on records it cannot encode, a zone validation bug: SERVFAIL).
   */
  #cached(key: string, encode: () => Body): Body | undefined {
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

function addressRecord(name: string, ttl: number, type: typeof QTYPE.A | typeof QTYPE.AAAA, address: string): RR {
  return { name, type, class: 1, ttl, address };
}

/** The family a query type does not ask for. */
const NO_ADDRESSES: FamilyAnswer = Object.freeze({ vips: [], clusterIndexes: [], answerKey: '' });
