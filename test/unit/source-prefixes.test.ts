/**
 * `sourceIn` of both families (issue 23): the prefix text (parseSourcePrefix),
 * matching of IPv4 and IPv6 clients (SourcePrefixes: /0, /64, /128, odd
 * lengths, IPv4-mapped as IPv4), the schema's messages, a checkpoint
 * deciding real IPv4 and IPv6 SYNs through the engine, and admission
 * client classes of IPv6 prefixes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Hierarchy } from '../../src/admission/hierarchy.ts';
import { admissionSchema } from '../../src/admission/config.ts';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { clientNumber6 } from '../../src/front/client6.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable } from '../../src/front/connections.ts';
import { FrontEngine } from '../../src/front/engine.ts';
import { REJECT_MARK, serverMark } from '../../src/front/marks.ts';
import { OVERFLOW_BASE, ServiceRuntime } from '../../src/front/service.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { formatIPv6Address, parseIPv6Address } from '../../src/packet/address6.ts';
import { TcpFlag } from '../../src/packet/ipv4.ts';
import { parseSourcePrefix, SourcePrefixes } from '../../src/packet/source_prefixes.ts';
import { Shaper } from '../../src/shaping/shaper.ts';
import { tcp } from '../helpers/packets.ts';
import { tcp6 } from '../helpers/packets6.ts';

const v4 = (t: string): number => parseIPv4Address(t)!;
const w6 = (t: string): Uint32Array => parseIPv6Address(t)!;

describe('parseSourcePrefix', () => {
  it('takes IPv4 and IPv6 prefixes, clears host bits, maps ::ffff:a.b.c.d/96+n to IPv4 /n; refuses the rest', () => {
    const rows: [string, string | undefined][] = [
      ['198.18.0.0/16', '4 198.18.0.0/16'],
      ['198.18.7.9/16', '4 198.18.0.0/16'],
      ['0.0.0.0/0', '4 0.0.0.0/0'],
      ['198.18.0.1/32', '4 198.18.0.1/32'],
      ['2001:2::/48', '6 2001:2::/48'],
      ['2001:0002:0000:0001:0:0:0:0/64', '6 2001:2:0:1::/64'],
      ['2001:2::1:2:3:4/64', '6 2001:2::/64'],
      ['::/0', '6 ::/0'],
      ['2001:2::c/128', '6 2001:2::c/128'],
      ['2001:2:0:180::/57', '6 2001:2:0:180::/57'],
      ['2001:2:0:1::/57', '6 2001:2::/57'],
      ['::ffff:198.18.0.0/112', '4 198.18.0.0/16'],
      ['::ffff:c612:0/112', '4 198.18.0.0/16'],
      ['::ffff:0:0/96', '4 0.0.0.0/0'],
      ['::ffff:198.18.0.5/128', '4 198.18.0.5/32'],
      ['::ffff:0:0/95', '6 ::fffe:0:0/95'],
      ['198.18.0.0', undefined],
      ['198.18.0.0/33', undefined],
      ['198.18.0.0/016', undefined],
      ['198.018.0.0/16', undefined],
      ['198.18.0/16', undefined],
      ['2001:2::', undefined],
      ['2001:2::/129', undefined],
      ['2001:2::/064', undefined],
      ['2001:2::/', undefined],
      ['2001:2:::/48', undefined],
      ['fe80::1%eth0/64', undefined],
      ['[2001:2::]/48', undefined],
      ['', undefined],
    ];
    for (const [text, want] of rows) {
      const p = parseSourcePrefix(text);
      let got: string | undefined;
      if (p?.family === 4) got = `4 ${[p.network >>> 24, (p.network >>> 16) & 255, (p.network >>> 8) & 255, p.network & 255].join('.')}/${p.length}`;
      else if (p?.family === 6) got = `6 ${formatIPv6Address(p.network)}/${p.length}`;
      assert.equal(got, want, text);
    }
  });
});

describe('SourcePrefixes', () => {
  // [prefixes, client (IPv4 dotted or IPv6 text), expected]
  const rows: [string[], string, boolean][] = [
    [['198.18.0.0/16'], '198.18.200.1', true],
    [['198.18.0.0/16'], '198.19.0.1', false],
    [['0.0.0.0/0'], '203.0.113.9', true],
    [['0.0.0.0/0'], '2001:2::1', false],
    [['::/0'], '2001:2::1', true],
    [['::/0'], '198.18.0.1', false],
    [['2001:2:0:1::/64'], '2001:2:0:1:ffff:ffff:ffff:ffff', true],
    [['2001:2:0:1::/64'], '2001:2:0:2::', false],
    [['2001:2::c/128'], '2001:2::c', true],
    [['2001:2::c/128'], '2001:2::d', false],
    [['2001:2:0:80::/57'], '2001:2:0:ff::1', true],
    [['2001:2:0:80::/57'], '2001:2:0:7f::1', false],
    [['2001:2::/33'], '2001:2:7fff::', true],
    [['2001:2::/33'], '2001:2:8000::', false],
    [['2001:2::/127'], '2001:2::1', true],
    [['2001:2::/127'], '2001:2::2', false],
    // Mixed lists: each client meets the entries of its family.
    [['198.18.0.0/16', '2001:2::/48'], '2001:2:0:5::1', true],
    [['198.18.0.0/16', '2001:2::/48'], '198.18.5.1', true],
    [['198.18.0.0/16', '2001:2::/48'], '2001:3::1', false],
    // An IPv4-mapped prefix is the IPv4 one; a client whose IPv6 words are mapped is the IPv4 client.
    [['::ffff:198.18.0.0/112'], '198.18.3.3', true],
    [['198.18.0.0/16'], '::ffff:198.18.3.3', true],
    [['198.18.0.0/16'], '::ffff:198.19.3.3', false],
    [['::/0'], '::ffff:198.18.3.3', false],
    [['0.0.0.0/0'], '::ffff:198.18.3.3', true],
  ];

  it('matches each family against its own entries (table)', () => {
    for (const [list, client, want] of rows) {
      const s = new SourcePrefixes(list);
      const got = client.includes(':') ? s.has6(w6(client), 0) : s.has4(v4(client));
      assert.equal(got, want, `${client} in ${list.join(',')}`);
      // The words may sit anywhere in a stride-4 array (the held pool).
      if (client.includes(':')) {
        const pool = new Uint32Array(12);
        pool.set(w6(client), 8);
        assert.equal(s.has6(pool, 8), want, `${client} at 8`);
      }
    }
  });

  it('a text that is not a prefix is a bug (the schema refuses it first)', () => {
    assert.throws(() => new SourcePrefixes(['2001:2::']), { code: 'ERR_SLUICE_INVALID_ARGUMENT' });
  });
});

const FRONT = (checkpoints: string, admission = '') => `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11 }
    checkpoints:
${checkpoints}
${admission}
`;

function problems(text: string): string {
  try {
    parseConfig(frontConfigSchema, text, 't');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.message;
  }
  return assert.fail('accepted');
}

describe('sourceIn in the schema', () => {
  it('takes both families in one list; a bad entry names its key and the fix', () => {
    const cfg = parseConfig(frontConfigSchema, FRONT(`      - { name: c, kind: counter, when: { sourceIn: [198.18.0.0/16, '2001:2::/48', '::ffff:198.19.0.0/112'] } }`), 't');
    assert.deepEqual(cfg.services[0]!.checkpoints[0]!.when?.sourceIn, ['198.18.0.0/16', '2001:2::/48', '::ffff:198.19.0.0/112']);
    const msg = problems(FRONT(`      - { name: c, kind: counter, when: { sourceIn: [198.18.0.0/16, '2001:2::'] } }`));
    assert.match(msg, /services\[0\]\.checkpoints\[0\]\.when\.sourceIn\[1\]/);
    assert.match(msg, /"2001:2::" is not a prefix: write an IPv4 prefix like 198\.18\.0\.0\/16 or an IPv6 prefix like 2001:2::\/48/);
    assert.match(problems(FRONT(`      - { name: c, kind: counter, when: { sourceIn: [] } }`)), /sourceIn: list at least one prefix/);
    const adm = admissionSchema.safeParse({ services: [{ service: 'www', operations: [{ name: 'x', when: { sourceIn: ['2001:2::/200'] } }] }] });
    assert.equal(adm.success, false);
    assert.deepEqual(adm.error.issues[0]?.path, ['services', 0, 'operations', 0, 'when', 'sourceIn', 0]);
  });
});

describe('a checkpoint with sourceIn of both families, real SYNs', () => {
  const VIP6 = '2001:2:0:1::1';
  function setup(checkpoints: string) {
    const cfg = parseConfig(frontConfigSchema, FRONT(checkpoints), 't');
    const v4svc = cfg.services[0]!;
    // An IPv6 twin of the service (the front schema takes IPv4 VIPs only here).
    const v6svc = { ...v4svc, name: 'www6', vip: VIP6, servers: v4svc.servers.map((s) => ({ ...s, address: '2001:2:0:2::b' })) };
    const services = [new ServiceRuntime(0, v4svc, cfg.overflow), new ServiceRuntime(1, v6svc, cfg.overflow)];
    const shaper = new Shaper({ cluster: [], services: [v4svc, v6svc], overflow: [] }, { maxHeld: 16, connections: 100, overflowBase: OVERFLOW_BASE, scheduler: () => ({ arm: () => undefined }) });
    const table = new ConnectionTable(100, 1000, { released: () => undefined });
    const e = new FrontEngine(services, table, shaper);
    let id = 0;
    const decide = (src: string, port: number): number => {
      const p = src.includes(':') ? tcp6({ src, dst: VIP6 }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn }) : tcp({ src, dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });
      assert.equal(e.decide(p, 0, p.length, 0, ++id), Verdict.Accept);
      return e.mark;
    };
    return { decide, shaper };
  }

  it('rejects exactly the clients in the list, of either family; IPv4 decided as before', () => {
    const { decide, shaper } = setup(`      - { name: deny, kind: counter, criterion: none, when: { sourceIn: [198.18.11.0/24, '2001:2:0:66::/64', '2001:2:1::7/128'] }, action: reject }`);
    const cases: [string, boolean][] = [
      ['198.18.11.2', true],
      ['198.18.12.2', false],
      ['2001:2:0:66::1', true],
      ['2001:2:0:66:ffff::9', true],
      ['2001:2:0:67::1', false],
      ['2001:2:1::7', true],
      ['2001:2:1::8', false],
    ];
    let port = 1000;
    for (const [src, rejected] of cases) {
      const service = src.includes(':') ? 1 : 0;
      assert.equal(decide(src, ++port), rejected ? REJECT_MARK : serverMark(service, 0), src);
    }
    // One rule per service's list (IPv4 service 0, IPv6 service 1).
    const [r4, r6] = shaper.all;
    assert.deepEqual([r4!.counts.matched, r6!.counts.matched, r6!.counts.rejected], [1, 3, 3]);
  });

  it('Checkpoint.matches: an IPv6 client number with IPv4-mapped words is the IPv4 client', () => {
    const { shaper } = setup(`      - { name: c, kind: counter, when: { sourceIn: [198.18.11.0/24] } }`);
    const cp = shaper.all[0]!;
    const mapped = w6('::ffff:198.18.11.2');
    assert.equal(cp.matches(clientNumber6(mapped), mapped, 0, 80, 0, -1, 0), true);
    const other = w6('::ffff:198.18.12.2');
    assert.equal(cp.matches(clientNumber6(other), other, 0, 80, 0, -1, 0), false);
    assert.equal(cp.matches(v4('198.18.11.9'), new Uint32Array(4), 0, 80, 0, -1, 0), true);
  });
});

describe('admission client classes of IPv6 prefixes', () => {
  it('classifies IPv6 clients by their IPv6 prefixes and IPv4 clients as before', () => {
    const cfg = admissionSchema.parse({
      services: [
        {
          service: 'web',
          operations: [
            { name: 'partners', weight: 0, when: { sourceIn: ['198.18.64.0/20', '2001:2:0:40::/60'] } },
            { name: 'bulk', weight: 4, when: { sourceIn: ['2001:2:0:100::/56'] }, localLimit: 8 },
          ],
        },
      ],
    });
    const h = new Hierarchy(cfg, ['web'], 1);
    const NO_WORDS = new Uint32Array(4);
    const op = (client: string): string => {
      if (client.includes(':')) {
        const w = w6(client);
        h.admit(0, clientNumber6(w), w, 0, 80, 0);
      } else h.admit(0, v4(client), NO_WORDS, 0, 80, 0);
      return h.last?.name ?? '';
    };
    const rows: [string, string][] = [
      ['198.18.70.1', 'web/partners'],
      ['198.18.80.1', 'web/other'],
      ['2001:2:0:4f::1', 'web/partners'],
      ['2001:2:0:50::1', 'web/other'],
      ['2001:2:0:1ff::1', 'web/bulk'],
      ['2001:2:0:200::1', 'web/other'],
      ['::ffff:198.18.70.1', 'web/partners'],
    ];
    for (const [client, want] of rows) assert.equal(op(client), want, client);
    // The bulk class's own limit (8 tokens, cost 4) holds IPv6 clients: 2 admitted, then rejected.
    const fresh = new Hierarchy(cfg, ['web'], 1);
    const w = w6('2001:2:0:100::5');
    const verdicts = [0, 1, 2].map(() => fresh.admit(0, clientNumber6(w), w, 0, 80, 1));
    assert.deepEqual(verdicts.map((v) => v === 0), [true, true, false]);
  });
});
