/**
 * The client side of scripts/bench/active-active.ts, run inside the client
 * namespace so that every time it records comes from ONE clock (this
 * process's performance.now(), relative to its own start): the event marks
 * the bench sends, the paced connections, and each download's end.
 *
 *   aa-client.ts --vip A --paced-rate R [--paced-timeout-ms 3000] [--max-seconds 600]
 *
 * stdin, one command a line:
 *   downloads N STALL_S BOUND_S   start N curl downloads of /blob.bin (curl -m BOUND_S; the servers limit
 *                                 the rate); one that receives nothing for STALL_S seconds is killed (broken)
 *   mark LABEL                         record LABEL at this process's time
 *   report                             wait for every download of the phase to end, then print one JSON line:
 *                                      {downloads:[...], paced:[...], marks:[...]} since the previous report
 *   quit
 * The paced stream runs from start to quit: new connections (Connection:
 * close) at R/s, each a GET / answered "server <id> ...", failed on error
 * or after the timeout; at most 256 in flight, so a dead path cannot pile
 * up sockets.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    vip: { type: 'string' },
    'paced-rate': { type: 'string', default: '20' },
    'paced-timeout-ms': { type: 'string', default: '3000' },
    'max-seconds': { type: 'string', default: '600' },
  },
});
const vip = values.vip ?? '';
const pacedRate = Number(values['paced-rate']);
const pacedTimeout = Number(values['paced-timeout-ms']);
const now = (): number => Math.round(performance.now());

interface PacedResult {
  readonly start: number;
  readonly end: number;
  readonly ok: boolean;
  readonly server?: string;
  readonly error?: string;
}
interface DownloadResult {
  readonly index: number;
  readonly start: number;
  readonly end: number;
  readonly code: number | null;
  readonly bytes: number;
  readonly sha1: string;
  /** Killed after STALL_S seconds without a byte. */
  readonly stalled: boolean;
  /** Longest time between two received chunks (ms): a flow that moved and survived shows a stall here. */
  readonly longestPauseMs: number;
}

let paced: PacedResult[] = [];
let marks: { label: string; t: number }[] = [];
let downloads: Promise<DownloadResult>[] = [];
let inFlight = 0;

function one(): void {
  inFlight++;
  const start = now();
  let settled = false;
  const finish = (r: Omit<PacedResult, 'start' | 'end'>): void => {
    if (settled) return;
    settled = true;
    inFlight--;
    paced.push({ start, end: now(), ...r });
  };
  const req = request(`http://${vip}/`, { agent: false, headers: { connection: 'close' }, timeout: pacedTimeout }, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (body += d));
    res.on('end', () => {
      finish({ ok: res.statusCode === 200, server: body.split(' ')[1] ?? '?' });
    });
    res.on('error', (e) => {
      finish({ ok: false, error: e.message });
    });
  });
  // The timeout covers the whole exchange: a SYN lost to a dead path is retransmitted after 1 s, 3 s.
  const hard = setTimeout(() => req.destroy(new Error('timeout')), pacedTimeout);
  req.on('close', () => {
    clearTimeout(hard);
  });
  req.on('error', (e) => {
    finish({ ok: false, error: e.message });
  });
  req.end();
}

function download(index: number, stallS: number, boundS: number): Promise<DownloadResult> {
  return new Promise((resolve) => {
    const start = now();
    const hash = createHash('sha1');
    let bytes = 0;
    let last: number | undefined;
    let longestPauseMs = 0;
    let stalled = false;
    const child = spawn('curl', ['-s', '-m', String(boundS), `http://${vip}/blob.bin`], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.stdout.on('data', (d: Buffer) => {
      const t = now();
      // From the first byte on: curl's start-up under load is not a pause of the flow.
      if (last !== undefined) longestPauseMs = Math.max(longestPauseMs, t - last);
      last = t;
      bytes += d.length;
      hash.update(d);
    });
    const watch = setInterval(() => {
      if (now() - (last ?? start) > stallS * 1000) {
        stalled = true;
        child.kill('SIGKILL');
      }
    }, 200);
    child.on('close', (code) => {
      clearInterval(watch);
      resolve({ index, start, end: now(), code, bytes, sha1: hash.digest('hex'), stalled, longestPauseMs });
    });
  });
}

let owed = 0;
let lastTick = performance.now();
const timer = setInterval(() => {
  const t = performance.now();
  owed += ((t - lastTick) / 1000) * pacedRate;
  lastTick = t;
  while (owed >= 1) {
    owed--;
    if (inFlight < 256) one();
    else paced.push({ start: now(), end: now(), ok: false, error: 'in-flight bound' });
  }
}, 10);
const bound = setTimeout(() => process.exit(0), Number(values['max-seconds']) * 1000);

createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, ...args] = line.trim().split(/\s+/);
  if (cmd === 'downloads') {
    const [n, stall, boundS] = args;
    for (let i = 0; i < Number(n); i++) downloads.push(download(i, Number(stall), Number(boundS)));
  } else if (cmd === 'mark') {
    marks.push({ label: args.join(' '), t: now() });
  } else if (cmd === 'report') {
    const pending = downloads;
    downloads = [];
    void Promise.all(pending).then((done) => {
      // Paced connections still in flight belong to the next report.
      console.log(JSON.stringify({ t: now(), downloads: done, paced, marks }));
      paced = [];
      marks = [];
    });
  } else if (cmd === 'quit') {
    clearInterval(timer);
    clearTimeout(bound);
    process.exit(0);
  }
});
