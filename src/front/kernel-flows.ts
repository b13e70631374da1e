/**
 * Reads the kernel's flows (per network namespace) to rebuild connection
 * records after a restart and to reconcile records with flows.
 *
 * Over ctnetlink (native/src/ct_dump.c): one dump request, decoded off the
 * event loop into rows of words, with nothing allocated per flow. It needs
 * CAP_NET_ADMIN in the namespace, which the unprivileged unit
 * (deploy/systemd/sluice-front.service) has. Where ctnetlink is absent, the
 * same flows are read from /proc/net/nf_conntrack (mode 0440 root;
 * CONFIG_NF_CONNTRACK_PROCFS is on here), whose text is parsed below; tests
 * read files in that format.
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
 */
import { open } from 'node:fs/promises';
import { SluiceError } from '../errors/errors.ts';
import { loadNative } from '../nfqueue/native.ts';
import { parseIPv6Address } from '../packet/address6.ts';
import { CT_ROW_WORDS, EventFlag, RowMeta } from '../conntrack/layout.ts';

/** The kernel's flow table could be read neither over ctnetlink nor from /proc. */
export class ConntrackReadError extends SluiceError {
  readonly code = 'ERR_SLUICE_CONNTRACK_READ';
}

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
  readonly v6?: { readonly client: Uint32Array; readonly dst: Uint32Array; readonly replySrc: Uint32Array } | undefined;
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

/** TCP states as conntrack prints them: the parser returns these very strings, so a line costs no string. */
const TCP_STATES = ['NONE', 'SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK', 'TIME_WAIT', 'CLOSE', 'SYN_SENT2'] as const;

const C_NL = 10;
const C_SPACE = 32;
const C_TAB = 9;
const C_EQ = 61;
const C_DOT = 46;
const C_0 = 48;

function isSpace(c: number): boolean {
  return c === C_SPACE || c === C_TAB || c === 13;
}

/** bytes[from, to) equals the ASCII `word`. */
function bytesAre(b: Uint8Array, from: number, to: number, word: string): boolean {
  if (to - from !== word.length) return false;
  for (let i = 0; i < word.length; i++) if (b[from + i] !== word.charCodeAt(i)) return false;
  return true;
}

/** bytes[from, to) as text (only off the common path: a state we do not know, an IPv6 address). */
function textAt(b: Uint8Array, from: number, to: number): string {
  return Buffer.from(b.buffer, b.byteOffset + from, to - from).toString('latin1');
}

/** A decimal port 0-65535 in bytes[from, to), or -1. */
function portAt(b: Uint8Array, from: number, to: number): number {
  if (to <= from || to - from > 5) return -1;
  let v = 0;
  for (let i = from; i < to; i++) {
    const d = (b[i] ?? 0) - C_0;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v > 65535 ? -1 : v;
}

/** A dotted quad in bytes[from, to) as a u32 (the rules of parseIPv4Address: 1-3 digits, no leading zero, <= 255), or -1. */
function ipv4At(b: Uint8Array, from: number, to: number): number {
  let v = 0;
  let octets = 0;
  let i = from;
  while (octets < 4) {
    const start = i;
    let o = 0;
    while (i < to) {
      const d = (b[i] ?? 0) - C_0;
      if (d < 0 || d > 9) break;
      o = o * 10 + d;
      i++;
    }
    const digits = i - start;
    if (digits === 0 || digits > 3 || o > 255 || (digits > 1 && b[start] === C_0)) return -1;
    v = v * 256 + o;
    octets++;
    if (octets < 4) {
      if (i >= to || b[i] !== C_DOT) return -1;
      i++;
    }
  }
  return i === to ? v : -1;
}

/**
 * One flow of the table, parsed from bytes into a reused object. A table
 * of a million flows is tens of millions of tokens: a parser that made a
 * string or an object per token or line (split, slices, a record per line)
 * left the garbage collector pauses of several milliseconds on the loop
 * that decides SYNs while the resync read the table (measured: a 15 ms
 * turn with 1M flows). This one allocates nothing for an IPv4 line (an
 * IPv6 line's addresses go through their text form; a state the kernel
 * may add later is sliced as text).
 *
 * Invariant: the object handed to a callback is valid only during that
 * call; the next line overwrites it (copyFlow keeps one).
 */
class FlowScratch implements KernelFlow {
  family: 4 | 6 = 4;
  protocol: 'tcp' | 'udp' = 'tcp';
  state = '';
  client = 0;
  clientPort = 0;
  dst = 0;
  dstPort = 0;
  replySrc = 0;
  replySrcPort = 0;
  v6: { client: Uint32Array; dst: Uint32Array; replySrc: Uint32Array } | undefined = undefined;
}

/** The address and port values of a line, in order: src dst sport dport of the original tuple, then of the reply. */
const KV_SRC = 0;
const KV_DST = 1;
const KV_SPORT = 2;
const KV_DPORT = 3;

/** Which key a `key=` token names (src, dst, sport, dport), or -1. */
function kvKey(b: Uint8Array, from: number, eq: number): number {
  const n = eq - from;
  if (n === 3) {
    if (bytesAre(b, from, eq, 'src')) return KV_SRC;
    if (bytesAre(b, from, eq, 'dst')) return KV_DST;
    return -1;
  }
  if (n === 5) {
    if (bytesAre(b, from, eq, 'sport')) return KV_SPORT;
    if (bytesAre(b, from, eq, 'dport')) return KV_DPORT;
  }
  return -1;
}

/**
 * Parses the line bytes[from, to) into `out`: true for a tcp or udp flow of
 * either family, false for anything else (icmp, a malformed line).
 */
function parseFlowBytes(b: Uint8Array, from: number, to: number, out: FlowScratch): boolean {
  let field = 0;
  let kv = 0; // key=value tokens taken (the first 8 of src/dst/sport/dport)
  let firstKv = 6;
  let family = 0;
  let tcp = false;
  // IPv6 address texts: their [from, to) byte ranges, parsed after the line.
  let c6a = 0, c6b = 0, d6a = 0, d6b = 0, r6a = 0, r6b = 0;
  let i = from;
  while (i < to && kv < 8) {
    while (i < to && isSpace(b[i] ?? 0)) i++;
    if (i >= to) break;
    const start = i;
    let eq = -1;
    while (i < to && !isSpace(b[i] ?? 0)) {
      if (eq < 0 && b[i] === C_EQ) eq = i;
      i++;
    }
    const end = i;
    if (field === 0) {
      if (bytesAre(b, start, end, 'ipv4')) family = 4;
      else if (bytesAre(b, start, end, 'ipv6')) family = 6;
      else return false;
    } else if (field === 2) {
      if (bytesAre(b, start, end, 'tcp')) tcp = true;
      else if (bytesAre(b, start, end, 'udp')) firstKv = 5;
      else return false;
    } else if (field === 5 && tcp) {
      let state: string | undefined;
      for (const name of TCP_STATES) {
        if (bytesAre(b, start, end, name)) {
          state = name;
          break;
        }
      }
      out.state = state ?? textAt(b, start, end);
    } else if (field >= firstKv && eq > start) {
      const key = kvKey(b, start, eq);
      // Which of the 8 values this is must follow the order src dst sport dport, twice.
      if (key >= 0) {
        if (key !== (kv & 3)) return false;
        const vFrom = eq + 1;
        if (key === KV_SPORT || key === KV_DPORT) {
          const port = portAt(b, vFrom, end);
          if (port < 0) return false;
          if (kv === 2) out.clientPort = port;
          else if (kv === 3) out.dstPort = port;
          else if (kv === 6) out.replySrcPort = port;
        } else if (family === 4) {
          const a = ipv4At(b, vFrom, end);
          if (a < 0) return false;
          if (kv === 0) out.client = a;
          else if (kv === 1) out.dst = a;
          else if (kv === 4) out.replySrc = a;
        } else if (kv === 0) {
          c6a = vFrom;
          c6b = end;
        } else if (kv === 1) {
          d6a = vFrom;
          d6b = end;
        } else if (kv === 4) {
          r6a = vFrom;
          r6b = end;
        }
        kv++;
      }
    }
    field++;
  }
  if (kv < 8) return false; // (kv reaches 8 only past field 0, which refuses any family but ipv4 and ipv6)
  out.protocol = tcp ? 'tcp' : 'udp';
  if (!tcp) out.state = 'UDP';
  if (family === 4) {
    out.family = 4;
    out.v6 = undefined;
    return true;
  }
  const client = parseIPv6Address(textAt(b, c6a, c6b));
  const dst = parseIPv6Address(textAt(b, d6a, d6b));
  const replySrc = parseIPv6Address(textAt(b, r6a, r6b));
  if (client === undefined || dst === undefined || replySrc === undefined) return false;
  out.family = 6;
  out.client = 0;
  out.dst = 0;
  out.replySrc = 0;
  out.v6 = { client, dst, replySrc };
  return true;
}

/** A flow that outlives its callback (the scratch object does not). */
function copyFlow(f: KernelFlow): KernelFlow {
  const { family, protocol, state, client, clientPort, dst, dstPort, replySrc, replySrcPort, v6 } = f;
  return v6
    ? { family, protocol, state, client, clientPort, dst, dstPort, replySrc, replySrcPort, v6: { client: v6.client.slice(), dst: v6.dst.slice(), replySrc: v6.replySrc.slice() } }
    : { family, protocol, state, client, clientPort, dst, dstPort, replySrc, replySrcPort };
}

/** One line of the table as text (tests, tools): the streamed parser's result, copied. */
export function parseConntrackLine(line: string): KernelFlow | undefined {
  const b = Buffer.from(line, 'latin1');
  const out = new FlowScratch();
  return parseFlowBytes(b, 0, b.length, out) ? copyFlow(out) : undefined;
}

/** How much of the flow table is read and parsed per event-loop turn: ~64 KiB is ~400 lines, well under a millisecond. */
export const FLOW_CHUNK_BYTES = 64 * 1024;

/**
 * Splits a byte stream into lines across chunks and parses each complete
 * line in place into one reused flow, handed to `flow`. A line cut by a
 * chunk's end is copied into `#carry` until the next chunk completes it.
 */
export class FlowLines {
  #carry = Buffer.allocUnsafe(1024);
  #carried = 0;
  readonly #out = new FlowScratch();
  readonly #flow: (f: KernelFlow) => void;
  constructor(flow: (f: KernelFlow) => void) {
    this.#flow = flow;
  }
  #line(b: Uint8Array, from: number, to: number): void {
    if (parseFlowBytes(b, from, to, this.#out)) this.#flow(this.#out);
  }
  #keep(chunk: Uint8Array, from: number, to: number): void {
    const need = this.#carried + (to - from);
    if (need > this.#carry.length) {
      const bigger = Buffer.allocUnsafe(Math.max(need, this.#carry.length * 2));
      this.#carry.copy(bigger, 0, 0, this.#carried);
      this.#carry = bigger;
    }
    this.#carry.set(chunk.subarray(from, to), this.#carried);
    this.#carried = need;
  }
  push(chunk: Buffer, length: number): void {
    let from = 0;
    if (this.#carried > 0) {
      const nl = chunk.indexOf(C_NL, 0);
      if (nl < 0 || nl >= length) {
        this.#keep(chunk, 0, length);
        return;
      }
      this.#keep(chunk, 0, nl);
      this.#line(this.#carry, 0, this.#carried);
      this.#carried = 0;
      from = nl + 1;
    }
    for (let nl = chunk.indexOf(C_NL, from); nl >= 0 && nl < length; nl = chunk.indexOf(C_NL, from)) {
      this.#line(chunk, from, nl);
      from = nl + 1;
    }
    if (from < length) this.#keep(chunk, from, length);
  }
  end(): void {
    if (this.#carried > 0) this.#line(this.#carry, 0, this.#carried);
    this.#carried = 0;
  }
}

/**
 * Rows of a dump handed to the loop per threadpool round trip: ~0.1 ms of
 * the loop's time, ~2,000 round trips for a million flows. Small for a
 * second reason: the kernel's dump kills each expired entry it passes
 * (ctnetlink_dump_table, as /proc's reader does), so while many flows end
 * a read of N live rows can set off many times N destroy events at once.
 * With 2,048 rows a resync during the peak of a million flows ending
 * overran the events' socket 10 times in one run (its buffer then 8 MiB: ~20k events);
 * 512 is what /proc's 64 KiB chunks held (~430 lines), measured with none.
 */
export const DUMP_ROWS = 512;

/** errno values of a dump refused because this kernel has no ctnetlink (nf_conntrack_netlink): then /proc is read. */
const NO_CTNETLINK: ReadonlySet<number> = new Set([2 /* ENOENT */, 22 /* EINVAL */, 93 /* EPROTONOSUPPORT */, 95 /* EOPNOTSUPP */]);

/** How the flow table can be listed over ctnetlink by this process: allowed, refused (no CAP_NET_ADMIN), no ctnetlink here (then /proc), or another error. */
export type CtnetlinkAccess = 'allowed' | 'denied' | 'missing' | { readonly error: string };

/** Opens a dump and ends it at once (the preflight's probe: the kernel answers a refusal before the first flow). */
export function probeCtnetlink(): CtnetlinkAccess {
  try {
    const native = loadNative();
    native.ctDumpClose(native.ctDumpOpen());
    return 'allowed';
  } catch (err) {
    const errno = (err as { errno?: number }).errno ?? 0;
    if (errno === 1 /* EPERM */ || errno === 13 /* EACCES */) return 'denied';
    if (NO_CTNETLINK.has(errno)) return 'missing';
    return { error: (err as Error).message };
  }
}

/** Options of streamKernelFlows. */
export interface FlowReadOptions {
  /**
   * Read this file, in /proc/net/nf_conntrack's format, instead of
   * ctnetlink (tests). Without it: ctnetlink, or /proc/net/nf_conntrack
   * where the kernel has no ctnetlink.
   */
  readonly path?: string;
  /** Awaited after each batch, to let the caller hold the read back (the daemon: while destroy events wait to be read). */
  readonly pace?: () => Promise<void>;
}

/** A dump's row into the reused flow: false for a row the daemon has no use for (a family other than IPv4 and IPv6). */
function rowFlow(rows: Uint32Array, at: number, out: FlowScratch, v6: { client: Uint32Array; dst: Uint32Array; replySrc: Uint32Array }): boolean {
  const family = rows[at + RowMeta.Family];
  // C keeps TCP and UDP rows with both tuples' ports only.
  out.protocol = rows[at + RowMeta.Protocol] === 6 ? 'tcp' : 'udp';
  out.state = out.protocol === 'udp' ? 'UDP' : (rows[at + RowMeta.Flags] ?? 0) & EventFlag.TcpState ? (TCP_STATES[rows[at + RowMeta.TcpState] ?? 0] ?? 'NONE') : 'NONE';
  out.clientPort = rows[at + RowMeta.SrcPort] ?? 0;
  out.dstPort = rows[at + RowMeta.DstPort] ?? 0;
  out.replySrcPort = rows[at + RowMeta.ReplySrcPort] ?? 0;
  if (family === 2) {
    out.family = 4;
    out.client = rows[at + RowMeta.Src] ?? 0;
    out.dst = rows[at + RowMeta.Dst] ?? 0;
    out.replySrc = rows[at + RowMeta.ReplySrc] ?? 0;
    out.v6 = undefined;
    return true;
  }
  if (family !== 10) return false;
  out.family = 6;
  out.client = out.dst = out.replySrc = 0;
  for (let i = 0; i < 4; i++) {
    v6.client[i] = rows[at + RowMeta.Src + i] ?? 0;
    v6.dst[i] = rows[at + RowMeta.Dst + i] ?? 0;
    v6.replySrc[i] = rows[at + RowMeta.ReplySrc + i] ?? 0;
  }
  out.v6 = v6;
  return true;
}

/**
 * The table over ctnetlink: undefined when this kernel has no ctnetlink
 * (the caller reads /proc), else the number of flows handed to onFlow.
 */
async function dumpFlows(onFlow: (f: KernelFlow) => void, pace: (() => Promise<void>) | undefined): Promise<number | undefined> {
  const native = loadNative();
  let handle;
  try {
    handle = native.ctDumpOpen();
  } catch (err) {
    if (NO_CTNETLINK.has((err as { errno?: number }).errno ?? 0)) return undefined;
    throw new ConntrackReadError(`cannot list the kernel's flows over ctnetlink (the daemon needs CAP_NET_ADMIN): ${(err as Error).message}`, { cause: err });
  }
  const rows = new Uint32Array(DUMP_ROWS * CT_ROW_WORDS);
  const out = new FlowScratch();
  const v6 = { client: new Uint32Array(4), dst: new Uint32Array(4), replySrc: new Uint32Array(4) };
  let n = 0;
  try {
    for (;;) {
      let got;
      try {
        got = await native.ctDumpRead(handle, rows);
      } catch (err) {
        throw new ConntrackReadError(`cannot list the kernel's flows over ctnetlink: ${(err as Error).message}`, { cause: err });
      }
      if (got === 0) break;
      for (let i = 0; i < got; i++) {
        if (!rowFlow(rows, i * CT_ROW_WORDS, out, v6)) continue;
        n++;
        onFlow(out);
      }
      if (pace) await pace();
    }
  } finally {
    native.ctDumpClose(handle);
  }
  return n;
}

/** /proc/net/nf_conntrack's text (or a file in its format), FLOW_CHUNK_BYTES per threadpool round trip. */
async function readFlowText(onFlow: (f: KernelFlow) => void, path: string, pace: (() => Promise<void>) | undefined): Promise<number> {
  let n = 0;
  const splitter = new FlowLines((fl) => {
    n++;
    onFlow(fl);
  });
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0; // no conntrack in this namespace yet: no flows
    throw new ConntrackReadError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const buf = Buffer.allocUnsafe(FLOW_CHUNK_BYTES);
    // The table is a seq_file: each read(2) returns one page (~4 KiB, ~25
    // flows) whatever the size asked. readFull repeats the read on the
    // threadpool until the chunk is full, so a million flows cost ~2,600
    // round trips between a worker and this loop, not ~42,000.
    const native = loadNative();
    for (;;) {
      let got;
      try {
        got = await native.readFull(fh.fd, buf, 0, buf.length);
      } catch (err) {
        throw new ConntrackReadError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
      }
      if (got === 0) break;
      splitter.push(buf, got);
      if (pace) await pace();
    }
    splitter.end();
  } finally {
    await fh.close();
  }
  return n;
}

/**
 * Streams the kernel's flows (TCP and UDP, both families) to `onFlow`, a
 * batch per event-loop turn, so a table of a million flows never stalls
 * the loop that decides SYNs. Returns the number of flows seen.
 *
 * The flow handed to `onFlow` is one object reused for every flow (no
 * allocation per flow, see FlowScratch): read it during the call, never
 * keep it (readKernelFlows copies).
 *
 * Throws ConntrackReadError when the table exists but cannot be read: an
 * empty answer would make reconcile free every record. The flows are those
 * of a moving table: one that starts or ends during the read may or may
 * not be seen (callers guard with record age, see the daemon's resync).
 */
export async function streamKernelFlows(onFlow: (f: KernelFlow) => void, opts: FlowReadOptions = {}): Promise<number> {
  if (opts.path !== undefined) return readFlowText(onFlow, opts.path, opts.pace);
  return (await dumpFlows(onFlow, opts.pace)) ?? readFlowText(onFlow, '/proc/net/nf_conntrack', opts.pace);
}

/** The kernel's flows, collected (small tables and tests; the daemon streams them). */
export async function readKernelFlows(opts: FlowReadOptions = {}): Promise<KernelFlow[]> {
  const out: KernelFlow[] = [];
  await streamKernelFlows((f) => out.push(copyFlow(f)), opts);
  return out;
}
