/**
 * The DNS query parser and its guard: the only code that reads untrusted
 * query bytes. dns2's decoder is never given a query (it loops over whatever
 * record counts a header claims: one 12-byte packet with counts of 0xFFFF
 * costs it seconds of CPU). Here every count and length is checked against
 * the bytes actually present before anything is read, so the work per query
 * is bounded by its size (at most 65535 bytes, one pass).
 *
 * What a query may be (RFC 1035 §4.1, RFC 6891, RFC 7871):
 *   - QR clear (a response sent to us is ignored: answering responses makes
 *     reflection loops between servers);
 *   - opcode QUERY, else NOTIMP;
 *   - exactly one question, no answer or authority records, at most one
 *     additional record besides the OPT; else FORMERR;
 *   - the question name uncompressed (a question is the first name in the
 *     message, so a pointer there can only point backwards into the header),
 *     labels <= 63 octets, name <= 255 octets;
 *   - at most one OPT, owned by the root; an ECS option (code 8) with family
 *     1 or 2, source prefix within the family, scope 0, exactly
 *     ceil(source/8) address octets and no bits set past the prefix; or
 *     family 0 with source 0 and no address (RFC 7871 §7.1.2: a client
 *     withholding its address; resolvers forward it, §7.5).
 * Trailing bytes after the last record are ignored, as most servers do.
 *
 * The parse fills one reusable ParsedQuery (no allocation but the name key
 * string, needed for the lookup).
 */

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5, BADVERS: 16 } as const;

export const QTYPE = { A: 1, NS: 2, CNAME: 5, SOA: 6, MX: 15, TXT: 16, AAAA: 28, SRV: 33, OPT: 41, IXFR: 251, AXFR: 252, ANY: 255 } as const;

export const QCLASS = { IN: 1, CH: 3, ANY: 255 } as const;

/** The outcome of parsing; FORMERR/NOTIMP are answered, IGNORE is dropped. */
export const Parse = { OK: 0, IGNORE: 1, FORMERR: 2, NOTIMP: 3 } as const;
export type ParseStatus = (typeof Parse)[keyof typeof Parse];

/** Why a query was rejected: the metric label of the rejection counter. */
export type RejectReason =
  | 'short'
  | 'response'
  | 'opcode'
  | 'qdcount'
  | 'ancount'
  | 'nscount'
  | 'arcount'
  | 'counts'
  | 'name'
  | 'question'
  | 'opt_owner'
  | 'opt_twice'
  | 'opt_length'
  | 'ecs'
  | 'record';

const HEADER = 12;
/** The smallest question: root name (1) + type (2) + class (2). */
const MIN_QUESTION = 5;
/** The smallest resource record: root name (1) + type, class, ttl, rdlength (10). */
const MIN_RR = 11;
const OPT_ECS = 8;

export class ParsedQuery {
  id = 0;
  /** Header flags word as received (opcode, RD, CD...). */
  flags = 0;
  opcode = 0;
  /** Lowercase dotted name without the trailing dot ("" = root); labels holding a '.' octet get it as \0 so they cannot alias. */
  name = '';
  /** True when a label holds octets that do not round-trip through a dotted string (a '.', or >= 0x7f, or < 0x21). */
  oddName = false;
  /** Offset just past the question (header + question octets are echoed verbatim). */
  questionEnd = 0;
  qtype = 0;
  qclass = 0;
  edns = false;
  ednsVersion = 0;
  /** Requestor's UDP payload size (RFC 6891 §6.2.3: values below 512 are treated as 512). */
  udpSize = 512;
  doBit = false;
  ecs = false;
  ecsFamily = 0;
  ecsSource = 0;
  /** ECS address octets, left-aligned (16 octets for IPv6, 4 used for IPv4). */
  readonly ecsAddress = new Uint8Array(16);
  ecsAddressLength = 0;
  reject: RejectReason | undefined = undefined;

  reset(): void {
    this.id = 0;
    this.flags = 0;
    this.opcode = 0;
    this.name = '';
    this.oddName = false;
    this.questionEnd = 0;
    this.qtype = 0;
    this.qclass = 0;
    this.edns = false;
    this.ednsVersion = 0;
    this.udpSize = 512;
    this.doBit = false;
    this.ecs = false;
    this.ecsFamily = 0;
    this.ecsSource = 0;
    this.ecsAddressLength = 0;
    this.reject = undefined;
  }
}

/** Scratch for the lowercase name (255 octets at most). */
const nameScratch = Buffer.alloc(256);

function fail(q: ParsedQuery, status: ParseStatus, why: RejectReason): ParseStatus {
  q.reject = why;
  return status;
}

/**
 * Parses `buf[0, len)` into `q`. Never throws, never reads past `len`.
 * On FORMERR/NOTIMP, `q.id`, `q.flags` and `q.opcode` are set (the error
 * response echoes them) and `q.questionEnd` is 0 unless the question parsed.
 */
export function parseQuery(buf: Uint8Array, len: number, q: ParsedQuery): ParseStatus {
  q.reset();
  if (len < HEADER) return fail(q, Parse.IGNORE, 'short'); // no ID to answer
  q.id = ((buf[0] ?? 0) << 8) | (buf[1] ?? 0);
  const flags = ((buf[2] ?? 0) << 8) | (buf[3] ?? 0);
  q.flags = flags;
  if ((flags & 0x8000) !== 0) return fail(q, Parse.IGNORE, 'response');
  q.opcode = (flags >> 11) & 0xf;
  const qd = ((buf[4] ?? 0) << 8) | (buf[5] ?? 0);
  const an = ((buf[6] ?? 0) << 8) | (buf[7] ?? 0);
  const ns = ((buf[8] ?? 0) << 8) | (buf[9] ?? 0);
  const ar = ((buf[10] ?? 0) << 8) | (buf[11] ?? 0);
  // Refusals decided from the header still answer with an OPT when the
  // query had one (RFC 6891 §6.1.1): scanOpt finds it, bounded by len.
  if (q.opcode !== 0) return scanOpt(buf, len, q, qd, an + ns + ar, Parse.NOTIMP, 'opcode');
  if (qd !== 1) return scanOpt(buf, len, q, qd, an + ns + ar, Parse.FORMERR, 'qdcount');
  if (an !== 0) return scanOpt(buf, len, q, qd, an + ns + ar, Parse.FORMERR, 'ancount');
  if (ns !== 0) return scanOpt(buf, len, q, qd, an + ns + ar, Parse.FORMERR, 'nscount');
  if (ar > 2) return scanOpt(buf, len, q, qd, an + ns + ar, Parse.FORMERR, 'arcount');
  // The guard: what the counts claim must fit in what arrived.
  if (HEADER + MIN_QUESTION + ar * MIN_RR > len) return fail(q, Parse.FORMERR, 'counts');

  // Question name: labels, lowercased into the scratch as a dotted string.
  let p = HEADER;
  let out = 0;
  let wire = 0;
  for (;;) {
    if (p >= len) return fail(q, Parse.FORMERR, 'name');
    const l = (buf[p] ?? 0);
    p++;
    if (l === 0) break;
    if (l > 63) return fail(q, Parse.FORMERR, 'name'); // pointers (0xC0) and extended label types
    wire += l + 1;
    if (wire > 254 || p + l > len) return fail(q, Parse.FORMERR, 'name');
    if (out > 0) nameScratch[out++] = 0x2e;
    for (let i = 0; i < l; i++) {
      let c = (buf[p + i] ?? 0);
      if (c >= 0x41 && c <= 0x5a) c |= 0x20;
      else if (c === 0x2e) {
        c = 0;
        q.oddName = true;
      } else if (c < 0x21 || c >= 0x7f) q.oddName = true;
      nameScratch[out++] = c;
    }
    p += l;
  }
  if (p + 4 > len) return fail(q, Parse.FORMERR, 'question');
  q.name = nameScratch.toString('latin1', 0, out);
  q.qtype = ((buf[p] ?? 0) << 8) | (buf[p + 1] ?? 0);
  q.qclass = ((buf[p + 2] ?? 0) << 8) | (buf[p + 3] ?? 0);
  p += 4;
  q.questionEnd = p;
  if (q.qtype === QTYPE.OPT) return fail(q, Parse.FORMERR, 'question');

  // Additional records: the OPT (anything else, e.g. TSIG, is skipped).
  for (let r = 0; r < ar; r++) {
    if (p + MIN_RR > len) return fail(q, Parse.FORMERR, 'record');
    const owner = (buf[p] ?? 0);
    let o = p;
    // Skip the owner name (uncompressed labels or one pointer), bounded.
    for (let hops = 0; ; hops++) {
      if (o >= len || hops > 128) return fail(q, Parse.FORMERR, 'record');
      const l = (buf[o] ?? 0);
      if (l === 0) {
        o++;
        break;
      }
      if ((l & 0xc0) === 0xc0) {
        o += 2;
        break;
      }
      if (l > 63) return fail(q, Parse.FORMERR, 'record');
      o += l + 1;
    }
    if (o + 10 > len) return fail(q, Parse.FORMERR, 'record');
    const type = ((buf[o] ?? 0) << 8) | (buf[o + 1] ?? 0);
    const cls = ((buf[o + 2] ?? 0) << 8) | (buf[o + 3] ?? 0);
    const ttlHi = ((buf[o + 4] ?? 0) << 8) | (buf[o + 5] ?? 0);
    const ttlLo = ((buf[o + 6] ?? 0) << 8) | (buf[o + 7] ?? 0);
    const rdlen = ((buf[o + 8] ?? 0) << 8) | (buf[o + 9] ?? 0);
    const rdata = o + 10;
    if (rdata + rdlen > len) return fail(q, Parse.FORMERR, 'record');
    p = rdata + rdlen;
    if (type !== QTYPE.OPT) continue;
    // OPT must be owned by the root (RFC 6891 §6.1.1).
    if (owner !== 0) return fail(q, Parse.FORMERR, 'opt_owner');
    if (q.edns) return fail(q, Parse.FORMERR, 'opt_twice');
    q.edns = true;
    q.udpSize = cls < 512 ? 512 : cls;
    q.ednsVersion = ttlHi & 0xff;
    q.doBit = (ttlLo & 0x8000) !== 0;
    let x = rdata;
    const end = rdata + rdlen;
    while (x < end) {
      if (x + 4 > end) return fail(q, Parse.FORMERR, 'opt_length');
      const code = ((buf[x] ?? 0) << 8) | (buf[x + 1] ?? 0);
      const olen = ((buf[x + 2] ?? 0) << 8) | (buf[x + 3] ?? 0);
      x += 4;
      if (x + olen > end) return fail(q, Parse.FORMERR, 'opt_length');
      if (code === OPT_ECS) {
        if (q.ecs || !parseEcs(buf, x, olen, q)) return fail(q, Parse.FORMERR, 'ecs');
      }
      x += olen;
    }
  }
  return Parse.OK;
}

/** Skips a name at p (labels, ending in a root label or a pointer); the offset after it, or -1. */
function skipName(buf: Uint8Array, p: number, len: number): number {
  for (let hops = 0; hops < 128; hops++) {
    if (p >= len) return -1;
    const l = buf[p] ?? 0;
    if (l === 0) return p + 1;
    if ((l & 0xc0) === 0xc0) return p + 2 <= len ? p + 2 : -1;
    if (l > 63) return -1;
    p += l + 1;
  }
  return -1;
}

/**
 * For a query refused on its header (NOTIMP, count errors): walks the
 * questions and records the header claims, as far as the bytes go, looking
 * for a root-owned OPT so the error response can carry one. Each step
 * consumes octets, so the walk is bounded by len whatever the counts say.
 * The OPT's options (ECS) are not used: the refusal echoes only the OPT.
 */
function scanOpt(buf: Uint8Array, len: number, q: ParsedQuery, questions: number, records: number, status: ParseStatus, why: RejectReason): ParseStatus {
  let p = HEADER;
  for (let i = 0; i < questions; i++) {
    p = skipName(buf, p, len);
    if (p < 0 || p + 4 > len) return fail(q, status, why);
    p += 4;
  }
  for (let i = 0; i < records; i++) {
    const start = p;
    p = skipName(buf, p, len);
    if (p < 0 || p + 10 > len) return fail(q, status, why);
    const type = ((buf[p] ?? 0) << 8) | (buf[p + 1] ?? 0);
    if (type === QTYPE.OPT && buf[start] === 0) {
      const cls = ((buf[p + 2] ?? 0) << 8) | (buf[p + 3] ?? 0);
      q.edns = true;
      q.udpSize = cls < 512 ? 512 : cls;
      q.ednsVersion = buf[p + 5] ?? 0;
      q.doBit = ((buf[p + 6] ?? 0) & 0x80) !== 0;
      return fail(q, status, why);
    }
    p += 10 + (((buf[p + 8] ?? 0) << 8) | (buf[p + 9] ?? 0));
  }
  return fail(q, status, why);
}

/** RFC 7871 §6: the checks a server makes on a query's ECS option. */
function parseEcs(buf: Uint8Array, x: number, olen: number, q: ParsedQuery): boolean {
  if (olen < 4) return false;
  const family = ((buf[x] ?? 0) << 8) | (buf[x + 1] ?? 0);
  const source = (buf[x + 2] ?? 0);
  const scope = (buf[x + 3] ?? 0);
  // Family 0 carries no address: only source 0 fits (RFC 7871 §7.1.2).
  const max = family === 1 ? 32 : family === 2 ? 128 : family === 0 ? 0 : -1;
  if (max < 0 || source > max || scope !== 0) return false;
  const n = (source + 7) >> 3;
  if (olen - 4 !== n) return false;
  for (let i = 0; i < n; i++) q.ecsAddress[i] = (buf[x + 4 + i] ?? 0);
  for (let i = n; i < 16; i++) q.ecsAddress[i] = 0;
  // Bits past the source prefix must be zero.
  if (n > 0 && source % 8 !== 0) {
    const mask = 0xff >> (source % 8);
    if (((q.ecsAddress[n - 1] ?? 0) & mask) !== 0) return false;
  }
  q.ecs = true;
  q.ecsFamily = family;
  q.ecsSource = source;
  q.ecsAddressLength = n;
  return true;
}
