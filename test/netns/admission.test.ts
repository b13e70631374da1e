/**
 * Admission control end to end (issue 9): three front nodes (one per
 * cluster) are the members of one cluster-wide limit on their `www`
 * service, 60 tokens/s (one token per connection). Their coordinator is
 * elected with etcd leases: one real etcd server in the DNS namespace,
 * reached from the fronts' uplinks; the members talk over CURVE with the
 * testbed's key pairs.
 *
 * Skewed load: one client opens new connections to the three VIPs at
 * 63/s, 18/s and 9/s (70/20/10 of 90/s, 1.5x the limit), open loop;
 * connections over the limit are reset at once. Answered connections are
 * counted by completion time. Steady state (after a warm-up in which the
 * members reserve their rate): the total stays within the limit + 5% and
 * uses at least 90% of it; the members' admission messages per second are
 * reported.
 *
 * Then the coordinator's front node is killed (SIGKILL: no resignation;
 * its lease must expire). Its fail mode is drop, so its VIP admits
 * nothing more. A new coordinator must be elected within the lease TTL,
 * and the admitted rate in every second of the switch stays within the
 * limit + 10%.
 *
 * Bounded: fixed counts at fixed rates, polls with deadlines; etcd is
 * killed and its data directory is in the run directory.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const LIMIT = 60;
const RATES = [63, 18, 9];
const TTL = 3;
const testbed = useTestbed({ clusters: 3, clients: 1, serversPerCluster: 1, delaysMs: { '1:1': 0, '1:2': 0, '1:3': 0 } });

interface Burst {
  tally: Record<string, number>;
  failures: number;
  times: number[];
}

interface AdmissionCluster {
  member: string;
  coordinator: string | null;
  isCoordinator: boolean;
  epoch: number;
  operations: { op: string; allocation: number; used: number; demand: number; silenced: boolean }[];
  control: { sent: number; received: number };
  counts: Record<string, unknown>;
  members: unknown;
}

/** `count` connections at `rate`/s to `vip`, with completion times (ms from the start). */
async function paced(ns: string, vip: string, rate: number, count: number): Promise<Burst> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', `http://${vip}/`, '--count', String(count), '--rate', String(rate), '--times']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Burst;
}

/** Answered connections per whole second since `t0` (ms), over all runs started at t0. */
function perSecond(runs: readonly Burst[], seconds: number): number[] {
  const out = new Array<number>(seconds).fill(0);
  for (const b of runs) {
    for (const t of b.times) {
      const s = Math.floor(t / 1000);
      if (s < seconds) out[s] = (out[s] ?? 0) + 1;
    }
  }
  return out;
}

describe('admission control: three front nodes share a cluster limit, coordinator elected with etcd', () => {
  const fronts: FrontProcess[] = [];
  let etcd: ChildProcess | undefined;

  const admission = async (f: FrontProcess): Promise<AdmissionCluster> => {
    const s = await f.status();
    const a = (s['admission'] as { cluster: AdmissionCluster | null } | undefined)?.cluster;
    assert.ok(a, 'no admission cluster status');
    return a;
  };

  /** Every live member knows the coordinator and is in its session. */
  const joined = async (live: readonly FrontProcess[]): Promise<string> => {
    let coordinator = '';
    let seen = '';
    await until(
      async () => {
        const all = await Promise.all(live.map(admission));
        seen = JSON.stringify(all.map((a) => ({ member: a.member, coordinator: a.coordinator, epoch: a.epoch, election: (a as unknown as { election: unknown }).election, counts: a.counts })));
        const c = all.find((a) => a.isCoordinator);
        if (c === undefined) return false;
        coordinator = c.member;
        return all.every((a) => a.coordinator === c.member && a.epoch === c.epoch && a.epoch !== 0);
      },
      'members joined one coordinator session',
      45_000,
      200,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; members: ${seen}`, { cause: err });
    });
    return coordinator;
  };

  before(async () => {
    const st = testbed();
    const keys = st.keysDir;
    const dns = st.plan.dns;
    const data = join(st.runDir, 'etcd');
    mkdirSync(data, { recursive: true });
    const url = `http://${dns.address}:2379`;
    etcd = spawn('ip', ['netns', 'exec', dns.name, 'etcd', '--name', 'e1', '--data-dir', data, '--listen-client-urls', url, '--advertise-client-urls', url, '--listen-peer-urls', 'http://127.0.0.1:2380', '--initial-advertise-peer-urls', 'http://127.0.0.1:2380', '--initial-cluster', 'e1=http://127.0.0.1:2380', '--log-level', 'error'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let etcdErr = '';
    etcd.stderr?.on('data', (d: Buffer) => {
      etcdErr = (etcdErr + d.toString()).slice(-4000);
    });
    try {
      await until(async () => (await nsRunAsync(dns.name, 'etcdctl', ['--endpoints', url, 'endpoint', 'health'])).code === 0, 'etcd healthy', 30_000, 200);
    } catch (err) {
      throw new Error(`${(err as Error).message}; etcd said: ${etcdErr.slice(-1500)}`, { cause: err });
    }
    const members = st.plan.clusters.map((c, i) => `      - { name: m${i + 1}, endpoint: tcp://${c.uplinkAddress}:7400, publicKey: ${join(keys, `fr${i + 1}.pub`)} }`).join('\n');
    for (const [i, c] of st.plan.clusters.entries()) {
      const k = i + 1;
      const file = writeConfig(
        join(st.runDir, `front-adm${k}.yaml`),
        `cluster: c${k}
uplinkAddress: ${c.uplinkAddress}
adminSocket: ${join(st.runDir, `front-adm${k}.sock`)}
failMode: drop
services:
  - name: www
    vip: ${c.vip}
    port: 80
    method: byrequests
    servers:
${c.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
    checkpoints:
      - { name: admit, kind: admission }
admission:
  services:
    - { service: www, clusterLimit: ${LIMIT} }
  cluster:
    member: m${k}
    listen: tcp://${c.uplinkAddress}:7400
    control: { keyFile: ${join(keys, `fr${k}.key`)} }
    members:
${members}
    coordinator: { etcd: { endpoints: [${url}], leaseTtlSeconds: ${TTL} } }
    isolationSeconds: ${TTL + 3}
    headroomPercent: 5
    reserveChunkPercent: 1
`,
      );
      const f = new FrontProcess(c.front.name, file);
      fronts.push(f);
    }
    await Promise.all(fronts.map((f) => f.waitFor('front node ready')));
    await joined(fronts);
  });

  after(async () => {
    for (const f of fronts) await f.stop();
    etcd?.kill('SIGKILL');
  });

  it('under 70/20/10 load the members admit within the limit +5% and use at least 90% of it', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const seconds = 22;
    if (process.env['SLUICE_DEBUG_IDLE']) {
      await sleep(10_000);
      t.diagnostic(JSON.stringify((await Promise.all(fronts.map(admission))).map((s) => [s.member, s.control, s.counts])));
    }
    const sent0 = (await Promise.all(fronts.map(admission))).reduce((a, s) => a + s.control.sent, 0);
    const started = Date.now();
    const runs = await Promise.all(RATES.map((r, i) => paced(client, st.plan.clusters[i]!.vip, r, r * seconds)));
    const elapsed = (Date.now() - started) / 1000;
    const status = await Promise.all(fronts.map(admission));
    const sent = status.reduce((a, s) => a + s.control.sent, 0) - sent0;
    const bins = perSecond(runs, seconds);
    // Steady state: seconds 8..20 (the members reserve from nothing during the first seconds).
    const steady = bins.slice(8, 20);
    const avg = steady.reduce((a, b) => a + b, 0) / steady.length;
    const perVip = runs.map((b) => b.times.filter((x) => x >= 8000 && x < 20_000).length / 12);
    t.diagnostic(`answered per second: ${bins.join(' ')}; steady ${avg.toFixed(1)}/s of ${LIMIT} (per VIP ${perVip.map((x) => x.toFixed(1)).join(', ')})`);
    t.diagnostic(`admission messages between members: ${(sent / elapsed).toFixed(1)}/s (all three sending); allocations ${status.map((s) => `${s.member} ${s.operations.map((o) => o.allocation).join('/')}`).join(', ')}`);
    if (process.env['SLUICE_DEBUG']) t.diagnostic(JSON.stringify(status));
    assert.ok(avg <= LIMIT * 1.05, `steady ${avg.toFixed(1)}/s > limit + 5%`);
    assert.ok(avg >= LIMIT * 0.9, `steady ${avg.toFixed(1)}/s < 90% of the limit`);
    // The light members get what they ask for (fairness): below their share (20/s).
    assert.ok((perVip[2] ?? 0) >= RATES[2]! * 0.9, `the 10% member got ${perVip[2]}/s of ${RATES[2]}/s`);
  });

  it('killing the coordinator: a new one within the lease TTL, and no second above the limit +10% during the switch', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const coordinator = await joined(fronts);
    const victim = Number(coordinator.slice(1)) - 1;
    // Killed at 6 s, a new coordinator by 9 s at the latest (the lease TTL,
    // asserted): 14 s of load leave at least 5 s after the switch.
    const seconds = 14;
    const started = Date.now();
    const load = Promise.all(RATES.map((r, i) => paced(client, st.plan.clusters[i]!.vip, r, r * seconds)));
    await sleep(6000);
    const survivors = fronts.filter((_, i) => i !== victim);
    const marks = survivors.map((f) => f.lines.length);
    const killedAt = Date.now();
    fronts[victim]!.signal('SIGKILL');
    const elected = await Promise.any(survivors.map((f, i) => f.waitFor('elected admission coordinator', 15_000, marks[i])));
    const electedAfter = Number(elected['time']) - killedAt;
    const runs = await load;
    const bins = perSecond(runs, seconds);
    t.diagnostic(`coordinator m${victim + 1} killed at ${((killedAt - started) / 1000).toFixed(1)} s; new coordinator after ${electedAfter} ms (lease TTL ${TTL} s)`);
    t.diagnostic(`answered per second: ${bins.join(' ')} (per VIP: ${runs.map((r) => perSecond([r], seconds).slice(0, 8).join(' ')).join(' | ')})`);
    // leaseTtlSeconds is the promised bound: the lease is granted 1 s shorter, so etcd's 500 ms
    // revoke loop and the next campaigner's watch fit inside it.
    assert.ok(electedAfter <= TTL * 1000, `new coordinator after ${electedAfter} ms > lease TTL (${TTL} s)`);
    // The switch: from one second before the kill to the end (the load's first seconds, when
    // the members' allocations move after the idle pause between the tests, are reported above).
    const killSecond = Math.floor((killedAt - started) / 1000);
    for (const [s, n] of bins.entries()) if (s >= killSecond - 1) assert.ok(n <= LIMIT * 1.1, `second ${s}: ${n} answered > limit + 10%`);
    const now = await joined(survivors);
    assert.notEqual(now, coordinator);
    fronts.splice(victim, 1);
  });
});
