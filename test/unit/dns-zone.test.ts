import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors/errors.ts';
import { MAX_ZONE_BYTES, ZoneError, parseZone } from '../../src/dns/zone/parse.ts';
import { GENERIC_TYPE, RRTYPE, wireType, type RR } from '../../src/dns/zone/records.ts';
import { MAX_CNAME_CHAIN, Zone, ZoneSet, type Answer } from '../../src/dns/zone/zone.ts';

const FIXTURE = 'test/fixtures/zones/example.test.zone';
const fixtureText = readFileSync(new URL('../fixtures/zones/example.test.zone', import.meta.url), 'utf8');
const example = Zone.fromText(fixtureText, { file: FIXTURE });

const TYPE_NAMES = new Map<number, string>(Object.entries(RRTYPE).map(([k, v]) => [v, k]));

/** One record as zone-file-like text: "owner ttl TYPE rdata". */
function show(rr: RR): string {
  const rdata = ((): string => {
    switch (rr.type) {
      case RRTYPE.A:
      case RRTYPE.AAAA:
        return rr.address;
      case RRTYPE.NS:
        return rr.ns;
      case RRTYPE.CNAME:
      case RRTYPE.PTR:
        return rr.domain;
      case RRTYPE.MX:
        return `${rr.priority} ${rr.exchange}`;
      case RRTYPE.TXT:
        return JSON.stringify(rr.data);
      case RRTYPE.SRV:
        return `${rr.priority} ${rr.weight} ${rr.port} ${rr.target}`;
      case RRTYPE.SOA:
        return `${rr.primary} ${rr.admin} ${rr.serial} ${rr.refresh} ${rr.retry} ${rr.expiration} ${rr.minimum}`;
      case RRTYPE.CAA:
        return `${rr.flags} ${rr.tag} ${JSON.stringify(rr.value)}`;
      case RRTYPE.NAPTR:
      case RRTYPE.DS:
      case RRTYPE.SSHFP:
      case RRTYPE.TLSA:
        return `\\# ${rr.data.length} ${rr.data.toString('hex')}`;
      case GENERIC_TYPE:
        return `\\# ${rr.data.length} ${rr.data.toString('hex')}`;
    }
  })();
  const type = wireType(rr);
  return `${rr.name} ${rr.ttl} ${TYPE_NAMES.get(type) ?? `TYPE${type}`} ${rdata}`;
}

/** A minimal valid zone t.test (4 lines); tests append their lines from line 5. */
const HEAD = '$ORIGIN t.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n';
/** The records the lines after HEAD produced. */
const body = (text: string): string[] => parseZone(HEAD + text, { file: 'test.zone' }).records.slice(2).map(show);

describe('zone file: the fixture', () => {
  const recs = example.records;
  const find = (name: string, type: number): RR[] => recs.filter((r) => r.name === name && r.type === type);

  it('parses every record type with its exact field values', () => {
    assert.equal(example.origin, 'example.test');
    assert.deepEqual(example.soa, {
      name: 'example.test',
      class: 1,
      ttl: 3600,
      type: RRTYPE.SOA,
      primary: 'ns1.example.test',
      admin: 'hostmaster.example.test',
      serial: 2024010101,
      refresh: 3600,
      retry: 900,
      expiration: 604800,
      minimum: 300,
    });
    assert.deepEqual(find('example.test', RRTYPE.NS), [
      { name: 'example.test', type: RRTYPE.NS, class: 1, ttl: 3600, ns: 'ns1.example.test' },
      { name: 'example.test', type: RRTYPE.NS, class: 1, ttl: 3600, ns: 'ns2.example.test' },
    ]);
    assert.deepEqual(find('example.test', RRTYPE.MX), [{ name: 'example.test', type: RRTYPE.MX, class: 1, ttl: 3600, priority: 10, exchange: 'mail.example.test' }]);
    assert.deepEqual(find('ns2.example.test', RRTYPE.AAAA), [{ name: 'ns2.example.test', type: RRTYPE.AAAA, class: 1, ttl: 3600, address: '2001:db8::54' }]);
    assert.deepEqual(find('mail.example.test', RRTYPE.A), [{ name: 'mail.example.test', type: RRTYPE.A, class: 1, ttl: 300, address: '192.0.2.25' }]);
    assert.deepEqual(find('alias2.example.test', RRTYPE.CNAME), [{ name: 'alias2.example.test', type: RRTYPE.CNAME, class: 1, ttl: 3600, domain: 'alias.example.test' }]);
    assert.deepEqual(find('info.example.test', RRTYPE.TXT), [
      { name: 'info.example.test', type: RRTYPE.TXT, class: 1, ttl: 3600, data: ['hello world', 'say "hi"', 'back\\slash', 'café', 'plain'] },
    ]);
    assert.deepEqual(find('_http._tcp.example.test', RRTYPE.SRV), [
      { name: '_http._tcp.example.test', type: RRTYPE.SRV, class: 1, ttl: 3600, priority: 0, weight: 5, port: 8080, target: 'web.example.test' },
    ]);
    assert.deepEqual(find('web.example.test', RRTYPE.AAAA).map(show), ['web.example.test 3600 AAAA 2001:db8::80']);
    assert.deepEqual(find('www.example.test', RRTYPE.A).map(show), ['www.example.test 60 A 192.0.2.10']);
    assert.equal(example.recordCount, 27);
    assert.ok(Object.isFrozen(recs[0]));
  });

  it('knows which names exist, empty non-terminals included', () => {
    for (const n of ['example.test', 'b.deep.example.test', 'deep.example.test', 'ent.wild.example.test', 'ns1.sub.example.test', 'WWW.example.test']) {
      assert.equal(example.has(n), true, n);
    }
    for (const n of ['nope.example.test', 'x.b.deep.example.test', 'foo.wild.example.test']) assert.equal(example.has(n), false, n);
  });
});

describe('zone file: syntax', () => {
  const rows: [string, string, string[]][] = [
    ['relative owner', 'a A 192.0.2.1', ['a.t.test 300 A 192.0.2.1']],
    ['absolute owner', 'b.t.test. A 192.0.2.1', ['b.t.test 300 A 192.0.2.1']],
    ['@ is the origin', '@ A 192.0.2.1', ['t.test 300 A 192.0.2.1']],
    ['names and types in any case', 'MiXeD.T.TEST. in a 192.0.2.1', ['mixed.t.test 300 A 192.0.2.1']],
    ['blank owner repeats the previous owner', 'c A 192.0.2.1\n\tAAAA ::1\n  TXT x', ['c.t.test 300 A 192.0.2.1', 'c.t.test 300 AAAA ::1', 'c.t.test 300 TXT ["x"]']],
    ['TTL then class', 'd 60 IN A 192.0.2.1', ['d.t.test 60 A 192.0.2.1']],
    ['class then TTL, units', 'e IN 1h30m A 192.0.2.2', ['e.t.test 5400 A 192.0.2.2']],
    ['TTL units any case, no class', 'f 2W1d a 192.0.2.3', ['f.t.test 1296000 A 192.0.2.3']],
    ['largest TTL', 'f 2147483647 A 192.0.2.3', ['f.t.test 2147483647 A 192.0.2.3']],
    ['$TTL changes the default', '$TTL 1d\ng A 192.0.2.1', ['g.t.test 86400 A 192.0.2.1']],
    ['parentheses span lines, comments anywhere', 'h MX ( 10 ; preference\n  mail ) ; exchange\n; a comment line\ni A 192.0.2.9', ['h.t.test 300 MX 10 mail.t.test', 'i.t.test 300 A 192.0.2.9']],
    ['$ORIGIN changes the relative base', '$ORIGIN sub2.t.test.\nj A 192.0.2.1\n$ORIGIN t.test.\nk A 192.0.2.2', ['j.sub2.t.test 300 A 192.0.2.1', 'k.t.test 300 A 192.0.2.2']],
    ['a relative $ORIGIN is relative to the current one', '$ORIGIN rel\nl CNAME @', ['l.rel.t.test 300 CNAME rel.t.test']],
    [
      'TXT quotes and escapes',
      'm TXT "a \\"q\\" b" "\\\\" "\\065\\066" semi\\;colon "with ; semicolon" ""',
      ['m.t.test 300 TXT ["a \\"q\\" b","\\\\","AB","semi;colon","with ; semicolon",""]'],
    ],
    ['escapes in names', '\\065bc A 192.0.2.1', ['abc.t.test 300 A 192.0.2.1']],
    ['the root as a target', 'n MX 0 .\n_x._tcp SRV 0 0 0 .', ['n.t.test 300 MX 0 ', '_x._tcp.t.test 300 SRV 0 0 0 ']],
    ['IPv6 normalised', 'o AAAA 2001:0DB8:0000:0000:0000:0000:0000:0001\no AAAA ::FFFF:192.0.2.1', ['o.t.test 300 AAAA 2001:db8::1', 'o.t.test 300 AAAA ::ffff:c000:201']],
    ['identical records kept once', 'p A 192.0.2.1\np A 192.0.2.1\np A 192.0.2.2', ['p.t.test 300 A 192.0.2.1', 'p.t.test 300 A 192.0.2.2']],
    ['SRV and a wildcard owner', '_sip._udp SRV 10 20 5060 sip\n*.w A 192.0.2.1', ['_sip._udp.t.test 300 SRV 10 20 5060 sip.t.test', '*.w.t.test 300 A 192.0.2.1']],
    ['CRLF line ends', 'q A 192.0.2.1\r\nr A 192.0.2.2\r\n', ['q.t.test 300 A 192.0.2.1', 'r.t.test 300 A 192.0.2.2']],
  ];
  for (const [name, text, want] of rows) {
    it(name, () => {
      assert.deepEqual(body(text), want);
    });
  }

  it('takes the origin from the options (any case, trailing dot optional) and a default TTL', () => {
    const z = parseZone('@ SOA ns h 1 2 3 4 5\n NS ns\na A 192.0.2.1', { origin: 'Example.TEST', defaultTtl: 42 });
    assert.equal(z.origin, 'example.test');
    assert.deepEqual(z.records.map(show).slice(1), ['example.test 42 NS ns.example.test', 'a.example.test 42 A 192.0.2.1']);
    assert.throws(() => parseZone('', { origin: 'bad..name' }), InvalidArgumentError);
    assert.throws(() => parseZone('', { origin: 'x.test', defaultTtl: -1 }), InvalidArgumentError);
  });

  it('without $TTL a record takes the last TTL written (RFC 1035 §5.1)', () => {
    const z = parseZone('$ORIGIN t.test.\n@ 10 SOA ns h 1 2 3 4 5\n@ NS ns\na 20 A 192.0.2.1\nb A 192.0.2.2');
    assert.deepEqual(z.records.map((r) => r.ttl), [10, 10, 20, 20]);
  });
});

describe('zone file: refusals', () => {
  // [what, text after HEAD (or a whole file when it starts with '!'), code, line, message]
  const rows: [string, string, string, number, RegExp][] = [
    ['missing rdata', 'a A', 'ERR_SLUICE_ZONE_SYNTAX', 5, /A record has no address/],
    ['extra rdata', 'a A 192.0.2.1 192.0.2.2', 'ERR_SLUICE_ZONE_SYNTAX', 5, /unexpected "192.0.2.2"/],
    ['unclosed parenthesis', 'a MX ( 10\n mail', 'ERR_SLUICE_ZONE_SYNTAX', 5, /never closed/],
    ['nested parentheses', 'a MX ( 10 ( mail ) )', 'ERR_SLUICE_ZONE_SYNTAX', 5, /do not nest/],
    ['unterminated quote', 'a TXT "abc\nb A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not closed/],
    ['backslash at the end of a line', 'a TXT abc\\\nb A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 5, /backslash/],
    ['unknown type', 'a HINFO "pc" "linux"', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /unsupported type "HINFO".*A, NS.*TYPEnnn/],
    ['no type', 'a 300 IN', 'ERR_SLUICE_ZONE_SYNTAX', 5, /no type/],
    ['class CH', 'a CH A 192.0.2.1', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /class CH.*IN only/],
    ['class HS', 'a 60 HS TXT x', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /class HS/],
    ['$INCLUDE in text not from a file', '$INCLUDE /etc/passwd', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /\$INCLUDE in zone text that is not read from a file/],
    ['unknown directive', '$GENERATE 1-9 h$ A 192.0.2.$', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /unknown directive/],
    ['$TTL without value', '$TTL', 'ERR_SLUICE_ZONE_SYNTAX', 5, /takes one value/],
    ['label over 63 octets', `${'x'.repeat(64)} A 192.0.2.1`, 'ERR_SLUICE_ZONE_RANGE', 5, /64 octets.*at most 63/],
    ['name over 255 octets', `${Array(4).fill('x'.repeat(63)).join('.')} A 192.0.2.1`, 'ERR_SLUICE_ZONE_RANGE', 5, /at most 255 octets/],
    ['empty label', 'a..b A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 5, /empty label/],
    ['odd character in a name', 'a!b A 192.0.2.1', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /letters, digits/],
    ['escaped dot in a label', 'a\\.b A 192.0.2.1', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /does not accept/],
    ['wildcard not leftmost', 'a.*.b A 192.0.2.1', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /'\*' below the leftmost/],
    ['quoted name', '"a" A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 5, /quoted/],
    ['two SOAs', 'x A 192.0.2.1\n@ SOA ns h 2 2 3 4 5', 'ERR_SLUICE_ZONE_DATA', 6, /second SOA.*line 3/],
    ['SOA not at the origin', 'a SOA ns h 1 2 3 4 5', 'ERR_SLUICE_ZONE_DATA', 5, /not at the origin/],
    ['no SOA', '!$ORIGIN t.test.\n$TTL 1\n@ NS ns\n', 'ERR_SLUICE_ZONE_DATA', 1, /no SOA/],
    ['no NS at the origin', '!$ORIGIN t.test.\n$TTL 1\n@ SOA ns h 1 2 3 4 5\na NS ns\n', 'ERR_SLUICE_ZONE_DATA', 3, /no NS record at its origin/],
    ['CNAME after other data', 'a A 192.0.2.1\na CNAME b', 'ERR_SLUICE_ZONE_DATA', 6, /CNAME and other data \(see line 5\)/],
    ['other data after a CNAME', 'a CNAME b\na TXT x', 'ERR_SLUICE_ZONE_DATA', 6, /CNAME and other data \(see line 5\)/],
    ['CNAME at the origin', '@ CNAME b', 'ERR_SLUICE_ZONE_DATA', 5, /CNAME and other data/],
    ['NS at a wildcard', '*.w NS ns', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /RFC 4592/],
    ['two CNAMEs', 'a CNAME b\na CNAME c', 'ERR_SLUICE_ZONE_DATA', 6, /second CNAME/],
    ['TTLs differ in an RRset', 'a 60 A 192.0.2.1\na 61 A 192.0.2.2', 'ERR_SLUICE_ZONE_DATA', 6, /RFC 2181/],
    ['owner outside the origin', 'www.other.test. A 192.0.2.1', 'ERR_SLUICE_ZONE_DATA', 5, /outside the zone origin "t.test"/],
    ['owner outside after $ORIGIN', '$ORIGIN other.\na A 192.0.2.1', 'ERR_SLUICE_ZONE_DATA', 6, /outside/],
    ['IPv4 octet over 255', 'a A 192.0.2.256', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not an IPv4 address/],
    ['IPv4 three octets', 'a A 192.0.2', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not an IPv4 address/],
    ['IPv4 leading zero', 'a A 192.0.2.01', 'ERR_SLUICE_ZONE_SYNTAX', 5, /no leading zeros/],
    ['IPv4 in AAAA', 'a AAAA 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not an IPv6 address/],
    ['bad IPv6', 'a AAAA 2001:db8::g', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not an IPv6 address/],
    ['IPv6 zone index', 'a AAAA fe80::1%eth0', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not an IPv6 address/],
    ['MX preference over 65535', 'a MX 65536 mail', 'ERR_SLUICE_ZONE_RANGE', 5, /MX preference 65536.*0\.\.65535/],
    ['SRV port over 65535', 'a SRV 0 0 70000 t', 'ERR_SLUICE_ZONE_RANGE', 5, /SRV port/],
    ['negative number', 'a MX -1 mail', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not a number/],
    ['SOA serial over 2^32-1', '!$ORIGIN t.test.\n$TTL 1\n@ SOA ns h 4294967296 1 1 1 1', 'ERR_SLUICE_ZONE_RANGE', 3, /SOA serial/],
    ['TTL over 2^31-1', 'a 2147483648 A 192.0.2.1', 'ERR_SLUICE_ZONE_RANGE', 5, /TTL 2147483648/],
    ['TTL in units over 2^31-1', '$TTL 3551w', 'ERR_SLUICE_ZONE_RANGE', 5, /\$TTL 3551w/],
    ['bad TTL unit', 'a 1x A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 5, /not a time/],
    ['TXT string over 255 octets', `a TXT "${'x'.repeat(256)}"`, 'ERR_SLUICE_ZONE_RANGE', 5, /256 octets/],
    ['decimal escape over 255', 'a TXT "\\256"', 'ERR_SLUICE_ZONE_RANGE', 5, /over 255/],
    ['short decimal escape', 'a TXT "\\12"', 'ERR_SLUICE_ZONE_SYNTAX', 5, /exactly three digits/],
    ['TXT not UTF-8', 'a TXT "\\255"', 'ERR_SLUICE_ZONE_UNSUPPORTED', 5, /not UTF-8/],
    ['quoted number', 'a MX "10" mail', 'ERR_SLUICE_ZONE_SYNTAX', 5, /quoted/],
    ['no TTL anywhere', '!$ORIGIN t.test.\n\n@ SOA ns h 1 2 3 4 5', 'ERR_SLUICE_ZONE_SYNTAX', 3, /no TTL/],
    ['no origin', '!$TTL 1\na A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 2, /relative but no origin/],
    ['first record without owner', '!$ORIGIN t.test.\n$TTL 1\n  A 192.0.2.1', 'ERR_SLUICE_ZONE_SYNTAX', 3, /no owner/],
  ];
  for (const [name, text, code, line, message] of rows) {
    it(`refuses ${name} (${code} at line ${line})`, () => {
      const whole = text.startsWith('!') ? text.slice(1) : HEAD + text;
      assert.throws(
        () => parseZone(whole, { file: 'test.zone' }),
        (err: unknown) => {
          assert.ok(err instanceof ZoneError, String(err));
          assert.equal(err.code, code, err.message);
          assert.equal(err.line, line, err.message);
          assert.ok(err.message.startsWith(`test.zone:${line}: `), err.message);
          assert.match(err.message, message);
          assert.match(err.message, /; \S/, 'the message says how to fix it');
          return true;
        },
      );
    });
  }

  it(`refuses a file over ${MAX_ZONE_BYTES} bytes`, () => {
    assert.throws(() => parseZone(`;${'x'.repeat(MAX_ZONE_BYTES)}`, { file: 'big.zone' }), { code: 'ERR_SLUICE_ZONE_TOO_LARGE' });
  });
});

type Want = Partial<Record<'answer' | 'authority' | 'additional', readonly string[]>> & Pick<Answer, 'rcode' | 'kind' | 'aa'>;

function check(zone: Zone, qname: string, qtype: number, want: Want): void {
  const got = zone.lookup(qname, qtype);
  assert.deepEqual(
    { rcode: got.rcode, kind: got.kind, aa: got.aa, answer: got.answer.map(show), authority: got.authority.map(show), additional: got.additional.map(show) },
    { answer: [], authority: [], additional: [], ...want },
  );
}

const NEG_SOA = 'example.test 300 SOA ns1.example.test hostmaster.example.test 2024010101 3600 900 604800 300';
const ok = { rcode: 0, kind: 'answer', aa: true } as const;
const nodata = { rcode: 0, kind: 'nodata', aa: true, authority: [NEG_SOA] } as const;
const nxdomain = { rcode: 3, kind: 'nxdomain', aa: true, authority: [NEG_SOA] } as const;
const SUB_REFERRAL = {
  rcode: 0,
  kind: 'referral',
  aa: false,
  authority: ['sub.example.test 3600 NS ns1.sub.example.test', 'sub.example.test 3600 NS ns.other.invalid'],
  additional: ['ns1.sub.example.test 3600 A 192.0.2.153'],
} as const;
const { A, AAAA, NS, CNAME, SOA, MX, TXT, SRV, ANY } = RRTYPE;

describe('zone lookup: the fixture', () => {
  const rows: [string, string, number, Want][] = [
    ['exact A', 'www.example.test', A, { ...ok, answer: ['www.example.test 60 A 192.0.2.10'] }],
    ['exact AAAA', 'web.example.test', AAAA, { ...ok, answer: ['web.example.test 3600 AAAA 2001:db8::80'] }],
    ['SOA', 'example.test', SOA, { ...ok, answer: ['example.test 3600 SOA ns1.example.test hostmaster.example.test 2024010101 3600 900 604800 300'] }],
    [
      'apex NS with in-zone addresses',
      'example.test',
      NS,
      {
        ...ok,
        answer: ['example.test 3600 NS ns1.example.test', 'example.test 3600 NS ns2.example.test'],
        additional: ['ns1.example.test 3600 A 192.0.2.53', 'ns2.example.test 3600 A 192.0.2.54', 'ns2.example.test 3600 AAAA 2001:db8::54'],
      },
    ],
    ['MX with the exchange address', 'example.test', MX, { ...ok, answer: ['example.test 3600 MX 10 mail.example.test'], additional: ['mail.example.test 300 A 192.0.2.25'] }],
    [
      'SRV with the target addresses',
      '_http._tcp.example.test',
      SRV,
      {
        ...ok,
        answer: ['_http._tcp.example.test 3600 SRV 0 5 8080 web.example.test'],
        additional: ['web.example.test 3600 A 192.0.2.80', 'web.example.test 3600 A 192.0.2.81', 'web.example.test 3600 AAAA 2001:db8::80'],
      },
    ],
    ['ANY: every RRset at the name', 'ns2.example.test', ANY, { ...ok, answer: ['ns2.example.test 3600 A 192.0.2.54', 'ns2.example.test 3600 AAAA 2001:db8::54'] }],
    ['ANY at a CNAME is not chased', 'alias.example.test', ANY, { ...ok, answer: ['alias.example.test 3600 CNAME web.example.test'] }],
    ['TXT strings', 'info.example.test', TXT, { ...ok, answer: ['info.example.test 3600 TXT ["hello world","say \\"hi\\"","back\\\\slash","café","plain"]'] }],
    [
      'CNAME chain followed in the zone',
      'alias2.example.test',
      A,
      {
        rcode: 0,
        kind: 'cname',
        aa: true,
        answer: [
          'alias2.example.test 3600 CNAME alias.example.test',
          'alias.example.test 3600 CNAME web.example.test',
          'web.example.test 3600 A 192.0.2.80',
          'web.example.test 3600 A 192.0.2.81',
        ],
      },
    ],
    ['CNAME asked for itself', 'alias.example.test', CNAME, { ...ok, answer: ['alias.example.test 3600 CNAME web.example.test'] }],
    ['CNAME to a name without the type: NODATA after the chain', 'alias.example.test', TXT, { ...nodata, kind: 'cname', answer: ['alias.example.test 3600 CNAME web.example.test'] }],
    ['CNAME out of the zone: the resolver goes on', 'cdn.example.test', A, { rcode: 0, kind: 'cname', aa: true, answer: ['cdn.example.test 3600 CNAME edge.cdn.invalid'] }],
    ['NODATA: SOA TTL is min(ttl, minimum)', 'web.example.test', MX, nodata],
    ['NXDOMAIN', 'nope.example.test', A, nxdomain],
    ['NXDOMAIN below an existing name', 'x.www.example.test', A, nxdomain],
    ['empty non-terminal: NODATA', 'b.deep.example.test', A, nodata],
    ['empty non-terminal two up: NODATA', 'deep.example.test', ANY, nodata],
    ['below an empty non-terminal: NXDOMAIN', 'x.b.deep.example.test', A, nxdomain],
    ['wildcard A, owned by the query name', 'foo.wild.example.test', A, { ...ok, answer: ['foo.wild.example.test 3600 A 192.0.2.99'] }],
    ['wildcard TXT', 'foo.wild.example.test', TXT, { ...ok, answer: ['foo.wild.example.test 3600 TXT ["wildcard"]'] }],
    ['wildcard for a deeper name', 'a.b.foo.wild.example.test', A, { ...ok, answer: ['a.b.foo.wild.example.test 3600 A 192.0.2.99'] }],
    ['wildcard without the type: NODATA', 'foo.wild.example.test', MX, nodata],
    ['the wildcard name itself', '*.wild.example.test', A, { ...ok, answer: ['*.wild.example.test 3600 A 192.0.2.99'] }],
    ['no wildcard for an existing name', 'exists.wild.example.test', TXT, nodata],
    ['no wildcard for an empty non-terminal', 'ent.wild.example.test', A, nodata],
    ['wildcard blocked below an empty non-terminal', 'y.ent.wild.example.test', A, nxdomain],
    ['the wildcard parent is an empty non-terminal', 'wild.example.test', A, nodata],
    ['referral at the cut, with glue', 'sub.example.test', NS, SUB_REFERRAL],
    ['referral for a name below the cut', 'host.sub.example.test', A, SUB_REFERRAL],
    ['glue is not answered with authority', 'ns1.sub.example.test', A, SUB_REFERRAL],
    ['case-insensitive', 'WWW.Example.TEST', A, { ...ok, answer: ['www.example.test 60 A 192.0.2.10'] }],
  ];
  for (const [name, qname, qtype, want] of rows) {
    it(`${name}: ${qname} ${TYPE_NAMES.get(qtype) ?? qtype}`, () => {
      check(example, qname, qtype, want);
    });
  }

  it('refuses a name outside the zone', () => {
    assert.throws(() => example.lookup('www.other.test', A), InvalidArgumentError);
    assert.throws(() => example.lookup('xexample.test', A), InvalidArgumentError);
  });
});

describe('zone lookup: CNAME edge cases', () => {
  const chain = Array.from({ length: 10 }, (_, i) => `c${i + 1} CNAME c${i + 2}`).join('\n');
  const zone = Zone.fromText(
    `$ORIGIN c.test.\n$TTL 60\n@ SOA ns h 1 1 1 1 30\n@ NS ns\nns A 192.0.2.1\n` +
      `loop1 CNAME loop2\nloop2 CNAME loop1\nself CNAME self\ndangling CNAME nothere\n${chain}\nc11 A 192.0.2.11\n` +
      `*.w CNAME ns\ndeleg CNAME host.sub\nsub NS ns.sub\nns.sub A 192.0.2.2\nmx MX 10 ns.sub\n`,
    { file: 'c.zone' },
  );
  const soa = 'c.test 30 SOA ns.c.test h.c.test 1 1 1 1 30';
  const cname = { rcode: 0, kind: 'cname', aa: true } as const;
  const rows: [string, string, number, Want][] = [
    ['a loop stops', 'loop1.c.test', A, { ...cname, answer: ['loop1.c.test 60 CNAME loop2.c.test', 'loop2.c.test 60 CNAME loop1.c.test'] }],
    ['a self loop stops', 'self.c.test', A, { ...cname, answer: ['self.c.test 60 CNAME self.c.test'] }],
    [
      `a long chain stops after ${MAX_CNAME_CHAIN}`,
      'c1.c.test',
      A,
      { ...cname, answer: Array.from({ length: MAX_CNAME_CHAIN }, (_, i) => `c${i + 1}.c.test 60 CNAME c${i + 2}.c.test`) },
    ],
    ['a chain within the bound is followed', 'c4.c.test', A, { ...cname, answer: [...Array.from({ length: 7 }, (_, i) => `c${i + 4}.c.test 60 CNAME c${i + 5}.c.test`), 'c11.c.test 60 A 192.0.2.11'] }],
    ['a dangling target: NXDOMAIN after the CNAME (RFC 6604)', 'dangling.c.test', A, { rcode: 3, kind: 'cname', aa: true, answer: ['dangling.c.test 60 CNAME nothere.c.test'], authority: [soa] }],
    ['a wildcard CNAME is synthesised and followed', 'q.w.c.test', A, { ...cname, answer: ['q.w.c.test 60 CNAME ns.c.test', 'ns.c.test 60 A 192.0.2.1'] }],
    ['a chain into a delegation stops at the cut', 'deleg.c.test', A, { ...cname, answer: ['deleg.c.test 60 CNAME host.sub.c.test'] }],
    ['no additional data from below a cut', 'mx.c.test', MX, { ...ok, answer: ['mx.c.test 60 MX 10 ns.sub.c.test'] }],
  ];
  for (const [name, qname, qtype, want] of rows) {
    it(name, () => {
      check(zone, qname, qtype, want);
    });
  }
});

describe('ZoneSet', () => {
  const child = Zone.fromText('$TTL 60\n@ SOA ns h 1 1 1 1 1\n@ NS ns\nns A 192.0.2.1\n', { origin: 'sub.example.test' });
  const set = new ZoneSet([example, child]);
  const rows: [string, string | undefined][] = [
    ['example.test', 'example.test'],
    ['www.example.test', 'example.test'],
    ['sub.example.test', 'sub.example.test'],
    ['a.b.sub.example.test', 'sub.example.test'],
    ['WWW.SUB.Example.Test', 'sub.example.test'],
    ['xsub.example.test', 'example.test'],
    ['badexample.test', undefined],
    ['test', undefined],
    ['', undefined],
    ['other.invalid', undefined],
  ];
  for (const [qname, origin] of rows) {
    it(`finds ${origin ?? 'no zone'} for "${qname}"`, () => {
      assert.equal(set.find(qname)?.origin, origin);
    });
  }

  it('refuses two zones with one origin', () => {
    assert.equal(set.size, 2);
    assert.throws(() => new ZoneSet([example, example]), InvalidArgumentError);
  });
});
