/**
 * Issue 24, acceptance 6: a client whose namespace drops ICMP echo still
 * gets an RTT, by TCP probe, and is steered by it. On the testbed with WAN
 * delays, two front nodes probe with their default methods (icmp, then
 * tcp:443, then tcp:53), `sluice dns` steers by RTT over the CURVE control
 * plane, and real `dig` asks from the clients:
 *
 *   client 1: drops ICMP and ICMPv6 echo requests (nft in its namespace);
 *             10 ms one way to cluster 1, 80 ms to cluster 2
 *   client 2: answers ICMP; the delays swapped (80 ms, 10 ms)
 *
 * Nothing listens on the clients' port 443: their kernels answer the SYN
 * with a RST, which is the answer timed. Client 2 is client 1's reverse
 * setup, so answering one cluster to everybody fails for one of them.
 * Checked: both get their nearer cluster; the DNS status shows client 1's
 * RTTs; each front node's status shows client 1 remembered at tcp:443 and
 * client 2 at icmp, with per-method counts. The only timing judged is the
 * measured RTTs, from below (scheduling delay only adds).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { DnsStatus } from '../../src/dns/status.ts';
import { startSteeringSite, type SteeringSite } from '../helpers/steering.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const NEAR_MS = 10;
const FAR_MS = 80;
const tb = useTestbed({ clients: 2, clusters: 2, serversPerCluster: 1, delaysMs: { '1:1': NEAR_MS, '1:2': FAR_MS, '2:1': FAR_MS, '2:2': NEAR_MS } });

interface MethodStatus {
  method: string;
  sent: number;
  answered: number;
  timeouts: number;
  targets: number;
  tcp?: { rsts: number; synAcks: number };
}
interface FrontProbe {
  enabled: boolean;
  methods?: MethodStatus[];
  recentTargets?: { target: string; method: string }[];
}

async function resolve(ns: string, dns: string): Promise<string[]> {
  const r = await nsRunAsync(ns, 'dig', ['+short', '+time=2', '+tries=1', `@${dns}`, 'www.example.test', 'A']);
  return r.stdout.split('\n').filter((l) => /^\d+\.\d+\.\d+\.\d+$/.test(l));
}

describe('a client that drops ICMP gets an RTT by TCP probe and is steered by it', () => {
  let site: SteeringSite | undefined;

  before(async () => {
    const st = tb();
    // Client 1 drops echo requests of both families.
    execFileSync('ip', ['netns', 'exec', st.plan.clients[0]!.name, 'nft', '-f', '-'], {
      input: `table inet noping {
  chain in {
    type filter hook input priority 0; policy accept;
    icmp type echo-request counter drop comment "echo4"
    icmpv6 type echo-request counter drop comment "echo6"
  }
}
`,
    });
    site = await startSteeringSite(st, { policy: 'rtt', frontProbe: 'timeoutMs: 500' });
  });
  after(async () => {
    await site?.stop();
  });

  it('client 1 (no ICMP) is measured by TCP and gets cluster 1; client 2 (ICMP) gets cluster 2', async () => {
    const st = tb();
    const dnsAddr = st.plan.dns.address;
    const [k1, k2] = st.plan.clusters;
    const [c1, c2] = st.plan.clients;
    assert.ok(k1 && k2 && c1 && c2);
    const clients = [
      { who: 'client 1 (no ICMP)', ns: c1.name, address: c1.address, prefix: `${c1.address.split('.').slice(0, 3).join('.')}.0/24`, near: 'c1', far: 'c2', vip: k1.vip, method: 'tcp:443' },
      { who: 'client 2', ns: c2.name, address: c2.address, prefix: `${c2.address.split('.').slice(0, 3).join('.')}.0/24`, near: 'c2', far: 'c1', vip: k2.vip, method: 'icmp' },
    ];
    // The ICMP filter works: a system ping from the front node of cluster 1 gets no answer from client 1.
    const pingC1 = await nsRunAsync(k1.front.name, 'ping', ['-c', '1', '-W', '1', c1.address]);
    assert.notEqual(pingC1.code, 0, 'client 1 answers ICMP echo despite the filter');
    assert.ok(site);
    const s0 = site;
    const status = (): Promise<DnsStatus> => s0.status();
    const measured = (s: DnsStatus, prefix: string): { c1: number; c2: number } | undefined => {
      const r = s.rtt.recent.find((x) => x.client === prefix)?.rttMs;
      const [r1, r2] = [r?.['c1'], r?.['c2']];
      return typeof r1 === 'number' && typeof r2 === 'number' ? { c1: r1, c2: r2 } : undefined;
    };
    await until(async () => (await status()).clusters.every((c) => c.state === 'up'), 'both clusters up', 20_000, 200);
    let rounds = 0;
    const fronts = async (): Promise<string> => {
      const out: string[] = [];
      for (const k of st.plan.clusters) out.push((await nsRunAsync(k.front.name, BIN, ['ctl', '--socket', join(st.runDir, `front${k.index}.sock`), 'status'])).stdout.slice(0, 100_000));
      return out.map((o) => JSON.stringify((JSON.parse(o) as { control: { probe: unknown } }).control.probe)).join('\n');
    };
    await until(
      async () => {
        rounds++;
        assert.ok(rounds <= 120, 'at most 120 query rounds');
        for (const c of clients) await resolve(c.ns, dnsAddr);
        const s = await status();
        if (rounds % 40 === 0) console.log(`# round ${rounds}: dns rtt ${JSON.stringify(s.rtt)}; probes ${JSON.stringify(s.probes)}\n# fronts: ${await fronts()}`);
        return clients.every((c) => measured(s, c.prefix) !== undefined);
      },
      'RTTs measured for both clients to both clusters',
      60_000,
      250,
    );
    const why = async (prefix: string): Promise<string> => {
      const s = await status();
      return JSON.stringify({ decision: s.steering.recent.find((x) => x.client === prefix), rtt: s.rtt.recent.find((x) => x.client === prefix), probes: s.probes });
    };
    for (let i = 0; i < 3; i++) {
      for (const c of clients) {
        const ans = await resolve(c.ns, dnsAddr);
        if (ans.join() !== c.vip) assert.fail(`${c.who} got ${ans.join()}, not ${c.near}'s ${c.vip}: ${await why(c.prefix)}`);
      }
    }
    const s = await status();
    const atLeast = (ms: number, oneWay: number): boolean => ms >= 0.75 * 2 * oneWay;
    for (const c of clients) {
      const r = measured(s, c.prefix);
      assert.ok(r, c.who);
      const [near, far] = [r[c.near as 'c1' | 'c2'], r[c.far as 'c1' | 'c2']];
      console.log(`# ${c.who} ${c.prefix}: RTT to ${c.near} ${near} ms (one way ${NEAR_MS}), to ${c.far} ${far} ms (one way ${FAR_MS})`);
      assert.ok(Number.isFinite(near) && Number.isFinite(far) && atLeast(near, NEAR_MS) && atLeast(far, FAR_MS) && near < far, `${c.who}: ${JSON.stringify(r)}`);
      const decision = s.steering.recent.find((x) => x.client === c.prefix);
      assert.match(decision?.reason ?? '', new RegExp(`^rtt:${c.near}=`), JSON.stringify(decision));
    }
    // Each front node: client 1 remembered at tcp:443, client 2 at icmp; TCP answers counted (RSTs: nothing listens on 443).
    for (const k of st.plan.clusters) {
      const r = await nsRunAsync(k.front.name, BIN, ['ctl', '--socket', join(st.runDir, `front${k.index}.sock`), 'status']);
      const p = (JSON.parse(r.stdout) as { control: { probe: FrontProbe } }).control.probe;
      const methodOf = new Map((p.recentTargets ?? []).map((t) => [t.target, t.method]));
      for (const c of clients) assert.equal(methodOf.get(c.address), c.method, `front ${k.index}, ${c.who}: ${JSON.stringify(p)}`);
      const by = new Map((p.methods ?? []).map((m) => [m.method, m]));
      const icmp = by.get('icmp');
      const tcp = by.get('tcp:443');
      assert.ok(icmp && tcp, JSON.stringify(p));
      assert.ok(icmp.answered >= 3 && icmp.timeouts >= 1 && tcp.answered >= 3 && (tcp.tcp?.rsts ?? 0) >= 3, `front ${k.index}: ${JSON.stringify(p.methods)}`);
      assert.equal(by.get('tcp:53')?.sent, 0, 'port 53 not needed: 443 answered');
      console.log(`# front ${k.index} methods: ${JSON.stringify(p.methods)}`);
    }
    // And the text status shows the method table.
    const text = (await nsRunAsync(k1.front.name, BIN, ['status', '--socket', join(st.runDir, 'front1.sock')])).stdout;
    assert.match(text, /METHOD\s+SENT\s+ANSWERED/, text);
    assert.match(text, new RegExp(`${c1.address.replace(/\./g, '\\.')}\\s+tcp:443`), text);
  });
});
