/**
 * The test site's topology and address plan, computed (no side effects) from
 * a few options, so it can be unit-tested and printed.
 *
 *            cl1 ─┐                ┌─ fr1 ── lan0 ── s1a s1b s1c
 *            cl2 ─┼── wan (router) ┤
 *            dns ─┘                └─ fr2 ── lan0 ── s2a s2b s2c
 *
 * Every address is in 198.18.0.0/15 (RFC 2544 benchmarking range):
 *   client i      198.18.(10+i).2/24      (aliases .3.. for extra source addresses), WAN side .1
 *   dns           198.18.2.2/24, WAN side .1
 *   front k       uplink 198.18.(100+k).2/24, WAN side .1
 *   cluster k LAN 198.18.(200+k).0/24: front .1 (bridge lan0), servers .11, .12, ...
 *   cluster k VIPs 198.19.k.0/24, routed by the WAN to front k
 *
 * Namespaces are named `<prefix>-<role>`; veth pairs are created directly
 * inside the namespaces, so nothing ever appears in the host's namespace.
 */
import { InvalidArgumentError } from '../../src/errors/errors.ts';

export interface TestbedOptions {
  /** 2–12 chars, [a-z][a-z0-9]*: namespaces are `<prefix>-…`. */
  readonly prefix: string;
  readonly clients?: number;
  readonly clusters?: number;
  readonly serversPerCluster?: number;
  /** Extra source addresses per client (benchmarks spread load over them). */
  readonly extraClientAddresses?: number;
  /** One-way delay in ms per [client][cluster] (1-based keys: "1:2" = client 1 to cluster 2). */
  readonly delaysMs?: Readonly<Record<string, number>>;
  /** Size of /blob.bin served by every server, in MiB (0 = none). */
  readonly blobMiB?: number;
  /**
   * CPU quota of each server's cgroup, in CPUs (0 = no cgroups). Gives each
   * server its own CPU utilization for the agents (namespaces share /proc/stat).
   */
  readonly serverCpus?: number;
}

export interface NsPlan {
  readonly name: string;
  readonly role: 'wan' | 'client' | 'dns' | 'front' | 'server';
}

export interface ClientPlan extends NsPlan {
  readonly role: 'client';
  readonly index: number;
  readonly address: string;
  readonly extraAddresses: readonly string[];
  readonly gateway: string;
  /** Interface name of this client's link inside the WAN namespace. */
  readonly wanIf: string;
}

export interface ServerPlan extends NsPlan {
  readonly role: 'server';
  readonly id: string;
  readonly cluster: number;
  readonly address: string;
  readonly gateway: string;
  /** Bridge port name inside the front namespace. */
  readonly frontIf: string;
}

export interface ClusterPlan {
  readonly index: number;
  readonly front: NsPlan & { readonly role: 'front' };
  readonly uplinkAddress: string;
  readonly wanSideAddress: string;
  readonly lanAddress: string;
  readonly lanNetwork: string;
  readonly vipNetwork: string;
  /** The first VIP of the cluster (198.19.k.1). */
  readonly vip: string;
  readonly wanIf: string;
  readonly servers: readonly ServerPlan[];
}

export interface DelayPlan {
  readonly client: number;
  readonly cluster: number;
  readonly oneWayMs: number;
}

export interface TestbedPlan {
  readonly prefix: string;
  readonly wan: NsPlan & { readonly role: 'wan' };
  readonly dns: NsPlan & { readonly role: 'dns'; readonly address: string; readonly gateway: string; readonly wanIf: string };
  readonly clients: readonly ClientPlan[];
  readonly clusters: readonly ClusterPlan[];
  readonly delays: readonly DelayPlan[];
  readonly blobMiB: number;
  readonly serverCpus: number;
  /** NFQUEUE number the WAN delay program binds in the WAN namespace. */
  readonly delayQueue: number;
}

export const PREFIX_RE = /^[a-z][a-z0-9]{1,11}$/;

function count(name: string, v: number | undefined, dflt: number, min: number, max: number): number {
  const n = v ?? dflt;
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}], got ${String(v)}`);
  }
  return n;
}

/** Default one-way delays: client i is near cluster ((i-1) mod clusters)+1 (10 ms), far from the rest (40 ms). */
export function defaultDelayMs(client: number, cluster: number, clusters: number): number {
  return (client - 1) % clusters === cluster - 1 ? 10 : 40;
}

export function planTestbed(opts: TestbedOptions): TestbedPlan {
  if (!PREFIX_RE.test(opts.prefix)) {
    throw new InvalidArgumentError(`prefix must match ${String(PREFIX_RE)} (lowercase, 2-12 chars), got "${opts.prefix}"`);
  }
  const p = opts.prefix;
  const nClients = count('clients', opts.clients, 2, 1, 9);
  const nClusters = count('clusters', opts.clusters, 2, 1, 9);
  const nServers = count('serversPerCluster', opts.serversPerCluster, 3, 1, 26);
  const extra = count('extraClientAddresses', opts.extraClientAddresses, 0, 0, 200);
  const blobMiB = count('blobMiB', opts.blobMiB, 0, 0, 1024);
  const serverCpus = opts.serverCpus ?? 0;
  if (!Number.isFinite(serverCpus) || serverCpus < 0 || serverCpus > 64) throw new InvalidArgumentError(`serverCpus must be between 0 and 64, got ${String(opts.serverCpus)}`);

  const clients: ClientPlan[] = [];
  for (let i = 1; i <= nClients; i++) {
    const net = `198.18.${10 + i}`;
    clients.push({
      name: `${p}-cl${i}`,
      role: 'client',
      index: i,
      address: `${net}.2`,
      extraAddresses: Array.from({ length: extra }, (_, j) => `${net}.${3 + j}`),
      gateway: `${net}.1`,
      wanIf: `cl${i}`,
    });
  }
  const clusters: ClusterPlan[] = [];
  for (let k = 1; k <= nClusters; k++) {
    const lan = `198.18.${200 + k}`;
    const servers: ServerPlan[] = [];
    for (let s = 0; s < nServers; s++) {
      const letter = String.fromCharCode(97 + s);
      servers.push({
        name: `${p}-s${k}${letter}`,
        role: 'server',
        id: `s${k}${letter}`,
        cluster: k,
        address: `${lan}.${11 + s}`,
        gateway: `${lan}.1`,
        frontIf: `sv${letter}`,
      });
    }
    clusters.push({
      index: k,
      front: { name: `${p}-fr${k}`, role: 'front' },
      uplinkAddress: `198.18.${100 + k}.2`,
      wanSideAddress: `198.18.${100 + k}.1`,
      lanAddress: `${lan}.1`,
      lanNetwork: `${lan}.0/24`,
      vipNetwork: `198.19.${k}.0/24`,
      vip: `198.19.${k}.1`,
      wanIf: `fr${k}`,
      servers,
    });
  }
  const delays: DelayPlan[] = [];
  for (let i = 1; i <= nClients; i++) {
    for (let k = 1; k <= nClusters; k++) {
      const key = `${i}:${k}`;
      const given = opts.delaysMs?.[key];
      const ms = given ?? defaultDelayMs(i, k, nClusters);
      if (!Number.isFinite(ms) || ms < 0 || ms > 10000) {
        throw new InvalidArgumentError(`delay ${key} must be between 0 and 10000 ms, got ${String(given)}`);
      }
      delays.push({ client: i, cluster: k, oneWayMs: ms });
    }
  }
  for (const key of Object.keys(opts.delaysMs ?? {})) {
    if (!delays.some((d) => `${d.client}:${d.cluster}` === key)) {
      throw new InvalidArgumentError(`delay key "${key}" names no client:cluster pair of this testbed`);
    }
  }
  return {
    prefix: p,
    wan: { name: `${p}-wan`, role: 'wan' },
    dns: { name: `${p}-dns`, role: 'dns', address: '198.18.2.2', gateway: '198.18.2.1', wanIf: 'dns' },
    clients,
    clusters,
    delays,
    blobMiB,
    serverCpus,
    delayQueue: 0,
  };
}

/** Every namespace of the plan, routers first. */
export function namespacesOf(plan: TestbedPlan): NsPlan[] {
  return [plan.wan, plan.dns, ...plan.clients, ...plan.clusters.flatMap((c) => [c.front, ...c.servers])];
}

/** The text diagram of a plan (for `testbed status` and the docs). */
export function describePlan(plan: TestbedPlan): string {
  const lines: string[] = [];
  lines.push(`testbed ${plan.prefix}: WAN router ${plan.wan.name}`);
  for (const c of plan.clients) lines.push(`  client ${c.name} ${c.address}${c.extraAddresses.length > 0 ? ` (+${c.extraAddresses.length} aliases)` : ''}`);
  lines.push(`  dns    ${plan.dns.name} ${plan.dns.address}`);
  for (const k of plan.clusters) {
    lines.push(`  cluster ${k.index}: front ${k.front.name} uplink ${k.uplinkAddress}, LAN ${k.lanNetwork}, VIPs ${k.vipNetwork}`);
    for (const s of k.servers) lines.push(`    server ${s.id} ${s.name} ${s.address}`);
  }
  lines.push('  one-way delays (ms), client -> cluster:');
  for (const d of plan.delays) lines.push(`    cl${d.client} -> cluster ${d.cluster}: ${d.oneWayMs}`);
  return lines.join('\n');
}
