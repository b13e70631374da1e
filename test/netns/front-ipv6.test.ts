/**
 * `sluice front` with an IPv6 virtual service on the dual-stack testbed
 * (issue 23 part 1): the same real clients, nginx servers, NFQUEUE and
 * kernel NAT as test/netns/front.test.ts, over IPv6: curl -6 through the
 * VIP, capacity proportions, kill -9 during a download (the ip6 table's
 * fallback and conntrack keep it), malformed and unknown-flow IPv6 packets
 * dropped and counted, and no IPv6 VIP packet routed back out (the ip6
 * table's VIP guard). Each test's IPv4 twin is in front.test.ts or
 * front-guard.test.ts.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const RAW6 = fileURLToPath(new URL('../fixtures/raw6.py', import.meta.url));
// No WAN delays: nothing here depends on an RTT, and client 2's 1500
// connections (24 at a time) each paid the default 80 ms RTT to cluster 1
// several times, most of test (b)'s 10 s.
const testbed = useTestbed({ blobMiB: 50, delaysMs: { '1:1': 0, '1:2': 0, '2:1': 0, '2:2': 0 } });

function configYaml(): string {
  const st = testbed();
  const k = st.plan.clusters[0]!;
  const caps = [1000, 2000, 3000];
  return `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
rules: { checkSeconds: 1 }
services:
  - name: www6
    vip: ${k.vip6}
    port: 80
    method: capacity
    synPath: kernel
    servers:
${k.servers.map((s, i) => `      - { name: ${s.id}, address: ${s.address6}, capacity: ${String(caps[i] ?? 1000)} }`).join('\n')}
  # The same servers on the queued path: what the ip6 fallback carries while no daemon is bound.
  - name: www6q
    vip: ${k.vip6}
    port: 8080
    method: byrequests
    synPath: queue
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address6}, port: 80 }`).join('\n')}
`;
}

describe('sluice front: an IPv6 virtual service on the testbed', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';
  let configFile = '';
  let vip6 = '';
  let url = '';
  let wan = '';

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0]!;
    frontNs = k.front.name;
    vip6 = k.vip6;
    url = `http://[${vip6}]/`;
    wan = st.plan.wan.name;
    // Packets to the IPv6 VIP that come back from the front node's uplink: the loop the guard prevents.
    nsRun(wan, 'nft', ['-f', '-'], `table ip6 guardtest6 {\n chain pre {\n  type filter hook prerouting priority -300; policy accept;\n  iifname "${k.wanIf}" ip6 daddr ${vip6} counter\n }\n}\n`);
    configFile = writeConfig(join(st.runDir, 'front-ipv6.yaml'), configYaml());
    front = new FrontProcess(frontNs, configFile);
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  async function burst(ns: string, count: number): Promise<{ tally: Record<string, number>; failures: number }> {
    const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', url, '--count', String(count), '--concurrency', '24']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { tally: Record<string, number>; failures: number };
  }

  /** Packets to the IPv6 VIP that left the front node's uplink (the WAN's counter). */
  function leaked(): number {
    return Number(/counter packets (\d+)/.exec(nsRun(wan, 'nft', ['list', 'chain', 'ip6', 'guardtest6', 'pre']))?.[1] ?? 'NaN');
  }

  /** The ip6 table's guard drop counter, read from the kernel. */
  function guardDrops(): number {
    return Number(/packets (\d+)/.exec(nsRun(frontNs, 'nft', ['list', 'counter', 'ip6', 'sluice', 'vip_guard_drops']))?.[1] ?? 'NaN');
  }

  it('(a) curl -6 through the IPv6 VIP reaches a server; the rules are the ip6 table and the ip6tables queue chain', () => {
    const st = testbed();
    const page = nsRun(st.plan.clients[0]!.name, 'curl', ['-6', '-g', '-s', '-m', '5', url]);
    assert.match(page, /^server s1[abc] /);
    const table = nsRun(frontNs, 'nft', ['list', 'table', 'ip6', 'sluice']);
    // Both services classified by one set; www6 on the kernel schedule, www6q queued.
    const services = /set services \{[^}]*\}[^}]*\}/.exec(table)?.[0] ?? '';
    assert.deepEqual([...services.matchAll(/ \. tcp \. (\d+)/g)].map((m) => m[1]).sort(), ['80', '8080'], services);
    assert.match(table, new RegExp(`map kernel \\{[^}]*elements = \\{ ${vip6} \\. tcp \\. 80 : goto k_0 \\}`));
    assert.match(nsRun(frontNs, 'ip6tables-save', ['-t', 'mangle']), /-A SLUICE_QUEUE -j NFQUEUE --queue-num 0 --queue-bypass/);
  });

  it('(b) 3000 short connections over IPv6 from two clients: per-server counts follow capacity 1:2:3 (±5%); teardown by log copies', async () => {
    const st = testbed();
    const s0 = await front!.status();
    const f0 = (s0['counters'] as Record<string, number>)['finishes'] ?? 0;
    const [a, b] = await Promise.all([burst(st.plan.clients[0]!.name, 1500), burst(st.plan.clients[1]!.name, 1500)]);
    assert.equal(a.failures + b.failures, 0);
    const total: Record<string, number> = { s1a: 0, s1b: 0, s1c: 0 };
    for (const t of [a.tally, b.tally]) for (const [k, v] of Object.entries(t)) total[k] = (total[k] ?? 0) + v;
    const sum = Object.values(total).reduce((x, y) => x + y, 0);
    assert.equal(sum, 3000);
    for (const [name, share] of [['s1a', 1 / 6], ['s1b', 2 / 6], ['s1c', 3 / 6]] as const) {
      const got = (total[name] ?? 0) / sum;
      assert.ok(Math.abs(got - share) <= 0.05 * share, `${name}: ${(got * 100).toFixed(1)}% of connections, expected ${(share * 100).toFixed(1)}% ± 5%`);
    }
    // Records recycled by the clients' FIN copies (NFLOG from the ip6 table).
    let status = await front!.status();
    for (let i = 0; i < 50 && ((status['counters'] as Record<string, number>)['finishes'] ?? 0) < f0 + 3000; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = await front!.status();
    }
    const counters = status['counters'] as Record<string, number>;
    const records = status['records'] as Record<string, number>;
    assert.equal((counters['finishes'] ?? 0) - f0, 3000, `records recycled by a client FIN: ${JSON.stringify(counters)}`);
    assert.equal(records['active'], 0, JSON.stringify(records));
  });

  it('(f) IPv6 packets of unknown flows and malformed IPv6 packets are dropped and counted; service goes on', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const before = await front!.status();
    const c0 = before['counters'] as Record<string, number>;
    const m0 = before['malformed'] as Record<string, number>;
    // Source ports above the clients' ephemeral range (1024-65000, testbed.ts): a
    // port an earlier connection used may still have its flow in TIME_WAIT.
    nsRun(client.name, 'python3', [RAW6, client.address6, vip6, ...[1, 2, 3, 4, 5].map((i) => `ack:${String(65100 + i)}:80`), 'hbh2:65201:80', 'hbh2:65202:80', 'ext9:65301:80', 'ext9:65302:80']);
    const page = nsRun(client.name, 'curl', ['-6', '-g', '-s', '-m', '5', url]);
    assert.match(page, /^server s1[abc] /);
    let counters: Record<string, number> = {};
    let malformed: Record<string, number> = {};
    await until(async () => {
      const s = await front!.status();
      counters = s['counters'] as Record<string, number>;
      malformed = s['malformed'] as Record<string, number>;
      return (counters['noRecord'] ?? 0) - (c0['noRecord'] ?? 0) >= 5 && (malformed['too_many_ext_headers'] ?? 0) - (m0['too_many_ext_headers'] ?? 0) >= 2;
    }, 'the drops counted', 10_000, 100).catch(() => undefined);
    assert.ok((counters['noRecord'] ?? 0) - (c0['noRecord'] ?? 0) >= 5, JSON.stringify(counters));
    assert.equal((malformed['hop_by_hop_not_first'] ?? 0) - (m0['hop_by_hop_not_first'] ?? 0), 2, JSON.stringify(malformed));
    assert.equal((malformed['too_many_ext_headers'] ?? 0) - (m0['too_many_ext_headers'] ?? 0), 2, JSON.stringify(malformed));
  });

  it('(g) no IPv6 VIP packet is routed back out: unsteered packets are dropped by the ip6 guard, none leaves the uplink', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const drops0 = guardDrops();
    nsRun(client.name, 'python3', [RAW6, client.address6, vip6, 'syn:40001:81', 'udp:40002:53']);
    const ping = await nsRunAsync(client.name, 'ping', ['-6', '-c', '1', '-W', '1', vip6]);
    assert.notEqual(ping.code, 0, 'no echo reply: the echo request was dropped');
    await until(() => guardDrops() >= drops0 + 3, 'the guard drops the SYN to port 81, the UDP datagram and the echo request', 10_000, 100);
    assert.equal(leaked(), 0, 'no packet to the IPv6 VIP left the front node');
    // The operator sees the ip6 guard's count too: status (and /metrics) read it at each rule check.
    const kernel = guardDrops();
    await until(async () => ((await front!.status())['vipGuard6'] as { packets: number }).packets >= kernel, 'status shows the ip6 guard drops', 10_000, 200);
  });

  it('(d) kill -9 during a 50 MB download over IPv6: it completes intact; meanwhile the kernel schedule (www6) and the ip6 fallback (www6q, queued) serve; restart rebuilds and serves', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const dl = spawn('ip', ['netns', 'exec', client.name, 'curl', '-6', '-g', '-s', '--limit-rate', '10M', '-m', '60', `${url}blob.bin`], { stdio: ['ignore', 'pipe', 'ignore'] });
    const hash = createHash('sha1');
    let bytes = 0;
    dl.stdout.on('data', (d: Buffer) => {
      bytes += d.length;
      hash.update(d);
    });
    const finished = new Promise<number>((resolve) => dl.on('close', (code) => { resolve(code ?? -1); }));
    const t0 = Date.now();
    while (bytes < 2 << 20 && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 50));
    assert.ok(bytes >= 2 << 20, `the download started (${String(bytes)} bytes)`);

    front!.child.kill('SIGKILL');
    await new Promise((r) => front!.child.once('exit', r));
    // Daemon down, rules still installed: the kernel keeps walking www6's
    // last schedule (the fallback untouched), and the ip6 table's fallback
    // spreads new connections of the queued service.
    const fallbackFlows = (): number => Number(/packets (\d+)/.exec(nsRun(frontNs, 'nft', ['list', 'counter', 'ip6', 'sluice', 'fallback_flows']))?.[1] ?? 'NaN');
    const fb0 = fallbackFlows();
    const during = nsRun(client.name, 'curl', ['-6', '-g', '-s', '-m', '5', url]);
    assert.match(during, /^server s1[abc] /);
    assert.equal(fallbackFlows(), fb0, 'www6 (kernel schedule): steered by the schedule, not the fallback');
    const queued = nsRun(client.name, 'curl', ['-6', '-g', '-s', '-m', '5', `http://[${vip6}]:8080/`]);
    assert.match(queued, /^server s1[abc] /);
    const fb1 = fallbackFlows();
    assert.equal(fb1 - fb0, 1, 'www6q (queued): the connection took the ip6 fallback');

    front = new FrontProcess(frontNs, configFile);
    const ready = await front.waitFor('front node ready');
    assert.ok(Number(ready['rebuilt']) >= 1, `records rebuilt from the kernel's IPv6 flows: ${String(ready['rebuilt'])}`);
    // Our install restarts the kernel's counter; the restarted daemon carries what the fallback did while it was down.
    const carried = (await front.status())['kernelCounts'] as { fallbackFlows: { ipv6: number } };
    assert.ok(carried.fallbackFlows.ipv6 >= fb1, `status counts the fallback's flows from before the restart: ${JSON.stringify(carried)} (kernel had ${String(fb1)})`);
    const afterRestart = await nsRunAsync(client.name, 'curl', ['-6', '-g', '-s', '-m', '1', url]);
    assert.equal(afterRestart.code, 0, 'a new connection right after restart (curl -m 1)');

    assert.equal(await finished, 0);
    assert.equal(bytes, 50 << 20);
    assert.equal(hash.digest('hex'), st.blobSha1);
  });
});
