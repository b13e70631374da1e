/**
 * `sluice ha render` (src/front/ha/render.ts): keepalived.conf and
 * conntrackd.conf per node from one ha block (table-driven), and the two
 * nodes' files mirror each other.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { HaMissingError, renderConntrackd, renderHa, renderKeepalived } from '../../src/front/ha/render.ts';

const BASE = `
cluster: c1
uplinkAddress: 198.18.101.10
adminSocket: /run/sluice/front.sock
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
  advertSeconds: 0.3
  sync: { interface: sync0, port: 3780 }
`;

const cfgOf = (node: string, extra = ''): ReturnType<typeof parseConfig<typeof frontConfigSchema>> => parseConfig(frontConfigSchema, `node: ${node}\n${BASE}${extra}`, 'front.yaml');

/** The lines of `text` without indentation and comments. */
const lines = (text: string): string[] =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));

describe('ha render: keepalived.conf', () => {
  const rows: { name: string; node: string; extra?: string; has: string[]; hasNot?: string[] }[] = [
    {
      name: 'node a: its priority; multicast adverts by default (no unicast peer)',
      node: 'fr1a',
      has: ['router_id sluice-c1-fr1a', 'vrrp_version 3', 'enable_script_security', 'script_user root', 'priority 150', 'advert_int 0.3'],
      hasNot: ['unicast_src_ip 198.18.101.2', 'unicast_peer {', 'priority 100'],
    },
    {
      name: 'node a with ha.unicast: its addresses as source, the peer\'s as unicast peer',
      node: 'fr1a',
      extra: '  unicast: true\n',
      has: ['priority 150', 'unicast_src_ip 198.18.101.2', '198.18.101.3', 'unicast_src_ip 198.18.201.2', '198.18.201.3'],
      hasNot: ['unicast_src_ip 198.18.101.3', 'priority 100'],
    },
    {
      name: 'node b with ha.unicast: the mirror image',
      node: 'fr1b',
      extra: '  unicast: true\n',
      has: ['router_id sluice-c1-fr1b', 'priority 100', 'unicast_src_ip 198.18.101.3', '198.18.101.2', 'unicast_src_ip 198.18.201.3', '198.18.201.2'],
      hasNot: ['priority 150'],
    },
    {
      name: 'one sync group of the two instances, with the notify hook and its arguments',
      node: 'fr1a',
      has: [
        'vrrp_sync_group sluice_c1 {',
        'sluice_c1_uplink',
        'sluice_c1_lan',
        'notify "/opt/sluice/deploy/ha/sluice-ha-notify --conntrackd-config /etc/conntrackd/conntrackd.conf --admin-socket /run/sluice/front.sock"',
      ],
    },
    {
      name: 'both instances: interface, router id, virtual address on its device',
      node: 'fr1a',
      has: ['vrrp_instance sluice_c1_uplink {', 'interface wan0', 'virtual_router_id 51', '198.18.101.10/24 dev wan0', 'vrrp_instance sluice_c1_lan {', 'interface lan0', 'virtual_router_id 52', '198.18.201.1/24 dev lan0'],
    },
    { name: 'no preemption by default: state BACKUP and nopreempt', node: 'fr1a', has: ['state BACKUP', 'nopreempt'], hasNot: ['state MASTER'] },
    { name: 'preempt: true -> preempt_delay, still state BACKUP', node: 'fr1a', extra: '  preempt: true\n  preemptDelaySeconds: 45\n', has: ['state BACKUP', 'preempt_delay 45'], hasNot: ['nopreempt'] },
    {
      name: 'files and admin socket from the config',
      node: 'fr1b',
      extra: '  files: { notify: /usr/local/lib/sluice/notify, conntrackd: /etc/ct.conf }\n',
      has: ['notify "/usr/local/lib/sluice/notify --conntrackd-config /etc/ct.conf --admin-socket /run/sluice/front.sock"'],
    },
    { name: 'advert interval in centiseconds', node: 'fr1a', extra: '  advertSeconds: 1\n', has: ['advert_int 1'] },
  ];
  for (const r of rows) {
    it(r.name, () => {
      // YAML refuses duplicate keys: a row that sets advertSeconds replaces the base's.
      const text = r.extra?.includes('advertSeconds') === true ? BASE.replace('  advertSeconds: 0.3\n', '') : BASE;
      const out = lines(renderKeepalived(parseConfig(frontConfigSchema, `node: ${r.node}\n${text}${r.extra ?? ''}`, 'front.yaml')));
      for (const want of r.has) assert.ok(out.includes(want), `has "${want}"`);
      for (const not of r.hasNot ?? []) assert.ok(!out.includes(not), `has no "${not}"`);
    });
  }

  it('the two nodes differ only in what is theirs', () => {
    const a = renderKeepalived(cfgOf('fr1a'));
    const b = renderKeepalived(cfgOf('fr1b'));
    // Every token that is one node's, exchanged for the other's.
    const pairs: [string, string][] = [
      ['fr1a', 'fr1b'],
      ['198.18.101.2', '198.18.101.3'],
      ['198.18.201.2', '198.18.201.3'],
      ['priority 150', 'priority 100'],
    ];
    const other = new Map(pairs.flatMap(([x, y]) => [[x, y], [y, x]] as const));
    const swap = (t: string): string => t.replace(/fr1[ab]|198\.18\.[12]01\.[23]\b|priority 1[05]0/g, (m) => other.get(m) ?? m);
    assert.deepEqual(lines(swap(a)), lines(b));
  });
});

/** BASE with the IPv6 twins of both virtual addresses (a dual-stack pair). */
const DUAL = BASE.replace('routerId: 51 }', 'routerId: 51, virtualAddress6: "2001:2:0:101::10/64" }').replace('routerId: 52 }', 'routerId: 52, virtualAddress6: "2001:2:0:201::1/64" }');

describe('ha render: a dual-stack pair', () => {
  it('keepalived: each IPv6 twin in its own side\'s instance as virtual_ipaddress_excluded, the IPv4 address alone in the adverts', () => {
    const text = renderKeepalived(parseConfig(frontConfigSchema, `node: fr1a\n${DUAL}`, 'front.yaml'));
    const block = (name: string): string => {
      const start = text.indexOf(`vrrp_instance ${name} {`);
      assert.ok(start >= 0, `has instance ${name}`);
      return text.slice(start, text.indexOf('\n}\n', start));
    };
    const up = lines(block('sluice_c1_uplink'));
    const lan = lines(block('sluice_c1_lan'));
    // The IPv6 twin follows the excluded block's opening, the IPv4 address the plain one's.
    assert.equal(up[up.indexOf('virtual_ipaddress {') + 1], '198.18.101.10/24 dev wan0');
    assert.equal(up[up.indexOf('virtual_ipaddress_excluded {') + 1], '2001:2:0:101::10/64 dev wan0');
    assert.equal(lan[lan.indexOf('virtual_ipaddress {') + 1], '198.18.201.1/24 dev lan0');
    assert.equal(lan[lan.indexOf('virtual_ipaddress_excluded {') + 1], '2001:2:0:201::1/64 dev lan0');
    assert.ok(!up.includes('2001:2:0:201::1/64 dev lan0') && !lan.includes('2001:2:0:101::10/64 dev wan0'), 'each twin in its own side\'s instance');
    // Still one group of two instances: one election moves both families.
    assert.equal(text.match(/^vrrp_instance /gm)?.length, 2);
    assert.ok(!/native_ipv6/.test(text));
  });

  it('keepalived: IPv4 only renders no excluded block', () => {
    assert.ok(!renderKeepalived(cfgOf('fr1a')).includes('virtual_ipaddress_excluded'));
  });

  it('conntrackd: the IPv6 virtual addresses and ::1 ignored besides the IPv4 ones; no family filter, so IPv6 client flows are replicated', () => {
    const out = lines(renderConntrackd(parseConfig(frontConfigSchema, `node: fr1b\n${DUAL}`, 'front.yaml')));
    for (const a of ['::1', '2001:2:0:101::10', '2001:2:0:201::1']) assert.ok(out.includes(`IPv6_address ${a}`), `ignores ${a}`);
    for (const a of ['127.0.0.1', '198.18.101.10', '198.18.201.1']) assert.ok(out.includes(`IPv4_address ${a}`), `ignores ${a}`);
    // The protocol filter names protocols only (conntrackd filters no family unless told).
    const proto = out.indexOf('Protocol Accept {');
    assert.equal(out[proto + 1], 'TCP UDP');
    assert.equal(out[proto + 2], '}');
    // IPv4 only: the rendered file has no IPv6 filter at all (unchanged from before dual stack).
    assert.ok(!renderConntrackd(cfgOf('fr1b')).includes('IPv6_address'));
  });
});

describe('ha render: conntrackd.conf', () => {
  const rows: { name: string; node: string; has: string[]; hasNot?: string[] }[] = [
    { name: 'node a sends from its sync address to the peer\'s', node: 'fr1a', has: ['Mode FTFW {', 'DisableExternalCache off', 'IPv4_address 198.18.151.1', 'IPv4_Destination_Address 198.18.151.2', 'Port 3780', 'Interface sync0'] },
    { name: 'node b the other way', node: 'fr1b', has: ['IPv4_address 198.18.151.2', 'IPv4_Destination_Address 198.18.151.1'] },
    {
      name: 'files from ha.files',
      node: 'fr1a',
      has: ['LogFile /var/log/conntrackd.log', 'LockFile /run/lock/conntrackd.lock', 'Path /run/conntrackd.ctl', 'Systemd on'],
    },
    {
      name: 'kernel-space filter ignores loopback, both virtual and all six node addresses',
      node: 'fr1b',
      has: ['Filter From Kernelspace {', 'TCP UDP', ...['127.0.0.1', '198.18.101.10', '198.18.201.1', '198.18.101.2', '198.18.201.2', '198.18.151.1', '198.18.101.3', '198.18.201.3', '198.18.151.2'].map((a) => `IPv4_address ${a}`)],
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const out = lines(renderConntrackd(cfgOf(r.node)));
      for (const want of r.has) assert.ok(out.includes(want), `has "${want}"`);
      for (const not of r.hasNot ?? []) assert.ok(!out.includes(not), `has no "${not}"`);
    });
  }

  it('the sync channel over the LAN (no dedicated link)', () => {
    const text = BASE.replace('syncAddress: 198.18.151.1', 'syncAddress: 198.18.201.2').replace('syncAddress: 198.18.151.2', 'syncAddress: 198.18.201.3').replace('sync: { interface: sync0, port: 3780 }', 'sync: { interface: lan0 }');
    const out = lines(renderConntrackd(parseConfig(frontConfigSchema, `node: fr1a\n${text}`, 'f')));
    assert.ok(out.includes('Interface lan0'));
    assert.ok(out.includes('IPv4_Destination_Address 198.18.201.3'));
    assert.equal(out.filter((l) => l === 'IPv4_address 198.18.201.2').length, 2, 'the source, and once in the filter');
  });
});

describe('ha render', () => {
  it('names the node and its peer; the header names the source file', () => {
    const r = renderHa(cfgOf('fr1b'), '/etc/sluice/front.yaml');
    assert.equal(r.node, 'fr1b');
    assert.equal(r.peer, 'fr1a');
    assert.match(r.keepalived, /^# Written by `sluice ha render` for front node fr1b of cluster c1, from \/etc\/sluice\/front\.yaml\./);
    assert.match(r.conntrackd, /^# Written by `sluice ha render` for front node fr1b/);
  });

  it('refuses a config without ha', () => {
    const cfg = parseConfig(frontConfigSchema, BASE.split('ha:\n')[0]!.replace('198.18.101.10', '198.18.101.2'), 'f');
    assert.throws(() => renderHa(cfg), (e: unknown) => e instanceof HaMissingError && /no ha section/.test(e.message));
  });
});
