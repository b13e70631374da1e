/**
 * Resource records as Sluice holds them: the shape dns2 encodes directly, so
 * the rdata field names are dns2's (`address`, `ns`, `domain`, `exchange`,
 * `priority`, ...), not RFC 1035's.
 *
 * Invariants of every RR built by the zone parser:
 *   - names (owner and rdata) are absolute, lowercase ASCII, without the
 *     trailing dot; the root is "" (RFC 4343: stored lowercase, so matching
 *     is string equality);
 *   - class is IN, ttl is 0..2^31-1 (RFC 2181 §8);
 *   - AAAA addresses are RFC 5952 text without an embedded dotted quad
 *     (the form dns2 both encodes and decodes);
 *   - TXT strings are each at most 255 octets of UTF-8 (dns2 encodes them
 *     as UTF-8);
 *   - the objects (and TXT arrays) are frozen: answers share them;
 *   - CAA tags are 1-255 ASCII letters and digits, values UTF-8 text (what
 *     dns2's CAA encoder writes);
 *   - NAPTR, SSHFP, TLSA and DS hold their RDATA as wire octets (`data`),
 *     written by zone/rdata.ts at load time: dns2 has no encoder for them
 *     and copies `data` as it is (its fallback for types without a codec),
 *     so answering them allocates nothing per query;
 *   - a type Sluice has no form for (RFC 3597 `TYPEnnn \# len hex`) is a
 *     GenericRecord: discriminant GENERIC_TYPE (0, a type no record has on
 *     the wire), the real type in `rrtype`. Its type is never one dns2 has an
 *     encoder for (the parser decodes those into their own form or refuses
 *     them), so `{ ...rr, type: rr.rrtype }` is what dns2 encodes. Use
 *     wireType(rr) wherever the type on the wire matters.
 */

export const RRTYPE = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  NAPTR: 35,
  DS: 43,
  SSHFP: 44,
  TLSA: 52,
  ANY: 255,
  CAA: 257,
} as const;

/** The discriminant of GenericRecord: type 0 is reserved (RFC 6895 §3.1), so no record carries it. */
export const GENERIC_TYPE = 0;

/** The types a zone may hold in a form of their own (ANY is a query type only). */
export type DataType = Exclude<(typeof RRTYPE)[keyof typeof RRTYPE], typeof RRTYPE.ANY>;

/** The types held as wire RDATA (`data`), encoded by zone/rdata.ts. */
export type RawType = typeof RRTYPE.NAPTR | typeof RRTYPE.DS | typeof RRTYPE.SSHFP | typeof RRTYPE.TLSA;

export const CLASS_IN = 1;

interface RRBase {
  readonly name: string;
  readonly class: typeof CLASS_IN;
  readonly ttl: number;
}

export interface ARecord extends RRBase {
  readonly type: typeof RRTYPE.A;
  /** Dotted quad. */
  readonly address: string;
}
export interface NSRecord extends RRBase {
  readonly type: typeof RRTYPE.NS;
  readonly ns: string;
}
export interface CNAMERecord extends RRBase {
  readonly type: typeof RRTYPE.CNAME;
  readonly domain: string;
}
export interface SOARecord extends RRBase {
  readonly type: typeof RRTYPE.SOA;
  readonly primary: string;
  /** The mailbox as a domain name (hostmaster.example.test). */
  readonly admin: string;
  readonly serial: number;
  readonly refresh: number;
  readonly retry: number;
  readonly expiration: number;
  /** RFC 2308 §4: the negative-caching TTL. */
  readonly minimum: number;
}
export interface MXRecord extends RRBase {
  readonly type: typeof RRTYPE.MX;
  readonly exchange: string;
  readonly priority: number;
}
export interface TXTRecord extends RRBase {
  readonly type: typeof RRTYPE.TXT;
  /** The character-strings, in order. */
  readonly data: readonly string[];
}
export interface AAAARecord extends RRBase {
  readonly type: typeof RRTYPE.AAAA;
  readonly address: string;
}
export interface SRVRecord extends RRBase {
  readonly type: typeof RRTYPE.SRV;
  readonly priority: number;
  readonly weight: number;
  readonly port: number;
  readonly target: string;
}

export interface PTRRecord extends RRBase {
  readonly type: typeof RRTYPE.PTR;
  /** dns2's field name for the PTR target (as for CNAME). */
  readonly domain: string;
}
export interface CAARecord extends RRBase {
  readonly type: typeof RRTYPE.CAA;
  readonly flags: number;
  readonly tag: string;
  readonly value: string;
}
/** NAPTR, DS, SSHFP, TLSA: the RDATA in wire form (uncompressed names, RFC 3597 §4). */
export interface RawRecord extends RRBase {
  readonly type: RawType;
  readonly data: Buffer;
}
/** A type Sluice has no form for (RFC 3597): opaque RDATA, the type in `rrtype`. */
export interface GenericRecord extends RRBase {
  readonly type: typeof GENERIC_TYPE;
  readonly rrtype: number;
  readonly data: Buffer;
}

export type RR = ARecord | NSRecord | CNAMERecord | SOARecord | MXRecord | TXTRecord | AAAARecord | SRVRecord | PTRRecord | CAARecord | RawRecord | GenericRecord;

/** The record's type on the wire. */
export function wireType(rr: RR): number {
  return rr.type === GENERIC_TYPE ? rr.rrtype : rr.type;
}

/** Zone-file mnemonic (upper case) → type number, for the types a zone may hold. */
export const TYPE_BY_NAME: ReadonlyMap<string, DataType> = new Map<string, DataType>([
  ['A', RRTYPE.A],
  ['NS', RRTYPE.NS],
  ['CNAME', RRTYPE.CNAME],
  ['SOA', RRTYPE.SOA],
  ['PTR', RRTYPE.PTR],
  ['MX', RRTYPE.MX],
  ['TXT', RRTYPE.TXT],
  ['AAAA', RRTYPE.AAAA],
  ['SRV', RRTYPE.SRV],
  ['NAPTR', RRTYPE.NAPTR],
  ['DS', RRTYPE.DS],
  ['SSHFP', RRTYPE.SSHFP],
  ['TLSA', RRTYPE.TLSA],
  ['CAA', RRTYPE.CAA],
]);

/** Is `name` equal to or below `origin` (on a label boundary)? */
export function inZone(name: string, origin: string): boolean {
  return origin === '' || name === origin || (name.endsWith(origin) && name.charCodeAt(name.length - origin.length - 1) === 0x2e);
}

/** The name one label up ("" for a single label; the root has no parent and maps to itself). */
export function parentName(name: string): string {
  const dot = name.indexOf('.');
  return dot < 0 ? '' : name.slice(dot + 1);
}

/**
 * ASCII-only lower case (RFC 4343 §3: only A-Z fold). Query names arrive as
 * latin1 strings; String#toLowerCase would also fold octets 0xC0-0xDE and
 * break the identity between the query name and records synthesised for it.
 */
export function asciiLower(name: string): string {
  return /[A-Z]/.test(name) ? name.replace(/[A-Z]+/g, (s) => s.toLowerCase()) : name;
}
