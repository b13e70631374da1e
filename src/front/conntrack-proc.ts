/**
 * Reads the kernel's flows from /proc/net/nf_conntrack (per network
 * namespace; CONFIG_NF_CONNTRACK_PROCFS is on here). Used to rebuild
 * connection records after a restart and to reconcile records with flows.
 *
 * Line format (tcp):
 *   ipv4 2 tcp 6 115 ESTABLISHED src=C dst=VIP sport=CP dport=80
 *        src=SERVER dst=C sport=80 dport=CP [ASSURED] mark=0 zone=0 use=2
 * Line format (udp, no state field):
 *   ipv4 2 udp 17 29 src=C dst=VIP sport=CP dport=53 src=SERVER dst=C
 *        sport=53 dport=CP [ASSURED] mark=0 zone=0 use=2
 * Line format (IPv6: family 10, addresses in RFC 5952 text):
 *   ipv6 10 tcp 6 115 ESTABLISHED src=2001:2::c dst=2001:2:1::1 sport=CP
 *        dport=80 src=2001:2:2::b dst=2001:2::c sport=80 dport=CP ...
 * The first tuple is the original direction, the second the reply.
 *
 * /proc/net/nf_conntrack is mode 0440 root: a front node running as its own
 * user with CAP_NET_ADMIN only (deploy/systemd/sluice-front.service) cannot
 * read it. The same table then comes from `conntrack -L -o extended`
 * (conntrack-tools, over ctnetlink, which CAP_NET_ADMIN allows), whose lines
 * have the same format.
 */
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
import { SluiceError } from '../errors/errors.ts';

/** The kernel's flow table could be read neither from /proc nor with conntrack(8). */
export class ConntrackReadError extends SluiceError {
  readonly code = 'ERR_SLUICE_CONNTRACK_READ';
}
import { parseIPv4Address } from '../packet/address.ts';
import { parseIPv6Address } from '../packet/address6.ts';

export interface KernelFlow {
  /** 4: the addresses are the numbers below. 6: they are the words of `v6` (the numbers are 0). */
  readonly family: 4 | 6;
  readonly protocol: 'tcp' | 'udp';
  /** TCP state, or UDP for every UDP flow (conntrack keeps a UDP flow until it times out). */
  readonly state: string;
  readonly client: number;
  readonly clientPort: number;
  readonly dst: number;
  readonly dstPort: number;
  /** Reply source: the server (DNAT) or the other cluster's VIP (overflow). */
  readonly replySrc: number;
  readonly replySrcPort: number;
  /** IPv6 flows only: client, dst and replySrc as four words each (packet/address6.ts). */
  readonly v6?: { readonly client: Uint32Array; readonly dst: Uint32Array; readonly replySrc: Uint32Array };
}

/**
 * TCP states in which a connection is still alive: a record whose flow is
 * in one of them is kept by reconcile. (Conntrack's closing states do not
 * say which side sent the FIN, so a half-closed flow may still await the
 * client's FIN that recycles its record.)
 */
export const LIVE_STATES: ReadonlySet<string> = new Set(['SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK', 'UDP']);

/**
 * States rebuilt as active records after a restart: only where neither side
 * has closed. A half-closed flow is ending; counting it as load would keep
 * its server looking busy until the next reconcile.
 */
export const REBUILD_STATES: ReadonlySet<string> = new Set(['SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'UDP']);

export function parseConntrackLine(line: string): KernelFlow | undefined {
  const f = line.split(/\s+/);
  const protocol = f[2];
  const family = f[0] === 'ipv4' ? 4 : f[0] === 'ipv6' ? 6 : 0;
  if ((protocol !== 'tcp' && protocol !== 'udp') || family === 0) return undefined;
  const state = protocol === 'tcp' ? (f[5] ?? '') : 'UDP';
  const kv: string[] = [];
  for (let i = protocol === 'tcp' ? 6 : 5; i < f.length && kv.length < 8; i++) {
    const t = f[i] ?? '';
    const eq = t.indexOf('=');
    if (eq > 0 && /^(src|dst|sport|dport)$/.test(t.slice(0, eq))) kv.push(t.slice(eq + 1));
  }
  if (kv.length < 8) return undefined;
  const [os, od, osp, odp, rs, , rsp] = kv;
  if (family === 6) {
    const client = parseIPv6Address(os ?? '');
    const dst = parseIPv6Address(od ?? '');
    const replySrc = parseIPv6Address(rs ?? '');
    if (client === undefined || dst === undefined || replySrc === undefined) return undefined;
    return { family, protocol, state, client: 0, clientPort: Number(osp), dst: 0, dstPort: Number(odp), replySrc: 0, replySrcPort: Number(rsp), v6: { client, dst, replySrc } };
  }
  const client = parseIPv4Address(os ?? '');
  const dst = parseIPv4Address(od ?? '');
  const replySrc = parseIPv4Address(rs ?? '');
  if (client === undefined || dst === undefined || replySrc === undefined) return undefined;
  return { family, protocol, state, client, clientPort: Number(osp), dst, dstPort: Number(odp), replySrc, replySrcPort: Number(rsp) };
}

/** How much of the flow table is read and parsed per event-loop turn: ~64 KiB is ~400 lines, well under a millisecond. */
export const FLOW_CHUNK_BYTES = 64 * 1024;

/** Takes a byte stream in chunks, and its end. */
export interface LineSink {
  push(chunk: Buffer, length: number): void;
  end(): void;
}

/**
 * Splits a byte stream into lines across chunks and hands each complete
 * line to `line`. A line cut by a chunk's end is kept (as bytes) until the
 * next chunk completes it.
 */
class LineSplitter implements LineSink {
  #rest = '';
  readonly #line: (text: string) => void;
  constructor(line: (text: string) => void) {
    this.#line = line;
  }
  push(chunk: Buffer, length: number): void {
    // latin1: the table is ASCII; no multi-byte sequence can be cut.
    const text = this.#rest + chunk.toString('latin1', 0, length);
    let from = 0;
    for (let nl = text.indexOf('\n', from); nl >= 0; nl = text.indexOf('\n', from)) {
      this.#line(text.slice(from, nl));
      from = nl + 1;
    }
    this.#rest = text.slice(from);
  }
  end(): void {
    if (this.#rest.length > 0) this.#line(this.#rest);
    this.#rest = '';
  }
}

/** Streams `conntrack -L -o extended` (the flows of this network namespace), one chunk per event-loop turn. */
function conntrackList(splitter: LineSink): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('conntrack', ['-L', '-o', 'extended'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      splitter.push(b, b.length);
    });
    child.stderr.on('data', (b: Buffer) => {
      if (stderr.length < 4096) stderr += b.toString();
    });
    child.on('error', (err) => {
      reject(new ConntrackReadError(`cannot list the kernel's flows with conntrack -L (install conntrack-tools; the daemon needs CAP_NET_ADMIN): ${err.message}`, { cause: err }));
    });
    child.on('close', (code, signal) => {
      if (code === 0) {
        splitter.end();
        resolve();
      } else reject(new ConntrackReadError(`cannot list the kernel's flows with conntrack -L (install conntrack-tools; the daemon needs CAP_NET_ADMIN): ${stderr.trim() || `exit ${String(code ?? signal)}`}`));
    });
  });
}

/** The listing of the kernel's flows, as a line source (tests inject one). */
export type FlowLister = (sink: LineSink) => Promise<void>;

/**
 * Streams the kernel's flows to `onFlow`, FLOW_CHUNK_BYTES per event-loop
 * turn, so a table of a million flows (~300 MB of text) never stalls the
 * loop that decides SYNs: each turn parses a few hundred lines. Reads
 * /proc/net/nf_conntrack, or `conntrack -L` where /proc is not readable
 * (CAP_NET_ADMIN without root). Returns the number of flows seen.
 *
 * Throws ConntrackReadError when the table exists but cannot be read: an
 * empty answer would make reconcile free every record. The flows are those
 * of a moving table: one that starts or ends during the read may or may
 * not be seen (callers guard with record age, see the daemon's resync).
 */
export async function streamKernelFlows(onFlow: (f: KernelFlow) => void, path = '/proc/net/nf_conntrack', list: FlowLister = conntrackList): Promise<number> {
  let n = 0;
  const splitter = new LineSplitter((line) => {
    const fl = parseConntrackLine(line);
    if (fl) {
      n++;
      onFlow(fl);
    }
  });
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return 0; // no conntrack in this namespace yet: no flows
    if (code !== 'EACCES' && code !== 'EPERM') throw new ConntrackReadError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
    await list(splitter);
    return n;
  }
  try {
    const buf = Buffer.allocUnsafe(FLOW_CHUNK_BYTES);
    for (;;) {
      let got;
      try {
        got = await fh.read(buf, 0, buf.length, null);
      } catch (err) {
        throw new ConntrackReadError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
      }
      if (got.bytesRead === 0) break;
      splitter.push(buf, got.bytesRead);
    }
    splitter.end();
  } finally {
    await fh.close();
  }
  return n;
}

/** The kernel's flows, collected (small tables and tests; the daemon streams them). */
export async function readKernelFlows(path = '/proc/net/nf_conntrack', list?: FlowLister): Promise<KernelFlow[]> {
  const out: KernelFlow[] = [];
  await streamKernelFlows((f) => out.push(f), path, list);
  return out;
}
