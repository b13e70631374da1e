/**
 * The front node's preflight (src/front/preflight.ts), table-driven over a
 * fake host: each check passes on a good host and fails, naming the fix, on
 * the bad value; the effective rp_filter is max(all, interface); a queue
 * bound by the running daemon of the same file passes for check-config
 * --host and fails at start.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderHost } from '../../src/cli/check-config.ts';
import { PreflightError, assertHostReady, boundPortId, runPreflight, type HostReader, type NetlinkAccess, type ProcAccess, type SocketOwner } from '../../src/front/preflight.ts';

interface Fake {
  sysctl: Record<string, string>;
  interfaces: string[];
  addresses: Record<string, string>;
  proc: ProcAccess;
  netlink: NetlinkAccess;
  queue: string | undefined;
  log: string | undefined;
  owners: Record<number, SocketOwner>;
  commands: Record<string, string>;
}

const good = (): Fake => ({
  sysctl: {
    'net/ipv4/ip_forward': '1',
    'net/ipv4/conf/all/rp_filter': '0',
    'net/ipv4/conf/lan0/rp_filter': '0',
    'net/ipv4/conf/wan0/rp_filter': '0',
    'net/ipv4/conf/eth0.7/rp_filter': '0',
  },
  interfaces: ['lo', 'wan0', 'lan0'],
  addresses: { '198.18.101.2': 'wan0' },
  proc: 'readable',
  netlink: 'allowed',
  queue: '',
  log: '',
  owners: {},
  commands: { keepalived: '/usr/sbin/keepalived', conntrackd: '/usr/sbin/conntrackd' },
});

function host(f: Fake): HostReader {
  return {
    sysctl: (p) => f.sysctl[p],
    interfaces: () => f.interfaces,
    interfaceWith: (a) => f.addresses[a],
    conntrackProc: () => f.proc,
    conntrackNetlink: () => f.netlink,
    bindings: (k) => (k === 'queue' ? f.queue : f.log),
    netlinkOwner: (p) => f.owners[p],
    command: (n) => f.commands[n],
    localRoute: () => true,
  };
}

const CFG = { lanInterface: 'lan0', uplinkAddress: '198.18.101.2', queue: 3, nflogGroup: 4 };
/** A /proc/net/netfilter/nfnetlink_queue line: queue, port id, then counters. */
const bound = (num: number, portid: number): string => `${String(num).padStart(5)} ${String(portid).padStart(6)}     0 2   128     0     0       17  1\n`;
const daemon: SocketOwner = { pid: 4242, argv: ['/usr/bin/node', '/opt/sluice/src/cli/main.ts', 'front', '--config', 'front.yaml'], cwd: '/etc/sluice' };

const cases: { name: string; change: (f: Fake) => void; check: string; detail: RegExp; cfg?: Partial<typeof CFG> }[] = [
  { name: 'ip_forward 0', change: (f) => (f.sysctl['net/ipv4/ip_forward'] = '0'), check: 'ip_forward', detail: /ip_forward is 0: .*sysctl -w net\.ipv4\.ip_forward=1.*sysctl\.d/ },
  { name: 'ip_forward unreadable', change: (f) => delete f.sysctl['net/ipv4/ip_forward'], check: 'ip_forward', detail: /is unreadable/ },
  { name: 'no LAN interface', change: (f) => (f.interfaces = ['lo', 'wan0']), check: 'lan_interface', detail: /lanInterface lan0: no such interface .*\(it has lo, wan0\): set lanInterface/ },
  { name: 'rp_filter strict on the LAN interface', change: (f) => (f.sysctl['net/ipv4/conf/lan0/rp_filter'] = '1'), check: 'rp_filter', detail: /lan0: 1 \(conf\.all 0, conf\.lan0 1\).*`sysctl -w net\.ipv4\.conf\.lan0\.rp_filter=0`/ },
  { name: 'rp_filter loose in conf.all (effective on every interface)', change: (f) => (f.sysctl['net/ipv4/conf/all/rp_filter'] = '2'), check: 'rp_filter', detail: /wan0: 2 \(conf\.all 2, conf\.wan0 0\).*`sysctl -w net\.ipv4\.conf\.all\.rp_filter=0`/ },
  { name: 'rp_filter on the uplink interface', change: (f) => (f.sysctl['net/ipv4/conf/wan0/rp_filter'] = '1'), check: 'rp_filter', detail: /wan0: 1 .*net\.ipv4\.conf\.wan0\.rp_filter=0/ },
  {
    name: 'rp_filter on a VLAN LAN interface (a dot is a slash in sysctl -w)',
    change: (f) => {
      f.interfaces.push('eth0.7');
      f.sysctl['net/ipv4/conf/eth0.7/rp_filter'] = '1';
    },
    cfg: { lanInterface: 'eth0.7' },
    check: 'rp_filter',
    detail: /net\.ipv4\.conf\.eth0\/7\.rp_filter=0/,
  },
  { name: 'conntrack: no ctnetlink, not root', change: (f) => ((f.proc = 'denied'), (f.netlink = 'missing')), check: 'conntrack', detail: /no ctnetlink \(modprobe nf_conntrack_netlink\) and \/proc\/net\/nf_conntrack is root-only/ },
  { name: 'conntrack: no CAP_NET_ADMIN', change: (f) => ((f.proc = 'denied'), (f.netlink = 'denied')), check: 'conntrack', detail: /ctnetlink refuses this process: grant CAP_NET_ADMIN/ },
  { name: 'conntrack: ctnetlink fails otherwise', change: (f) => (f.netlink = { error: 'EIO' }), check: 'conntrack', detail: /ctnetlink failed: EIO/ },
  { name: 'conntrack: no ctnetlink, /proc fails', change: (f) => ((f.netlink = 'missing'), (f.proc = { error: 'EIO' })), check: 'conntrack', detail: /cannot be read: EIO/ },
  { name: 'queue bound by another process', change: (f) => ((f.queue = bound(0, 99) + bound(3, 1234)), (f.owners[1234] = { pid: 77, argv: ['nfq-tool', '-q', '3'], cwd: '/' })), check: 'queue', detail: /NFQUEUE 3 is bound by another process \(netlink port 1234; pid 77: nfq-tool -q 3\).*another `queue:`/ },
  { name: 'queue bound, owner invisible', change: (f) => (f.queue = bound(3, 1234)), check: 'queue', detail: /not visible to this user/ },
  { name: 'queue bound by a front node of this file (at start: a conflict)', change: (f) => ((f.queue = bound(3, 1234)), (f.owners[1234] = daemon)), check: 'queue', detail: /pid 4242: .* front --config front\.yaml/ },
  { name: 'log group bound by another process', change: (f) => (f.log = bound(4, 555)), check: 'nflog_group', detail: /NFLOG group 4 is bound by another process .*another `nflogGroup:`/ },
];

describe('front preflight', () => {
  it('a good host passes every check', () => {
    const r = runPreflight(CFG, host(good()));
    assert.deepEqual(r.map((x) => [x.check, x.ok]), [['ip_forward', true], ['lan_interface', true], ['rp_filter', true], ['conntrack', true], ['queue', true], ['nflog_group', true]]);
    assert.match(r[2]?.detail ?? '', /effective rp_filter 0 on lan0, wan0/);
    assert.doesNotThrow(() => {
      assertHostReady(CFG, host(good()));
    });
  });

  for (const c of cases) {
    it(`refuses ${c.name}, naming the fix`, () => {
      const f = good();
      c.change(f);
      const failed = runPreflight({ ...CFG, ...c.cfg }, host(f)).filter((r) => !r.ok);
      assert.deepEqual(failed.map((r) => r.check), [c.check]);
      assert.match(failed[0]?.detail ?? '', c.detail);
      assert.throws(
        () => {
          assertHostReady({ ...CFG, ...c.cfg }, host(f));
        },
        (err: unknown) => err instanceof PreflightError && err.failures[0]?.check === c.check && err.message.includes(`  ${c.check}: `),
      );
    });
  }

  it('every failure at once: ip_forward 0 and no LAN interface are both listed', () => {
    const f = good();
    f.sysctl['net/ipv4/ip_forward'] = '0';
    f.interfaces = ['lo'];
    assert.throws(
      () => {
        assertHostReady(CFG, host(f));
      },
      (err: unknown) => err instanceof PreflightError && err.failures.map((x) => x.check).join() === 'ip_forward,lan_interface',
    );
  });

  it('conntrack: ctnetlink passes (root or the unprivileged unit); without ctnetlink, /proc readable or absent passes', () => {
    for (const [proc, netlink, detail] of [['denied', 'allowed', /read over ctnetlink$/], ['readable', 'missing', /no ctnetlink .* read from \/proc\/net\/nf_conntrack$/], ['absent', 'missing', /no \/proc\/net\/nf_conntrack yet/]] as const) {
      const f = good();
      f.proc = proc;
      f.netlink = netlink;
      const r = runPreflight(CFG, host(f)).find((x) => x.check === 'conntrack');
      assert.equal(r?.ok, true);
      assert.match(r.detail, detail);
    }
  });

  it('queue and log group: root-only tables are skipped as such for the unprivileged unit', () => {
    const f = good();
    f.queue = undefined;
    f.log = undefined;
    const r = runPreflight(CFG, host(f)).filter((x) => x.skipped);
    assert.deepEqual(r.map((x) => [x.check, x.ok]), [['queue', true], ['nflog_group', true]]);
    assert.match(r[0]?.detail ?? '', /ERR_SLUICE_QUEUE_BUSY/);
    assert.match(renderHost(r), /^ {2}skip {2}queue: /m);
  });

  it('check-config --host: a queue bound by the running front node of the same file (relative --config resolved in its cwd) passes; another file does not', () => {
    const f = good();
    f.queue = bound(3, 1234);
    f.owners[1234] = daemon;
    const same = runPreflight(CFG, host(f), { runningConfig: '/etc/sluice/front.yaml' }).find((x) => x.check === 'queue');
    assert.equal(same?.ok, true);
    assert.match(same.detail, /running front node of this file \(pid 4242\)/);
    const other = runPreflight(CFG, host(f), { runningConfig: '/etc/sluice/other.yaml' }).find((x) => x.check === 'queue');
    assert.equal(other?.ok, false);
    assert.match(renderHost([other]), /^ {2}FAIL {2}queue: NFQUEUE 3 is bound/m);
  });

  it('boundPortId reads the number and port id columns', () => {
    const t = bound(0, 7) + bound(10, 8) + bound(65535, 4294967295);
    assert.equal(boundPortId(t, 0), 7);
    assert.equal(boundPortId(t, 10), 8);
    assert.equal(boundPortId(t, 65535), 4294967295);
    assert.equal(boundPortId(t, 1), undefined);
    assert.equal(boundPortId('', 0), undefined);
  });
});

describe('front preflight: health check source', () => {
  const svc = (source?: string, kind = 'tcp'): { name: string; health: { kind: string; source?: string } } => ({ name: 'www', health: { kind, ...(source !== undefined ? { source } : {}) } });
  it('not run when no service sets a source', () => {
    assert.ok(runPreflight({ ...CFG, services: [svc()] }, host(good())).every((r) => r.check !== 'health_source'));
  });
  it('a source on an interface here passes', () => {
    const r = runPreflight({ ...CFG, services: [svc('198.18.101.2')] }, host(good())).find((x) => x.check === 'health_source');
    assert.equal(r?.ok, true);
  });
  it('a source the node does not have is refused, naming the key and the fix', () => {
    assert.throws(
      () => {
        assertHostReady({ ...CFG, services: [svc('198.18.201.99')] }, host(good()));
      },
      (err: unknown) => err instanceof PreflightError && err.failures.length === 1 && err.failures[0]?.check === 'health_source' && /services\[0\]\.health\.source 198\.18\.201\.99 .*not an address of this network namespace.*set it to an address of the LAN interface/.test(err.message),
    );
  });
  it('kind none: its source is not checked', () => {
    assert.ok(runPreflight({ ...CFG, services: [svc('198.18.201.99', 'none')] }, host(good())).every((r) => r.check !== 'health_source'));
  });
});

describe('front preflight: a front-node pair (ha)', () => {
  const HA_CFG = {
    ...CFG,
    uplinkAddress: '198.18.101.10',
    cluster: 'c1',
    node: 'fr1a',
    ha: {
      nodes: [
        { name: 'fr1a', priority: 150, uplinkAddress: '198.18.101.2', lanAddress: '198.18.201.2', syncAddress: '198.18.151.1' },
        { name: 'fr1b', priority: 100, uplinkAddress: '198.18.101.3', lanAddress: '198.18.201.3', syncAddress: '198.18.151.2' },
      ],
      uplink: { interface: 'wan0', virtualAddress: '198.18.101.10/24', routerId: 51 },
      lan: { interface: 'lan0', virtualAddress: '198.18.201.1/24', routerId: 52 },
      advertSeconds: 1,
      preempt: false,
      unicast: false,
      preemptDelaySeconds: 30,
      sync: { interface: 'sync0', port: 3780 },
      files: { keepalived: '/k', conntrackd: '/c', conntrackdSocket: '/s', conntrackdLock: '/l', conntrackdLog: '/g', notify: '/n' },
    },
  };
  /** The backup: the virtual address is not here; the node's own addresses are. */
  const pairHost = (): Fake => {
    const f = good();
    f.interfaces = ['lo', 'wan0', 'lan0', 'sync0'];
    f.addresses = { '198.18.101.2': 'wan0', '198.18.201.2': 'lan0', '198.18.151.1': 'sync0' };
    f.sysctl['net/ipv4/conf/sync0/rp_filter'] = '0';
    return f;
  };

  it('a backup host passes: rp_filter finds the uplink by ha.uplink.interface, not by the absent virtual address', () => {
    const f = pairHost();
    f.sysctl['net/ipv4/conf/wan0/rp_filter'] = '0';
    const r = runPreflight(HA_CFG, host(f));
    assert.deepEqual(r.filter((x) => !x.ok), []);
    assert.deepEqual(r.map((x) => x.check).slice(-3), ['ha_interfaces', 'ha_addresses', 'ha_binaries']);
    assert.match(r.find((x) => x.check === 'rp_filter')?.detail ?? '', /on lan0, wan0/);
  });

  const cases: { name: string; change: (f: Fake) => void; check: string; detail: RegExp }[] = [
    { name: 'the sync interface does not exist', change: (f) => (f.interfaces = ['lo', 'wan0', 'lan0']), check: 'ha_interfaces', detail: /ha\.sync\.interface sync0: no such interface/ },
    { name: 'this node\'s sync address is not on the sync interface', change: (f) => delete f.addresses['198.18.151.1'], check: 'ha_addresses', detail: /syncAddress 198\.18\.151\.1 is on no interface here, not on sync0/ },
    { name: 'this node\'s uplink address is on the wrong interface', change: (f) => (f.addresses['198.18.101.2'] = 'lan0'), check: 'ha_addresses', detail: /uplinkAddress 198\.18\.101\.2 is on lan0, not on wan0/ },
    { name: 'conntrackd is not installed', change: (f) => delete f.commands['conntrackd'], check: 'ha_binaries', detail: /conntrackd not found.*apt-get install conntrackd/ },
    { name: 'rp_filter on the uplink interface of a backup', change: (f) => (f.sysctl['net/ipv4/conf/wan0/rp_filter'] = '1'), check: 'rp_filter', detail: /wan0: 1/ },
  ];
  for (const c of cases) {
    it(`refuses: ${c.name}`, () => {
      const f = pairHost();
      c.change(f);
      const failed = runPreflight(HA_CFG, host(f)).filter((r) => !r.ok);
      assert.deepEqual(failed.map((r) => r.check), [c.check]);
      assert.match(failed[0]?.detail ?? '', c.detail);
    });
  }
});
