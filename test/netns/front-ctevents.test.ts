/**
 * Flows end by conntrack events (src/front/flow-ends.ts): `sluice front`
 * frees the record of a flow the kernel destroys, active or recycled, with
 * no reconcile period involved (reconcileSeconds is an hour here, and the
 * daemon starts with no flows to adopt, so no periodic resync runs: only
 * the destroy events can explain a freed record). Then an overrun: the
 * daemon is stopped while 30k destroy events pour in (more than its 4 MiB
 * receive buffer, connections.eventBufferMiB, holds), so events are lost, including those of flows we
 * deleted; on resume it counts the overrun, resyncs once from the kernel's
 * table, which frees those records, and keeps freeing records by events.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import type { FrontStatus } from '../../src/front/status.ts';
import { RESYNC_YOUNG_SECONDS } from '../../src/front/daemon.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const testbed = useTestbed({ clients: 1, serversPerCluster: 2 });
const VIP = '198.19.1.1';

/**
 * Holds TCP connections to the VIP open from a client namespace. Lines in:
 * "close i j ..." (the client sends FIN), "quit". Lines out: the local
 * ports as JSON once connected, then "ok" per command.
 */
const HOLDER = `
import socket, sys, json
n = int(sys.argv[2])
socks = []
for i in range(n):
    s = socket.create_connection((sys.argv[1], 80), timeout=5)
    socks.append(s)
print(json.dumps([s.getsockname()[1] for s in socks]), flush=True)
for line in sys.stdin:
    w = line.split()
    if not w or w[0] == 'quit':
        break
    if w[0] == 'close':
        for i in w[1:]:
            socks[int(i)].close()
    print('ok', flush=True)
`;

class Holder {
  readonly child: ChildProcessWithoutNullStreams;
  readonly #lines: string[] = [];
  #wake: (() => void) | undefined;

  constructor(ns: string, count: number) {
    this.child = spawn('ip', ['netns', 'exec', ns, 'python3', '-c', HOLDER, VIP, String(count)], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.child.stdout }).on('line', (l) => {
      this.#lines.push(l);
      this.#wake?.();
    });
  }

  async line(): Promise<string> {
    const end = Date.now() + 10_000;
    while (this.#lines.length === 0) {
      if (Date.now() > end || this.child.exitCode !== null) throw new Error('connection holder: no answer');
      await new Promise<void>((r) => {
        this.#wake = r;
        setTimeout(r, 200);
      });
    }
    return this.#lines.shift() ?? '';
  }

  async close(indices: readonly number[]): Promise<void> {
    this.child.stdin.write(`close ${indices.join(' ')}\n`);
    assert.equal(await this.line(), 'ok');
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

function configYaml(reconcileSeconds = 3600): string {
  return `cluster: c1
uplinkAddress: 198.18.101.2
connections:
  reconcileSeconds: ${String(reconcileSeconds)}
  # The overrun case fills it with 30k events (about 6,500 fit in 4 MiB).
  eventBufferMiB: 4
  recycleSeconds: 3600
services:
  - name: www
    vip: ${VIP}
    port: 80
    servers:
      - { name: s1a, address: 198.18.201.11, capacity: 1000 }
      - { name: s1b, address: 198.18.201.12, capacity: 1000 }
`;
}

describe('sluice front: records of ended flows are freed by conntrack destroy events', () => {
  let front: FrontProcess | undefined;
  let holder: Holder | undefined;
  let frontNs = '';
  let client = '';
  let ports: number[] = [];
  let openedAt = 0;

  const status = async (): Promise<FrontStatus> => (await front!.status()) as unknown as FrontStatus;
  const deleteFlow = (port: number): void => {
    nsRun(frontNs, 'conntrack', ['-D', '-p', 'tcp', '-s', client, '--sport', String(port), '-d', VIP, '--dport', '80']);
  };

  before(async () => {
    const st = testbed();
    frontNs = st.plan.clusters[0]?.front.name ?? '';
    client = st.plan.clients[0]?.address ?? '';
    const configFile = writeConfig(join(st.runDir, 'front-ctevents.yaml'), configYaml());
    front = new FrontProcess(frontNs, configFile);
    await front.waitFor('front node ready');
    holder = new Holder(st.plan.clients[0]?.name ?? '', 20);
    ports = JSON.parse(await holder.line()) as number[];
    openedAt = Date.now();
    assert.equal(ports.length, 20);
  });

  after(async () => {
    holder?.stop();
    await front?.stop();
  });

  it('a destroyed flow frees its record, active or recycled (FIN seen), with no resync', async () => {
    await until(async () => (await status()).records.active === 20, '20 active records');
    // Connections 0-4 close: their FINs recycle the records.
    await holder!.close([0, 1, 2, 3, 4]);
    await until(async () => (await status()).records.recycled === 5, '5 records recycled by the FINs');
    // The kernel forgets flows 0-9: five recycled records and five active ones.
    for (const p of ports.slice(0, 10)) deleteFlow(p);
    await until(async () => {
      const s = await status();
      return s.records.active === 10 && s.records.recycled === 0;
    }, 'the 10 records of the deleted flows freed', 5000);
    const s = await status();
    const fe = s.flowEnds;
    assert.ok(fe?.events !== undefined, 'conntrack events are open');
    assert.equal(fe.freed, 10);
    assert.equal(s.records.ended, 10);
    assert.deepEqual(fe.resyncs, { overrun: 0, legacy: 0, periodic: 0 }, 'no resync ran: the events freed the records');
    assert.equal(s.records.reconciled, 0);
    assert.equal(fe.events.overruns, 0);
    assert.equal(fe.legacyRecords, 0);
    // Each server's count dropped with its records (10 connections remain).
    const active = s.services.flatMap((svc) => svc.servers.map((b) => b.active));
    assert.equal(active.reduce((a, b) => a + b, 0), 10);
  });

  it('after an overrun (daemon stopped under 30k events): counted, one resync frees the records whose events were lost, events work again', async () => {
    const st = testbed();
    // 30k foreign flows to flush: more destroy events than 4 MiB of receive buffer holds.
    const load = join(st.runDir, 'ct-load.txt');
    const lines: string[] = [];
    for (let i = 0; i < 30_000; i++) lines.push(`-I -p udp -s 198.18.${String(40 + Math.floor(i / 250 / 250))}.${String(Math.floor(i / 250) % 250 + 1)} -d 198.18.39.9 --sport ${String(1024 + (i % 250))} --dport 53 -t 600`);
    writeFileSync(load, lines.join('\n') + '\n');
    nsRun(frontNs, 'conntrack', ['-R', load]);
    // The resync keeps records younger than RESYNC_YOUNG_SECONDS: let ours age past it.
    const age = Date.now() - openedAt;
    if (age < (RESYNC_YOUNG_SECONDS + 1) * 1000) await sleep((RESYNC_YOUNG_SECONDS + 1) * 1000 - age);
    const before = await status();
    front!.signal('SIGSTOP');
    try {
      // (conntrack prints each deleted flow: 30k lines, not for us.)
      nsRun(frontNs, 'sh', ['-c', 'conntrack -D -p udp -d 198.18.39.9 >/dev/null 2>&1']);
      // Lost in the overrun: flows 10-14 (active records), deleted after the flood.
      for (const p of ports.slice(10, 15)) deleteFlow(p);
    } finally {
      front!.signal('SIGCONT');
    }
    let last: FrontStatus | undefined;
    await until(async () => {
      last = await status();
      return last.flowEnds?.resyncs.overrun === 1 && last.records.active === 5;
    }, 'an overrun resync freed the 5 records whose events were lost', 15_000).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: records ${JSON.stringify(last?.records)}, flow ends ${JSON.stringify(last?.flowEnds)}`);
    });
    const s = await status();
    assert.ok((s.flowEnds?.events?.overruns ?? 0) > (before.flowEnds?.events?.overruns ?? 0), 'the overrun was counted');
    assert.equal(s.records.reconciled, 5, 'the resync freed them');
    assert.ok((s.flowEnds?.foreign ?? 0) > (before.flowEnds?.foreign ?? 0), 'the foreign events read were counted, not acted on');
    // Events work again: the next deleted flows are freed by their events.
    for (const p of ports.slice(15, 20)) deleteFlow(p);
    await until(async () => (await status()).records.active === 0, 'the last 5 records freed by their events', 5000);
    const end = await status();
    assert.equal((end.flowEnds?.freed ?? 0) - (s.flowEnds?.freed ?? 0), 5);
    assert.equal(end.flowEnds?.resyncs.overrun, 1);
  });
});

/**
 * The legacy resync's backoff (src/front/legacy-backoff.ts): a daemon
 * restarted over open flows adopts them as legacy records, and reads the
 * whole table every reconcileSeconds (1 s here) only until the reads keep
 * finding nothing the events missed: then 2, 4, 8 periods apart. Judged
 * from the daemon's own counters.
 */
describe('sluice front: legacy resyncs back off while they free nothing', () => {
  let front: FrontProcess | undefined;
  let holder: Holder | undefined;

  after(async () => {
    holder?.stop();
    await front?.stop();
  });

  it('adopted flows that stay open: reads 2, 4, 8 periods apart; the records gone, every period again', async () => {
    const st = testbed();
    const frontNs = st.plan.clusters[0]?.front.name ?? '';
    const client = st.plan.clients[0]!;
    const configFile = writeConfig(join(st.runDir, 'front-legacy.yaml'), configYaml(1));
    const status = async (): Promise<FrontStatus> => (await front!.status()) as unknown as FrontStatus;
    front = new FrontProcess(frontNs, configFile);
    await front.waitFor('front node ready');
    holder = new Holder(client.name, 10);
    const ports = JSON.parse(await holder.line()) as number[];
    await until(async () => (await status()).records.active === 10, '10 active records');
    // A restart: the new daemon adopts the 10 open flows as legacy records.
    await front.stop();
    front = new FrontProcess(frontNs, configFile);
    await front.waitFor('front node ready');
    assert.equal((await status()).flowEnds?.legacyRecords, 10);
    let s: FrontStatus | undefined;
    await until(async () => {
      s = await status();
      return (s.flowEnds?.legacyResyncPeriods ?? 0) >= 8;
    }, 'legacy resyncs 8 periods apart', 30_000, 200);
    const fe = s!.flowEnds!;
    // Reads at periods 1, 3, 7 (2 and 4 apart) before the backoff reached 8; skipped 1 + 3 between them.
    assert.ok(fe.resyncs.legacy >= 3 && fe.resyncs.legacy <= 4, JSON.stringify(fe));
    assert.ok(fe.legacyResyncsSkipped >= 4, JSON.stringify(fe));
    assert.equal(fe.legacyRecords, 10, 'the flows are open: nothing freed');
    assert.equal(s!.records.reconciled, 0);
    // The kernel forgets the flows: their records go (by their destroy events), and with no legacy record left the backoff starts over.
    for (const p of ports) nsRun(frontNs, 'conntrack', ['-D', '-p', 'tcp', '-s', client.address, '--sport', String(p), '-d', VIP, '--dport', '80']);
    await until(async () => {
      const e = await status();
      return e.records.active === 0 && e.flowEnds?.legacyRecords === 0 && e.flowEnds.legacyResyncPeriods === 1;
    }, 'records freed, legacy resyncs every period again', 15_000, 200);
  });
});
