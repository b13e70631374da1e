/**
 * Steered names in both families (issue 23, DNS): a real DnsDaemon (not
 * listening) loaded from YAML, queries built here and answered by its
 * Answerer at injected times, responses read from the octets.
 *
 * - config: cluster VIPs and sorry addresses in either family in one list,
 *   normalised (RFC 5952), refused with the key and the fix;
 * - one decision per (name, client prefix) serves A and AAAA: the same
 *   clusters whenever they are dual-stack, one memo entry for both;
 * - a cluster without IPv6 VIPs is passed over for AAAA (the next usable
 *   cluster in the ranking that has some), and NODATA (NOERROR, no answer,
 *   the SOA in authority) only when no usable cluster has any;
 * - fallbacks (all, sorry, servfail) cover AAAA;
 * - ECS family 2 names the client's /ipv6Prefix (or its own shorter
 *   prefix) and drives the same decision as a source address in it, with
 *   the scope of the prefix decided on (RFC 7871 §7.2.1).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { validateConfig } from '../../src/config/load.ts';
import { dnsConfigSchema } from '../../src/dns/config.ts';
import { DnsDaemon } from '../../src/dns/daemon.ts';

// --- queries and responses as octets -------------------------------------------------

const u16 = (v: number): number[] => [(v >> 8) & 0xff, v & 0xff];
const QT = { A: 1, SOA: 6, AAAA: 28, OPT: 41, ANY: 255 } as const;

interface Ecs {
  family: number;
  source: number;
  /** Address octets, exactly ceil(source / 8) of them. */
  address: number[];
}

function query(name: string, qtype: number, ecs?: Ecs): Buffer {
  const labels = name.split('.').flatMap((l) => [l.length, ...Buffer.from(l, 'latin1')]);
  const opt = ecs === undefined ? [] : (() => {
    const option = [...u16(8), ...u16(4 + ecs.address.length), ...u16(ecs.family), ecs.source, 0, ...ecs.address];
    return [0, ...u16(QT.OPT), ...u16(1232), 0, 0, 0, 0, ...u16(option.length), ...option];
  })();
  return Buffer.from([...u16(0x4242), ...u16(0x0000), ...u16(1), 0, 0, 0, 0, ...u16(ecs === undefined ? 0 : 1), ...labels, 0, ...u16(qtype), ...u16(1), ...opt]);
}

interface Reply {
  rcode: number;
  aa: boolean;
  /** "A 198.19.1.1", "AAAA 2001:2:1::1" (other types by number). */
  answer: string[];
  answerTtls: number[];
  authorityTypes: number[];
  /** The ECS scope prefix length returned, undefined without ECS. */
  scope: number | undefined;
}

function skipName(b: Buffer, p: number): number {
  for (;;) {
    const l = b[p] ?? 0;
    if (l === 0) return p + 1;
    if ((l & 0xc0) === 0xc0) return p + 2;
    p += l + 1;
  }
}

function ipv6Text(b: Buffer): string {
  const groups = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(2 * i).toString(16));
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}

function read(b: Buffer): Reply {
  const r: Reply = { rcode: (b[3] ?? 0) & 0x0f, aa: ((b[2] ?? 0) & 0x04) !== 0, answer: [], answerTtls: [], authorityTypes: [], scope: undefined };
  const counts = [b.readUInt16BE(6), b.readUInt16BE(8), b.readUInt16BE(10)];
  let p = skipName(b, 12) + 4;
  counts.forEach((n, section) => {
    for (let i = 0; i < n; i++) {
      p = skipName(b, p);
      const type = b.readUInt16BE(p);
      const ttl = b.readUInt32BE(p + 4);
      const rdlen = b.readUInt16BE(p + 8);
      const rd = b.subarray(p + 10, p + 10 + rdlen);
      p += 10 + rdlen;
      if (section === 0) {
        r.answer.push(type === QT.A ? `A ${[...rd].join('.')}` : type === QT.AAAA ? `AAAA ${ipv6Text(rd)}` : `TYPE${type}`);
        r.answerTtls.push(ttl);
      } else if (section === 1) r.authorityTypes.push(type);
      else if (type === QT.OPT) {
        for (let x = 0; x + 4 <= rd.length; ) {
          const code = rd.readUInt16BE(x);
          const len = rd.readUInt16BE(x + 2);
          if (code === 8) r.scope = rd[x + 7];
          x += 4 + len;
        }
      }
    }
  });
  return r;
}

// --- the daemon ------------------------------------------------------------------------

const ZONE = `$ORIGIN example.test.
$TTL 300
@       IN SOA ns1 hostmaster 1 3600 600 86400 60
        IN NS  ns1
ns1     IN A   198.18.2.2
; static data at a steered name: answered only for a family steering has no address for
www  60 IN A   198.18.250.10
`;

// Unquoted IPv6 in a flow list (YAML 1.2 reads it as a string), mixed case
// and a redundant zero group: normalised to RFC 5952.
const CONFIG = (dir: string): string => `name: dns1
listen: ["127.0.0.1:53"]
zones: [{ file: ${join(dir, 'z.zone')} }]
clusters:
  - { name: c1, vips: [198.19.1.1, "2001:2:1::1"] }
  - { name: c2, vips: [2001:2:2:0::1, 198.19.2.1] }
  - { name: c3, vips: [198.19.3.1] }
  - { name: c4, vips: ["2001:2:4::1"] }
steering:
  names:
    - { name: www.example.test, policy: rtt, ttl: 5 }
    - { name: cap.example.test, policy: capacity, ttl: 5 }
    - { name: two.example.test, policy: capacity, answers: 2, ttl: 5 }
    - { name: sorry.example.test, ttl: 5, fallback: { mode: sorry, addresses: [198.18.2.99, "2001:2::99"] } }
    - { name: sorry4.example.test, ttl: 5, fallback: { mode: sorry, addresses: [198.18.2.99] } }
    - { name: fail.example.test, ttl: 5, fallback: { mode: servfail } }
  reportSeconds: 1
  downAfterIntervals: 3
rrl: { enabled: false }
adminSocket: ${join(dir, 'dns.sock')}
`;

const VIPS: Record<string, { a: string[]; aaaa: string[] }> = {
  c1: { a: ['198.19.1.1'], aaaa: ['2001:2:1::1'] },
  c2: { a: ['198.19.2.1'], aaaa: ['2001:2:2::1'] },
  c3: { a: ['198.19.3.1'], aaaa: [] },
  c4: { a: [], aaaa: ['2001:2:4::1'] },
};
const clusterOf = (rr: string): string => Object.entries(VIPS).find(([, v]) => [...v.a.map((a) => `A ${a}`), ...v.aaaa.map((a) => `AAAA ${a}`)].includes(rr))?.[0] ?? `? ${rr}`;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function daemon(): DnsDaemon {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dns6-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'z.zone'), ZONE);
  writeFileSync(join(dir, 'dns.yaml'), CONFIG(dir));
  return new DnsDaemon(join(dir, 'dns.yaml'));
}

/** Times are injected: reports at T, queries just after (no wall clock in any assertion). */
const T = 1_000_000;

function report(d: DnsDaemon, clusters: readonly string[], now = T): void {
  for (const c of clusters) assert.ok(d.clusters.receive({ cluster: c, vips: [], capacity: 100, load: 0, available: 100, serversUp: 3, serversTotal: 3 }, now));
  d.answerer.steering.changed();
}

function ask(d: DnsDaemon, name: string, qtype: number, source: string, ecs?: Ecs, now = T + 1): Reply {
  const q = query(name, qtype, ecs);
  const n = d.answerer.respond(q, q.length, source, false, now);
  assert.ok(n > 0, `an answer to ${name}/${qtype} from ${source}`);
  return read(Buffer.from(d.answerer.writer.buf.subarray(0, n)));
}

const NODATA = (r: Reply, what: string): void => {
  assert.equal(r.rcode, 0, `${what}: NOERROR`);
  assert.ok(r.aa, `${what}: authoritative`);
  assert.deepEqual(r.answer, [], `${what}: no answer`);
  assert.deepEqual(r.authorityTypes, [QT.SOA], `${what}: the SOA in authority`);
};

// --- the tests -----------------------------------------------------------------------

describe('config: VIPs and sorry addresses in either family', () => {
  it('one list per cluster, IPv6 normalised to RFC 5952, split per family', () => {
    const d = daemon();
    assert.deepEqual(d.config.clusters.map((c) => c.vips), [['198.19.1.1', '2001:2:1::1'], ['2001:2:2::1', '198.19.2.1'], ['198.19.3.1'], ['2001:2:4::1']]);
    assert.deepEqual(d.clusters.clusters.map((c) => [c.vips4, c.vips6]), [[['198.19.1.1'], ['2001:2:1::1']], [['198.19.2.1'], ['2001:2:2::1']], [['198.19.3.1'], []], [[], ['2001:2:4::1']]]);
    assert.deepEqual(d.config.steering.names[3]?.fallback.addresses, ['198.18.2.99', '2001:2::99']);
  });

  const base = (clusters: unknown, addresses: unknown = []) => ({
    name: 'dns1',
    listen: ['127.0.0.1:53'],
    zones: [{ file: '/dev/null' }],
    clusters,
    steering: { names: [{ name: 'www.example.test', fallback: { mode: 'all', addresses } }] },
  });
  const bad: [string, unknown, string, RegExp][] = [
    ['not an address', base([{ name: 'c1', vips: ['198.19.1'] }]), 'clusters[0].vips[0]', /"198\.19\.1" is not an IPv4 or IPv6 address: write e\.g\. 198\.19\.1\.1 or 2001:db8:1::1/],
    ['brackets', base([{ name: 'c1', vips: ['[2001:db8::1]'] }]), 'clusters[0].vips[0]', /without brackets or zone index/],
    ['zone index', base([{ name: 'c1', vips: ['fe80::1%eth0'] }]), 'clusters[0].vips[0]', /not an IPv4 or IPv6 address/],
    ['IPv4-mapped', base([{ name: 'c1', vips: ['::ffff:198.19.1.1'] }]), 'clusters[0].vips[0]', /IPv4-mapped IPv6 address: write the IPv4 address itself \(198\.19\.1\.1\)/],
    ['the same VIP twice, spelt differently', base([{ name: 'c1', vips: ['2001:db8::1', '2001:DB8:0::1'] }]), 'clusters[0].vips[1]', /2001:db8::1 is listed twice in a cluster's vips: list each address once/],
    ['no VIP', base([{ name: 'c1', vips: [] }]), 'clusters[0].vips', /at least one VIP/],
    ['a number', base([{ name: 'c1', vips: [7] }]), 'clusters[0].vips[0]', /expected an IPv4 or IPv6 address/],
    ['sorry address', base([{ name: 'c1', vips: ['198.19.1.1'] }], ['2001:db8::zz']), 'steering.names[0].fallback.addresses[0]', /not an IPv4 or IPv6 address/],
  ];
  for (const [what, cfg, path, message] of bad) {
    it(`refused: ${what} (${path})`, () => {
      assert.throws(
        () => validateConfig(dnsConfigSchema, cfg, 'test'),
        (e: Error & { problems?: { path: string; message: string }[] }) => {
          const p = e.problems?.find((x) => x.path === path);
          assert.ok(p, `a problem at ${path}: ${JSON.stringify(e.problems)}`);
          assert.match(p.message, message);
          return true;
        },
      );
    });
  }
  it('IPv6-only and dual-stack clusters and sorry addresses are accepted', () => {
    const cfg = validateConfig(dnsConfigSchema, base([{ name: 'c1', vips: ['2001:db8::1'] }, { name: 'c2', vips: ['198.19.2.1', '2001:db8:2::1'] }], ['2001:db8::99', '198.18.2.99']), 'test');
    assert.deepEqual(cfg.clusters[0]?.vips, ['2001:db8::1']);
  });
});

describe('fallback (no cluster usable) covers AAAA', () => {
  const d = daemon();
  const rows: [string, number, { rcode: number; answer?: string[]; nodata?: true }][] = [
    ['www', QT.A, { rcode: 0, answer: ['A 198.19.1.1', 'A 198.19.2.1', 'A 198.19.3.1'] }],
    ['www', QT.AAAA, { rcode: 0, answer: ['AAAA 2001:2:1::1', 'AAAA 2001:2:2::1', 'AAAA 2001:2:4::1'] }],
    ['www', QT.ANY, { rcode: 0, answer: ['A 198.19.1.1', 'A 198.19.2.1', 'A 198.19.3.1', 'AAAA 2001:2:1::1', 'AAAA 2001:2:2::1', 'AAAA 2001:2:4::1'] }],
    ['sorry', QT.A, { rcode: 0, answer: ['A 198.18.2.99'] }],
    ['sorry', QT.AAAA, { rcode: 0, answer: ['AAAA 2001:2::99'] }],
    ['sorry4', QT.A, { rcode: 0, answer: ['A 198.18.2.99'] }],
    ['sorry4', QT.AAAA, { rcode: 0, nodata: true }],
    ['fail', QT.A, { rcode: 2 }],
    ['fail', QT.AAAA, { rcode: 2 }],
  ];
  for (const [name, qtype, want] of rows) {
    for (const source of ['198.18.11.2', '2001:2:0:1200::7']) {
      it(`${name} ${qtype === QT.A ? 'A' : qtype === QT.AAAA ? 'AAAA' : 'ANY'} from ${source}`, () => {
        const r = ask(d, `${name}.example.test`, qtype, source);
        assert.equal(r.rcode, want.rcode);
        if (want.nodata) NODATA(r, `${name}/${qtype}`);
        if (want.answer) {
          assert.deepEqual(r.answer, want.answer);
          assert.ok(r.answerTtls.every((t) => t === 5), 'the steered TTL');
        }
      });
    }
  }
  it('fallback answers are counted as such, by family', () => {
    assert.ok(d.answerer.counters.steeredFallback >= 12);
  });
});

describe('one decision per client prefix answers A and AAAA', () => {
  it('dual-stack clusters: the same cluster for A and AAAA from every prefix, one decision for both', () => {
    const d = daemon();
    report(d, ['c1', 'c2']);
    const seen = new Set<string>();
    const before = d.answerer.steering.decisions;
    const sources = [...Array.from({ length: 48 }, (_, i) => `198.18.${i}.9`), ...Array.from({ length: 48 }, (_, i) => `2001:2:0:${(i * 256).toString(16)}::9`)];
    for (const source of sources) {
      for (const name of ['www', 'cap']) {
        const a = ask(d, `${name}.example.test`, QT.A, source);
        const aaaa = ask(d, `${name}.example.test`, QT.AAAA, source);
        assert.equal(a.answer.length, 1, `${name} A from ${source}`);
        assert.equal(aaaa.answer.length, 1, `${name} AAAA from ${source}`);
        const ca = clusterOf(a.answer[0] ?? '');
        assert.equal(clusterOf(aaaa.answer[0] ?? ''), ca, `${name} from ${source}: A ${a.answer.join()} but AAAA ${aaaa.answer.join()}`);
        seen.add(ca);
      }
    }
    assert.deepEqual([...seen].sort(), ['c1', 'c2'], 'both clusters are chosen over the prefixes (the test can tell them apart)');
    assert.equal(d.answerer.steering.decisions - before, sources.length * 2, 'one decision per (name, prefix), shared by A and AAAA');
  });

  it('answers: 2 — both families name the same two clusters, in the same order', () => {
    const d = daemon();
    report(d, ['c1', 'c2']);
    for (const source of ['198.18.11.2', '198.18.12.2', '2001:2:0:1200::7', '2001:2:0:1300::7']) {
      const a = ask(d, 'two.example.test', QT.A, source).answer.map(clusterOf);
      const aaaa = ask(d, 'two.example.test', QT.AAAA, source).answer.map(clusterOf);
      assert.equal(a.length, 2);
      assert.deepEqual(aaaa, a, source);
    }
  });

  it('a cluster without IPv6 VIPs is passed over for AAAA: the next usable one in the ranking with some', () => {
    const d = daemon();
    report(d, ['c1', 'c2', 'c3']);
    const src = '2001:2:0:1200::7';
    const key = '6:2001:2:0:1200::/56';
    // RTTs: c3 nearest (IPv4 only), then c2, then c1.
    d.rtt.set(key, 2, 10, 3, 3, T);
    d.rtt.set(key, 1, 20, 3, 3, T);
    d.rtt.set(key, 0, 30, 3, 3, T);
    d.answerer.steering.changed();
    assert.deepEqual(ask(d, 'www.example.test', QT.A, src).answer, ['A 198.19.3.1']);
    assert.deepEqual(ask(d, 'www.example.test', QT.AAAA, src).answer, ['AAAA 2001:2:2::1'], 'c2: the nearest with IPv6 VIPs');
    const recent = d.answerer.steering.recent(1);
    assert.equal(recent.length, 1);
    assert.match(recent[0]!.reason, /^rtt:c3=10\.0ms.*;aaaa:c2$/);
    assert.deepEqual(recent[0]!.clusters, ['c3', 'c2']);
    assert.deepEqual(recent[0]!.vips, ['198.19.3.1', '2001:2:2::1']);
    // ANY holds both, from the same decision.
    assert.deepEqual(ask(d, 'www.example.test', QT.ANY, src).answer, ['A 198.19.3.1', 'AAAA 2001:2:2::1']);
    // The steered-by-cluster counts follow the family answered.
    const by = d.answerer.steeredByCluster;
    assert.deepEqual([by[0], by[1], by[2], by[3]], [0, 2, 2, 0]);
  });

  it('no usable cluster has IPv6 VIPs: AAAA is NODATA (the SOA in authority), A is steered', () => {
    const d = daemon();
    report(d, ['c3']);
    for (const source of ['198.18.11.2', '2001:2:0:1200::7']) {
      assert.deepEqual(ask(d, 'www.example.test', QT.A, source).answer, ['A 198.19.3.1']);
      NODATA(ask(d, 'www.example.test', QT.AAAA, source), `AAAA from ${source}`);
      NODATA(ask(d, 'cap.example.test', QT.AAAA, source), `cap AAAA from ${source}`);
    }
    assert.equal(d.answerer.counters.nodata, 4);
  });

  it('no usable cluster has IPv4 VIPs: A comes from the zone (its static record, or NODATA), AAAA is steered', () => {
    const d = daemon();
    report(d, ['c4']);
    assert.deepEqual(ask(d, 'www.example.test', QT.AAAA, '198.18.11.2').answer, ['AAAA 2001:2:4::1']);
    const a = ask(d, 'www.example.test', QT.A, '198.18.11.2');
    assert.deepEqual(a.answer, ['A 198.18.250.10'], 'the zone\'s static A at the steered name');
    assert.deepEqual(a.answerTtls, [60]);
    NODATA(ask(d, 'cap.example.test', QT.A, '198.18.11.2'), 'cap A');
  });
});

describe('ECS family 2 drives the same decision as a source address in it', () => {
  const d = daemon();
  report(d, ['c1', 'c2', 'c3']);
  // The /56 of 2001:2:0:1200::/56 is nearest c2; the /48 2001:2::/48 nearest c1;
  // 198.18.11.0/24 nearest c3 (IPv4 only: its AAAA goes to the next, c1).
  const set = (key: string, rtts: number[]): void => {
    rtts.forEach((r, i) => {
      d.rtt.set(key, i, r, 3, 3, T);
    });
  };
  set('6:2001:2:0:1200::/56', [30, 10, 50]);
  set('6:2001:2::/48', [10, 30, 50]);
  set('4:198.18.11.0/24', [20, 30, 10]);
  d.answerer.steering.changed();
  const v6 = (bytes: number): number[] => [0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 5].slice(0, bytes);

  // [what, source address, ECS, A cluster, AAAA cluster, scope returned]
  const rows: [string, string, Ecs | undefined, string, string, number | undefined][] = [
    ['source address in the /56, no ECS', '2001:2:0:1234::5', undefined, 'c2', 'c2', undefined],
    ['ECS 2 /56', '198.18.250.1', { family: 2, source: 56, address: v6(7).map((b, i) => (i === 6 ? 0x12 : b)) }, 'c2', 'c2', 56],
    ['ECS 2 /64: cut at our /56', '198.18.250.1', { family: 2, source: 64, address: v6(8) }, 'c2', 'c2', 56],
    ['ECS 2 /128: cut at our /56', '198.18.250.1', { family: 2, source: 128, address: v6(16) }, 'c2', 'c2', 56],
    ['ECS 2 /57 (bit 57 clear)', '2001:2:ffff::1', { family: 2, source: 57, address: [0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x12, 0x00] }, 'c2', 'c2', 56],
    ['ECS 2 /48: decided on the /48, scope 48', '198.18.250.1', { family: 2, source: 48, address: v6(6) }, 'c1', 'c1', 48],
    ['ECS 2 /0 (address withheld): the source address decides, scope 0', '2001:2:0:1234::5', { family: 2, source: 0, address: [] }, 'c2', 'c2', 0],
    ['ECS 1 /24 from an IPv6 source: the IPv4 prefix decides', '2001:2:0:1234::5', { family: 1, source: 24, address: [198, 18, 11] }, 'c3', 'c1', 24],
  ];
  for (const [what, source, ecs, ca, caaaa, scope] of rows) {
    it(what, () => {
      const a = ask(d, 'www.example.test', QT.A, source, ecs);
      const aaaa = ask(d, 'www.example.test', QT.AAAA, source, ecs);
      assert.deepEqual(a.answer.map(clusterOf), [ca], `A: ${a.answer.join()}`);
      assert.deepEqual(aaaa.answer.map(clusterOf), [caaaa], `AAAA: ${aaaa.answer.join()}`);
      assert.equal(a.scope, scope, 'A scope');
      assert.equal(aaaa.scope, scope, 'AAAA scope');
    });
  }

  it('the source address, ECS /56, /64, /128, /57 and /0 share one decision (one memo entry)', () => {
    const prefixes = d.answerer.steering.recent(100).map((x) => x.prefix).sort();
    assert.deepEqual(prefixes, ['198.18.11.0/24', '2001:2:0:1200::/56', '2001:2::/48']);
    assert.equal(d.answerer.steering.decisions, 3);
  });

  it('an unmeasured prefix gets a capacity-weighted answer with scope 0 (it does not depend on the prefix)', () => {
    const r = ask(d, 'www.example.test', QT.AAAA, '198.18.250.1', { family: 2, source: 56, address: [0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x77] });
    assert.equal(r.answer.length, 1);
    assert.equal(r.scope, 0);
  });
});
