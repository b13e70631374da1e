/**
 * A steered name's A and AAAA answers to IPv6 clients, seen by a real dig:
 * `sluice dns` in a namespace of its own, fed cluster_load reports over the
 * CURVE control plane by a stand-in for the front nodes
 * (test/fixtures/cluster-load-pub.ts), queried from IPv6 source addresses
 * in 2001:2::/48 (RFC 5180) in several /56s, and with ECS family 2.
 *
 *   c1, c2: dual-stack (an IPv4 and an IPv6 VIP each); c3: IPv4 only.
 *
 * - every client prefix gets A and AAAA from one decision: the same cluster
 *   when it is dual-stack; when A names c3, AAAA names a dual-stack one;
 * - c1 and c2 full: AAAA is NODATA (NOERROR, no answer, the SOA in
 *   authority) and A names c3.
 *
 * The namespace <prefix>-dns6 holds a veth pair (both ends inside; nothing
 * leaves it). Teardown (after(), and 'exit'/SIGINT/SIGTERM hooks) kills
 * whatever runs in the namespace, deletes it and the temp dir.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { writeKeyPair } from '../../src/control/keys.ts';
import type { DnsStatus } from '../../src/dns/status.ts';
import { DnsProcess, testDnsWorkers } from '../helpers/dns.ts';
import { NsProcess, nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const PUB = fileURLToPath(new URL('../fixtures/cluster-load-pub.ts', import.meta.url));
const V4 = '198.18.250.2';
const V6 = '2001:2::2';
/** IPv6 clients, each in a /56 of its own. */
const SOURCES = ['2001:2:0:100::11', '2001:2:0:200::11', '2001:2:0:300::11', '2001:2:0:400::11'];
/** Clients named by ECS family 2 (a resolver speaking for them), more /56s. */
const SUBNETS = Array.from({ length: 12 }, (_, i) => `2001:2:0:${((i + 16) * 256).toString(16)}::/56`);

const VIPS: Record<string, { a: string; aaaa: string | undefined }> = {
  c1: { a: '198.19.1.1', aaaa: '2001:2:1::1' },
  c2: { a: '198.19.2.1', aaaa: '2001:2:2::1' },
  c3: { a: '198.19.3.1', aaaa: undefined },
};
const byA = (ip: string): string | undefined => Object.entries(VIPS).find(([, v]) => v.a === ip)?.[0];
const byAAAA = (ip: string): string | undefined => Object.entries(VIPS).find(([, v]) => v.aaaa === ip)?.[0];

interface Dig {
  status: string;
  answer: { type: string; data: string }[];
  authority: string[];
  subnet: string | undefined;
  raw: string;
}

/** dig's default output: status, answer and authority records, the CLIENT-SUBNET line. */
async function dig(args: readonly string[], ns: string): Promise<Dig> {
  const r = await nsRunAsync(ns, 'dig', ['+time=2', '+tries=2', `@${V6}`, ...args]);
  const out: Dig = { status: /status: (\w+)/.exec(r.stdout)?.[1] ?? `dig failed (${r.code}): ${r.stderr}`, answer: [], authority: [], subnet: undefined, raw: r.stdout };
  let section = '';
  for (const line of r.stdout.split('\n')) {
    const h = /^;; (\w+) SECTION:/.exec(line);
    if (h) section = h[1] ?? '';
    else if (line.trim() === '') section = '';
    else if (line.startsWith('; CLIENT-SUBNET: ')) out.subnet = line.slice('; CLIENT-SUBNET: '.length).trim();
    else if (!line.startsWith(';')) {
      const [, , , type = '', ...data] = line.trim().split(/\s+/);
      if (section === 'ANSWER') out.answer.push({ type, data: data.join(' ') });
      if (section === 'AUTHORITY') out.authority.push(type);
    }
  }
  return out;
}

describe('sluice dns: A and AAAA for a steered name to IPv6 clients (dig)', () => {
  const prefix = testPrefix();
  const ns = `${prefix}-dns6`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dns6-'));
  const teardown = (): void => {
    down(prefix);
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  let pub: NsProcess | undefined;
  const states = async (): Promise<Record<string, string>> => {
    assert.ok(daemon);
    const s = (await daemon.status()) as unknown as DnsStatus;
    return Object.fromEntries(s.clusters.map((c) => [c.name, c.state]));
  };

  before(async () => {
    run('ip', ['netns', 'add', ns]);
    ipBatch(ns, [
      'link set lo up',
      'link add dns0 type veth peer name dns1',
      `addr add ${V4}/24 dev dns0`,
      `addr add ${V6}/64 dev dns0 nodad`,
      ...SOURCES.map((s) => `addr add ${s}/64 dev dns0 nodad`),
      'link set dns0 up',
      'link set dns1 up',
    ]);
    const dns = writeKeyPair(dir, 'dns');
    const fronts = writeKeyPair(dir, 'fronts');
    writeFileSync(
      join(dir, 'example.test.zone'),
      `$ORIGIN example.test.
$TTL 300
@    IN SOA ns1 hostmaster ( 2026112101 3600 600 86400 60 )
     IN NS   ns1
ns1  IN A    ${V4}
     IN AAAA ${V6}
`,
    );
    const endpoint = `tcp://${V4}:7300`;
    writeFileSync(
      join(dir, 'dns.yaml'),
      `name: dns6
listen: ["${V4}:53", "[${V6}]:53"]
zones: [{ file: ${join(dir, 'example.test.zone')} }]
clusters:
${Object.entries(VIPS).map(([name, v]) => `  - { name: ${name}, vips: [${v.a}${v.aaaa === undefined ? '' : `, "${v.aaaa}"`}] }`).join('\n')}
steering:
  names: [{ name: www.example.test, policy: rtt, ttl: 1 }]
  reportSeconds: 1
  downAfterIntervals: 3
workers: ${testDnsWorkers()}
rrl: { enabled: false }
adminSocket: ${join(dir, 'dns.sock')}
control:
  keyFile: ${dns.keyFile}
  subscribe: [{ endpoint: '${endpoint}', publicKey: ${fronts.pubFile} }]
`,
    );
    pub = new NsProcess(ns, [PUB, '--endpoint', endpoint, '--key', fronts.keyFile, '--allow', dns.pubFile, '--clusters', Object.keys(VIPS).join(','), '--every-ms', '200']);
    assert.deepEqual(await pub.next(15_000), { ready: true });
    daemon = new DnsProcess(ns, join(dir, 'dns.yaml'), join(dir, 'dns.sock'));
    await daemon.ready();
    await until(async () => Object.values(await states()).every((s) => s === 'up'), 'every cluster up (cluster_load over the control plane)', 15_000, 200);
  });

  after(async () => {
    try {
      await pub?.stop();
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  it('every IPv6 client prefix (source address or ECS family 2) gets A and AAAA from one decision', async () => {
    const clients: [string, string[]][] = [...SOURCES.map((s): [string, string[]] => [`source ${s}`, ['-b', s]]), ...SUBNETS.map((n): [string, string[]] => [`ECS ${n}`, ['-b', SOURCES[0]!, `+subnet=${n}`]])];
    const seen = new Set<string>();
    for (const [who, args] of clients) {
      const a = await dig([...args, 'www.example.test', 'A'], ns);
      const aaaa = await dig([...args, 'www.example.test', 'AAAA'], ns);
      assert.equal(a.status, 'NOERROR', `${who} A:\n${a.raw}`);
      assert.equal(aaaa.status, 'NOERROR', `${who} AAAA:\n${aaaa.raw}`);
      assert.equal(a.answer.length, 1, `${who} A:\n${a.raw}`);
      assert.equal(aaaa.answer.length, 1, `${who} AAAA:\n${aaaa.raw}`);
      const [ra, r6] = [a.answer[0]!, aaaa.answer[0]!];
      assert.equal(ra.type, 'A');
      assert.equal(r6.type, 'AAAA');
      const ca = byA(ra.data);
      const c6 = byAAAA(r6.data);
      assert.ok(ca !== undefined && c6 !== undefined, `${who}: VIPs of configured clusters: ${ra.data} ${r6.data}`);
      if (ca === 'c3') assert.ok(c6 === 'c1' || c6 === 'c2', `${who}: A names c3 (IPv4 only), AAAA a dual-stack cluster, not ${c6}`);
      else assert.equal(c6, ca, `${who}: A names ${ca}, AAAA must name it too`);
      seen.add(ca);
      // ECS family 2 is echoed; capacity-weighted answers (no RTTs yet) do not depend on the prefix: scope 0.
      if (args.some((x) => x.startsWith('+subnet='))) {
        assert.equal(a.subnet, `${args.find((x) => x.startsWith('+subnet='))!.slice('+subnet='.length)}/0`, a.raw);
      }
    }
    assert.ok(seen.has('c3') && (seen.has('c1') || seen.has('c2')), `both a dual-stack and the IPv4-only cluster were chosen for some prefix: ${[...seen].join(',')}`);
  });

  it('no usable cluster with IPv6 VIPs: AAAA is NODATA with the SOA, A names the IPv4-only cluster', async () => {
    assert.ok(pub);
    assert.deepEqual(await pub.request(JSON.stringify({ available: { c1: 0, c2: 0 } })), { ok: true });
    await until(async () => {
      const s = await states();
      return s['c1'] === 'full' && s['c2'] === 'full' && s['c3'] === 'up';
    }, 'c1 and c2 full, c3 up', 15_000, 200);
    for (const s of SOURCES.slice(0, 2)) {
      const aaaa = await dig(['-b', s, 'www.example.test', 'AAAA'], ns);
      assert.equal(aaaa.status, 'NOERROR', aaaa.raw);
      assert.deepEqual(aaaa.answer, [], aaaa.raw);
      assert.deepEqual(aaaa.authority, ['SOA'], aaaa.raw);
      const a = await dig(['-b', s, 'www.example.test', 'A'], ns);
      assert.deepEqual(a.answer, [{ type: 'A', data: VIPS['c3']!.a }], a.raw);
    }
  });
});
