/**
 * The front config's `ha:` section (src/front/ha/config.ts): the defaults,
 * and each refusal naming its key (table-driven).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema, frontNodeName } from '../../src/front/config.ts';
import { inPrefix, parseCidr, parseCidr6 } from '../../src/front/ha/config.ts';

const HA = `
node: fr1a
cluster: c1
uplinkAddress: 198.18.101.10
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: 198.18.201.11 }
ha:
  nodes:
    - { name: fr1a, priority: 150, uplinkAddress: 198.18.101.2, lanAddress: 198.18.201.2, syncAddress: 198.18.151.1 }
    - { name: fr1b, priority: 100, uplinkAddress: 198.18.101.3, lanAddress: 198.18.201.3, syncAddress: 198.18.151.2 }
  uplink: { interface: wan0, virtualAddress: 198.18.101.10/24, routerId: 51 }
  lan: { interface: lan0, virtualAddress: 198.18.201.1/24, routerId: 52 }
  sync: { interface: sync0 }
`;

function problems(text: string): { path: string; message: string }[] {
  try {
    parseConfig(frontConfigSchema, text, 'test');
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('front config ha section', () => {
  it('a pair validates, with the documented defaults', () => {
    const cfg = parseConfig(frontConfigSchema, HA, 'test');
    assert.equal(frontNodeName(cfg), 'fr1a');
    const ha = cfg.ha;
    assert.ok(ha);
    assert.equal(ha.advertSeconds, 1);
    assert.equal(ha.preempt, false);
    assert.equal(ha.preemptDelaySeconds, 30);
    assert.equal(ha.sync.port, 3780);
    assert.deepEqual(ha.files, {
      keepalived: '/etc/keepalived/keepalived.conf',
      conntrackd: '/etc/conntrackd/conntrackd.conf',
      conntrackdSocket: '/run/conntrackd.ctl',
      conntrackdLock: '/run/lock/conntrackd.lock',
      conntrackdLog: '/var/log/conntrackd.log',
      notify: '/opt/sluice/deploy/ha/sluice-ha-notify',
    });
  });

  it('without ha (and without node) nothing changes: node is the cluster', () => {
    const cfg = parseConfig(frontConfigSchema, HA.replace('node: fr1a\n', '').split('ha:\n')[0]!.replace('198.18.101.10', '198.18.101.2'), 'test');
    assert.equal(cfg.ha, undefined);
    assert.equal(cfg.node, undefined);
    assert.equal(frontNodeName(cfg), 'c1');
  });

  /** The pair dual-stack: IPv6 twins of both virtual addresses, uplinkAddress6 the uplink's. */
  const dual = (t: string): string =>
    t
      .replace('uplinkAddress: 198.18.101.10\n', 'uplinkAddress: 198.18.101.10\nuplinkAddress6: "2001:2:0:101::10"\n')
      .replace('routerId: 51 }', 'routerId: 51, virtualAddress6: "2001:2:0:101::10/64" }')
      .replace('routerId: 52 }', 'routerId: 52, virtualAddress6: "2001:2:0:201::1/64" }');

  it('a dual-stack pair validates; the IPv6 virtual addresses are kept in canonical text', () => {
    const text = dual(HA).replace('"2001:2:0:101::10/64"', '"2001:0002:0:0101:0:0:0:0010/64"');
    const cfg = parseConfig(frontConfigSchema, text, 'test');
    const ha = cfg.ha;
    assert.ok(ha);
    assert.equal(ha.uplink.virtualAddress6, '2001:2:0:101::10/64');
    assert.equal(ha.lan.virtualAddress6, '2001:2:0:201::1/64');
    assert.equal(cfg.uplinkAddress6, '2001:2:0:101::10');
    // IPv4 only stays valid: the IPv6 twins are optional.
    assert.equal(parseConfig(frontConfigSchema, HA, 'test').ha?.uplink.virtualAddress6, undefined);
  });

  const cases: { name: string; edit: (t: string) => string; path: string; says: RegExp }[] = [
    { name: 'uplinkAddress6 the pair does not hold', edit: (t) => dual(t).replace(', virtualAddress6: "2001:2:0:101::10/64"', ''), path: 'uplinkAddress6', says: /set ha\.uplink\.virtualAddress6/ },
    { name: 'uplinkAddress6 outside the VRRP instance', edit: (t) => dual(t).replace('uplinkAddress6: "2001:2:0:101::10"', 'uplinkAddress6: "2001:2:0:101::2"'), path: 'uplinkAddress6', says: /IPv6 uplink address outside the VRRP instance.*2001:2:0:101::10/ },
    { name: 'IPv6 virtual address without a prefix', edit: (t) => dual(t).replace('"2001:2:0:201::1/64"', '"2001:2:0:201::1"'), path: 'ha.lan.virtualAddress6', says: /prefix length/ },
    { name: 'IPv6 virtual address with prefix 129', edit: (t) => dual(t).replace('"2001:2:0:201::1/64"', '"2001:2:0:201::1/129"'), path: 'ha.lan.virtualAddress6', says: /1\.\.128/ },
    { name: 'an IPv4 address as the IPv6 virtual address', edit: (t) => dual(t).replace('"2001:2:0:201::1/64"', '"198.18.201.1/24"'), path: 'ha.lan.virtualAddress6', says: /IPv6 address/ },
    { name: 'the same IPv6 virtual address on both sides', edit: (t) => dual(t).replace('"2001:2:0:201::1/64"', '"2001:2:0:101::10/64"'), path: 'ha.lan.virtualAddress6', says: /their own IPv6 virtual address/ },
    { name: 'one node', edit: (t) => t.replace(/ {4}- \{ name: fr1b.*\n/, ''), path: 'ha.nodes', says: /exactly 2/ },
    { name: 'same priority', edit: (t) => t.replace('priority: 100', 'priority: 150'), path: 'ha.nodes[1].priority', says: /both nodes have priority 150/ },
    { name: 'priority 255', edit: (t) => t.replace('priority: 100', 'priority: 255'), path: 'ha.nodes[1].priority', says: /1\.\.254/ },
    { name: 'duplicate names', edit: (t) => t.replace('name: fr1b', 'name: fr1a'), path: 'ha.nodes[1].name', says: /both nodes are named "fr1a"/ },
    { name: 'node not in the pair', edit: (t) => t.replace('node: fr1a', 'node: fr9'), path: 'node', says: /"fr9".*not one of ha\.nodes\[\]\.name/ },
    { name: 'node absent: the cluster name is not in the pair', edit: (t) => t.replace('node: fr1a\n', ''), path: 'node', says: /node defaults to cluster/ },
    { name: 'uplink address outside the VRRP instance', edit: (t) => t.replace('uplinkAddress: 198.18.101.10\n', 'uplinkAddress: 198.18.101.2\n'), path: 'uplinkAddress', says: /an uplink address outside the VRRP instance/ },
    { name: 'node uplink address outside the prefix', edit: (t) => t.replace('uplinkAddress: 198.18.101.3', 'uplinkAddress: 198.18.102.3'), path: 'ha.nodes[1].uplinkAddress', says: /outside ha\.uplink\.virtualAddress/ },
    { name: 'node LAN address outside the prefix', edit: (t) => t.replace('lanAddress: 198.18.201.2', 'lanAddress: 10.0.0.2'), path: 'ha.nodes[0].lanAddress', says: /outside ha\.lan\.virtualAddress/ },
    { name: 'equal router ids', edit: (t) => t.replace('routerId: 52', 'routerId: 51'), path: 'ha.lan.routerId', says: /different ids/ },
    { name: 'virtual address equal to a node address', edit: (t) => t.replace('virtualAddress: 198.18.201.1/24', 'virtualAddress: 198.18.201.2/24'), path: 'ha.lan.virtualAddress', says: /also a node's own address/ },
    { name: 'virtual address without a prefix', edit: (t) => t.replace('198.18.201.1/24', '198.18.201.1'), path: 'ha.lan.virtualAddress', says: /prefix length/ },
    { name: 'the same sync address on both', edit: (t) => t.replace('syncAddress: 198.18.151.2', 'syncAddress: 198.18.151.1'), path: 'ha.nodes[1].syncAddress', says: /each node has its own address/ },
    { name: 'advert interval finer than centiseconds', edit: (t) => t.replace('  sync:', '  advertSeconds: 0.005\n  sync:'), path: 'ha.advertSeconds', says: /0\.01\.\.40/ },
    { name: 'advert interval not in centisecond steps', edit: (t) => t.replace('  sync:', '  advertSeconds: 0.125\n  sync:'), path: 'ha.advertSeconds', says: /steps of 0\.01/ },
    { name: 'LAN instance not on lanInterface', edit: (t) => t.replace('interface: lan0', 'interface: eth1'), path: 'ha.lan.interface', says: /not lanInterface lan0/ },
    { name: 'uplink and LAN on one interface', edit: (t) => t.replace('interface: wan0', 'interface: lan0'), path: 'ha.lan.interface', says: /two interfaces/ },
    { name: 'no sync section', edit: (t) => t.replace('  sync: { interface: sync0 }\n', ''), path: 'ha.sync', says: /./ },
    { name: 'relative file path', edit: (t) => t.replace('  sync:', '  files: { notify: deploy/ha/sluice-ha-notify }\n  sync:'), path: 'ha.files.notify', says: /absolute path/ },
  ];
  for (const c of cases) {
    it(`refuses: ${c.name} (naming ${c.path})`, () => {
      const text = c.edit(HA);
      assert.notEqual(text, HA, 'the edit applied');
      const found = problems(text);
      const p = found.find((x) => x.path === c.path);
      assert.ok(p, `a problem at ${c.path}; got ${JSON.stringify(found)}`);
      assert.match(p.message, c.says);
    });
  }

  it('prefix arithmetic', () => {
    const rows: [string, string, boolean][] = [
      ['198.18.101.10/24', '198.18.101.2', true],
      ['198.18.101.10/24', '198.18.102.2', false],
      ['198.18.151.1/30', '198.18.151.2', true],
      ['198.18.151.1/30', '198.18.151.4', false],
      ['10.0.0.1/32', '10.0.0.1', true],
      ['10.0.0.1/1', '127.0.0.1', true],
    ];
    for (const [net, a, want] of rows) assert.equal(inPrefix(a, parseCidr(net)!), want, `${a} in ${net}`);
    assert.equal(parseCidr('10.0.0.1/33'), undefined);
    assert.equal(parseCidr('10.0.0.1/0'), undefined);
    assert.equal(parseCidr('10.0.0.01/8'), undefined);
    assert.deepEqual(parseCidr6('2001:0002::0010/64'), { address: '2001:2::10', prefix: 64 });
    assert.deepEqual(parseCidr6('::1/128'), { address: '::1', prefix: 128 });
    assert.equal(parseCidr6('2001:2::10/0'), undefined);
    assert.equal(parseCidr6('2001:2::10'), undefined);
    assert.equal(parseCidr6('198.18.0.1/24'), undefined);
    assert.equal(parseCidr6('2001:2::g/64'), undefined);
  });
});
