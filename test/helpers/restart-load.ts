/**
 * What the hitless restart tests (front-restart, front-systemd) measure a
 * front node with: a paced stream of new connections, rate-limited
 * downloads hashed as they arrive, a raw SYN sender, the kernel's
 * counters on our rules, and a counting nft table of the test's own.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FALLBACK_COUNTER, NFT_TABLE } from '../../src/front/nft.ts';
import { QUEUE_MARK, hex } from '../../src/front/marks.ts';
import { nsRun } from './testbed.ts';
import { sleep } from './wait.ts';

/** The testbed's first VIP (cluster 1), port 80. */
export const VIP = '198.19.1.1';

const PACED = fileURLToPath(new URL('../fixtures/http-paced.ts', import.meta.url));

/** Packet count of the first rule of `chain` in `table` whose text matches `re` (iptables -L -v -x). */
export function ruleCount(ns: string, table: string, chain: string, re: RegExp): number {
  const out = nsRun(ns, 'iptables', ['-w', '-t', table, '-L', chain, '-v', '-x', '-n']);
  const line = out.split('\n').find((l) => re.test(l));
  assert.ok(line, `no rule matching ${String(re)} in ${table}/${chain}:\n${out}`);
  return Number(line.trim().split(/\s+/)[0]);
}

/** The kernel's counter on the jump into our queue chain (iptables mangle PREROUTING: never replaced by an install). */
export const jumpCount = (ns: string): number => ruleCount(ns, 'mangle', 'PREROUTING', /SLUICE_QUEUE/);

/** Packets of the named counter `name` of nft table `ip TABLE` (`nft list counter`). */
export function nftCounter(ns: string, table: string, name: string): number {
  const out = nsRun(ns, 'nft', ['list', 'counter', 'ip', table, name]);
  const m = /packets (\d+) bytes \d+/.exec(out);
  assert.ok(m, `no counter ${name} in table ip ${table}:\n${out}`);
  return Number(m[1]);
}

/**
 * The kernel's counter on our fallback's DNATs (new flows no daemon
 * decided). Our table, and with it this counter, is replaced by every
 * install (start, reload, repair): compare values read between two
 * installs only.
 */
export const fallbackCount = (ns: string): number => nftCounter(ns, NFT_TABLE, FALLBACK_COUNTER);

const PROBE_TABLE = 'sluice_test_probe';
const SYN = 'tcp dport 80 tcp flags & (syn | ack | fin | rst) == syn';

/** Totals of a SynProbe's counters. */
export interface ProbeCounts {
  /** SYNs to VIP:80 arriving (first hook of all: raw priority). */
  readonly seen: number;
  /** SYNs of flows to the VIP that left prerouting DNATed (after our nat and guard chains). */
  readonly dnated: number;
  /** Of those, SYNs that still carried QUEUE_MARK: decided by the fallback, not by a daemon. */
  readonly fallback: number;
  /** SYNs still addressed to the VIP after our nat and guard chains: they met no DNAT and no guard. */
  readonly escaped: number;
  /** SYNs conntrack found invalid (before our classify chain): no flow, so no NAT for them. */
  readonly invalid: number;
}

/**
 * A counting table of the test's own (\`table ip sluice_test_probe\`), never
 * touched by the daemon's installs, so its counters see across every
 * reinstall, restart and removal of ours: a chain at the raw priority
 * counts the SYNs to the VIP that arrive, a chain after our nat_pre
 * (dstnat - 1) and vip_guard (dstnat + 1) counts how they leave. A SYN
 * the guard dropped is seen and never leaves: seen - dnated - escaped.
 */
export class SynProbe {
  readonly ns: string;

  constructor(ns: string) {
    this.ns = ns;
    const script = `table ip ${PROBE_TABLE}
delete table ip ${PROBE_TABLE}
table ip ${PROBE_TABLE} {
  counter seen { }
  counter dnated { }
  counter fallback { }
  counter escaped { }
  counter invalid { }
  chain first {
    type filter hook prerouting priority raw; policy accept;
    ip daddr ${VIP} ${SYN} counter name seen
  }
  chain tracked {
    type filter hook prerouting priority mangle - 20; policy accept;
    ip daddr ${VIP} ${SYN} ct state invalid counter name invalid
  }
  chain last {
    type filter hook prerouting priority dstnat + 2; policy accept;
    ct original ip daddr ${VIP} ip daddr != ${VIP} ${SYN} meta mark ${hex(QUEUE_MARK)} counter name fallback
    ct original ip daddr ${VIP} ip daddr != ${VIP} ${SYN} counter name dnated
    ip daddr ${VIP} ${SYN} counter name escaped
  }
}
`;
    nsRun(ns, 'nft', ['-f', '-'], script);
  }

  read(): ProbeCounts {
    const out = nsRun(this.ns, 'nft', ['list', 'table', 'ip', PROBE_TABLE]);
    const get = (name: string): number => {
      const m = new RegExp(`counter ${name} \\{\\s*packets (\\d+)`).exec(out);
      assert.ok(m, `no counter ${name} in table ip ${PROBE_TABLE}:\n${out}`);
      return Number(m[1]);
    };
    return { seen: get('seen'), dnated: get('dnated'), fallback: get('fallback'), escaped: get('escaped'), invalid: get('invalid') };
  }

  /** The counters once no SYN arrives any more (the sender stopped): two reads 200 ms apart agree. */
  async settled(): Promise<ProbeCounts> {
    let last = this.read();
    for (let i = 0; i < 50; i++) {
      await sleep(200);
      const now = this.read();
      if (now.seen === last.seen && now.dnated === last.dnated && now.escaped === last.escaped) return now;
      last = now;
    }
    assert.fail(`SYNs still arriving 10 s after the sender stopped: ${JSON.stringify(last)}`);
  }

  remove(): void {
    nsRun(this.ns, 'nft', ['-f', '-'], `table ip ${PROBE_TABLE}\ndelete table ip ${PROBE_TABLE}\n`);
  }
}

/** The paced client (5 new connections/s, each a full HTTP request), read by tallies. */
export class PacedLoad {
  readonly child: ChildProcess;
  readonly #lines: string[] = [];
  #waiter: ((l: string) => void) | undefined;
  failures = 0;
  /** The longest time without a completed connection, over every read (the client's own clock). */
  maxGapMs = 0;
  readonly tally: Record<string, number> = {};

  constructor(ns: string, source: string, opts: { vip?: string; maxSeconds?: number } = {}) {
    this.child = spawn('ip', ['netns', 'exec', ns, process.execPath, '--no-warnings', PACED, '--url', `http://${opts.vip ?? VIP}/`, '--rate', '5', '--sources', source, '--max-seconds', String(opts.maxSeconds ?? 240)], { stdio: ['pipe', 'pipe', 'ignore'] });
    createInterface({ input: this.child.stdout! }).on('line', (l) => {
      if (this.#waiter) {
        const w = this.#waiter;
        this.#waiter = undefined;
        w(l);
      } else this.#lines.push(l);
    });
  }

  /** The longest gap of the last read alone. */
  lastGapMs = 0;

  /** Connections completed since the previous read, added to the totals. */
  async read(): Promise<Record<string, number>> {
    const line = new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => {
        reject(new Error('paced client: no tally within 10 s'));
      }, 10_000);
      this.#waiter = (l) => {
        clearTimeout(t);
        resolve(l);
      };
    });
    this.child.stdin!.write('tally\n');
    const r = JSON.parse(await line) as { tally: Record<string, number>; failures: number; maxGapMs: number };
    this.failures += r.failures;
    this.lastGapMs = r.maxGapMs;
    this.maxGapMs = Math.max(this.maxGapMs, r.maxGapMs);
    for (const [k, v] of Object.entries(r.tally)) this.tally[k] = (this.tally[k] ?? 0) + v;
    return r.tally;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const done = new Promise((r) => this.child.once('exit', r));
    this.child.stdin!.end('quit\n');
    const t = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await done;
    clearTimeout(t);
  }
}

/** Bytes per second of a curl-style rate ("2500K", "2500k", "5M", "800": K = 1024). */
export function rateBytes(rate: string): number {
  const m = /^(\d+(?:\.\d+)?)([kKmMgG]?)$/.exec(rate);
  if (!m) throw new Error(`not a rate: ${rate}`);
  const unit = (m[2] ?? '').toLowerCase();
  return Number(m[1]) * (unit === 'k' ? 1024 : unit === 'm' ? 1 << 20 : unit === 'g' ? 1 << 30 : 1);
}

/** How often a paced Download reads its share (ms). */
const PACE_TICK_MS = 20;

/**
 * A curl download of /blob.bin (or `url`) hashed as it arrives, at `rate`
 * until release().
 *
 * The rate is held by this process, not by curl's --limit-rate: curl's
 * output is paused whenever this process has taken its share (a token
 * bucket refilled every 20 ms), so the pipe fills, curl blocks on it and
 * stops reading the socket, and the TCP receive window holds the server to
 * the rate, as with curl's own limiter (which too stops reading the
 * socket). What differs: release() lifts the rate, and the rest of the blob
 * comes at full speed. A test releases its downloads once the events they
 * must span (a failover, a restart) are over and judged, instead of waiting
 * out the blob's tail at the rate; unreleased, a download runs at `rate` to
 * its end as before. (Pausing, not read(n): reading a paused stream's whole
 * buffer asks the pipe for more each time, and the buffer grows without
 * bound; and the output is always read through 'data', so what Node pushes
 * at curl's exit reaches the hash.)
 */
export class Download {
  readonly child: ChildProcess;
  bytes = 0;
  readonly #hash = createHash('sha1');
  readonly done: Promise<number>;
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * `maxSeconds`: curl's -m, the whole transfer's bound. A test sizes it to
   * its blob at `rate` plus a margin, so a stalled download fails in
   * seconds (curl 28) instead of holding the suite for the default's 200 s.
   * `curlArgs` go before the URL (e.g. -6 -g for an IPv6 VIP).
   */
  constructor(ns: string, rate: string, maxSeconds = 200, url = `http://${VIP}/blob.bin`, curlArgs: readonly string[] = []) {
    this.child = spawn('ip', ['netns', 'exec', ns, 'curl', '-s', ...curlArgs, '-m', String(maxSeconds), url], { stdio: ['ignore', 'pipe', 'ignore'] });
    const out = this.child.stdout!;
    const perMs = rateBytes(rate) / 1000;
    // At most two ticks' worth saved up (a late tick does not become a burst).
    const cap = perMs * PACE_TICK_MS * 2;
    // The share left: a chunk may overdraw it (debt), paid back before the next.
    let tokens = 0;
    let last = performance.now();
    out.on('data', (d: Buffer) => {
      this.bytes += d.length;
      this.#hash.update(d);
      if (this.#timer === undefined) return;
      tokens -= d.length;
      if (tokens <= 0) out.pause();
    });
    this.#timer = setInterval(() => {
      const now = performance.now();
      tokens = Math.min(cap, tokens + (now - last) * perMs);
      last = now;
      if (tokens > 0 && out.isPaused()) out.resume();
    }, PACE_TICK_MS);
    this.done = new Promise((resolve) =>
      this.child.on('close', (code) => {
        this.#stopPacing();
        resolve(code ?? -1);
      }),
    );
  }

  #stopPacing(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** From now on curl's output is read as fast as it comes. */
  release(): void {
    this.#stopPacing();
    this.child.stdout!.resume();
  }

  sha1(): string {
    return this.#hash.digest('hex');
  }
}

/** A python raw-socket sender of `count` SYNs to VIP:80 from `src`, source ports cycling from 20000. */
export function synFlood(ns: string, src: string, count: number): ChildProcess {
  const py = `
import socket, struct, sys
src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
def csum(b):
    if len(b) % 2: b += b'\\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
sa, da = socket.inet_aton(src), socket.inet_aton(dst)
for i in range(count):
    sport = 20000 + i % 40000
    tcp = struct.pack('!HHIIBBHHH', sport, 80, 1000 + i, 0, 5 << 4, 0x02, 65535, 0, 0)
    tcp = tcp[:16] + struct.pack('!H', csum(sa + da + struct.pack('!BBH', 0, 6, len(tcp)) + tcp)) + tcp[18:]
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 40, i & 0xffff, 0, 64, 6, 0, sa, da)
    ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
    s.sendto(ip + tcp, (dst, 0))
`;
  return spawn('ip', ['netns', 'exec', ns, 'python3', '-c', py, src, VIP, String(count)], { stdio: 'ignore' });
}

