/**
 * Outgoing zone transfers (RFC 5936 AXFR; RFC 1995 IXFR answered with the
 * whole zone, which §4 allows a server without a journal to do), over TCP
 * only: the server hands every TCP message here first, and what is not a
 * transfer request goes on to the answerer (UDP transfer requests are
 * REFUSED there).
 *
 * Who may transfer: a source inside `transfer.allow`, or a request signed
 * with one of `transfer.keys` (TSIG, RFC 8945, tsig.ts; then every answer
 * message is signed). A signed request whose signature fails gets NOTAUTH
 * with the TSIG error (BADKEY, BADSIG, BADTIME); anyone else REFUSED; a
 * zone we do not serve NOTAUTH (RFC 5936 §2.2.1).
 *
 * What a transfer holds: the zone file's records, SOA first and last,
 * except at steered names: a secondary that does not run Sluice cannot
 * steer, so it gets each steered name's fallback answer (`fallback.mode`
 * all: every cluster's VIPs; sorry: the sorry addresses) as A/AAAA records
 * with the steered TTL, in place of the file's A/AAAA there; a family the
 * fallback has no address of (and `servfail`) keeps the file's records.
 * Other types at a steered name are transferred as written.
 *
 * IXFR: a client whose SOA serial (in the request's authority section) is
 * not older than ours gets our SOA alone ("up to date", RFC 1995 §2);
 * otherwise the whole zone, AXFR-style.
 *
 * Runs off the UDP answer path; allocation is per transfer and that is
 * fine: transfers are rare and few.
 */
import type { DnsConfig } from '../config.ts';
import { encodeBody } from '../wire/body.ts';
import type { RR } from '../zone/records.ts';
import { RRTYPE } from '../zone/records.ts';
import type { Zone, ZoneSet } from '../zone/zone.ts';
import { parseIPv4Address } from '../../packet/address.ts';
import { parseIPv6Address } from '../../packet/address6.ts';
import { SourcePrefixes } from '../../packet/source_prefixes.ts';
import { findTsig, readName, TsigSigner, tsigError, verifyRequest, type TsigKey } from './tsig.ts';

const QTYPE_IXFR = 251;
const QTYPE_AXFR = 252;
const CLASS_IN = 1;
const RCODE_REFUSED = 5;
const RCODE_NOTAUTH = 9;
/** Records per message at first; a message over MAX_BODY is split in two. */
const CHUNK = 400;
const MAX_BODY = 60_000;

export interface TransferCounters {
  /** Transfers answered with zone data (AXFR, or IXFR with the zone or the SOA alone). */
  served: number;
  /** Requests refused: source not allowed and not signed. */
  refused: number;
  /** Signed requests whose TSIG failed (answered NOTAUTH). */
  tsigFailed: number;
  /** Requests for a zone we do not serve (NOTAUTH). */
  notAuth: number;
  messages: number;
  records: number;
}

type TransferConfig = DnsConfig['transfer'];

export class ZoneTransfers {
  readonly counters: TransferCounters = { served: 0, refused: 0, tsigFailed: 0, notAuth: 0, messages: 0, records: 0 };
  readonly #allow: SourcePrefixes;
  readonly #keys: ReadonlyMap<string, TsigKey>;
  #config: Readonly<DnsConfig>;

  constructor(config: Readonly<DnsConfig>) {
    this.#config = config;
    this.#allow = new SourcePrefixes(config.transfer.allow);
    this.#keys = keyMap(config.transfer);
  }

  /** A reload's steered names (their fallbacks are what a transfer holds); allow and keys need a restart. */
  setConfig(config: Readonly<DnsConfig>): void {
    this.#config = config;
  }

  /**
   * The answer messages (unframed) when `msg` is a transfer request,
   * undefined when it is not one (the answerer takes it).
   */
  respond(msg: Buffer, source: string, zones: ZoneSet, nowSeconds: number): Buffer[] | undefined {
    const q = parseTransferQuery(msg);
    if (q === undefined) return undefined;
    const question = msg.subarray(12, q.questionEnd);
    const c = this.counters;
    const tsig = findTsig(msg) === undefined ? undefined : verifyRequest(msg, this.#keys, nowSeconds);
    if (tsig !== undefined && !tsig.ok) {
      c.tsigFailed++;
      return [tsigError(header(msg, question, RCODE_NOTAUTH, 0), tsig.record, tsig.error, nowSeconds)];
    }
    if (tsig === undefined && !allowed(this.#allow, source)) {
      c.refused++;
      return [header(msg, question, RCODE_REFUSED, 0)];
    }
    const signer = tsig?.ok === true ? new TsigSigner(tsig.key, tsig.record.mac, nowSeconds) : undefined;
    const sign = (m: Buffer): Buffer => (signer === undefined ? m : signer.sign(m));
    if (q.qclass !== CLASS_IN) return [sign(header(msg, question, RCODE_REFUSED, 0))];
    const zone = zones.find(q.name);
    if (zone === undefined || zone.origin !== q.name) {
      c.notAuth++;
      return [sign(header(msg, question, RCODE_NOTAUTH, 0))];
    }
    c.served++;
    const soa = zone.soa;
    if (q.qtype === QTYPE_IXFR && q.clientSerial !== undefined && !serialNewer(soa.serial, q.clientSerial)) {
      return this.#messages(msg, question, q.name, q.qtype, [soa], sign);
    }
    return this.#messages(msg, question, q.name, q.qtype, transferRecords(zone, this.#config), sign);
  }

  #messages(msg: Buffer, question: Buffer, origin: string, qtype: number, rrs: readonly RR[], sign: (m: Buffer) => Buffer): Buffer[] {
    const out: Buffer[] = [];
    const emit = (part: readonly RR[]): void => {
      const body = encodeBody(origin, false, qtype, { answer: part, authority: [], additional: [] }, 0, true).bytes;
      if (body.length > MAX_BODY && part.length > 1) {
        const half = Math.ceil(part.length / 2);
        emit(part.slice(0, half));
        emit(part.slice(half));
        return;
      }
      out.push(sign(Buffer.concat([header(msg, question, 0, part.length), body])));
      this.counters.messages++;
      this.counters.records += part.length;
    };
    for (let i = 0; i < rrs.length; i += CHUNK) emit(rrs.slice(i, i + CHUNK));
    return out;
  }
}

function keyMap(t: TransferConfig): ReadonlyMap<string, TsigKey> {
  return new Map(t.keys.map((k) => [k.name, { name: k.name, secret: Buffer.from(k.secret, 'base64') }]));
}

/** Header (QR, AA for data, opcode 0, the request's ID and RD) + the question echoed. */
function header(req: Buffer, question: Buffer, rcode: number, an: number): Buffer {
  const h = Buffer.alloc(12 + question.length);
  h.writeUInt16BE(req.readUInt16BE(0), 0);
  h[2] = 0x80 | (rcode === 0 ? 0x04 : 0) | ((req[2] ?? 0) & 0x01);
  h[3] = rcode & 0x0f;
  h.writeUInt16BE(1, 4);
  h.writeUInt16BE(an, 6);
  question.copy(h, 12);
  return h;
}

function allowed(allow: SourcePrefixes, source: string): boolean {
  const v4 = parseIPv4Address(source);
  if (v4 !== undefined) return allow.has4(v4);
  const zone = source.indexOf('%');
  const w = parseIPv6Address(zone >= 0 ? source.slice(0, zone) : source);
  return w !== undefined && allow.has6(w, 0);
}

/** RFC 1982 serial arithmetic: is `a` newer than `b`? */
export function serialNewer(a: number, b: number): boolean {
  const d = (a - b) >>> 0;
  return d !== 0 && d < 0x80000000;
}

interface TransferQuery {
  readonly name: string;
  readonly qtype: number;
  readonly qclass: number;
  readonly questionEnd: number;
  /** IXFR: the serial of the SOA in the authority section. */
  readonly clientSerial: number | undefined;
}

/** A QUERY with one question of type AXFR or IXFR; anything else (or malformed) is undefined: the answerer judges it. */
function parseTransferQuery(msg: Buffer): TransferQuery | undefined {
  if (msg.length < 17) return undefined;
  const flags = msg[2] ?? 0;
  if ((flags & 0x80) !== 0 || ((flags >> 3) & 0x0f) !== 0 || msg.readUInt16BE(4) !== 1) return undefined;
  // Every TCP query passes here: find the question's type without allocating, and leave early.
  let p = 12;
  while (p < msg.length && (msg[p] ?? 0) !== 0 && (msg[p] ?? 0) < 64) p += 1 + (msg[p] ?? 0);
  if (p + 3 > msg.length || (msg[p] ?? 1) !== 0) return undefined;
  const t = msg.readUInt16BE(p + 1);
  if (t !== QTYPE_AXFR && t !== QTYPE_IXFR) return undefined;
  const n = readName(msg, 12);
  // The question name comes first and cannot be compressed (a pointer could only point into the header).
  if (n === undefined || n.end + 4 > msg.length || (msg[12] ?? 0) >= 0xc0) return undefined;
  const qtype = msg.readUInt16BE(n.end);
  if (qtype !== QTYPE_AXFR && qtype !== QTYPE_IXFR) return undefined;
  const questionEnd = n.end + 4;
  let clientSerial: number | undefined;
  if (qtype === QTYPE_IXFR && msg.readUInt16BE(6) === 0 && msg.readUInt16BE(8) > 0) {
    const owner = readName(msg, questionEnd);
    if (owner !== undefined && owner.end + 10 <= msg.length && msg.readUInt16BE(owner.end) === RRTYPE.SOA) {
      const mname = readName(msg, owner.end + 10);
      const rname = mname === undefined ? undefined : readName(msg, mname.end);
      if (rname !== undefined && rname.end + 4 <= msg.length) clientSerial = msg.readUInt32BE(rname.end);
    }
  }
  return { name: n.name, qtype, qclass: msg.readUInt16BE(n.end + 2), questionEnd, clientSerial };
}

/**
 * The records a transfer of `zone` holds (module comment): SOA, the file's
 * records with steered names' A/AAAA replaced by their fallback, SOA.
 */
export function transferRecords(zone: Zone, cfg: Readonly<DnsConfig>): RR[] {
  const steered = new Map<string, { ttl: number; a: string[]; aaaa: string[] }>();
  const all = [...new Set(cfg.clusters.flatMap((c) => c.vips))];
  for (const n of cfg.steering.names) {
    if (zone.origin !== '' && n.name !== zone.origin && !n.name.endsWith(`.${zone.origin}`)) continue;
    const addrs = n.fallback.mode === 'all' ? all : n.fallback.mode === 'sorry' ? n.fallback.addresses : [];
    steered.set(n.name, { ttl: n.ttl, a: addrs.filter((x) => !x.includes(':')), aaaa: addrs.filter((x) => x.includes(':')) });
  }
  const soa = zone.soa;
  const out: RR[] = [soa];
  for (const rr of zone.records) {
    if (rr.type === RRTYPE.SOA) continue;
    const s = steered.get(rr.name);
    if (s !== undefined && ((rr.type === RRTYPE.A && s.a.length > 0) || (rr.type === RRTYPE.AAAA && s.aaaa.length > 0))) continue;
    out.push(rr);
  }
  for (const [name, s] of steered) {
    for (const address of s.a) out.push({ name, type: RRTYPE.A, class: 1, ttl: s.ttl, address });
    for (const address of s.aaaa) out.push({ name, type: RRTYPE.AAAA, class: 1, ttl: s.ttl, address });
  }
  out.push(soa);
  return out;
}
