/**
 * Conntrack destroy events (src/conntrack/events.ts) under load, as the
 * front daemon handles them (src/front/flow-ends.ts: each event frees a
 * record of a ConnectionTable): how many events a second the reader
 * sustains, how many are lost (overruns), and the longest event-loop stall
 * the event path causes.
 *
 *   node scripts/bench/ct-events.ts [--flows 100000] [--spread-seconds 0] [--max-batch 256]
 *
 * In a scratch network namespace (always deleted): --flows TCP flows with
 * one of our marks are inserted (`conntrack -R`, while the reader listens,
 * so they get the event extension), each with a record in the table; then
 * they are destroyed: all at once (`conntrack -F`, the kernel's own speed:
 * the worst burst) or, with --spread-seconds S, by their timeouts, spread
 * over S seconds (the kernel's garbage collector reaps them in its own
 * batches). (Deleting by tuple with `conntrack -D` is no way to pace them:
 * each delete walks the whole table.) The reader runs in a child process
 * in the namespace and reports when no event came for 2 s.
 *
 * Wrap it in `flock /tmp/sluice-netns.lock` on shared machines.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { ConntrackEvents } from '../../src/conntrack/events.ts';
import { ConnectionTable, connectionKey } from '../../src/front/connections.ts';
import { FlowEnds } from '../../src/front/flow-ends.ts';

const { values } = parseArgs({
  options: {
    flows: { type: 'string', default: '100000' },
    'spread-seconds': { type: 'string', default: '0' },
    'max-batch': { type: 'string', default: '256' },
    inner: { type: 'boolean', default: false },
  },
});
const FLOWS = Number(values.flows);
const VIP = 0xc6130101; // 198.19.1.1
const MARK = '0x51000001'; // service 0, server 0

/** The i-th flow's client address (198.18.64.0/18) and port. */
function client(i: number): { addr: string; num: number; port: number } {
  const host = Math.floor(i / 50_000);
  const port = 10_000 + (i % 50_000);
  return { addr: `198.18.${String(64 + (host >> 8))}.${String((host & 0xff) + 1)}`, num: (0xc6124000 + (host >> 8) * 256 + (host & 0xff) + 1) >>> 0, port };
}

if (values.inner) {
  // The daemon's per-event work: FlowEnds over a table holding a record per flow.
  const table = new ConnectionTable(FLOWS + 16, 120_000, { released: () => undefined });
  for (let i = 0; i < FLOWS; i++) {
    const c = client(i);
    table.create(connectionKey(c.num, c.port), 0, 0, 0);
  }
  const ends = new FlowEnds({ table, serviceOf: (vip, port, proto) => (vip === VIP && port === 80 && proto === 6 ? 0 : -1), serviceOf6: () => -1 });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  let first = 0;
  let last = 0;
  let maxHandler = 0;
  const events = ConntrackEvents.open({
    maxBatch: Number(values['max-batch']),
    onBatch(batch) {
      const t0 = performance.now();
      if (first === 0) first = t0;
      ends.handle(batch, t0);
      const t1 = performance.now();
      last = t1;
      if (t1 - t0 > maxHandler) maxHandler = t1 - t0;
    },
    onError(err) {
      console.error(err);
    },
  });
  delay.enable();
  console.log('ready');
  const tick = setInterval(() => {
    if (first === 0 || performance.now() - last < 2000) return;
    clearInterval(tick);
    delay.disable();
    const s = events.stats();
    const seconds = (last - first) / 1000;
    console.log(
      JSON.stringify({
        events: s.events,
        freed: ends.counts.freed,
        lost: FLOWS - ends.counts.freed,
        overruns: s.overruns,
        seconds: Math.round(seconds * 1000) / 1000,
        eventsPerSecond: Math.round(s.events / seconds),
        batches: s.batches,
        maxBatch: s.maxBatch,
        maxHandlerMs: Math.round(maxHandler * 100) / 100,
        loopDelayMaxMs: Math.round((delay.max / 1e6) * 100) / 100,
        loopDelayP99Ms: Math.round((delay.percentile(99) / 1e6) * 100) / 100,
      }),
    );
    events.close();
  }, 100);
} else {
  const ns = `ctb${randomBytes(3).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'ct-events-'));
  const run = (args: string[]): void => {
    execFileSync('ip', ['netns', 'exec', ns, 'sh', '-c', args.join(' ') + ' >/dev/null 2>&1']);
  };
  execFileSync('ip', ['netns', 'add', ns]);
  let gone = false;
  const cleanup = (): void => {
    if (gone) return;
    gone = true;
    execFileSync('ip', ['netns', 'del', ns]);
    rmSync(dir, { recursive: true, force: true });
  };
  // timeout(1) and Ctrl-C skip `finally`: the namespace goes anyway.
  for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const)
    process.on(sig, () => {
      cleanup();
      process.exit(code);
    });
  try {
    const spread = Number(values['spread-seconds']);
    const ins: string[] = [];
    for (let i = 0; i < FLOWS; i++) {
      const c = client(i);
      const timeout = spread > 0 ? 2 + (i % spread) : 3600;
      ins.push(`-I -p tcp -s ${c.addr} -d 198.19.1.1 --sport ${String(c.port)} --dport 80 --state ESTABLISHED -t ${String(timeout)} -m ${MARK}`);
    }
    writeFileSync(join(dir, 'ins'), ins.join('\n') + '\n');
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '--no-warnings', new URL(import.meta.url).pathname, '--inner', '--flows', String(FLOWS), '--max-batch', values['max-batch']], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const next = (): Promise<string> => new Promise((r) => lines.once('line', r));
    if ((await next()) !== 'ready') throw new Error('reader did not start');
    run(['conntrack', '-R', join(dir, 'ins')]);
    const t0 = performance.now();
    if (spread === 0) run(['conntrack', '-F']);
    const destroySeconds = (performance.now() - t0) / 1000;
    const report = JSON.parse(await next()) as Record<string, unknown>;
    console.log(JSON.stringify({ flows: FLOWS, mode: spread > 0 ? `timeouts over ${String(spread)} s` : 'flush', destroySeconds: Math.round(destroySeconds * 1000) / 1000, ...report }));
    child.kill();
  } finally {
    cleanup();
  }
}
