/**
 * A counter condition steering heavy sources to cluster 2 (issue 7), on
 * the testbed with two clusters: real clients, NFQUEUE, kernel NAT, nginx.
 *
 * Cluster 1's front node counts new connections per source (`rate`, a
 * counter rule) and steers a source whose rate is above 50/s to its
 * overflow cluster c2 (`heavy`, a counter rule with a counter condition and
 * action {steer: c2}); cluster 2's front node serves them on its own
 * servers. A client opening 100 connections/s is answered by cluster 2's
 * servers once its rate passes the threshold; a client at 10/s only ever
 * by cluster 1's. The front node's /metrics (curl inside its namespace)
 * count the steered and admitted connections.
 *
 * Bounded: fixed request counts at fixed rates (open loop); the assertions
 * are on counts and ratios only.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { parsePromText, type PromText } from '../helpers/prom_text.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const METRICS_PORT = 9180;
const testbed = useTestbed({ clusters: 2, clients: 2, serversPerCluster: 2, delaysMs: { '1:1': 0, '1:2': 0, '2:1': 0, '2:2': 0 } });

interface Burst {
  tally: Record<string, number>;
  failures: number;
  sequence: string[];
}

/** `count` HTTP requests at `rate` per second, each on a new connection; server names in start order. */
async function paced(ns: string, vip: string, rate: number, count: number): Promise<Burst> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', `http://${vip}/`, '--count', String(count), '--rate', String(rate), '--sequence']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Burst;
}

async function scrape(ns: string): Promise<PromText> {
  const r = await nsRunAsync(ns, 'curl', ['-s', '-m', '5', '-w', '\n%{http_code}', `http://127.0.0.1:${METRICS_PORT}/metrics`]);
  const i = r.stdout.lastIndexOf('\n');
  assert.equal(r.stdout.slice(i + 1), '200', `GET /metrics in ${ns}: ${r.stderr}`);
  return parsePromText(`${r.stdout.slice(0, i)}\n`);
}

/** Cluster of a server name from the testbed page ("s2a" -> 2). */
const clusterOf = (name: string): number => Number(/^s(\d+)/.exec(name)?.[1] ?? 0);

describe('checkpoints: a counter condition steers heavy sources to cluster 2', () => {
  const fronts: FrontProcess[] = [];
  let front1 = '';

  before(async () => {
    const st = testbed();
    const [k1, k2] = st.plan.clusters;
    assert.ok(k1 && k2);
    front1 = k1.front.name;
    const service = (k: typeof k1): string => `services:
  - name: www
    vip: ${k.vip}
    port: 80
    method: byrequests
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
`;
    const f2 = new FrontProcess(k2.front.name, writeConfig(join(st.runDir, 'front-steer-c2.yaml'), `cluster: c2\nuplinkAddress: ${k2.uplinkAddress}\n${service(k2)}`));
    fronts.push(f2);
    await f2.waitFor('front node ready');
    const f1 = new FrontProcess(
      k1.front.name,
      writeConfig(
        join(st.runDir, 'front-steer-c1.yaml'),
        `cluster: c1
uplinkAddress: ${k1.uplinkAddress}
http: { listen: 127.0.0.1:${METRICS_PORT} }
${service(k1)}overflow:
  - { cluster: c2, vip: ${k2.vip}, freeCapacity: 100 }
checkpoints:
  - { name: rate, kind: counter, criterion: source }
  - { name: heavy, kind: counter, criterion: source, when: { counter: { name: rate, measure: rate, above: 50 } }, action: { steer: c2 } }
`,
      ),
    );
    fronts.push(f1);
    await f1.waitFor('front node ready');
  });

  after(async () => {
    for (const f of fronts.reverse()) await f.stop();
  });

  it('100/s from one client: most connections after the threshold answered by cluster 2; 10/s from another: cluster 1 only; metrics count them', async () => {
    const st = testbed();
    const vip = st.plan.clusters[0]!.vip;
    const before = await scrape(front1);
    const HEAVY = 400; // 4 s at 100/s
    const LIGHT = 40; // 4 s at 10/s
    const [heavy, light] = await Promise.all([paced(st.plan.clients[0]!.name, vip, 100, HEAVY), paced(st.plan.clients[1]!.name, vip, 10, LIGHT)]);
    const summary = JSON.stringify({ heavy: { tally: heavy.tally, failures: heavy.failures }, light: { tally: light.tally, failures: light.failures } });
    assert.equal(heavy.failures + light.failures, 0, summary);

    // The light client stays under the threshold: cluster 1 only.
    assert.equal(light.sequence.filter((n) => clusterOf(n) === 1).length, LIGHT, summary);

    // The heavy client: its rate passes 50/s within its first ~50
    // connections; of those started after its first 100 (its first second),
    // at least 90% are answered by cluster 2's servers.
    const late = heavy.sequence.slice(100);
    const lateToC2 = late.filter((n) => clusterOf(n) === 2).length;
    assert.ok(lateToC2 >= 0.9 * late.length, `after the threshold ${lateToC2}/${late.length} answered by cluster 2: ${summary}`);
    // Before the threshold it was cluster 1's (the first connections of a fresh key read rate 0).
    assert.ok(heavy.sequence.slice(0, 20).every((n) => clusterOf(n) === 1), `first 20: ${heavy.sequence.slice(0, 20).join(' ')}`);
    const heavyToC2 = heavy.sequence.filter((n) => clusterOf(n) === 2).length;
    assert.ok(heavyToC2 >= 0.7 * HEAVY, `${heavyToC2}/${HEAVY} of the heavy client's connections answered by cluster 2: ${summary}`);

    // Cluster 1's /metrics: every connection passed `rate`; `heavy` steered
    // at least those cluster 2 answered (and no more than the heavy client made).
    const p = await scrape(front1);
    const grew = (name: string, labels: Record<string, string>): number => p.sum(name, labels) - before.sum(name, labels);
    const rate = { checkpoint: 'rate', level: 'cluster' };
    const heavyCp = { checkpoint: 'heavy', level: 'cluster' };
    assert.ok(grew('sluice_front_checkpoint_matched_total', rate) >= HEAVY + LIGHT, 'rate saw every new connection');
    assert.ok(grew('sluice_front_checkpoint_admitted_total', { ...rate, queued: 'false' }) >= HEAVY + LIGHT, 'rate admitted every new connection');
    const steered = grew('sluice_front_checkpoint_steered_total', { ...heavyCp, cluster: 'c2' });
    assert.ok(steered >= heavyToC2 && steered <= HEAVY, `steered ${steered}, cluster 2 answered ${heavyToC2}`);
    assert.ok(grew('sluice_front_shaping_events_total', { event: 'steered' }) >= heavyToC2);
    assert.equal(p.sum('sluice_front_checkpoint_rejected_total'), 0);
    assert.ok(p.sum('sluice_front_checkpoint_table_entries', rate) >= 1);
  });
});
