/**
 * The kernel SYN schedule (src/front/kernel-schedule.ts) on the testbed,
 * real curl-like clients and nginx:
 *   - sequential connections follow byrequests' vector exactly, in the
 *     kernel, none queued, each recorded from its log copy;
 *   - a drained server leaves the schedule (rewritten), the rest keeps its
 *     exact proportions;
 *   - with the daemon killed, the kernel keeps walking the last schedule;
 *     after the restart the flows are adopted and new SYNs recorded again.
 * The server's answer names it ("server s1a ..."), so the order is read on
 * the servers' side of the truth, not from timing.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';
import { ByRequests } from '../../src/front/select/byrequests.ts';
import type { Backend } from '../../src/front/select/backend.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
// No WAN delay: the claims are exact sequences and counts, not RTTs, and the
// ~170 sequential connections each paid the default 20 ms RTT several times.
const testbed = useTestbed({ clients: 1, clusters: 1, delaysMs: { '1:1': 0 } });

/** The reference: Apache's byrequests from its initial state, `n` picks, by name. */
function vector(weights: Record<string, number>, n: number): string[] {
  const pool: Backend[] = Object.entries(weights).map(([id, weight]) => ({ id, weight, capacity: Infinity, active: 0, load: 0, usable: true }));
  const sel = new ByRequests();
  return Array.from({ length: n }, () => pool[sel.pick(pool, 0)]?.id ?? '-');
}

interface Burst {
  tally: Record<string, number>;
  failures: number;
  sequence: string[];
}

describe('sluice front: the kernel SYN schedule', () => {
  let front: FrontProcess | undefined;
  let ns = '';
  let client = '';
  let socket = '';
  let file = '';

  const burst = async (count: number): Promise<Burst> => {
    // One connection at a time: completion order is connection order.
    const r = await nsRunAsync(client, process.execPath, ['--no-warnings', BURST, '--url', 'http://198.19.1.1/', '--count', String(count), '--concurrency', '1', '--sequence']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as Burst;
  };
  const status = async (): Promise<Record<string, Record<string, number>>> => {
    const r = await nsRunAsync(ns, BIN, ['ctl', '--socket', socket, 'status']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as Record<string, Record<string, number>>;
  };
  const start = async (): Promise<FrontProcess> => {
    const f = new FrontProcess(ns, file);
    await f.waitFor('front node ready');
    return f;
  };

  before(async () => {
    const st = testbed();
    ns = st.plan.clusters[0]!.front.name;
    client = st.plan.clients[0]!.name;
    socket = join(st.runDir, 'front-schedule.sock');
    file = writeConfig(
      join(st.runDir, 'front-schedule.yaml'),
      `cluster: c1
uplinkAddress: 198.18.101.2
adminSocket: ${socket}
stateFile: ${join(st.runDir, 'front-schedule.state.json')}
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    synproxy: false
    synPath: kernel
    servers:
      - { name: s1a, address: 198.18.201.11, weight: 3 }
      - { name: s1b, address: 198.18.201.12, weight: 2 }
      - { name: s1c, address: 198.18.201.13, weight: 1 }
`,
    );
    front = await start();
  });

  after(async () => {
    await front?.stop();
  });

  it('60 sequential connections follow byrequests 3/2/1 exactly, decided in the kernel (none queued) and recorded from the log copies', async () => {
    const before = await status();
    const r = await burst(60);
    assert.equal(r.failures, 0);
    assert.deepEqual(r.sequence, vector({ s1a: 3, s1b: 2, s1c: 1 }, 60));
    // Recorded: the copies arrive within the log group's 10 ms timeout.
    await until(async () => ((await status())['counters']?.['kernelDecided'] ?? 0) - (before['counters']?.['kernelDecided'] ?? 0) >= 60, 'the 60 SYNs are recorded', 5000);
    const after = await status();
    const d = (k: string): number => (after['counters']?.[k] ?? 0) - (before['counters']?.[k] ?? 0);
    assert.equal(d('kernelDecided'), 60, JSON.stringify(after['counters']));
    assert.equal(d('decided'), 60);
    assert.equal(d('packets'), 0, 'no SYN was queued');
    assert.equal(d('synRetransmits'), 0);
    // Each record ended by its FIN's copy.
    await until(async () => ((await status())['records']?.['active'] ?? -1) === 0, 'every record recycled', 5000);
  });

  it('a drained server leaves the schedule at once; the others keep their exact share', async () => {
    const writes = (await status())['kernelSchedule']?.['writes'] ?? 0;
    const r0 = await nsRunAsync(ns, BIN, ['ctl', '--socket', socket, 'drain', 'www', 's1a']);
    assert.equal(r0.code, 0, r0.stderr);
    // The drain is a reload: the per-service chain is rewritten with the new
    // slots (its counter restarts) in the element update, or the writer does it.
    await until(async () => {
      const s = await status();
      return (s['kernelSchedule']?.['writes'] ?? 0) > writes || (s['rules']?.['elementUpdates'] ?? 0) > 0;
    }, 'the schedule rewritten', 5000);
    const r = await burst(30);
    assert.equal(r.failures, 0);
    assert.deepEqual(r.tally, { s1b: 20, s1c: 10 }, JSON.stringify(r.sequence));
    const r1 = await nsRunAsync(ns, BIN, ['ctl', '--socket', socket, 'revert', 'www', 's1a']);
    assert.equal(r1.code, 0, r1.stderr);
  });

  it('kill -9: the kernel keeps the last schedule; after the restart new SYNs are recorded again', async () => {
    // The revert above: s1a back; wait until its slots are in.
    await until(async () => (await burst(6)).tally['s1a'] !== undefined, 's1a back in the schedule', 10_000);
    front?.signal('SIGKILL');
    await new Promise((r) => front?.child.once('exit', r));
    const r = await burst(60);
    assert.equal(r.failures, 0, 'no daemon: the kernel decided every connection');
    // Proportions kept: 60 = 10 cycles of 6 (wherever the counter stood).
    assert.deepEqual(r.tally, { s1a: 30, s1b: 20, s1c: 10 });
    front = await start();
    const s0 = await status();
    const r2 = await burst(12);
    assert.equal(r2.failures, 0);
    await until(async () => ((await status())['counters']?.['kernelDecided'] ?? 0) >= (s0['counters']?.['kernelDecided'] ?? 0) + 12, 'the restarted daemon records the kernel\'s decisions', 5000);
  });

  it('a schedule too large to install inline (64 more services: 16,390 slots) is filled by the writer after the install; then the kernel walks it exactly', async () => {
    await front?.stop();
    const base = readFileSync(file, 'utf8');
    // capacity services of 256 slots each over the same servers; their VIPs get no traffic.
    const more = Array.from({ length: 64 }, (_, i) => `  - name: m${String(i)}
    vip: 198.19.2.${String(i + 1)}
    port: 80
    synproxy: false
    synPath: kernel
    servers:
      - { name: a, address: 198.18.201.11, capacity: 1000 }
      - { name: b, address: 198.18.201.12, capacity: 1000 }
`).join('');
    writeFileSync(file, base + more);
    try {
      front = await start();
      const filled = await front.waitFor('kernel schedule filled (the table was installed without its slots)', 30_000);
      assert.equal(filled['elements'], 6 + 64 * 256);
      const listed = await nsRunAsync(ns, 'nft', ['list', 'map', 'ip', 'sluice', 'schedule']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.equal((listed.stdout.match(/ : 0x/g) ?? []).length, 6 + 64 * 256, 'every slot in the kernel');
      const s0 = await status();
      const r = await burst(12);
      assert.equal(r.failures, 0);
      // The install put www's chain in with a new counter: its cycle from the first slot.
      assert.deepEqual(r.sequence, vector({ s1a: 3, s1b: 2, s1c: 1 }, 12));
      await until(async () => ((await status())['counters']?.['kernelDecided'] ?? 0) - (s0['counters']?.['kernelDecided'] ?? 0) >= 12, 'the 12 SYNs are recorded', 5000);
      const s1 = await status();
      assert.equal((s1['counters']?.['packets'] ?? 0) - (s0['counters']?.['packets'] ?? 0), 0, 'no SYN was queued');
    } finally {
      writeFileSync(file, base);
    }
  });
});
