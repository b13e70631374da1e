/**
 * The Sluice daemons of a testbed site: configuration for every front node,
 * agent and the DNS server of a plan (with the testbed's CURVE keys), and
 * starting/stopping them. The demo runs the whole site from here.
 *
 * Addresses: each front node's agents listen on its LAN side (.1:7101), its
 * PUB on its uplink (:7102); the DNS server's PUB on 198.18.2.2:7300, its
 * DNS on 198.18.2.2:53 and [2001:2:0:2::2]:53 (dnsConfig). Every
 * front subscribes to the DNS server (probe requests) and to the other
 * fronts (overflow); the DNS server subscribes to every front.
 *
 * A front-node pair (testbed --fronts-per-cluster 2): each node's agents
 * listen on its own LAN address, its PUB on its own uplink address; both
 * run keepalived and conntrackd from `sluice ha render` (files in
 * <runDir>/ha-<node>/), started before (conntrackd) and after (keepalived)
 * the front daemon, so the notify hook finds the daemon's admin socket.
 * keepalived holds both families of the pair's virtual addresses (the
 * uplink's and the LAN gateway's IPv6 twins as virtualAddress6), so the
 * cluster is reachable over IPv6 too; `ipv6Service` adds an IPv6 VIP.
 * Every agent pushes to both nodes; every DNS server subscribes to every
 * node, and every node to every DNS server.
 *
 * Every daemon serves GET /metrics and /status on its namespace's loopback
 * (OPS_PORTS; each namespace has its own 127.0.0.1, so one port per kind):
 *   ip netns exec <prefix>-fr1 curl -s http://127.0.0.1:9100/metrics
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminRequest } from '../../src/admin/client.ts';
import type { ClusterPlan, DnsPlan, FrontPlan, ServerPlan } from './plan.ts';
import type { TestbedState } from './testbed.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
/** keepalived's notify hook, shipped in deploy/ (the testbed runs it from the checkout). */
const HA_NOTIFY = fileURLToPath(new URL('../../deploy/ha/sluice-ha-notify', import.meta.url));

/** The ops HTTP port of each daemon kind, on 127.0.0.1 of its namespace. */
export const OPS_PORTS = { front: 9100, dns: 9101, agent: 9102 } as const;

export interface SiteOptions {
  /** Seconds between cluster_load reports (and DNS's reportSeconds). */
  readonly reportSeconds?: number;
  readonly loadSeconds?: number;
  /** TTL of steered answers. */
  readonly ttl?: number;
  /**
   * Health checks on (the demo): the front node checks each server over
   * HTTP every second (GET /healthz, which nginx answers without logging,
   * so checks are not client requests; fall 2, rise 2, 10 s slow start)
   * and each agent checks its own nginx over TCP every second.
   */
  readonly healthChecks?: boolean;
  /** Front-node pairs: VRRP advertisement interval (failover after about 3 of them). */
  readonly advertSeconds?: number;
  /**
   * Each front node also serves the cluster's IPv6 VIP (service www6,
   * vip6 port 80, the servers' IPv6 twins; overflow to the other clusters'
   * vip6, SNATed to uplinkAddress6). With healthChecks, www6 checks its
   * servers like www (over IPv6), so a killed nginx leaves both services.
   */
  readonly ipv6Service?: boolean;
}

/** The admin socket of a front node: front<k>.sock for a single front (as before pairs), front-<id>.sock in a pair. */
export function frontSocket(st: TestbedState, k: ClusterPlan, f: FrontPlan = k.front): string {
  return join(st.runDir, k.fronts.length === 1 ? `front${k.index}.sock` : `front-${f.id}.sock`);
}

/** The admin socket of a DNS server: dns.sock, dns2.sock. */
export function dnsSocket(st: TestbedState, d: DnsPlan = st.plan.dns): string {
  return join(st.runDir, `${d.id}.sock`);
}

/** Where a pair node's keepalived and conntrackd files live. */
export function haDir(st: TestbedState, f: FrontPlan): string {
  return join(st.runDir, `ha-${f.id}`);
}

/** Every front node of the site with its cluster. */
export function frontNodes(st: TestbedState): { k: ClusterPlan; f: FrontPlan }[] {
  return st.plan.clusters.flatMap((k) => k.fronts.map((f) => ({ k, f })));
}

export function zoneText(st: TestbedState): string {
  return `$ORIGIN example.test.
$TTL 1h
@    IN SOA ns1 hostmaster ( 2026112101 1h 15m 1w 60 )
${st.plan.dnsServers.map((_d, i) => `     IN NS  ns${String(i + 1)}`).join('\n')}
${st.plan.dnsServers.map((d, i) => `ns${String(i + 1)}  IN A   ${d.address}\n     IN AAAA ${d.address6}`).join('\n')}
www  60 IN A ${st.plan.clusters[0]?.vip ?? '198.19.1.1'}
${st.plan.clusters.map((k) => `c${k.index}   IN A   ${k.vip}`).join('\n')}
`;
}

/**
 * A DNS server of the site, dual-stack: it listens on its IPv4 and IPv6
 * addresses, and each cluster's vips list both families (A answers the
 * IPv4 VIP, AAAA the IPv6 one, from one decision per client prefix), so an
 * IPv6-only client (plan.ipv6OnlyClients) resolves over IPv6 and is steered
 * by the RTTs the front nodes measure to it with ICMPv6 echo. The IPv6
 * client prefix is /64: the testbed gives each client link its own /64, and
 * all of them lie in one /56 (the default unit), which would make every
 * client one IPv6 prefix.
 */
export function dnsConfig(st: TestbedState, o: SiteOptions = {}, d: DnsPlan = st.plan.dns): string {
  const keys = st.keysDir;
  const a = d.address;
  const fronts = frontNodes(st);
  return `name: ${d.id}
listen: ["${a}:53", "[${d.address6}]:53"]
zones: [{ file: ${join(st.runDir, 'example.test.zone')} }]
clusters:
${st.plan.clusters.map((k) => `  - { name: c${k.index}, vips: [${k.vip}, "${k.vip6}"] }`).join('\n')}
steering:
  names: [{ name: www.example.test, policy: rtt, ttl: ${o.ttl ?? 2} }]
  reportSeconds: ${o.reportSeconds ?? 1}
  downAfterIntervals: 3
  ipv6Prefix: 64
probe: { count: 3, intervalSeconds: 0.5, retrySeconds: 30 }
rrl: { enabled: true, responsesPerSecond: 200 }
adminSocket: ${dnsSocket(st, d)}
http: { listen: '127.0.0.1:${OPS_PORTS.dns}' }
control:
  keyFile: ${join(keys, `${d.id}.key`)}
  publish:
    listen: tcp://${a}:7300
    allow: [${fronts.map(({ f }) => join(keys, `${f.id}.pub`)).join(', ')}]
  subscribe:
${fronts.map(({ f }) => `    - { endpoint: 'tcp://${f.uplinkAddress}:7102', publicKey: ${join(keys, `${f.id}.pub`)} }`).join('\n')}
`;
}

export function frontConfig(st: TestbedState, k: ClusterPlan, o: SiteOptions = {}, f: FrontPlan = k.front): string {
  const keys = st.keysDir;
  const others = st.plan.clusters.filter((x) => x.index !== k.index);
  const otherFronts = others.flatMap((x) => x.fronts);
  const pair = k.fronts.length > 1;
  const dir = haDir(st, f);
  const ha = pair
    ? `node: ${f.id}
ha:
  nodes:
${k.fronts.map((n) => `    - { name: ${n.id}, priority: ${String(n.priority ?? 100)}, uplinkAddress: ${n.uplinkAddress}, lanAddress: ${n.lanAddress}, syncAddress: ${n.syncAddress ?? ''} }`).join('\n')}
  uplink: { interface: wan0, virtualAddress: ${k.uplinkAddress}/${String(k.uplinkPrefix)}, virtualAddress6: "${k.uplinkAddress6}/${String(k.uplinkPrefix6)}", routerId: ${String(10 + k.index)} }
  lan: { interface: lan0, virtualAddress: ${k.lanAddress}/24, virtualAddress6: "${k.lanAddress6}/64", routerId: ${String(20 + k.index)} }
  advertSeconds: ${String(o.advertSeconds ?? 0.3)}
  preempt: false
  sync: { interface: sync0, port: 3780 }
  files:
    keepalived: ${join(dir, 'keepalived.conf')}
    conntrackd: ${join(dir, 'conntrackd.conf')}
    conntrackdSocket: ${join(dir, 'conntrackd.ctl')}
    conntrackdLock: ${join(dir, 'conntrackd.lock')}
    conntrackdLog: ${join(dir, 'conntrackd.log')}
    notify: ${HA_NOTIFY}
`
    : '';
  return `cluster: c${k.index}
${ha}uplinkAddress: ${k.uplinkAddress}
${o.ipv6Service === true ? `uplinkAddress6: "${k.uplinkAddress6}"\n` : ''}adminSocket: ${frontSocket(st, k, f)}
http: { listen: '127.0.0.1:${OPS_PORTS.front}' }
services:
  - name: www
    vip: ${k.vip}
    port: 80
    method: capacity
${o.healthChecks === true ? '    health: { kind: http, path: /healthz, bodyMatch: ok, intervalSeconds: 1, timeoutSeconds: 0.5, rise: 2, fall: 2, slowStartSeconds: 10 }\n' : ''}    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
${
    o.ipv6Service === true
      ? `  - name: www6
    vip: "${k.vip6}"
    port: 80
    method: capacity
${o.healthChecks === true ? '    health: { kind: http, path: /healthz, bodyMatch: ok, intervalSeconds: 1, timeoutSeconds: 0.5, rise: 2, fall: 2, slowStartSeconds: 10 }\n' : ''}    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: "${s.address6}" }`).join('\n')}
`
      : ''
  }overflow:
${others.map((x) => `  - { cluster: c${x.index}, vip: ${x.vip}${o.ipv6Service === true ? `, vip6: "${x.vip6}"` : ''} }`).join('\n') || '  []'}
control:
  keyFile: ${join(keys, `${f.id}.key`)}
  agents:
    listen: tcp://${f.lanAddress}:7101
    allow: [${k.servers.map((s) => join(keys, `${s.id}.pub`)).join(', ')}]
  publish:
    listen: tcp://${f.uplinkAddress}:7102
    allow: [${[...st.plan.dnsServers.map((d) => join(keys, `${d.id}.pub`)), ...otherFronts.map((x) => join(keys, `${x.id}.pub`))].join(', ')}]
  subscribe:
${st.plan.dnsServers.map((d) => `    - { endpoint: 'tcp://${d.address}:7300', publicKey: ${join(keys, `${d.id}.pub`)} }`).join('\n')}
${otherFronts.map((x) => `    - { endpoint: 'tcp://${x.uplinkAddress}:7102', publicKey: ${join(keys, `${x.id}.pub`)} }`).join('\n')}
  loadSeconds: ${o.loadSeconds ?? 2}
  estimate: { initialCapacity: 100 }
  requestRate: { passSeconds: 5, factor: 3 }
  clusterLoad: { everySeconds: ${o.reportSeconds ?? 1} }
  probe: { count: 3, spacingMs: 50, reportSeconds: 0.5 }
`;
}

export function agentConfig(st: TestbedState, k: ClusterPlan, s: ServerPlan, o: SiteOptions = {}): string {
  const keys = st.keysDir;
  const cg = st.cgroups[s.id];
  return `name: ${s.id}
address: ${s.address}
${
    k.fronts.length === 1
      ? `front: { endpoint: 'tcp://${k.front.lanAddress}:7101', publicKey: ${join(keys, `${k.front.id}.pub`)} }`
      : `fronts:\n${k.fronts.map((f) => `  - { endpoint: 'tcp://${f.lanAddress}:7101', publicKey: ${join(keys, `${f.id}.pub`)} }`).join('\n')}`
  }
control: { keyFile: ${join(keys, `${s.id}.key`)} }
loadSeconds: ${o.loadSeconds ?? 2}
requestRateSeconds: 5
utilization: ${cg !== undefined ? `{ source: cgroup, cgroup: ${cg} }` : '{ source: connections, maxConnections: 100 }'}
accessLog: { path: ${join(st.runDir, `nginx-${s.id}.access.log`)}, format: nginx-combined, pollSeconds: 0.5 }
adminSocket: ${join(st.runDir, `agent-${s.id}.sock`)}
stateFile: { path: ${join(st.runDir, `agent-${s.id}.state`)} }
${o.healthChecks === true ? `health: { kind: tcp, address: ${s.address}, port: 80, intervalSeconds: 1, timeoutSeconds: 0.5, rise: 2, fall: 2 }\n` : ''}http: { listen: '127.0.0.1:${OPS_PORTS.agent}' }
`;
}

export interface Daemon {
  readonly name: string;
  readonly child: ChildProcess;
  readonly log: string;
}

/**
 * Starts `sluice <command>` in a namespace, log to a file. Agents enter the
 * network namespace only (nsenter): `ip netns exec` remounts /sys, hiding
 * the cgroup files they read.
 */
export function startDaemon(st: TestbedState, ns: string, command: 'front' | 'dns' | 'agent', name: string, config: string): Daemon {
  const cfgFile = join(st.runDir, `${name}.yaml`);
  writeFileSync(cfgFile, config);
  const log = join(st.runDir, `${name}.log`);
  const fd = openSync(log, 'a');
  try {
    const enter = command === 'agent' ? ['nsenter', `--net=/run/netns/${ns}`] : ['ip', 'netns', 'exec', ns];
    const child = spawn(enter[0] ?? '', [...enter.slice(1), BIN, command, '--config', cfgFile], { stdio: ['ignore', fd, fd] });
    return { name, child, log };
  } finally {
    closeSync(fd);
  }
}

export async function stopDaemons(daemons: readonly Daemon[]): Promise<void> {
  await Promise.all(
    [...daemons].reverse().map(
      (d) =>
        new Promise<void>((resolve) => {
          if (d.child.exitCode !== null || d.child.signalCode !== null) {
            resolve();
            return;
          }
          const t = setTimeout(() => d.child.kill('SIGKILL'), 5000);
          d.child.once('exit', () => {
            clearTimeout(t);
            resolve();
          });
          d.child.kill('SIGTERM');
        }),
    ),
  );
}

/** Starts a program (not sluice) in a namespace, in the foreground, output to a log file: stopped with the daemons. */
export function startProcess(st: TestbedState, ns: string, name: string, cmd: string, args: readonly string[]): Daemon {
  const log = join(st.runDir, `${name}.log`);
  const fd = openSync(log, 'a');
  try {
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: ['ignore', fd, fd] });
    return { name, child, log };
  } finally {
    closeSync(fd);
  }
}

/**
 * A pair node's HA parts, from `sluice ha render` of its front config:
 * conntrackd (foreground, so it is stopped with the site) before the front
 * daemon starts, keepalived after it (see startSite).
 */
export function renderHa(st: TestbedState, f: FrontPlan, frontConfigFile: string): void {
  mkdirSync(haDir(st, f), { recursive: true, mode: 0o755 });
  const r = spawnSync(BIN, ['ha', 'render', '--config', frontConfigFile, '--out', haDir(st, f)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`sluice ha render for ${f.id} failed: ${r.stderr || r.stdout}`);
}

export function startConntrackd(st: TestbedState, f: FrontPlan): Daemon {
  rmSync(join(haDir(st, f), 'conntrackd.lock'), { force: true });
  return startProcess(st, f.name, `conntrackd-${f.id}`, 'conntrackd', ['-C', join(haDir(st, f), 'conntrackd.conf')]);
}

export function startKeepalived(st: TestbedState, f: FrontPlan): Daemon {
  const dir = haDir(st, f);
  // -P: VRRP only; -n: no fork (stopped with the site); -l -D: log to the
  // console, detailed; own pid files so two instances share one host.
  return startProcess(st, f.name, `keepalived-${f.id}`, 'keepalived', ['-P', '-n', '-l', '-D', '-f', join(dir, 'keepalived.conf'), '-p', join(dir, 'keepalived.pid'), '-r', join(dir, 'vrrp.pid')]);
}

/** The daemon name (and log and config file stem) of a front node. */
export function frontName(k: ClusterPlan, f: FrontPlan): string {
  return k.fronts.length === 1 ? `front${String(k.index)}` : `front-${f.id}`;
}

/** Starts the `sluice front` daemon of a node alone (its keepalived and conntrackd, if any, are left as they are). */
export function startFrontDaemon(st: TestbedState, k: ClusterPlan, f: FrontPlan, o: SiteOptions = {}): Daemon {
  return startDaemon(st, f.name, 'front', frontName(k, f), frontConfig(st, k, o, f));
}

/** Starts one front node: for a pair node, conntrackd first and keepalived after the daemon. */
export function startFront(st: TestbedState, k: ClusterPlan, f: FrontPlan, o: SiteOptions = {}): Daemon[] {
  const name = frontName(k, f);
  const text = frontConfig(st, k, o, f);
  if (k.fronts.length === 1) return [startDaemon(st, f.name, 'front', name, text)];
  const cfgFile = join(st.runDir, `${name}.yaml`);
  writeFileSync(cfgFile, text);
  renderHa(st, f, cfgFile);
  return [startConntrackd(st, f), startDaemon(st, f.name, 'front', name, text), startKeepalived(st, f)];
}

/**
 * A pair node's host dies: every process in its namespace is killed
 * (kill -9: keepalived, conntrackd, sluice front) and its links go down, so
 * its kernel neither forwards nor answers ARP for the virtual addresses it
 * still holds (killing the processes alone leaves a kernel that keeps
 * forwarding with the rules and the fallback in place). Returns the
 * number of processes killed.
 */
export function failNode(f: FrontPlan): number {
  const pids = (spawnSync('ip', ['netns', 'pids', f.name], { encoding: 'utf8' }).stdout || '')
    .split('\n')
    .map(Number)
    .filter((n) => n > 0);
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  for (const l of ['wan0', 'lan0', 'sync0']) spawnSync('ip', ['-n', f.name, 'link', 'set', l, 'down']);
  return pids.length;
}

/**
 * The dead node boots again: without the virtual addresses (a rebooted
 * host has none; keepalived adds them when it is master), links up, then
 * its processes (startFront). With no preemption it comes back as backup.
 */
export function reviveNode(st: TestbedState, k: ClusterPlan, f: FrontPlan, o: SiteOptions = {}): Daemon[] {
  spawnSync('ip', ['-n', f.name, 'addr', 'del', `${k.uplinkAddress}/${String(k.uplinkPrefix)}`, 'dev', 'wan0']);
  spawnSync('ip', ['-n', f.name, 'addr', 'del', `${k.lanAddress}/24`, 'dev', 'lan0']);
  // (The IPv6 virtual addresses went with the links: keep_addr_on_down 0.)
  for (const l of ['wan0', 'lan0', 'sync0']) spawnSync('ip', ['-n', f.name, 'link', 'set', l, 'up']);
  // The kernel dropped the default route with the uplink; a booting host
  // configures it again (without it the node, once master, forwards toward
  // the servers but cannot route the replies to the clients).
  spawnSync('ip', ['-n', f.name, 'route', 'replace', 'default', 'via', k.wanSideAddress]);
  // Its IPv6 half too: the kernel flushes a link's IPv6 addresses when it
  // goes down (keep_addr_on_down 0), and the default route with them.
  const six = [
    `addr replace ${f.uplinkAddress6}/${String(k.uplinkPrefix6)} dev wan0 nodad`,
    `addr replace ${f.lanAddress6}/64 dev lan0 nodad`,
    ...(f.syncAddress6 !== undefined ? [`addr replace ${f.syncAddress6}/64 dev sync0 nodad`] : []),
    `route replace default via ${k.wanSideAddress6}`,
  ];
  spawnSync('ip', ['-n', f.name, '-batch', '-'], { input: `${six.join('\n')}\n` });
  return startFront(st, k, f, o);
}

/** Starts the whole site: DNS servers, front nodes (with their HA parts), agents. */
export function startSite(st: TestbedState, o: SiteOptions = {}): Daemon[] {
  writeFileSync(join(st.runDir, 'example.test.zone'), zoneText(st));
  const out: Daemon[] = st.plan.dnsServers.map((d) => startDaemon(st, d.name, 'dns', d.id, dnsConfig(st, o, d)));
  for (const k of st.plan.clusters) {
    for (const f of k.fronts) out.push(...startFront(st, k, f, o));
    for (const s of k.servers) out.push(startDaemon(st, s.name, 'agent', `agent-${s.id}`, agentConfig(st, k, s, o)));
  }
  return out;
}

/**
 * Waits until the site is serving: every DNS server and every front node
 * answer on their admin sockets, each DNS server has a load report from
 * every cluster (so the first client query is steered, not refused or
 * answered blind), and each pair has a master. Polls every 200 ms, gives
 * up after `timeoutMs`; returns what is still missing (empty when ready).
 */
export async function waitForSite(st: TestbedState, timeoutMs = 30_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let missing: string[] = [];
  while (Date.now() < deadline) {
    missing = [];
    for (const k of st.plan.clusters) {
      let masters = 0;
      for (const f of k.fronts) {
        const r = await adminRequest(frontSocket(st, k, f), { cmd: 'status' }, 1000).catch(() => undefined);
        if (r?.ok !== true) missing.push(f.id);
        else if ((r.status as { ha?: { role?: string } }).ha?.role === 'master') masters++;
      }
      if (k.fronts.length > 1 && masters !== 1) missing.push(`cluster c${k.index}: ${String(masters)} masters`);
    }
    for (const dp of st.plan.dnsServers) {
      const d = await adminRequest(dnsSocket(st, dp), { cmd: 'status' }, 1000).catch(() => undefined);
      const clusters = (d?.ok === true ? (d.status as { clusters?: { name: string; state: string }[] }).clusters : undefined) ?? [];
      if (d?.ok !== true) missing.push(dp.id);
      else for (const c of clusters) if (c.state !== 'up') missing.push(`${dp.id}: cluster ${c.name} ${c.state}`);
    }
    if (missing.length === 0) return missing;
    await new Promise((r) => setTimeout(r, 200));
  }
  return missing;
}
