import assert from 'node:assert/strict';
import { BlockList, isIPv6 } from 'node:net';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors/errors.ts';
import { inPrefix, parseIPv4Address } from '../../src/packet/address.ts';
import { ipv6Twin, ipv6TwinNetwork, namespacesOf, planTestbed } from '../../scripts/testbed/plan.ts';

const BENCH_NET = parseIPv4Address('198.18.0.0') ?? 0;
/** RFC 5180's benchmarking range. */
const BENCH6 = new BlockList();
BENCH6.addSubnet('2001:2::', 48, 'ipv6');

/** Every IPv6 address of a plan, with the IPv4 address it twins ('' for an IPv6-only client's). */
function allAddresses6(plan: ReturnType<typeof planTestbed>): [string, string][] {
  return [
    ...plan.dnsServers.flatMap((d): [string, string][] => [[d.address6, d.address], [d.gateway6, d.gateway]]),
    ...plan.clients.flatMap((c): [string, string][] => [
      [c.address6, c.address],
      [c.gateway6, c.gateway],
      ...c.extraAddresses6.map((a, i): [string, string] => [a, c.extraAddresses[i] ?? '?']),
    ]),
    ...plan.ipv6OnlyClients.flatMap((c): [string, string][] => [[c.address6, ''], [c.gateway6, '']]),
    ...plan.clusters.flatMap((k): [string, string][] => [
      [k.uplinkAddress6, k.uplinkAddress],
      [k.wanSideAddress6, k.wanSideAddress],
      [k.lanAddress6, k.lanAddress],
      [k.vip6, k.vip],
      ...k.servers.map((s): [string, string] => [s.address6, s.address]),
      ...(k.fronts.length > 1
        ? k.fronts.flatMap((f): [string, string][] => [[f.uplinkAddress6, f.uplinkAddress], [f.lanAddress6, f.lanAddress], [f.syncAddress6 ?? '', f.syncAddress ?? '?']])
        : []),
    ]),
  ];
}

function allAddresses(plan: ReturnType<typeof planTestbed>): string[] {
  return [
    ...plan.dnsServers.flatMap((d) => [d.address, d.gateway]),
    ...plan.clients.flatMap((c) => [c.address, c.gateway, ...c.extraAddresses]),
    ...plan.clusters.flatMap((k) => [
      k.uplinkAddress,
      k.wanSideAddress,
      k.lanAddress,
      k.vip,
      ...k.servers.map((s) => s.address),
      // A single front's own addresses are the cluster's; a pair's are their own.
      ...(k.fronts.length > 1 ? k.fronts.flatMap((f) => [f.uplinkAddress, f.lanAddress, f.syncAddress ?? '']) : []),
    ]),
  ];
}

describe('testbed plan', () => {
  it('default site: WAN, 2 clients, DNS, 2 clusters of 3 servers each', () => {
    const plan = planTestbed({ prefix: 'tb1' });
    assert.equal(plan.clients.length, 2);
    assert.equal(plan.clusters.length, 2);
    assert.deepEqual(
      plan.clusters.map((k) => k.servers.map((s) => s.id)),
      [
        ['s1a', 's1b', 's1c'],
        ['s2a', 's2b', 's2c'],
      ],
    );
    assert.equal(namespacesOf(plan).length, 1 + 1 + 2 + 2 * 4);
  });

  it('every address is unique and inside 198.18.0.0/15', () => {
    const plan = planTestbed({ prefix: 'tb1', clients: 9, clusters: 9, serversPerCluster: 26, extraClientAddresses: 20 });
    const addrs = allAddresses(plan);
    assert.equal(new Set(addrs).size, addrs.length);
    for (const a of addrs) {
      const n = parseIPv4Address(a);
      assert.ok(n !== undefined && inPrefix(n, BENCH_NET, 15), `${a} outside 198.18.0.0/15`);
    }
  });

  it('every namespace carries the prefix; interface names fit IFNAMSIZ', () => {
    const plan = planTestbed({ prefix: 'abcdefghijkl', clients: 9, clusters: 9, serversPerCluster: 26 });
    for (const ns of namespacesOf(plan)) assert.ok(ns.name.startsWith('abcdefghijkl-'));
    const ifnames = [...plan.clients.map((c) => c.wanIf), ...plan.clusters.flatMap((k) => [k.wanIf, ...k.servers.map((s) => s.frontIf)])];
    for (const n of ifnames) assert.ok(n.length <= 15, n);
  });

  it('front-node pairs and two DNS servers: every address unique, in 198.18.0.0/15, names fit IFNAMSIZ', () => {
    const plan = planTestbed({ prefix: 'abcdefghijkl', clients: 9, clusters: 9, serversPerCluster: 26, frontsPerCluster: 2, dnsServers: 2 });
    const addrs = allAddresses(plan);
    assert.equal(new Set(addrs).size, addrs.length);
    for (const a of addrs) {
      const n = parseIPv4Address(a);
      assert.ok(n !== undefined && inPrefix(n, BENCH_NET, 15), `${a} outside 198.18.0.0/15`);
    }
    // wan + 2 dns + 9 clients + 9 × (LAN switch + 2 fronts + 26 servers)
    assert.equal(namespacesOf(plan).length, 1 + 2 + 9 + 9 * (1 + 2 + 26));
    for (const ns of namespacesOf(plan)) assert.ok(ns.name.startsWith('abcdefghijkl-'));
    for (const k of plan.clusters) {
      assert.ok(`${k.wanIf}p2`.length <= 15);
      const [a, b] = k.fronts;
      assert.ok(a && b);
      // The WAN routes the VIPs to the VRRP virtual address; servers use the LAN virtual address.
      assert.equal(k.uplinkAddress, `198.18.${String(100 + k.index)}.10`);
      assert.ok(k.servers.every((s) => s.gateway === k.lanAddress));
      assert.notEqual(a.priority, b.priority);
      assert.deepEqual([a.id, b.id], [`fr${String(k.index)}a`, `fr${String(k.index)}b`]);
    }
    assert.deepEqual(plan.dnsServers.map((d) => [d.id, d.address]), [['dns', '198.18.2.2'], ['dns2', '198.18.3.2']]);
  });

  it('one front per cluster by default: the cluster\'s addresses are the front\'s own (as before pairs)', () => {
    const plan = planTestbed({ prefix: 'tb1' });
    for (const k of plan.clusters) {
      assert.equal(k.fronts.length, 1);
      assert.equal(k.front.uplinkAddress, k.uplinkAddress);
      assert.equal(k.front.lanAddress, k.lanAddress);
      assert.equal(k.front.id, `fr${String(k.index)}`);
      assert.equal(k.lanSwitch, undefined);
    }
  });

  it('default delays: each client near one cluster (10 ms), far from the other (40 ms)', () => {
    const plan = planTestbed({ prefix: 'tb1' });
    assert.deepEqual(
      plan.delays.map((d) => [d.client, d.cluster, d.oneWayMs]),
      [
        [1, 1, 10],
        [1, 2, 40],
        [2, 1, 40],
        [2, 2, 10],
      ],
    );
  });

  it('configured delays override defaults', () => {
    const plan = planTestbed({ prefix: 'tb1', delaysMs: { '1:2': 25, '2:1': 0 } });
    assert.equal(plan.delays.find((d) => d.client === 1 && d.cluster === 2)?.oneWayMs, 25);
    assert.equal(plan.delays.find((d) => d.client === 2 && d.cluster === 1)?.oneWayMs, 0);
  });

  it('IPv6 twins: 198.18.X.Y -> 2001:2:0:X::Y, VIPs 198.19.X.Y -> 2001:2:0:1XXX::Y, in RFC 5952 text', () => {
    assert.equal(ipv6Twin('198.18.201.11'), '2001:2:0:201::11');
    assert.equal(ipv6Twin('198.18.11.2'), '2001:2:0:11::2');
    assert.equal(ipv6Twin('198.19.1.1'), '2001:2:0:1001::1');
    assert.equal(ipv6Twin('198.19.255.255'), '2001:2:0:1255::255');
    assert.equal(ipv6Twin('198.18.0.7'), '2001:2::7');
    assert.equal(ipv6Twin('198.18.201.0'), '2001:2:0:201::');
    assert.equal(ipv6TwinNetwork('198.18.201.0/24'), '2001:2:0:201::/64');
    assert.equal(ipv6TwinNetwork('198.18.151.0/30'), '2001:2:0:151::/64');
    assert.equal(ipv6TwinNetwork('198.19.2.0/24'), '2001:2:0:1002::/64');
    for (const bad of ['10.0.0.1', '198.20.1.1', '198.18.256.1', '198.18.1', '2001:2::1']) assert.throws(() => ipv6Twin(bad), InvalidArgumentError, bad);
  });

  for (const [name, opts] of [
    ['single fronts', { prefix: 'tb1', clients: 6, clusters: 9, serversPerCluster: 26, extraClientAddresses: 20, ipv6OnlyClients: 3 }],
    ['front pairs, two DNS servers', { prefix: 'tb1', clients: 9, clusters: 9, serversPerCluster: 26, frontsPerCluster: 2, dnsServers: 2 }],
  ] as const) {
    it(`${name}: every IPv4 address has its IPv6 twin; all unique, inside 2001:2::/48`, () => {
      const plan = planTestbed(opts);
      const pairs = allAddresses6(plan);
      const addrs = pairs.map(([a]) => a);
      assert.equal(new Set(addrs).size, addrs.length);
      for (const [a6, a4] of pairs) {
        assert.ok(isIPv6(a6) && BENCH6.check(a6, 'ipv6'), `${a6} outside 2001:2::/48`);
        if (a4 !== '') assert.equal(a6, ipv6Twin(a4));
      }
      for (const k of plan.clusters) {
        assert.equal(k.lanNetwork6, ipv6TwinNetwork(k.lanNetwork));
        assert.equal(k.vipNetwork6, ipv6TwinNetwork(k.vipNetwork));
        assert.equal(k.uplinkPrefix6, 64);
        for (const s of k.servers) assert.equal(s.gateway6, k.lanAddress6);
        // VIP /64s are apart from every link's.
        assert.ok(k.vip6.startsWith(`2001:2:0:100${String(k.index)}::`), k.vip6);
      }
    });
  }

  it('IPv6-only clients follow the dual-stack ones: own link and delays, no IPv4 fields', () => {
    const plan = planTestbed({ prefix: 'tb1', clients: 2, ipv6OnlyClients: 1, delaysMs: { '3:2': 5 } });
    assert.equal(plan.clients.length, 2);
    assert.deepEqual(plan.ipv6OnlyClients, [
      { name: 'tb1-cl3', role: 'client', index: 3, address6: '2001:2:0:13::2', gateway6: '2001:2:0:13::1', wanIf: 'cl3', ipv6Only: true },
    ]);
    assert.ok(namespacesOf(plan).some((n) => n.name === 'tb1-cl3'));
    // Its delays: defaults by index like any client's (client 3 is near cluster 1), overrides by its key.
    assert.deepEqual(
      plan.delays.filter((d) => d.client === 3).map((d) => [d.cluster, d.oneWayMs]),
      [
        [1, 10],
        [2, 5],
      ],
    );
    assert.equal(planTestbed({ prefix: 'tb1' }).ipv6OnlyClients.length, 0);
  });

  const bad: [string, Parameters<typeof planTestbed>[0]][] = [
    ['uppercase prefix', { prefix: 'Bad' }],
    ['prefix with dash', { prefix: 'a-b' }],
    ['prefix too long', { prefix: 'abcdefghijklm' }],
    ['zero clients', { prefix: 'tb1', clients: 0 }],
    ['too many servers', { prefix: 'tb1', serversPerCluster: 27 }],
    ['negative delay', { prefix: 'tb1', delaysMs: { '1:1': -1 } }],
    ['delay for a missing cluster', { prefix: 'tb1', delaysMs: { '1:3': 5 } }],
    ['three fronts per cluster', { prefix: 'tb1', frontsPerCluster: 3 }],
    ['three DNS servers', { prefix: 'tb1', dnsServers: 3 }],
    ['more than 9 clients of both kinds', { prefix: 'tb1', clients: 7, ipv6OnlyClients: 3 }],
    ['negative IPv6-only clients', { prefix: 'tb1', ipv6OnlyClients: -1 }],
    ['a delay for an IPv6-only client not planned', { prefix: 'tb1', clients: 2, ipv6OnlyClients: 1, delaysMs: { '4:1': 5 } }],
  ];
  for (const [name, opts] of bad) {
    it(`refuses ${name}`, () => {
      assert.throws(() => planTestbed(opts), InvalidArgumentError);
    });
  }
});
