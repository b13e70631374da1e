/**
 * Authoritative lookup in static zone data (RFC 1034 §4.3.2, RFC 2308,
 * RFC 4592; no DNSSEC, no DNAME).
 *
 * Everything a lookup needs is indexed at construction, so a lookup costs
 * O(labels of the name) map probes, times at most MAX_CNAME_CHAIN names:
 *   - nodes: name → type → RRset (frozen arrays, returned as they are);
 *   - names: every existing name: owners and all their ancestors up to the
 *     apex, so empty non-terminals exist (NODATA, and they block wildcards);
 *   - cuts: names strictly below the apex that own NS (delegations).
 *
 * Answer sections hold the zone's own frozen records, except records
 * synthesised from a wildcard (owned by the query name) and the SOA of
 * negative answers (TTL lowered to the SOA minimum, RFC 2308 §3).
 */
import { InvalidArgumentError } from '../../errors/errors.ts';
import { parseZone, type ParsedZone, type ParseOptions } from './parse.ts';
import { RRTYPE, asciiLower, inZone, parentName, wireType, type RR, type SOARecord } from './records.ts';

export interface Answer {
  /** 0 NOERROR, 3 NXDOMAIN (after a CNAME chain: the last name's, RFC 6604). */
  readonly rcode: 0 | 3;
  /** Authoritative answer: false only for referrals. */
  readonly aa: boolean;
  readonly answer: readonly RR[];
  readonly authority: readonly RR[];
  readonly additional: readonly RR[];
  /**
   * answer: the RRset(s) asked for; nodata / nxdomain: SOA in authority;
   * referral: NS of the cut in authority, glue in additional; cname: the
   * answer starts with a CNAME chain, followed as far as this zone can
   * (rcode and authority then describe the chain's last name).
   */
  readonly kind: 'answer' | 'nodata' | 'nxdomain' | 'referral' | 'cname';
}

/** At most this many CNAMEs in one answer; the resolver follows the rest. */
export const MAX_CNAME_CHAIN = 8;

type RRsets = ReadonlyMap<number, readonly RR[]>;

/** Where a name lands, before its type is considered. */
type Landing =
  | { readonly kind: 'node'; readonly sets: RRsets; readonly wildcard: boolean }
  | { readonly kind: 'nodata' | 'nxdomain' }
  | { readonly kind: 'referral'; readonly cut: string };

const EMPTY: readonly RR[] = Object.freeze([]);
const ADDRESS_TYPES = [RRTYPE.A, RRTYPE.AAAA] as const;

export class Zone {
  readonly origin: string;
  readonly soa: SOARecord;
  /** Every record, in file order. */
  readonly records: readonly RR[];
  readonly #nodes = new Map<string, Map<number, RR[]>>();
  readonly #names = new Set<string>();
  readonly #cuts = new Set<string>();
  /** The authority section of negative answers: the SOA with TTL min(ttl, minimum). */
  readonly #negative: readonly RR[];

  /** Takes parser output (or records honouring the same invariants: names inside `origin`, one SOA at it). */
  constructor(zone: ParsedZone) {
    this.origin = zone.origin;
    this.records = Object.freeze([...zone.records]);
    let soa: SOARecord | undefined;
    for (const rr of this.records) {
      if (!inZone(rr.name, this.origin)) throw new InvalidArgumentError(`record "${rr.name}" is outside the zone "${this.origin}"`);
      if (rr.type === RRTYPE.SOA) {
        if (soa !== undefined || rr.name !== this.origin) throw new InvalidArgumentError(`zone "${this.origin}" needs exactly one SOA, at its origin`);
        soa = rr;
      }
      let sets = this.#nodes.get(rr.name);
      if (sets === undefined) this.#nodes.set(rr.name, (sets = new Map<number, RR[]>()));
      const type = wireType(rr);
      const set = sets.get(type);
      if (set === undefined) sets.set(type, [rr]);
      else set.push(rr);
      if (rr.type === RRTYPE.NS && rr.name !== this.origin) this.#cuts.add(rr.name);
      // Ancestors up to the apex exist too (empty non-terminals); stop at the first already known.
      for (let n = rr.name; !this.#names.has(n); n = parentName(n)) {
        this.#names.add(n);
        if (n === this.origin) break;
      }
    }
    if (soa === undefined) throw new InvalidArgumentError(`zone "${this.origin}" has no SOA`);
    this.soa = soa;
    for (const sets of this.#nodes.values()) for (const set of sets.values()) Object.freeze(set);
    this.#negative = Object.freeze([Object.freeze({ ...soa, ttl: Math.min(soa.ttl, soa.minimum) })]);
  }

  /** Parses a master file and indexes it (see parseZone for errors). */
  static fromText(text: string, opts: ParseOptions = {}): Zone {
    return new Zone(parseZone(text, opts));
  }

  get recordCount(): number {
    return this.records.length;
  }

  /** Does the name exist in the zone: owns records, or is an empty non-terminal? */
  has(name: string): boolean {
    return this.#names.has(asciiLower(name));
  }

  /** The authoritative answer for a name inside this zone (lowercase, no trailing dot). */
  lookup(qname: string, qtype: number): Answer {
    const name = asciiLower(qname);
    if (!inZone(name, this.origin)) throw new InvalidArgumentError(`"${qname}" is not in the zone "${this.origin}"`);
    // DS lives at the parent side of a cut (RFC 4035 §3.1.4.1): a DS query
    // for the delegated name itself is answered here, not referred.
    const at = qtype === RRTYPE.DS && this.#cuts.has(name) && this.#cutAbove(parentName(name)) === undefined ? this.#node(name) : this.#land(name);
    switch (at.kind) {
      case 'referral':
        return this.#referral(at.cut);
      case 'nxdomain':
        return this.#negativeAnswer(3, 'nxdomain', EMPTY);
      case 'nodata':
        return this.#negativeAnswer(0, 'nodata', EMPTY);
      case 'node':
        break;
    }
    if (qtype === RRTYPE.ANY) {
      const answer = [...at.sets.values()].flatMap((set) => owned(set, name, at.wildcard));
      return { rcode: 0, aa: true, answer, authority: EMPTY, additional: this.#addresses(answer, false), kind: 'answer' };
    }
    const set = at.sets.get(qtype);
    if (set !== undefined) {
      const answer = owned(set, name, at.wildcard);
      return { rcode: 0, aa: true, answer, authority: EMPTY, additional: this.#addresses(answer, false), kind: 'answer' };
    }
    const cname = at.sets.get(RRTYPE.CNAME);
    if (cname !== undefined) return this.#chase(name, qtype, owned(cname, name, at.wildcard));
    return this.#negativeAnswer(0, 'nodata', EMPTY);
  }

  /**
   * Follows CNAMEs inside the zone (RFC 1034 §4.3.2 step 3a). Stops, with
   * what it has, at a target outside the zone or below a cut, at a loop, or
   * after MAX_CNAME_CHAIN CNAMEs: the resolver continues from there.
   */
  #chase(qname: string, qtype: number, first: readonly RR[]): Answer {
    // Invariant: until the loop returns, `answer` holds only CNAMEs.
    const answer = [...first];
    const seen = new Set([qname]);
    for (let last = first[0]; last?.type === RRTYPE.CNAME; last = answer[answer.length - 1]) {
      const target = last.domain;
      if (seen.has(target) || !inZone(target, this.origin)) break;
      seen.add(target);
      const at = this.#land(target);
      if (at.kind === 'referral') break;
      if (at.kind !== 'node') return this.#negativeAnswer(at.kind === 'nxdomain' ? 3 : 0, 'cname', answer);
      const set = at.sets.get(qtype);
      if (set !== undefined) {
        const rrs = owned(set, target, at.wildcard);
        answer.push(...rrs);
        return { rcode: 0, aa: true, answer, authority: EMPTY, additional: this.#addresses(rrs, false), kind: 'cname' };
      }
      const next = at.sets.get(RRTYPE.CNAME);
      if (next === undefined) return this.#negativeAnswer(0, 'cname', answer);
      if (answer.length >= MAX_CNAME_CHAIN) break;
      answer.push(...owned(next, target, at.wildcard));
    }
    return { rcode: 0, aa: true, answer, authority: EMPTY, additional: EMPTY, kind: 'cname' };
  }

  /** Exact match, else empty non-terminal, else the wildcard of the closest encloser (RFC 4592 §3.3.1). */
  #land(name: string): Landing {
    const cut = this.#cutAbove(name);
    if (cut !== undefined) return { kind: 'referral', cut };
    const sets = this.#nodes.get(name);
    if (sets !== undefined) return { kind: 'node', sets, wildcard: false };
    if (this.#names.has(name)) return { kind: 'nodata' };
    // The closest encloser is the nearest existing ancestor (the apex always
    // exists); only its own '*' child may match, so an empty non-terminal
    // between the name and a higher wildcard blocks that wildcard.
    let encloser = parentName(name);
    while (encloser !== this.origin && !this.#names.has(encloser)) encloser = parentName(encloser);
    const wild = this.#nodes.get(encloser === '' ? '*' : `*.${encloser}`);
    return wild === undefined ? { kind: 'nxdomain' } : { kind: 'node', sets: wild, wildcard: true };
  }

  /** The name's own data, never a referral (for DS at a cut). */
  #node(name: string): Landing {
    const sets = this.#nodes.get(name);
    return sets === undefined ? { kind: 'nodata' } : { kind: 'node', sets, wildcard: false };
  }

  /** The highest delegation at or above `name` (strictly below the apex): nothing under it is ours. */
  #cutAbove(name: string): string | undefined {
    if (this.#cuts.size === 0) return undefined;
    let cut: string | undefined;
    for (let n = name; n !== this.origin && n !== ''; n = parentName(n)) if (this.#cuts.has(n)) cut = n;
    return cut;
  }

  #referral(cut: string): Answer {
    const ns = this.#nodes.get(cut)?.get(RRTYPE.NS) ?? EMPTY;
    // Glue lives at or below the cut, so addresses are taken as they are in the file.
    return { rcode: 0, aa: false, answer: EMPTY, authority: ns, additional: this.#addresses(ns, true), kind: 'referral' };
  }

  #negativeAnswer(rcode: 0 | 3, kind: 'nodata' | 'nxdomain' | 'cname', answer: readonly RR[]): Answer {
    return { rcode, aa: true, answer, authority: this.#negative, additional: EMPTY, kind };
  }

  /**
   * RFC 1034 §4.3.2 step 6: A/AAAA of the in-zone MX, SRV and NS targets of
   * `rrs`. Exact names only (no wildcard synthesis here); a target below a
   * cut is not ours to vouch for, except as glue in a referral.
   */
  #addresses(rrs: readonly RR[], glue: boolean): readonly RR[] {
    const out: RR[] = [];
    const done = new Set<string>();
    for (const rr of rrs) {
      const target = rr.type === RRTYPE.MX ? rr.exchange : rr.type === RRTYPE.SRV ? rr.target : rr.type === RRTYPE.NS ? rr.ns : undefined;
      // "" is the "no service" target (RFC 7505 null MX, RFC 2782 SRV ".").
      if (target === undefined || target === '' || done.has(target) || !inZone(target, this.origin)) continue;
      done.add(target);
      if (!glue && this.#cutAbove(target) !== undefined) continue;
      const sets = this.#nodes.get(target);
      for (const t of ADDRESS_TYPES) out.push(...(sets?.get(t) ?? EMPTY));
    }
    return out.length === 0 ? EMPTY : out;
  }
}

/** The RRset as owned by `name`: itself, or copies renamed when synthesised from a wildcard. */
function owned(set: readonly RR[], name: string, wildcard: boolean): readonly RR[] {
  return wildcard ? set.map((rr) => ({ ...rr, name })) : set;
}

/** Several zones; a name belongs to the zone with the longest matching origin. */
export class ZoneSet {
  readonly #zones = new Map<string, Zone>();

  constructor(zones: Iterable<Zone>) {
    for (const z of zones) {
      if (this.#zones.has(z.origin)) throw new InvalidArgumentError(`two zones with the origin "${z.origin}"`);
      this.#zones.set(z.origin, z);
    }
  }

  get size(): number {
    return this.#zones.size;
  }

  [Symbol.iterator](): IterableIterator<Zone> {
    return this.#zones.values();
  }

  /** The closest enclosing zone: its origin is the longest suffix of qname on label boundaries. */
  find(qname: string): Zone | undefined {
    for (let n = asciiLower(qname); ; n = parentName(n)) {
      const z = this.#zones.get(n);
      if (z !== undefined || n === '') return z;
    }
  }
}
