/**
 * Distributed throttling end to end (issue 8): two front nodes, one per
 * cluster, each with a `gatekeeper` checkpoint on its `www` service, and one
 * `sluice master` process in the DNS namespace (on the WAN side, reached
 * from both front nodes' uplinks), CURVE on both sockets with the testbed's
 * key pairs. The domain's rule is 20 connections/s per client, burst 2.
 *
 * One client opens new connections to both clusters' VIPs, 30/s to each
 * (60/s in all), for 10 s; held SYNs wait at most 800 ms, the rest are
 * reset. Answered requests are counted by completion time over the steady
 * 6 s window [3 s, 9 s): the client gets 20/s ±10% in all, although each
 * front node alone would let 20/s through (40/s without coordination).
 * The master's ops HTTP server (GET /metrics, /status on the DNS
 * namespace's loopback) shows the same traffic from its side.
 *
 * Then: the master is restarted (its memory store starts empty); the
 * gatekeepers reconnect and resync, and the next run is held to 20/s
 * again. Last, the counter-check that the coordination is what holds the
 * rate: cluster 2's checkpoint is reloaded onto its own domain `www2` (its
 * gatekeeper is replaced on the fly); the same load is then answered at
 * about 40/s.
 *
 * Bounded: fixed counts at fixed rates (open loop), polls with deadlines.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { writeKeyPair } from '../../src/control/keys.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { parsePromText, type PromText } from '../helpers/prom_text.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const METRICS_PORT = 9181;
const MASTER_METRICS_PORT = 9183;
const RATE = 20;
const testbed = useTestbed({ clusters: 2, clients: 1, serversPerCluster: 1, delaysMs: { '1:1': 0, '1:2': 0 } });

interface Burst {
  tally: Record<string, number>;
  failures: number;
  times: number[];
}

async function get(ns: string, port: number, path: string): Promise<string> {
  const r = await nsRunAsync(ns, 'curl', ['-s', '-m', '5', '-w', '\n%{http_code}', `http://127.0.0.1:${port}${path}`]);
  const i = r.stdout.lastIndexOf('\n');
  assert.equal(r.stdout.slice(i + 1), '200', `GET ${path} in ${ns}: ${r.stderr}`);
  return `${r.stdout.slice(0, i)}\n`;
}

async function scrape(ns: string, port = METRICS_PORT): Promise<PromText> {
  return parsePromText(await get(ns, port, '/metrics'));
}

/** `count` requests at `rate`/s to `vip`, each on a new connection, with completion times. */
async function paced(ns: string, vip: string, rate: number, count: number): Promise<Burst> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', `http://${vip}/`, '--count', String(count), '--rate', String(rate), '--times']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Burst;
}

/** Requests per second sent to each VIP, and for how long. */
const OFFERED = 30;
const LOAD_SECONDS = 8;
/**
 * OFFERED/s to each VIP for LOAD_SECONDS; answered per second over [3 s,
 * 7 s), per VIP and in all: after the burst and the first delays, and
 * before the last SYNs sent (a delayed SYN completes at most 800 ms late,
 * the queue's maxDelayMs).
 */
async function load(client: string, vips: readonly string[]): Promise<{ total: number; per: number[]; summary: string }> {
  const runs = await Promise.all(vips.map((v) => paced(client, v, OFFERED, OFFERED * LOAD_SECONDS)));
  const per = runs.map((b) => b.times.filter((t) => t >= 3000 && t < 7000).length / 4);
  const total = per.reduce((a, b) => a + b, 0);
  return { total, per, summary: JSON.stringify(runs.map((b) => ({ tally: b.tally, failures: b.failures, answered: b.times.length }))) };
}

describe('distributed throttling: two front nodes, one master', () => {
  const fronts: FrontProcess[] = [];
  let master: FrontProcess | undefined;
  let masterFile = '';
  const frontFiles: string[] = [];
  let frontYaml: (k: number, domain: string) => string = () => '';

  const startMaster = async (): Promise<void> => {
    const st = testbed();
    master = new FrontProcess(st.plan.dns.name, masterFile, 'master');
    await master.waitFor('throttling master ready');
  };

  /** Every front node's gatekeeper has its master connected and its resync answered. */
  const synced = async (): Promise<void> => {
    const st = testbed();
    for (let i = 0; i < 100; i++) {
      const all = await Promise.all(st.plan.clusters.map((k) => scrape(k.front.name)));
      if (all.every((p) => p.sum('sluice_front_throttle_master_connected', { active: 'true' }) === 1)) {
        const status = await Promise.all(fronts.map((f) => f.status()));
        const done = status.every((s) => ((s['throttle'] as { domains?: { resyncDone: boolean }[] } | undefined)?.domains ?? []).every((d) => d.resyncDone));
        if (done) return;
      }
      await sleep(100);
    }
    assert.fail('gatekeepers did not connect and resync within 10 s');
  };

  before(async () => {
    const st = testbed();
    const keys = st.keysDir;
    const mk = writeKeyPair(keys, 'master1', { force: true });
    const m = st.plan.dns.address;
    masterFile = writeConfig(
      join(st.runDir, 'master.yaml'),
      `name: master1
adminSocket: ${join(st.runDir, 'master.sock')}
control: { keyFile: ${mk.keyFile}, allow: [${join(keys, 'fr1.pub')}, ${join(keys, 'fr2.pub')}] }
accounting: { listen: tcp://${m}:7201 }
publish: { listen: tcp://${m}:7202 }
store: { kind: memory }
http: { listen: 127.0.0.1:${MASTER_METRICS_PORT} }
domains:
  - { name: www, requests: ${RATE}, periodSeconds: 1, burst: 2 }
  - { name: www2, requests: ${RATE}, periodSeconds: 1, burst: 2 }
`,
    );
    frontYaml = (k, domain) => {
      const c = st.plan.clusters[k - 1]!;
      return `cluster: c${k}
uplinkAddress: ${c.uplinkAddress}
adminSocket: ${join(st.runDir, `front-th${k}.sock`)}
http: { listen: 127.0.0.1:${METRICS_PORT} }
services:
  - name: www
    vip: ${c.vip}
    port: 80
    method: byrequests
    servers:
${c.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
    checkpoints:
      - { name: site-rate, kind: gatekeeper, domain: ${domain}, queue: { maxLength: 1024, maxDelayMs: 800 } }
throttle:
  name: fr${k}
  control: { keyFile: ${join(keys, `fr${k}.key`)} }
  masters: [{ accounting: tcp://${m}:7201, control: tcp://${m}:7202, publicKey: ${mk.pubFile} }]
  resyncRetryMs: 200
`;
    };
    await startMaster();
    for (const k of [1, 2]) {
      const file = writeConfig(join(st.runDir, `front-th${k}.yaml`), frontYaml(k, 'www'));
      frontFiles.push(file);
      const f = new FrontProcess(st.plan.clusters[k - 1]!.front.name, file);
      fronts.push(f);
      await f.waitFor('front node ready');
    }
    await synced();
  });

  after(async () => {
    for (const f of fronts.reverse()) await f.stop();
    await master?.stop();
  });

  it('a client spreading connections over both clusters is held to the domain\'s rate (20/s ±10%) in all', async (t) => {
    const st = testbed();
    const before = await Promise.all(st.plan.clusters.map((k) => scrape(k.front.name)));
    const masterBefore = await scrape(st.plan.dns.name, MASTER_METRICS_PORT);
    const r = await load(st.plan.clients[0]!.name, st.plan.clusters.map((k) => k.vip));
    t.diagnostic(`answered ${r.total.toFixed(1)}/s (per VIP ${r.per.map((x) => x.toFixed(1)).join(', ')})`);
    assert.ok(r.total >= RATE * 0.9 && r.total <= RATE * 1.1, `answered ${r.total.toFixed(1)}/s (per VIP ${r.per.map((x) => x.toFixed(1)).join(', ')}): ${r.summary}`);
    // The split between the fronts is not asserted: one identifier has one
    // delay at the master, and whichever front hears a DELAY_UNTIL first
    // holds more (seen from 10/10 to 20/0 per s); the limit is on the sum.
    // That both fronts decided this client's SYNs is checked below (each
    // delayed and rejected some, and sent its accounting).
    // Each front node delayed and rejected, and sent its accounting to the master.
    const after = await Promise.all(st.plan.clusters.map((k) => scrape(k.front.name)));
    after.forEach((p, i) => {
      const grew = (name: string, labels: Record<string, string>): number => p.sum(name, labels) - before[i]!.sum(name, labels);
      assert.ok(grew('sluice_front_throttle_requests_total', { domain: 'www', outcome: 'delayed' }) > 0, `front ${i + 1} delayed none`);
      assert.ok(grew('sluice_front_throttle_requests_total', { domain: 'www', outcome: 'rejected' }) > 0, `front ${i + 1} rejected none`);
      assert.ok(grew('sluice_front_throttle_accounting_total', { result: 'sent' }) >= OFFERED * LOAD_SECONDS - 10, `front ${i + 1} accounting sent`);
      assert.equal(p.sum('sluice_front_throttle_accounting_total', { result: 'dropped' }), 0);
      assert.ok(grew('sluice_front_checkpoint_admitted_total', { checkpoint: 'site-rate', queued: 'true' }) > 0);
    });
    // The master's own view over its ops HTTP server (sluice master, http.listen):
    // every accounting message the fronts sent arrived and was charged or counted.
    const m = await scrape(st.plan.dns.name, MASTER_METRICS_PORT);
    const grew = (name: string, labels: Record<string, string> = {}): number => m.sum(name, labels) - masterBefore.sum(name, labels);
    const sent = after.reduce((a, p, i) => a + p.sum('sluice_front_throttle_accounting_total', { result: 'sent' }) - before[i]!.sum('sluice_front_throttle_accounting_total', { result: 'sent' }), 0);
    t.diagnostic(`master: received ${grew('sluice_master_accounting_received_total')} of ${sent} sent; delays ${grew('sluice_master_delays_total', { domain: 'www', source: 'charge' })}`);
    assert.ok(grew('sluice_master_requests_total', { domain: 'www', outcome: 'accepted' }) > 0, 'master counted accepted');
    assert.ok(grew('sluice_master_requests_total', { domain: 'www', outcome: 'delayed' }) > 0, 'master counted delayed');
    assert.ok(grew('sluice_master_requests_total', { domain: 'www', outcome: 'rejected' }) > 0, 'master counted rejected');
    assert.ok(grew('sluice_master_delays_total', { domain: 'www', source: 'charge' }) > 0, 'master published delays');
    assert.equal(m.sum('sluice_master_accounting_refused_total'), 0);
    assert.equal(m.sum('sluice_master_publish_total', { result: 'dropped' }), 0);
    assert.equal(m.sum('sluice_master_info', { name: 'master1', store: 'memory' }), 1);
    const status = JSON.parse(await get(st.plan.dns.name, MASTER_METRICS_PORT, '/status')) as { name: string; domains: { name: string; accepted: number }[] };
    assert.equal(status.name, 'master1');
    assert.deepEqual(status.domains.map((d) => d.name), ['www', 'www2']);
    // Read after the scrape: a late accounting message can only add.
    assert.ok(status.domains[0]!.accepted >= m.sum('sluice_master_requests_total', { domain: 'www', outcome: 'accepted' }));
  });

  it('after a master restart the gatekeepers resync and the rate is held again', async (t) => {
    const st = testbed();
    const sessions = async (): Promise<number[]> => (await Promise.all(st.plan.clusters.map((k) => scrape(k.front.name)))).map((p) => p.sum('sluice_front_throttle_events_total', { event: 'resync_sessions' }));
    const before = await sessions();
    await master?.stop();
    await startMaster();
    // Each gatekeeper noticed: a new resync session (its master reconnected), then answered.
    await until(async () => (await sessions()).every((n, i) => n > (before[i] ?? 0)), 'new resync sessions after the master restart', 15_000, 100);
    await synced();
    const r = await load(st.plan.clients[0]!.name, st.plan.clusters.map((k) => k.vip));
    t.diagnostic(`answered ${r.total.toFixed(1)}/s (per VIP ${r.per.map((x) => x.toFixed(1)).join(', ')})`);
    assert.ok(r.total >= RATE * 0.9 && r.total <= RATE * 1.1, `answered ${r.total.toFixed(1)}/s after the restart: ${r.summary}`);
  });

  it('counter-check: with a domain per front node (no coordination) the same client gets about twice the rate', async (t) => {
    const st = testbed();
    const f2 = fronts[1]!;
    writeConfig(frontFiles[1]!, frontYaml(2, 'www2'));
    const from = f2.lines.length;
    f2.signal('SIGHUP');
    await f2.waitFor('gatekeeper started', 10_000, from);
    await synced();
    const r = await load(st.plan.clients[0]!.name, st.plan.clusters.map((k) => k.vip));
    t.diagnostic(`answered ${r.total.toFixed(1)}/s (per VIP ${r.per.map((x) => x.toFixed(1)).join(', ')})`);
    assert.ok(r.total >= 2 * RATE * 0.85, `answered ${r.total.toFixed(1)}/s with two domains: ${r.summary}`);
    const p = await scrape(st.plan.clusters[1]!.front.name);
    assert.ok(p.sum('sluice_front_throttle_requests_total', { domain: 'www2' }) > 0, 'cluster 2 now decides in www2');
  });
});
