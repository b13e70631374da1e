/**
 * Brings the test site of plan.ts up and down in network namespaces.
 *
 * up() is idempotent: if the same plan is already up and healthy it does
 * nothing; otherwise it removes leftovers of that prefix and builds anew.
 * down() removes every namespace named `<prefix>-*` (after killing the
 * processes inside them) and the run directory; it never fails on absence.
 * Both are synchronous so they can run from a process 'exit' handler.
 *
 * The site is dual-stack (plan.ts). Everything build() creates besides
 * processes, the run directory and the servers' cgroups (links, addresses,
 * routes, iptables and ip6tables rules, sysctls) lives inside the prefix's
 * namespaces, so deleting them removes it all.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeKeyPair } from '../../src/control/keys.ts';
import { CGROUP_BASE, cgroupAdd, cgroupCreate, cgroupRemove } from './cgroup.ts';
import { namespacesOf, planTestbed, type TestbedOptions, type TestbedPlan, PREFIX_RE } from './plan.ts';
import { ipBatch, listNamespaces, pidAlive, run, runIn, sleepSync, tryRun, waitFor } from './sh.ts';

export const RUN_ROOT = '/run/sluice-testbed';
const DELAY_PROGRAM = fileURLToPath(new URL('./wan-delay.ts', import.meta.url));

export interface TestbedState {
  readonly plan: TestbedPlan;
  readonly runDir: string;
  readonly delayPid: number;
  readonly nginxPids: Readonly<Record<string, number>>;
  /** sha1 of /blob.bin when blobMiB > 0. */
  readonly blobSha1?: string;
  /**
   * CURVE key pairs for every daemon host: <keysDir>/<name>.key and .pub,
   * names fr<k> (front nodes; fr<k>a and fr<k>b for a pair), the server
   * ids (agents), dns and dns2.
   */
  readonly keysDir: string;
  /** Each server's cgroup (below the hierarchy root) when serverCpus > 0. */
  readonly cgroups: Readonly<Record<string, string>>;
}

export function runDirOf(prefix: string): string {
  return join(RUN_ROOT, prefix);
}

function readState(prefix: string): TestbedState | undefined {
  try {
    return JSON.parse(readFileSync(join(runDirOf(prefix), 'state.json'), 'utf8')) as TestbedState;
  } catch {
    return undefined;
  }
}

/** The state of a running testbed, or undefined if it is not (fully) up. */
export function status(prefix: string): TestbedState | undefined {
  const st = readState(prefix);
  if (!st) return undefined;
  const present = new Set(listNamespaces());
  if (!namespacesOf(st.plan).every((ns) => present.has(ns.name))) return undefined;
  if (!pidAlive(st.delayPid) || !Object.values(st.nginxPids).every(pidAlive)) return undefined;
  return st;
}

export function up(opts: TestbedOptions): TestbedState {
  const plan = planTestbed(opts);
  const current = status(plan.prefix);
  if (current && JSON.stringify(current.plan) === JSON.stringify(plan)) return current;
  down(plan.prefix);
  try {
    const st = build(plan);
    writeFileSync(join(st.runDir, 'state.json'), JSON.stringify(st, null, 2));
    return st;
  } catch (err) {
    down(plan.prefix);
    throw err;
  }
}

/** Removes everything of `prefix`. Safe to call at any time, any number of times. */
export function down(prefix: string): void {
  if (!PREFIX_RE.test(prefix)) return;
  const mine = listNamespaces().filter((n) => n.startsWith(`${prefix}-`));
  for (const sig of ['SIGTERM', 'SIGKILL'] as const) {
    let any = false;
    for (const ns of mine) {
      for (const pid of (tryRun('ip', ['netns', 'pids', ns]) ?? '').split('\n')) {
        const n = Number(pid);
        if (n > 0) {
          any = true;
          try {
            process.kill(n, sig);
          } catch {
            /* already gone */
          }
        }
      }
    }
    if (!any) break;
    if (sig === 'SIGTERM') {
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline && mine.some((ns) => (tryRun('ip', ['netns', 'pids', ns]) ?? '').trim() !== '')) sleepSync(50);
    }
  }
  for (const ns of mine) tryRun('ip', ['netns', 'del', ns]);
  cgroupRemove(`${CGROUP_BASE}/${prefix}`);
  rmSync(runDirOf(prefix), { recursive: true, force: true });
}

/** IPv6 settings of every namespace, set before its links exist (see build). */
const IPV6_QUIET: Record<string, string> = {
  'net.ipv6.conf.all.accept_dad': '0',
  'net.ipv6.conf.default.accept_dad': '0',
  'net.ipv6.conf.all.accept_ra': '0',
  'net.ipv6.conf.default.accept_ra': '0',
  'net.ipv6.conf.all.autoconf': '0',
  'net.ipv6.conf.default.autoconf': '0',
};

/** Bridged frames kept out of iptables and ip6tables (br_netfilter is built in here). */
const BRIDGE_NF_OFF: Record<string, string> = {
  'net.bridge.bridge-nf-call-iptables': '0',
  'net.bridge.bridge-nf-call-ip6tables': '0',
};

function sysctl(ns: string, settings: Record<string, string>): void {
  runIn(
    ns,
    'sysctl',
    ['-q', '-w', ...Object.entries(settings).map(([k, v]) => `${k}=${v}`)],
  );
}

function build(plan: TestbedPlan): TestbedState {
  const dir = runDirOf(plan.prefix);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const wan = plan.wan.name;

  for (const ns of namespacesOf(plan)) {
    run('ip', ['netns', 'add', ns.name]);
    // Before any link exists, so every interface inherits "default": no
    // duplicate address detection (addresses, link-local ones too, usable at
    // once instead of tentative for a second), and no router advertisements
    // or autoconfiguration (only the plan's addresses and routes appear).
    sysctl(ns.name, IPV6_QUIET);
    ipBatch(ns.name, ['link set lo up']);
  }

  // --- links: created inside the namespaces, never in the host's ---------
  // Every IPv4 address and route has its IPv6 twin (plan.ts); IPv6
  // addresses are added "nodad" (usable at once).
  const wanLines: string[] = [];
  for (const c of plan.clients) {
    wanLines.push(`link add ${c.wanIf} type veth peer name wan0 netns ${c.name}`);
    wanLines.push(`addr add ${c.gateway}/24 dev ${c.wanIf}`, `addr add ${c.gateway6}/64 dev ${c.wanIf} nodad`, `link set ${c.wanIf} up`);
  }
  for (const c of plan.ipv6OnlyClients) {
    wanLines.push(`link add ${c.wanIf} type veth peer name wan0 netns ${c.name}`);
    wanLines.push(`addr add ${c.gateway6}/64 dev ${c.wanIf} nodad`, `link set ${c.wanIf} up`);
  }
  for (const d of plan.dnsServers) {
    wanLines.push(`link add ${d.wanIf} type veth peer name wan0 netns ${d.name}`);
    wanLines.push(`addr add ${d.gateway}/24 dev ${d.wanIf}`, `addr add ${d.gateway6}/64 dev ${d.wanIf} nodad`, `link set ${d.wanIf} up`);
  }
  for (const k of plan.clusters) {
    if (k.fronts.length === 1) {
      wanLines.push(`link add ${k.wanIf} type veth peer name wan0 netns ${k.front.name}`);
      wanLines.push(`addr add ${k.wanSideAddress}/24 dev ${k.wanIf}`, `addr add ${k.wanSideAddress6}/${String(k.uplinkPrefix6)} dev ${k.wanIf} nodad`, `link set ${k.wanIf} up`);
    } else {
      // A pair: one uplink segment (a bridge in the WAN namespace) that both
      // fronts join, so the VRRP virtual address can move between them.
      wanLines.push(
        `link add ${k.wanIf} type bridge`,
        `addr add ${k.wanSideAddress}/24 dev ${k.wanIf}`,
        `addr add ${k.wanSideAddress6}/${String(k.uplinkPrefix6)} dev ${k.wanIf} nodad`,
        `link set ${k.wanIf} up`,
      );
      for (const [i, f] of k.fronts.entries()) {
        const port = `${k.wanIf}p${String(i + 1)}`;
        wanLines.push(`link add ${port} type veth peer name wan0 netns ${f.name}`, `link set ${port} master ${k.wanIf}`, `link set ${port} up`);
      }
    }
    wanLines.push(`route add ${k.lanNetwork} via ${k.uplinkAddress}`, `route add ${k.vipNetwork} via ${k.uplinkAddress}`);
    wanLines.push(`route add ${k.lanNetwork6} via ${k.uplinkAddress6}`, `route add ${k.vipNetwork6} via ${k.uplinkAddress6}`);
  }
  ipBatch(wan, wanLines);

  for (const c of plan.clients) {
    ipBatch(c.name, [
      `addr add ${c.address}/24 dev wan0`,
      ...c.extraAddresses.map((a) => `addr add ${a}/24 dev wan0`),
      `addr add ${c.address6}/64 dev wan0 nodad`,
      ...c.extraAddresses6.map((a) => `addr add ${a}/64 dev wan0 nodad`),
      'link set wan0 up',
      `route add default via ${c.gateway}`,
      `route add default via ${c.gateway6}`,
    ]);
  }
  // No IPv4 at all on an IPv6-only client's link (lo keeps 127.0.0.1).
  for (const c of plan.ipv6OnlyClients) ipBatch(c.name, [`addr add ${c.address6}/64 dev wan0 nodad`, 'link set wan0 up', `route add default via ${c.gateway6}`]);
  for (const d of plan.dnsServers) {
    ipBatch(d.name, [
      `addr add ${d.address}/24 dev wan0`,
      `addr add ${d.address6}/64 dev wan0 nodad`,
      'link set wan0 up',
      `route add default via ${d.gateway}`,
      `route add default via ${d.gateway6}`,
    ]);
  }

  for (const k of plan.clusters) {
    if (k.fronts.length === 1) {
      const fr = k.front.name;
      const lines = [
        `addr add ${k.uplinkAddress}/24 dev wan0`,
        `addr add ${k.uplinkAddress6}/${String(k.uplinkPrefix6)} dev wan0 nodad`,
        'link set wan0 up',
        `route add default via ${k.wanSideAddress}`,
        `route add default via ${k.wanSideAddress6}`,
        // SYN cookies (services' synproxy): the VIPs are local here, so the
        // untracked SYN and the cookie ACK reach INPUT, where SYNPROXY
        // answers them (routing drops them with a blackhole route, and sends
        // them back to the WAN with none). DNATed packets are routed to the
        // servers as before: the DNAT comes first.
        `route add local ${k.vipNetwork} dev lo`,
        // The IPv6 VIPs likewise: with no IPv6 services yet they are simply
        // local (closed ports answer RST), never routed back to the WAN.
        `route add local ${k.vipNetwork6} dev lo`,
        'link add lan0 type bridge',
        `addr add ${k.lanAddress}/24 dev lan0`,
        `addr add ${k.lanAddress6}/64 dev lan0 nodad`,
        'link set lan0 up',
      ];
      for (const s of k.servers) {
        lines.push(`link add ${s.frontIf} type veth peer name eth0 netns ${s.name}`, `link set ${s.frontIf} master lan0`, `link set ${s.frontIf} up`);
      }
      ipBatch(fr, lines);
    } else {
      // A pair: the LAN is a bridge in its own namespace (a switch) joining
      // both fronts' lan0 and the servers; the fronts are joined by sync0.
      const sw = k.lanSwitch?.name ?? '';
      // "lanbr", not "br": ip(8) reads "br" as an abbreviation of "broadcast".
      const lines = ['link add lanbr type bridge', 'link set lanbr up'];
      for (const [i, f] of k.fronts.entries()) {
        const port = `front${String(i + 1)}`;
        lines.push(`link add ${port} type veth peer name lan0 netns ${f.name}`, `link set ${port} master lanbr`, `link set ${port} up`);
      }
      for (const s of k.servers) {
        lines.push(`link add ${s.frontIf} type veth peer name eth0 netns ${s.name}`, `link set ${s.frontIf} master lanbr`, `link set ${s.frontIf} up`);
      }
      ipBatch(sw, lines);
      const [a, b] = k.fronts;
      if (a === undefined || b === undefined) throw new Error(`cluster ${String(k.index)}: a pair needs two fronts`);
      ipBatch(a.name, [`link add sync0 type veth peer name sync0 netns ${b.name}`]);
      for (const f of k.fronts) {
        ipBatch(f.name, [
          `addr add ${f.uplinkAddress}/${String(k.uplinkPrefix)} dev wan0`,
          `addr add ${f.uplinkAddress6}/${String(k.uplinkPrefix6)} dev wan0 nodad`,
          'link set wan0 up',
          `route add default via ${k.wanSideAddress}`,
          `route add default via ${k.wanSideAddress6}`,
          `route add local ${k.vipNetwork} dev lo`,
          `route add local ${k.vipNetwork6} dev lo`,
          `addr add ${f.lanAddress}/24 dev lan0`,
          `addr add ${f.lanAddress6}/64 dev lan0 nodad`,
          'link set lan0 up',
          `addr add ${f.syncAddress ?? ''}/30 dev sync0`,
          `addr add ${f.syncAddress6 ?? ''}/64 dev sync0 nodad`,
          'link set sync0 up',
        ]);
      }
    }
    for (const s of k.servers) {
      ipBatch(s.name, [
        `addr add ${s.address}/24 dev eth0`,
        `addr add ${s.address6}/64 dev eth0 nodad`,
        'link set eth0 up',
        `route add default via ${s.gateway}`,
        `route add default via ${s.gateway6}`,
      ]);
    }
  }

  // --- kernel settings ----------------------------------------------------
  sysctl(wan, { 'net.ipv4.ip_forward': '1', 'net.ipv6.conf.all.forwarding': '1' });
  for (const k of plan.clusters) {
    // rp_filter's effective value is max(all, interface): clear both.
    const settings: Record<string, string> = {
      'net.ipv4.ip_forward': '1',
      'net.ipv6.conf.all.forwarding': '1',
      'net.ipv4.conf.all.rp_filter': '0',
      'net.ipv4.conf.default.rp_filter': '0',
      'net.ipv4.conf.wan0.rp_filter': '0',
      'net.ipv4.conf.lan0.rp_filter': '0',
      'net.ipv4.tcp_timestamps': '2',
      // SYN cookies: the client's cookie ACK must be INVALID (no mid-stream
      // pickup) to reach SYNPROXY (docs/operations.md, "SYN cookies").
      'net.netfilter.nf_conntrack_tcp_loose': '0',
    };
    if (k.fronts.length > 1) settings['net.ipv4.conf.sync0.rp_filter'] = '0';
    // br_netfilter is built in here: keep bridged LAN frames out of iptables
    // and ip6tables so only routed traffic meets the front node's rules.
    const brNf = existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables');
    if (brNf) Object.assign(settings, BRIDGE_NF_OFF);
    for (const f of k.fronts) sysctl(f.name, settings);
    if (k.lanSwitch && brNf) sysctl(k.lanSwitch.name, BRIDGE_NF_OFF);
    for (const s of k.servers) sysctl(s.name, { 'net.core.somaxconn': '4096', 'net.ipv4.tcp_max_syn_backlog': '4096' });
  }
  if (existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables') && plan.clusters.some((k) => k.fronts.length > 1)) {
    // The pairs' uplink bridges live in the WAN namespace: its delay rules
    // must see routed packets only, not bridged frames.
    sysctl(wan, BRIDGE_NF_OFF);
  }
  // The net.ipv4 TCP settings apply to IPv6 sockets too.
  for (const c of [...plan.clients, ...plan.ipv6OnlyClients]) {
    sysctl(c.name, { 'net.ipv4.ip_local_port_range': '1024 65000', 'net.ipv4.tcp_tw_reuse': '1', 'net.ipv4.tcp_timestamps': '2' });
  }

  // --- WAN delays: mark per path (µs), queue marked packets ---------------
  const mangle = ['*mangle', ':TESTBED_DELAY - [0:0]', '-A FORWARD -j TESTBED_DELAY'];
  const allClients = [...plan.clients, ...plan.ipv6OnlyClients];
  for (const d of plan.delays) {
    if (d.oneWayMs <= 0) continue;
    const c = allClients.find((x) => x.index === d.client);
    const k = plan.clusters[d.cluster - 1];
    // A delay the plan holds must become a rule: skipping one silently would
    // leave a path undelayed.
    if (!c || !k) throw new Error(`delay ${String(d.client)}:${String(d.cluster)} names no planned client or cluster`);
    const us = Math.round(d.oneWayMs * 1000);
    mangle.push(`-A TESTBED_DELAY -i ${c.wanIf} -o ${k.wanIf} -j MARK --set-mark ${us}`);
    mangle.push(`-A TESTBED_DELAY -i ${k.wanIf} -o ${c.wanIf} -j MARK --set-mark ${us}`);
  }
  mangle.push('COMMIT');
  // The rules select paths by interface, so the same text serves IPv6: its
  // packets get the same marks and go to the same queue (a queue takes both
  // families), and the delay program holds them alike.
  const filter = [
    '*filter',
    ':TESTBED_DELAYQ - [0:0]',
    '-A FORWARD -j TESTBED_DELAYQ',
    `-A TESTBED_DELAYQ -m mark ! --mark 0 -j NFQUEUE --queue-num ${plan.delayQueue} --queue-bypass`,
    'COMMIT',
  ];
  runIn(wan, 'iptables-restore', ['--noflush'], [...mangle, ...filter].join('\n') + '\n');
  runIn(wan, 'ip6tables-restore', ['--noflush'], [...mangle, ...filter].join('\n') + '\n');

  const readyFile = join(dir, 'wan-delay.ready');
  const delayPid = startDetached(wan, process.execPath, [DELAY_PROGRAM, '--queue', String(plan.delayQueue), '--ready-file', readyFile], join(dir, 'wan-delay.log'));
  // Its log goes with the run directory when a failed up() tears the site
  // down, so a failure carries the log's end.
  const delayLog = (): string => {
    try {
      return readFileSync(join(dir, 'wan-delay.log'), 'utf8').trim().slice(-1500) || '(empty)';
    } catch {
      return '(none)';
    }
  };
  try {
    // A readiness bound, not a speed test: a loaded machine starts Node slowly.
    waitFor('WAN delay program', 30_000, () => existsSync(readyFile) || !pidAlive(delayPid));
  } catch (err) {
    throw new Error(`${(err as Error).message}; its log: ${delayLog()}`, { cause: err });
  }
  if (!pidAlive(delayPid)) throw new Error(`WAN delay program exited; its log: ${delayLog()}`);

  // --- servers: one nginx each ---------------------------------------------
  let blobSha1: string | undefined;
  const common = join(dir, 'www-common');
  mkdirSync(common, { recursive: true, mode: 0o755 });
  if (plan.blobMiB > 0) {
    const blob = join(common, 'blob.bin');
    run('dd', ['if=/dev/urandom', `of=${blob}`, 'bs=1M', `count=${plan.blobMiB}`, 'status=none']);
    blobSha1 = run('sha1sum', [blob]).split(' ')[0];
  }
  const nginxPids: Record<string, number> = {};
  const cgroups: Record<string, string> = {};
  for (const k of plan.clusters) {
    for (const s of k.servers) {
      nginxPids[s.id] = startNginx(dir, s.name, s.id, k.index, s.address, common);
      if (plan.serverCpus > 0) {
        const group = `${CGROUP_BASE}/${plan.prefix}/${s.id}`;
        cgroupCreate(group, plan.serverCpus);
        // nginx's master and worker: everything in the server's namespace so far.
        for (const pid of (tryRun('ip', ['netns', 'pids', s.name]) ?? '').split('\n').map(Number)) if (pid > 0) cgroupAdd(group, pid);
        cgroups[s.id] = group;
      }
    }
  }
  // Keys for every daemon host (the demo and tests configure CURVE with them).
  const keysDir = join(dir, 'keys');
  for (const k of plan.clusters) {
    for (const f of k.fronts) writeKeyPair(keysDir, f.id, { force: true });
    for (const s of k.servers) writeKeyPair(keysDir, s.id, { force: true });
  }
  for (const d of plan.dnsServers) writeKeyPair(keysDir, d.id, { force: true });
  const st: TestbedState = { plan, runDir: dir, delayPid, nginxPids, keysDir, cgroups, ...(blobSha1 !== undefined ? { blobSha1 } : {}) };
  return st;
}

/** Starts `cmd` inside `ns`, detached, output to `logFile`; returns its pid. */
export function startDetached(ns: string, cmd: string, args: readonly string[], logFile: string): number {
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { detached: true, stdio: ['ignore', fd, fd] });
    child.unref();
    if (child.pid === undefined) throw new Error(`cannot start ${cmd} in ${ns}`);
    return child.pid; // ip netns exec execs the command: same pid
  } finally {
    closeSync(fd);
  }
}

function startNginx(dir: string, ns: string, id: string, cluster: number, address: string, common: string): number {
  const www = join(dir, `www-${id}`);
  mkdirSync(www, { recursive: true, mode: 0o755 });
  writeFileSync(join(www, 'index.html'), `server ${id} cluster ${cluster} ${address}\n`, { mode: 0o644 });
  const tmp = join(dir, `tmp-${id}`);
  mkdirSync(tmp, { recursive: true, mode: 0o777 });
  const pidFile = join(dir, `nginx-${id}.pid`);
  const conf = join(dir, `nginx-${id}.conf`);
  writeFileSync(
    conf,
    `# testbed server ${id} (generated)
worker_processes 1;
user www-data;
daemon on;
pid ${pidFile};
error_log ${join(dir, `nginx-${id}.error.log`)} warn;
events { worker_connections 16384; }
http {
  access_log ${join(dir, `nginx-${id}.access.log`)} combined buffer=64k flush=1s;
  client_body_temp_path ${tmp}/body;
  proxy_temp_path ${tmp}/proxy;
  fastcgi_temp_path ${tmp}/fastcgi;
  uwsgi_temp_path ${tmp}/uwsgi;
  scgi_temp_path ${tmp}/scgi;
  keepalive_requests 1000000;
  sendfile on;
  default_type text/plain;
  server {
    listen 80 backlog=4096;
    listen [::]:80 backlog=4096;
    root ${www};
    location = /blob.bin { root ${common}; }
    # Health checks (the demo's front nodes GET it every second): answered
    # without an access log line, as sites do, so checks do not count as
    # client requests in the agents' request rates.
    location = /healthz { access_log off; return 200 "ok\n"; }
  }
}
`,
  );
  run('ip', ['netns', 'exec', ns, 'nginx', '-c', conf]);
  let pid = 0;
  waitFor(`nginx ${id}`, 10_000, () => {
    try {
      pid = Number(readFileSync(pidFile, 'utf8').trim());
    } catch {
      return false;
    }
    // Both sockets: 0.0.0.0:80 and [::]:80 (nginx binds the latter IPv6-only).
    const ss = tryRun('ip', ['netns', 'exec', ns, 'ss', '-Hltn', 'sport = :80']) ?? '';
    return pid > 0 && ss.includes('0.0.0.0:80') && ss.includes('[::]:80');
  });
  return pid;
}
