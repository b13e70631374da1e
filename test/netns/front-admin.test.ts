/**
 * `sluice front` administration and policies on real traffic: drain under
 * load through the admin socket, byrequests 70/30, and overflow to other
 * clusters in proportion to their free capacity.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const testbed = useTestbed({ clusters: 3, clients: 1, blobMiB: 20, delaysMs: { '1:1': 0, '1:2': 0, '1:3': 0 } });

function service(cluster: number, method: string, servers: { name: string; cap?: number; weight?: number }[]): string {
  return `  - name: www
    vip: 198.19.${cluster}.1
    port: 80
    method: ${method}
    servers:
${servers.map((s, i) => `      - { name: ${s.name}, address: 198.18.${200 + cluster}.${11 + i}${s.cap !== undefined ? `, capacity: ${s.cap}` : ''}${s.weight !== undefined ? `, weight: ${s.weight}` : ''} }`).join('\n')}
`;
}

function config(cluster: number, socket: string, services: string, overflow = ''): string {
  return `cluster: c${cluster}\nuplinkAddress: 198.18.${100 + cluster}.2\nadminSocket: ${socket}\nservices:\n${services}${overflow}`;
}

async function burst(ns: string, vip: string, count: number, concurrency: number): Promise<{ tally: Record<string, number>; failures: number; sequence: string[] }> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', `http://${vip}/`, '--count', String(count), '--concurrency', String(concurrency), '--sequence']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { tally: Record<string, number>; failures: number; sequence: string[] };
}

/**
 * A download the test holds open: its output is not read until `release()`,
 * so curl blocks on a full pipe, the server's window fills, and the
 * connection stays established however slow the machine is (20 MiB never
 * fits in the pipe and the socket buffers). Then it runs to the end.
 */
function heldDownload(ns: string, url: string): { done: Promise<{ code: number; sha1: string; bytes: number }>; release: () => void } {
  // -m bounds the whole run, held time included; nginx gives up on a client
  // that reads nothing for 60 s (send_timeout), far longer than any hold here.
  const dl = spawn('ip', ['netns', 'exec', ns, 'curl', '-s', '-m', '120', url], { stdio: ['ignore', 'pipe', 'ignore'] });
  const hash = createHash('sha1');
  let bytes = 0;
  const done = new Promise<{ code: number; sha1: string; bytes: number }>((resolve) => dl.on('close', (code) => { resolve({ code: code ?? -1, sha1: hash.digest('hex'), bytes }); }));
  return {
    done,
    release: () => {
      dl.stdout.on('data', (d: Buffer) => {
        bytes += d.length;
        hash.update(d);
      });
    },
  };
}

async function ctl(ns: string, socket: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return nsRunAsync(ns, BIN, ['ctl', '--socket', socket, ...args]);
}

async function status(ns: string, socket: string): Promise<FrontStatus> {
  return JSON.parse((await ctl(ns, socket, 'status')).stdout) as FrontStatus;
}

/** Connections the daemon's records hold open over the first service's servers. */
function activeTotal(st: FrontStatus): number {
  return st.services[0]!.servers.reduce((n, s) => n + s.active, 0);
}

/** Polls the daemon's status until its records hold `n` open connections. */
async function untilActive(ns: string, socket: string, n: number, what: string): Promise<void> {
  let last: FrontStatus | undefined;
  await until(async () => activeTotal((last = await status(ns, socket))) === n, what, 20_000).catch((e: unknown) => {
    throw new Error(`${String(e)}; last status: ${JSON.stringify(last?.services[0])}`);
  });
}

describe('front node policies and administration on real traffic', () => {
  const fronts: FrontProcess[] = [];
  after(async () => {
    for (const f of fronts) await f.stop();
  });
  async function startFront(cluster: number, yaml: string): Promise<{ front: FrontProcess; socket: string; ns: string }> {
    const st = testbed();
    const socket = join(st.runDir, `front-c${cluster}.sock`);
    const ns = st.plan.clusters[cluster - 1]!.front.name;
    const file = writeConfig(join(st.runDir, `front-c${cluster}.yaml`), yaml.replace('SOCKET', socket));
    // A fresh node: ctl changes an earlier test made are kept beside the config (state file).
    rmSync(`${file}.state.json`, { force: true });
    const front = new FrontProcess(ns, file);
    fronts.push(front);
    await front.waitFor('front node ready');
    return { front, socket, ns };
  }

  it('byrequests 70/30 on real traffic: the seed schedule, 70 and 30 of 100', async (t) => {
    const st = testbed();
    const { front } = await startFront(1, config(1, 'SOCKET', service(1, 'byrequests', [{ name: 's1a', weight: 70 }, { name: 's1b', weight: 30 }])));
    t.after(() => front.stop());
    const r = await burst(st.plan.clients[0]!.name, '198.19.1.1', 100, 1);
    assert.equal(r.failures, 0);
    const short = r.sequence.slice(0, 10).map((n) => (n === 's1a' ? 'a' : 'b'));
    assert.equal(short.join(' '), 'a b a a a b a a b a');
    assert.deepEqual(r.tally, { s1a: 70, s1b: 30 });
  });

  it('drain under load: no new connections to the server, its downloads finish intact', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const { front, socket, ns } = await startFront(1, config(1, 'SOCKET', service(1, 'capacity', [{ name: 's1a', cap: 1000 }, { name: 's1b', cap: 2000 }, { name: 's1c', cap: 3000 }])));
    t.after(() => front.stop());
    // Six downloads, held open (see heldDownload): capacity 1:2:3 gives s1b
    // two of them. None can finish while the drain is judged: with running
    // downloads a 300-connection burst on a busy machine outlasted one, and
    // "its connections are still there" read 1.
    const dls = Array.from({ length: 6 }, () => heldDownload(client, 'http://198.19.1.1/blob.bin'));
    await untilActive(ns, socket, 6, 'six downloads established');
    const before = await status(ns, socket);
    const s1bActive = before.services[0]!.servers.find((s) => s.name === 's1b')!.active;
    assert.ok(s1bActive >= 1, `s1b carries downloads: ${JSON.stringify(before.services[0])}`);

    const drained = await ctl(ns, socket, 'drain', 'www', 's1b');
    assert.equal(drained.code, 0, drained.stderr);
    const r = await burst(client, '198.19.1.1', 300, 16);
    assert.equal(r.failures, 0);
    assert.equal(r.tally['s1b'], undefined, `no new connection to the drained server: ${JSON.stringify(r.tally)}`);
    const during = await status(ns, socket);
    const s1b = during.services[0]!.servers.find((s) => s.name === 's1b')!;
    assert.equal(s1b.state, 'drain');
    assert.equal(s1b.active, s1bActive, 'its established connections are still there');

    for (const d of dls) d.release();
    for (const d of dls) {
      const res = await d.done;
      assert.equal(res.code, 0);
      assert.equal(res.bytes, 20 << 20);
      assert.equal(res.sha1, st.blobSha1);
    }
    // A bad admin request is refused and the daemon goes on.
    const bad = await ctl(ns, socket, 'weight', 'www', 'nosuch', '3');
    assert.equal(bad.code, 1);
    assert.match(nsRun(client, 'curl', ['-s', '-m', '5', 'http://198.19.1.1/']), /^server s1[ac] /);
  });

  it('SIGHUP: a bad config is refused and the running one stays; a good one takes effect', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const good = config(1, 'SOCKET', service(1, 'byrequests', [{ name: 's1a' }, { name: 's1b' }]));
    const { front } = await startFront(1, good);
    t.after(() => front.stop());
    const file = join(st.runDir, 'front-c1.yaml');
    writeConfig(file, 'cluster: c1\nuplinkAddress: 198.18.101\nservices: []\n');
    const from = front.lines.length;
    front.signal('SIGHUP');
    const refused = await front.waitFor('reload refused: the running configuration stays', 10_000, from);
    assert.match(String(refused['err']), /uplinkAddress: expected an IPv4 address/);
    assert.match(String(refused['err']), /services: configure at least one virtual service/);
    const r1 = await burst(client, '198.19.1.1', 20, 2);
    assert.deepEqual(r1.tally, { s1a: 10, s1b: 10 }, 'still serving with the running config');

    // A good config that drains s1a takes effect.
    writeConfig(file, config(1, join(st.runDir, 'front-c1.sock'), service(1, 'byrequests', [{ name: 's1a' }, { name: 's1b' }])).replace('198.18.201.11 }', '198.18.201.11, state: drain }'));
    const from2 = front.lines.length;
    front.signal('SIGHUP');
    await front.waitFor('configuration reloaded', 10_000, from2);
    const r2 = await burst(client, '198.19.1.1', 20, 2);
    assert.deepEqual(r2.tally, { s1b: 20 });

    // A queue number change needs a restart: it is named, and the rules stay
    // on the queue the daemon is bound to (else every SYN would go to the
    // fail mode); the rest of the file (s1a active again) applies.
    writeConfig(file, `queue: 7\n${config(1, join(st.runDir, 'front-c1.sock'), service(1, 'byrequests', [{ name: 's1a' }, { name: 's1b' }]))}`);
    const from3 = front.lines.length;
    front.signal('SIGHUP');
    const warned = await front.waitFor('these changes need a restart and were not applied', 10_000, from3);
    assert.deepEqual(warned['keys'], ['queue']);
    await front.waitFor('configuration reloaded', 10_000, from3);
    const rules = nsRun(st.plan.clusters[0]!.front.name, 'iptables', ['-t', 'mangle', '-S', 'SLUICE_QUEUE']);
    assert.match(rules, /--queue-num 0\b/);
    assert.doesNotMatch(rules, /--queue-num 7\b/);
    const r3 = await burst(client, '198.19.1.1', 20, 2);
    assert.deepEqual(r3.tally, { s1a: 10, s1b: 10 }, 'decided by the daemon (byrequests), not by the fail-mode hash');
  });

  it('failMode drop: while the daemon is down new connections are refused, established ones continue', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const { front, ns, socket } = await startFront(1, `failMode: drop\n${config(1, 'SOCKET', service(1, 'byrequests', [{ name: 's1a' }, { name: 's1b' }]))}`);
    // Established before the daemon dies (a SYN that came later would meet
    // the drop mode), and held so that it is still running after the kill.
    const dl = heldDownload(client, 'http://198.19.1.1/blob.bin');
    await untilActive(ns, socket, 1, 'the download is established');
    front.signal('SIGKILL');
    await new Promise((r) => front.child.once('exit', r));
    const refused = await nsRunAsync(client, 'curl', ['-s', '-m', '2', 'http://198.19.1.1/']);
    assert.notEqual(refused.code, 0, 'no new connection while down in drop mode');
    dl.release();
    const res = await dl.done;
    assert.equal(res.code, 0);
    assert.equal(res.sha1, st.blobSha1);
    // The rules a killed daemon leaves behind are its own; remove them for the next test.
    nsRun(ns, process.execPath, ['-e', `import('${fileURLToPath(new URL('../../src/front/ruleset.ts', import.meta.url))}').then((m) => m.removeRules())`]);
  });

  it('overflow: with cluster 1 full, new connections go to clusters 2 and 3 in proportion 1:3 of free capacity', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const f2 = await startFront(2, config(2, 'SOCKET', service(2, 'byrequests', [{ name: 's2a' }, { name: 's2b' }, { name: 's2c' }])));
    const f3 = await startFront(3, config(3, 'SOCKET', service(3, 'byrequests', [{ name: 's3a' }, { name: 's3b' }, { name: 's3c' }])));
    const overflow = 'overflow:\n  - { cluster: c2, vip: 198.19.2.1, freeCapacity: 100 }\n  - { cluster: c3, vip: 198.19.3.1, freeCapacity: 300 }\n';
    const f1 = await startFront(1, config(1, 'SOCKET', service(1, 'capacity', [{ name: 's1a', cap: 1 }, { name: 's1b', cap: 1 }, { name: 's1c', cap: 1 }]), overflow));
    t.after(async () => {
      await f1.front.stop();
      await f2.front.stop();
      await f3.front.stop();
    });
    // Fill cluster 1: one download per server (capacity 1 each), held open
    // until the burst is over, so cluster 1 stays full however long the
    // burst takes.
    const dls = Array.from({ length: 3 }, () => heldDownload(client, 'http://198.19.1.1/blob.bin'));
    await untilActive(f1.ns, f1.socket, 3, 'three downloads established');
    const r = await burst(client, '198.19.1.1', 200, 8);
    for (const d of dls) d.release();
    assert.equal(r.failures, 0, JSON.stringify(r.tally));
    const byCluster = { c1: 0, c2: 0, c3: 0 } as Record<string, number>;
    for (const [name, n] of Object.entries(r.tally)) byCluster[`c${name[1] ?? '?'}`] = (byCluster[`c${name[1] ?? '?'}`] ?? 0) + n;
    assert.equal(byCluster['c1'], 0, JSON.stringify(r.tally));
    assert.equal(byCluster['c2'], 50, JSON.stringify(r.tally));
    assert.equal(byCluster['c3'], 150, JSON.stringify(r.tally));
    for (const d of dls) assert.equal((await d.done).sha1, st.blobSha1);
  });
});
