/**
 * RDATA in wire form, for the record types dns2 cannot encode (NAPTR, DS,
 * SSHFP, TLSA: RFC 3403, 4034, 4255, 6698), and the decoder of RFC 3597
 * generic RDATA (`\# len hex`) for the types Sluice holds in a form of
 * their own.
 *
 * The encoders run once per record at zone load: each allocates exactly one
 * Buffer of the record's RDATA length, which answers then copy (dns2 writes
 * `data` as it is for types it has no codec for). Names in these RDATA are
 * never compressed (RFC 3597 §4: only RFC 1035 types may be).
 *
 * Inputs are already validated by the parser (ranges, label characters);
 * functions here check only what they decode from octets. Problems are
 * returned as text (what is wrong; how to fix it) for the parser to place
 * at its file and line.
 */
import { RRTYPE, type DataType, type RawType, type RR } from './records.ts';

/** Label octets accepted: letters, digits, '-', '_', '/' (RFC 2317 names); '*' alone is the wildcard. */
const LABEL_RE = /^[a-z0-9_/-]+$/i;
/** RFC 2181 §8: TTLs (and SOA timers) are 31-bit. */
const MAX_TTL = 0x7fffffff;
const utf8 = new TextDecoder('utf-8', { fatal: true });

export function labelOk(label: string): boolean {
  return label === '*' || LABEL_RE.test(label);
}

/** Octets of a name as the parser holds it (lowercase, no trailing dot, "" = the root). */
export function nameWireLength(name: string): number {
  return name === '' ? 1 : name.length + 2;
}

function writeName(b: Buffer, p: number, name: string): number {
  if (name !== '') {
    for (const label of name.split('.')) {
      b[p++] = label.length;
      p += b.write(label, p, 'latin1');
    }
  }
  b[p++] = 0;
  return p;
}

function writeString(b: Buffer, p: number, s: Uint8Array): number {
  b[p++] = s.length;
  b.set(s, p);
  return p + s.length;
}

/** RFC 3403 §4.1: ORDER, PREFERENCE, FLAGS, SERVICES, REGEXP (character-strings), REPLACEMENT (a name). */
export function naptrRdata(order: number, preference: number, flags: Uint8Array, services: Uint8Array, regexp: Uint8Array, replacement: string): Buffer {
  const b = Buffer.allocUnsafe(4 + 3 + flags.length + services.length + regexp.length + nameWireLength(replacement));
  b.writeUInt16BE(order, 0);
  b.writeUInt16BE(preference, 2);
  let p = writeString(b, 4, flags);
  p = writeString(b, p, services);
  p = writeString(b, p, regexp);
  writeName(b, p, replacement);
  return b;
}

/** Fixed fields of one octet each, then octets: SSHFP (RFC 4255 §3.1), TLSA (RFC 6698 §2.1). */
export function octetsThenData(head: readonly number[], data: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(head.length + data.length);
  head.forEach((v, i) => (b[i] = v));
  b.set(data, head.length);
  return b;
}

/** RFC 4034 §5.1: key tag (16 bits), algorithm, digest type, digest. */
export function dsRdata(keyTag: number, algorithm: number, digestType: number, digest: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(4 + digest.length);
  b.writeUInt16BE(keyTag, 0);
  b[2] = algorithm;
  b[3] = digestType;
  b.set(digest, 4);
  return b;
}

/** DS digest lengths by digest type (RFC 4034 §5.1.4, RFC 4509, RFC 6605); other types are not checked. */
export const DS_DIGEST_LENGTH: ReadonlyMap<number, number> = new Map([
  [1, 20],
  [2, 32],
  [4, 48],
]);

/** DNSSEC algorithm mnemonics (RFC 4034 Appendix A.1, RFC 8624 §3.1), for the DS algorithm field. */
export const DNSSEC_ALGORITHMS: ReadonlyMap<string, number> = new Map([
  ['RSAMD5', 1],
  ['DH', 2],
  ['DSA', 3],
  ['RSASHA1', 5],
  ['DSA-NSEC3-SHA1', 6],
  ['RSASHA1-NSEC3-SHA1', 7],
  ['RSASHA256', 8],
  ['RSASHA512', 10],
  ['ECC-GOST', 12],
  ['ECDSAP256SHA256', 13],
  ['ECDSAP384SHA384', 14],
  ['ED25519', 15],
  ['ED448', 16],
]);

/** The rdata fields of a record, without owner, class and TTL. */
export type RdataFields = RR extends infer T ? (T extends RR ? Omit<T, 'name' | 'class' | 'ttl'> : never) : never;

/**
 * RFC 3597 §5: generic RDATA of a type Sluice holds in its own form,
 * decoded into that form (names must be uncompressed, §4). A string is the
 * problem found.
 */
export function decodeRdata(type: DataType, b: Buffer): RdataFields | string {
  const r = new Reader(b);
  const out = decodeFields(type, r);
  if (typeof out === 'string') return out;
  if (r.problem !== undefined) return r.problem;
  if (r.p !== b.length) return `${b.length - r.p} octet(s) left over after the ${typeName(type)} RDATA`;
  return out;
}

function typeName(type: number): string {
  for (const [k, v] of Object.entries(RRTYPE)) if (v === type) return k;
  return `TYPE${type}`;
}

function decodeFields(type: DataType, r: Reader): RdataFields | string {
  switch (type) {
    case RRTYPE.A: {
      const o = r.octets(4);
      return { type, address: Array.from(o).join('.') };
    }
    case RRTYPE.AAAA: {
      const o = r.octets(16);
      const groups: string[] = [];
      for (let i = 0; i < 16; i += 2) groups.push((((o[i] ?? 0) << 8) | (o[i + 1] ?? 0)).toString(16));
      // RFC 5952 text without a dotted quad, the form the text parser holds.
      return { type, address: new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1) };
    }
    case RRTYPE.NS:
      return { type, ns: r.name() };
    case RRTYPE.CNAME:
      return { type, domain: r.name() };
    case RRTYPE.PTR:
      return { type, domain: r.name() };
    case RRTYPE.MX:
      return { type, priority: r.u16(), exchange: r.name() };
    case RRTYPE.SRV:
      return { type, priority: r.u16(), weight: r.u16(), port: r.u16(), target: r.name() };
    case RRTYPE.SOA: {
      const primary = r.name();
      const admin = r.name();
      const serial = r.u32();
      const timers = [r.u32(), r.u32(), r.u32(), r.u32()];
      if (timers.some((t) => t > MAX_TTL)) return `an SOA timer is over ${MAX_TTL} seconds (RFC 2181 §8)`;
      const [refresh = 0, retry = 0, expiration = 0, minimum = 0] = timers;
      return { type, primary, admin, serial, refresh, retry, expiration, minimum };
    }
    case RRTYPE.TXT: {
      const data: string[] = [];
      do data.push(r.utf8(r.octets(r.u8()), 'TXT string'));
      while (r.p < r.b.length && r.problem === undefined);
      return { type, data: Object.freeze(data) };
    }
    case RRTYPE.CAA: {
      const flags = r.u8();
      const tag = r.octets(r.u8()).toString('latin1');
      if (r.problem === undefined && !/^[a-z0-9]{1,255}$/i.test(tag)) return `CAA tag "${tag}" is not 1-255 ASCII letters and digits (RFC 8659 §4.1)`;
      return { type, flags, tag, value: r.utf8(r.octets(r.b.length - r.p), 'CAA value') };
    }
    case RRTYPE.NAPTR: {
      // Checked field by field, kept as the octets given.
      r.octets(4);
      for (let i = 0; i < 3; i++) r.octets(r.u8());
      r.name();
      return { type, data: r.b };
    }
    case RRTYPE.DS:
    case RRTYPE.SSHFP:
    case RRTYPE.TLSA:
      return rawFixed(type, r);
  }
}

function rawFixed(type: RawType, r: Reader): RdataFields | string {
  const head = type === RRTYPE.DS ? 4 : type === RRTYPE.TLSA ? 3 : 2;
  if (r.b.length <= head) return `${typeName(type)} RDATA of ${r.b.length} octets is too short`;
  if (type === RRTYPE.DS) {
    const want = DS_DIGEST_LENGTH.get(r.b[3] ?? 0);
    if (want !== undefined && r.b.length - 4 !== want) return `a DS digest of type ${r.b[3] ?? 0} is ${want} octets, not ${r.b.length - 4}`;
  }
  r.p = r.b.length;
  return { type, data: r.b };
}

/** Bounds-checked reads; the first problem sticks and later reads return zeros. */
class Reader {
  readonly b: Buffer;
  p = 0;
  problem: string | undefined;
  constructor(b: Buffer) {
    this.b = b;
  }
  #need(n: number): boolean {
    if (this.problem !== undefined) return false;
    if (this.p + n > this.b.length) {
      this.problem = `the RDATA ends early (${this.b.length} octets)`;
      return false;
    }
    return true;
  }
  /** A method, so that callers re-read `problem` after a read set it. */
  failed(): boolean {
    return this.problem !== undefined;
  }
  u8(): number {
    if (!this.#need(1)) return 0;
    return this.b[this.p++] ?? 0;
  }
  u16(): number {
    if (!this.#need(2)) return 0;
    const v = this.b.readUInt16BE(this.p);
    this.p += 2;
    return v;
  }
  u32(): number {
    if (!this.#need(4)) return 0;
    const v = this.b.readUInt32BE(this.p);
    this.p += 4;
    return v;
  }
  octets(n: number): Buffer {
    if (!this.#need(n)) return Buffer.alloc(0);
    const o = this.b.subarray(this.p, this.p + n);
    this.p += n;
    return o;
  }
  utf8(o: Buffer, what: string): string {
    try {
      return utf8.decode(o);
    } catch {
      this.problem ??= `the ${what} is not UTF-8 (Sluice holds it as text)`;
      return '';
    }
  }
  /** An uncompressed name, lowercased, its labels as the text parser accepts them. */
  name(): string {
    const labels: string[] = [];
    let wire = 0;
    for (;;) {
      const l = this.u8();
      if (this.problem !== undefined) return '';
      wire += l + 1;
      if (l === 0) break;
      if (l > 63) {
        this.problem = l >= 0xc0 ? 'a compressed name in generic RDATA' : `a label length of ${l}`;
        return '';
      }
      const text = this.octets(l).toString('latin1');
      if (this.failed()) return '';
      if (!labelOk(text)) {
        this.problem = `label "${text}" has a character Sluice does not accept (letters, digits, '-', '_', '/')`;
        return '';
      }
      labels.push(text.toLowerCase());
    }
    if (wire > 255) this.problem = `a name of ${wire} octets (at most 255)`;
    return labels.join('.');
  }
}
