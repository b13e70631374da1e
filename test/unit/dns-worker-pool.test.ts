/**
 * The DNS primary's worker pool (src/dns/workers.ts) with real forked
 * workers on a loopback port: a message sent to a worker that has died but
 * whose exit the primary has not yet seen fails with EPIPE. That failure is
 * counted and logged, and the primary lives on and replaces the worker.
 * (Before, the ChildProcess's unhandled 'error' ended the primary: a worker
 * killed with SIGKILL took the whole server down, seen in CI as the admin
 * socket refusing connections right after the kill.)
 *
 * The race is made certain rather than hoped for: the test blocks its own
 * loop until the kernel has closed the worker's end of the channel, then
 * sends on the same turn, so the pool cannot have seen the exit.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import { WorkerPool } from '../../src/dns/workers.ts';
import { until } from '../helpers/wait.ts';

/** A TCP port free on 127.0.0.1 now (the workers bind it for UDP and TCP). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const a = s.address();
  await new Promise<void>((resolve) => s.close(() => { resolve(); }));
  assert.ok(a !== null && typeof a === 'object');
  return a.port;
}

/** Inodes of the Unix sockets `pid` holds and this process does not: its end of the IPC channel (inherited ones stay open here). */
function ownUnixSockets(pid: number): Set<string> {
  const unix = new Set(
    readFileSync('/proc/net/unix', 'latin1')
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/)[6])
      .filter((x): x is string => x !== undefined),
  );
  const sockets = (p: number | 'self'): string[] =>
    readdirSync(`/proc/${p}/fd`).flatMap((fd) => {
      try {
        return /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${p}/fd/${fd}`))?.[1] ?? [];
      } catch {
        return []; // closed while listed (readdir's own fd)
      }
    });
  const ours = new Set(sockets('self'));
  return new Set(sockets(pid).filter((i) => unix.has(i) && !ours.has(i)));
}

/**
 * Blocks this thread until every one of `inodes` is gone from the kernel's
 * Unix socket table: the worker is dead and its end of the channel closed,
 * and we have not run a loop turn since, so the pool has not seen it.
 * (A zombie alone is not enough: the files can outlive the task briefly.)
 */
function waitClosed(inodes: Set<string>): void {
  const end = Date.now() + 5000;
  for (;;) {
    const live = readFileSync('/proc/net/unix', 'latin1');
    if (![...inodes].some((i) => new RegExp(`\\s${i}(\\s|$)`, 'm').test(live))) return;
    assert.ok(Date.now() < end, `the worker's sockets ${[...inodes].join(',')} still open 5 s after SIGKILL`);
  }
}

describe('dns worker pool: a message to a worker that just died', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-pool-'));
  let pool: WorkerPool | undefined;
  after(() => {
    pool?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is counted and logged; the primary lives and replaces the worker', async () => {
    const port = await freePort();
    writeFileSync(join(dir, 'z.zone'), '$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 h 1 3600 600 86400 60\n IN NS ns1\nns1 IN A 198.18.2.2\n');
    const file = join(dir, 'dns.yaml');
    writeFileSync(file, `name: pool\nlisten: ["127.0.0.1:${port}"]\nzones: [{ file: ${join(dir, 'z.zone')} }]\nworkers: 2\nrrl: { enabled: false }\nadminSocket: ${join(dir, 'dns.sock')}\n`);
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
    const p = new WorkerPool({ count: 2, configFile: file, log, onProbes: () => {}, onStats: () => {} });
    pool = p;
    await p.start();
    assert.equal(p.alive, 2);
    const victim = p.pids()[0]!;

    const channel = ownUnixSockets(victim);
    assert.ok(channel.size > 0, 'the worker has its IPC channel');
    process.kill(victim, 'SIGKILL');
    waitClosed(channel);
    // Same turn: the pool still holds the dead worker as connected.
    p.broadcast({ t: 'demand?' });
    await until(() => p.sendFailed === 1, 'the failed send counted', 5000);
    await until(() => p.replaced === 1 && p.alive === 2 && !p.pids().includes(victim), 'the worker replaced', 15_000);
    assert.equal(p.died, 1);
    assert.ok(
      lines.some((l) => l['msg'] === 'message to a dns worker not delivered (it is exiting; its replacement gets the state)' && l['pid'] === victim),
      `logged with the worker's pid: ${JSON.stringify(lines)}`,
    );
    // The live worker still receives: no error for it.
    p.broadcast({ t: 'demand?' });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(p.sendFailed, 1);
  });
});
