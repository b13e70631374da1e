/**
 * The demo site: the whole of Sluice on one machine, in network namespaces.
 *
 *   WAN with per-path delays (client i is near cluster i: 10 ms one way, 40
 *   to the other), 2 clusters of 3 nginx servers (each in its own CPU
 *   cgroup) behind a pair of front nodes each (`sluice front`, NFQUEUE
 *   steering; keepalived moves the cluster's uplink and gateway addresses,
 *   conntrackd replicates the flows), a `sluice agent` next to every server
 *   reporting to both fronts, two `sluice dns` servers (the zone's NS set),
 *   all over the CURVE control plane with the testbed's keys.
 *
 * Every client resolves www.example.test at the Sluice DNS server and
 * fetches from the address it gets, twice a second. One more client
 * (--ipv6-only-clients, default 1) has IPv6 only: it asks for AAAA over
 * IPv6, is steered by RTT like the others (the front nodes ping it with
 * ICMPv6 echo), and fetches over IPv6 from the IPv6 VIP it got: every front
 * node serves an IPv6 service beside the IPv4 one (site.ts ipv6Service:
 * www6 on the cluster's vip6, the servers' IPv6 addresses, health-checked
 * like www, overflow to the other clusters' vip6). Every 2 s the demo
 * shows each cluster (its front nodes' roles, capacity, load, servers with
 * their connections and utilization), the DNS servers' choice per client
 * prefix with its reason and the RTTs measured to it, and what each client got. Clients ask the DNS
 * servers in turn, as resolvers spread over an NS set. Kill the master of a
 * pair (ip netns pids <prefix>-fr1a | xargs kill -9) and watch the other
 * take over. Ctrl-C, or the end of --duration, prints a summary and tears
 * everything down.
 *
 *   scripts/demo.sh [--duration SECONDS] [--keep] [--prefix NAME] [--dashboard HOST:PORT|off]
 *                   [--fronts-per-cluster 1|2] [--dns-servers 1|2] [--ipv6-only-clients 0|1|2]
 */
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { adminRequest } from '../src/admin/client.ts';
import { table } from '../src/cli/table.ts';
import { describePlan } from './testbed/plan.ts';
import { OPS_PORTS, dnsSocket, frontSocket, startSite, stopDaemons, waitForSite, type Daemon } from './testbed/site.ts';
import { down, up } from './testbed/testbed.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string' },
    dashboard: { type: 'string', default: '127.0.0.1:8080' }, // HOST:PORT of `sluice dashboard`, or off
    keep: { type: 'boolean', default: false },
    prefix: { type: 'string', default: 'demo' },
    'fronts-per-cluster': { type: 'string', default: '2' },
    'dns-servers': { type: 'string', default: '2' },
    'ipv6-only-clients': { type: 'string', default: '1' },
  },
});
const duration = values.duration === undefined ? Infinity : Number(values.duration);
if (!(duration > 0)) {
  console.error('--duration must be a positive number of seconds');
  process.exit(2);
}

function nsExec(ns: string, cmd: string, args: string[], timeoutMs = 5000): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('ip', ['netns', 'exec', ns, cmd, ...args], { timeout: timeoutMs }, (err, stdout) => {
      resolve(err ? undefined : stdout);
    });
  });
}

console.log('Bringing up the demo site...');
const st = up({ prefix: values.prefix, serverCpus: 0.25, frontsPerCluster: Number(values['fronts-per-cluster']), dnsServers: Number(values['dns-servers']), ipv6OnlyClients: Number(values['ipv6-only-clients']) });
console.log(describePlan(st.plan));
for (const c of st.plan.ipv6OnlyClients) {
  console.log(
    `\n${c.name} is IPv6-only (${c.address6}): it resolves AAAA over IPv6, is steered by the RTTs the front nodes measure to it with ICMPv6 echo, and fetches over IPv6 from the cluster's IPv6 VIP (${st.plan.clusters.map((k) => `c${k.index} ${k.vip6}`).join(', ')}).`,
  );
}
// Health checks on, as a real site runs: a killed nginx is taken out within 2 s (front check) and shows on the dashboard.
// ipv6Service: every front node serves the cluster's IPv6 VIP too (service www6), for the IPv6-only clients.
const daemons: Daemon[] = startSite(st, { healthChecks: true, ipv6Service: true });
console.log(`\nStarted ${daemons.length} Sluice daemons (logs in ${st.runDir}/*.log).`);
// The live web view; it prints its URL (errors, e.g. a port in use, on stderr).
const sources = [
  ...st.plan.clusters.flatMap((k) => k.fronts.map((f) => `${k.fronts.length === 1 ? `front${k.index}` : f.id}=unix:${frontSocket(st, k, f)}`)),
  ...st.plan.dnsServers.map((d) => `${d.id}=unix:${dnsSocket(st, d)}`),
];
const dashboard = values.dashboard === 'off' ? undefined : spawn(join(import.meta.dirname, '../bin/sluice'), ['dashboard', '--listen', values.dashboard, ...sources.flatMap((x) => ['--source', x])], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' } });
const missing = await waitForSite(st, 60_000);
console.log(missing.length === 0 ? 'The site is serving.' : `Still not ready after 60 s: ${missing.join(', ')} (see the logs; going on).`);
console.log(`Metrics and status over HTTP in each namespace: ip netns exec ${st.plan.clusters[0]?.front.name ?? ''} curl -s http://127.0.0.1:${OPS_PORTS.front}/metrics (front; dns :${OPS_PORTS.dns}, agents :${OPS_PORTS.agent}; /status for JSON)`);
console.log(values.keep ? `(--keep: the site stays up; remove it with: node scripts/testbed/cli.ts down --prefix ${values.prefix})` : 'Ctrl-C to stop (the site is torn down).');

const vipCluster = new Map(st.plan.clusters.flatMap((k) => [[k.vip, `c${k.index}`] as const, [k.vip6, `c${k.index}`] as const]));

interface ClientTally {
  resolved: Map<string, number>;
  fetched: number;
  failed: number;
  servers: Map<string, number>;
  last: string;
}
const newTally = (): ClientTally => ({ resolved: new Map<string, number>(), fetched: 0, failed: 0, servers: new Map<string, number>(), last: '-' });
const tally = new Map<string, ClientTally>([...st.plan.clients, ...st.plan.ipv6OnlyClients].map((c) => [c.name, newTally()] as const));

let stopping = false;
const started = Date.now();
/** Which DNS server the next round asks (in turn, as resolvers spread over an NS set). */
let dnsTurn = 0;

/**
 * One resolve-and-fetch by one client: the DNS answer (A over IPv4, or AAAA
 * over IPv6 for an IPv6-only client), then HTTP to the address it names.
 */
async function resolveAndFetch(name: string, ipv6: boolean, dnsServer: { address: string; address6: string }): Promise<void> {
  const t = tally.get(name);
  if (!t) return;
  const dig = ipv6 ? ['-6', '+short', '+time=1', '+tries=1', `@${dnsServer.address6}`, 'www.example.test', 'AAAA'] : ['+short', '+time=1', '+tries=1', `@${dnsServer.address}`, 'www.example.test', 'A'];
  const answer = (await nsExec(name, 'dig', dig))?.trim().split('\n')[0] ?? '';
  if (ipv6 ? !/^[0-9a-f:]+$/i.test(answer) || !answer.includes(':') : !/^\d+\.\d+\.\d+\.\d+$/.test(answer)) {
    t.failed++;
    t.last = 'no DNS answer';
    return;
  }
  const cluster = vipCluster.get(answer) ?? answer;
  t.resolved.set(cluster, (t.resolved.get(cluster) ?? 0) + 1);
  // -g: the brackets of an IPv6 literal are the URL's, not a curl glob.
  const page = await nsExec(name, 'curl', ipv6 ? ['-6', '-g', '-s', '-m', '3', `http://[${answer}]/`] : ['-s', '-m', '3', `http://${answer}/`]);
  if (page === undefined || !page.startsWith('server ')) {
    t.failed++;
    t.last = `${cluster}: fetch failed`;
    return;
  }
  t.fetched++;
  const id = page.split(' ')[1] ?? '?';
  t.servers.set(id, (t.servers.get(id) ?? 0) + 1);
  t.last = `${cluster} -> ${id}${ipv6 ? ' (IPv6)' : ''}`;
}

/** One resolve-and-fetch per client, all clients at once. */
async function clientRound(): Promise<void> {
  const dnsServer = st.plan.dnsServers[dnsTurn++ % st.plan.dnsServers.length] ?? st.plan.dns;
  await Promise.all([...st.plan.clients.map((c) => resolveAndFetch(c.name, false, dnsServer)), ...st.plan.ipv6OnlyClients.map((c) => resolveAndFetch(c.name, true, dnsServer))]);
}

interface HaView {
  role: string;
  peer?: { name: string };
  lastFailover?: { at?: string; from?: string; to?: string } | null;
}
interface FrontView {
  ha?: HaView;
  services?: { name: string; servers: { name: string; health?: { state: string; reason: string }; active: number; decided: number; capacity: number | null; rate?: number }[] }[];
  control?: { servers: { name: string; utilization: number; capacity: number; down: boolean }[]; cluster: { capacity: number; load: number; available: number; serversUp: number; serversTotal: number } };
}
interface DnsView {
  clusters: { name: string; state: string; available: number }[];
  steering: { recent: { client: string; answer: string[]; reason: string }[] };
  rtt: { recent: { client: string; rttMs: Record<string, number | string | null> }[] };
  counters: Record<string, number>;
}

async function statusOf<T>(socket: string): Promise<T | undefined> {
  try {
    const r = await adminRequest(socket, { cmd: 'status' }, 2000);
    return r.ok === true ? (r.status as T) : undefined;
  } catch {
    return undefined;
  }
}

const n1 = (x: number | undefined): string => (x === undefined ? '-' : x.toFixed(1));

async function view(title: string): Promise<void> {
  const out: string[] = [`\n=== ${title} ===`];
  for (const k of st.plan.clusters) {
    // The cluster as its master sees it (a single front is its own master).
    const views = await Promise.all(k.fronts.map(async (fp) => ({ fp, v: await statusOf<FrontView>(frontSocket(st, k, fp)) })));
    if (k.fronts.length > 1) {
      out.push(`cluster c${k.index} front nodes: ${views.map(({ fp, v }) => `${fp.id} ${v ? (v.ha?.role ?? '?') : 'not answering'}${v?.ha?.lastFailover ? ` (last failover ${v.ha.lastFailover.at ?? ''})` : ''}`).join(', ')}`);
    }
    // A front node that does not answer (killed: the failover the demo
    // invites) is skipped; then the master's view, else any that answers.
    const answering = views.flatMap(({ v }) => (v ? [v] : []));
    const f = answering.find((v) => v.ha === undefined || v.ha.role === 'master' || v.ha.role === 'single') ?? answering[0];
    if (!f) {
      out.push(`cluster c${k.index}: front node not answering`);
      continue;
    }
    const cl = f.control?.cluster;
    out.push(`cluster c${k.index} (VIP ${k.vip}, IPv6 VIP ${k.vip6}): capacity ${n1(cl?.capacity)}/s, load ${n1(cl?.load)}/s, available ${n1(cl?.available)}/s, servers up ${cl?.serversUp ?? '-'}/${cl?.serversTotal ?? '-'}`);
    const est = new Map((f.control?.servers ?? []).map((s) => [s.name, s]));
    // ACTIVE and DECIDED per service: www (IPv4) and, beside it, www6 (IPv6); the estimate is the server's, shared by both.
    const www6 = new Map((f.services?.find((x) => x.name === 'www6')?.servers ?? []).map((s) => [s.name, s]));
    const rows = (f.services?.find((x) => x.name === 'www')?.servers ?? []).map((s) => {
      const e = est.get(s.name);
      const s6 = www6.get(s.name);
      // The server's combined health (its check, its agent), as the node steers by it; else the agent's own report.
      const state = s.health ? (s.health.state === 'up' ? 'up' : `${s.health.state} (${s.health.reason})`) : e?.down === true ? 'down' : 'up';
      return [`  ${s.name}`, String(s.active), String(s.decided), String(s6?.active ?? '-'), String(s6?.decided ?? '-'), `${n1(e?.capacity)}/s`, e ? `${(e.utilization * 100).toFixed(0)}%` : '-', state];
    });
    out.push(table(['  SERVER', 'ACTIVE', 'DECIDED', 'ACTIVE6', 'DECIDED6', 'CAPACITY', 'UTIL', 'STATE'], rows));
  }
  for (const dp of st.plan.dnsServers) {
    const d = await statusOf<DnsView>(dnsSocket(st, dp));
    if (d) {
      out.push(`DNS ${dp.id}: clusters ${d.clusters.map((c) => `${c.name} ${c.state}`).join(', ')}; answered ${d.counters['steered'] ?? 0} steered queries`);
      // The RTTs behind each choice (ms per cluster; IPv6 prefixes measured with ICMPv6 echo).
      const rtts = new Map(d.rtt.recent.map((r) => [r.client, Object.entries(r.rttMs).map(([c, ms]) => `${c}=${typeof ms === 'number' ? ms.toFixed(0) : (ms ?? '-')}`).join(' ')]));
      out.push(table(['  CLIENT PREFIX', 'ANSWER', 'REASON', 'RTTS (MS)'], d.steering.recent.map((r) => [`  ${r.client}`, [...new Set(r.answer.map((a) => vipCluster.get(a) ?? a))].join(','), r.reason, rtts.get(r.client) ?? '-'])));
    } else out.push(`DNS ${dp.id}: not answering`);
  }
  out.push(table(['CLIENT', 'DNS ANSWERS', 'FETCHED', 'FAILED', 'SERVERS', 'LAST'], [...tally].map(([name, t]) => [name, fmt(t.resolved), String(t.fetched), String(t.failed), fmt(t.servers), t.last])));
  console.log(out.join('\n'));
}

function fmt(m: Map<string, number>): string {
  return [...m].map(([k, v]) => `${k}:${v}`).join(' ') || '-';
}

function summary(): void {
  console.log('\n=== Summary ===');
  console.log(table(['CLIENT', 'DNS ANSWERS BY CLUSTER', 'FETCHED', 'FAILED', 'SERVERS THAT ANSWERED'], [...tally].map(([name, t]) => [name, fmt(t.resolved), String(t.fetched), String(t.failed), fmt(t.servers)])));
  if (st.plan.ipv6OnlyClients.length > 0) console.log(`(${st.plan.ipv6OnlyClients.map((c) => c.name).join(', ')}: IPv6-only, resolved AAAA and fetched over IPv6 through the clusters' IPv6 VIPs)`);
  const favourite = [...tally.values()].map((t) => [...t.resolved].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '-');
  const clustersServing = new Set([...tally.values()].flatMap((t) => [...t.servers.keys()].map((id) => id.slice(1, 2))));
  console.log(`\nclusters serving: ${[...clustersServing].sort().map((c) => `c${c}`).join(', ') || 'none'}; DNS answers differ by client: ${new Set(favourite).size > 1 ? 'yes' : 'no'} (${favourite.join(', ')})`);
}

async function finish(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  dashboard?.kill('SIGTERM');
  summary();
  if (!values.keep) {
    await stopDaemons(daemons);
    down(values.prefix);
    console.log('\nDemo site torn down.');
  }
  process.exit(code);
}
process.on('SIGINT', () => {
  void finish(0);
});
process.on('SIGTERM', () => {
  void finish(0);
});

// SIGINT/SIGTERM end the process from finish(); otherwise run for --duration.
let lastView = 0;
while (Date.now() - started < duration * 1000) {
  await clientRound();
  if (Date.now() - lastView >= 2000) {
    lastView = Date.now();
    await view(`t=${((Date.now() - started) / 1000).toFixed(0)}s`);
  }
  await new Promise((r) => setTimeout(r, 500));
}
await finish(0);
