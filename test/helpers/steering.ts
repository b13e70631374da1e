/**
 * The steering testbed's daemons for the DNS steering tests (dns-steering,
 * dns-mapping, dns-mapping-capacity, steering-ipv6, probe-tcp-steering): one
 * `sluice dns` per planned DNS server (plan.dnsServers) steering
 * www.example.test, and one `sluice front` per cluster serving the VIP on
 * port 80 from the cluster's servers, every DNS server and every front
 * node on the CURVE control plane (the testbed's keys):
 *
 *   DNS server d   listens on d.address:53 (and [d.address6]:53 with ipv6),
 *                  publishes probe requests on d.address:7300, subscribes to
 *                  every front node's uplink :7102; admin socket <id>.sock
 *   front node k   cluster c<k>, publishes cluster_load (every
 *                  reportSeconds) and RTT results on uplinkAddress:7102,
 *                  subscribes to every DNS server; admin socket front<k>.sock
 *
 * Each test states only what it changes (policy, capacities, extra keys):
 * the rest is the one setup these tests share, so a change to it (a new
 * required key, a renamed message) is made once.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClusterPlan, DnsPlan } from '../../scripts/testbed/plan.ts';
import type { TestbedState } from '../../scripts/testbed/testbed.ts';
import { adminRequest } from '../../src/admin/client.ts';
import type { DnsStatus } from '../../src/dns/status.ts';
import { FrontProcess, writeConfig } from './front.ts';
import { nsRunAsync } from './testbed.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

export interface SteeringSiteOptions {
  /** The policy of www.example.test. */
  readonly policy: 'rtt' | 'capacity' | 'mapping';
  /** The name's `ttl` (default 1). */
  readonly ttl?: number;
  /** Seconds between cluster_load reports, also DNS's reportSeconds (default 1). */
  readonly reportSeconds?: number;
  /** DNS's downAfterIntervals (default 3: a report may come a second late on a loaded machine). */
  readonly downAfterIntervals?: number;
  /** More keys of the DNS config's `steering` section, as YAML lines at its indentation (e.g. `mapping: { ... }`). */
  readonly steering?: readonly string[];
  /** More top-level keys of the DNS config (e.g. `workers: 2`). */
  readonly dns?: readonly string[];
  /** DNS over IPv6 too: listen on address6, both families of VIPs per cluster, /64 client prefixes. */
  readonly ipv6?: boolean;
  /** Each server's `capacity` (concurrent connections) per cluster (default 100). */
  readonly serverCapacity?: number | ((k: ClusterPlan) => number);
  /** More keys of the front nodes' `control.probe` (e.g. `timeoutMs: 500`). */
  readonly frontProbe?: string;
}

export interface SteeringSite {
  readonly dns: readonly FrontProcess[];
  /** The front nodes, in cluster order. */
  readonly fronts: readonly FrontProcess[];
  /** The admin socket of each DNS server, in plan.dnsServers order. */
  readonly dnsSockets: readonly string[];
  /** `sluice status --dns --json` of DNS server `i` (run inside its namespace). */
  status(i?: number): Promise<DnsStatus>;
  /** `sluice status --dns` (text) of DNS server `i`. */
  statusText(i?: number): Promise<string>;
  /** The same status as `status(i)`, read from the admin socket by this process: for polling (no process started per read). */
  poll(i?: number): Promise<DnsStatus>;
  /** Stops every daemon (front nodes first). */
  stop(): Promise<void>;
}

function zoneText(st: TestbedState, ipv6: boolean): string {
  const ns = st.plan.dnsServers;
  return `$ORIGIN example.test.
$TTL 300
@    IN SOA ns1 hostmaster ( 2026112101 3600 600 86400 60 )
${ns.map((_d, i) => `     IN NS  ns${String(i + 1)}`).join('\n')}
${ns.map((d, i) => `ns${String(i + 1)}  IN A   ${d.address}${ipv6 ? `\n     IN AAAA ${d.address6}` : ''}`).join('\n')}
www  IN A   ${st.plan.clusters[0]?.vip ?? ''}
`;
}

function dnsConfig(st: TestbedState, d: DnsPlan, o: SteeringSiteOptions, socket: string): string {
  const keys = st.keysDir;
  const six = o.ipv6 === true;
  return `name: ${d.id}
listen: ["${d.address}:53"${six ? `, "[${d.address6}]:53"` : ''}]
zones: [{ file: ${join(st.runDir, 'example.test.zone')} }]
clusters:
${st.plan.clusters.map((k) => `  - { name: c${String(k.index)}, vips: [${k.vip}${six ? `, "${k.vip6}"` : ''}] }`).join('\n')}
steering:
  names: [{ name: www.example.test, policy: ${o.policy}, ttl: ${String(o.ttl ?? 1)} }]
  reportSeconds: ${String(o.reportSeconds ?? 1)}
  downAfterIntervals: ${String(o.downAfterIntervals ?? 3)}
${six ? '  ipv6Prefix: 64\n' : ''}${(o.steering ?? []).map((l) => `  ${l}\n`).join('')}probe: { count: 3, intervalSeconds: 0.5, retrySeconds: 5 }
rrl: { enabled: false }
adminSocket: ${socket}
${(o.dns ?? []).map((l) => `${l}\n`).join('')}control:
  keyFile: ${join(keys, `${d.id}.key`)}
  publish:
    listen: tcp://${d.address}:7300
    allow: [${st.plan.clusters.map((k) => join(keys, `${k.front.id}.pub`)).join(', ')}]
  subscribe:
${st.plan.clusters.map((k) => `    - { endpoint: 'tcp://${k.uplinkAddress}:7102', publicKey: ${join(keys, `${k.front.id}.pub`)} }`).join('\n')}
`;
}

function frontConfig(st: TestbedState, k: ClusterPlan, o: SteeringSiteOptions): string {
  const keys = st.keysDir;
  const cap = typeof o.serverCapacity === 'function' ? o.serverCapacity(k) : (o.serverCapacity ?? 100);
  const dns = st.plan.dnsServers;
  return `cluster: c${String(k.index)}
uplinkAddress: ${k.uplinkAddress}
adminSocket: ${join(st.runDir, `front${String(k.index)}.sock`)}
services:
  - name: www
    vip: ${k.vip}
    port: 80
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address}, capacity: ${String(cap)} }`).join('\n')}
control:
  keyFile: ${join(keys, `${k.front.id}.key`)}
  publish:
    listen: tcp://${k.uplinkAddress}:7102
    allow: [${dns.map((d) => join(keys, `${d.id}.pub`)).join(', ')}]
  subscribe:
${dns.map((d) => `    - { endpoint: 'tcp://${d.address}:7300', publicKey: ${join(keys, `${d.id}.pub`)} }`).join('\n')}
  clusterLoad: { everySeconds: ${String(o.reportSeconds ?? 1)} }
  probe: { count: 3, spacingMs: 50, reportSeconds: 0.5${o.frontProbe !== undefined ? `, ${o.frontProbe}` : ''} }
`;
}

/**
 * Writes the zone and configs into the run directory and starts the DNS
 * servers (waiting for "dns ready") and then the front nodes (waiting for
 * "control plane up"). On a failure the daemons already started are
 * stopped before it is thrown.
 */
export async function startSteeringSite(st: TestbedState, o: SteeringSiteOptions): Promise<SteeringSite> {
  writeFileSync(join(st.runDir, 'example.test.zone'), zoneText(st, o.ipv6 === true));
  const dns: FrontProcess[] = [];
  const fronts: FrontProcess[] = [];
  const dnsSockets = st.plan.dnsServers.map((d) => join(st.runDir, `${d.id}.sock`));
  const stop = async (): Promise<void> => {
    for (const p of [...fronts].reverse()) await p.stop();
    for (const p of [...dns].reverse()) await p.stop();
  };
  try {
    for (const [i, d] of st.plan.dnsServers.entries()) {
      const p = new FrontProcess(d.name, writeConfig(join(st.runDir, `${d.id}.yaml`), dnsConfig(st, d, o, dnsSockets[i] ?? '')), 'dns');
      dns.push(p);
      await p.waitFor('dns ready');
    }
    for (const k of st.plan.clusters) {
      const f = new FrontProcess(k.front.name, writeConfig(join(st.runDir, `front${String(k.index)}.yaml`), frontConfig(st, k, o)));
      fronts.push(f);
      await f.waitFor('control plane up');
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const dnsNs = (i: number): string => st.plan.dnsServers[i]?.name ?? '';
  return {
    dns,
    fronts,
    dnsSockets,
    status: async (i = 0) => {
      const r = await nsRunAsync(dnsNs(i), BIN, ['status', '--dns', '--json', '--socket', dnsSockets[i] ?? '']);
      if (r.code !== 0) throw new Error(`sluice status --dns of ${dnsNs(i)} failed (${String(r.code)}): ${r.stderr}`);
      return JSON.parse(r.stdout) as DnsStatus;
    },
    statusText: async (i = 0) => {
      const r = await nsRunAsync(dnsNs(i), BIN, ['status', '--dns', '--socket', dnsSockets[i] ?? '']);
      if (r.code !== 0) throw new Error(`sluice status --dns of ${dnsNs(i)} failed (${String(r.code)}): ${r.stderr}`);
      return r.stdout;
    },
    poll: async (i = 0) => {
      const r = await adminRequest(dnsSockets[i] ?? '', { cmd: 'status' }, 5000);
      if (r.ok !== true) throw new Error(`status of ${dnsNs(i)} refused: ${JSON.stringify(r)}`);
      return r.status as DnsStatus;
    },
    stop,
  };
}

/** The A (or AAAA) answer of www.example.test at `server` from namespace `ns`: its addresses and TTL (-1 without an answer). */
export async function resolveName(ns: string, server: string, type: 'A' | 'AAAA' = 'A'): Promise<{ addresses: string[]; ttl: number }> {
  const r = await nsRunAsync(ns, 'dig', [...(server.includes(':') ? ['-6'] : []), '+noall', '+answer', '+time=2', '+tries=1', `@${server}`, 'www.example.test', type]);
  const rows = r.stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 5 && f[3] === type);
  return { addresses: rows.map((f) => f[4] ?? ''), ttl: rows.length > 0 ? Number(rows[0]?.[1]) : -1 };
}

/** A client's /24 as the DNS status names it ("198.18.11.0/24"). */
export function prefix24(address: string): string {
  return `${address.split('.').slice(0, 3).join('.')}.0/24`;
}
