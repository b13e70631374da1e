/**
 * Throttling master benchmark (npm run bench:throttle): accounting messages
 * per second one master process handles end to end (CURVE over loopback ->
 * checked decode -> GCRA charge in the store -> DELAY_UNTIL published when
 * due), with the state in memory, in Redis (our one Lua script per charge),
 * and in Redis with Smockron's own script and call pattern.
 *
 * Setup: a private redis-server on loopback; per run a fresh master process
 * (scripts/bench/throttle-master.ts); this process is the gatekeeper side,
 * one PUB socket sending ACCEPTED as fast as it can for 1,000 client
 * identifiers round robin (rule 1/s, burst 5: every identifier is past its
 * burst within the first second, so nearly every message publishes a
 * DELAY_UNTIL, the costly case, in every mode alike).
 * The rate is the master's completed charges over the steady part of the
 * run (first second and last half second left out), read from its
 * counters; offered load is shown beside it so saturation is visible.
 * Modes alternate round by round; medians are reported.
 *
 * Smockron: its master cannot run here (zmq@2.5 and hiredis@0.1 are
 * native addons written against the V8 API of Node 0.8-0.10, long removed;
 * they do not build on Node 24 or on Debian's Node). What can be measured
 * the same way is its Redis-script approach: the script text is read at
 * run time from a Smockron git checkout (SMOCKRON_GIT, default the
 * workplace mirror) and run by the same master with Smockron's call
 * pattern. Without a checkout the comparison is skipped and the reason
 * printed.
 *
 * Options: --rounds N (3), --seconds S (6). Writes bench/results/throttle.json.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Publisher } from 'zeromq';
import { readKeyPair, writeKeyPair } from '../../src/control/keys.ts';
import { topicOf } from '../../src/throttle/protocol.ts';
import { RedisServer } from '../testbed/redis.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '6' } } });
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const NODE = process.execPath;
const MASTER = fileURLToPath(new URL('./throttle-master.ts', import.meta.url));
const SMOCKRON_GIT = process.env['SMOCKRON_GIT'] ?? '/work/.mirror/arodland+smockron/repo/.git';
const IDENTIFIERS = 1000;
const RULE = { name: 'www', requests: 1, periodSeconds: 1, burst: 5 };

type Mode = 'memory' | 'redis' | 'smockron';

/** Smockron's Lua script, read from its datastore.js at run time (the array of lines joined by "\n"). */
function smockronLua(): { lua?: string; commit?: string; why?: string } {
  if (!existsSync(SMOCKRON_GIT)) return { why: `no Smockron checkout at ${SMOCKRON_GIT} (set SMOCKRON_GIT to a clone's .git)` };
  try {
    const src = execFileSync('git', ['--git-dir', SMOCKRON_GIT, 'show', 'HEAD:lib/smockron/master/datastore.js'], { encoding: 'utf8' });
    const commit = execFileSync('git', ['--git-dir', SMOCKRON_GIT, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    const block = /_luaScript\s*=\s*\[([\s\S]*?)\]\.join\(\s*"\\n"\s*\)/.exec(src)?.[1];
    if (block === undefined) return { why: 'the script array was not found in lib/smockron/master/datastore.js' };
    const lines = [...block.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1] ?? ''}"`) as string);
    return { lua: lines.join('\n'), commit };
  } catch (err) {
    return { why: `cannot read the Smockron checkout: ${(err as Error).message}` };
  }
}

function cpuSeconds(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / 100;
  } catch {
    return NaN;
  }
}

interface Sample {
  t: number;
  received: number;
  charged: number;
  storeErrors: number;
  rejected: number;
  published: number;
}

interface RunResult {
  mode: Mode;
  round: number;
  perSecond: number;
  offeredPerSecond: number;
  publishedPerSecond: number;
  storeErrors: number;
  decodeRejected: number;
  masterCores: number;
  redisCores: number | null;
  /** Messages per CPU-second of the master process: less sensitive to other load on a shared machine. */
  perMasterCore: number;
}

// Not 40 characters long: src/control/keys.ts takes any 40-character z85-looking
// string for an inline key, so a key file path of that length is misread.
const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-throttle-keys-'));
const masterKeys = writeKeyPair(dir, 'master');
const gkKeys = writeKeyPair(dir, 'gk');
const gk = readKeyPair(gkKeys.keyFile);
let port = 49500 + Math.floor(Math.random() * 1000);

async function run(mode: Mode, round: number, redis: RedisServer, lua: string | undefined): Promise<RunResult> {
  const endpoint = `tcp://127.0.0.1:${port++}`;
  const config = {
    name: 'bench',
    adminSocket: join(dir, 'master.sock'),
    control: { keyFile: masterKeys.keyFile, allow: [gkKeys.pubFile] },
    accounting: { listen: endpoint },
    publish: { listen: `tcp://127.0.0.1:${port++}` },
    store: mode === 'memory' ? { kind: 'memory' } : { kind: 'redis', host: '127.0.0.1', port: redis.port, keyPrefix: `bench${round}${mode}:` },
    domains: [RULE],
  };
  const child = spawn(NODE, ['--disable-warning=ExperimentalWarning', MASTER, JSON.stringify({ config, store: mode, smockronLua: lua, burst: RULE.burst })], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' } });
  const childPid = child.pid ?? -1;
  const redisPid = redis.child.pid ?? -1;
  const samples: Sample[] = [];
  let ready!: () => void;
  const isReady = new Promise<void>((r) => (ready = r));
  createInterface({ input: child.stdout }).on('line', (l) => {
    const o = JSON.parse(l) as Sample & { ready?: boolean };
    if (o.ready === true) ready();
    else samples.push(o);
  });
  await isReady;
  const pub = new Publisher({ curveServerKey: masterKeys.publicKey, curvePublicKey: gk.publicKey, curveSecretKey: gk.secretKey, sendHighWaterMark: 100_000, linger: 0 });
  pub.connect(endpoint);
  await new Promise((r) => setTimeout(r, 500)); // handshake and subscription propagation
  const topic = Buffer.from(topicOf(RULE.name), 'latin1');
  const kind = Buffer.from('ACCEPTED');
  const ids = Array.from({ length: IDENTIFIERS }, (_, i) => Buffer.from(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`));
  const start = performance.now();
  const cpu0 = { master: cpuSeconds(childPid), redis: cpuSeconds(redisPid) };
  let sent = 0;
  let ts = Buffer.from(String(Date.now()));
  const end = start + seconds * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) {
      await pub.send([topic, kind, ids[sent % IDENTIFIERS] ?? kind, ts]);
      sent++;
    }
    ts = Buffer.from(String(Date.now()));
  }
  const elapsed = (performance.now() - start) / 1000;
  const cpu1 = { master: cpuSeconds(childPid), redis: cpuSeconds(redisPid) };
  await new Promise((r) => setTimeout(r, 300));
  pub.close();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  // Steady part: from 1 s after the first charge to 0.5 s before the load stopped.
  const first = samples.find((s) => s.charged > 0);
  if (!first) throw new Error(`${mode}: the master charged nothing; last counters ${JSON.stringify(samples.at(-1))}`);
  const lo = samples.find((s) => s.t >= first.t + 1000) ?? first;
  const stopAt = first.t + (seconds - 1) * 1000;
  const last = samples.at(-1) ?? first;
  const hi = [...samples].reverse().find((s) => s.t <= stopAt) ?? last;
  const span = (hi.t - lo.t) / 1000;
  return {
    mode,
    round,
    perSecond: (hi.charged - lo.charged) / span,
    offeredPerSecond: sent / elapsed,
    publishedPerSecond: (hi.published - lo.published) / span,
    storeErrors: last.storeErrors,
    decodeRejected: last.rejected,
    masterCores: (cpu1.master - cpu0.master) / elapsed,
    perMasterCore: (hi.charged - lo.charged) / span / Math.max(0.01, (cpu1.master - cpu0.master) / elapsed),
    redisCores: mode === 'memory' ? null : (cpu1.redis - cpu0.redis) / elapsed,
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
};

const smock = smockronLua();
const modes: Mode[] = smock.lua !== undefined ? ['memory', 'redis', 'smockron'] : ['memory', 'redis'];
const redis = await RedisServer.start(port++);
const redisVersion = execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).trim();
const results: RunResult[] = [];
try {
  for (let r = 1; r <= rounds; r++) {
    for (const mode of modes) {
      const res = await run(mode, r, redis, smock.lua);
      results.push(res);
      console.error(`round ${r} ${mode}: ${res.perSecond.toFixed(0)} msg/s (offered ${res.offeredPerSecond.toFixed(0)}/s)`);
    }
  }
} finally {
  redis.stop();
}

const summary = Object.fromEntries(
  modes.map((m) => {
    const rs = results.filter((x) => x.mode === m);
    return [m, { perSecond: median(rs.map((x) => x.perSecond)), offeredPerSecond: median(rs.map((x) => x.offeredPerSecond)), publishedPerSecond: median(rs.map((x) => x.publishedPerSecond)), masterCores: median(rs.map((x) => x.masterCores)), perMasterCore: median(rs.map((x) => x.perMasterCore)), redisCores: m === 'memory' ? null : median(rs.map((x) => x.redisCores ?? NaN)), storeErrors: Math.max(...rs.map((x) => x.storeErrors)) }];
  }),
) as Record<Mode, { perSecond: number; offeredPerSecond: number; publishedPerSecond: number; masterCores: number; perMasterCore: number; redisCores: number | null; storeErrors: number }>;
const ratio = modes.includes('smockron') ? summary.redis.perSecond / summary.smockron.perSecond : null;
const ratioPerCore = modes.includes('smockron') ? summary.redis.perMasterCore / summary.smockron.perMasterCore : null;

console.log(`\nThrottling master: accounting messages/s one master process handles (CURVE over loopback, ${IDENTIFIERS} identifiers, rule ${RULE.requests}/${RULE.periodSeconds}s burst ${RULE.burst})`);
console.log(`${rounds} rounds of ${seconds} s per mode, medians; ${cpus().length} cores shared by the load generator, the master, ${redisVersion.split(' ').slice(0, 3).join(' ')} and whatever else runs (load average now ${loadavg().map((x) => x.toFixed(1)).join(' ')})\n`);
console.log('mode                     msg/s  msg/master-core-s    offered/s  DELAY_UNTIL/s  master cores  redis cores  store errors');
const label: Record<Mode, string> = { memory: 'memory', redis: 'redis (sluice script)', smockron: 'redis (Smockron script)' };
for (const m of modes) {
  const s = summary[m];
  console.log(`${label[m].padEnd(23)} ${s.perSecond.toFixed(0).padStart(7)} ${s.perMasterCore.toFixed(0).padStart(18)} ${s.offeredPerSecond.toFixed(0).padStart(12)} ${s.publishedPerSecond.toFixed(0).padStart(14)} ${s.masterCores.toFixed(2).padStart(13)} ${(s.redisCores === null ? '-' : s.redisCores.toFixed(2)).padStart(12)} ${String(s.storeErrors).padStart(13)}`);
}
if (ratio !== null && ratioPerCore !== null) console.log(`\nratio sluice Redis script / Smockron Redis script: ${ratio.toFixed(2)} msg/s, ${ratioPerCore.toFixed(2)} per master core (Smockron ${smock.commit?.slice(0, 12) ?? '?'}; same master, sockets and Redis client, only the script and its arguments differ)`);
else console.log(`\nSmockron comparison not run: ${smock.why ?? 'unknown reason'}`);
console.log('Smockron\'s own master was not run: its zmq@2.5 and hiredis@0.1 addons target the V8 API of Node 0.8-0.10 and do not build on Node 24.');

mkdirSync('bench/results', { recursive: true });
writeFileSync(
  'bench/results/throttle.json',
  `${JSON.stringify({ date: new Date().toISOString(), rounds, seconds, identifiers: IDENTIFIERS, rule: RULE, redis: redisVersion, cores: cpus().length, smockron: smock.lua !== undefined ? { commit: smock.commit, script: 'lib/smockron/master/datastore.js _luaScript' } : { skipped: smock.why }, summary, ratioSluiceOverSmockron: ratio, ratioPerMasterCore: ratioPerCore, loadAverage: loadavg(), runs: results }, null, 2)}\n`,
);
console.log('wrote bench/results/throttle.json');
