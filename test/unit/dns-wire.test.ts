/**
 * The DNS wire layer on its own: parseQuery (the guard in front of
 * everything that reads query octets) and ResponseWriter (header bits,
 * question echo, OPT/ECS, truncation, error responses).
 *
 * Queries are built octet by octet here (not with dns2, which is the
 * library the parser exists to keep away from untrusted input); responses
 * are well formed by construction, so they are decoded with dns2's
 * Packet.parse where that reads more clearly than offsets.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import dns2 from 'dns2';
import { encodeBody, type Body } from '../../src/dns/wire/body.ts';
import { Parse, ParsedQuery, parseQuery, QTYPE, RCODE, type ParseStatus, type RejectReason } from '../../src/dns/wire/query.ts';
import { ResponseWriter } from '../../src/dns/wire/response.ts';
import type { RR } from '../../src/dns/zone/records.ts';

const { Packet } = dns2;

// --- a small query builder ---------------------------------------------------

const u16 = (v: number): number[] => [(v >> 8) & 0xff, v & 0xff];

/** Wire labels of a dotted name ("" = root); each label's octets as latin1. */
function wireName(name: string): number[] {
  const out: number[] = [];
  for (const label of name === '' ? [] : name.split('.')) {
    out.push(label.length, ...Buffer.from(label, 'latin1'));
  }
  out.push(0);
  return out;
}

interface OptSpec {
  /** Owner name octets (default: the root, [0]). */
  owner?: number[];
  size?: number;
  extRcode?: number;
  version?: number;
  do?: boolean;
  /** Raw option octets (code, length, data...). */
  options?: number[];
  /** Override RDLENGTH. */
  rdlen?: number;
}

function opt(o: OptSpec = {}): number[] {
  const options = o.options ?? [];
  return [
    ...(o.owner ?? [0]),
    ...u16(QTYPE.OPT),
    ...u16(o.size ?? 1232),
    o.extRcode ?? 0,
    o.version ?? 0,
    o.do === true ? 0x80 : 0,
    0,
    ...u16(o.rdlen ?? options.length),
    ...options,
  ];
}

/** One EDNS option: code, length, data. */
function option(code: number, data: number[]): number[] {
  return [...u16(code), ...u16(data.length), ...data];
}

/** ECS option (RFC 7871 §6): family, source, scope, address octets as given. */
function ecs(family: number, source: number, scope: number, address: number[]): number[] {
  return option(8, [...u16(family), source, scope, ...address]);
}

interface QuerySpec {
  id?: number;
  /** The whole flags word (default: RD set, as dig sends). */
  flags?: number;
  qd?: number;
  an?: number;
  ns?: number;
  ar?: number;
  /** Dotted name or raw name octets. */
  name?: string | number[];
  qtype?: number;
  qclass?: number;
  /** Additional records, raw (arcount defaults to their number). */
  additional?: number[][];
  /** Octets after everything (trailing garbage). */
  trailer?: number[];
  /** Cut the packet to this many octets. */
  truncate?: number;
}

function query(s: QuerySpec = {}): Buffer {
  const add = s.additional ?? [];
  const name = typeof s.name === 'object' ? s.name : wireName(s.name ?? 'www.example.test');
  const bytes = [
    ...u16(s.id ?? 0x1234),
    ...u16(s.flags ?? 0x0100),
    ...u16(s.qd ?? 1),
    ...u16(s.an ?? 0),
    ...u16(s.ns ?? 0),
    ...u16(s.ar ?? add.length),
    ...name,
    ...u16(s.qtype ?? QTYPE.A),
    ...u16(s.qclass ?? 1),
    ...add.flat(),
    ...(s.trailer ?? []),
  ];
  return Buffer.from(s.truncate === undefined ? bytes : bytes.slice(0, s.truncate));
}

function parse(buf: Uint8Array, len = buf.length): { status: ParseStatus; q: ParsedQuery } {
  const q = new ParsedQuery();
  const status = parseQuery(buf, len, q);
  return { status, q };
}

// --- parseQuery: accepted queries ----------------------------------------------

describe('parseQuery: accepted queries', () => {
  it('a plain query: id, lowercase name, qtype, qclass, questionEnd', () => {
    const buf = query({ id: 0xbeef, name: 'www.example.test', qtype: QTYPE.AAAA, qclass: 1 });
    const { status, q } = parse(buf);
    assert.equal(status, Parse.OK);
    assert.equal(q.reject, undefined);
    assert.equal(q.id, 0xbeef);
    assert.equal(q.flags, 0x0100);
    assert.equal(q.opcode, 0);
    assert.equal(q.name, 'www.example.test');
    assert.equal(q.oddName, false);
    assert.equal(q.qtype, QTYPE.AAAA);
    assert.equal(q.qclass, 1);
    // header 12 + name (1+3+1+7+1+4+1 = 18) + type/class 4
    assert.equal(q.questionEnd, 12 + 18 + 4);
    assert.equal(q.questionEnd, buf.length);
    assert.equal(q.edns, false);
    assert.equal(q.udpSize, 512);
    assert.equal(q.ecs, false);
  });

  it('0x20 mixed case is folded to lower case in the key (the octets stay as sent)', () => {
    const buf = query({ name: 'WwW.ExAmPlE.TeSt' });
    const { status, q } = parse(buf);
    assert.equal(status, Parse.OK);
    assert.equal(q.name, 'www.example.test');
    assert.equal(buf.subarray(12, q.questionEnd - 4).toString('latin1'), '\x03WwW\x07ExAmPlE\x04TeSt\x00');
  });

  it('the root name', () => {
    const { status, q } = parse(query({ name: '', qtype: QTYPE.NS }));
    assert.equal(status, Parse.OK);
    assert.equal(q.name, '');
    assert.equal(q.qtype, QTYPE.NS);
    assert.equal(q.questionEnd, 12 + 1 + 4);
  });

  it('trailing octets after the last record are ignored', () => {
    const { status, q } = parse(query({ trailer: [1, 2, 3] }));
    assert.equal(status, Parse.OK);
    assert.equal(q.name, 'www.example.test');
  });

  it('a label holding a "." octet is odd and cannot alias a two-label name', () => {
    const { status, q } = parse(query({ name: [3, 0x61, 0x2e, 0x62, 4, ...Buffer.from('test'), 0] }));
    assert.equal(status, Parse.OK);
    assert.equal(q.oddName, true);
    assert.equal(q.name, 'a\0b.test');
  });

  const ednsCases: { name: string; opt: OptSpec; udpSize: number; doBit: boolean; version: number }[] = [
    { name: 'EDNS size 4096', opt: { size: 4096 }, udpSize: 4096, doBit: false, version: 0 },
    { name: 'EDNS size below 512 is read as 512 (RFC 6891 §6.2.5)', opt: { size: 100 }, udpSize: 512, doBit: false, version: 0 },
    { name: 'EDNS size 0 is read as 512', opt: { size: 0 }, udpSize: 512, doBit: false, version: 0 },
    { name: 'DO bit', opt: { size: 1232, do: true }, udpSize: 1232, doBit: true, version: 0 },
    { name: 'EDNS version 1 (parsed; BADVERS is the answerer’s)', opt: { version: 1 }, udpSize: 1232, doBit: false, version: 1 },
    { name: 'EDNS version 255 with an extended RCODE', opt: { version: 255, extRcode: 7 }, udpSize: 1232, doBit: false, version: 255 },
    { name: 'an unknown option is skipped', opt: { options: option(65001, [1, 2, 3]) }, udpSize: 1232, doBit: false, version: 0 },
  ];
  for (const c of ednsCases) {
    it(c.name, () => {
      const { status, q } = parse(query({ additional: [opt(c.opt)] }));
      assert.equal(status, Parse.OK, q.reject);
      assert.equal(q.edns, true);
      assert.equal(q.udpSize, c.udpSize);
      assert.equal(q.doBit, c.doBit);
      assert.equal(q.ednsVersion, c.version);
      assert.equal(q.ecs, false);
    });
  }

  const ecsCases: { name: string; option: number[]; family: number; source: number; address: number[] }[] = [
    { name: 'ECS IPv4 /24', option: ecs(1, 24, 0, [198, 18, 11]), family: 1, source: 24, address: [198, 18, 11] },
    { name: 'ECS IPv4 /32', option: ecs(1, 32, 0, [198, 18, 11, 7]), family: 1, source: 32, address: [198, 18, 11, 7] },
    { name: 'ECS IPv4 /20 (bits inside the last octet)', option: ecs(1, 20, 0, [198, 18, 0x10]), family: 1, source: 20, address: [198, 18, 0x10] },
    { name: 'ECS IPv4 /0 (no address octets)', option: ecs(1, 0, 0, []), family: 1, source: 0, address: [] },
    { name: 'ECS family 0, source 0, no address (RFC 7871 §7.1.2: address withheld)', option: ecs(0, 0, 0, []), family: 0, source: 0, address: [] },
    { name: 'ECS IPv6 /56', option: ecs(2, 56, 0, [0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x12]), family: 2, source: 56, address: [0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x12] },
    { name: 'ECS IPv6 /128', option: ecs(2, 128, 0, Array.from({ length: 16 }, (_, i) => i + 1)), family: 2, source: 128, address: Array.from({ length: 16 }, (_, i) => i + 1) },
  ];
  for (const c of ecsCases) {
    it(c.name, () => {
      const { status, q } = parse(query({ additional: [opt({ options: c.option })] }));
      assert.equal(status, Parse.OK, q.reject);
      assert.equal(q.ecs, true);
      assert.equal(q.ecsFamily, c.family);
      assert.equal(q.ecsSource, c.source);
      assert.equal(q.ecsAddressLength, c.address.length);
      assert.deepEqual([...q.ecsAddress.subarray(0, c.address.length)], c.address);
      assert.ok(q.ecsAddress.subarray(c.address.length).every((b) => b === 0), 'octets past the prefix are zero');
    });
  }

  it('one other additional record (e.g. TSIG-like, owner compressed) besides the OPT is skipped', () => {
    const other = [0xc0, 0x0c, ...u16(250), ...u16(255), 0, 0, 0, 0, ...u16(2), 0xaa, 0xbb];
    const { status, q } = parse(query({ additional: [opt({ do: true }), other] }));
    assert.equal(status, Parse.OK, q.reject);
    assert.equal(q.edns, true);
    assert.equal(q.doBit, true);
  });

  it('a ParsedQuery reused for a plain query after an ECS one carries nothing over', () => {
    const q = new ParsedQuery();
    const a = query({ additional: [opt({ do: true, options: ecs(1, 24, 0, [198, 18, 11]) })] });
    assert.equal(parseQuery(a, a.length, q), Parse.OK);
    const b = query({ name: 'a.example.test' });
    assert.equal(parseQuery(b, b.length, q), Parse.OK);
    assert.equal(q.edns, false);
    assert.equal(q.ecs, false);
    assert.equal(q.doBit, false);
    assert.equal(q.name, 'a.example.test');
  });
});

// --- parseQuery: rejections ------------------------------------------------------

const label64 = 'a'.repeat(64);
/** 4 labels of 63 + their length octets = 256, plus the root: 257 octets. */
const longName = ['a', 'b', 'c', 'd'].map((c) => c.repeat(63)).join('.');
/** Exactly 255 octets on the wire: 3 × 63 + 61 labels (+4 length octets + root). */
const maxName = ['a', 'b', 'c'].map((c) => c.repeat(63)).join('.') + '.' + 'd'.repeat(61);

interface RejectCase {
  name: string;
  buf: Buffer;
  len?: number;
  status: ParseStatus;
  reason: RejectReason;
  /** The question parsed before the rejection (echoed in the FORMERR). */
  questionEnd?: boolean;
}

const plainLen = query().length;

const rejects: RejectCase[] = [
  { name: 'empty datagram', buf: Buffer.alloc(0), status: Parse.IGNORE, reason: 'short' },
  { name: '11 octets (shorter than a header)', buf: query().subarray(0, 11), status: Parse.IGNORE, reason: 'short' },
  { name: 'a whole query but len < 12', buf: query(), len: 11, status: Parse.IGNORE, reason: 'short' },
  { name: 'QR set (a response)', buf: query({ flags: 0x8100 }), status: Parse.IGNORE, reason: 'response' },
  { name: 'QR set with opcode 4', buf: query({ flags: 0x8000 | (4 << 11) }), status: Parse.IGNORE, reason: 'response' },
  { name: 'opcode 1 (IQUERY)', buf: query({ flags: 1 << 11 }), status: Parse.NOTIMP, reason: 'opcode' },
  { name: 'opcode 2 (STATUS)', buf: query({ flags: 2 << 11 }), status: Parse.NOTIMP, reason: 'opcode' },
  { name: 'opcode 4 (NOTIFY)', buf: query({ flags: (4 << 11) | 0x0400 }), status: Parse.NOTIMP, reason: 'opcode' },
  { name: 'opcode 5 (UPDATE)', buf: query({ flags: 5 << 11 }), status: Parse.NOTIMP, reason: 'opcode' },
  { name: 'opcode 15', buf: query({ flags: 15 << 11 }), status: Parse.NOTIMP, reason: 'opcode' },
  { name: 'opcode 4 in a bare header', buf: query({ flags: 4 << 11 }).subarray(0, 12), status: Parse.NOTIMP, reason: 'opcode' },
  { name: 'qdcount 0', buf: query({ qd: 0 }), status: Parse.FORMERR, reason: 'qdcount' },
  { name: 'qdcount 0, header only (dig +header-only)', buf: query({ qd: 0 }).subarray(0, 12), status: Parse.FORMERR, reason: 'qdcount' },
  { name: 'qdcount 2', buf: Buffer.concat([query({ qd: 2 }), Buffer.from([...wireName('a.test'), 0, 1, 0, 1])]), status: Parse.FORMERR, reason: 'qdcount' },
  { name: 'ancount 1', buf: query({ an: 1 }), status: Parse.FORMERR, reason: 'ancount' },
  { name: 'nscount 1', buf: query({ ns: 1 }), status: Parse.FORMERR, reason: 'nscount' },
  { name: 'arcount 3', buf: query({ additional: [opt(), opt(), opt()] }), status: Parse.FORMERR, reason: 'arcount' },
  // Count-inflated headers: refused from the header alone, nothing walked.
  { name: 'qd 1, ar 0xFFFF (inflated) with a valid question', buf: query({ ar: 0xffff }), status: Parse.FORMERR, reason: 'arcount' },
  { name: 'all counts 0xFFFF, 12 octets', buf: Buffer.from([0x12, 0x34, 0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), status: Parse.FORMERR, reason: 'qdcount' },
  { name: 'all counts 0xFFFF with a question after', buf: query({ qd: 0xffff, an: 0xffff, ns: 0xffff, ar: 0xffff }), status: Parse.FORMERR, reason: 'qdcount' },
  { name: 'qd 1, an 0xFFFF', buf: query({ an: 0xffff }), status: Parse.FORMERR, reason: 'ancount' },
  { name: 'ar 2 with only a question present', buf: query({ name: 'a.test', ar: 2 }), status: Parse.FORMERR, reason: 'counts' },
  { name: 'ar 1 and a bare header (12 octets)', buf: query({ ar: 1 }).subarray(0, 12), status: Parse.FORMERR, reason: 'counts' },
  { name: 'qd 1 and a bare header', buf: query().subarray(0, 12), status: Parse.FORMERR, reason: 'counts' },
  // The question name.
  { name: 'label of 64 octets', buf: query({ name: `${label64}.test` }), status: Parse.FORMERR, reason: 'name' },
  { name: 'compression pointer in the question', buf: query({ name: [0xc0, 0x0c] }), status: Parse.FORMERR, reason: 'name' },
  { name: 'pointer after a label in the question', buf: query({ name: [3, 0x77, 0x77, 0x77, 0xc0, 0x0c] }), status: Parse.FORMERR, reason: 'name' },
  { name: 'extended label type 0x40', buf: query({ name: [0x41, 0, 0, 0, 0] }), status: Parse.FORMERR, reason: 'name' },
  { name: 'label type 0x80', buf: query({ name: [0x80, 0, 0, 0, 0] }), status: Parse.FORMERR, reason: 'name' },
  { name: 'name over 255 octets', buf: query({ name: longName }), status: Parse.FORMERR, reason: 'name' },
  { name: 'name of 256 octets (one over)', buf: query({ name: `${maxName}x` }), status: Parse.FORMERR, reason: 'name' },
  { name: 'truncated name (label runs past the end)', buf: query({ truncate: 12 + 6 }), status: Parse.FORMERR, reason: 'name' },
  { name: 'truncated name (no root label)', buf: query({ truncate: 12 + 17 }), status: Parse.FORMERR, reason: 'name' },
  { name: 'truncated question (type/class cut)', buf: query({ truncate: plainLen - 1 }), status: Parse.FORMERR, reason: 'question' },
  { name: 'truncated question (only the type)', buf: query({ truncate: plainLen - 2 }), status: Parse.FORMERR, reason: 'question' },
  { name: 'qtype OPT in the question', buf: query({ qtype: QTYPE.OPT }), status: Parse.FORMERR, reason: 'question', questionEnd: true },
  // Additional records.
  { name: 'OPT not owned by the root', buf: query({ additional: [opt({ owner: wireName('x') })] }), status: Parse.FORMERR, reason: 'opt_owner', questionEnd: true },
  { name: 'OPT owned by a pointer to the question', buf: query({ additional: [opt({ owner: [0xc0, 0x0c] })] }), status: Parse.FORMERR, reason: 'opt_owner', questionEnd: true },
  { name: 'two OPT records', buf: query({ additional: [opt(), opt()] }), status: Parse.FORMERR, reason: 'opt_twice', questionEnd: true },
  { name: 'OPT RDLENGTH past the end', buf: query({ additional: [opt({ rdlen: 40 })] }), status: Parse.FORMERR, reason: 'record', questionEnd: true },
  { name: 'additional record cut short', buf: query({ additional: [opt()] }).subarray(0, plainLen + 8), status: Parse.FORMERR, reason: 'record', questionEnd: true },
  { name: 'additional record owner with a 64-octet label', buf: query({ additional: [[0x40, ...new Array<number>(20).fill(0)]] }), status: Parse.FORMERR, reason: 'record', questionEnd: true },
  { name: 'option length overrun', buf: query({ additional: [opt({ options: [...u16(8), ...u16(12), 0, 1, 24, 0] })] }), status: Parse.FORMERR, reason: 'opt_length', questionEnd: true },
  { name: 'option header cut (3 octets of RDATA)', buf: query({ additional: [opt({ options: [0, 8, 0] })] }), status: Parse.FORMERR, reason: 'opt_length', questionEnd: true },
  // ECS (RFC 7871 §6).
  { name: 'ECS family 3', buf: query({ additional: [opt({ options: ecs(3, 24, 0, [198, 18, 11]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS family 0 with a source prefix', buf: query({ additional: [opt({ options: ecs(0, 8, 0, [198]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS family 0 with an address octet', buf: query({ additional: [opt({ options: ecs(0, 0, 0, [198]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS IPv4 source 33', buf: query({ additional: [opt({ options: ecs(1, 33, 0, [198, 18, 11, 1, 0]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS IPv6 source 129', buf: query({ additional: [opt({ options: ecs(2, 129, 0, new Array<number>(17).fill(0)) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS scope not 0', buf: query({ additional: [opt({ options: ecs(1, 24, 24, [198, 18, 11]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS address longer than the prefix', buf: query({ additional: [opt({ options: ecs(1, 24, 0, [198, 18, 11, 0]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS address shorter than the prefix', buf: query({ additional: [opt({ options: ecs(1, 24, 0, [198, 18]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS IPv6 /56 with 8 octets', buf: query({ additional: [opt({ options: ecs(2, 56, 0, [0x20, 1, 0, 2, 0, 0, 0x12, 0]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS option under 4 octets', buf: query({ additional: [opt({ options: option(8, [0, 1, 24]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS bits set beyond a /20', buf: query({ additional: [opt({ options: ecs(1, 20, 0, [198, 18, 0x11]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS bits set beyond a /23', buf: query({ additional: [opt({ options: ecs(1, 23, 0, [198, 18, 11]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'ECS IPv6 bits set beyond a /57', buf: query({ additional: [opt({ options: ecs(2, 57, 0, [0x20, 1, 0, 2, 0, 0, 0x12, 0x01]) })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
  { name: 'two ECS options', buf: query({ additional: [opt({ options: [...ecs(1, 24, 0, [198, 18, 11]), ...ecs(1, 24, 0, [198, 18, 12])] })] }), status: Parse.FORMERR, reason: 'ecs', questionEnd: true },
];

describe('parseQuery: rejections (status and reason)', () => {
  for (const c of rejects) {
    it(`${c.name} -> ${Object.entries(Parse).find(([, v]) => v === c.status)?.[0] ?? '?'} ${c.reason}`, () => {
      const { status, q } = parse(c.buf, c.len ?? c.buf.length);
      assert.equal(q.reject, c.reason);
      assert.equal(status, c.status);
      if (c.status !== Parse.IGNORE || c.reason === 'response') {
        // The error response echoes the ID (and opcode).
        assert.equal(q.id, c.buf.length >= 2 ? c.buf.readUInt16BE(0) : 0);
      }
      if (c.questionEnd === true) assert.ok(q.questionEnd > 12, 'the question parsed and is echoed');
      else assert.equal(q.questionEnd, 0, 'no question echoed');
    });
  }

  it('the name of exactly 255 octets is accepted', () => {
    const { status, q } = parse(query({ name: maxName }));
    assert.equal(status, Parse.OK, q.reject);
    assert.equal(q.name, maxName);
  });

  it('never reads past len: a valid query cut by len (not by the buffer) is refused', () => {
    const buf = query({ additional: [opt({ options: ecs(1, 24, 0, [198, 18, 11]) })] });
    for (let len = 0; len < buf.length; len++) {
      const { status } = parse(buf, len);
      assert.notEqual(status, Parse.OK, `len ${len}`);
    }
    assert.equal(parse(buf, buf.length).status, Parse.OK);
  });
});

// --- ResponseWriter ------------------------------------------------------------

const A = (name: string, address: string, ttl = 300): RR => ({ name, type: 1, class: 1, ttl, address });

function body(name: string, answers: RR[], opts: { rcode?: number; aa?: boolean; qtype?: number } = {}): Body {
  return encodeBody(name, false, opts.qtype ?? QTYPE.A, { answer: answers, authority: [], additional: [] }, opts.rcode ?? RCODE.NOERROR, opts.aa ?? true);
}

function parsed(buf: Buffer): ParsedQuery {
  const q = new ParsedQuery();
  const status = parseQuery(buf, buf.length, q);
  assert.ok(status === Parse.OK || status === Parse.FORMERR || status === Parse.NOTIMP, `parse status ${status} ${q.reject ?? ''}`);
  return q;
}

function out(w: ResponseWriter, n: number): Buffer {
  return Buffer.from(w.buf.subarray(0, n));
}

interface Opt {
  class: number;
  ttl: number;
  extendedRcode?: number;
  version?: number;
  doFlag?: boolean;
  rdata?: { ednsCode: number; family?: number; sourcePrefixLength?: number; scopePrefixLength?: number; ip?: string }[];
}

function optOf(p: InstanceType<typeof Packet>): Opt | undefined {
  return p.additionals.find((r) => r.type === QTYPE.OPT);
}

describe('ResponseWriter', () => {
  it('header bits: QR and AA set, RD and CD copied, RA/Z/AD clear, opcode 0, rcode', () => {
    const w = new ResponseWriter();
    for (const flags of [0x0100, 0x0000, 0x0110, 0x0010, 0x0120 /* AD in a query */, 0x0140 /* Z */]) {
      const buf = query({ flags, id: 0x4242 });
      const q = parsed(buf);
      const n = w.answer(buf, q, body('www.example.test', [A('www.example.test', '198.19.1.1')]), 512, 1232, 0);
      const r = out(w, n);
      assert.equal(r.readUInt16BE(0), 0x4242);
      const b2 = r[2]!;
      const b3 = r[3]!;
      assert.equal(b2 & 0x80, 0x80, 'QR');
      assert.equal((b2 >> 3) & 0xf, 0, 'opcode');
      assert.equal(b2 & 0x04, 0x04, 'AA');
      assert.equal(b2 & 0x02, 0, 'TC');
      assert.equal(b2 & 0x01, (flags >> 8) & 1, 'RD copied');
      assert.equal(b3 & 0x80, 0, 'RA clear');
      assert.equal(b3 & 0x40, 0, 'Z clear');
      assert.equal(b3 & 0x20, 0, 'AD clear');
      assert.equal(b3 & 0x10, flags & 0x10, 'CD copied');
      assert.equal(b3 & 0x0f, RCODE.NOERROR);
      const p = Packet.parse(r);
      assert.equal(p.errors.length, 0);
      assert.equal(p.header.qdcount, 1);
      assert.equal(p.header.ancount, 1);
      assert.equal(p.answers[0]?.address, '198.19.1.1');
    }
  });

  it('AA clear for a referral body; NXDOMAIN rcode', () => {
    const w = new ResponseWriter();
    const buf = query({ name: 'x.sub.example.test' });
    const q = parsed(buf);
    const ref = encodeBody(q.name, false, QTYPE.A, { answer: [], authority: [{ name: 'sub.example.test', type: 2, class: 1, ttl: 60, ns: 'ns1.sub.example.test' }], additional: [A('ns1.sub.example.test', '192.0.2.153')] }, RCODE.NOERROR, false);
    const r = out(w, w.answer(buf, q, ref, 512, 1232, 0));
    assert.equal(r[2]! & 0x04, 0);
    const p = Packet.parse(r);
    assert.equal(p.header.nscount, 1);
    assert.equal(p.header.arcount, 1);
    assert.equal(p.authorities[0]?.ns, 'ns1.sub.example.test');
    assert.equal(p.additionals[0]?.address, '192.0.2.153');
    const nx = encodeBody(q.name, false, QTYPE.A, { answer: [], authority: [], additional: [] }, RCODE.NXDOMAIN, true);
    assert.equal(out(w, w.answer(buf, q, nx, 512, 1232, 0))[3]! & 0x0f, RCODE.NXDOMAIN);
  });

  it('the question is echoed verbatim, case included, and records point into it', () => {
    const w = new ResponseWriter();
    const buf = query({ name: 'wWw.EXample.tEST', qtype: QTYPE.A, qclass: 255 });
    const q = parsed(buf);
    const r = out(w, w.answer(buf, q, body(q.name, [A(q.name, '198.19.1.1')]), 512, 1232, 0));
    assert.deepEqual(r.subarray(12, q.questionEnd), buf.subarray(12, q.questionEnd));
    const p = Packet.parse(r);
    assert.equal(p.questions[0]?.name, 'wWw.EXample.tEST');
    assert.equal(p.questions[0].class, 255);
    // The answer's owner is a pointer to the question: it reads with the query's case.
    assert.equal(p.answers[0]?.name, 'wWw.EXample.tEST');
    assert.deepEqual([...r.subarray(q.questionEnd, q.questionEnd + 2)], [0xc0, 0x0c]);
  });

  it('no OPT in the response when the query had none', () => {
    const w = new ResponseWriter();
    const buf = query();
    const q = parsed(buf);
    const r = out(w, w.answer(buf, q, body(q.name, [A(q.name, '198.19.1.1')]), 512, 1232, 0));
    const p = Packet.parse(r);
    assert.equal(p.header.arcount, 0);
    assert.equal(optOf(p), undefined);
  });

  it('OPT echoed with our payload size, version 0, DO copied, no options without ECS', () => {
    const w = new ResponseWriter();
    for (const doBit of [false, true]) {
      const buf = query({ additional: [opt({ size: 4096, do: doBit })] });
      const q = parsed(buf);
      const r = out(w, w.answer(buf, q, body(q.name, [A(q.name, '198.19.1.1')]), 1232, 1232, 0));
      const p = Packet.parse(r);
      assert.equal(p.errors.length, 0);
      assert.equal(p.header.arcount, 1);
      const o = optOf(p);
      assert.ok(o);
      assert.equal(o.class, 1232, 'our UDP payload size, not the client’s');
      assert.equal(o.version, 0);
      assert.equal(o.extendedRcode, 0);
      assert.equal(o.doFlag, doBit);
      assert.deepEqual(o.rdata, []);
      // The OPT is the last record, 11 octets.
      assert.deepEqual([...r.subarray(r.length - 11)], [0, 0, 41, 0x04, 0xd0, 0, 0, doBit ? 0x80 : 0, 0, 0, 0]);
    }
  });

  const ecsEcho: { name: string; option: number[]; scope: number; wantScope: number; family: number; source: number; ip: string }[] = [
    { name: 'IPv4 /24, scope 0 (unsteered)', option: ecs(1, 24, 0, [198, 18, 11]), scope: 0, wantScope: 0, family: 1, source: 24, ip: '198.18.11.0' },
    { name: 'IPv4 /24, scope 24 (steered)', option: ecs(1, 24, 0, [198, 18, 11]), scope: 24, wantScope: 24, family: 1, source: 24, ip: '198.18.11.0' },
    { name: 'IPv4 /20, scope 20', option: ecs(1, 20, 0, [198, 18, 0x10]), scope: 20, wantScope: 20, family: 1, source: 20, ip: '198.18.16.0' },
    { name: 'IPv4 scope capped at 32', option: ecs(1, 32, 0, [198, 18, 11, 7]), scope: 99, wantScope: 32, family: 1, source: 32, ip: '198.18.11.7' },
    { name: 'family 0 /0 (address withheld): scope 0 whatever the answer depended on', option: ecs(0, 0, 0, []), scope: 24, wantScope: 0, family: 0, source: 0, ip: '' },
    { name: 'IPv6 /56, scope 56', option: ecs(2, 56, 0, [0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x12]), scope: 56, wantScope: 56, family: 2, source: 56, ip: '2001:2:0:1200:0:0:0:0' },
  ];
  for (const c of ecsEcho) {
    it(`ECS echoed: ${c.name}`, () => {
      const w = new ResponseWriter();
      const buf = query({ additional: [opt({ options: c.option })] });
      const q = parsed(buf);
      const r = out(w, w.answer(buf, q, body(q.name, [A(q.name, '198.19.1.1')]), 1232, 1232, c.scope));
      // Read the OPT from the octets: dns2 3.1.1 cannot decode an IPv6 ECS
      // address of an odd number of octets (a /56 has 7) at the end of a message.
      const n = c.option.length - 8;
      const o = r.subarray(r.length - (11 + 8 + n));
      assert.equal(r.readUInt16BE(10), 1, 'arcount: the OPT');
      assert.deepEqual([...o.subarray(0, 3)], [0, 0, 41], 'root-owned OPT');
      assert.equal(o.readUInt16BE(3), 1232);
      assert.equal(o.readUInt16BE(9), 8 + n, 'RDLENGTH');
      assert.equal(o.readUInt16BE(11), 8, 'option code ECS');
      assert.equal(o.readUInt16BE(13), 4 + n, 'option length');
      assert.equal(o.readUInt16BE(15), c.family);
      assert.equal(o[17], c.source);
      assert.equal(o[18], c.wantScope);
      // Address octets exactly as received (RFC 7871 §7.2.1).
      assert.deepEqual([...o.subarray(19)], c.option.slice(8));
      if (c.family === 1 || (c.family === 2 && n % 2 === 0)) {
        const e = optOf(Packet.parse(r))?.rdata?.[0];
        assert.equal(e?.ip, c.ip);
        assert.equal(e.scopePrefixLength, c.wantScope);
      }
    });
  }

  it('ECS scope is 0 on an error response (REFUSED), whatever scope was asked', () => {
    const w = new ResponseWriter();
    const buf = query({ additional: [opt({ options: ecs(1, 24, 0, [198, 18, 11]) })] });
    const q = parsed(buf);
    const p = Packet.parse(out(w, w.error(buf, q, RCODE.REFUSED, 1232)));
    assert.equal(p.header.rcode, RCODE.REFUSED);
    const e = optOf(p)?.rdata?.[0];
    assert.equal(e?.scopePrefixLength, 0);
    assert.equal(e.sourcePrefixLength, 24);
  });

  it('TC over the limit: no records, counts 0 except the OPT, question kept', () => {
    const w = new ResponseWriter();
    const big: RR[] = Array.from({ length: 8 }, (_, i) => ({ name: 'big.example.test', type: 16, class: 1, ttl: 300, data: [String(i).repeat(200)] }));
    for (const withOpt of [false, true]) {
      const buf = query({ name: 'big.example.test', qtype: QTYPE.TXT, additional: withOpt ? [opt({ size: 1232 })] : [] });
      const q = parsed(buf);
      const b = encodeBody(q.name, false, QTYPE.TXT, { answer: big, authority: [], additional: [] }, RCODE.NOERROR, true);
      const before = w.truncated;
      const limit = withOpt ? 1232 : 512;
      const r = out(w, w.answer(buf, q, b, limit, 1232, 0));
      assert.equal(w.truncated, before + 1);
      assert.ok(r.length <= limit);
      assert.equal(r[2]! & 0x02, 0x02, 'TC');
      assert.equal(r[2]! & 0x04, 0x04, 'AA kept');
      const p = Packet.parse(r);
      assert.equal(p.header.qdcount, 1);
      assert.equal(p.header.ancount, 0);
      assert.equal(p.header.nscount, 0);
      assert.equal(p.header.arcount, withOpt ? 1 : 0);
      assert.equal(r.length, q.questionEnd + (withOpt ? 11 : 0));
      // Over TCP (limit 65535) the same body is sent whole.
      const full = Packet.parse(out(w, w.answer(buf, q, b, 65535, 1232, 0)));
      assert.equal(full.header.tc, 0);
      assert.equal(full.answers.length, 8);
    }
  });

  it('exactly at the limit is not truncated; one octet over is', () => {
    const w = new ResponseWriter();
    const buf = query({ additional: [opt()] });
    const q = parsed(buf);
    const b = body(q.name, [A(q.name, '198.19.1.1')]);
    const size = q.questionEnd + b.bytes.length + 11;
    assert.equal(out(w, w.answer(buf, q, b, size, 1232, 0))[2]! & 0x02, 0);
    assert.equal(out(w, w.answer(buf, q, b, size - 1, 1232, 0))[2]! & 0x02, 0x02);
  });

  it('ECS counts toward the limit', () => {
    const w = new ResponseWriter();
    const buf = query({ additional: [opt({ options: ecs(1, 24, 0, [198, 18, 11]) })] });
    const q = parsed(buf);
    const b = body(q.name, [A(q.name, '198.19.1.1')]);
    const size = q.questionEnd + b.bytes.length + 11 + 4 + 4 + 3;
    const r = out(w, w.answer(buf, q, b, size, 1232, 0));
    assert.equal(r.length, size);
    assert.equal(r[2]! & 0x02, 0);
    assert.equal(out(w, w.answer(buf, q, b, size - 1, 1232, 0))[2]! & 0x02, 0x02);
  });

  it('FORMERR without a question (qdcount 0): header only, counts 0', () => {
    const w = new ResponseWriter();
    const buf = query({ qd: 0, id: 0x0a0b, flags: 0x0110 }).subarray(0, 12);
    const q = parsed(buf);
    const r = out(w, w.error(buf, q, RCODE.FORMERR, 1232));
    assert.equal(r.length, 12);
    assert.equal(r.readUInt16BE(0), 0x0a0b);
    assert.equal(r[2], 0x80 | 0x01, 'QR, RD copied, AA clear');
    assert.equal(r[3], 0x10 | RCODE.FORMERR, 'CD copied, FORMERR');
    assert.deepEqual([...r.subarray(4, 12)], [0, 0, 0, 0, 0, 0, 0, 0]);
  });

  it('FORMERR with a question (bad ECS): question echoed, OPT without the rejected ECS', () => {
    const w = new ResponseWriter();
    const buf = query({ name: 'MiXed.example.test', additional: [opt({ do: true, options: ecs(1, 24, 5, [198, 18, 11]) })] });
    const q = parsed(buf);
    assert.equal(q.reject, 'ecs');
    const r = out(w, w.error(buf, q, RCODE.FORMERR, 1232));
    const p = Packet.parse(r);
    assert.equal(p.header.rcode, RCODE.FORMERR);
    assert.equal(p.header.qr, 1);
    assert.equal(p.header.aa, 0);
    assert.equal(p.header.qdcount, 1);
    assert.equal(p.header.ancount, 0);
    assert.equal(p.questions[0]?.name, 'MiXed.example.test');
    const o = optOf(p);
    assert.equal(o?.class, 1232);
    assert.equal(o.doFlag, true);
    assert.deepEqual(o.rdata, []);
  });

  it('NOTIMP echoes the opcode', () => {
    const w = new ResponseWriter();
    for (const opcode of [4, 5]) {
      const buf = query({ flags: (opcode << 11) | 0x0100 });
      const q = parsed(buf);
      assert.equal(q.reject, 'opcode');
      const r = out(w, w.error(buf, q, RCODE.NOTIMP, 1232));
      assert.equal(r.length, 12);
      assert.equal((r[2]! >> 3) & 0xf, opcode);
      assert.equal(r[2]! & 0x80, 0x80);
      assert.equal(r[3]! & 0x0f, RCODE.NOTIMP);
    }
  });

  it('BADVERS: extended RCODE 1 in the OPT, 0 in the header, version 0', () => {
    const w = new ResponseWriter();
    const buf = query({ additional: [opt({ version: 1 })] });
    const q = parsed(buf);
    const r = out(w, w.error(buf, q, RCODE.BADVERS, 1232));
    assert.equal(r[3]! & 0x0f, 0);
    const p = Packet.parse(r);
    assert.equal(p.header.rcode, RCODE.BADVERS, 'dns2 merges the 12-bit RCODE');
    const o = optOf(p);
    assert.equal(o?.extendedRcode, 1);
    assert.equal(o.version, 0);
  });
});
