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
 *   - the objects (and TXT arrays) are frozen: answers share them.
 */

export const RRTYPE = { A: 1, NS: 2, CNAME: 5, SOA: 6, MX: 15, TXT: 16, AAAA: 28, SRV: 33, ANY: 255 } as const;

/** The types a zone may hold (ANY is a query type only). */
export type DataType = Exclude<(typeof RRTYPE)[keyof typeof RRTYPE], typeof RRTYPE.ANY>;

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

export type RR = ARecord | NSRecord | CNAMERecord | SOARecord | MXRecord | TXTRecord | AAAARecord | SRVRecord;

/** Zone-file mnemonic (upper case) → type number, for the types a zone may hold. */
export const TYPE_BY_NAME: ReadonlyMap<string, DataType> = new Map<string, DataType>([
  ['A', RRTYPE.A],
  ['NS', RRTYPE.NS],
  ['CNAME', RRTYPE.CNAME],
  ['SOA', RRTYPE.SOA],
  ['MX', RRTYPE.MX],
  ['TXT', RRTYPE.TXT],
  ['AAAA', RRTYPE.AAAA],
  ['SRV', RRTYPE.SRV],
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
