/**
 * Benchmark (issue 25, "What to build" 1): DNS workers need the control
 * plane's state messages. Either the control plane is subscribed once, by
 * the primary, which forwards every message it applied to its N workers
 * over IPC (what `sluice dns` does, src/dns/workers.ts), or each worker
 * subscribes to every front node itself. This measures the CPU per state
 * message of both, on loopback, with real processes and sockets:
 *
 *   ipc    this process forks N children and sends each message to each
 *          as the pool does (child.send of {t:'state', type, body, from,
 *          ageMs}, Node's JSON serialisation); the children parse them.
 *          CPU of the sender (the primary's forward) and of the children.
 *   curve  this process binds a CURVE PUB (ControlNode, as a front node
 *          does) and N children subscribe to it with CURVE (ControlNode's
 *          SUB and decode: decrypt, JSON, the strict zod schema) and count
 *          the messages. CPU of the publisher (one encryption per
 *          subscriber session: the front node's cost) and of the children.
 *
 * The message: a cluster_load (one cluster's report, the most frequent) or
 * an rtt_results of 64 results. Sent in bursts of BURST with a pause, so no
 * high-water mark drops any (the counts received are printed and the costs
 * are per message received). CPU is process.cpuUsage() (user + system, all
 * threads: ZeroMQ's I/O thread counts), from the start of the measured phase
 * to its end, so other load on the shared cores does not count, though a
 * busy machine still inflates it (cache, scheduling).
 *
 *   flock /tmp/sluice-netns.lock node_modules/.bin/node scripts/bench/dns-state-fanout.ts [--workers 2] [--messages 5000]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { controlBaseSchema } from '../../src/control/config.ts';
import { writeKeyPair } from '../../src/control/keys.ts';
import { ControlNode } from '../../src/control/node.ts';
import { componentLogger } from '../../src/log/logger.ts';

type Kind = 'cluster_load' | 'rtt_results';
/** Below the control Sender's backlog (SENDER_BACKLOG, 64 messages): a burst beyond it is dropped. */
const BURST = 50;

function bodyOf(kind: Kind): unknown {
  if (kind === 'cluster_load') return { cluster: 'c1', vips: ['198.19.1.1'], capacity: 100, load: 40, available: 60, serversUp: 3, serversTotal: 3 };
  return { cluster: 'c1', results: Array.from({ length: 64 }, (_, i) => ({ target: `198.18.${20 + (i >> 4)}.${1 + (i & 15)}`, sent: 3, received: 3, rttMs: 10 + i / 10 })) };
}

type FromChild = { t: 'ready' } | { t: 'got'; n: number; cpuUs: number };

const cpuUs = (since: NodeJS.CpuUsage): number => {
  const d = process.cpuUsage(since);
  return d.user + d.system;
};

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---- children -------------------------------------------------------------
async function child(role: string, endpoint: string, keyDir: string): Promise<void> {
  let n = 0;
  let base = process.cpuUsage();
  const count = (): void => {
    n++;
  };
  let node: ControlNode | undefined;
  if (role === 'curve') {
    node = await ControlNode.create('w', controlBaseSchema.parse({ keyFile: join(keyDir, 'dns.key') }), componentLogger('bench-sub'));
    node.connectSub(endpoint, join(keyDir, 'front.pub'), { cluster_load: count, rtt_results: count });
  }
  process.on('message', (m: { t: string }) => {
    if (m.t === 'state') count();
    else if (m.t === 'start') {
      n = 0;
      base = process.cpuUsage();
    } else if (m.t === 'report') process.send?.({ t: 'got', n, cpuUs: cpuUs(base) } satisfies FromChild);
    else if (m.t === 'quit') {
      node?.close();
      process.exit(0);
    }
  });
  process.send?.({ t: 'ready' } satisfies FromChild);
}

// ---- parent ---------------------------------------------------------------
function ask(c: ChildProcess, msg: object, want: FromChild['t']): Promise<FromChild> {
  return new Promise((resolve) => {
    const on = (m: FromChild): void => {
      if (m.t !== want) return;
      c.off('message', on);
      resolve(m);
    };
    c.on('message', on);
    if (Object.keys(msg).length > 0) c.send(msg);
  });
}

interface Result {
  mode: string;
  kind: Kind;
  workers: number;
  received: number;
  senderUsPerMsg: number;
  workersUsPerMsg: number;
  totalUsPerMsg: number;
}

async function measure(mode: 'ipc' | 'curve', kind: Kind, workers: number, messages: number, keyDir: string, port: number): Promise<Result> {
  const endpoint = `tcp://127.0.0.1:${port}`;
  let node: ControlNode | undefined;
  let pub: Awaited<ReturnType<ControlNode['bindPub']>> | undefined;
  if (mode === 'curve') {
    node = await ControlNode.create('front', controlBaseSchema.parse({ keyFile: join(keyDir, 'front.key') }), componentLogger('bench-pub'));
    pub = await node.bindPub(endpoint, 'subscribers', [join(keyDir, 'dns.pub')]);
  }
  const kids = Array.from({ length: workers }, () => fork(fileURLToPath(import.meta.url), ['--child', mode, '--endpoint', endpoint, '--keys', keyDir], { stdio: 'inherit' }));
  await Promise.all(kids.map((c) => ask(c, {}, 'ready')));
  const body = bodyOf(kind);
  const send = (): void => {
    if (pub !== undefined) pub.send(kind, body as never);
    else for (const c of kids) c.send({ t: 'state', type: kind, body, from: 'front', ageMs: 0 });
  };
  // CURVE: until every subscriber hears (the handshake and the subscription take a moment).
  if (mode === 'curve') {
    for (let i = 0; i < 100; i++) {
      send();
      await pause(50);
      const got = await Promise.all(kids.map((c) => ask(c, { t: 'report' }, 'got')));
      if (got.every((g) => g.t === 'got' && g.n > 0)) break;
    }
  }
  for (const c of kids) c.send({ t: 'start' });
  await pause(100);
  const base = process.cpuUsage();
  for (let i = 0; i < messages; i += BURST) {
    for (let j = 0; j < BURST && i + j < messages; j++) send();
    await pause(5);
  }
  const senderUs = cpuUs(base);
  await pause(1000);
  const got = (await Promise.all(kids.map((c) => ask(c, { t: 'report' }, 'got')))).filter((g): g is Extract<FromChild, { t: 'got' }> => g.t === 'got');
  for (const c of kids) c.send({ t: 'quit' });
  node?.close();
  const received = Math.min(...got.map((g) => g.n));
  // The children's CPU includes the 1 s wait (idle: timers, ZeroMQ heartbeats): small against thousands of messages.
  const workersUs = got.reduce((s, g) => s + g.cpuUs, 0);
  const per = Math.max(1, received);
  return { mode, kind, workers, received, senderUsPerMsg: senderUs / messages, workersUsPerMsg: workersUs / per, totalUsPerMsg: senderUs / messages + workersUs / per };
}

const { values } = parseArgs({ options: { workers: { type: 'string', default: '2' }, messages: { type: 'string', default: '5000' }, child: { type: 'string' }, endpoint: { type: 'string', default: '' }, keys: { type: 'string', default: '' } } });
if (values.child !== undefined) await child(values.child, values.endpoint, values.keys);
else {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-fanout-'));
  try {
    writeKeyPair(dir, 'front');
    writeKeyPair(dir, 'dns');
    const workers = Number(values.workers);
    const messages = Number(values.messages);
    const rows: Result[] = [];
    let port = 17_400;
    for (const kind of ['cluster_load', 'rtt_results'] as const) {
      for (const mode of ['ipc', 'curve'] as const) rows.push(await measure(mode, kind, workers, messages, dir, port++));
    }
    console.log(`workers ${workers}, ${messages} messages each; CPU µs per state message`);
    console.log('mode   message       received  sender  workers(sum)  total');
    for (const r of rows) console.log(`${r.mode.padEnd(6)} ${r.kind.padEnd(13)} ${String(r.received).padStart(8)}  ${r.senderUsPerMsg.toFixed(1).padStart(6)}  ${r.workersUsPerMsg.toFixed(1).padStart(12)}  ${r.totalUsPerMsg.toFixed(1).padStart(5)}`);
    console.log(JSON.stringify(rows));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.exit(0);
}
