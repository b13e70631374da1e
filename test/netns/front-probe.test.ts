/**
 * receive_probe_for_rtt over the real control plane and real ICMP: a CURVE
 * publisher in the DNS namespace (test/fixtures/control-pub.ts, standing in
 * for the DNS server) asks front 1 to probe both clients; front 1 pings them
 * through the delayed WAN and publishes rtt_results, read by a CURVE
 * subscriber in the DNS namespace (test/fixtures/control-sub.ts).
 *
 * The WAN delays every packet of a client<->cluster path one way by the
 * configured delay, ICMP included (test/netns/wan-delay.test.ts), so the
 * RTTs front 1 measures are twice the one-way delays: client 1 about 20 ms,
 * client 2 about 80 ms. Those RTTs are the measured quantity and the only
 * timing asserted; deadlines below only bound a hung test.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { NsProcess, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const PUB = fileURLToPath(new URL('../fixtures/control-pub.ts', import.meta.url));
const SUB = fileURLToPath(new URL('../fixtures/control-sub.ts', import.meta.url));

const tb = useTestbed({ clients: 2, clusters: 2, serversPerCluster: 1, delaysMs: { '1:1': 10, '1:2': 40, '2:1': 40, '2:2': 10 } });

interface Result {
  target: string;
  sent: number;
  received: number;
  rttMs: number | null;
}
interface ProbeStatus {
  enabled: boolean;
  echoesSent: number;
  replies: number;
  timeouts: number;
  reported: number;
}

describe('RTT probes from a front node (receive_probe_for_rtt)', () => {
  let front: FrontProcess | undefined;
  let pub: NsProcess | undefined;
  let sub: NsProcess | undefined;
  let sock = '';

  before(async () => {
    const st = tb();
    const k = st.plan.clusters[0]!;
    const keys = st.keysDir;
    sock = join(st.runDir, 'front1.sock');
    const cfg = writeConfig(
      join(st.runDir, 'front1.yaml'),
      `cluster: c1
uplinkAddress: ${k.uplinkAddress}
adminSocket: ${sock}
services:
  - name: www
    vip: ${k.vip}
    port: 80
    method: byrequests
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
control:
  keyFile: ${join(keys, 'fr1.key')}
  publish:
    listen: tcp://${k.uplinkAddress}:7102
    allow: [${join(keys, 'dns.pub')}]
  subscribe:
    - { endpoint: 'tcp://${st.plan.dns.address}:7103', publicKey: ${join(keys, 'dns.pub')} }
`,
    );
    // The results' subscriber first, so no report is missed while it connects.
    sub = new NsProcess(st.plan.dns.name, [SUB, '--endpoint', `tcp://${k.uplinkAddress}:7102`, '--key', join(keys, 'dns.key'), '--server-key', join(keys, 'fr1.pub'), '--types', 'rtt_results']);
    front = new FrontProcess(k.front.name, cfg);
    await front.waitFor('control plane up');
    const targets = st.plan.clients.map((c) => c.address).join(',');
    pub = new NsProcess(st.plan.dns.name, [PUB, '--endpoint', `tcp://${st.plan.dns.address}:7103`, '--key', join(keys, 'dns.key'), '--allow', join(keys, 'fr1.pub'), '--targets', targets, '--count', '3']);
    assert.deepEqual(await pub.next(15_000), { ready: true });
  });

  after(async () => {
    await pub?.stop();
    await sub?.stop();
    await front?.stop();
  });

  async function probeStatus(): Promise<ProbeStatus> {
    const st = tb();
    const r = await nsRunAsync(st.plan.clusters[0]!.front.name, BIN, ['ctl', '--socket', sock, 'status']);
    return (JSON.parse(r.stdout) as { control: { probe: ProbeStatus } }).control.probe;
  }

  it('publishes each client’s mean RTT through the WAN: client 1 about 20 ms, client 2 about 80 ms', async () => {
    const st = tb();
    const [c1, c2] = [st.plan.clients[0]!.address, st.plan.clients[1]!.address];
    const expected = new Map([
      [c1, { rtt: 20, tolerance: 6 }],
      [c2, { rtt: 80, tolerance: 10 }],
    ]);
    // Two rounds per client: the DNS asks again every second, and every round is reported.
    const seen = new Map<string, Result[]>();
    const deadline = Date.now() + 60_000;
    while ([...expected.keys()].some((t) => (seen.get(t)?.length ?? 0) < 2)) {
      assert.ok(Date.now() < deadline, `results so far: ${JSON.stringify([...seen])}`);
      const m = (await sub!.next(30_000)) as { type: string; from: string; body: { cluster: string; results: Result[] } };
      assert.equal(m.type, 'rtt_results');
      assert.deepEqual([m.from, m.body.cluster], ['c1', 'c1']);
      for (const r of m.body.results) seen.set(r.target, [...(seen.get(r.target) ?? []), r]);
    }
    assert.deepEqual([...seen.keys()].sort(), [c1, c2].sort(), 'only the requested targets are probed');
    for (const [target, { rtt, tolerance }] of expected) {
      for (const r of seen.get(target)!) {
        console.log(`# ${target}: sent ${r.sent}, received ${r.received}, mean RTT ${String(r.rttMs)} ms (expected ${rtt} ± ${tolerance})`);
        assert.equal(r.sent, 3, JSON.stringify(r));
        assert.equal(r.received, r.sent, JSON.stringify(r));
        assert.ok(r.rttMs !== null && Math.abs(r.rttMs - rtt) <= tolerance, `${target}: mean RTT ${String(r.rttMs)} ms, expected ${rtt} ± ${tolerance}`);
      }
    }
    // The front node's status counts the same work.
    await until(async () => {
      const p = await probeStatus();
      return p.enabled && p.echoesSent >= 12 && p.replies >= 12 && p.reported >= 4;
    }, 'probe counters in status', 15_000);
    assert.equal((await probeStatus()).timeouts, 0);
  });
});
