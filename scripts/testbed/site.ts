/**
 * The Sluice daemons of a testbed site: configuration for every front node,
 * agent and the DNS server of a plan (with the testbed's CURVE keys), and
 * starting/stopping them. The demo runs the whole site from here.
 *
 * Addresses: each front node's agents listen on its LAN side (.1:7101), its
 * PUB on its uplink (:7102); the DNS server's PUB on 198.18.2.2:7300. Every
 * front subscribes to the DNS server (probe requests) and to the other
 * fronts (overflow); the DNS server subscribes to every front.
 *
 * Every daemon serves GET /metrics and /status on its namespace's loopback
 * (OPS_PORTS; each namespace has its own 127.0.0.1, so one port per kind):
 *   ip netns exec <prefix>-fr1 curl -s http://127.0.0.1:9100/metrics
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminRequest } from '../../src/admin/client.ts';
import type { ClusterPlan, ServerPlan } from './plan.ts';
import type { TestbedState } from './testbed.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

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
}

export function zoneText(st: TestbedState): string {
  return `$ORIGIN example.test.
$TTL 1h
@    IN SOA ns1 hostmaster ( 2026112101 1h 15m 1w 60 )
     IN NS  ns1
ns1  IN A   ${st.plan.dns.address}
www  60 IN A ${st.plan.clusters[0]?.vip ?? '198.19.1.1'}
${st.plan.clusters.map((k) => `c${k.index}   IN A   ${k.vip}`).join('\n')}
`;
}

export function dnsConfig(st: TestbedState, o: SiteOptions = {}): string {
  const keys = st.keysDir;
  const a = st.plan.dns.address;
  return `name: dns
listen: ["${a}:53"]
zones: [{ file: ${join(st.runDir, 'example.test.zone')} }]
clusters:
${st.plan.clusters.map((k) => `  - { name: c${k.index}, vips: [${k.vip}] }`).join('\n')}
steering:
  names: [{ name: www.example.test, policy: rtt, ttl: ${o.ttl ?? 2} }]
  reportSeconds: ${o.reportSeconds ?? 1}
  downAfterIntervals: 3
probe: { count: 3, intervalSeconds: 0.5, retrySeconds: 30 }
rrl: { enabled: true, responsesPerSecond: 200 }
adminSocket: ${join(st.runDir, 'dns.sock')}
http: { listen: '127.0.0.1:${OPS_PORTS.dns}' }
control:
  keyFile: ${join(keys, 'dns.key')}
  publish:
    listen: tcp://${a}:7300
    allow: [${st.plan.clusters.map((k) => join(keys, `fr${k.index}.pub`)).join(', ')}]
  subscribe:
${st.plan.clusters.map((k) => `    - { endpoint: 'tcp://${k.uplinkAddress}:7102', publicKey: ${join(keys, `fr${k.index}.pub`)} }`).join('\n')}
`;
}

export function frontConfig(st: TestbedState, k: ClusterPlan, o: SiteOptions = {}): string {
  const keys = st.keysDir;
  const others = st.plan.clusters.filter((x) => x.index !== k.index);
  return `cluster: c${k.index}
uplinkAddress: ${k.uplinkAddress}
adminSocket: ${join(st.runDir, `front${k.index}.sock`)}
http: { listen: '127.0.0.1:${OPS_PORTS.front}' }
services:
  - name: www
    vip: ${k.vip}
    port: 80
    method: capacity
${o.healthChecks === true ? '    health: { kind: http, path: /healthz, bodyMatch: ok, intervalSeconds: 1, timeoutSeconds: 0.5, rise: 2, fall: 2, slowStartSeconds: 10 }\n' : ''}    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
overflow:
${others.map((x) => `  - { cluster: c${x.index}, vip: ${x.vip} }`).join('\n') || '  []'}
control:
  keyFile: ${join(keys, `fr${k.index}.key`)}
  agents:
    listen: tcp://${k.lanAddress}:7101
    allow: [${k.servers.map((s) => join(keys, `${s.id}.pub`)).join(', ')}]
  publish:
    listen: tcp://${k.uplinkAddress}:7102
    allow: [${[join(keys, 'dns.pub'), ...others.map((x) => join(keys, `fr${x.index}.pub`))].join(', ')}]
  subscribe:
    - { endpoint: 'tcp://${st.plan.dns.address}:7300', publicKey: ${join(keys, 'dns.pub')} }
${others.map((x) => `    - { endpoint: 'tcp://${x.uplinkAddress}:7102', publicKey: ${join(keys, `fr${x.index}.pub`)} }`).join('\n')}
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
front: { endpoint: 'tcp://${k.lanAddress}:7101', publicKey: ${join(keys, `fr${k.index}.pub`)} }
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

/** Starts the whole site: DNS, front nodes, agents. */
export function startSite(st: TestbedState, o: SiteOptions = {}): Daemon[] {
  writeFileSync(join(st.runDir, 'example.test.zone'), zoneText(st));
  const out: Daemon[] = [startDaemon(st, st.plan.dns.name, 'dns', 'dns', dnsConfig(st, o))];
  for (const k of st.plan.clusters) {
    out.push(startDaemon(st, k.front.name, 'front', `front${k.index}`, frontConfig(st, k, o)));
    for (const s of k.servers) out.push(startDaemon(st, s.name, 'agent', `agent-${s.id}`, agentConfig(st, k, s, o)));
  }
  return out;
}

/**
 * Waits until the site is serving: the DNS server and every front node
 * answer on their admin sockets and the DNS server has a load report from
 * every cluster (so the first client query is steered, not refused or
 * answered blind). Polls every 200 ms, gives up after `timeoutMs`; returns
 * what is still missing (empty when ready).
 */
export async function waitForSite(st: TestbedState, timeoutMs = 30_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let missing: string[] = [];
  while (Date.now() < deadline) {
    missing = [];
    for (const k of st.plan.clusters) {
      const r = await adminRequest(join(st.runDir, `front${k.index}.sock`), { cmd: 'status' }, 1000).catch(() => undefined);
      if (r?.ok !== true) missing.push(`front${k.index}`);
    }
    const d = await adminRequest(join(st.runDir, 'dns.sock'), { cmd: 'status' }, 1000).catch(() => undefined);
    const clusters = (d?.ok === true ? (d.status as { clusters?: { name: string; state: string }[] }).clusters : undefined) ?? [];
    if (d?.ok !== true) missing.push('dns');
    else for (const c of clusters) if (c.state !== 'up') missing.push(`dns: cluster ${c.name} ${c.state}`);
    if (missing.length === 0) return missing;
    await new Promise((r) => setTimeout(r, 200));
  }
  return missing;
}
