/**
 * Benchmark (issue 22, acceptance 5): `sluice front` with a million
 * tracked flows that end while new connections are decided.
 *
 * On the front benchmark's testbed (1 client, a front node, 2 nginx
 * servers), in the front node's namespace:
 *  1. --flows ESTABLISHED flows to the VIP are inserted into conntrack
 *     (`conntrack -R`; reply from one of the servers, as DNAT leaves them;
 *     net.netfilter.nf_conntrack_events=1 there, so each flow has the event
 *     extension and reports its end), with timeouts spread so they end
 *     between --end-from and --end-from + --end-over seconds after insertion.
 *  2. The daemon starts and adopts a record per flow (its start reads the
 *     kernel's table; these records are "legacy": the daemon cannot tell
 *     they report their end, so its resync reads the whole table every
 *     reconcileSeconds (30) while any remain: a 1M-line read under load).
 *  3. wrk opens new connections (Connection: close) through the VIP for
 *     the whole time the flows end, and some seconds around it.
 *
 * Watched, each from one clock (this process's):
 *  - SYN decisions per second (the daemon's `decided` counter, sampled each
 *    second): they must continue while the flows end;
 *  - the longest event-loop stall (prom-client's nodejs_eventloop_lag_max_seconds,
 *    from the daemon's /metrics once a second; it resets at each scrape);
 *  - the RSS (VmRSS, sampled);
 *  - how far the daemon's freeing lags the kernel's destroy events: an
 *    observer in the namespace (its own ctnetlink listener) reports how many
 *    destroy events of ours it has read, every 20 ms; the daemon's count of
 *    events read (status flowEnds.events) is sampled every 100 ms; the lag
 *    at a sample is how long ago the observer had read as many. (Each event
 *    frees its record in the same batch callback that counts it.)
 *
 * The kernel's conntrack limits are global: nf_conntrack_max and the hash
 * size are raised for the run and put back at exit.
 *
 * With --load-cpus LIST the load generator, the servers, the observer and
 * this process run on those CPUs only (taskset) and the daemon has the
 * others to itself, as on a front node whose clients and servers are other
 * machines; without it everything shares both cores, so the daemon's loop
 * also waits for a core behind wrk and nginx (measured: its longest turns
 * of its own CPU are a few ms while the wall-clock stall reads 8-12 ms).
 *
 *   node scripts/bench/front-flows.ts [--flows 1000000] [--end-from 45] [--end-over 30] [--syn-path queue|kernel] [--load-cpus LIST] [--rt-priority N] [--cpu-prof DIR]
 * Wrap it in `flock /tmp/sluice-netns.lock` on shared machines. Prints a
 * table, writes bench/results/front-flows.json (front-flows-rt.json with
 * --rt-priority, -load-cpus with --load-cpus).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { adminRequest } from '../../src/admin/client.ts';
import { ConntrackEvents } from '../../src/conntrack/events.ts';
import { down, up } from '../testbed/testbed.ts';
import { runIn } from '../testbed/sh.ts';
import { parseWrk, type WrkResult } from './wrk.ts';

const { values } = parseArgs({
  options: {
    flows: { type: 'string', default: '1000000' },
    'end-from': { type: 'string', default: '45' },
    'end-over': { type: 'string', default: '30' },
    observer: { type: 'boolean', default: false },
    // Confines the load (wrk, the nginx servers, the event observer and
    // this process) to these CPUs (taskset list, e.g. 0), leaving the rest
    // to the daemon, as on a front node whose clients and servers are other
    // machines. Default: everything shares every CPU.
    'load-cpus': { type: 'string' },
    // The service's SYN path: queue (every SYN decided from NFQUEUE, the
    // node's default) or kernel (the kernel schedule, `synPath: kernel`).
    'syn-path': { type: 'string', default: 'queue' },
    // The daemon under SCHED_RR at this priority (chrt --reset-on-fork -r; the unit's
    // realtime drop-in, deploy/systemd/sluice-front-realtime.conf). 0: the
    // default policy.
    'rt-priority': { type: 'string', default: '0' },
    // A V8 CPU profile of the daemon (100 µs sampling) written to this directory when the run ends: scripts/bench/prof-turns.ts finds its longest turns.
    'cpu-prof': { type: 'string' },
  },
});
const FLOWS = Number(values.flows);
const END_FROM = Number(values['end-from']);
const END_OVER = Number(values['end-over']);
/** Records left (wrk's connections' and a few stragglers) below which the inserted flows count as reaped. */
const REAPED_RECORDS = 1000;
const LOAD_CPUS = values['load-cpus'];
if (LOAD_CPUS !== undefined && !/^\d+([-,]\d+)*$/.test(LOAD_CPUS)) throw new Error(`--load-cpus ${LOAD_CPUS}: a taskset CPU list such as 0 or 0-1`);
/** argv prefixed to run on the load's CPUs (none without --load-cpus). */
const onLoadCpus = (argv: string[]): string[] => (LOAD_CPUS === undefined ? argv : ['taskset', '-c', LOAD_CPUS, ...argv]);
/** Moves every thread of `pid` to the load's CPUs. */
function pinToLoad(pid: number): void {
  if (LOAD_CPUS !== undefined) execFileSync('taskset', ['-a', '-p', '-c', LOAD_CPUS, String(pid)], { stdio: 'ignore' });
}
const SYN_PATH = values['syn-path'];
if (SYN_PATH !== 'queue' && SYN_PATH !== 'kernel') throw new Error(`--syn-path ${SYN_PATH}: queue or kernel`);
const RT_PRIORITY = Number(values['rt-priority']);
if (!Number.isInteger(RT_PRIORITY) || RT_PRIORITY < 0 || RT_PRIORITY > 99) throw new Error(`--rt-priority ${values['rt-priority']}: 0 (the default policy) or a SCHED_RR priority 1-99`);
const RESULTS = `front-flows${SYN_PATH === 'kernel' ? '-kernel' : ''}${RT_PRIORITY > 0 ? '-rt' : ''}${LOAD_CPUS !== undefined ? '-load-cpus' : ''}.json`;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const VIP = '198.19.1.1';
const MARK_TAG = 0x51;

if (values.observer) {
  // In the front namespace: count destroy events of our flows (mark tag 0x51), report every 20 ms.
  let ours = 0;
  const ev = ConntrackEvents.open({
    maxBatch: 1024,
    receiveBufferBytes: 64 << 20,
    onBatch(b) {
      for (let i = 0; i < b.count; i++) if (b.mark(i) >>> 24 === MARK_TAG) ours++;
    },
    onError(err) {
      console.error(err);
    },
  });
  console.log('ready');
  setInterval(() => {
    console.log(`${String(ours)} ${String(ev.stats().overruns)}`);
  }, 20);
} else {
  await main();
}

async function main(): Promise<void> {
  const sysctl = (name: string): string => readFileSync(`/proc/sys/${name.replaceAll('.', '/')}`, 'utf8').trim();
  const hashsizePath = '/sys/module/nf_conntrack/parameters/hashsize';
  const saved = { max: sysctl('net.netfilter.nf_conntrack_max'), hashsize: readFileSync(hashsizePath, 'utf8').trim() };
  const prefix = `bff${randomBytes(2).toString('hex')}`;
  const children: ChildProcess[] = [];
  process.on('exit', () => {
    for (const ch of children) ch.kill('SIGKILL');
    down(prefix);
    writeFileSync('/proc/sys/net/netfilter/nf_conntrack_max', saved.max);
    writeFileSync(hashsizePath, saved.hashsize);
  });
  process.on('SIGINT', () => process.exit(130));
  // timeout(1) and a CI runner stop with SIGTERM: the namespaces and sysctls go too.
  process.on('SIGTERM', () => process.exit(143));
  // Room for the flows, wrk's and the servers' (the servers' namespaces count against the same global limit).
  writeFileSync('/proc/sys/net/netfilter/nf_conntrack_max', String(Math.max(Number(saved.max), FLOWS * 2 + 200_000)));
  writeFileSync(hashsizePath, String(Math.max(Number(saved.hashsize), 1 << Math.ceil(Math.log2(FLOWS)))));

  const st = up({ prefix, clients: 1, clusters: 1, serversPerCluster: 2, delaysMs: { '1:1': 0 } });
  const k = st.plan.clusters[0];
  const c = st.plan.clients[0];
  if (!k || !c) throw new Error('bad plan');
  const fr = k.front.name;
  runIn(fr, 'sysctl', ['-q', '-w', 'net.netfilter.nf_conntrack_tcp_timeout_time_wait=1', 'net.netfilter.nf_conntrack_events=1']);
  const servers = k.servers.map((s) => s.address);

  // 1. The flows: client 198.18.64.0/18 (host h, port p), to the VIP, replied by server i % 2.
  const t0 = performance.now();
  const ins: string[] = [];
  for (let i = 0; i < FLOWS; i++) {
    const h = Math.floor(i / 50_000);
    const port = 10_000 + (i % 50_000);
    const cl = `198.18.${String(64 + (h >> 8))}.${String((h & 0xff) + 1)}`;
    const srv = servers[i % servers.length] ?? '';
    const timeout = END_FROM + (i % END_OVER);
    ins.push(`-I -p tcp -s ${cl} -d ${VIP} --sport ${String(port)} --dport 80 -r ${srv} -q ${cl} --reply-port-src 80 --reply-port-dst ${String(port)} --state ESTABLISHED -t ${String(timeout)} -m 0x5100000${String(i % servers.length)}`);
  }
  const insFile = join(st.runDir, 'flows.ins');
  writeFileSync(insFile, ins.join('\n') + '\n');
  ins.length = 0;
  execFileSync('ip', ['netns', 'exec', fr, 'sh', '-c', `conntrack -R ${insFile} >/dev/null 2>&1 || true`]);
  const inserted = Number(execFileSync('ip', ['netns', 'exec', fr, 'conntrack', '-C'], { encoding: 'utf8' }).trim());
  const insertSeconds = (performance.now() - t0) / 1000;
  console.error(`${String(inserted)} flows inserted in ${insertSeconds.toFixed(1)} s`);
  if (inserted < FLOWS * 0.99) throw new Error(`only ${String(inserted)} of ${String(FLOWS)} flows inserted`);

  // The observer first: it must be reading before the first flow ends.
  if (LOAD_CPUS !== undefined) {
    for (const srv of k.servers) for (const pid of execFileSync('ip', ['netns', 'pids', srv.name], { encoding: 'utf8' }).split(/\s+/).filter(Boolean)) pinToLoad(Number(pid));
  }
  const [obsCmd = '', ...obsArgs] = onLoadCpus(['ip', 'netns', 'exec', fr, process.execPath, '--no-warnings', fileURLToPath(import.meta.url), '--observer']);
  const obs = spawn(obsCmd, obsArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(obs);
  const obsSamples: { t: number; n: number }[] = [{ t: 0, n: 0 }];
  let obsOverruns = 0;
  await new Promise<void>((resolve) => {
    const lines = createInterface({ input: obs.stdout });
    lines.on('line', (l) => {
      if (l === 'ready') { resolve(); return; }
      const [n, o] = l.split(' ').map(Number);
      obsSamples.push({ t: performance.now(), n: n ?? 0 });
      obsOverruns = o ?? 0;
    });
  });

  // 2. The daemon.
  const socket = join(st.runDir, 'front.sock');
  const cfgFile = join(st.runDir, 'front.json');
  writeFileSync(
    cfgFile,
    JSON.stringify({
      cluster: 'c1',
      uplinkAddress: k.uplinkAddress,
      adminSocket: socket,
      http: { listen: '127.0.0.1:9109' },
      connections: { max: FLOWS + 500_000 },
      services: [{ name: 'www', vip: VIP, port: 80, method: 'byrequests', synproxy: false, synPath: SYN_PATH, servers: k.servers.map((s, i) => ({ name: `s${String(i)}`, address: s.address })) }],
    }),
  );
  const ts = performance.now();
  const profDir = values['cpu-prof'];
  const env = profDir === undefined ? process.env : { ...process.env, NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --cpu-prof --cpu-prof-interval 100 --cpu-prof-dir=${profDir}`.trim() };
  const daemon = spawn('ip', ['netns', 'exec', fr, ...(RT_PRIORITY > 0 ? ['chrt', '--reset-on-fork', '-r', String(RT_PRIORITY)] : []), join(ROOT, 'bin/sluice'), 'front', '--config', cfgFile], { stdio: ['ignore', 'ignore', 'pipe'], env });
  // This process after the daemon's start: a child inherits its parent's CPUs.
  pinToLoad(process.pid);
  children.push(daemon);
  let ready: (v: unknown) => void = () => undefined;
  let failed: (e: Error) => void = () => undefined;
  const readyP = new Promise((r, j) => {
    ready = r;
    failed = j;
  });
  const logLines: string[] = [];
  createInterface({ input: daemon.stderr }).on('line', (l) => {
    if (l.includes('front node ready')) ready(l);
    if (/"level":(4|5)0/.test(l) && logLines.length < 50) logLines.push(l);
  });
  daemon.once('exit', (code) => {
    if (code !== null) console.error(`sluice front exited ${String(code)}`);
    // Before ready nothing else would end the run (it waited for its outer timeout, which left the namespaces).
    failed(new Error(`sluice front exited (${String(code)}) before it was ready: ${logLines.join('\n')}`));
  });
  await readyP;
  const startSeconds = (performance.now() - ts) / 1000;
  // The daemon's node process: an argument exactly `front` (the observer's script name also contains the word).
  const pid = Number(
    execFileSync('ip', ['netns', 'pids', fr], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .find((p) => {
        const argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
        return argv.includes('front') && (argv[0] ?? '').endsWith('node');
      }),
  );
  if (!Number.isInteger(pid) || pid <= 0) throw new Error('the daemon\'s process was not found');
  const status0 = (await adminRequest(socket, { cmd: 'status' }, 10_000)) as { status?: { records?: { active?: number; adopted?: number } } };
  const adopted = status0.status?.records?.adopted ?? 0;
  console.error(`daemon ready in ${startSeconds.toFixed(1)} s, ${String(adopted)} records adopted`);

  // 3. Load and sampling until every flow has ended (+ margin).
  // Each flow's timeout runs from its own insertion, which took insertSeconds.
  const endAt = t0 + (insertSeconds + END_FROM + END_OVER + 10) * 1000;
  const wrkSeconds = Math.max(10, Math.ceil((endAt - performance.now()) / 1000));
  const wrkP = new Promise<WrkResult>((resolve, reject) => {
    const [wCmd = '', ...wArgs] = onLoadCpus(['ip', 'netns', 'exec', c.name, 'wrk', '-t2', '-c32', `-d${String(wrkSeconds)}s`, '-H', 'Connection: close', `http://${VIP}/`]);
    const w = spawn(wCmd, wArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(w);
    let out = '';
    w.stdout.on('data', (d: Buffer) => (out += d.toString()));
    w.on('close', () => {
      const r = parseWrk(out);
      if (r) resolve(r);
      else reject(new Error(`wrk: ${out}`));
    });
  });
  interface Second {
    t: number;
    decided: number;
    active: number;
    lagMaxMs: number;
    lagP99Ms: number;
    /** The daemon's longest loop turn in its thread's CPU time (sluice_front_loop_turn_cpu_max_seconds): its own stall, without the waits for a CPU. */
    turnCpuMaxMs: number;
    rssMiB: number;
    resyncs: number;
  }
  const seconds: Second[] = [];
  const lags: number[] = [];
  let wrkDone = false;
  void wrkP.then(() => (wrkDone = true));
  let lastSecond = performance.now();
  let prevDecided = -1;
  let daemonEvents = 0;
  while (!wrkDone) {
    await new Promise((r) => setTimeout(r, 100));
    const now = performance.now();
    const s = (await adminRequest(socket, { cmd: 'status' }, 10_000)) as { status?: { counters?: Record<string, number>; records?: { active?: number }; flowEnds?: { freed?: number; noRecord?: number; stale?: number; noService?: number; resyncs?: Record<string, number> } } };
    const st2 = s.status;
    const fe = st2?.flowEnds;
    // Destroy events of our flows the daemon has handled (each in the batch callback that read it).
    daemonEvents = (fe?.freed ?? 0) + (fe?.noRecord ?? 0) + (fe?.stale ?? 0) + (fe?.noService ?? 0);
    // The lag: the oldest observer report (taken before the status request
    // was sent) of more events than the daemon had handled when it answered.
    let lag = 0;
    for (let j = obsSamples.length - 1; j >= 0; j--) {
      const o = obsSamples[j];
      if (o === undefined || o.n <= daemonEvents) break;
      if (o.t <= now) lag = now - o.t;
    }
    lags.push(lag);
    if (now - lastSecond >= 1000) {
      lastSecond = now;
      const decided = (st2?.counters?.decided ?? 0);
      const m = execFileSync('ip', ['netns', 'exec', fr, 'curl', '-s', 'http://127.0.0.1:9109/metrics'], { encoding: 'utf8' });
      // The daemon samples its loop every 1 ms (newRegistry(1)): a stall of d ms reads as d to d + 1.
      const lagMax = Number(/^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(m)?.[1] ?? NaN) * 1000;
      const lagP99 = Number(/^nodejs_eventloop_lag_p99_seconds (\S+)/m.exec(m)?.[1] ?? NaN) * 1000;
      const turnCpu = Number(/^sluice_front_loop_turn_cpu_max_seconds (\S+)/m.exec(m)?.[1] ?? NaN) * 1000;
      const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
      const resyncs = Object.values(st2?.flowEnds?.resyncs ?? {}).reduce((a, b) => a + b, 0);
      if (prevDecided >= 0) seconds.push({ t: Math.round((now - t0) / 100) / 10, decided: decided - prevDecided, active: st2?.records?.active ?? 0, lagMaxMs: Math.round(lagMax * 10) / 10, lagP99Ms: Math.round(lagP99 * 10) / 10, turnCpuMaxMs: Math.round(turnCpu * 10) / 10, rssMiB: Math.round(rss), resyncs });
      prevDecided = decided;
      const last = seconds.at(-1);
      if (last) console.error(`t=${last.t.toFixed(1)} s  decided ${String(last.decided)}/s  records ${String(last.active)}  loop max ${last.lagMaxMs.toFixed(1)} ms p99 ${last.lagP99Ms.toFixed(1)} ms turn CPU max ${last.turnCpuMaxMs.toFixed(1)} ms  RSS ${String(last.rssMiB)} MiB  resyncs ${String(resyncs)}  free lag ${lag.toFixed(0)} ms`);
    }
  }
  const res = await wrkP;
  const remaining = Number(execFileSync('ip', ['netns', 'exec', fr, 'sh', '-c', 'conntrack -L 2>/dev/null | grep -c "src=198.18.64." || true'], { encoding: 'utf8' }).trim());
  const statusEnd = (await adminRequest(socket, { cmd: 'status' }, 10_000)) as { status?: { records?: { active?: number; reconciled?: number; ended?: number }; flowEnds?: Record<string, unknown> & { events?: { overruns?: number } } } };

  // While the flows end: from the first timeout until the last inserted flow
  // timed out, or, when later, until the kernel had reaped them (its reaping
  // lags the timeouts by up to ~10 s with a million flows: the daemon's
  // records, wrk's few aside, still falling).
  const reaped = seconds.find((x) => x.t >= END_FROM && x.active < REAPED_RECORDS)?.t ?? Infinity;
  const ending = seconds.filter((x) => x.t >= END_FROM && x.t <= Math.max(END_FROM + END_OVER + insertSeconds, reaped));
  const before = seconds.filter((x) => x.t < END_FROM);
  const summary = {
    flows: inserted,
    insertSeconds: Math.round(insertSeconds * 10) / 10,
    startSeconds: Math.round(startSeconds * 10) / 10,
    adopted,
    wrk: { rps: Math.round(res.rps), errors: res.errors, errorKinds: res.errorKinds, seconds: wrkSeconds },
    decidedPerSecondWhileEnding: { min: Math.min(...ending.map((x) => x.decided)), median: ending.map((x) => x.decided).sort((a, b) => a - b)[Math.floor(ending.length / 2)] ?? 0 },
    loopStallMaxMs: Math.max(...seconds.map((x) => x.lagMaxMs)),
    loopStallMaxMsWhileEnding: Math.max(...ending.map((x) => x.lagMaxMs)),
    // The same load before any flow ended: the machine's own floor (scheduling, GC).
    loopStallMaxMsBeforeEnding: Math.max(...before.map((x) => x.lagMaxMs)),
    loopP99MsWhileEndingMax: Math.max(...ending.map((x) => x.lagP99Ms)),
    // The daemon's own longest turn (CPU time), while the flows end and before.
    loopTurnCpuMaxMsWhileEnding: Math.max(...ending.map((x) => x.turnCpuMaxMs)),
    loopTurnCpuMaxMsBeforeEnding: Math.max(...before.map((x) => x.turnCpuMaxMs)),
    rssMiBMax: Math.max(...seconds.map((x) => x.rssMiB)),
    freeLagMaxMs: Math.round(Math.max(...lags)),
    observerEvents: obsSamples.at(-1)?.n ?? 0,
    observerOverruns: obsOverruns,
    daemonEvents,
    recordsAtEnd: statusEnd.status?.records?.active ?? -1,
    insertedFlowsLeftAtEnd: remaining,
    records: statusEnd.status?.records,
    flowEnds: statusEnd.status?.flowEnds,
    warnings: logLines,
  };
  console.log(`\nsluice front, ${String(inserted)} tracked flows ending over ${String(END_OVER)} s while wrk opens new connections`);
  console.log(`start (adopting ${String(adopted)} records)  ${summary.startSeconds.toFixed(1)} s`);
  console.log(`SYN decisions/s while the flows end    min ${String(summary.decidedPerSecondWhileEnding.min)}, median ${String(summary.decidedPerSecondWhileEnding.median)} (wrk ${String(summary.wrk.rps)} conn/s, ${String(res.errors)} errors${res.errors > 0 ? ` ${JSON.stringify(res.errorKinds)}` : ''})`);
  console.log(`longest event-loop stall               ${summary.loopStallMaxMs.toFixed(1)} ms; while the flows end ${summary.loopStallMaxMsWhileEnding.toFixed(1)} ms (worst per-second p99 ${summary.loopP99MsWhileEndingMax.toFixed(1)} ms), before any ended ${summary.loopStallMaxMsBeforeEnding.toFixed(1)} ms  target <= 10 ms (wall clock, waits for a CPU included)`);
  console.log(`longest loop turn in the daemon's CPU   while the flows end ${summary.loopTurnCpuMaxMsWhileEnding.toFixed(1)} ms, before any ended ${summary.loopTurnCpuMaxMsBeforeEnding.toFixed(1)} ms (its own stall: the thread's CPU time per turn)`);
  console.log(`RSS                                    max ${String(summary.rssMiBMax)} MiB`);
  // After a daemon overrun the count comparison no longer measures freeing:
  // the lost events' records wait for a resync, and the lag then reads how
  // long the observer took to see that many more events.
  const daemonOverruns = statusEnd.status?.flowEnds?.events?.overruns ?? 0;
  console.log(`records freed behind destroy events    max ${String(summary.freeLagMaxMs)} ms  target <= 1000 ms (observer ${String(summary.observerEvents)} events, ${String(obsOverruns)} overruns; daemon ${String(daemonEvents)} events, ${String(daemonOverruns)} overruns${daemonOverruns > 0 ? ': events lost, their records freed by a resync' : ''})`);
  console.log(`at the end: records ${String(summary.recordsAtEnd)}, inserted flows left in conntrack ${String(remaining)}`);
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(
    join(ROOT, `bench/results/${RESULTS}`),
    JSON.stringify({ benchmark: 'front-flows', date: new Date().toISOString(), machine: { kernel: release(), cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version }, settings: { flows: FLOWS, endFrom: END_FROM, endOver: END_OVER, wrk: '-t2 -c32 Connection: close', synPath: SYN_PATH, loadCpus: LOAD_CPUS ?? 'all (shared with the daemon)', daemonScheduling: RT_PRIORITY > 0 ? `SCHED_RR ${String(RT_PRIORITY)}, reset-on-fork` : 'default (SCHED_OTHER)' }, summary, seconds }, null, 2) + '\n',
  );
  console.log(`results: bench/results/${RESULTS}`);
  if (profDir !== undefined) {
    // The profile is written at a normal exit only (the exit handler's SIGKILL would lose it): stop it with SIGTERM and wait.
    daemon.removeAllListeners('exit');
    const exited = new Promise((r) => daemon.once('exit', r));
    process.kill(pid, 'SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))]);
    console.log(`CPU profile in ${profDir} (scripts/bench/prof-turns.ts)`);
  }
  process.exit(0);
}
