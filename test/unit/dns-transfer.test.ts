/**
 * Zone transfers (src/dns/transfer/): TSIG verification outcomes
 * (table-driven), RFC 1982 serial comparison, what a transfer holds for
 * steered names, and the access decisions of ZoneTransfers.respond (the
 * wire seen by NSD and dig is covered in test/netns/dns-axfr.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dnsConfigSchema, type DnsConfig } from '../../src/dns/config.ts';
import { serialNewer, transferRecords, ZoneTransfers } from '../../src/dns/transfer/axfr.ts';
import { notifyMessage, parseNotifyTarget } from '../../src/dns/transfer/notify.ts';
import { findTsig, nameWire, signRequest, TSIG_ERROR, verifyRequest, type TsigKey } from '../../src/dns/transfer/tsig.ts';
import { Zone, ZoneSet } from '../../src/dns/zone/zone.ts';

const KEY: TsigKey = { name: 'xfr.example.test', secret: Buffer.alloc(32, 7) };
const KEYS = new Map([[KEY.name, KEY]]);
const NOW = 1_700_000_000;

function query(name: string, qtype: number, id = 0x1234): Buffer {
  const q = nameWire(name);
  const m = Buffer.alloc(12 + q.length + 4);
  m.writeUInt16BE(id, 0);
  m.writeUInt16BE(1, 4);
  q.copy(m, 12);
  m.writeUInt16BE(qtype, 12 + q.length);
  m.writeUInt16BE(1, 14 + q.length);
  return m;
}

describe('TSIG verification', () => {
  const signed = signRequest(query('example.test', 252), KEY, NOW);
  const flip = (b: Buffer, at: number): Buffer => {
    const c = Buffer.from(b);
    c[at] = (c[at] ?? 0) ^ 1;
    return c;
  };
  const cases: [string, Buffer, ReadonlyMap<string, TsigKey>, number, number | 'ok' | 'unsigned'][] = [
    ['signed with the key', signed, KEYS, NOW, 'ok'],
    ['inside the fudge (300 s)', signed, KEYS, NOW + 299, 'ok'],
    ['outside the fudge', signed, KEYS, NOW + 301, TSIG_ERROR.BADTIME],
    ['a question octet changed', flip(signed, 14), KEYS, NOW, TSIG_ERROR.BADSIG],
    ['another secret', signed, new Map([[KEY.name, { name: KEY.name, secret: Buffer.alloc(32, 8) }]]), NOW, TSIG_ERROR.BADSIG],
    ['unknown key name', signed, new Map(), NOW, TSIG_ERROR.BADKEY],
    ['not signed', query('example.test', 252), KEYS, NOW, 'unsigned'],
    ['truncated TSIG record', signed.subarray(0, signed.length - 3), KEYS, NOW, 'unsigned'],
  ];
  for (const [what, msg, keys, now, want] of cases) {
    it(what, () => {
      const r = verifyRequest(msg, keys, now);
      if (want === 'unsigned') assert.equal(r, undefined);
      else if (want === 'ok') assert.equal(r?.ok, true);
      else assert.deepEqual(r?.ok === false ? r.error : r, want);
    });
  }

  it('the record found is the last additional one, with its fields', () => {
    const t = findTsig(signed);
    assert.ok(t);
    assert.equal(t.keyName, 'xfr.example.test');
    assert.equal(t.algorithm, 'hmac-sha256');
    assert.equal(t.timeSigned, NOW);
    assert.equal(t.mac.length, 32);
    assert.equal(t.originalId, 0x1234);
  });
});

describe('RFC 1982 serial arithmetic', () => {
  const cases: [number, number, boolean][] = [
    [2, 1, true],
    [1, 1, false],
    [1, 2, false],
    [0, 0xffffffff, true], // wrapped
    [0x80000000, 0, false], // undefined distance: not newer
    [0x7fffffff, 0, true],
  ];
  for (const [a, b, want] of cases) it(`${a} newer than ${b}: ${want}`, () => {
      assert.equal(serialNewer(a, b), want);
    });
});

const ZONE = `$ORIGIN example.test.
$TTL 3600
@      IN SOA ns1 hostmaster 7 3600 600 86400 300
       IN NS  ns1
ns1    IN A   198.18.2.2
www 60 IN A   198.18.2.10
       IN TXT "kept"
sorry  IN A   198.18.2.11
       IN AAAA 2001:2::11
fail   IN A   198.18.2.12
`;

function config(extra: Record<string, unknown> = {}): DnsConfig {
  return dnsConfigSchema.parse({
    name: 'dns1',
    listen: ['198.18.2.2:53'],
    zones: [{ file: '/dev/null' }],
    clusters: [
      { name: 'c1', vips: ['198.19.1.1'] },
      { name: 'c2', vips: ['198.19.2.1', '2001:2:19::1'] },
    ],
    steering: {
      names: [
        { name: 'www.example.test', ttl: 5 },
        { name: 'sorry.example.test', ttl: 7, fallback: { mode: 'sorry', addresses: ['198.18.2.99'] } },
        { name: 'fail.example.test', fallback: { mode: 'servfail' } },
        { name: 'absent.example.test', ttl: 9 },
      ],
    },
    ...extra,
  });
}

const show = (rrs: ReturnType<typeof transferRecords>): string[] => rrs.map((r) => `${r.name} ${r.ttl} ${r.type} ${'address' in r ? r.address : ''}`.trim());

describe('what a transfer holds', () => {
  it('SOA first and last; steered names with their fallback (per family), other records as written', () => {
    const z = Zone.fromText(ZONE);
    const got = show(transferRecords(z, config()));
    assert.deepEqual(got, [
      'example.test 3600 6',
      'example.test 3600 2',
      'ns1.example.test 3600 1 198.18.2.2',
      'www.example.test 3600 16', // TXT at a steered name kept
      'sorry.example.test 3600 28 2001:2::11', // the sorry fallback has no IPv6 address: the file's AAAA stays
      'fail.example.test 3600 1 198.18.2.12', // servfail: the file's records
      'www.example.test 5 1 198.19.1.1',
      'www.example.test 5 1 198.19.2.1',
      'www.example.test 5 28 2001:2:19::1',
      'sorry.example.test 7 1 198.18.2.99',
      'absent.example.test 9 1 198.19.1.1',
      'absent.example.test 9 1 198.19.2.1',
      'absent.example.test 9 28 2001:2:19::1',
      'example.test 3600 6',
    ]);
  });
});

describe('ZoneTransfers.respond: who gets what', () => {
  const zones = new ZoneSet([Zone.fromText(ZONE)]);
  const t = new ZoneTransfers(config({ transfer: { allow: ['198.18.3.0/24', '2001:2:3::/48'], keys: [{ name: KEY.name, secret: KEY.secret.toString('base64') }] } }));
  const rcode = (m: Buffer[] | undefined): number => (m?.[0]?.[3] ?? -1) & 0x0f;
  const records = (m: Buffer[] | undefined): number => (m ?? []).reduce((n, b) => n + b.readUInt16BE(6), 0);

  const cases: [string, Buffer, string, number | 'not a transfer', number][] = [
    ['allowed address: the zone', query('example.test', 252), '198.18.3.7', 0, 14],
    ['allowed IPv6 address', query('example.test', 252), '2001:2:3::7', 0, 14],
    ['another address: REFUSED', query('example.test', 252), '198.18.4.7', 5, 0],
    ['another address with the key: the zone', signRequest(query('example.test', 252), KEY, Date.now() / 1000), '198.18.4.7', 0, 14],
    ['a name below the zone: NOTAUTH', query('www.example.test', 252), '198.18.3.7', 9, 0],
    ['a zone not served: NOTAUTH', query('other.test', 252), '198.18.3.7', 9, 0],
    ['IXFR without a serial: the zone', query('example.test', 251), '198.18.3.7', 0, 14],
    ['an A query: not a transfer', query('example.test', 1), '198.18.4.7', 'not a transfer', 0],
  ];
  for (const [what, msg, source, want, n] of cases) {
    it(what, () => {
      const r = t.respond(msg, source, zones, Date.now() / 1000);
      if (want === 'not a transfer') assert.equal(r, undefined);
      else {
        assert.equal(rcode(r), want);
        assert.equal(records(r), n);
      }
    });
  }

  it('IXFR from a secondary at our serial (or newer): the SOA alone; older: the zone', () => {
    const ixfr = (serial: number): Buffer => {
      const q = query('example.test', 251);
      const soa = Buffer.concat([Buffer.from([0xc0, 12]), Buffer.from([0, 6, 0, 1, 0, 0, 0, 0, 0, 22]), Buffer.from([0, 0]), Buffer.alloc(20)]);
      soa.writeUInt32BE(serial, 14);
      const m = Buffer.concat([q, soa]);
      m.writeUInt16BE(1, 8);
      return m;
    };
    assert.equal(records(t.respond(ixfr(7), '198.18.3.7', zones, 0)), 1);
    assert.equal(records(t.respond(ixfr(8), '198.18.3.7', zones, 0)), 1);
    assert.equal(records(t.respond(ixfr(6), '198.18.3.7', zones, 0)), 14);
  });
});

describe('NOTIFY', () => {
  it('the message: opcode NOTIFY, AA, one SOA question', () => {
    const m = notifyMessage(0xbeef, 'example.test');
    assert.equal(m.readUInt16BE(0), 0xbeef);
    assert.equal(m[2], 0x24);
    assert.equal(m.readUInt16BE(4), 1);
    assert.equal(m.readUInt16BE(m.length - 4), 6);
  });
  const targets: [string, ReturnType<typeof parseNotifyTarget>][] = [
    ['198.18.3.3', { host: '198.18.3.3', port: 53, family: 4 }],
    ['198.18.3.3:5353', { host: '198.18.3.3', port: 5353, family: 4 }],
    ['[2001:2::3]', { host: '2001:2::3', port: 53, family: 6 }],
    ['[2001:2::3]:54', { host: '2001:2::3', port: 54, family: 6 }],
  ];
  for (const [text, want] of targets) it(`target ${text}`, () => {
      assert.deepEqual(parseNotifyTarget(text), want);
    });
});
