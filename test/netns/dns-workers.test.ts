/**
 * `sluice dns` with several worker processes (workers.ts) in one namespace,
 * loaded by real dnsperf:
 * - RRL across workers: dnsperf sends from one address over many source
 *   ports (the kernel's default 4-tuple hash would spread them over every
 *   worker, each allowing the full rate); the prefix steering program
 *   (native/src/reuseport.c) keeps the prefix on one worker, so the answers
 *   are the configured rate, within 10%.
 * - A worker killed (SIGKILL) under load: no more queries go unanswered
 *   than dnsperf had in flight (its -q), and a new worker takes its place
 *   and answers.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { DnsProcess } from '../helpers/dns.ts';
import type { DnsStatus } from '../../src/dns/status.ts';
import { sleep, until } from '../helpers/wait.ts';

const SERVER = '198.18.251.2';
const SERVER_RRL = '198.18.251.3';
const CLIENT = '198.18.252.10';
const WORKERS = 3;

const ZONE = `$ORIGIN example.test.
$TTL 3600
@    IN SOA ns1 hostmaster 2026112601 1h 15m 1w 300
     IN NS  ns1
ns1  IN A   ${SERVER}
web  IN A   198.18.251.81
`;

function config(dir: string, listen: string, socket: string, rrl: string): string {
  return `name: dns-workers
listen: ["${listen}:53"]
zones: [{ file: ${join(dir, 'example.test.zone')} }]
workers: ${WORKERS}
rrl: ${rrl}
adminSocket: ${socket}
`;
}

interface PerfResult {
  sent: number;
  completed: number;
  lost: number;
  seconds: number;
}

function parsePerf(out: string): PerfResult {
  const num = (re: RegExp): number => {
    const m = re.exec(out);
    assert.ok(m?.[1] !== undefined, `dnsperf output has ${re}: ${out}`);
    return Number(m[1]);
  };
  return { sent: num(/Queries sent:\s+(\d+)/), completed: num(/Queries completed:\s+(\d+)/), lost: num(/Queries lost:\s+(\d+)/), seconds: num(/Run time \(s\):\s+([\d.]+)/) };
}

async function workers(d: DnsProcess): Promise<NonNullable<DnsStatus['workers']>> {
  const s = await d.status();
  const w = s['workers'] as DnsStatus['workers'];
  assert.ok(w !== undefined, `status has workers: ${JSON.stringify(s)}`);
  return w;
}

describe('sluice dns with several workers', () => {
  const prefix = testPrefix();
  const ns = `${prefix}-dw`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dnsw-'));
  const teardown = (): void => {
    down(prefix);
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  const queries = join(dir, 'queries.txt');

  before(() => {
    run('ip', ['netns', 'add', ns]);
    ipBatch(ns, ['link set lo up', 'link add dw0 type veth peer name dw1', `addr add ${SERVER}/24 dev dw0`, `addr add ${SERVER_RRL}/24 dev dw0`, `addr add ${CLIENT}/24 dev dw1`, 'link set dw0 up', 'link set dw1 up']);
    writeFileSync(join(dir, 'example.test.zone'), ZONE);
    writeFileSync(queries, 'web.example.test A\n');
  });

  after(() => {
    teardown();
  });

  it('RRL holds one client prefix to its limit across workers (within 10%)', async (t) => {
    const RATE = 50;
    const socket = join(dir, 'rrl.sock');
    const file = join(dir, 'rrl.yaml');
    writeFileSync(file, config(dir, SERVER_RRL, socket, `{ enabled: true, responsesPerSecond: ${RATE}, slip: 0 }`));
    const d = new DnsProcess(ns, file, socket);
    t.after(() => d.stop());
    await d.ready();
    // 16 sockets (source ports) from one address at 600 queries/s for 4 s:
    // twelve times the limit, so every worker the prefix reached would
    // show in the count (with the kernel's 4-tuple hash instead of the
    // prefix program this read 3 x the limit with 3 workers).
    const r = await nsRunAsync(ns, 'dnsperf', ['-s', SERVER_RRL, '-a', CLIENT, '-d', queries, '-c', '16', '-Q', '600', '-l', '4', '-t', '1', '-q', '2000']);
    assert.equal(r.code, 0, r.stderr);
    const p = parsePerf(r.stdout);
    // RRL as BIND counts it (src/dns/rrl.ts): the account of one response
    // (this prefix, this name and type) starts at a second's worth; every
    // response debits it, dropped ones too, down to -window x RATE, and it
    // earns RATE per second. At twelve times the limit it never climbs back
    // above zero: the prefix gets one second's worth over the run, once,
    // whichever workers its queries reach (without the prefix program each
    // worker would keep its own account: about WORKERS x RATE).
    const expected = RATE;
    const detail = `dnsperf ${JSON.stringify(p)}; expected ${expected}`;
    t.diagnostic(detail);
    assert.ok(p.sent > 5 * expected, `offered well over the limit: ${detail}`);
    assert.ok(Math.abs(p.completed - expected) <= 0.1 * expected, `answered within 10% of the limit: ${detail}`);
    await sleep(600); // the workers report their counters every 50 ms
    const s = await d.status();
    assert.equal((await workers(d)).count, WORKERS);
    assert.ok((s.counters.rrlDropped ?? 0) >= p.sent - p.completed - 2000, `the rest were dropped by RRL: ${detail}; ${JSON.stringify(s.counters)}`);
  });

  it('a worker killed under load: at most its in-flight queries unanswered, and it is replaced', async (t) => {
    const socket = join(dir, 'kill.sock');
    const file = join(dir, 'kill.yaml');
    writeFileSync(file, config(dir, SERVER, socket, '{ enabled: false }'));
    const d = new DnsProcess(ns, file, socket);
    t.after(() => d.stop());
    await d.ready();
    const pids = (await workers(d)).pids;
    assert.equal(pids.length, WORKERS, JSON.stringify(pids));
    const victim = pids[1]!;
    const OUTSTANDING = 100;
    // Bounded: 6 s at most 4000 queries/s, at most OUTSTANDING in flight.
    const load = nsRunAsync(ns, 'dnsperf', ['-s', SERVER, '-a', CLIENT, '-d', queries, '-c', '8', '-Q', '4000', '-l', '6', '-t', '1', '-q', String(OUTSTANDING)]);
    await sleep(2000);
    process.kill(victim, 'SIGKILL');
    const r = await load;
    assert.equal(r.code, 0, r.stderr);
    const p = parsePerf(r.stdout);
    t.diagnostic(`dnsperf with a worker killed: ${JSON.stringify(p)}`);
    assert.ok(p.completed > 0, JSON.stringify(p));
    assert.ok(p.lost <= OUTSTANDING, `no more unanswered than were in flight (${OUTSTANDING}): ${JSON.stringify(p)}`);
    await until(async () => (await workers(d)).alive === WORKERS, 'the worker replaced', 10_000);
    const w = await workers(d);
    assert.equal(w.died, 1);
    assert.equal(w.replaced, 1);
    assert.ok(!w.pids.includes(victim), 'the dead worker is gone');
    assert.ok(d.lines.some((l) => l['msg'] === 'dns worker died; starting a replacement' && l['pid'] === victim), 'the death is logged');
    // Every worker answers: many source ports reach every socket of the group.
    const again = await nsRunAsync(ns, 'dnsperf', ['-s', SERVER, '-a', CLIENT, '-d', queries, '-c', '16', '-n', '200', '-t', '1', '-q', '50']);
    const q = parsePerf(again.stdout);
    assert.equal(q.lost, 0, `all answered after the replacement: ${JSON.stringify(q)}`);
  });
});
