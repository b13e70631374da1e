/**
 * Benchmark: what does sending every forwarded packet through an NFQUEUE
 * program on our addon cost, against plain kernel forwarding?
 *
 * One testbed (1 client, 1 front node, 1 nginx server, no WAN delay); the
 * client runs wrk against the server, routed through the front node. Modes,
 * alternated round by round on the same site:
 *   kernel      the front node forwards, no queue
 *   nfqueue-js  every forwarded TCP packet (both directions) is queued to
 *               scripts/bench/accept-all.ts (accept, batched verdicts)
 * Workloads: kept-alive requests (wrk -t1 -c32) and one request per
 * connection (Connection: close). Packets/s is what the front node received
 * on its two interfaces during the run.
 *
 *   node scripts/bench/nfqueue.ts [--seconds 5] [--rounds 3]
 * Prints a table and writes bench/results/nfqueue.json.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, release } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { down, up } from '../testbed/testbed.ts';
import { run, runIn } from '../testbed/sh.ts';
import { parseWrk } from './wrk.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' } } });
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const QUEUE = 7;
const PROGRAM = fileURLToPath(new URL('./accept-all.ts', import.meta.url));
const prefix = `bnq${randomBytes(2).toString('hex')}`;

process.on('exit', () => {
  down(prefix);
});
process.on('SIGINT', () => process.exit(130));

const st = up({ prefix, clients: 1, clusters: 1, serversPerCluster: 1, delaysMs: { '1:1': 0 } });
const client = st.plan.clients[0];
const k = st.plan.clusters[0];
const server = k?.servers[0];
if (!client || !k || !server) throw new Error('bad plan');
const front = k.front.name;
const clientNs = client.name;
const url = `http://${server.address}/`;

function rxPackets(): number {
  return ['wan0', 'lan0'].reduce((sum, dev) => sum + Number(runIn(front, 'cat', [`/sys/class/net/${dev}/statistics/rx_packets`]).trim()), 0);
}

function wrk(close: boolean): Promise<{ rps: number; pps: number; errors: number }> {
  const args = ['-t1', '-c32', `-d${seconds}s`, ...(close ? ['-H', 'Connection: close'] : []), url];
  return new Promise((resolve, reject) => {
    const before = rxPackets();
    const t0 = performance.now();
    const child = spawn('ip', ['netns', 'exec', clientNs, 'wrk', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('close', (code) => {
      const elapsed = (performance.now() - t0) / 1000;
      const pps = (rxPackets() - before) / elapsed;
      const w = parseWrk(out);
      if (code !== 0 || !w) {
        reject(new Error(`wrk failed (${String(code)}): ${out}`));
        return;
      }
      resolve({ rps: w.rps, pps, errors: w.errors });
    });
  });
}

interface ProgramHandle {
  stop(): Promise<Record<string, number>>;
}

async function startProgram(): Promise<ProgramHandle> {
  runIn(front, 'iptables', ['-A', 'FORWARD', '-p', 'tcp', '-j', 'NFQUEUE', '--queue-num', String(QUEUE)]);
  const child = spawn('ip', ['netns', 'exec', front, process.execPath, PROGRAM, '--queue', String(QUEUE)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const it = lines[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true || !first.value.includes('ready')) throw new Error('accept-all did not start');
  return {
    async stop() {
      child.kill('SIGTERM');
      const last = await it.next();
      runIn(front, 'iptables', ['-F', 'FORWARD']);
      if (last.done === true) throw new Error('accept-all printed no stats');
      return JSON.parse(last.value) as Record<string, number>;
    },
  };
}

type Mode = 'kernel' | 'nfqueue-js';
interface Sample {
  mode: Mode;
  workload: 'keepalive' | 'close';
  rps: number;
  pps: number;
  errors: number;
}
const samples: Sample[] = [];
const programStats: Record<string, number>[] = [];

// Warm-up (ARP, nginx workers, page cache).
await wrk(false);
for (let r = 0; r < rounds; r++) {
  for (const mode of ['kernel', 'nfqueue-js'] as const) {
    const prog = mode === 'nfqueue-js' ? await startProgram() : undefined;
    for (const workload of ['keepalive', 'close'] as const) {
      const res = await wrk(workload === 'close');
      samples.push({ mode, workload, ...res });
      console.error(`round ${r + 1} ${mode.padEnd(10)} ${workload.padEnd(9)} ${res.rps.toFixed(0)} req/s ${res.pps.toFixed(0)} pkt/s`);
    }
    if (prog) programStats.push(await prog.stop());
  }
}

function med(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}
const summary: Record<string, { kernel: { rps: number; pps: number }; nfqueueJs: { rps: number; pps: number }; ratioRps: number; ratioPps: number }> = {};
for (const workload of ['keepalive', 'close'] as const) {
  const pick = (mode: Mode, f: 'rps' | 'pps'): number => med(samples.filter((s) => s.mode === mode && s.workload === workload).map((s) => s[f]));
  const kr = pick('kernel', 'rps');
  const kp = pick('kernel', 'pps');
  const qr = pick('nfqueue-js', 'rps');
  const qp = pick('nfqueue-js', 'pps');
  summary[workload] = { kernel: { rps: kr, pps: kp }, nfqueueJs: { rps: qr, pps: qp }, ratioRps: qr / kr, ratioPps: qp / kp };
}
const totalPackets = programStats.reduce((s, p) => s + (p['packets'] ?? 0), 0);
const totalBatches = programStats.reduce((s, p) => s + (p['batches'] ?? 0), 0);

console.log(`\nNFQUEUE accept-all (JavaScript on the addon) vs kernel forwarding, median of ${rounds} rounds of ${seconds} s`);
console.log('workload    kernel req/s  nfqueue req/s  ratio   kernel pkt/s  nfqueue pkt/s  ratio');
for (const [w, s] of Object.entries(summary)) {
  console.log(
    `${w.padEnd(10)} ${s.kernel.rps.toFixed(0).padStart(13)} ${s.nfqueueJs.rps.toFixed(0).padStart(14)} ${s.ratioRps.toFixed(2).padStart(6)} ${s.kernel.pps.toFixed(0).padStart(14)} ${s.nfqueueJs.pps.toFixed(0).padStart(14)} ${s.ratioPps.toFixed(2).padStart(6)}`,
  );
}
console.log(`mean packets per batch: ${(totalPackets / Math.max(totalBatches, 1)).toFixed(2)}; wrk errors: ${samples.reduce((s, x) => s + x.errors, 0)}`);

const cpuModel = cpus()[0]?.model ?? 'unknown';
const result = {
  benchmark: 'nfqueue',
  date: new Date().toISOString(),
  machine: { hostname: hostname(), kernel: release(), cpus: cpus().length, cpuModel, node: process.version, debian: readFileSync('/etc/debian_version', 'utf8').trim() },
  settings: { seconds, rounds, wrk: '-t1 -c32', topology: 'client -> front (forwarding) -> 1 nginx server' },
  summary,
  meanPacketsPerBatch: totalPackets / Math.max(totalBatches, 1),
  samples,
};
const outDir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
mkdirSync(outDir, { recursive: true });
writeFileSync(`${outDir}nfqueue.json`, JSON.stringify(result, null, 2) + '\n');
console.log(`results: bench/results/nfqueue.json (${run('date', ['-u', '+%F']).trim()})`);
