/**
 * RTT steering of IPv6-only clients end to end (issue 23, acceptance 2), on
 * the dual-stack testbed with WAN delays: two front nodes probing with real
 * ICMPv6 echo (net-ping's IPv6 session), `sluice dns` answering AAAA over
 * IPv6, everything over the CURVE control plane, and real `dig` from clients
 * that have no IPv4 address at all.
 *
 *   IPv6-only client A (cl2): 10 ms one way to cluster 1, 80 ms to cluster 2
 *   IPv6-only client B (cl3): the same delays swapped (80 ms, 10 ms)
 *
 * B is A's reverse setup: with both in one testbed, answering one cluster to
 * everybody (or the first cluster, or a random one) fails for one of them,
 * so the test cannot pass by luck.
 *
 * The chain checked, in order: a query from the client's /64 gets some AAAA
 * answer (capacity-weighted: no RTTs yet) and asks the front nodes to probe
 * its source address (a version-2 rtt_probe_request); each front node pings
 * it over ICMPv6 through the delayed WAN and publishes rtt_results; the DNS
 * files them under the client's prefix; then the client's AAAA is the
 * nearer cluster's IPv6 VIP, and `sluice status --dns` (JSON and text)
 * shows the prefix's RTTs per cluster.
 *
 * The client prefix is /64 here (steering.ipv6Prefix), not the default /56:
 * the testbed gives each client link its own /64 (2001:2:0:1i::/64), and
 * all of them fall in one /56 (2001:2::/56), which would make A and B one
 * client.
 *
 * The front nodes serve their IPv4 VIPs only (the front has no IPv6 virtual
 * services yet); the IPv6 VIPs are routed to them and held on lo. This test
 * is about DNS answers and RTTs, not about fetching through the VIPs.
 * The only timing judged is the measured RTTs, from below (see the test).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { DnsStatus } from '../../src/dns/status.ts';
import { startSteeringSite, type SteeringSite } from '../helpers/steering.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
// One-way WAN delays: near 10 ms, far 80 ms (RTTs 20 and 160). Scheduling
// delay on a busy machine only ever adds to a measured RTT; the gap leaves
// room for it (dns-steering.test.ts saw ~60 ms added to a 20 ms path).
const NEAR_MS = 10;
const FAR_MS = 80;
const tb = useTestbed({
  clients: 1,
  ipv6OnlyClients: 2,
  clusters: 2,
  serversPerCluster: 1,
  delaysMs: { '1:1': NEAR_MS, '1:2': FAR_MS, '2:1': NEAR_MS, '2:2': FAR_MS, '3:1': FAR_MS, '3:2': NEAR_MS },
});

/** AAAA records of `dig +short` (IPv6 text only; CNAMEs and errors dropped). */
async function resolve6(ns: string, dns6: string): Promise<string[]> {
  const r = await nsRunAsync(ns, 'dig', ['-6', '+short', '+time=2', '+tries=1', `@${dns6}`, 'www.example.test', 'AAAA']);
  return r.stdout.split('\n').filter((l) => /^[0-9a-f:]+$/i.test(l) && l.includes(':'));
}

describe('RTT steering of IPv6-only clients (AAAA, ICMPv6 probes)', () => {
  let site: SteeringSite | undefined;

  before(async () => {
    site = await startSteeringSite(tb(), { policy: 'rtt', ipv6: true });
  });
  after(async () => {
    await site?.stop();
  });

  it('each IPv6-only client gets some AAAA, then its nearer cluster’s IPv6 VIP once its ICMPv6 probes are in; status shows its RTTs', async () => {
    const st = tb();
    const dns6 = st.plan.dns.address6;
    const [k1, k2] = st.plan.clusters;
    assert.ok(k1 && k2);
    const vip6s = [k1.vip6, k2.vip6];
    const [a, b] = st.plan.ipv6OnlyClients;
    assert.ok(a && b);
    // The client prefixes as status shows them (the /64 of each client's link).
    const prefixA = '2001:2:0:12::/64';
    const prefixB = '2001:2:0:13::/64';
    assert.ok(a.address6.startsWith('2001:2:0:12::') && b.address6.startsWith('2001:2:0:13::'), `${a.address6} ${b.address6}`);
    const clients = [
      { who: 'A', ns: a.name, prefix: prefixA, near: 'c1', far: 'c2', vip6: k1.vip6 },
      { who: 'B', ns: b.name, prefix: prefixB, near: 'c2', far: 'c1', vip6: k2.vip6 },
    ];
    assert.ok(site);
    const s0 = site;
    const status = (): Promise<DnsStatus> => s0.status();
    const measured = (s: DnsStatus, prefix: string): { c1: number; c2: number } | undefined => {
      const r = s.rtt.recent.find((x) => x.client === prefix)?.rttMs;
      const [r1, r2] = [r?.['c1'], r?.['c2']];
      return typeof r1 === 'number' && typeof r2 === 'number' ? { c1: r1, c2: r2 } : undefined;
    };
    // A cluster whose front node has not reported is no candidate: both up first.
    await until(async () => (await status()).clusters.every((c) => c.state === 'up'), 'both clusters up (cluster_load from both front nodes)', 20_000, 200);

    // Some answer first: one IPv6 VIP of a configured cluster, over IPv6 from a client with no IPv4.
    for (const c of clients) {
      const first = await resolve6(c.ns, dns6);
      assert.equal(first.length, 1, `${c.who}: first AAAA answer ${JSON.stringify(first)}`);
      assert.ok(vip6s.includes(first[0]!), `${c.who}: ${first[0]!} is no cluster's IPv6 VIP (${vip6s.join(', ')})`);
    }

    // Queries keep the probe requests coming (at most every retrySeconds per
    // prefix) until both prefixes have RTTs to both clusters. Bounded in
    // time (until's deadline) and count (one dig per client per step).
    let rounds = 0;
    await until(
      async () => {
        rounds++;
        assert.ok(rounds <= 120, 'at most 120 query rounds');
        for (const c of clients) await resolve6(c.ns, dns6);
        const s = await status();
        return clients.every((c) => measured(s, c.prefix) !== undefined);
      },
      'RTTs measured for both IPv6-only clients to both clusters',
      45_000,
      250,
    );

    // The DNS server's own account of a decision, for a failure message.
    const why = async (prefix: string): Promise<string> => {
      const s = await status();
      return JSON.stringify({ decision: s.steering.recent.find((x) => x.client === prefix), rtt: s.rtt.recent.find((x) => x.client === prefix), clusters: s.clusters, probes: s.probes });
    };
    for (let i = 0; i < 3; i++) {
      for (const c of clients) {
        const ans = await resolve6(c.ns, dns6);
        if (ans.join() !== c.vip6) assert.fail(`${c.who} got ${ans.join()}, not ${c.near}'s ${c.vip6}: ${await why(c.prefix)}`);
      }
    }

    const s = await status();
    // The RTTs behind the choice come from the WAN over ICMPv6: near below
    // far, each about its round trip or more. Judged from below only (the
    // prober's 1 ms clock, the delay line's early release); no upper bound:
    // scheduling delay on a busy machine adds to any sample.
    const atLeast = (ms: number, oneWay: number): boolean => ms >= 0.75 * 2 * oneWay;
    for (const c of clients) {
      const r = measured(s, c.prefix);
      assert.ok(r, `${c.who}: ${JSON.stringify(s.rtt.recent)}`);
      const [near, far] = [r[c.near as 'c1' | 'c2'], r[c.far as 'c1' | 'c2']];
      console.log(`# ${c.who} ${c.prefix}: RTT to ${c.near} ${near} ms (one way ${NEAR_MS}), to ${c.far} ${far} ms (one way ${FAR_MS})`);
      assert.ok(atLeast(near, NEAR_MS) && atLeast(far, FAR_MS) && near < far, `${c.who}: ${JSON.stringify(r)}`);
      const decision = s.steering.recent.find((x) => x.client === c.prefix);
      assert.match(decision?.reason ?? '', new RegExp(`^rtt:${c.near}=`), JSON.stringify(decision));
      assert.ok(decision?.answer.includes(c.vip6), JSON.stringify(decision));
    }
    // Results went under the prefixes the DNS asked for: none unknown.
    assert.equal(s.rtt.unknownTargets, 0, JSON.stringify(s.rtt));
    // Each front node's ICMPv6 session is open (no probe.ipv6Off) and its echoes were answered.
    for (const k of st.plan.clusters) {
      const r = await nsRunAsync(k.front.name, BIN, ['ctl', '--socket', join(st.runDir, `front${k.index}.sock`), 'status']);
      const p = (JSON.parse(r.stdout) as { control: { probe: { ipv6Off?: string; replies: number } } }).control.probe;
      assert.equal(p.ipv6Off, undefined, `front ${k.index}: ${JSON.stringify(p)}`);
      assert.ok(p.replies >= 6, `front ${k.index}: ${JSON.stringify(p)}`);
    }

    // The text status's RTT table (between its heading and the high-rate
    // clients) has each prefix's row with a number per cluster.
    const text = await s0.statusText();
    const rttTable = /^RTTs \(ms\)[^\n]*\n([\s\S]*?)\n\nhigh-rate clients/m.exec(text)?.[1] ?? '';
    for (const c of clients) {
      const row = rttTable.split('\n').find((l) => l.trim().startsWith(`${c.prefix} `));
      assert.ok(row, `no RTT row for ${c.prefix} in:\n${text}`);
      assert.match(row, /^\s*\S+\s+\d+(\.\d+)?\s+\d+(\.\d+)?\s*$/, row);
    }
  });
});
