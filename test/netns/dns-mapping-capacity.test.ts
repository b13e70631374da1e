/**
 * Issue 24, acceptance 3: policy `mapping` on the testbed with WAN delays,
 * four client prefixes, two clusters, two DNS servers, real traffic.
 *
 *   one-way delay   to cluster 1   to cluster 2   RTT penalty of cluster 2
 *   client A (cl1)      10 ms         200 ms           380 ms
 *   client B (cl2)      10 ms         100 ms           180 ms
 *   client C (cl3)      10 ms          40 ms            60 ms
 *   client D (cl4)     150 ms          10 ms       (nearest to cluster 2)
 *
 * Cluster 1 is the nearest to A, B and C but has room for two of them:
 * the assignment may fill HEADROOM × capacity = 0.5 × (2 servers × 15) = 15
 * concurrent connections. A, B and D each hold LOOPS (5) rate-limited
 * downloads at a time and ask at one steady query rate; C holds and asks
 * twice as much (a bigger network). The query shares scale the reported
 * load into demand: ~5 each for A, B, D and ~10 for C, so A and B (~10)
 * fit, A, B and C (~20) do not. The right answer is C (the smallest
 * penalty) and D on cluster 2, A and B on cluster 1.
 *
 * Why C is the bigger one: the demand scale follows the load the front
 * nodes report at each recompute, and that reading moves as downloads end
 * and start (a first version of this test, with four equal prefixes, read
 * 20 and later 17 on a steady 20). With four equal prefixes the two sides
 * of the boundary (two fit, three do not) are only a factor 1.5 apart, and
 * that dip moved C back to cluster 1 on one DNS server; with C at twice the
 * others they are a factor 2 apart, and the capacity sits ~24% from both.
 * (That jitter is a finding about the policy, not the test: see
 * docs/steering.md, "Inputs".)
 *
 * The penalties are far apart (120 ms and more) because scheduling delay
 * on a busy machine adds tens of ms to a measured RTT (the delay line and
 * the probers run in userspace).
 *
 * Demand is real, from both of its sources in service.ts: each client asks
 * both DNS servers at a steady bounded rate (the per-prefix query rates),
 * and its fetch loops resolve the name (at the two servers in turn) and
 * download from the VIP answered, so the front nodes' cluster_load reports
 * carry the load (their active connections) that the query shares are
 * scaled to. The front namespaces' conntrack TIME_WAIT is 1 s, so a
 * finished download leaves the front's active count within about a second
 * (the default 120 s would count two minutes of past downloads). The loops
 * are staggered so the downloads do not all start and end at once.
 *
 * Checked, on stable facts only:
 * - once the load has ramped up and the query shares have settled
 *   (SETTLE_MS), and both DNS servers map the four prefixes so, for a 60 s
 *   window:
 *   every sampled answer of either server is the expected cluster's VIP for
 *   every prefix (the same from both), no prefix moved on either server
 *   (movedTotal), and recomputes went on;
 * - at the end: each server's assignment (`sluice status --dns --json`) has
 *   A, B on c1 and C, D on c2, cluster 1's mapped demand within the
 *   capacity the solve had there and C's demand beyond what was left (C was
 *   moved by capacity, not by an RTT); the text status lists the
 *   assignment; the downloads succeeded and each client's last ones went
 *   to its cluster's VIP.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { DnsStatus } from '../../src/dns/status.ts';
import { prefix24, resolveName, startSteeringSite, type SteeringSite } from '../helpers/steering.ts';
import { nsRun, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const tb = useTestbed({
  clients: 4,
  clusters: 2,
  serversPerCluster: 2,
  dnsServers: 2,
  blobMiB: 1,
  delaysMs: { '1:1': 10, '1:2': 200, '2:1': 10, '2:2': 100, '3:1': 10, '3:2': 40, '4:1': 150, '4:2': 10 },
});

/**
 * Concurrent downloads per client (C: twice), each DOWNLOAD_BYTES at RATE:
 * 18 s by the rate, ~12 s measured (curl's limiter lets the first receive
 * windows through at once). The loops start spread over DOWNLOAD_SECONDS.
 */
const LOOPS = 5;
const DOWNLOAD_BYTES = 150_000;
const RATE = '8k';
const DOWNLOAD_SECONDS = 19;
/** Cluster 1's servers: 2 × 15 connections; the assignment may fill HEADROOM of it. Cluster 2 has room for all. */
const C1_SERVER_CAPACITY = 15;
const HEADROOM = 0.5;
const WINDOW_MS = 60_000;
/** The policy's demand half-life in this test (steering.mapping.demandHalfLifeSeconds). */
const HALF_LIFE_SECONDS = 10;
/**
 * The window starts no earlier than this after the load: the last fetch
 * loop starts at DOWNLOAD_SECONDS, and two half-lives later the smoothed
 * query shares carry a quarter of the ramp at most. Before that the shares
 * are the start's noise: a CI run (2026-11-28) read A and B at 7.8 and 8.0
 * on one server 17 s in (1.6 times their share; 5.3 and 5.4 on the other),
 * and that server moved B off cluster 1, rightly for what it read.
 */
const SETTLE_MS = (DOWNLOAD_SECONDS + 2 * HALF_LIFE_SECONDS) * 1000;
/** The load's own bounds: it ends by itself at the latest after this long, or after so many fetches and query rounds. */
const LOAD_SECONDS = 170;
const MAX_FETCHES = 12;
const MAX_QUERY_ROUNDS = 400;

/** Each client's expected cluster and its weight (fetch loops LOOPS × weight, query loops weight). */
const EXPECTED: readonly { who: string; cluster: 'c1' | 'c2'; weight: number }[] = [
  { who: 'A', cluster: 'c1', weight: 1 },
  { who: 'B', cluster: 'c1', weight: 1 },
  { who: 'C', cluster: 'c2', weight: 2 },
  { who: 'D', cluster: 'c2', weight: 1 },
];

/**
 * One client's load, as one shell: LOOPS × weight fetch loops (staggered
 * over one download's time) and `weight` query loops, each bounded in count
 * and by the deadline. Prints a line per fetch (`fetch <dns> <vip> <http
 * code> <bytes>`) and the query rounds of each query loop.
 */
function loadScript(dns: readonly string[], weight: number): string {
  const [d1, d2] = dns;
  const n = LOOPS * weight;
  const loops = Array.from({ length: n }, (_, j) => `fetch_loop ${((j * DOWNLOAD_SECONDS) / n).toFixed(2)} ${String(j)} &`).join('\n');
  return `end=$(( $(date +%s) + ${String(LOAD_SECONDS)} ))
fetch_loop() {
  sleep "$1"
  i=0
  while [ $i -lt ${String(MAX_FETCHES)} ] && [ $(date +%s) -lt $end ]; do
    i=$((i + 1))
    if [ $(( (i + $2) % 2 )) -eq 0 ]; then s=${d1}; else s=${d2}; fi
    v=$(dig +short +time=2 +tries=1 @$s www.example.test A | head -n 1)
    case "$v" in ''|*[!0-9.]*) echo "fetch $s none 0 0"; sleep 1; continue;; esac
    curl -s -o /dev/null --max-time 60 --limit-rate ${RATE} -r 0-${String(DOWNLOAD_BYTES - 1)} -w "fetch $s $v %{http_code} %{size_download} %{time_total}\\n" "http://$v/blob.bin"
  done
}
query_loop() {
  sleep "$1"
  i=0
  while [ $i -lt ${String(MAX_QUERY_ROUNDS)} ] && [ $(date +%s) -lt $end ]; do
    i=$((i + 1))
    dig +short +time=2 +tries=1 @${d1} www.example.test A >/dev/null
    dig +short +time=2 +tries=1 @${d2} www.example.test A >/dev/null
    sleep 0.5
  done
  echo "queries $i"
}
${loops}
${Array.from({ length: weight }, (_, j) => `query_loop ${(j * 0.3).toFixed(1)} &`).join('\n')}
wait
`;
}

interface Load {
  readonly child: ChildProcess;
  out: string;
}

function startLoad(ns: string, dns: readonly string[], weight: number): Load {
  // Its own process group (detached), so stop() ends the shell and every dig and curl under it.
  const child = spawn('ip', ['netns', 'exec', ns, 'timeout', String(LOAD_SECONDS + 30), 'sh', '-c', loadScript(dns, weight)], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
  const load: Load = { child, out: '' };
  child.stdout.on('data', (d: Buffer) => (load.out += d.toString()));
  return load;
}

async function stopLoad(l: Load): Promise<void> {
  if (l.child.exitCode !== null || l.child.signalCode !== null || l.child.pid === undefined) return;
  const done = new Promise((r) => l.child.once('exit', r));
  try {
    process.kill(-l.child.pid, 'SIGTERM');
  } catch {
    /* gone already */
  }
  await done;
}

/** The fetch lines a load printed. */
function fetchesOf(l: Load | undefined): { dns: string; vip: string; code: string; bytes: number; seconds: number }[] {
  return (l?.out ?? '')
    .split('\n')
    .filter((x) => x.startsWith('fetch '))
    .map((x) => x.split(' '))
    .map((f) => ({ dns: f[1] ?? '', vip: f[2] ?? '', code: f[3] ?? '', bytes: Number(f[4]), seconds: Number(f[5]) }));
}

/** The assignment of a status: prefix -> cluster name. */
function assignment(s: DnsStatus): Map<string, string> {
  return new Map((s.mapping?.top ?? []).map((p) => [p.prefix, p.cluster]));
}

describe('DNS policy mapping: 4 prefixes, cluster 1 with room for 2, two DNS servers, curl load', () => {
  let site: SteeringSite | undefined;
  const loads: Load[] = [];

  before(async () => {
    const st = tb();
    // A finished download leaves conntrack (and so the front's active count) after 1 s, not 120 s.
    for (const k of st.plan.clusters) nsRun(k.front.name, 'sysctl', ['-q', '-w', 'net.netfilter.nf_conntrack_tcp_timeout_time_wait=1']);
    site = await startSteeringSite(st, {
      policy: 'mapping',
      serverCapacity: (k) => (k.index === 1 ? C1_SERVER_CAPACITY : 100),
      steering: [`mapping: { recomputeSeconds: 1, headroom: ${String(HEADROOM)}, demandHalfLifeSeconds: ${String(HALF_LIFE_SECONDS)}, ttlMin: 2, ttlMax: 30, freshRttSeconds: 0, stableSeconds: 10 }`],
    });
  });
  after(async () => {
    for (const l of loads) await stopLoad(l);
    // What each client's load did (also when the test failed): fetches per VIP, failures, mean time, query rounds.
    for (const [i, l] of loads.entries()) {
      const f = fetchesOf(l);
      const perVip: Record<string, number> = {};
      for (const x of f) perVip[`${x.vip} ${x.code}`] = (perVip[`${x.vip} ${x.code}`] ?? 0) + 1;
      const ok = f.filter((x) => x.code === '206');
      const mean = ok.reduce((a, x) => a + x.seconds, 0) / Math.max(1, ok.length);
      console.log(`# ${EXPECTED[i]?.who ?? '?'}: ${String(f.length)} fetches ${JSON.stringify(perVip)}, mean ${mean.toFixed(1)} s; ${l.out.split('\n').filter((x) => x.startsWith('queries ')).join(', ') || 'query loops cut short'}`);
    }
    await site?.stop();
  });

  it('sends C and D to cluster 2 and A and B to cluster 1, the same on both DNS servers, with no move over 60 s', async () => {
    const st = tb();
    assert.ok(site);
    const s = site;
    const dnsAddrs = st.plan.dnsServers.map((d) => d.address);
    assert.equal(dnsAddrs.length, 2);
    const clients = st.plan.clients.map((c, i) => {
      const e = EXPECTED[i];
      assert.ok(e);
      const k = st.plan.clusters.find((x) => `c${String(x.index)}` === e.cluster);
      assert.ok(k);
      return { ...e, ns: c.name, prefix: prefix24(c.address), vip: k.vip };
    });
    // `sluice status --dns --json` (a process each) where the test judges; the admin socket directly where it polls.
    const statuses = async (): Promise<DnsStatus[]> => Promise.all(dnsAddrs.map((_a, i) => s.status(i)));
    const polled = async (): Promise<DnsStatus[]> => Promise.all(dnsAddrs.map((_a, i) => s.poll(i)));
    const why = async (): Promise<string> =>
      JSON.stringify(
        (await polled()).map((x) => ({ name: x.name, clusters: x.clusters.map((c) => [c.name, c.state, c.capacity, c.load]), mapping: x.mapping, rtt: x.rtt.recent })),
      );

    for (const c of clients) loads.push(startLoad(c.ns, dnsAddrs, c.weight));
    const loadStart = Date.now();

    // Until the load has ramped up and settled (SETTLE_MS), and both servers map all four prefixes as expected, with load reported by both clusters.
    let waited = 0;
    await until(
      async () => {
        waited++;
        if (Date.now() - loadStart < SETTLE_MS) return false;
        const all = await polled();
        return all.every((x) => {
          const m = assignment(x);
          return clients.every((c) => m.get(c.prefix) === c.cluster) && x.clusters.every((c) => c.state === 'up' && c.load > 0);
        });
      },
      'both DNS servers map A, B to c1 and C, D to c2 under load',
      90_000,
      1000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}: ${await why()}`);
    });
    const first = await statuses();
    for (const x of first) console.log(`# ${x.name} at the window's start: ${JSON.stringify({ loadEstimate: x.mapping?.loadEstimate, clusters: x.mapping?.clusters, top: x.mapping?.top.map((p) => [p.prefix, p.cluster, p.demand, p.rttMs]), loads: x.clusters.map((c) => [c.name, c.load, c.capacity]) })}`);
    const movedBefore = first.map((x) => x.mapping?.movedTotal ?? -1);
    const recomputesBefore = first.map((x) => x.mapping?.recomputes ?? 0);

    // The window: sample every prefix's answer at both servers.
    const answer = async (ns: string, server: string): Promise<string> => {
      // A query lost on a busy machine is no answer at all, not a flap: asked again (at most 3 times).
      for (let i = 0; i < 3; i++) {
        const r = await resolveName(ns, server);
        // Answered from the assignment: its adaptive TTL, within ttlMin..ttlMax.
        if (r.addresses.length > 0) return r.ttl >= 2 && r.ttl <= 30 ? r.addresses.join(',') : `${r.addresses.join(',')} with TTL ${String(r.ttl)}`;
      }
      return '(no answer)';
    };
    const end = Date.now() + WINDOW_MS;
    let samples = 0;
    const loadsSeen: number[][] = [];
    while (Date.now() < end) {
      for (const c of clients) {
        const got = await Promise.all(dnsAddrs.map((a) => answer(c.ns, a)));
        if (got.some((g) => g !== c.vip)) assert.fail(`${c.who} (${c.prefix}) got ${got.join(' / ')} from the two servers, expected ${c.vip} (${c.cluster}) from both: ${await why()}`);
      }
      samples++;
      if (samples % 5 === 0) loadsSeen.push((await s.poll(0)).clusters.map((c) => c.load));
      await sleep(1000);
    }
    const last = await statuses();
    console.log(`# ${String(samples)} samples of 4 prefixes × 2 servers in ${String(WINDOW_MS / 1000)} s; cluster loads seen (c1, c2): ${JSON.stringify(loadsSeen)}; waited ${String(waited)} polls for the assignment`);
    for (const [i, x] of last.entries()) {
      const m = x.mapping;
      assert.ok(m, `${x.name}: no mapping status`);
      assert.equal(m.movedTotal, movedBefore[i], `${x.name}: prefixes moved during the window: ${await why()}`);
      // 60 recomputes at 1 s; at least half of them on a busy machine.
      assert.ok(m.recomputes >= (recomputesBefore[i] ?? 0) + 30, `${x.name}: only ${String(m.recomputes - (recomputesBefore[i] ?? 0))} recomputes in the window`);
      assert.ok(m.last !== null && m.last.moved === 0);
      const got = assignment(x);
      for (const c of clients) {
        assert.equal(got.get(c.prefix), c.cluster, `${x.name}: ${c.who} ${c.prefix}`);
        assert.equal(x.steering.recent.find((d) => d.client === c.prefix)?.reason, `mapping:${c.cluster}`, `${x.name}: ${c.who} ${c.prefix}`);
      }
      const c1 = m.clusters.find((c) => c.name === 'c1');
      const c2 = m.clusters.find((c) => c.name === 'c2');
      assert.ok(c1 && c2 && c1.capacity !== null, JSON.stringify(m.clusters));
      assert.equal(c1.prefixes, 2);
      assert.equal(c2.prefixes, 2);
      // The solve's capacity at c1 holds A and B but not C as well: C was moved by capacity.
      const dc = m.top.find((p) => p.prefix === clients[2]?.prefix)?.demand ?? 0;
      assert.ok(c1.demand <= c1.capacity + 1e-6 && c1.demand + dc > c1.capacity, `${x.name}: c1 mapped ${String(c1.demand)} of capacity ${String(c1.capacity)}, C's demand ${String(dc)}`);
      for (const p of m.top) assert.ok(p.demand > 0 && p.rttMs > 0 && p.ttl >= 2 && p.ttl <= 30, JSON.stringify(p));
    }
    // Both servers, one assignment.
    assert.deepEqual([...assignment(last[0]!)].sort(), [...assignment(last[1]!)].sort());
    // The operator's view: the assignment in the text status.
    const text = await s.statusText(1);
    for (const c of clients) assert.match(text, new RegExp(`${c.prefix.replaceAll('.', '\\.')}\\s+${c.cluster}\\s`), text);
    assert.match(text, /last recompute at \S+ \(\d+\.\ds ago\)/, text);

    // The load was real: downloads succeeded, and each client's last ones came from its cluster.
    for (const l of loads) await stopLoad(l);
    for (const [i, c] of clients.entries()) {
      const n = LOOPS * c.weight;
      const fetches = fetchesOf(loads[i]);
      const done = fetches.filter((f) => f.code === '206' && f.bytes === DOWNLOAD_BYTES);
      // A fetch the stop cut short prints nothing; one whose query a busy machine lost prints "none": at most one per loop.
      assert.ok(done.length >= fetches.length - n && done.length >= 2 * n, `${c.who}: ${loads[i]?.out ?? ''}`);
      const lastVips = done.slice(-n).map((f) => f.vip);
      assert.ok(lastVips.every((v) => v === c.vip), `${c.who}: the last fetches went to ${lastVips.join(', ')}, not all ${c.vip}`);
    }
  });
});
