/**
 * Admission control benchmarks (issue 9), one run:
 *
 * 1. Decisions per second in process: sluice's Hierarchy.admit (operation
 *    match by port, four buckets: operation and service, local and
 *    cluster) against rate-limiter-flexible's RateLimiterMemory doing the
 *    same two-level check (one limiter per level, points = weight), on the
 *    same inputs, alternating rounds. RateLimiterMemory is promise-based;
 *    it is driven in batches of BATCH promises awaited together.
 *
 * 2. Reservation messages per second the coordinator handles: a real
 *    `AdmissionNode` coordinating (static, CURVE on loopback) in a child
 *    process; this process plays MEMBERS members over real ZeroMQ sockets,
 *    each keeping WINDOW reserve/release requests in flight, and counts the
 *    answers (one per request) for SECONDS seconds.
 *
 * Prints a table, writes bench/results/admission.json.
 */
import { fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { admissionSchema } from '../../src/admission/config.ts';
import { Hierarchy, Verdict } from '../../src/admission/hierarchy.ts';
import { AdmissionNode } from '../../src/admission/node.ts';
import { ControlNode } from '../../src/control/node.ts';
import { writeKeyPair } from '../../src/control/keys.ts';
import { rootLogger } from '../../src/log/logger.ts';

/** The address words an IPv4 client's admit() is given (never read for a client number < 2^32). */
const NO_WORDS = new Uint32Array(4);

const DECISIONS = Number(process.env['DECISIONS'] ?? 2_000_000);
const ROUNDS = Number(process.env['ROUNDS'] ?? 5);
const MEMBERS = Number(process.env['MEMBERS'] ?? 4);
const WINDOW = Number(process.env['WINDOW'] ?? 64);
const SECONDS = Number(process.env['SECONDS'] ?? 6);
const BATCH = 256;
const PORTS = [80, 443, 8080];

function clusterCfg(member: string, dir: string): object {
  return {
    member,
    listen: `tcp://127.0.0.1:${7500 + Number(member.slice(1))}`,
    control: { keyFile: join(dir, `${member}.key`), maxAgeSeconds: 60 },
    members: Array.from({ length: MEMBERS + 1 }, (_, i) => ({ name: `m${i}`, endpoint: `tcp://127.0.0.1:${7500 + i}`, publicKey: join(dir, `m${i}.pub`) })),
    coordinator: { static: 'm0' },
  };
}

function admissionCfg(member: string, dir: string): ReturnType<typeof admissionSchema.parse> {
  return admissionSchema.parse({
    services: [
      {
        service: 'web',
        weight: 1,
        localLimit: 1e9,
        clusterLimit: 1e9,
        operations: [
          { name: 'https', weight: 2, when: { destinationPort: [443] }, localLimit: 1e9, clusterLimit: 1e9 },
          { name: 'api', weight: 3, when: { destinationPort: [8080] }, localLimit: 1e9 },
        ],
      },
    ],
    cluster: clusterCfg(member, dir),
  });
}

// ---- 1. decisions in process ----
function inputs(): Uint16Array {
  const out = new Uint16Array(DECISIONS);
  let x = 0x2545f491;
  for (let i = 0; i < DECISIONS; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = PORTS[x % PORTS.length] ?? 80;
  }
  return out;
}

function sluiceRound(ports: Uint16Array, dir: string): { perSecond: number; admitted: number } {
  const h = new Hierarchy(admissionCfg('m0', dir), ['web'], MEMBERS + 1);
  for (const op of h.operations) if (op.tracked) h.setAllocation(op, 1e9);
  let admitted = 0;
  const t0 = performance.now();
  for (let i = 0; i < DECISIONS; i += BATCH) {
    const now = performance.now();
    const end = Math.min(DECISIONS, i + BATCH);
    for (let k = i; k < end; k++) if (h.admit(0, 0x0a000001, NO_WORDS, 0, ports[k] ?? 80, now) === Verdict.Admit) admitted++;
  }
  return { perSecond: DECISIONS / ((performance.now() - t0) / 1000), admitted };
}

async function referenceRound(ports: Uint16Array): Promise<{ perSecond: number; admitted: number }> {
  const op = new RateLimiterMemory({ points: 1e9, duration: 1 });
  const svc = new RateLimiterMemory({ points: 1e9, duration: 1 });
  const cost = (p: number): number => (p === 443 ? 2 : p === 8080 ? 3 : 1);
  let admitted = 0;
  const t0 = performance.now();
  for (let i = 0; i < DECISIONS; i += BATCH) {
    const end = Math.min(DECISIONS, i + BATCH);
    const batch: Promise<void>[] = [];
    for (let k = i; k < end; k++) {
      const p = ports[k] ?? 80;
      batch.push(
        op
          .consume(`web/${p}`, cost(p))
          .then(() => svc.consume('web', cost(p)))
          .then(
            () => {
              admitted++;
            },
            () => undefined,
          ),
      );
    }
    await Promise.all(batch);
  }
  return { perSecond: DECISIONS / ((performance.now() - t0) / 1000), admitted };
}

// ---- 2. the coordinator over ZeroMQ ----
async function coordinatorChild(dir: string): Promise<void> {
  const cfg = admissionCfg('m0', dir);
  const h = new Hierarchy(cfg, ['web'], MEMBERS + 1);
  const log = rootLogger().child({ bench: 'coordinator' });
  log.level = 'warn';
  const cluster = cfg.cluster;
  if (cluster === undefined) throw new Error('no cluster section');
  const node = await AdmissionNode.start(cluster, h, log);
  process.send?.('ready');
  process.on('message', (m) => {
    if (m === 'stop') {
      void node.stop().then(() => {
        process.exit(0);
      });
    }
  });
}

async function messagesRun(dir: string): Promise<{ perSecond: number; answered: number; sent: number }> {
  const child = fork(fileURLToPath(import.meta.url), ['--coordinator', dir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  process.on('exit', () => child.kill());
  await new Promise<void>((resolve) => child.once('message', () => { resolve(); }));
  const log = rootLogger().child({ bench: 'members' });
  log.level = 'warn';
  const digest = new Hierarchy(admissionCfg('m1', dir), ['web'], MEMBERS + 1).digest;
  let answered = 0;
  let sent = 0;
  let measuring = false;
  const nodes: ControlNode[] = [];
  const members = Array.from({ length: MEMBERS }, (_, i) => `m${i + 1}`);
  const sessions = await Promise.all(
    members.map(async (name) => {
      const c = clusterCfg(name, dir) as { listen: string; control: { keyFile: string; maxAgeSeconds: number } };
      const node = await ControlNode.create(name, { keyFile: c.control.keyFile, plaintext: false, maxMessageBytes: 1 << 20, maxAgeSeconds: 60 }, log);
      nodes.push(node);
      const s = { name, epoch: 0, seq: 0, inflight: 0, push: node.connectPush('tcp://127.0.0.1:7500', join(dir, 'm0.pub')) };
      const pump = (): void => {
        while (s.epoch !== 0 && s.inflight < WINDOW) {
          s.inflight++;
          sent++;
          const body = { epoch: s.epoch, seq: ++s.seq, op: s.seq % 2 === 0 ? 'web/https' : 'web/other', amount: 1 };
          if (s.seq % 4 < 2) s.push.send('admission_reserve', body);
          else s.push.send('admission_release', body);
        }
      };
      await node.bindPull(c.listen, 'admission', [join(dir, 'm0.pub')], {
        admission_reset: (m) => {
          s.epoch = m.body.epoch;
          s.push.send('admission_state', { epoch: s.epoch, seq: ++s.seq, limits: digest, isolated: false, ops: [] });
        },
        admission_view: () => {
          pump();
        },
        admission_grant: () => {
          s.inflight--;
          if (measuring) answered++;
          pump();
        },
      });
      // Ask for a reset: a state of epoch 0 is answered with the coordinator's epoch.
      s.push.send('admission_state', { epoch: 0, seq: ++s.seq, limits: digest, isolated: false, ops: [] });
      return s;
    }),
  );
  const deadline = Date.now() + 10_000;
  // PUSH sockets drop what is sent before they connect: ask again until answered.
  while (sessions.some((s) => s.epoch === 0) && Date.now() < deadline) {
    for (const s of sessions) if (s.epoch === 0) s.push.send('admission_state', { epoch: 0, seq: ++s.seq, limits: digest, isolated: false, ops: [] });
    await new Promise((r) => setTimeout(r, 200));
  }
  if (sessions.some((s) => s.epoch === 0)) throw new Error('members did not join the coordinator within 10 s');
  await new Promise((r) => setTimeout(r, 1000)); // warm-up
  measuring = true;
  const t0 = performance.now();
  const sent0 = sent;
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  child.send('stop');
  for (const n of nodes) n.close();
  return { perSecond: answered / elapsed, answered, sent: sent - sent0 };
}

async function main(): Promise<void> {
  if (process.argv[2] === '--coordinator') {
    await coordinatorChild(process.argv[3] ?? '');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'sluice-admbench-'));
  for (let i = 0; i <= MEMBERS; i++) writeKeyPair(dir, `m${i}`);
  const ports = inputs();
  const s: number[] = [];
  const r: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    s.push(sluiceRound(ports, dir).perSecond);
    r.push((await referenceRound(ports)).perSecond);
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const ms = median(s);
  const mr = median(r);
  const msg = await messagesRun(dir);
  const rows = [
    ['sluice Hierarchy.admit', `${Math.round(ms).toLocaleString('en')} decisions/s`, (ms / mr).toFixed(2)],
    ['rate-limiter-flexible (2 levels)', `${Math.round(mr).toLocaleString('en')} decisions/s`, '1.00'],
    [`coordinator (${MEMBERS} members, window ${WINDOW}, CURVE)`, `${Math.round(msg.perSecond).toLocaleString('en')} requests/s answered`, '-'],
  ];
  console.log(`admission benchmark: ${DECISIONS} decisions x ${ROUNDS} alternating rounds (median); coordinator ${SECONDS} s`);
  for (const row of rows) console.log(`${(row[0] ?? '').padEnd(44)} ${(row[1] ?? '').padStart(34)}  ratio ${row[2] ?? ''}`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/admission.json',
    `${JSON.stringify({ date: new Date().toISOString(), decisions: { sluice: Math.round(ms), reference: Math.round(mr), ratio: Math.round((ms / mr) * 100) / 100, rounds: { sluice: s.map(Math.round), reference: r.map(Math.round) } }, coordinator: { members: MEMBERS, window: WINDOW, seconds: SECONDS, requestsPerSecond: Math.round(msg.perSecond), answered: msg.answered, sent: msg.sent } }, null, 2)}\n`,
  );
  process.exit(0);
}

await main();
