/**
 * Preflight: what the host (the network namespace the front node runs in)
 * must provide before the front node installs anything. Run by the daemon
 * when it is constructed (src/front/daemon.ts: refused -> exit 1 with every
 * failed check and its fix, nothing installed, nothing removed) and by
 * `sluice check-config --host` (src/cli/check-config.ts), which prints each
 * check's result.
 *
 * The checks, each with a stable id (PreflightError.failures[].check):
 *   ip_forward     net.ipv4.ip_forward = 1: steered packets are forwarded.
 *   ipv6_forward   with an IPv6 service: net.ipv6.conf.all.forwarding = 1
 *                  (the IPv6 twin; without it steered IPv6 packets are
 *                  delivered locally, where nothing answers the VIP). IPv6
 *                  has no rp_filter sysctl (its reverse-path check is a
 *                  firewall rule, `fib saddr . iif oif missing drop`): none
 *                  to check.
 *   lan_interface  `lanInterface` exists in this namespace.
 *   rp_filter      0 on the LAN interface and on the uplink interface (the
 *                  one holding `uplinkAddress`; with `ha`, `ha.uplink.interface`:
 *                  the virtual address is absent on the backup), the effective value being
 *                  max(conf.all, conf.IF): otherwise the kernel drops the
 *                  replies rewritten back to the VIP (measured; see
 *                  docs/operations.md).
 *   conntrack      the flow table can be read as src/front/kernel-flows.ts
 *                  reads it: over ctnetlink (CAP_NET_ADMIN, which the
 *                  unprivileged unit has), or where the kernel has no
 *                  ctnetlink from /proc/net/nf_conntrack (root). An absent
 *                  table is fine (nf_conntrack not loaded yet: the rules
 *                  load it; no flows to rebuild).
 *   queue          no other process is bound to `queue`
 *                  (/proc/net/netfilter/nfnetlink_queue lists the bound
 *                  queues with the owner's netlink port id).
 *   nflog_group    the same for `nflogGroup` (/proc/net/netfilter/nfnetlink_log).
 *                  Both files are root-only: as the unprivileged unit these
 *                  two are skipped (shown as such), and the bind itself
 *                  refuses a taken number (ERR_SLUICE_QUEUE_BUSY, _NFLOG_BUSY).
 *   health_source  every `services[].health.source` (of a service with a
 *                  check) is an address of this namespace: a check cannot
 *                  be sent from an address the node does not have (every
 *                  check would fail, and every server would go down).
 *                  Only run when some service sets a source.
 *   ha_interfaces  with `ha`: the uplink, LAN and sync interfaces exist here.
 *   ha_addresses   with `ha`: this node's uplink, LAN and sync addresses
 *                  (its `ha.nodes[]` entry) are on those interfaces:
 *                  keepalived sends its adverts from them, conntrackd its
 *                  updates (the virtual addresses are keepalived's to add).
 *   ha_binaries    with `ha`: keepalived and conntrackd are installed (the
 *                  notify hook runs conntrackd; the daemon reads its state).
 *   synproxy       with a SYN-cookie service (config.ts synproxyOf):
 *                  (IPv4 or IPv6)
 *                  net.netfilter.nf_conntrack_tcp_loose = 0 (one setting
 *                  for both families' conntrack; else the
 *                  client's cookie ACK starts a tracked flow and never
 *                  reaches SYNPROXY) and each such VIP routed `local`
 *                  (else routing drops or loops the untracked SYN instead
 *                  of delivering it to INPUT). Both are the operator's, as
 *                  ip_forward and rp_filter are: the node's routing and
 *                  conntrack policy are not the daemon's to change.
 *
 * One error class for all of them (PreflightError, ERR_SLUICE_PREFLIGHT)
 * carrying the list of failures: an operator fixes every failed check in
 * one pass, and callers switch on `failures[].check`, never on the text.
 *
 * Every check is a small function over a HostReader, so unit tests run them
 * on fake /proc contents; systemHost() is the real one. It reads /proc only:
 * /proc/sys/net and /proc/net follow the reading process's network
 * namespace, whereas /sys/class/net shows the namespace sysfs was mounted
 * in (wrong under systemd's NetworkNamespacePath= or nsenter). Everything
 * here is synchronous and runs once, off the packet path.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, closeSync, constants, openSync, readFileSync, readSync, readdirSync, readlinkSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { resolve } from 'node:path';
import { SluiceError } from '../errors/errors.ts';
import { probeCtnetlink, type CtnetlinkAccess } from './kernel-flows.ts';
import { synproxyOf, type FrontConfig, type ServiceConfig } from './config.ts';
import type { HaConfig } from './ha/config.ts';

export const PREFLIGHT_CHECKS = ['ip_forward', 'ipv6_forward', 'lan_interface', 'rp_filter', 'conntrack', 'queue', 'nflog_group', 'health_source', 'ha_interfaces', 'ha_addresses', 'ha_binaries', 'synproxy'] as const;
export type PreflightCheck = (typeof PREFLIGHT_CHECKS)[number];

export interface CheckResult {
  readonly check: PreflightCheck;
  readonly ok: boolean;
  /** Passed without looking: this user cannot read what the check reads (the detail says what then catches it). */
  readonly skipped?: true;
  /** ok: what was found; failed: what is wrong, why it matters, and the fix. */
  readonly detail: string;
}

/** The host is not ready for a front node: `failures` lists every failed check with its fix. */
export class PreflightError extends SluiceError {
  readonly code = 'ERR_SLUICE_PREFLIGHT';
  readonly failures: readonly CheckResult[];
  constructor(failures: readonly CheckResult[]) {
    super(`this host is not ready for a front node (preflight):\n${failures.map((f) => `  ${f.check}: ${f.detail}`).join('\n')}`);
    this.failures = failures;
  }
}

/** The flow table through procfs: read, absent (no conntrack yet), denied (not root), or another error. */
export type ProcAccess = 'readable' | 'absent' | 'denied' | { readonly error: string };
/** The flow table over ctnetlink: allowed, no ctnetlink in this kernel, refused (no CAP_NET_ADMIN), or another error. */
export type NetlinkAccess = CtnetlinkAccess;

export interface HostReader {
  /** A file under /proc/sys (e.g. `net/ipv4/ip_forward`), trimmed; undefined when absent. */
  sysctl(path: string): string | undefined;
  /** The network interfaces of this namespace. */
  interfaces(): readonly string[];
  /** The interface holding this IPv4 address, if any (and up: os.networkInterfaces() lists only those). */
  interfaceWith(address: string): string | undefined;
  conntrackProc(): ProcAccess;
  conntrackNetlink(): NetlinkAccess;
  /**
   * /proc/net/netfilter/nfnetlink_queue or nfnetlink_log: '' when absent
   * (nothing bound), undefined when this user cannot read it (mode 0440 root).
   */
  bindings(kind: 'queue' | 'log'): string | undefined;
  /** The process holding a netfilter netlink socket with this port id, when this user can see it. */
  netlinkOwner(portid: number): SocketOwner | undefined;
  /** The path of an executable of this name (PATH, then /usr/sbin and /sbin), if any. */
  command(name: string): string | undefined;
  /** Whether this namespace routes `address` as local (`ip route get`: type local). */
  localRoute(address: string): boolean;
}

export interface SocketOwner {
  readonly pid: number;
  /** Its command line. */
  readonly argv: readonly string[];
  /** Its working directory (resolves a relative --config), when readable. */
  readonly cwd: string | undefined;
}

/** `owner` is `sluice front --config FILE` for this very file. */
function isFrontOf(owner: SocketOwner, file: string): boolean {
  const at = owner.argv.indexOf('--config');
  const given = owner.argv[at + 1];
  if (!owner.argv.includes('front') || at < 0 || given === undefined) return false;
  return resolve(owner.cwd ?? '/', given) === resolve(file);
}

/** The value of `sysctl -w` for a key naming an interface (a dot in the name is a slash there). */
const sysctlIf = (ifname: string): string => ifname.replaceAll('.', '/');

export function checkIpForward(host: HostReader): CheckResult {
  const v = host.sysctl('net/ipv4/ip_forward');
  if (v === '1') return { check: 'ip_forward', ok: true, detail: 'net.ipv4.ip_forward = 1' };
  return {
    check: 'ip_forward',
    ok: false,
    detail: `net.ipv4.ip_forward is ${v ?? 'unreadable'}: the front node forwards steered packets to the servers; set it with \`sysctl -w net.ipv4.ip_forward=1\` (and in /etc/sysctl.d/)`,
  };
}

/** With an IPv6 service: net.ipv6.conf.all.forwarding = 1. Undefined without one (not checked). */
export function checkIpv6Forward(cfg: Pick<PreflightConfig, 'services'>, host: HostReader): CheckResult | undefined {
  if (!(cfg.services ?? []).some((s) => s.vip?.includes(':') === true)) return undefined;
  const v = host.sysctl('net/ipv6/conf/all/forwarding');
  if (v === '1') return { check: 'ipv6_forward', ok: true, detail: 'net.ipv6.conf.all.forwarding = 1' };
  return {
    check: 'ipv6_forward',
    ok: false,
    detail: `net.ipv6.conf.all.forwarding is ${v ?? 'unreadable (IPv6 disabled?)'}: an IPv6 service is configured and the front node forwards its steered packets to the servers; set it with \`sysctl -w net.ipv6.conf.all.forwarding=1\` (and in /etc/sysctl.d/; with forwarding on, the kernel takes router advertisements only where accept_ra is 2)`,
  };
}

export function checkLanInterface(cfg: Pick<FrontConfig, 'lanInterface'>, host: HostReader): CheckResult {
  const all = host.interfaces();
  if (all.includes(cfg.lanInterface)) return { check: 'lan_interface', ok: true, detail: `lanInterface ${cfg.lanInterface} exists` };
  return {
    check: 'lan_interface',
    ok: false,
    detail: `lanInterface ${cfg.lanInterface}: no such interface in this network namespace (it has ${all.join(', ') || 'none'}): set lanInterface to the interface toward the servers, or create it`,
  };
}

/** rp_filter 0 on the LAN and uplink interfaces (effective value: max of conf.all and conf.IF). */
export function checkRpFilter(cfg: Pick<FrontConfig, 'lanInterface' | 'uplinkAddress'> & { readonly ha?: HaConfig | undefined }, host: HostReader): CheckResult {
  const ifs = new Set<string>();
  if (host.interfaces().includes(cfg.lanInterface)) ifs.add(cfg.lanInterface);
  // In a pair the uplink address is the virtual one, on the master only: the interface is named instead.
  const uplink = cfg.ha ? (host.interfaces().includes(cfg.ha.uplink.interface) ? cfg.ha.uplink.interface : undefined) : host.interfaceWith(cfg.uplinkAddress);
  if (uplink !== undefined) ifs.add(uplink);
  const all = Number(host.sysctl('net/ipv4/conf/all/rp_filter') ?? 0);
  const bad: string[] = [];
  const keys = new Set<string>();
  for (const ifname of ifs) {
    const own = Number(host.sysctl(`net/ipv4/conf/${ifname}/rp_filter`) ?? 0);
    const effective = Math.max(all, own);
    if (effective === 0) continue;
    bad.push(`${ifname}: ${String(effective)} (conf.all ${String(all)}, conf.${ifname} ${String(own)})`);
    if (all !== 0) keys.add('net.ipv4.conf.all.rp_filter=0');
    if (own !== 0) keys.add(`net.ipv4.conf.${sysctlIf(ifname)}.rp_filter=0`);
  }
  const names = [...ifs].join(', ');
  if (bad.length === 0) return { check: 'rp_filter', ok: true, detail: ifs.size === 0 ? 'no LAN or uplink interface to check' : `effective rp_filter 0 on ${names}` };
  return {
    check: 'rp_filter',
    ok: false,
    detail: `rp_filter is not 0 on ${bad.join('; ')}: the kernel drops the replies rewritten back to the VIP (the effective value is the larger of conf.all and the interface's); set it with \`sysctl -w ${[...keys].join(' ')}\` (and in /etc/sysctl.d/)`,
  };
}

export function checkConntrack(host: HostReader): CheckResult {
  const why = "the kernel's flow table cannot be read (the records are rebuilt from it after a restart and reconciled with it)";
  const nl = host.conntrackNetlink();
  if (nl === 'allowed') return { check: 'conntrack', ok: true, detail: 'the flow table is read over ctnetlink' };
  if (nl === 'denied') return { check: 'conntrack', ok: false, detail: `${why}: ctnetlink refuses this process: grant CAP_NET_ADMIN (deploy/systemd/sluice-front.service: AmbientCapabilities=CAP_NET_ADMIN CAP_NET_RAW), or run as root` };
  if (nl !== 'missing') return { check: 'conntrack', ok: false, detail: `${why}: ctnetlink failed: ${nl.error}` };
  const proc = host.conntrackProc();
  if (proc === 'readable') return { check: 'conntrack', ok: true, detail: 'this kernel has no ctnetlink (nf_conntrack_netlink); the flow table is read from /proc/net/nf_conntrack' };
  if (proc === 'absent') return { check: 'conntrack', ok: true, detail: 'no ctnetlink and no /proc/net/nf_conntrack yet (conntrack loads with the rules): no flows to rebuild' };
  if (proc === 'denied') return { check: 'conntrack', ok: false, detail: `${why}: this kernel has no ctnetlink (modprobe nf_conntrack_netlink) and /proc/net/nf_conntrack is root-only` };
  return { check: 'conntrack', ok: false, detail: `${why}: this kernel has no ctnetlink (modprobe nf_conntrack_netlink) and /proc/net/nf_conntrack cannot be read: ${proc.error}` };
}

/** The netlink port id bound to `num` in /proc/net/netfilter/nfnetlink_{queue,log} text (first two columns). */
export function boundPortId(table: string, num: number): number | undefined {
  for (const line of table.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 2 && Number(f[0]) === num && f[0] !== '') return Number(f[1]);
  }
  return undefined;
}

export interface BindingOptions {
  /**
   * The config file of the daemon being checked: a `sluice front --config
   * FILE` already bound to the number is that daemon running, not a
   * conflict (check-config --host on a live node). Absent at start, where
   * any owner is a conflict.
   */
  readonly runningConfig?: string;
}

export function checkBinding(kind: 'queue' | 'log', num: number, host: HostReader, opts: BindingOptions = {}): CheckResult {
  const check = kind === 'queue' ? 'queue' : 'nflog_group';
  const what = kind === 'queue' ? `NFQUEUE ${String(num)}` : `NFLOG group ${String(num)}`;
  const table = host.bindings(kind);
  if (table === undefined) {
    // The unprivileged unit: the bind itself then refuses a taken number
    // (QueueBusyError / LogGroupBusyError), before any packet is queued.
    const code = kind === 'queue' ? 'ERR_SLUICE_QUEUE_BUSY' : 'ERR_SLUICE_NFLOG_BUSY';
    return { check, ok: true, skipped: true, detail: `${what}: its owner is listed in a root-only file, not checked as this user; binding it refuses a taken number (${code})` };
  }
  const portid = boundPortId(table, num);
  if (portid === undefined) return { check, ok: true, detail: `${what} is free` };
  const owner = host.netlinkOwner(portid);
  const file = opts.runningConfig;
  if (owner && file !== undefined && isFrontOf(owner, file)) {
    return { check, ok: true, detail: `${what} is bound by the running front node of this file (pid ${String(owner.pid)})` };
  }
  const who = owner ? `pid ${String(owner.pid)}: ${owner.argv.join(' ')}` : 'its process is not visible to this user';
  const key = kind === 'queue' ? 'queue' : 'nflogGroup';
  return {
    check,
    ok: false,
    detail: `${what} is bound by another process (netlink port ${String(portid)}; ${who}): one daemon per number; stop that process, or give this front node another \`${key}:\``,
  };
}

type PreflightConfig = Pick<FrontConfig, 'lanInterface' | 'uplinkAddress' | 'queue' | 'nflogGroup'> & {
  readonly services?: readonly ({ readonly name: string; readonly health?: { readonly kind: string; readonly source?: string | undefined } } & Partial<Pick<ServiceConfig, 'vip' | 'protocol' | 'synproxy' | 'checkpoints' | 'servers'>>)[];
  readonly checkpoints?: FrontConfig['checkpoints'];
  readonly cluster?: string;
  readonly node?: string | undefined;
  readonly ha?: HaConfig | undefined;
};

/** The pair's interfaces exist here (uplink, LAN, sync). */
export function checkHaInterfaces(ha: HaConfig, host: HostReader): CheckResult {
  const all = host.interfaces();
  const want = [
    ['ha.uplink.interface', ha.uplink.interface],
    ['ha.lan.interface', ha.lan.interface],
    ['ha.sync.interface', ha.sync.interface],
  ] as const;
  const missing = want.filter(([, n]) => !all.includes(n));
  if (missing.length === 0) return { check: 'ha_interfaces', ok: true, detail: `uplink ${ha.uplink.interface}, LAN ${ha.lan.interface} and sync ${ha.sync.interface} exist` };
  return {
    check: 'ha_interfaces',
    ok: false,
    detail: `${missing.map(([k, n]) => `${k} ${n}`).join(', ')}: no such interface in this network namespace (it has ${all.join(', ') || 'none'}): create it, or name the right one in the ha section (the same on both nodes); over the LAN, the sync interface is the LAN interface`,
  };
}

/** This node's own addresses are on the pair's interfaces. */
export function checkHaAddresses(ha: HaConfig, me: string, host: HostReader): CheckResult {
  const self = ha.nodes.find((n) => n.name === me);
  if (self === undefined) return { check: 'ha_addresses', ok: false, detail: `node ${me} is not in ha.nodes: set the top-level node to this host's entry` };
  const want = [
    ['uplinkAddress', self.uplinkAddress, ha.uplink.interface],
    ['lanAddress', self.lanAddress, ha.lan.interface],
    ['syncAddress', self.syncAddress, ha.sync.interface],
  ] as const;
  const wrong = want.flatMap(([k, a, ifname]) => {
    const on = host.interfaceWith(a);
    return on === ifname ? [] : [`${k} ${a} is ${on === undefined ? 'on no interface here' : `on ${on}`}, not on ${ifname}`];
  });
  if (wrong.length === 0) return { check: 'ha_addresses', ok: true, detail: `node ${me}: ${self.uplinkAddress} on ${ha.uplink.interface}, ${self.lanAddress} on ${ha.lan.interface}, ${self.syncAddress} on ${ha.sync.interface}` };
  return {
    check: 'ha_addresses',
    ok: false,
    detail: `node ${me} (ha.nodes entry): ${wrong.join('; ')}: keepalived sends its adverts and conntrackd its updates from these addresses; add them (e.g. \`ip addr add ADDRESS/PREFIX dev IF\`, and in the host's network config), or fix this node's entry`,
  };
}

/** keepalived and conntrackd are installed. */
export function checkHaBinaries(host: HostReader): CheckResult {
  const found = (['keepalived', 'conntrackd'] as const).map((n) => [n, host.command(n)] as const);
  const missing = found.filter(([, p]) => p === undefined).map(([n]) => n);
  if (missing.length === 0) return { check: 'ha_binaries', ok: true, detail: found.map(([n, p]) => `${n} ${String(p)}`).join(', ') };
  return { check: 'ha_binaries', ok: false, detail: `${missing.join(' and ')} not found: a front-node pair runs keepalived (VRRP) and conntrackd (flow sync); install them with \`apt-get install ${missing.join(' ')}\` (scripts/install.sh does)` };
}

/** Each health check source address is on an interface here; undefined when no service sets one. */
export function checkHealthSource(cfg: PreflightConfig, host: HostReader): CheckResult | undefined {
  const used = (cfg.services ?? []).flatMap((s, i) => (s.health !== undefined && s.health.kind !== 'none' && s.health.source !== undefined ? [{ i, name: s.name, source: s.health.source }] : []));
  if (used.length === 0) return undefined;
  const missing = used.filter((u) => host.interfaceWith(u.source) === undefined);
  if (missing.length === 0) return { check: 'health_source', ok: true, detail: `health check sources ${[...new Set(used.map((u) => u.source))].join(', ')} are on interfaces here` };
  return {
    check: 'health_source',
    ok: false,
    detail: missing
      .map((m) => `services[${String(m.i)}].health.source ${m.source} (service ${m.name}) is not an address of this network namespace: every check would fail; set it to an address of the LAN interface (${cfg.lanInterface}), or remove it to let the kernel choose`)
      .join('; '),
  };
}

/** The VIPs of the services behind SYN cookies (a full configuration's; none for a partial one). */
function synproxyVips(cfg: PreflightConfig): string[] {
  const out = new Set<string>();
  for (const s of cfg.services ?? []) {
    if (s.vip === undefined || s.protocol === undefined || s.checkpoints === undefined || s.servers === undefined) continue;
    if (synproxyOf({ checkpoints: cfg.checkpoints ?? [] }, { vip: s.vip, protocol: s.protocol, synproxy: s.synproxy, checkpoints: s.checkpoints, servers: s.servers }) !== undefined) out.add(s.vip);
  }
  return [...out];
}

/** SYN cookies' needs: tcp_loose 0 and a local route per SYNPROXY VIP; undefined without such a service. */
export function checkSynproxy(vips: readonly string[], host: HostReader): CheckResult | undefined {
  if (vips.length === 0) return undefined;
  const bad: string[] = [];
  const loose = host.sysctl('net/netfilter/nf_conntrack_tcp_loose');
  if (loose !== '0') {
    bad.push(
      `net.netfilter.nf_conntrack_tcp_loose is ${loose ?? 'absent (nf_conntrack not loaded; its default is 1)'}: a client's cookie ACK would start a tracked flow instead of reaching SYNPROXY; set it with \`${loose === undefined ? 'modprobe nf_conntrack && ' : ''}sysctl -w net.netfilter.nf_conntrack_tcp_loose=0\` (and in /etc/sysctl.d/; mid-stream pickup of flows without a conntrack entry ends with it)`,
    );
  }
  const notLocal = vips.filter((v) => !host.localRoute(v));
  if (notLocal.length > 0) {
    bad.push(
      `${notLocal.join(', ')} ${notLocal.length === 1 ? 'is' : 'are'} not routed as local here: SYNPROXY answers the SYN in INPUT, and routing drops (blackhole) or forwards (no route) it instead; add \`ip ${(notLocal[0] ?? '').includes(':') ? '-6 ' : ''}route add local ${notLocal[0] ?? ''}/${(notLocal[0] ?? '').includes(':') ? '128' : '32'} dev lo\` (or the VIP network, e.g. /24 or /64), and in the host's network config`,
    );
  }
  const what = `services with synproxy (VIPs ${vips.join(', ')})`;
  if (bad.length === 0) return { check: 'synproxy', ok: true, detail: `${what}: nf_conntrack_tcp_loose = 0, every VIP routed local` };
  return { check: 'synproxy', ok: false, detail: `${what}: ${bad.join('; ')}; or set \`synproxy: false\` on those services` };
}

/** Every check, in PREFLIGHT_CHECKS order (health_source only when a service sets a source; ha_* only with `ha`). */
export function runPreflight(cfg: PreflightConfig, host: HostReader, opts: BindingOptions = {}): CheckResult[] {
  const source = checkHealthSource(cfg, host);
  const synproxy = checkSynproxy(synproxyVips(cfg), host);
  const ha = cfg.ha;
  const v6 = checkIpv6Forward(cfg, host);
  return [
    checkIpForward(host),
    ...(v6 ? [v6] : []),
    checkLanInterface(cfg, host),
    checkRpFilter(cfg, host),
    checkConntrack(host),
    checkBinding('queue', cfg.queue, host, opts),
    checkBinding('log', cfg.nflogGroup, host, opts),
    ...(source ? [source] : []),
    ...(ha ? [checkHaInterfaces(ha, host), checkHaAddresses(ha, cfg.node ?? cfg.cluster ?? '', host), checkHaBinaries(host)] : []),
    ...(synproxy ? [synproxy] : []),
  ];
}

/** Throws PreflightError listing every failed check. */
export function assertHostReady(cfg: PreflightConfig, host: HostReader = systemHost()): void {
  const failures = runPreflight(cfg, host).filter((r) => !r.ok);
  if (failures.length > 0) throw new PreflightError(failures);
}

function readOr(path: string, absent: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return absent;
    throw err;
  }
}

/** NETLINK_NETFILTER in /proc/net/netlink's Eth column. */
const NETLINK_NETFILTER = 12;

/** The real host: /proc of this process's network namespace, and conntrack(8). */
export function systemHost(): HostReader {
  return {
    sysctl(path) {
      try {
        return readFileSync(`/proc/sys/${path}`, 'utf8').trim();
      } catch {
        return undefined;
      }
    },
    interfaces() {
      // "  lo: 123 ..." after two header lines
      return readOr('/proc/net/dev', '')
        .split('\n')
        .slice(2)
        .map((l) => l.split(':')[0]?.trim() ?? '')
        .filter((n) => n !== '');
    },
    interfaceWith(address) {
      for (const [name, addrs] of Object.entries(networkInterfaces())) {
        // Addresses compare as the config canonicalizes them (IPv6: RFC 5952 text, which is what Node prints).
        if (addrs?.some((a) => a.address === address)) return name;
      }
      return undefined;
    },
    conntrackProc() {
      let fd: number;
      try {
        fd = openSync('/proc/net/nf_conntrack', 'r');
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return 'absent';
        if (code === 'EACCES' || code === 'EPERM') return 'denied';
        return { error: (err as Error).message };
      }
      try {
        readSync(fd, Buffer.alloc(256)); // the daemon reads it whole; one read proves access
        return 'readable';
      } catch (err) {
        return { error: (err as Error).message };
      } finally {
        closeSync(fd);
      }
    },
    conntrackNetlink() {
      return probeCtnetlink();
    },
    bindings(kind) {
      try {
        return readOr(kind === 'queue' ? '/proc/net/netfilter/nfnetlink_queue' : '/proc/net/netfilter/nfnetlink_log', '');
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EACCES' || code === 'EPERM') return undefined;
        throw err;
      }
    },
    command(name) {
      const dirs = [...(process.env['PATH'] ?? '').split(':').filter((d) => d.startsWith('/')), '/usr/sbin', '/sbin'];
      for (const d of dirs) {
        try {
          accessSync(`${d}/${name}`, constants.X_OK);
          return `${d}/${name}`;
        } catch {
          // not here
        }
      }
      return undefined;
    },
    localRoute(address) {
      // "local 198.19.1.1 dev lo table local src ..." for a local route
      // (IPv6: "local 2001:2:0:1::1 from :: dev lo table local ..."); another
      // route prints the address first, a blackhole fails.
      const r = spawnSync('ip', ['-o', address.includes(':') ? '-6' : '-4', 'route', 'get', address], { encoding: 'utf8', timeout: 10_000 });
      return r.status === 0 && r.stdout.startsWith('local ');
    },
    netlinkOwner(portid) {
      // /proc/net/netlink: sk Eth Pid(port id) Groups Rmem Wmem Dump Locks Drops Inode
      let inode: string | undefined;
      for (const line of readOr('/proc/net/netlink', '').split('\n')) {
        const f = line.trim().split(/\s+/);
        if (Number(f[1]) === NETLINK_NETFILTER && Number(f[2]) === portid) inode = f[9];
      }
      if (inode === undefined) return undefined;
      const target = `socket:[${inode}]`;
      for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
        let fds: string[];
        try {
          fds = readdirSync(`/proc/${pid}/fd`);
        } catch {
          continue; // gone, or another user's
        }
        for (const fd of fds) {
          let link: string;
          try {
            link = readlinkSync(`/proc/${pid}/fd/${fd}`);
          } catch {
            continue;
          }
          if (link !== target) continue;
          let cwd: string | undefined;
          try {
            cwd = readlinkSync(`/proc/${pid}/cwd`);
          } catch {
            cwd = undefined;
          }
          return { pid: Number(pid), argv: readOr(`/proc/${pid}/cmdline`, '').split('\0').filter(Boolean), cwd };
        }
      }
      return undefined;
    },
  };
}
