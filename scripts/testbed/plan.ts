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
 * With frontsPerCluster 2 (issue 21, front-node pairs with keepalived and
 * conntrackd) each cluster has two front nodes, fr<k>a and fr<k>b:
 *
 *   wan ── bridge up<k> ──┬─ fr<k>a ─┬── lan<k> (bridge namespace) ── s<k>a s<k>b ...
 *                         └─ fr<k>b ─┘
 *                              └─ sync0 (a veth between the two fronts)
 *
 *   uplink segment 198.18.(100+k).0/24: WAN .1, node a .2, node b .3, and the
 *                  VRRP virtual address .10 (the WAN routes the VIPs there)
 *   LAN            198.18.(200+k).0/24: node a .2, node b .3, and the VRRP
 *                  virtual address .1 (the servers' default gateway)
 *   sync link      198.18.(150+k).0/30: node a .1, node b .2
 *
 * With dnsServers 2 a second DNS server dns2 has 198.18.3.2/24 (WAN .1).
 *
 * Dual stack. Every link also carries IPv6 from 2001:2::/48 (RFC 5180's
 * benchmarking range), and every IPv4 address has an IPv6 twin (ipv6Twin)
 * on the same link, its digits copied so one reads like the other:
 *   198.18.X.Y  ->  2001:2:0:X::Y/64     (198.18.201.11 -> 2001:2:0:201::11)
 *   198.19.X.Y  ->  2001:2:0:1XXX::Y/64  (VIPs; 198.19.1.1 -> 2001:2:0:1001::1)
 * X and Y are written in decimal digits and read as hex groups, so the map
 * is one-to-one and the VIP /64s (1000-1255) never meet a link's (0-255).
 * Every IPv4 route has its twin; the /24s and the /30 become /64s. The
 * plan's IPv6 fields are the IPv4 field's name plus "6" (address6, vip6, …).
 *
 * With ipv6OnlyClients N, N more clients follow the dual-stack ones
 * (indexes clients+1 …), planned like them but with IPv6 only: no IPv4
 * address on their link at all (the demo's IPv6-only client).
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
  /** Front nodes per cluster: 1, or 2 (an active/backup pair with keepalived and conntrackd). */
  readonly frontsPerCluster?: number;
  /** Authoritative DNS servers (the zone's NS set): 1 or 2. */
  readonly dnsServers?: number;
  /** IPv6-only clients, numbered after the dual-stack ones (clients + this ≤ 9). */
  readonly ipv6OnlyClients?: number;
}

export interface NsPlan {
  readonly name: string;
  readonly role: 'wan' | 'client' | 'dns' | 'front' | 'server' | 'lan';
}

/** What every client has, dual-stack or IPv6-only. */
interface ClientLink extends NsPlan {
  readonly role: 'client';
  /** 1-based; also the client's key in delaysMs ("i:k"). */
  readonly index: number;
  readonly address6: string;
  /** The WAN's address on this client's link: the client's IPv6 default route. */
  readonly gateway6: string;
  /** Interface name of this client's link inside the WAN namespace. */
  readonly wanIf: string;
}

/** A dual-stack client (plan.clients). */
export interface ClientPlan extends ClientLink {
  readonly address: string;
  readonly extraAddresses: readonly string[];
  /** The IPv6 twins of extraAddresses, in the same order. */
  readonly extraAddresses6: readonly string[];
  readonly gateway: string;
}

/** A client with no IPv4 address besides lo's (plan.ipv6OnlyClients). */
export interface Ipv6OnlyClientPlan extends ClientLink {
  readonly ipv6Only: true;
}

export interface ServerPlan extends NsPlan {
  readonly role: 'server';
  readonly id: string;
  readonly cluster: number;
  readonly address: string;
  readonly address6: string;
  readonly gateway: string;
  readonly gateway6: string;
  /** Bridge port name inside the front namespace. */
  readonly frontIf: string;
}

/** One front node of a cluster. */
export interface FrontPlan extends NsPlan {
  readonly role: 'front';
  /** fr<k> (a single front) or fr<k>a / fr<k>b (a pair): its control-plane name and key file name. */
  readonly id: string;
  /** This node's own address on the uplink (its control PUB listens here). */
  readonly uplinkAddress: string;
  readonly uplinkAddress6: string;
  /** This node's own address on the LAN (the agents push here). */
  readonly lanAddress: string;
  readonly lanAddress6: string;
  /** Pair only: this node's address on the sync link (conntrackd). */
  readonly syncAddress?: string;
  readonly syncAddress6?: string;
  /** Pair only: VRRP priority (node a higher). */
  readonly priority?: number;
}

/** A cluster's DNS-visible plan. A pair's virtual addresses are the cluster's uplinkAddress and lanAddress. */
export interface ClusterPlan {
  readonly index: number;
  /** The first front node (the only one without a pair). */
  readonly front: FrontPlan;
  /** Every front node of the cluster (1 or 2). */
  readonly fronts: readonly FrontPlan[];
  /** Pair only: the LAN switch namespace (a bridge joining both fronts and the servers). */
  readonly lanSwitch?: NsPlan & { readonly role: 'lan' };
  /** The address the WAN routes the VIPs to: the front's uplink address, or a pair's VRRP virtual address. */
  readonly uplinkAddress: string;
  /**
   * IPv6 twin of uplinkAddress. For a pair it is a virtual address too:
   * keepalived holds it with the IPv4 one (site.ts, ha.uplink.virtualAddress6).
   */
  readonly uplinkAddress6: string;
  /** Prefix length of the uplink segment (24). */
  readonly uplinkPrefix: number;
  /** Prefix length of the uplink segment's IPv6 twin (64). */
  readonly uplinkPrefix6: number;
  readonly wanSideAddress: string;
  readonly wanSideAddress6: string;
  /** The servers' gateway: the front's LAN address, or a pair's VRRP virtual address. */
  readonly lanAddress: string;
  readonly lanAddress6: string;
  readonly lanNetwork: string;
  readonly lanNetwork6: string;
  readonly vipNetwork: string;
  /** The cluster's IPv6 VIPs (2001:2:0:1kkk::/64), routed by the WAN to the front like vipNetwork. */
  readonly vipNetwork6: string;
  /** The first VIP of the cluster (198.19.k.1). */
  readonly vip: string;
  /** The first IPv6 VIP (2001:2:0:1kkk::1); served by the front node's IPv6 service (site.ts ipv6Service). */
  readonly vip6: string;
  readonly wanIf: string;
  readonly servers: readonly ServerPlan[];
}

export interface DnsPlan extends NsPlan {
  readonly role: 'dns';
  /** dns, dns2: its control-plane name and key file name. */
  readonly id: string;
  readonly address: string;
  readonly address6: string;
  readonly gateway: string;
  readonly gateway6: string;
  readonly wanIf: string;
}

export interface DelayPlan {
  readonly client: number;
  readonly cluster: number;
  readonly oneWayMs: number;
}

export interface TestbedPlan {
  readonly prefix: string;
  readonly wan: NsPlan & { readonly role: 'wan' };
  /** The first DNS server (dnsServers[0]). */
  readonly dns: DnsPlan;
  readonly dnsServers: readonly DnsPlan[];
  /** The dual-stack clients, indexes 1 … clients. */
  readonly clients: readonly ClientPlan[];
  /** The IPv6-only clients, indexes clients+1 …; in delays like the others. */
  readonly ipv6OnlyClients: readonly Ipv6OnlyClientPlan[];
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

const BENCH6 = '2001:2:0';

/**
 * The IPv6 twin of a testbed IPv4 address (see the header): 198.18.X.Y ->
 * 2001:2:0:X::Y, 198.19.X.Y -> 2001:2:0:1XXX::Y. Y 0 gives the /64's
 * network address ("2001:2:0:201::").
 */
export function ipv6Twin(ipv4: string): string {
  const m = /^198\.(18|19)\.(\d{1,3})\.(\d{1,3})$/.exec(ipv4);
  const [b, x, y] = [m?.[1], Number(m?.[2]), Number(m?.[3])];
  if (b === undefined || x > 255 || y > 255) throw new InvalidArgumentError(`no IPv6 twin for "${ipv4}": not an address in 198.18.0.0/15`);
  const group = b === '18' ? String(x) : `1${String(x).padStart(3, '0')}`;
  // RFC 5952 text (what ip(8) prints): a zero group 4 joins the "::" run.
  const net = group === '0' ? '2001:2:' : `${BENCH6}:${group}:`;
  return y === 0 ? `${net}:` : `${net}:${String(y)}`;
}

/** The IPv6 twin of a testbed /24 (or narrower) network: its /64. */
export function ipv6TwinNetwork(ipv4Network: string): string {
  const [addr = ''] = ipv4Network.split('/');
  return `${ipv6Twin(addr.replace(/\.\d+$/, '.0'))}/64`;
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
  const nFronts = count('frontsPerCluster', opts.frontsPerCluster, 1, 1, 2);
  const nDns = count('dnsServers', opts.dnsServers, 1, 1, 2);
  const nV6Only = count('ipv6OnlyClients', opts.ipv6OnlyClients, 0, 0, 9 - nClients);
  const serverCpus = opts.serverCpus ?? 0;
  if (!Number.isFinite(serverCpus) || serverCpus < 0 || serverCpus > 64) throw new InvalidArgumentError(`serverCpus must be between 0 and 64, got ${String(opts.serverCpus)}`);

  const clients: ClientPlan[] = [];
  for (let i = 1; i <= nClients; i++) {
    const net = `198.18.${10 + i}`;
    const extraAddresses = Array.from({ length: extra }, (_, j) => `${net}.${3 + j}`);
    clients.push({
      name: `${p}-cl${i}`,
      role: 'client',
      index: i,
      address: `${net}.2`,
      address6: ipv6Twin(`${net}.2`),
      extraAddresses,
      extraAddresses6: extraAddresses.map(ipv6Twin),
      gateway: `${net}.1`,
      gateway6: ipv6Twin(`${net}.1`),
      wanIf: `cl${i}`,
    });
  }
  // IPv6-only clients: the same per-index link as a dual-stack client's, IPv6 half only.
  const ipv6OnlyClients: Ipv6OnlyClientPlan[] = [];
  for (let i = nClients + 1; i <= nClients + nV6Only; i++) {
    const net = `198.18.${10 + i}`;
    ipv6OnlyClients.push({ name: `${p}-cl${i}`, role: 'client', index: i, address6: ipv6Twin(`${net}.2`), gateway6: ipv6Twin(`${net}.1`), wanIf: `cl${i}`, ipv6Only: true });
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
        address6: ipv6Twin(`${lan}.${11 + s}`),
        gateway: `${lan}.1`,
        gateway6: ipv6Twin(`${lan}.1`),
        frontIf: `sv${letter}`,
      });
    }
    const up = `198.18.${100 + k}`;
    const pair = nFronts === 2;
    const fronts: FrontPlan[] = pair
      ? (['a', 'b'] as const).map((n, i) => ({
          name: `${p}-fr${k}${n}`,
          role: 'front' as const,
          id: `fr${k}${n}`,
          uplinkAddress: `${up}.${2 + i}`,
          uplinkAddress6: ipv6Twin(`${up}.${2 + i}`),
          lanAddress: `${lan}.${2 + i}`,
          lanAddress6: ipv6Twin(`${lan}.${2 + i}`),
          syncAddress: `198.18.${150 + k}.${1 + i}`,
          syncAddress6: ipv6Twin(`198.18.${150 + k}.${1 + i}`),
          priority: i === 0 ? 150 : 100,
        }))
      : [
          {
            name: `${p}-fr${k}`,
            role: 'front',
            id: `fr${k}`,
            uplinkAddress: `${up}.2`,
            uplinkAddress6: ipv6Twin(`${up}.2`),
            lanAddress: `${lan}.1`,
            lanAddress6: ipv6Twin(`${lan}.1`),
          },
        ];
    const front = fronts[0];
    if (front === undefined) throw new InvalidArgumentError('no front node planned');
    clusters.push({
      index: k,
      front,
      fronts,
      ...(pair ? { lanSwitch: { name: `${p}-lan${k}`, role: 'lan' as const } } : {}),
      uplinkAddress: pair ? `${up}.10` : `${up}.2`,
      uplinkAddress6: ipv6Twin(pair ? `${up}.10` : `${up}.2`),
      uplinkPrefix: 24,
      uplinkPrefix6: 64,
      wanSideAddress: `${up}.1`,
      wanSideAddress6: ipv6Twin(`${up}.1`),
      lanAddress: `${lan}.1`,
      lanAddress6: ipv6Twin(`${lan}.1`),
      lanNetwork: `${lan}.0/24`,
      lanNetwork6: ipv6TwinNetwork(`${lan}.0/24`),
      vipNetwork: `198.19.${k}.0/24`,
      vipNetwork6: ipv6TwinNetwork(`198.19.${k}.0/24`),
      vip: `198.19.${k}.1`,
      vip6: ipv6Twin(`198.19.${k}.1`),
      // The WAN's interface toward the cluster: the front's veth, or the pair's uplink bridge.
      wanIf: pair ? `up${k}` : `fr${k}`,
      servers,
    });
  }
  const delays: DelayPlan[] = [];
  for (let i = 1; i <= nClients + nV6Only; i++) {
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
  const dnsServers: DnsPlan[] = Array.from({ length: nDns }, (_, i) => ({
    name: i === 0 ? `${p}-dns` : `${p}-dns${i + 1}`,
    role: 'dns' as const,
    id: i === 0 ? 'dns' : `dns${i + 1}`,
    address: `198.18.${2 + i}.2`,
    address6: ipv6Twin(`198.18.${2 + i}.2`),
    gateway: `198.18.${2 + i}.1`,
    gateway6: ipv6Twin(`198.18.${2 + i}.1`),
    wanIf: i === 0 ? 'dns' : `dns${i + 1}`,
  }));
  const dns = dnsServers[0];
  if (dns === undefined) throw new InvalidArgumentError('no DNS server planned');
  return {
    prefix: p,
    wan: { name: `${p}-wan`, role: 'wan' },
    dns,
    dnsServers,
    clients,
    ipv6OnlyClients,
    clusters,
    delays,
    blobMiB,
    serverCpus,
    delayQueue: 0,
  };
}

/** Every namespace of the plan, routers first. */
export function namespacesOf(plan: TestbedPlan): NsPlan[] {
  return [plan.wan, ...plan.dnsServers, ...plan.clients, ...plan.ipv6OnlyClients, ...plan.clusters.flatMap((c) => [...(c.lanSwitch ? [c.lanSwitch] : []), ...c.fronts, ...c.servers])];
}

/** The text diagram of a plan (for `testbed status` and the docs). */
export function describePlan(plan: TestbedPlan): string {
  const lines: string[] = [];
  lines.push(`testbed ${plan.prefix}: WAN router ${plan.wan.name}`);
  for (const c of plan.clients) lines.push(`  client ${c.name} ${c.address} ${c.address6}${c.extraAddresses.length > 0 ? ` (+${c.extraAddresses.length} aliases each)` : ''}`);
  for (const c of plan.ipv6OnlyClients) lines.push(`  client ${c.name} ${c.address6} (IPv6 only)`);
  for (const d of plan.dnsServers) lines.push(`  dns    ${d.name} ${d.address} ${d.address6}`);
  for (const k of plan.clusters) {
    if (k.fronts.length === 1) {
      lines.push(`  cluster ${k.index}: front ${k.front.name} uplink ${k.uplinkAddress} ${k.uplinkAddress6}, LAN ${k.lanNetwork} ${k.lanNetwork6}, VIPs ${k.vipNetwork} ${k.vipNetwork6}`);
    } else {
      lines.push(`  cluster ${k.index}: front pair, uplink virtual ${k.uplinkAddress} ${k.uplinkAddress6}, LAN gateway ${k.lanAddress} ${k.lanAddress6} (${k.lanNetwork} ${k.lanNetwork6}), VIPs ${k.vipNetwork} ${k.vipNetwork6}`);
      for (const f of k.fronts) {
        lines.push(`    front ${f.name} uplink ${f.uplinkAddress} ${f.uplinkAddress6}, LAN ${f.lanAddress} ${f.lanAddress6}, sync ${f.syncAddress ?? ''} ${f.syncAddress6 ?? ''}, priority ${String(f.priority ?? 0)}`);
      }
    }
    for (const s of k.servers) lines.push(`    server ${s.id} ${s.name} ${s.address} ${s.address6}`);
  }
  lines.push('  one-way delays (ms), client -> cluster:');
  for (const d of plan.delays) lines.push(`    cl${d.client} -> cluster ${d.cluster}: ${d.oneWayMs}`);
  return lines.join('\n');
}
