/**
 * TSIG (RFC 8945) with hmac-sha256, for zone transfers: verifying a signed
 * request and signing each message of the answer.
 *
 * A TSIG record is the last record of the additional section. The MAC of
 * a request covers (§4.3.3) the message without its TSIG record (ARCOUNT
 * one less, the original ID) followed by the TSIG variables: key name and
 * algorithm name in canonical wire form (uncompressed, lower case), class
 * ANY, TTL 0, time signed, fudge, error, other data. The first answer
 * message's MAC covers the request's MAC (length-prefixed), the message and
 * the variables; each later one of a multi-message answer (an AXFR) covers
 * the previous MAC, the message and only the timers (time signed, fudge):
 * we sign every message (§5.3.1 allows it), so "the messages since the
 * last signed one" is one.
 *
 * Every read is bounds-checked: a request is untrusted, and a malformed one
 * is "not signed" (the caller refuses it) rather than an exception.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const TSIG_TYPE = 250;
const CLASS_ANY = 255;
export const TSIG_ERROR = { NOERROR: 0, BADSIG: 16, BADKEY: 17, BADTIME: 18 } as const;
const ALGORITHM = 'hmac-sha256';
/** RFC 8945 §10 recommends 300 seconds. */
const FUDGE = 300;

export interface TsigKey {
  /** Lower case, no trailing dot. */
  readonly name: string;
  readonly secret: Buffer;
}

/** A TSIG record found in a message. */
export interface TsigRecord {
  readonly keyName: string;
  readonly algorithm: string;
  readonly timeSigned: number;
  readonly fudge: number;
  readonly mac: Buffer;
  readonly originalId: number;
  readonly error: number;
  readonly other: Buffer;
  /** Offset of the record: the message without TSIG is [0, start). */
  readonly start: number;
}

/** The outcome of checking a request's TSIG. */
export type TsigCheck = { readonly ok: true; readonly key: TsigKey; readonly record: TsigRecord } | { readonly ok: false; readonly error: number; readonly record: TsigRecord };

/** Wire form of a dotted name (lower case, uncompressed). */
export function nameWire(name: string): Buffer {
  const parts: Buffer[] = [];
  for (const label of name === '' ? [] : name.toLowerCase().split('.')) {
    const l = Buffer.from(label, 'latin1');
    parts.push(Buffer.from([l.length]), l);
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

/** Reads a (possibly compressed) name at `off`; its dotted lower-case text and the offset after it, or undefined. */
export function readName(msg: Buffer, off: number): { name: string; end: number } | undefined {
  const labels: string[] = [];
  let end = -1;
  let p = off;
  for (let hops = 0; hops < 64; hops++) {
    if (p >= msg.length) return undefined;
    const len = msg[p] ?? 0;
    if (len === 0) {
      if (end < 0) end = p + 1;
      return { name: labels.join('.').toLowerCase(), end };
    }
    if ((len & 0xc0) === 0xc0) {
      if (p + 1 >= msg.length) return undefined;
      if (end < 0) end = p + 2;
      p = ((len & 0x3f) << 8) | (msg[p + 1] ?? 0);
      continue;
    }
    if (len > 63 || p + 1 + len > msg.length) return undefined;
    labels.push(msg.toString('latin1', p + 1, p + 1 + len));
    p += 1 + len;
  }
  return undefined;
}

/** Skips a resource record at `off`; the offset after it, its type and rdata offset, or undefined. */
function skipRecord(msg: Buffer, off: number): { end: number; type: number; rdata: number } | undefined {
  const n = readName(msg, off);
  if (n === undefined || n.end + 10 > msg.length) return undefined;
  const type = msg.readUInt16BE(n.end);
  const rdlen = msg.readUInt16BE(n.end + 8);
  const rdata = n.end + 10;
  if (rdata + rdlen > msg.length) return undefined;
  return { end: rdata + rdlen, type, rdata };
}

/** The TSIG record of a message (the last additional record), undefined when there is none or the message is malformed. */
export function findTsig(msg: Buffer): TsigRecord | undefined {
  if (msg.length < 12) return undefined;
  const qd = msg.readUInt16BE(4);
  const total = msg.readUInt16BE(6) + msg.readUInt16BE(8) + msg.readUInt16BE(10);
  if (msg.readUInt16BE(10) === 0) return undefined;
  let p = 12;
  for (let i = 0; i < qd; i++) {
    const n = readName(msg, p);
    if (n === undefined || n.end + 4 > msg.length) return undefined;
    p = n.end + 4;
  }
  let start = p;
  let last: { end: number; type: number; rdata: number } | undefined;
  for (let i = 0; i < total; i++) {
    start = p;
    last = skipRecord(msg, p);
    if (last === undefined) return undefined;
    p = last.end;
  }
  if (last?.type !== TSIG_TYPE) return undefined;
  const owner = readName(msg, start);
  const alg = readName(msg, last.rdata);
  if (owner === undefined || alg === undefined) return undefined;
  let r = alg.end;
  if (r + 10 > last.end) return undefined;
  const timeSigned = msg.readUInt16BE(r) * 2 ** 32 + msg.readUInt32BE(r + 2);
  const fudge = msg.readUInt16BE(r + 6);
  const macLen = msg.readUInt16BE(r + 8);
  r += 10;
  if (r + macLen + 6 > last.end) return undefined;
  const mac = Buffer.from(msg.subarray(r, r + macLen));
  r += macLen;
  const originalId = msg.readUInt16BE(r);
  const error = msg.readUInt16BE(r + 2);
  const otherLen = msg.readUInt16BE(r + 4);
  r += 6;
  if (r + otherLen !== last.end) return undefined;
  return { keyName: owner.name, algorithm: alg.name, timeSigned, fudge, mac, originalId, error, other: Buffer.from(msg.subarray(r, r + otherLen)), start };
}

function u48(n: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUInt16BE(Math.floor(n / 2 ** 32), 0);
  b.writeUInt32BE(n % 2 ** 32, 2);
  return b;
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n, 0);
  return b;
}

/** The message as it was before the TSIG record was added: ARCOUNT - 1, the original ID. */
function unsigned(msg: Buffer, rec: TsigRecord): Buffer {
  const m = Buffer.from(msg.subarray(0, rec.start));
  m.writeUInt16BE(rec.originalId, 0);
  m.writeUInt16BE(m.readUInt16BE(10) - 1, 10);
  return m;
}

function variables(keyName: string, timeSigned: number, fudge: number, error: number, other: Buffer): Buffer {
  return Buffer.concat([nameWire(keyName), u16(CLASS_ANY), Buffer.alloc(4), nameWire(ALGORITHM), u48(timeSigned), u16(fudge), u16(error), u16(other.length), other]);
}

/** Checks a request's TSIG against `keys` at `nowSeconds`; undefined when the request is not signed. */
export function verifyRequest(msg: Buffer, keys: ReadonlyMap<string, TsigKey>, nowSeconds: number): TsigCheck | undefined {
  const record = findTsig(msg);
  if (record === undefined) return undefined;
  const key = keys.get(record.keyName);
  if (key === undefined || record.algorithm !== ALGORITHM) return { ok: false, error: TSIG_ERROR.BADKEY, record };
  const mac = createHmac('sha256', key.secret)
    .update(unsigned(msg, record))
    .update(variables(record.keyName, record.timeSigned, record.fudge, record.error, record.other))
    .digest();
  // RFC 8945 §5.2.2.1: a truncated MAC shorter than half the hash (or 10 octets) is refused; we accept only the full one.
  if (record.mac.length !== mac.length || !timingSafeEqual(record.mac, mac)) return { ok: false, error: TSIG_ERROR.BADSIG, record };
  if (Math.abs(nowSeconds - record.timeSigned) > record.fudge) return { ok: false, error: TSIG_ERROR.BADTIME, record };
  return { ok: true, key, record };
}

/** The TSIG record's octets (owner, type, class, TTL, rdata). */
function tsigRecord(keyName: string, timeSigned: number, mac: Buffer, originalId: number, error: number, other: Buffer): Buffer {
  const rdata = Buffer.concat([nameWire(ALGORITHM), u48(timeSigned), u16(FUDGE), u16(mac.length), mac, u16(originalId), u16(error), u16(other.length), other]);
  const head = Buffer.alloc(10);
  head.writeUInt16BE(TSIG_TYPE, 0);
  head.writeUInt16BE(CLASS_ANY, 2);
  head.writeUInt32BE(0, 4);
  head.writeUInt16BE(rdata.length, 8);
  return Buffer.concat([nameWire(keyName), head, rdata]);
}

function withRecord(msg: Buffer, rec: Buffer): Buffer {
  const out = Buffer.concat([msg, rec]);
  out.writeUInt16BE(out.readUInt16BE(10) + 1, 10);
  return out;
}

/**
 * Signs the messages of one answer in order: the first with the request's
 * MAC, each later one with the previous message's MAC and the timers only.
 */
export class TsigSigner {
  readonly #key: TsigKey;
  #prior: Buffer;
  #first = true;
  readonly #now: number;

  constructor(key: TsigKey, requestMac: Buffer, nowSeconds: number) {
    this.#key = key;
    this.#prior = requestMac;
    this.#now = Math.floor(nowSeconds);
  }

  sign(msg: Buffer): Buffer {
    const h = createHmac('sha256', this.#key.secret).update(u16(this.#prior.length)).update(this.#prior).update(msg);
    if (this.#first) h.update(variables(this.#key.name, this.#now, FUDGE, 0, Buffer.alloc(0)));
    else h.update(Buffer.concat([u48(this.#now), u16(FUDGE)]));
    this.#first = false;
    const mac = h.digest();
    this.#prior = mac;
    return withRecord(msg, tsigRecord(this.#key.name, this.#now, mac, msg.readUInt16BE(0), 0, Buffer.alloc(0)));
  }
}

/**
 * An unsigned TSIG error answer (RFC 8945 §5.3.2: BADKEY and BADSIG carry
 * no MAC; BADTIME would carry one, but we answer it unsigned too and say so
 * in the error): `msg` is the answer without TSIG (rcode NOTAUTH set).
 */
export function tsigError(msg: Buffer, rec: TsigRecord, error: number, nowSeconds: number): Buffer {
  const other = error === TSIG_ERROR.BADTIME ? u48(Math.floor(nowSeconds)) : Buffer.alloc(0);
  return withRecord(msg, tsigRecord(rec.keyName, rec.timeSigned, Buffer.alloc(0), rec.originalId, error, other));
}

/** Signs a request (a NOTIFY, or a test's AXFR query) as a client: the MAC of its first message. */
export function signRequest(msg: Buffer, key: TsigKey, nowSeconds: number): Buffer {
  const t = Math.floor(nowSeconds);
  const mac = createHmac('sha256', key.secret).update(msg).update(variables(key.name, t, FUDGE, 0, Buffer.alloc(0))).digest();
  return withRecord(msg, tsigRecord(key.name, t, mac, msg.readUInt16BE(0), 0, Buffer.alloc(0)));
}
