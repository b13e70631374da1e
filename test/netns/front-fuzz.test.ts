/**
 * No loops (issue 20, acceptance 4): 200,000 mutated and unexpected packets
 * at a VIP from a client namespace (test/fixtures/vip-fuzz.ts: FIN, RST,
 * ACK and odd flag combinations without a flow, other ports and protocols,
 * fragments, IP options, ICMP errors quoting the VIP, mutated SYNs). A
 * packet the front node does not DNAT would be routed back out of its
 * uplink, and the WAN routes the VIP straight back: a loop until the TTL
 * runs out. The packets leaving the front node's uplink during a run are
 * counted by the kernel (the interface's tx counter, one clock that sees
 * every packet) and must stay within 1.1x the packets sent, both while the
 * daemon runs and after it was killed (the rule-level guard alone). The
 * daemon lives, its RSS stays bounded, and curl keeps getting answers.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const testbed = useTestbed({ clusters: 1, clients: 1, serversPerCluster: 2 });
const FUZZ = fileURLToPath(new URL('../fixtures/vip-fuzz.ts', import.meta.url));
const VIP = '198.19.1.1';
const PACKETS = 200_000;
const AMPLIFICATION_LIMIT = 1.1;
// Growth of the daemon's resident memory over a run that we call bounded:
// the connection table and every pool are allocated at start, so a run
// should add little; a leak per packet would add far more (200k packets).
const RSS_GROWTH_LIMIT_KIB = 64 * 1024;

// Capacity far above the fuzz's 28,571 mutated SYNs: each one the engine
// decides becomes an active record until it idles out, so with 1,000 per
// server the fuzz alone filled both servers and a curl's SYNs met
// `noTarget` for seconds (1 of 5 curls failed in one CI run on a busy
// machine). This test is about loops; a spoofed SYN flood counting against
// capacity is issue 22's (spoofed half-open connections must not count).
const CONFIG = `cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: ${VIP}
    port: 80
    servers:
      - { name: s1a, address: 198.18.201.11, capacity: 100000 }
      - { name: s1b, address: 198.18.201.12, capacity: 100000 }
`;

interface FuzzRun {
  sent: number;
  errors: number;
  byKind: Record<string, number>;
  uplinkTx: number;
  curls: number;
  curlFailures: number;
}

describe('sluice front: no packet to a VIP loops (fuzz)', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';
  let client = '';
  let sources: string[] = [];

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0];
    const c = st.plan.clients[0];
    assert.ok(k && c);
    frontNs = k.front.name;
    client = c.name;
    sources = [c.address, ...c.extraAddresses];
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-fuzz.yaml'), CONFIG));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  function uplinkTx(): number {
    return Number(nsRun(frontNs, 'cat', ['/sys/class/net/wan0/statistics/tx_packets']).trim());
  }

  /** Waits until the uplink has been quiet for a while (looping packets live until their TTL runs out). */
  async function settledTx(): Promise<number> {
    let last = uplinkTx();
    for (let i = 0; i < 40; i++) {
      await sleep(250);
      const now = uplinkTx();
      if (now === last) return now;
      last = now;
    }
    return last;
  }

  function rssKiB(pid: number): number {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
    return Number(m?.[1] ?? NaN);
  }

  /** One fuzz run with curls alongside; returns the kernel's and the clients' figures. */
  async function fuzz(seed: number): Promise<FuzzRun> {
    const tx0 = await settledTx();
    // An object, not a let: the loop reads what the fuzz run's end writes.
    const run = { stop: false };
    let curls = 0;
    let curlFailures = 0;
    const curling = (async () => {
      // Bounded: at most 200 requests, ending with the fuzz run.
      for (let i = 0; i < 200 && !run.stop; i++) {
        const r = await nsRunAsync(client, 'curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--connect-timeout', '5', '-m', '10', `http://${VIP}/`]);
        curls++;
        if (r.code !== 0 || r.stdout !== '200') curlFailures++;
        await sleep(100);
      }
    })();
    const r = await nsRunAsync(client, process.execPath, [FUZZ, VIP, '80', String(PACKETS), String(seed), '120', ...sources]);
    run.stop = true;
    await curling;
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { sent: number; errors: number; byKind: Record<string, number> };
    const tx1 = await settledTx();
    return { ...out, uplinkTx: tx1 - tx0, curls, curlFailures };
  }

  it(`daemon running: ${String(PACKETS)} packets, uplink at most ${String(AMPLIFICATION_LIMIT)}x, daemon alive with bounded RSS, curl answered`, async (t) => {
    const pid = front!.child.pid;
    assert.ok(pid !== undefined);
    const rss0 = rssKiB(pid);
    const run = await fuzz(1);
    const rss1 = rssKiB(pid);
    const status = await front!.status();
    const counters = status['counters'] as Record<string, number>;
    t.diagnostic(`sent ${String(run.sent)} (${JSON.stringify(run.byKind)}), uplink tx ${String(run.uplinkTx)} (${(run.uplinkTx / run.sent).toFixed(3)}x), curls ${String(run.curls)} failed ${String(run.curlFailures)}, RSS ${String(rss0)} -> ${String(rss1)} KiB`);
    t.diagnostic(`daemon counters: ${JSON.stringify(counters)}; rules: ${JSON.stringify(status['rules'])}`);
    assert.ok(run.sent >= PACKETS, `sent only ${String(run.sent)} (errors ${String(run.errors)})`);
    assert.ok(run.uplinkTx <= AMPLIFICATION_LIMIT * run.sent, `uplink carried ${String(run.uplinkTx)} packets for ${String(run.sent)} sent`);
    assert.ok(run.curls > 0 && run.curlFailures === 0, `${String(run.curlFailures)} of ${String(run.curls)} curls failed`);
    assert.ok(rss1 - rss0 <= RSS_GROWTH_LIMIT_KIB, `RSS grew from ${String(rss0)} to ${String(rss1)} KiB`);
    assert.equal(front!.child.exitCode, null, 'the daemon lives');
  });

  it(`daemon killed: the kernel's guard alone keeps the uplink at most ${String(AMPLIFICATION_LIMIT)}x`, async (t) => {
    const exited = new Promise((r) => front!.child.once('exit', r));
    front!.signal('SIGKILL');
    await exited;
    // The rules stay after a crash; the fail-open queue lets packets through unqueued.
    await until(() => /SLUICE_QUEUE/.test(nsRun(frontNs, 'iptables', ['-t', 'mangle', '-S'])), 'rules still in place', 5000);
    const run = await fuzz(2);
    t.diagnostic(`sent ${String(run.sent)}, uplink tx ${String(run.uplinkTx)} (${(run.uplinkTx / run.sent).toFixed(3)}x), curls ${String(run.curls)} failed ${String(run.curlFailures)}`);
    assert.ok(run.sent >= PACKETS, `sent only ${String(run.sent)} (errors ${String(run.errors)})`);
    assert.ok(run.uplinkTx <= AMPLIFICATION_LIMIT * run.sent, `uplink carried ${String(run.uplinkTx)} packets for ${String(run.sent)} sent`);
    assert.ok(run.curls > 0 && run.curlFailures === 0, `${String(run.curlFailures)} of ${String(run.curls)} curls failed (the fallback spread carries new connections)`);
  });
});
