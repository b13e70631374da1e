import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors/errors.ts';
import { inPrefix, parseIPv4Address } from '../../src/packet/address.ts';
import { namespacesOf, planTestbed } from '../../scripts/testbed/plan.ts';

const BENCH_NET = parseIPv4Address('198.18.0.0') ?? 0;

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
  ];
  for (const [name, opts] of bad) {
    it(`refuses ${name}`, () => {
      assert.throws(() => planTestbed(opts), InvalidArgumentError);
    });
  }
});
