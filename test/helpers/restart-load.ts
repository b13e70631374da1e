/**
 * What the hitless restart tests (front-restart, front-systemd) measure a
 * front node with: a paced stream of new connections, rate-limited
 * downloads hashed as they arrive, a raw SYN sender, and the kernel's
 * counters on our rules.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { nsRun } from './testbed.ts';

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

/** The kernel's counter on the jump into our queue chain. */
export const jumpCount = (ns: string): number => ruleCount(ns, 'mangle', 'PREROUTING', /SLUICE_QUEUE/);
/** The kernel's counter on the fallback spread (SYNs no daemon marked). */
export const hmarkCount = (ns: string): number => ruleCount(ns, 'nat', 'SLUICE_DNAT', /HMARK/);

/**
 * A counting rule of the test's, first in nat PREROUTING (inserted after
 * the daemon's jump exists, which is then never moved): SYNs to the VIP
 * that no daemon marked (the fallback decides them). Our chains' counters
 * restart at each install; this one does not.
 */
export const UNMARKED = ['-d', `${VIP}/32`, '-p', 'tcp', '--dport', '80', '--tcp-flags', 'SYN,ACK,FIN,RST', 'SYN', '-m', 'mark', '--mark', '0'];
export const fallbackSyns = (ns: string): number => ruleCount(ns, 'nat', 'PREROUTING', /dpt:80 flags:0x17\/0x02 mark match 0x0$/);

/** The paced client (5 new connections/s, each a full HTTP request), read by tallies. */
export class PacedLoad {
  readonly child: ChildProcess;
  readonly #lines: string[] = [];
  #waiter: ((l: string) => void) | undefined;
  failures = 0;
  readonly tally: Record<string, number> = {};

  constructor(ns: string, source: string) {
    this.child = spawn('ip', ['netns', 'exec', ns, process.execPath, '--no-warnings', PACED, '--url', `http://${VIP}/`, '--rate', '5', '--sources', source, '--max-seconds', '240'], { stdio: ['pipe', 'pipe', 'ignore'] });
    createInterface({ input: this.child.stdout! }).on('line', (l) => {
      if (this.#waiter) {
        const w = this.#waiter;
        this.#waiter = undefined;
        w(l);
      } else this.#lines.push(l);
    });
  }

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
    const r = JSON.parse(await line) as { tally: Record<string, number>; failures: number };
    this.failures += r.failures;
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

/** A curl download of /blob.bin hashed as it arrives. */
export class Download {
  readonly child: ChildProcess;
  bytes = 0;
  readonly #hash = createHash('sha1');
  readonly done: Promise<number>;

  constructor(ns: string, rate: string) {
    this.child = spawn('ip', ['netns', 'exec', ns, 'curl', '-s', '--limit-rate', rate, '-m', '200', `http://${VIP}/blob.bin`], { stdio: ['ignore', 'pipe', 'ignore'] });
    this.child.stdout!.on('data', (d: Buffer) => {
      this.bytes += d.length;
      this.#hash.update(d);
    });
    this.done = new Promise((resolve) => this.child.on('close', (code) => { resolve(code ?? -1); }));
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

