/**
 * The record types beyond RFC 1035's (PTR, CAA, NAPTR, SSHFP, TLSA, DS,
 * RFC 3597 generic), $INCLUDE, the listing of every zone error, DS at a
 * delegation, the CH identity answers and `sluice check-zone`. The wire
 * octets are checked here against the RFCs' RDATA layouts; the netns test
 * (test/netns/dns-zone-types.test.ts) checks dig's reading of them against
 * NSD's answers.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Identity } from '../../src/dns/identity.ts';
import { encodeBody } from '../../src/dns/wire/body.ts';
import { MAX_ERRORS, MAX_INCLUDE_DEPTH, ZoneError, checkZone, checkZoneFile, parseZone } from '../../src/dns/zone/parse.ts';
import { GENERIC_TYPE, RRTYPE, wireType, type RR } from '../../src/dns/zone/records.ts';
import { Zone } from '../../src/dns/zone/zone.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
/** A minimal valid zone t.test (4 lines); tests append their lines from line 5. */
const HEAD = '$ORIGIN t.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n';

/**
 * The one answer record of `name`/`qtype` as encodeBody writes it behind
 * the question: checks the fixed part (owner pointer to the question,
 * type, class IN, TTL 300, RDLENGTH) and returns the RDATA in hex.
 */
function rdataHex(zoneText: string, name: string, qtype: number): string {
  const zone = Zone.fromText(HEAD + zoneText);
  const a = zone.lookup(name, qtype);
  assert.equal(a.answer.length, 1, `one record at ${name}`);
  const b = encodeBody(name, false, qtype, a, 0, true).bytes;
  assert.equal(b.readUInt16BE(0), 0xc00c, 'the owner is a pointer to the question');
  assert.equal(b.readUInt16BE(2), qtype, 'type');
  assert.equal(b.readUInt16BE(4), 1, 'class IN');
  assert.equal(b.readUInt32BE(6), 300, 'TTL');
  const rdlen = b.readUInt16BE(10);
  assert.equal(b.length, 12 + rdlen, 'RDLENGTH covers the rest of the body');
  return b.subarray(12).toString('hex');
}

const hex = (s: string): string => Buffer.from(s, 'latin1').toString('hex');
const name = (n: string): string => (n === '' ? '00' : `${n.split('.').map((l) => l.length.toString(16).padStart(2, '0') + hex(l)).join('')}00`);

describe('zone record types: presentation form -> wire RDATA', () => {
  const rows: readonly (readonly [string, string, string, number, string])[] = [
    // [what, zone line, owner, type, RDATA hex]
    ['PTR (compressed against the question, RFC 1035 type)', 'p PTR host.t.test.', 'p.t.test', RRTYPE.PTR, `04${hex('host')}c00e`],
    ['PTR outside the zone', 'p PTR www.example.', 'p.t.test', RRTYPE.PTR, name('www.example')],
    ['CAA issue (RFC 8659 §4.1)', 'c CAA 0 issue "letsencrypt.org"', 'c.t.test', RRTYPE.CAA, `0005${hex('issue')}${hex('letsencrypt.org')}`],
    ['CAA critical iodef', 'c CAA 128 iodef "mailto:sec@t.test"', 'c.t.test', RRTYPE.CAA, `8005${hex('iodef')}${hex('mailto:sec@t.test')}`],
    ['CAA empty value', 'c CAA 0 issue ";"', 'c.t.test', RRTYPE.CAA, `0005${hex('issue')}${hex(';')}`],
    ['TLSA (RFC 6698 §2.1)', '_443._tcp TLSA 3 1 1 0C72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6', '_443._tcp.t.test', RRTYPE.TLSA, '0301010c72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6'],
    ['TLSA hex split by spaces in parentheses', 't TLSA 2 0 1 ( 0c72ac70 b745ac19\n 998811b1 )', 't.t.test', RRTYPE.TLSA, '0200010c72ac70b745ac19998811b1'],
    ['SSHFP (RFC 4255 §3.1)', 's SSHFP 1 1 dd465c09cfa51fb45020cc83316fff21b9ec74ac', 's.t.test', RRTYPE.SSHFP, '0101dd465c09cfa51fb45020cc83316fff21b9ec74ac'],
    ['DS (RFC 4034 §5.1)', 'd DS 60485 5 1 2bb183af5f22588179a53b0a98631fad1a292118', 'd.t.test', RRTYPE.DS, 'ec4505012bb183af5f22588179a53b0a98631fad1a292118'],
    ['DS algorithm mnemonic, SHA-256 digest', 'd DS 1 ECDSAP256SHA256 2 ' + 'ab'.repeat(32), 'd.t.test', RRTYPE.DS, `00010d02${'ab'.repeat(32)}`],
    ['NAPTR (RFC 3403 §4.1, replacement uncompressed)', 'n NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.t.test.', 'n.t.test', RRTYPE.NAPTR, `0064000a01${hex('S')}07${hex('SIP+D2U')}00${name('_sip._udp.t.test')}`],
    ['NAPTR with a regexp and the root replacement', 'n NAPTR 100 50 "u" "E2U+sip" "!^.*$!sip:i@t.test!" .', 'n.t.test', RRTYPE.NAPTR, `0064003201${hex('u')}07${hex('E2U+sip')}13${hex('!^.*$!sip:i@t.test!')}00`],
    ['NAPTR escapes in a character-string', 'n NAPTR 1 1 "\\255" "" "" .', 'n.t.test', RRTYPE.NAPTR, '0001000101ff000000'],
    ['generic unknown type (RFC 3597 §5)', 'u TYPE65534 \\# 4 0a000001', 'u.t.test', 65534, '0a000001'],
    ['generic unknown type, CLASS1', 'u CLASS1 TYPE65534 \\# 4 0A 00 00 01', 'u.t.test', 65534, '0a000001'],
    ['generic empty RDATA', 'u TYPE65280 \\# 0', 'u.t.test', 65280, ''],
    ['generic RDATA of a type dns2 decodes but cannot encode (HINFO)', 'u TYPE13 \\# 4 01610162', 'u.t.test', 13, '01610162'],
    ['TYPE1 with generic RDATA is an A', 'g TYPE1 \\# 4 c6120050', 'g.t.test', RRTYPE.A, 'c6120050'],
    ['A with generic RDATA', 'g A \\# 4 c6120050', 'g.t.test', RRTYPE.A, 'c6120050'],
    ['TYPE1 with the usual RDATA', 'g TYPE1 198.18.0.80', 'g.t.test', RRTYPE.A, 'c6120050'],
    ['TXT with generic RDATA', 'x TXT \\# 6 0568656c6c6f', 'x.t.test', RRTYPE.TXT, '0568656c6c6f'],
    ['CAA with generic RDATA', `c TYPE257 \\# 6 0003${hex('tag')}${hex('v')}`, 'c.t.test', RRTYPE.CAA, `0003${hex('tag')}${hex('v')}`],
    ['AAAA with generic RDATA', 'v AAAA \\# 16 20010002000000000000000000000001', 'v.t.test', RRTYPE.AAAA, '20010002000000000000000000000001'],
    ['MX with generic RDATA (name uncompressed in, compressed out)', `m MX \\# 13 000a${name('mx.t.test')}`, 'm.t.test', RRTYPE.MX, `000a02${hex('mx')}c00e`],
  ];
  for (const [what, line, owner, type, want] of rows) {
    it(what, () => {
      assert.equal(rdataHex(line, owner, type), want);
    });
  }

  it('a type Sluice has no form for is a GenericRecord with its wire type', () => {
    const rr = parseZone(`${HEAD}u TYPE65534 \\# 4 0a000001`).records[2] as RR;
    assert.equal(rr.type, GENERIC_TYPE);
    assert.equal(wireType(rr), 65534);
  });

  it('generic RDATA of a known type is held in that type\'s own form', () => {
    const rrs = parseZone(`${HEAD}m MX \\# 13 000a${name('mx.t.test')}\nn NS \\# ${name('ns.x.test').length / 2} ${name('ns.x.test')}`).records.slice(2);
    assert.deepEqual(rrs, [
      { name: 'm.t.test', class: 1, ttl: 300, type: RRTYPE.MX, priority: 10, exchange: 'mx.t.test' },
      { name: 'n.t.test', class: 1, ttl: 300, type: RRTYPE.NS, ns: 'ns.x.test' },
    ]);
  });
});

describe('zone record types: refusals', () => {
  const rows: readonly (readonly [string, string, string, RegExp])[] = [
    ['OPT is not zone data', 'x TYPE41 \\# 0', 'ERR_SLUICE_ZONE_UNSUPPORTED', /OPT/],
    ['type 0', 'x TYPE0 \\# 0', 'ERR_SLUICE_ZONE_UNSUPPORTED', /reserved/],
    ['meta type', 'x TYPE255 \\# 0', 'ERR_SLUICE_ZONE_UNSUPPORTED', /meta/],
    ['SPF', 'x TYPE99 \\# 2 0161', 'ERR_SLUICE_ZONE_UNSUPPORTED', /SPF.*TXT/],
    ['DNSKEY', 'x TYPE48 \\# 4 01000308', 'ERR_SLUICE_ZONE_UNSUPPORTED', /DNSKEY/],
    ['type over 65535', 'x TYPE65536 \\# 0', 'ERR_SLUICE_ZONE_RANGE', /over 65535/],
    ['unknown type in non-generic form', 'x TYPE65534 1 2 3', 'ERR_SLUICE_ZONE_SYNTAX', /not in generic form/],
    ['generic length mismatch', 'x TYPE65534 \\# 4 0a00', 'ERR_SLUICE_ZONE_SYNTAX', /2 octets, but the length says 4/],
    ['generic bad hex', 'x TYPE65534 \\# 2 0g00', 'ERR_SLUICE_ZONE_SYNTAX', /not hex/],
    ['generic odd hex', 'x TYPE65534 \\# 2 0a0', 'ERR_SLUICE_ZONE_SYNTAX', /not hex/],
    ['generic length not a number', 'x TYPE65534 \\# x 00', 'ERR_SLUICE_ZONE_SYNTAX', /not a number/],
    ['generic A of 3 octets', 'x A \\# 3 010203', 'ERR_SLUICE_ZONE_SYNTAX', /generic A RDATA: the RDATA ends early/],
    ['generic A of 5 octets', 'x A \\# 5 0102030405', 'ERR_SLUICE_ZONE_SYNTAX', /1 octet\(s\) left over/],
    ['generic NS with a compressed name', 'x NS \\# 2 c00c', 'ERR_SLUICE_ZONE_SYNTAX', /compressed name/],
    ['generic TXT not UTF-8', 'x TXT \\# 2 01ff', 'ERR_SLUICE_ZONE_SYNTAX', /not UTF-8/],
    ['class CLASS3', 'x CLASS3 A 192.0.2.1', 'ERR_SLUICE_ZONE_UNSUPPORTED', /class CLASS3/],
    ['DS digest of the wrong length', 'x DS 1 8 2 abcd', 'ERR_SLUICE_ZONE_SYNTAX', /32 octets, not 2/],
    ['DS unknown algorithm mnemonic', 'x DS 1 NOPE 2 abcd', 'ERR_SLUICE_ZONE_SYNTAX', /not a number or a known mnemonic/],
    ['TLSA odd hex', 'x TLSA 3 1 1 abc', 'ERR_SLUICE_ZONE_SYNTAX', /not hex octets/],
    ['TLSA without data', 'x TLSA 3 1 1', 'ERR_SLUICE_ZONE_SYNTAX', /no certificate association data/],
    ['TLSA usage over 255', 'x TLSA 256 1 1 ab', 'ERR_SLUICE_ZONE_RANGE', /out of range/],
    ['CAA tag with a dash', 'x CAA 0 is-sue "v"', 'ERR_SLUICE_ZONE_SYNTAX', /letters and digits/],
    ['CAA without a value', 'x CAA 0 issue', 'ERR_SLUICE_ZONE_SYNTAX', /no value/],
    ['CAA value not UTF-8', 'x CAA 0 issue "\\255"', 'ERR_SLUICE_ZONE_UNSUPPORTED', /not UTF-8/],
    ['NAPTR string over 255 octets', `x NAPTR 1 1 "${'a'.repeat(256)}" "" "" .`, 'ERR_SLUICE_ZONE_RANGE', /256 octets/],
    ['NAPTR without a replacement', 'x NAPTR 1 1 "" "" ""', 'ERR_SLUICE_ZONE_SYNTAX', /no replacement/],
    ['SSHFP without a fingerprint', 'x SSHFP 1 1', 'ERR_SLUICE_ZONE_SYNTAX', /no fingerprint/],
  ];
  for (const [what, line, code, message] of rows) {
    it(`refuses ${what} (${code})`, () => {
      const r = checkZone(HEAD + line, { file: 'test.zone' });
      assert.equal(r.zone, undefined);
      assert.equal(r.errors.length, 1, r.errors.map((e) => e.message).join('\n'));
      const e = r.errors[0] as ZoneError;
      assert.equal(e.code, code, e.message);
      assert.equal(e.line, 5, e.message);
      assert.match(e.message, message);
      assert.ok(e.message.startsWith('test.zone:5: '), e.message);
    });
  }
});

describe('zone errors: every one is listed', () => {
  it('one error per broken line, in order, each with its line; good lines around them load', () => {
    const text = `${HEAD}a A 192.0.2.300
ok1 A 192.0.2.1
b MX ten mail
c TXT "unterminated
ok2 A 192.0.2.2
d ( TLSA 3 1 1
    ab ( cd )
ok3 A 192.0.2.3
e BOGUS 1
f CH A 192.0.2.1
g A 192.0.2.1
g CNAME x
h TYPE65534 \\# 9 00`;
    const r = checkZone(text, { file: 'b.zone' });
    assert.equal(r.zone, undefined);
    assert.deepEqual(
      r.errors.map((e) => [e.line, e.code]),
      [
        [5, 'ERR_SLUICE_ZONE_SYNTAX'],
        [7, 'ERR_SLUICE_ZONE_SYNTAX'],
        [8, 'ERR_SLUICE_ZONE_SYNTAX'],
        // The nested "(" is reported on its line; the rest of that group (up to its ")") is skipped, not read as records.
        [11, 'ERR_SLUICE_ZONE_SYNTAX'],
        [13, 'ERR_SLUICE_ZONE_UNSUPPORTED'],
        [14, 'ERR_SLUICE_ZONE_UNSUPPORTED'],
        [16, 'ERR_SLUICE_ZONE_DATA'],
        [17, 'ERR_SLUICE_ZONE_SYNTAX'],
      ],
      r.errors.map((e) => e.message).join('\n'),
    );
    for (const e of r.errors) assert.match(e.message, /^b\.zone:\d+: .+; \S/);
  });

  it('the zone rules are checked after errors too (no SOA, no NS)', () => {
    const r = checkZone('$ORIGIN t.test.\n$TTL 1\na A 192.0.2.999\n', { file: 'x.zone' });
    assert.deepEqual(
      r.errors.map((e) => e.line),
      [3, 1],
    );
    assert.match(r.errors[1]?.message ?? '', /no SOA/);
  });

  it(`stops listing at ${MAX_ERRORS} errors, saying so`, () => {
    const r = checkZone(HEAD + 'a A x\n'.repeat(MAX_ERRORS + 50), { file: 'x.zone' });
    assert.equal(r.errors.length, MAX_ERRORS);
    assert.match(r.errors[MAX_ERRORS - 1]?.message ?? '', /more than 1000 errors/);
  });

  it('parseZone throws the first error', () => {
    assert.throws(() => parseZone(`${HEAD}a A x\nb A y`, { file: 'f.zone' }), (e: unknown) => e instanceof ZoneError && e.line === 5);
  });
});

describe('$INCLUDE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-include-'));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const write = (rel: string, text: string): string => {
    const p = join(dir, rel);
    mkdirSync(join(p, '..'), { recursive: true });
    writeFileSync(p, text);
    return p;
  };

  it('relative to the including file; the origin given applies inside; origin and owner come back after', () => {
    write('inc/hosts.inc', 'web A 192.0.2.80\n@ TXT "in hosts"\n$INCLUDE deeper.inc\n');
    write('inc/deeper.inc', 'deep A 192.0.2.81\n');
    const main = write('main.zone', `${HEAD}owner A 192.0.2.1\n$INCLUDE inc/hosts.inc hosts\n TXT "after"\n$ORIGIN sub.t.test.\n$INCLUDE inc/hosts.inc\nlast A 192.0.2.9\n`);
    const r = checkZoneFile(main);
    assert.deepEqual(r.errors, []);
    const show = r.zone?.records.slice(2).map((rr) => `${rr.name} ${wireType(rr)}`);
    assert.deepEqual(show, [
      'owner.t.test 1',
      'web.hosts.t.test 1',
      'hosts.t.test 16',
      'deep.hosts.t.test 1',
      // The blank owner after the $INCLUDE is the including file's last owner again.
      'owner.t.test 16',
      // Without an origin argument the current $ORIGIN applies inside.
      'web.sub.t.test 1',
      'sub.t.test 16',
      'deep.sub.t.test 1',
      'last.sub.t.test 1',
    ]);
  });

  it('an error inside an included file names that file and its line', () => {
    write('bad.inc', 'ok A 192.0.2.1\nbad A 192.0.2.999\n');
    const main = write('bad-main.zone', `${HEAD}$INCLUDE bad.inc\n`);
    const r = checkZoneFile(main);
    assert.equal(r.errors.length, 1);
    assert.ok(r.errors[0]?.message.startsWith(`${join(dir, 'bad.inc')}:2: `), r.errors[0]?.message);
  });

  it('a missing file, a loop and too deep a nesting are errors at the $INCLUDE line', () => {
    const missing = write('missing.zone', `${HEAD}$INCLUDE nope.inc\n`);
    const loopA = write('loop-a.inc', 'a A 192.0.2.1\n$INCLUDE loop-b.inc\n');
    write('loop-b.inc', '$INCLUDE loop-a.inc\n');
    const loop = write('loop.zone', `${HEAD}$INCLUDE ${loopA}\n`);
    for (let i = 0; i <= MAX_INCLUDE_DEPTH + 1; i++) write(`deep/${i}.inc`, `d${i} A 192.0.2.1\n$INCLUDE ${i + 1}.inc\n`);
    const deep = write('deep.zone', `${HEAD}$INCLUDE deep/0.inc\n`);
    const cases: readonly (readonly [string, string, number, RegExp])[] = [
      [missing, missing, 5, /cannot read \$INCLUDE file .*nope\.inc/],
      [loop, join(dir, 'loop-b.inc'), 1, /already being read/],
      [deep, join(dir, `deep/${MAX_INCLUDE_DEPTH - 1}.inc`), 2, /nests more than 8 files deep/],
    ];
    for (const [file, where, line, message] of cases) {
      const r = checkZoneFile(file);
      assert.equal(r.errors.length, 1, r.errors.map((e) => e.message).join('\n'));
      const e = r.errors[0] as ZoneError;
      assert.equal(e.code, 'ERR_SLUICE_ZONE_INCLUDE');
      assert.equal(`${e.file}:${e.line}`, `${where}:${line}`, e.message);
      assert.match(e.message, message);
    }
  });

  it('zone text given as a string may not include (it never opens files)', () => {
    const r = checkZone(`${HEAD}$INCLUDE /etc/hostname\n`, { file: 'x.zone' });
    assert.match(r.errors[0]?.message ?? '', /not read from a file/);
  });
});

describe('DS at a delegation (RFC 4035 §3.1.4.1)', () => {
  const zone = Zone.fromText(`${HEAD}sub NS ns.sub\nsub DS 1 8 2 ${'ab'.repeat(32)}\nns.sub A 192.0.2.53\nx.sub DS 2 8 2 ${'cd'.repeat(32)}`);
  const rows: readonly (readonly [string, number, string, boolean, number])[] = [
    // [name, qtype, kind, aa, answers]
    ['sub.t.test', RRTYPE.DS, 'answer', true, 1],
    ['sub.t.test', RRTYPE.A, 'referral', false, 0],
    ['sub.t.test', RRTYPE.NS, 'referral', false, 0],
    ['x.sub.t.test', RRTYPE.DS, 'referral', false, 0],
    ['t.test', RRTYPE.DS, 'nodata', true, 0],
  ];
  for (const [n, qtype, kind, aa, answers] of rows) {
    it(`${n} type ${qtype}: ${kind}`, () => {
      const a = zone.lookup(n, qtype);
      assert.equal(a.kind, kind);
      assert.equal(a.aa, aa);
      assert.equal(a.answer.length, answers);
    });
  }
});

describe('CH identity answers', () => {
  const texts = (body: Buffer): string[] => {
    const out: string[] = [];
    for (let p = 12; p < body.length; p += 1 + (body[p] ?? 0)) out.push(body.subarray(p + 1, p + 1 + (body[p] ?? 0)).toString('utf8'));
    return out;
  };
  const rows: readonly (readonly [string, ConstructorParameters<typeof Identity>[0], string, number, string | undefined])[] = [
    // [what, config, name, qtype, answer text (undefined: REFUSED)]
    ['id.server default: the host name', {}, 'id.server', 16, 'host1'],
    ['hostname.bind default: the host name', {}, 'hostname.bind', 16, 'host1'],
    ['version.bind default', {}, 'version.bind', 16, 'sluice 9.9'],
    ['version.server default', {}, 'version.server', 16, 'sluice 9.9'],
    ['id.server configured', { id: 'edge-7' }, 'id.server', 16, 'edge-7'],
    ['ANY answers the TXT', { id: 'edge-7' }, 'id.server', 255, 'edge-7'],
    ['id.server turned off', { id: false }, 'id.server', 16, undefined],
    ['version turned off: version.bind', { version: false }, 'version.bind', 16, undefined],
    ['version turned off: version.server', { version: false }, 'version.server', 16, undefined],
    ['version turned off leaves hostname.bind', { version: false }, 'hostname.bind', 16, 'host1'],
    ['type A', {}, 'id.server', 1, undefined],
    ['another name', {}, 'authors.bind', 16, undefined],
  ];
  for (const [what, cfg, n, qtype, want] of rows) {
    it(what, () => {
      const id = new Identity(cfg, { host: 'host1', version: 'sluice 9.9' });
      const body = id.answer(n, qtype);
      if (want === undefined) {
        assert.equal(body, undefined);
        return;
      }
      assert.ok(body);
      assert.equal(body.aa, false);
      assert.equal(body.an, 1);
      assert.deepEqual([body.bytes.readUInt16BE(0), body.bytes.readUInt16BE(2), body.bytes.readUInt16BE(4), body.bytes.readUInt32BE(6)], [0xc00c, 16, 3, 0]);
      assert.deepEqual(texts(body.bytes), [want]);
    });
  }

  it('counts answered and refused per name, and other CH queries', () => {
    const id = new Identity({ version: false }, { host: 'h', version: 'v' });
    id.answer('id.server', 16);
    id.answer('id.server', 16);
    id.answer('version.bind', 16);
    id.answer('id.server', 1);
    id.answer('x.y', 16);
    assert.deepEqual([id.answered.get('id.server'), id.refused.get('id.server'), id.refused.get('version.bind'), id.other], [2, 1, 1, 1]);
  });
});

describe('sluice check-zone', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-check-zone-'));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const good = join(dir, 'good.zone');
  const broken = join(dir, 'broken.zone');
  writeFileSync(good, `$ORIGIN t.test.\n$TTL 300\n@ SOA ns h 2026112601 1h 15m 1w 5m\n@ NS ns\nns A 192.0.2.53\nu TYPE65534 \\# 4 0a000001\nc CAA 0 issue "ca.test"\n`);
  writeFileSync(broken, `${HEAD}a A 192.0.2.300\nb AAAA nope\nc TLSA 3 1 1 abc\nd TYPE65534 \\# 4 0a00\ne CAA 0 issue\nf BOGUS 1\n`);
  const sluice = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    try {
      const { stdout, stderr } = await promisify(execFile)(BIN, args);
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  it('a valid zone: exit 0 and a summary (origin, serial, records)', async () => {
    const r = await sluice('check-zone', good);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), `${good}: zone t.test./IN: loaded serial 2026112601 (5 records)`);
  });

  it('a broken zone: exit 1 and every error with its file:line', async () => {
    const r = await sluice('check-zone', broken);
    assert.equal(r.code, 1);
    const lines = r.stderr.trim().split('\n');
    assert.deepEqual(
      lines.slice(0, -1).map((l) => l.slice(0, l.indexOf(': '))),
      [5, 6, 7, 8, 9, 10].map((n) => `${broken}:${n}`),
      r.stderr,
    );
    assert.equal(lines.at(-1), `${broken}: 6 error(s); not loaded`);
  });

  it('several files: each reported; exit 1 if any is broken', async () => {
    const r = await sluice('check-zone', good, broken);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /good\.zone: zone t\.test\.\/IN: loaded/);
    assert.match(r.stderr, /broken\.zone:5: /);
  });

  it('--origin for a file without $ORIGIN; usage errors exit 2', async () => {
    const bare = join(dir, 'bare.zone');
    writeFileSync(bare, '$TTL 60\n@ SOA ns h 3 1 1 1 1\n@ NS ns\n');
    assert.equal((await sluice('check-zone', '--origin', 'bare.test', bare)).code, 0);
    assert.equal((await sluice('check-zone', bare)).code, 1);
    assert.equal((await sluice('check-zone')).code, 2);
    assert.equal((await sluice('check-zone', '--origin', 'bad..name', bare)).code, 2);
  });
});
