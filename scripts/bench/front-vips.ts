/**
 * Benchmark (issue 22, acceptance 4): `sluice front` with 1,000 VIPs x 100
 * servers against the same node with one VIP, in alternating rounds on the
 * front benchmark's testbed (1 client, a front node, 2 nginx servers).
 *
 *   one   one TCP service: the VIP 198.19.1.1:80 and the 2 real servers
 *   many  the same service plus 999 services of 100 servers each (VIPs in
 *         198.19.10.0/22.., servers 198.18.204.1-100 on ports 8000+i: the
 *         LAN never sees them, and they never get traffic)
 *
 * Per round and mode: the daemon's start (spawn to its "front node ready"
 * line: Node's start-up plus rule install), new connections/s (wrk -t2 -c64
 * Connection: close, after the front bench's warm-up), the daemon's CPU
 * share, and a reload (the file changed so one service's rules change; the
 * admin socket's `reload` answers after the new rules are installed, so its
 * round trip is the reload time). Reported: the median of the per-round
 * ratios many/one and their spread, the start and reload times, the RSS.
 * Then scripts/bench/front-rules-install.ts for 1000 x 100 (raw install,
 * reinstall and read-back times, in a scratch namespace).
 *
 *   node scripts/bench/front-vips.ts [--rounds 3] [--seconds 5] [--services 1000] [--servers 100] [--syn-path queue|kernel]
 * Prints a table, writes bench/results/front-vips.json (`--syn-path
 * kernel`, every service on the kernel SYN schedule: front-vips-kernel.json).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { adminRequest } from '../../src/admin/client.ts';
import { down, up } from '../testbed/testbed.ts';
import { runIn, sleepSync } from '../testbed/sh.ts';
import { parseWrk, type WrkResult } from './wrk.ts';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    services: { type: 'string', default: '1000' },
    servers: { type: 'string', default: '100' },
    'syn-path': { type: 'string', default: 'queue' },
  },
});
const synPath = values['syn-path'];
if (synPath !== 'queue' && synPath !== 'kernel') throw new Error('--syn-path is queue or kernel');
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const nServices = Number(values.services);
const nServers = Number(values.servers);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VIP = '198.19.1.1';

const prefix = `bfv${randomBytes(2).toString('hex')}`;
process.on('exit', () => {
  down(prefix);
});
process.on('SIGINT', () => process.exit(130));
const st = up({ prefix, clients: 1, clusters: 1, serversPerCluster: 2, extraClientAddresses: 8, delaysMs: { '1:1': 0 } });
const k = st.plan.clusters[0];
const c = st.plan.clients[0];
if (!k || !c) throw new Error('bad plan');
const fr = k.front.name;
const cl = c.name;
runIn(fr, 'sysctl', ['-q', '-w', 'net.netfilter.nf_conntrack_tcp_timeout_time_wait=1', 'net.netfilter.nf_conntrack_tcp_timeout_syn_sent=5']);

const socket = join(st.runDir, 'front.sock');
const uplink = k.uplinkAddress;
const www = { name: 'www', vip: VIP, port: 80, method: 'byrequests', synPath, servers: k.servers.map((s, i) => ({ name: `s${String(i)}`, address: s.address })) };
/** The config of a mode; `variant` moves the last service's port, so that a reload changes rules. */
function config(many: boolean, variant: number): string {
  const others = many
    ? Array.from({ length: nServices - 1 }, (_, i) => ({
        name: `svc${String(i)}`,
        vip: `198.19.${String(10 + Math.floor(i / 250))}.${String((i % 250) + 1)}`,
        port: i === nServices - 2 ? 80 + variant : 80,
        method: 'byrequests',
        synPath,
        // SYN cookies need a local route per VIP (checked at start); these
        // VIPs get no traffic, and www's path is the same in both modes.
        synproxy: false,
        servers: Array.from({ length: nServers }, (_, s) => ({ name: `f${String(s)}`, address: `198.18.${String(204 + (s >> 7))}.${String((s & 0x7f) + 1)}`, port: 8000 + (i % 1000) })),
      }))
    : [];
  return JSON.stringify({ cluster: 'c1', uplinkAddress: uplink, adminSocket: socket, services: [www, ...others] });
}
const cfgFile = join(st.runDir, 'front.json.yaml');

let child: ChildProcess | undefined;
/** The "front node ready" line's startupMs (ms since the daemon's process began: config loaded, rules rendered, installed, ready). */
let startup: Record<string, number> = {};
/** Resolves with the ms from ready to the writer's "fallback map filled" line (a large table's deferred fill). */
let filled: Promise<number> = Promise.resolve(0);
/** Resolves with the ms from ready to the schedule writer's "kernel schedule filled" line (--syn-path kernel: a large schedule's deferred fill). */
let scheduleFilled: Promise<number> = Promise.resolve(0);
/** Starts the daemon on `cfg`; resolves with the ms from spawn to its "front node ready" line. */
async function start(cfg: string): Promise<number> {
  writeFileSync(cfgFile, cfg);
  const t0 = performance.now();
  const ch = spawn('ip', ['netns', 'exec', fr, join(ROOT, 'bin/sluice'), 'front', '--config', cfgFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  child = ch;
  const lines = createInterface({ input: ch.stderr });
  let readyAt = 0;
  // ms from ready to a line (0 if it came first).
  const after = (text: string): Promise<number> =>
    new Promise<number>((resolve) => {
      lines.on('line', (l) => {
        if (l.includes(text)) resolve(readyAt === 0 ? 0 : performance.now() - readyAt);
      });
    });
  filled = after('fallback map filled');
  scheduleFilled = after('kernel schedule filled');
  return new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => {
      reject(new Error('sluice front did not start within 60 s'));
    }, 60_000);
    lines.on('line', (l) => {
      if (l.includes('front node ready')) {
        readyAt = performance.now();
        clearTimeout(t);
        try {
          startup = (JSON.parse(l) as { startupMs?: Record<string, number> }).startupMs ?? {};
        } catch {
          startup = {};
        }
        resolve(performance.now() - t0);
      }
    });
    ch.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`sluice front exited ${String(code)} before ready`));
    });
  });
}
async function stop(): Promise<void> {
  const ch = child;
  if (!ch) return;
  const done = new Promise((r) => ch.once('exit', r));
  ch.kill('SIGTERM');
  await done;
  child = undefined;
}
function frontPid(): number {
  return Number(execFileSync('ip', ['netns', 'pids', fr], { encoding: 'utf8' }).trim().split('\n')[0]);
}
/** /proc/PID/FILE of the daemon; a daemon that exited mid-round is said so, not as a bare ENOENT. */
function procOf(p: number, file: 'stat' | 'status'): string {
  try {
    return readFileSync(`/proc/${String(p)}/${file}`, 'utf8');
  } catch (err) {
    throw new Error(`the sluice front daemon (pid ${String(p)}) is gone mid-round: see its log above (${(err as Error).message})`, { cause: err });
  }
}
function cpuSeconds(p: number): number {
  const f = procOf(p, 'stat').split(') ')[1]?.split(' ') ?? [];
  return (Number(f[11]) + Number(f[12])) / 100;
}
function rssMiB(p: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(procOf(p, 'status'))?.[1] ?? NaN) / 1024;
}
function wrk(args: string[]): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const w = spawn('ip', ['netns', 'exec', cl, 'wrk', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    w.stdout.on('data', (d: Buffer) => (out += d.toString()));
    w.on('close', () => {
      const r = parseWrk(out);
      if (r) resolve(r);
      else reject(new Error(`wrk: ${out}`));
    });
  });
}
function med(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

interface Sample {
  mode: 'one' | 'many';
  round: number;
  startMs: number;
  rps: number;
  errors: number;
  daemonCpuShare: number;
  reloadMs: number;
  rssMiB: number;
  /** The daemon's own figures (ms since its process began): configLoaded, constructed, renderBegin, rendered, installed, ready. */
  startupMs: Record<string, number>;
  /** From ready until the fallback map's deferred fill was written (0: filled by the install itself). */
  fallbackFillMs: number;
  /** From ready until the kernel schedule's deferred fill was written (0: none, or filled by the install). */
  scheduleFillMs: number;
}
const samples: Sample[] = [];
for (let r = 1; r <= rounds; r++) {
  for (const mode of ['one', 'many'] as const) {
    const startMs = await start(config(mode === 'many', 0));
    // A large table's fallback map is filled after ready (nft.ts FALLBACK_INLINE_MAX): how long until it is in place.
    // The measurement starts after it (the steady state); a small table has it from the install (0).
    const fallbackFillMs = mode === 'many' ? await Promise.race([filled, new Promise<number>((_, rej) => {
            setTimeout(() => {
              rej(new Error('the fallback map was not filled within 60 s'));
            }, 60_000).unref();
          })]) : 0;
    // Likewise the kernel schedule's slots (nft.ts SCHEDULE_INLINE_MAX; SYNs are queued until then).
    const scheduleFillMs = mode === 'many' && synPath === 'kernel' ? await Promise.race([scheduleFilled, new Promise<number>((_, rej) => {
            setTimeout(() => {
              rej(new Error('the kernel schedule was not filled within 60 s'));
            }, 60_000).unref();
          })]) : 0;
    const boot = startup;
    await wrk(['-t1', '-c8', '-d2s', '-H', 'Connection: close', `http://${VIP}/`]);
    const pid = frontPid();
    const c0 = cpuSeconds(pid);
    const t0 = performance.now();
    const res = await wrk(['-t2', '-c64', `-d${String(seconds)}s`, '-H', 'Connection: close', `http://${VIP}/`]);
    const cpuShare = (cpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000);
    writeFileSync(cfgFile, config(mode === 'many', r));
    const tr = performance.now();
    const reply = await adminRequest(socket, { cmd: 'reload' }, 60_000);
    const reloadMs = performance.now() - tr;
    if (reply.ok !== true) throw new Error(`reload refused: ${JSON.stringify(reply)}`);
    const rss = rssMiB(pid);
    samples.push({ mode, round: r, startMs, rps: res.rps, errors: res.errors, daemonCpuShare: cpuShare, reloadMs, rssMiB: rss, startupMs: boot, fallbackFillMs, scheduleFillMs });
    const install = (boot['installed'] ?? NaN) - (boot['renderBegin'] ?? NaN);
    console.error(`round ${String(r)} ${mode.padEnd(4)} start ${startMs.toFixed(0)} ms (${JSON.stringify(boot)}; render+install ${install.toFixed(0)} ms; fallback filled ${fallbackFillMs.toFixed(0)} ms after ready; schedule filled ${scheduleFillMs.toFixed(0)} ms after ready), ${res.rps.toFixed(0)} new conn/s (errors ${String(res.errors)}), daemon ${(cpuShare * 100).toFixed(1)}% CPU, reload ${reloadMs.toFixed(0)} ms, RSS ${rss.toFixed(0)} MiB`);
    await stop();
    sleepSync(1500); // TIME_WAIT (1 s here) drains between modes
  }
}

const of = (mode: string, f: 'rps' | 'startMs' | 'reloadMs' | 'rssMiB'): number[] => samples.filter((s) => s.mode === mode).map((s) => s[f]);
function installs(mode: string): number[] {
  return samples.filter((s) => s.mode === mode).map((s) => (s.startupMs['installed'] ?? NaN) - (s.startupMs['renderBegin'] ?? NaN));
}
const ratios = Array.from({ length: rounds }, (_, i) => (samples.find((s) => s.mode === 'many' && s.round === i + 1)?.rps ?? NaN) / (samples.find((s) => s.mode === 'one' && s.round === i + 1)?.rps ?? NaN));
const summary = {
  rpsOne: med(of('one', 'rps')),
  rpsMany: med(of('many', 'rps')),
  ratioMedian: med(ratios),
  ratioMin: Math.min(...ratios),
  ratioMax: Math.max(...ratios),
  ratioPerRound: ratios,
  startMsOne: med(of('one', 'startMs')),
  startMsMany: med(of('many', 'startMs')),
  reloadMsOne: med(of('one', 'reloadMs')),
  reloadMsMany: med(of('many', 'reloadMs')),
  reloadMsManyMax: Math.max(...of('many', 'reloadMs')),
  rssMiBOne: med(of('one', 'rssMiB')),
  rssMiBMany: med(of('many', 'rssMiB')),
  /** The daemon's render and rule install at start (its own clock). */
  installMsOne: med(installs('one')),
  installMsMany: med(installs('many')),
  installMsManyMax: Math.max(...installs('many')),
  /** Ready until the deferred fallback fill was written. */
  fallbackFillMsMany: med(samples.filter((s) => s.mode === 'many').map((s) => s.fallbackFillMs)),
  fallbackFillMsManyMax: Math.max(...samples.filter((s) => s.mode === 'many').map((s) => s.fallbackFillMs)),
  /** Ready until the deferred kernel-schedule fill was written (--syn-path kernel). */
  scheduleFillMsMany: med(samples.filter((s) => s.mode === 'many').map((s) => s.scheduleFillMs)),
  scheduleFillMsManyMax: Math.max(...samples.filter((s) => s.mode === 'many').map((s) => s.scheduleFillMs)),
};
console.error(`raw rule install (scripts/bench/front-rules-install.ts --services ${String(nServices)} --servers ${String(nServers)}):`);
const rawInstall = execFileSync(process.execPath, [join(ROOT, 'scripts/bench/front-rules-install.ts'), '--services', String(nServices), '--servers', String(nServers), '--prefix', `${prefix}r`], { encoding: 'utf8' }).trim();
console.error(rawInstall);

console.log(`\nsluice front with ${String(nServices)} VIPs x ${String(nServers)} servers (many) vs one VIP (one), ${String(rounds)} alternating round(s) of ${String(seconds)} s`);
console.log(`new conn/s   one ${summary.rpsOne.toFixed(0)}, many ${summary.rpsMany.toFixed(0)}; many/one median of per-round ratios ${summary.ratioMedian.toFixed(3)} (rounds ${ratios.map((x) => x.toFixed(2)).join(' ')})  target >= 0.95`);
console.log(`start        one ${summary.startMsOne.toFixed(0)} ms, many ${summary.startMsMany.toFixed(0)} ms (spawn to ready: Node start-up + rule install)  install target < 2 s`);
console.log(`reload       one ${summary.reloadMsOne.toFixed(0)} ms, many ${summary.reloadMsMany.toFixed(0)} ms (max ${summary.reloadMsManyMax.toFixed(0)}; admin request until the new rules are installed)  target < 2 s`);
console.log(`install      one ${summary.installMsOne.toFixed(0)} ms, many ${summary.installMsMany.toFixed(0)} ms (max ${summary.installMsManyMax.toFixed(0)}; the daemon's render + nft + iptables at start); fallback map filled ${summary.fallbackFillMsMany.toFixed(0)} ms after ready (max ${summary.fallbackFillMsManyMax.toFixed(0)})${synPath === 'kernel' ? `; kernel schedule filled ${summary.scheduleFillMsMany.toFixed(0)} ms after ready (max ${summary.scheduleFillMsManyMax.toFixed(0)})` : ''}`);
console.log(`RSS          one ${summary.rssMiBOne.toFixed(0)} MiB, many ${summary.rssMiBMany.toFixed(0)} MiB`);
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
const resultFile = `bench/results/front-vips${synPath === 'kernel' ? '-kernel' : ''}.json`;
writeFileSync(
  join(ROOT, resultFile),
  JSON.stringify({ benchmark: 'front-vips', date: new Date().toISOString(), machine: { kernel: release(), cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version }, settings: { rounds, seconds, services: nServices, servers: nServers, synPath, wrk: '-t2 -c64 Connection: close' }, summary, rawInstall: rawInstall.split('\n'), samples }, null, 2) + '\n',
);
console.log(`results: ${resultFile}`);
