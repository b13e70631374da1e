/**
 * `sluice front` administration over IPv6 on the dual-stack testbed (issue
 * 23, acceptance 1): drain under load through the admin socket with intact
 * downloads, and overflow to the other clusters' IPv6 VIPs in proportion to
 * their free capacity when the first cluster is full. The IPv4 twins are in
 * test/netns/front-admin.test.ts; this file uses the same held downloads
 * and bursts, with the plan's IPv6 twins of every address.
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

/** A URL host for an IPv6 address. */
const host = (a: string): string => `[${a}]`;

function service(cluster: number, method: string, servers: { name: string; cap?: number; weight?: number }[]): string {
  const k = testbed().plan.clusters[cluster - 1]!;
  return `  - name: www6
    vip: ${k.vip6}
    port: 80
    method: ${method}
    servers:
${servers.map((s, i) => `      - { name: ${s.name}, address: ${k.servers[i]!.address6}${s.cap !== undefined ? `, capacity: ${s.cap}` : ''}${s.weight !== undefined ? `, weight: ${s.weight}` : ''} }`).join('\n')}
`;
}

function config(cluster: number, services: string, overflow = ''): string {
  const k = testbed().plan.clusters[cluster - 1]!;
  return `cluster: c${cluster}\nuplinkAddress: ${k.uplinkAddress}\nuplinkAddress6: ${k.uplinkAddress6}\nadminSocket: SOCKET\nservices:\n${services}${overflow}`;
}

async function burst(ns: string, vip6: string, count: number, concurrency: number): Promise<{ tally: Record<string, number>; failures: number }> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', `http://${host(vip6)}/`, '--count', String(count), '--concurrency', String(concurrency)]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { tally: Record<string, number>; failures: number };
}

/**
 * A download over IPv6 the test holds open: its output is not read until
 * `release()`, so curl blocks on a full pipe and the connection stays
 * established however slow the machine is (see front-admin.test.ts).
 */
function heldDownload(ns: string, url: string): { done: Promise<{ code: number; sha1: string; bytes: number }>; release: () => void } {
  const dl = spawn('ip', ['netns', 'exec', ns, 'curl', '-6', '-g', '-s', '-m', '120', url], { stdio: ['ignore', 'pipe', 'ignore'] });
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

function activeTotal(st: FrontStatus): number {
  return st.services[0]!.servers.reduce((n, s) => n + s.active, 0);
}

async function untilActive(ns: string, socket: string, n: number, what: string): Promise<void> {
  let last: FrontStatus | undefined;
  await until(async () => activeTotal((last = await status(ns, socket))) === n, what, 20_000).catch((e: unknown) => {
    throw new Error(`${String(e)}; last status: ${JSON.stringify(last?.services[0])}`);
  });
}

describe('front node administration over IPv6 on real traffic', () => {
  const fronts: FrontProcess[] = [];
  after(async () => {
    for (const f of fronts) await f.stop();
  });
  async function startFront(cluster: number, yaml: string): Promise<{ front: FrontProcess; socket: string; ns: string }> {
    const st = testbed();
    const socket = join(st.runDir, `front6-c${String(cluster)}.sock`);
    const ns = st.plan.clusters[cluster - 1]!.front.name;
    const file = writeConfig(join(st.runDir, `front6-c${String(cluster)}.yaml`), yaml.replace('SOCKET', socket));
    rmSync(`${file}.state.json`, { force: true });
    const front = new FrontProcess(ns, file);
    fronts.push(front);
    await front.waitFor('front node ready');
    return { front, socket, ns };
  }

  it('(c) drain under load over IPv6: no new connections to the server, its downloads finish intact', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const vip6 = st.plan.clusters[0]!.vip6;
    const { front, socket, ns } = await startFront(1, config(1, service(1, 'capacity', [{ name: 's1a', cap: 1000 }, { name: 's1b', cap: 2000 }, { name: 's1c', cap: 3000 }])));
    t.after(() => front.stop());
    const dls = Array.from({ length: 6 }, () => heldDownload(client, `http://${host(vip6)}/blob.bin`));
    await untilActive(ns, socket, 6, 'six IPv6 downloads established');
    const before = await status(ns, socket);
    const s1bActive = before.services[0]!.servers.find((s) => s.name === 's1b')!.active;
    assert.ok(s1bActive >= 1, `s1b carries downloads: ${JSON.stringify(before.services[0])}`);

    const drained = await ctl(ns, socket, 'drain', 'www6', 's1b');
    assert.equal(drained.code, 0, drained.stderr);
    const r = await burst(client, vip6, 300, 16);
    assert.equal(r.failures, 0);
    assert.equal(r.tally['s1b'], undefined, `no new connection to the drained server: ${JSON.stringify(r.tally)}`);
    assert.equal((r.tally['s1a'] ?? 0) + (r.tally['s1c'] ?? 0), 300, JSON.stringify(r.tally));
    const during = await status(ns, socket);
    const s1b = during.services[0]!.servers.find((s) => s.name === 's1b')!;
    assert.equal(s1b.state, 'drain');
    assert.equal(s1b.active, s1bActive, 'its established connections are still there');
    assert.equal(s1b.decided, before.services[0]!.servers.find((s) => s.name === 's1b')!.decided, 'no decision for the drained server');

    for (const d of dls) d.release();
    for (const d of dls) {
      const res = await d.done;
      assert.equal(res.code, 0);
      assert.equal(res.bytes, 20 << 20);
      assert.equal(res.sha1, st.blobSha1);
    }
    assert.match(nsRun(client, 'curl', ['-6', '-g', '-s', '-m', '5', `http://${host(vip6)}/`]), /^server s1[ac] /);
  });

  it('(e) overflow over IPv6: with cluster 1 full, new connections go to clusters 2 and 3 IPv6 VIPs in proportion 1:3 of free capacity', async (t) => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const [k1, k2, k3] = st.plan.clusters;
    const f2 = await startFront(2, config(2, service(2, 'byrequests', [{ name: 's2a' }, { name: 's2b' }, { name: 's2c' }])));
    const f3 = await startFront(3, config(3, service(3, 'byrequests', [{ name: 's3a' }, { name: 's3b' }, { name: 's3c' }])));
    const overflow = `overflow:\n  - { cluster: c2, vip: ${k2!.vip}, vip6: ${k2!.vip6}, freeCapacity: 100 }\n  - { cluster: c3, vip: ${k3!.vip}, vip6: ${k3!.vip6}, freeCapacity: 300 }\n`;
    const f1 = await startFront(1, config(1, service(1, 'capacity', [{ name: 's1a', cap: 1 }, { name: 's1b', cap: 1 }, { name: 's1c', cap: 1 }]), overflow));
    t.after(async () => {
      await f1.front.stop();
      await f2.front.stop();
      await f3.front.stop();
    });
    const dls = Array.from({ length: 3 }, () => heldDownload(client, `http://${host(k1!.vip6)}/blob.bin`));
    await untilActive(f1.ns, f1.socket, 3, 'three IPv6 downloads established');
    const r = await burst(client, k1!.vip6, 200, 8);
    for (const d of dls) d.release();
    assert.equal(r.failures, 0, JSON.stringify(r.tally));
    const byCluster: Record<string, number> = { c1: 0, c2: 0, c3: 0 };
    for (const [name, n] of Object.entries(r.tally)) byCluster[`c${name[1] ?? '?'}`] = (byCluster[`c${name[1] ?? '?'}`] ?? 0) + n;
    assert.equal(byCluster['c1'], 0, JSON.stringify(r.tally));
    assert.equal(byCluster['c2'], 50, JSON.stringify(r.tally));
    assert.equal(byCluster['c3'], 150, JSON.stringify(r.tally));
    // Clusters 2 and 3 decided them (their own IPv6 services), not a bypass.
    for (const [f, n] of [[f2, 50], [f3, 150]] as const) {
      const s = await status(f.ns, f.socket);
      assert.equal(s.services[0]!.servers.reduce((sum, x) => sum + x.decided, 0), n, JSON.stringify(s.services[0]));
    }
    for (const d of dls) assert.equal((await d.done).sha1, st.blobSha1);
  });
  it('(h) a stopped node\'s IPv6 rules stay; --remove-rules takes the ip6 table and the ip6tables chains away, and reports them', async () => {
    const st = testbed();
    const { front, ns } = await startFront(1, config(1, service(1, 'capacity', [{ name: 's1a', cap: 1000 }])));
    await front.stop();
    const ip6Chains = (): string => nsRun(ns, 'ip6tables-save', ['-t', 'mangle']).split('\n').filter((l) => l.includes('SLUICE')).join('\n');
    assert.match(nsRun(ns, 'nft', ['list', 'tables', 'ip6']), /table ip6 sluice/, 'a stop leaves the ip6 table (its fallback serves)');
    assert.notEqual(ip6Chains(), '', 'a stop leaves the ip6tables queue chain');
    const file = join(st.runDir, 'front6-c1.yaml');
    const r = await nsRunAsync(ns, BIN, ['front', '--remove-rules', '--config', file]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /removed nft table ip6 sluice/);
    assert.match(r.stdout + r.stderr, /removed ip6tables mangle chain SLUICE_QUEUE/);
    assert.doesNotMatch(nsRun(ns, 'nft', ['list', 'tables', 'ip6']), /sluice/);
    assert.equal(ip6Chains(), '');
    const again = await nsRunAsync(ns, BIN, ['front', '--remove-rules', '--config', file]);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.match(again.stdout + again.stderr, /nothing to remove/);
  });
});
