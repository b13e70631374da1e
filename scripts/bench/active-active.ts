/**
 * Benchmark (issue 21, point 8): two ACTIVE front nodes behind a multipath
 * route, and what happens to established flows when one leaves and comes
 * back.
 *
 * Topology: the testbed's pair (`--fronts-per-cluster 2`), without
 * keepalived. Both nodes run `sluice front` with their own config (same
 * VIP, same servers, each its own uplink and LAN address). The WAN routes
 * the VIP network over both uplink addresses (ECMP, L4 hash:
 * net.ipv4.fib_multipath_hash_policy=1), so flows spread by ports.
 *
 * Return path: each server marks a connection with the MAC address of the
 * front node its packets last came from (CONNMARK, on every packet) and
 * routes its replies by that mark (one table per front). Replies thus go
 * back through the node that holds the flow's NAT state, the servers still
 * see the client's address (the agents' per-client request rates stay
 * true), and a flow that moves to the other node has its replies follow it
 * at the next client packet. The cost is a few rules on every server (as
 * LVS-DR needs a loopback VIP); docs/front-node-design.md weighs full-NAT
 * and state sync against it.
 *
 * Variants (--variant):
 *   plain      `ip route ... nexthop via A nexthop via B` (hash-threshold), no state sync
 *   resilient  a resilient nexthop group (64 buckets, idle_timer --idle-timer s, unbalanced_timer 0):
 *              a leave re-maps only the leaving node's buckets, a join takes over idle buckets only
 *   sync       plain multipath plus conntrackd on both nodes (FTFW over sync0, both send and
 *              receive, DisableExternalCache on: the peer's entries go straight into the kernel)
 * Leave kinds (--leave):
 *   withdraw   node a's nexthop is removed (a BGP withdraw, an ECMP health check); the host lives on
 *   die        every process of node a is killed -9 and its links go down; --detect-ms later
 *              (BFD-like detection) its nexthop is removed. It comes back as a rebooted host:
 *              empty conntrack table, daemons started, nexthop re-added once its daemon answers.
 *
 * Each run has two phases, timed by the client's clock (aa-client.ts):
 *   leave  N downloads start with both nodes in; --event-s later node a leaves
 *   join   N downloads start with node a out;     --event-s later node a comes back
 * and a paced stream of new connections runs throughout.
 *
 *   node scripts/bench/active-active.ts --variant plain|resilient|sync --leave withdraw|die
 *        [--runs 3] [--downloads 40] [--blob-mib 20] [--rate 1500k] [--paced-rate 20]
 *        [--event-s 4] [--stall-s 8] [--detect-ms 1000] [--idle-timer 10]
 * AA_DEBUG=1 prints both nodes' conntrack tables, the servers' connection marks and conntrackd
 * statistics around each leave. Wrap in `flock /tmp/sluice-netns.lock` on a shared machine. Merges its
 * results into bench/results/active-active.json (key variant/leave) and
 * prints the table of every key there. `--table` only prints it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { adminRequest } from '../../src/admin/client.ts';
import type { ClusterPlan, FrontPlan } from '../testbed/plan.ts';
import { ipBatch, run, runIn, tryRun } from '../testbed/sh.ts';
import { startDaemon, startProcess, stopDaemons, type Daemon } from '../testbed/site.ts';
import { down, up, type TestbedState } from '../testbed/testbed.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RESULTS = join(ROOT, 'bench/results/active-active.json');
const CLIENT = fileURLToPath(new URL('./aa-client.ts', import.meta.url));
const VARIANTS = ['plain', 'resilient', 'sync'] as const;
const LEAVES = ['withdraw', 'die'] as const;
type Variant = (typeof VARIANTS)[number];
type Leave = (typeof LEAVES)[number];

const { values } = parseArgs({
  options: {
    variant: { type: 'string', default: 'plain' },
    leave: { type: 'string', default: 'withdraw' },
    runs: { type: 'string', default: '3' },
    downloads: { type: 'string', default: '40' },
    'blob-mib': { type: 'string', default: '20' },
    rate: { type: 'string', default: '1500k' },
    'paced-rate': { type: 'string', default: '20' },
    'event-s': { type: 'string', default: '4' },
    'stall-s': { type: 'string', default: '8' },
    'detect-ms': { type: 'string', default: '1000' },
    'idle-timer': { type: 'string', default: '10' },
    table: { type: 'boolean', default: false },
  },
});

// ---- results file and table ---------------------------------------------

interface PhaseResult {
  /** Downloads that completed with the right size and SHA-1. */
  readonly intact: number;
  /** Of those, downloads that paused > 1.5 s between two chunks (a flow that lost its path and recovered). */
  readonly intactPaused: number;
  /** Downloads that failed, stalled (killed after --stall-s without a byte) or had a wrong SHA-1. */
  readonly broken: number;
  readonly paced: number;
  readonly pacedFailures: number;
  /** Paced connections that took > 900 ms (a lost SYN retransmitted after 1 s). */
  readonly pacedSlow: number;
  /** Longest run of failed new connections: from the first failure's start to the next success's start (ms). */
  readonly gapMs: number;
  /** Each download's longest pause between two chunks (ms), sorted. */
  readonly pausesMs: readonly number[];
  /** Longest download of the phase, start to end (ms). */
  readonly longestDownloadMs: number;
  /** Client-clock times (ms after the phase's downloads started) of the phase's events. */
  readonly marks: Record<string, number>;
  /** Per node, sluice front's counters over the phase: client SYNs decided, packets dropped (a non-SYN without flow or record). */
  readonly fronts: Record<string, { syn?: number; dropped?: number }>;
}
interface RunResult {
  readonly leave: PhaseResult;
  readonly join: PhaseResult;
}
interface Entry {
  readonly date: string;
  readonly command: string;
  readonly settings: Record<string, unknown>;
  readonly runs: readonly RunResult[];
  readonly summary: Record<string, Stat>;
}
interface Stat {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

function stat(xs: readonly number[]): Stat {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length === 0 ? NaN : s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
  return { median, min: s[0] ?? NaN, max: s[s.length - 1] ?? NaN };
}

const FIELDS = ['intact', 'intactPaused', 'broken', 'pacedFailures', 'pacedSlow', 'gapMs'] as const;

function summarize(runs: readonly RunResult[]): Record<string, Stat> {
  const out: Record<string, Stat> = {};
  for (const phase of ['leave', 'join'] as const) for (const f of FIELDS) out[`${phase}.${f}`] = stat(runs.map((r) => r[phase][f]));
  return out;
}

function readResults(): { machine?: unknown; entries: Record<string, Entry> } {
  if (!existsSync(RESULTS)) return { entries: {} };
  return JSON.parse(readFileSync(RESULTS, 'utf8')) as { machine?: unknown; entries: Record<string, Entry> };
}

function printTable(entries: Record<string, Entry>): void {
  const fmt = (s: Stat | undefined): string => (s === undefined ? '-' : s.min === s.max ? String(s.median) : `${String(s.median)} (${String(s.min)}-${String(s.max)})`);
  const head = ['variant/leave', 'runs', 'phase', 'intact', 'of which paused>1.5s', 'broken', 'new conn failed', 'slow >0.9s', 'gap ms'];
  const rows: string[][] = [head];
  for (const [key, e] of Object.entries(entries)) {
    for (const phase of ['leave', 'join'] as const) {
      rows.push([phase === 'leave' ? key : '', phase === 'leave' ? String(e.runs.length) : '', phase, ...FIELDS.map((f) => fmt(e.summary[`${phase}.${f}`]))]);
    }
  }
  const widths = head.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  '));
  console.log('median (min-max) over runs; downloads per phase and settings in bench/results/active-active.json');
}

if (values.table) {
  printTable(readResults().entries);
  process.exit(0);
}

const variant = values.variant as Variant;
const leaveKind = values.leave as Leave;
if (!VARIANTS.includes(variant)) throw new Error(`--variant is one of ${VARIANTS.join(', ')}`);
if (!LEAVES.includes(leaveKind)) throw new Error(`--leave is one of ${LEAVES.join(', ')}`);
const runs = Number(values.runs);
const nDownloads = Number(values.downloads);
const blobMiB = Number(values['blob-mib']);
const eventMs = Number(values['event-s']) * 1000;
const stallS = Number(values['stall-s']);
const detectMs = Number(values['detect-ms']);
const pacedRate = Number(values['paced-rate']);
// Bounds on everything: counts above, and curl's own -m below.
const rateM = /^(\d+)([kKmM]?)$/.exec(values.rate);
if (!rateM) throw new Error('--rate is bytes/s per download with an optional k or m suffix (nginx limit_rate), e.g. 1500k');
const nginxRate = `${rateM[1] ?? ''}${(rateM[2] ?? '').toLowerCase()}`;
if (!(runs >= 1 && runs <= 10 && nDownloads >= 1 && nDownloads <= 100 && blobMiB >= 1 && blobMiB <= 100 && pacedRate > 0 && pacedRate <= 100)) {
  throw new Error('bounds: runs 1-10, downloads 1-100, blob-mib 1-100, paced-rate 1-100');
}

// ---- the testbed ----------------------------------------------------------

const prefix = `aa${randomBytes(3).toString('hex')}`;
const daemons: Daemon[] = [];
let client: ChildProcess | undefined;
process.on('exit', () => {
  client?.kill('SIGKILL');
  for (const d of daemons) d.child.kill('SIGKILL');
  down(prefix);
});
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const st: TestbedState = up({ prefix, clients: 1, clusters: 1, serversPerCluster: 2, frontsPerCluster: 2, blobMiB, delaysMs: { '1:1': 0 } });
function defined<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`bad plan: no ${what}`);
  return v;
}
const k: ClusterPlan = defined(st.plan.clusters[0], 'cluster');
const cl = defined(st.plan.clients[0], 'client');
const fa: FrontPlan = defined(k.fronts[0], 'node a');
const fb: FrontPlan = defined(k.fronts[1], 'node b');
const wan = st.plan.wan.name;
const dev = k.wanIf;
const expectedSha1 = st.blobSha1 ?? '';
const blobBytes = blobMiB * 1024 * 1024;

// WAN: drop the pair's VRRP routes; ECMP by L4 hash instead.
runIn(wan, 'sysctl', ['-q', '-w', 'net.ipv4.fib_multipath_hash_policy=1']);
ipBatch(wan, [`route del ${k.vipNetwork}`, `route del ${k.lanNetwork}`]);
const lanNet = k.lanNetwork.split('.').slice(0, 3).join('.');
const GW_A = `${lanNet}.21`;
const GW_B = `${lanNet}.22`;
/** A gratuitous ARP for `ip` from `ifname` (what keepalived sends when it takes an address over). */
function garp(ns: string, ifname: string, ip: string): void {
  const py = `
import socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
mac = s.getsockname()[4]
ip = socket.inet_aton(sys.argv[2])
arp = struct.pack('!HHBBH6s4s6s4s', 1, 0x0800, 6, 4, 1, mac, ip, b'\\0' * 6, ip)
for _ in range(2): s.send(b'\\xff' * 6 + mac + b'\\x08\\x06' + arp)
`;
  runIn(ns, 'python3', ['-c', py, ifname, ip]);
}
// idle_timer must exceed the flows' own pauses: nginx limit_rate sends about once a second, and
// with idle_timer 1 a join moved those buckets mid-download (measured: 21 of 40 broke, as plain).
const idleTimer = Number(values['idle-timer']);
const RES_OPTS = `type resilient buckets 64 idle_timer ${String(idleTimer)} unbalanced_timer 0`;
function routeBoth(): void {
  if (variant === 'resilient') {
    // Re-adding node a's nexthop to the group: only buckets idle for idle_timer move to it.
    ipBatch(wan, [`nexthop replace id 1 via ${fa.uplinkAddress} dev ${dev}`, `nexthop replace id 2 via ${fb.uplinkAddress} dev ${dev}`, `nexthop replace id 10 group 1/2 type resilient`]);
  } else {
    ipBatch(wan, [`route replace ${k.vipNetwork} nexthop via ${fa.uplinkAddress} dev ${dev} nexthop via ${fb.uplinkAddress} dev ${dev}`]);
  }
}
function routeWithoutA(): void {
  // Deleting a nexthop takes it out of every group: its buckets go to the rest.
  if (variant === 'resilient') ipBatch(wan, ['nexthop del id 1']);
  else ipBatch(wan, [`route replace ${k.vipNetwork} via ${fb.uplinkAddress} dev ${dev}`]);
}
if (variant === 'resilient') {
  ipBatch(wan, [`nexthop add id 1 via ${fa.uplinkAddress} dev ${dev}`, `nexthop add id 2 via ${fb.uplinkAddress} dev ${dev}`, `nexthop add id 10 group 1/2 ${RES_OPTS}`, `route add ${k.vipNetwork} nhid 10`]);
} else routeBoth();

// Rate-limit the downloads at the servers (nginx limit_rate, steady per send): curl 7.88's
// --limit-rate lets a download run ahead, then pauses it for seconds (measured: 6 s of a 13 s
// download), and a flow that sends nothing while a node leaves tests nothing.
for (const s of k.servers) {
  const conf = join(st.runDir, `nginx-${s.id}.conf`);
  const text = readFileSync(conf, 'utf8');
  const limited = text.replace(/location = \/blob\.bin \{ root ([^;]+); \}/, `location = /blob.bin { root $1; limit_rate ${nginxRate}; }`);
  if (limited === text) throw new Error(`no /blob.bin location in ${conf}`);
  writeFileSync(conf, limited);
  runIn(s.name, 'nginx', ['-c', conf, '-s', 'reload']);
}

// Servers: replies follow the front the connection's packets last came from, to that node's
// gateway address (.21 node a, .22 node b). The gateway address is the node's own VRRP-like
// instance: when a node dies its peer takes the address over (gratuitous ARP), as a keepalived
// instance per node would (backup for the other's). Without that, a download whose node died
// never recovers: the server retransmits toward the dead node, and the client, which only
// acknowledges, sends nothing that could re-mark the connection (measured: 19 of 40 stalled).
const gwOf = (f: FrontPlan): string => (f === fa ? GW_A : GW_B);
ipBatch(fa.name, [`addr add ${GW_A}/24 dev lan0`]);
ipBatch(fb.name, [`addr add ${GW_B}/24 dev lan0`]);
const macOf = (f: FrontPlan): string => (JSON.parse(run('ip', ['-n', f.name, '-j', 'link', 'show', 'lan0'])) as { address: string }[])[0]?.address ?? '';
for (const s of k.servers) {
  const rules = ['*mangle'];
  k.fronts.forEach((f, i) => rules.push(`-A PREROUTING -i eth0 -m mac --mac-source ${macOf(f)} -j CONNMARK --set-mark ${String(i + 1)}`));
  rules.push('-A OUTPUT -j CONNMARK --restore-mark', 'COMMIT');
  runIn(s.name, 'iptables-restore', [], rules.join('\n') + '\n');
  ipBatch(s.name, [
    `route replace default via ${GW_A}`,
    ...k.fronts.flatMap((f, i) => [`rule add fwmark ${String(i + 1)} table ${String(101 + i)}`, `route add default via ${gwOf(f)} table ${String(101 + i)}`]),
  ]);
  // Replies leave with the source address the client connected to (the kernel un-NATs at the front): no rp_filter surprises.
  runIn(s.name, 'sysctl', ['-q', '-w', 'net.ipv4.conf.all.rp_filter=0', 'net.ipv4.conf.eth0.rp_filter=0']);
}

function frontConfigText(f: FrontPlan): string {
  // No control plane: each node steers on configured capacities, its own share (docs: capacity across nodes).
  return `cluster: c${String(k.index)}
uplinkAddress: ${f.uplinkAddress}
adminSocket: ${join(st.runDir, `front-${f.id}.sock`)}
http: { listen: '127.0.0.1:9100' }
services:
  - name: www
    vip: ${k.vip}
    port: 80
    method: capacity
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address}, capacity: 5000 }`).join('\n')}
`;
}

function conntrackdConf(f: FrontPlan, peer: FrontPlan): string {
  const dir = join(st.runDir, `ctd-${f.id}`);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'conntrackd.conf');
  // Multi-primary: both nodes send their own flows and inject the peer's at once (DisableExternalCache).
  writeFileSync(
    file,
    `Sync {
  Mode FTFW {
    DisableExternalCache On
  }
  UDP {
    IPv4_address ${f.syncAddress ?? ''}
    IPv4_Destination_Address ${peer.syncAddress ?? ''}
    Port 3780
    Interface sync0
    SndSocketBuffer 1249280
    RcvSocketBuffer 1249280
    Checksum on
  }
}
General {
  HashSize 16384
  HashLimit 131072
  LogFile ${join(dir, 'conntrackd.log')}
  Syslog off
  LockFile ${join(dir, 'conntrackd.lock')}
  UNIX { Path ${join(dir, 'conntrackd.ctl')} }
  NetlinkBufferSize 2097152
  NetlinkBufferSizeMaxGrowth 8388608
  Filter From Kernelspace {
    Protocol Accept { TCP }
    Address Ignore {
      IPv4_address 127.0.0.1
      IPv4_address ${f.syncAddress ?? ''}
      IPv4_address ${peer.syncAddress ?? ''}
    }
  }
}
`,
  );
  return file;
}

const frontDaemon = new Map<string, Daemon>();
const ctdDaemon = new Map<string, Daemon>();
const ctdConf = new Map<string, string>();

function startNode(f: FrontPlan): void {
  if (variant === 'sync') {
    const peer = f === fa ? fb : fa;
    const conf = ctdConf.get(f.id) ?? conntrackdConf(f, peer);
    ctdConf.set(f.id, conf);
    tryRun('rm', ['-f', join(st.runDir, `ctd-${f.id}`, 'conntrackd.lock')]);
    const d = startProcess(st, f.name, `conntrackd-${f.id}`, 'conntrackd', ['-C', conf]);
    ctdDaemon.set(f.id, d);
    daemons.push(d);
  }
  const d = startDaemon(st, f.name, 'front', `front-${f.id}`, frontConfigText(f));
  frontDaemon.set(f.id, d);
  daemons.push(d);
}

async function waitFront(f: FrontPlan, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const r = await adminRequest(join(st.runDir, `front-${f.id}.sock`), { cmd: 'status' }, 1000).catch(() => undefined);
    if (r?.ok === true) return;
    await sleep(200);
  }
  // The run directory goes with the teardown: show the end of the daemon's log here.
  const log = tryRun('tail', ['-n', '15', join(st.runDir, `front-${f.id}.log`)]) ?? '';
  throw new Error(`front ${f.id} did not answer within ${String(timeoutMs)} ms; its log ends:\n${log}`);
}

/** sluice front's counters of one node (undefined while it is dead). */
function frontCounters(f: FrontPlan): { syn: number; dropped: number } | undefined {
  const text = tryRun('ip', ['netns', 'exec', f.name, 'curl', '-s', '-m', '2', 'http://127.0.0.1:9100/metrics']);
  if (text === undefined || text === '') return undefined;
  const sum = (name: string): number =>
    text
      .split('\n')
      .filter((l) => l.startsWith(name) && !l.startsWith('#'))
      .reduce((a, l) => a + Number(l.split(' ').pop()), 0);
  return { syn: sum('sluice_front_syn_packets_total'), dropped: sum('sluice_front_packets_dropped_total') };
}

// ---- the client -------------------------------------------------------------

interface ClientReport {
  readonly t: number;
  readonly downloads: { start: number; end: number; code: number | null; bytes: number; sha1: string; stalled: boolean; longestPauseMs: number }[];
  readonly paced: { start: number; end: number; ok: boolean }[];
  readonly marks: { label: string; t: number }[];
}
const lines: string[] = [];
let lineWaiter: ((l: string) => void) | undefined;

function startClient(): ChildProcess {
  const c = spawn('ip', ['netns', 'exec', cl.name, process.execPath, '--no-warnings', CLIENT, '--vip', k.vip, '--paced-rate', String(pacedRate), '--max-seconds', '1800'], { stdio: ['pipe', 'pipe', 'inherit'] });
  createInterface({ input: c.stdout }).on('line', (l) => {
    if (lineWaiter) {
      const w = lineWaiter;
      lineWaiter = undefined;
      w(l);
    } else lines.push(l);
  });
  return c;
}
const send = (cmd: string): void => {
  client?.stdin?.write(`${cmd}\n`);
};
async function report(timeoutMs: number): Promise<ClientReport> {
  lines.length = 0;
  const line = new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => {
      reject(new Error('client: no report in time'));
    }, timeoutMs);
    lineWaiter = (l) => {
      clearTimeout(t);
      resolve(l);
    };
  });
  send('report');
  return JSON.parse(await line) as ClientReport;
}

function analyse(r: ClientReport, before: Record<string, { syn: number; dropped: number } | undefined>, after: Record<string, { syn: number; dropped: number } | undefined>): PhaseResult {
  const ok = r.downloads.filter((d) => d.code === 0 && !d.stalled && d.bytes === blobBytes && d.sha1 === expectedSha1);
  const t0 = r.marks.find((m) => m.label === 'downloads')?.t ?? 0;
  const paced = [...r.paced].sort((a, b) => a.start - b.start);
  let gapMs = 0;
  let runStart: number | undefined;
  for (const p of paced) {
    if (!p.ok) runStart ??= p.start;
    else if (runStart !== undefined) {
      gapMs = Math.max(gapMs, p.start - runStart);
      runStart = undefined;
    }
  }
  if (runStart !== undefined) gapMs = Math.max(gapMs, r.t - runStart);
  const fronts: Record<string, { syn?: number; dropped?: number }> = {};
  for (const f of k.fronts) {
    const b = before[f.id];
    const a = after[f.id];
    // A node that died or restarted in the phase has counters from its new start only.
    fronts[f.id] = a === undefined ? {} : b === undefined || a.syn < b.syn ? { syn: a.syn, dropped: a.dropped } : { syn: a.syn - b.syn, dropped: a.dropped - b.dropped };
  }
  return {
    intact: ok.length,
    intactPaused: ok.filter((d) => d.longestPauseMs > 1500).length,
    pausesMs: r.downloads.map((d) => d.longestPauseMs).sort((a, b) => a - b),
    broken: r.downloads.length - ok.length,
    paced: paced.length,
    pacedFailures: paced.filter((p) => !p.ok).length,
    pacedSlow: paced.filter((p) => p.ok && p.end - p.start > 900).length,
    gapMs,
    longestDownloadMs: Math.max(0, ...r.downloads.map((d) => d.end - d.start)),
    marks: Object.fromEntries(r.marks.map((m) => [m.label, m.t - t0])),
    fronts,
  };
}

const counters = (): Record<string, { syn: number; dropped: number } | undefined> => Object.fromEntries(k.fronts.map((f) => [f.id, frontCounters(f)]));
const boundS = Math.ceil((blobBytes / (1024 * 1024)) * 10 + 60); // curl -m: far above a 1 MiB/s download, bounded

function debugTables(when: string): void {
  if (process.env.AA_DEBUG === undefined) return;
  for (const f of k.fronts) {
    const l = tryRun('ip', ['netns', 'exec', f.name, 'conntrack', '-L', '-p', 'tcp', '--dport', '80']) ?? '';
    const rows = l.split('\n').filter((x) => x.includes('dport=80'));
    console.error(`[${when}] ${f.id}: ${String(rows.length)} entries; ${rows.filter((x) => x.includes('ESTABLISHED')).length} established; sample: ${rows.find((x) => x.includes('ESTABLISHED')) ?? ''}`);
  }
  for (const s of k.servers) console.error(`[${when}] ${s.id} marks: ${(tryRun('ip', ['netns', 'exec', s.name, 'conntrack', '-L', '-p', 'tcp', '--dport', '80']) ?? '').split('\n').filter((x) => x.includes('ESTABLISHED')).map((x) => /mark=(\d+)/.exec(x)?.[1] ?? '').join(',')}`);
  for (const f of k.fronts) console.error(`[${when}] ${f.id} conntrack -S: ${(tryRun('ip', ['netns', 'exec', f.name, 'conntrack', '-S']) ?? '').replace(/\s+/g, ' ')}`);
  const ctl = join(st.runDir, `ctd-${fb.id}`, 'conntrackd.conf');
  if (variant === 'sync') console.error(`[${when}] fr1b conntrackd -s: ${(tryRun('ip', ['netns', 'exec', fb.name, 'conntrackd', '-C', ctl, '-s']) ?? '').replace(/\s+/g, ' ').slice(0, 900)}`);
}

async function leaveA(): Promise<void> {
  debugTables('before leave');
  setTimeout(() => {
    debugTables('leave+3s');
  }, 3000);
  if (leaveKind === 'withdraw') {
    routeWithoutA();
    send('mark withdrawn');
    return;
  }
  // The host dies: every process of the node killed -9, its links down; the route follows after detection.
  const pids = (tryRun('ip', ['netns', 'pids', fa.name]) ?? '').split('\n').map(Number).filter((p) => p > 0);
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  ipBatch(fa.name, ['link set wan0 down', 'link set lan0 down', 'link set sync0 down']);
  send('mark died');
  await sleep(detectMs);
  routeWithoutA();
  ipBatch(fb.name, [`addr add ${GW_A}/24 dev lan0`]);
  garp(fb.name, 'lan0', GW_A);
  send('mark withdrawn');
}

async function joinA(): Promise<void> {
  if (leaveKind === 'die') {
    // A rebooted host: an empty conntrack table, links up, daemons started; announced once its daemon answers.
    send('mark restarting');
    tryRun('ip', ['netns', 'exec', fa.name, 'conntrack', '-F']);
    // Node a's gateway address goes back to it (keepalived with preemption would do this).
    ipBatch(fb.name, [`addr del ${GW_A}/24 dev lan0`]);
    ipBatch(fa.name, ['link set wan0 up', 'link set lan0 up', 'link set sync0 up']);
    garp(fa.name, 'lan0', GW_A);
    ipBatch(fa.name, [`route replace default via ${k.wanSideAddress}`]);
    startNode(fa);
    await waitFront(fa);
    if (variant === 'sync') {
      // Fill the new node's table from the peer: its internal cache refreshed from its kernel
      // (flows it took over are there only as injected entries), then a full resync requested.
      const peerCtl = join(st.runDir, `ctd-${fb.id}`, 'conntrackd.conf');
      tryRun('ip', ['netns', 'exec', fb.name, 'conntrackd', '-C', peerCtl, '-R']);
      await sleep(300);
      tryRun('ip', ['netns', 'exec', fa.name, 'conntrackd', '-C', ctdConf.get(fa.id) ?? '', '-n']);
      await sleep(500);
    }
    send('mark ready');
  }
  routeBoth();
  send('mark joined');
}

async function phase(event: () => Promise<void>): Promise<PhaseResult> {
  const before = counters();
  send('mark downloads');
  send(`downloads ${String(nDownloads)} ${String(stallS)} ${String(boundS)}`);
  await sleep(eventMs);
  await event();
  const r = await report((boundS + 60) * 1000);
  return analyse(r, before, counters());
}

// ---- main ---------------------------------------------------------------------

async function main(): Promise<void> {
  startNode(fa);
  startNode(fb);
  await Promise.all([waitFront(fa), waitFront(fb)]);
  client = startClient();
  await sleep(2000);
  const warm = await report(10_000);
  const warmFailed = warm.paced.filter((p) => !p.ok).length;
  console.log(`${prefix}: ${variant}/${leaveKind}; warm-up ${String(warm.paced.length)} new connections, ${String(warmFailed)} failed; SYNs per node ${JSON.stringify(counters())}`);
  if (warm.paced.length === 0 || warmFailed > 0) throw new Error('the site does not serve before the first run');
  const results: RunResult[] = [];
  for (let i = 0; i < runs; i++) {
    const leave = await phase(leaveA);
    const join = await phase(joinA);
    results.push({ leave, join });
    console.log(`run ${String(i + 1)}: leave ${JSON.stringify(leave)}\n       join  ${JSON.stringify(join)}`);
    await sleep(1000);
  }
  send('quit');
  await stopDaemons(daemons);

  const file = readResults();
  const key = variant === 'resilient' ? `resilient idle ${String(idleTimer)}s/${leaveKind}` : `${variant}/${leaveKind}`;
  file.entries[key] = {
    date: new Date().toISOString(),
    command: `flock /tmp/sluice-netns.lock node scripts/bench/active-active.ts --variant ${variant} --leave ${leaveKind} --runs ${String(runs)} --downloads ${String(nDownloads)} --blob-mib ${String(blobMiB)} --rate ${values.rate} --paced-rate ${String(pacedRate)} --event-s ${values['event-s']} --stall-s ${String(stallS)} --detect-ms ${String(detectMs)}${variant === 'resilient' ? ` --idle-timer ${String(idleTimer)}` : ''}`,
    settings: { variant, leave: leaveKind, runs, downloads: nDownloads, blobMiB, rate: values.rate, pacedRate, pacedTimeoutMs: 3000, eventS: eventMs / 1000, stallS, detectMs, curlBoundS: boundS, resilient: variant === 'resilient' ? RES_OPTS : undefined },
    runs: results,
    summary: summarize(results),
  };
  const out = { benchmark: 'active-active', machine: { kernel: release(), cpus: cpus().length, cpuModel: cpus()[0]?.model ?? '', node: process.version }, entries: file.entries };
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(RESULTS, JSON.stringify(out, null, 2) + '\n');
  printTable(file.entries);
}

main()
  .then(() => process.exit(0))
  .catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  });
