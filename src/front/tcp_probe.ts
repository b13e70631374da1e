/**
 * A TCP probe for the RTT prober: a SYN to one port of the target (443 or
 * 53, say), timed to the SYN-ACK or RST that comes back. Many resolvers and
 * client networks drop ICMP echo but answer a SYN to a service port, and a
 * closed port answers with a RST just as fast: either is a round trip.
 *
 * It is a Pinger (icmp_echo.ts), one per port, so the prober and the
 * per-target method choice (probe_methods.ts) treat it like ICMP.
 *
 * Packets. The SYN (20-byte header + an MSS option) is built here and sent on
 * a raw IPPROTO_TCP socket of the npm package `raw-socket` (the one net-ping
 * uses) without IP_HDRINCL: the kernel writes the IP header and chooses the
 * source address by route. The TCP checksum covers a pseudo-header with that
 * source address, so it is looked up first, as the kernel would pick it: a
 * UDP socket connected to the target names it (no packet is sent), cached
 * per target for SOURCE_TTL_MS. IPv4 and IPv6 both compute the checksum
 * here (RFC 793 / RFC 8200 §8.1 pseudo-headers), so no IPV6_CHECKSUM socket
 * option is relied on. Each probe takes a fresh random source port (from
 * 49152-65535, unique among outstanding probes) and a random ISN.
 *
 * Matching. The raw socket receives a copy of every TCP segment delivered to
 * this host (IPv4 with its IP header, IPv6 without, the source address from
 * recvfrom). A segment answers a probe when its destination port is the
 * probe's source port (the outstanding probes are indexed by it, so other
 * traffic costs one Map lookup and no allocation beyond raw-socket's own),
 * its source is the target's address and port, it carries ACK with
 * ack = ISN + 1, and it is a SYN-ACK or a RST. Anything else (a wrong ack,
 * another host, a plain ACK) is ignored and the probe waits on.
 *
 * Reset. After a SYN-ACK we send a RST (seq = ISN + 1) at once, so the
 * target frees the half-open connection. The local kernel, which has no
 * socket on our port, answers the SYN-ACK with its own RST too (measured in
 * test/netns/tcp-probe.test.ts): the target sees two RSTs, the second for a
 * connection it has already dropped, which it ignores. Ours is sent anyway:
 * a host firewall that drops the kernel's RST (or a future socket on the
 * port) must not leave the target holding a connection.
 *
 * Cost. Receiving every locally delivered TCP segment is the price of a raw
 * socket without a BPF filter (raw-socket cannot attach one). The socket's
 * receive side is paused whenever no probe is outstanding; the kernel then
 * fills its receive buffer and drops the rest (no wakeups), and the stale
 * segments read on resume match nothing. The front node's steered traffic
 * is forwarded, not delivered locally, so it never reaches this socket.
 *
 * Timing: performance.now() when raw-socket reports the SYN sent and when
 * the answer is read (sub-ms resolution; event-loop delay adds to both ends
 * alike for a busy node, as for ICMP).
 *
 * Bounds: at most `maxOutstanding` probes wait for answers (more are
 * answered null at once and counted as `refused`); each waits `timeoutMs`.
 */
import { createSocket as createUdpSocket, type Socket as UdpSocket } from 'node:dgram';
import { randomFillSync } from 'node:crypto';
import { createRequire } from 'node:module';
import { parseIPv4Address } from '../packet/address.ts';
import { parseIPv6Groups } from '../packet/address6.ts';
import { PingerUnavailableError, type Pinger } from './icmp_echo.ts';

export const TCP_FLAG_FIN = 0x01;
export const TCP_FLAG_SYN = 0x02;
export const TCP_FLAG_RST = 0x04;
export const TCP_FLAG_ACK = 0x10;

/** Source ports of probes: the IANA dynamic range. */
export const PORT_MIN = 49152;
export const PORT_MAX = 65535;
/** A target's looked-up source address is reused this long (routes change rarely; a stale one only costs that probe). */
const SOURCE_TTL_MS = 30_000;
const SOURCE_CACHE_MAX = 4096;

/** An address as the bytes of the pseudo-header: 4 (IPv4) or 16 (IPv6). */
export function addressBytes(text: string): Uint8Array | undefined {
  const v4 = parseIPv4Address(text);
  if (v4 !== undefined) return Uint8Array.of(v4 >>> 24, (v4 >>> 16) & 0xff, (v4 >>> 8) & 0xff, v4 & 0xff);
  const g = parseIPv6Groups(text);
  if (g === undefined) return undefined;
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = ((g[i] ?? 0) >>> 8) & 0xff;
    out[2 * i + 1] = (g[i] ?? 0) & 0xff;
  }
  return out;
}

/** The 16-bit ones'-complement sum of `b` (odd length padded with a zero byte), added to `sum`, not folded. */
function sum16(b: Uint8Array, sum: number): number {
  let s = sum;
  const n = b.length & ~1;
  for (let i = 0; i < n; i += 2) s += ((b[i] ?? 0) << 8) | (b[i + 1] ?? 0);
  if (b.length & 1) s += (b[b.length - 1] ?? 0) << 8;
  return s;
}

/**
 * The TCP checksum of `segment` (its checksum field taken as it is: zero
 * it first to compute, leave it to verify: a correct segment sums to 0)
 * from `src` to `dst`, both 4 or both 16 bytes: RFC 793's pseudo-header for
 * IPv4 (addresses, zero, protocol 6, TCP length), RFC 8200 §8.1's for IPv6
 * (addresses, 32-bit length, 3 zero bytes, next header 6).
 */
export function tcpChecksum(src: Uint8Array, dst: Uint8Array, segment: Uint8Array): number {
  let s = sum16(src, 0);
  s = sum16(dst, s);
  const len = segment.length;
  // Both pseudo-headers add the protocol and the length as 16-bit words (IPv6's 32-bit length is < 65536 here).
  s += 6 + (len & 0xffff) + (len >>> 16);
  s = sum16(segment, s);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

/** Fields of a segment to build. */
export interface SegmentSpec {
  readonly srcPort: number;
  readonly dstPort: number;
  readonly seq: number;
  readonly ack: number;
  readonly flags: number;
  readonly window: number;
  /** MSS option (SYN only): 0 for none. */
  readonly mss: number;
}

/** A TCP segment (header only, no payload) with its checksum for src -> dst. */
export function buildSegment(spec: SegmentSpec, src: Uint8Array, dst: Uint8Array): Buffer {
  const len = spec.mss > 0 ? 24 : 20;
  const b = Buffer.alloc(len);
  b.writeUInt16BE(spec.srcPort, 0);
  b.writeUInt16BE(spec.dstPort, 2);
  b.writeUInt32BE(spec.seq >>> 0, 4);
  b.writeUInt32BE(spec.ack >>> 0, 8);
  b[12] = (len / 4) << 4;
  b[13] = spec.flags;
  b.writeUInt16BE(spec.window, 14);
  if (spec.mss > 0) {
    b[20] = 2; // kind MSS
    b[21] = 4;
    b.writeUInt16BE(spec.mss, 22);
  }
  b.writeUInt16BE(tcpChecksum(src, dst, b), 16);
  return b;
}

/** The TCP header fields a received segment is matched on. */
export interface SegmentHead {
  srcPort: number;
  dstPort: number;
  seq: number;
  ack: number;
  flags: number;
}

/**
 * Reads the TCP header of what the raw socket received into `out`: for
 * IPv4 the IP datagram (version 4, protocol 6, its header length skipped;
 * the IP source address, as 32 bits, is returned), for IPv6 the TCP segment
 * alone (returns 0). -1 when it is no TCP segment we can read (too short,
 * another protocol, a fragment past the first).
 */
export function readSegment(buf: Uint8Array, length: number, ipv4: boolean, out: SegmentHead): number {
  let off = 0;
  let src = 0;
  if (ipv4) {
    if (length < 20 || ((buf[0] ?? 0) >>> 4) !== 4 || buf[9] !== 6) return -1;
    // A non-first fragment has no TCP header.
    if ((((buf[6] ?? 0) & 0x1f) << 8) | (buf[7] ?? 0)) return -1;
    off = ((buf[0] ?? 0) & 0x0f) * 4;
    if (off < 20) return -1;
    src = (((buf[12] ?? 0) << 24) | ((buf[13] ?? 0) << 16) | ((buf[14] ?? 0) << 8) | (buf[15] ?? 0)) >>> 0;
  }
  if (length < off + 20) return -1;
  const u16 = (i: number): number => ((buf[off + i] ?? 0) << 8) | (buf[off + i + 1] ?? 0);
  const u32 = (i: number): number => ((u16(i) << 16) | u16(i + 2)) >>> 0;
  out.srcPort = u16(0);
  out.dstPort = u16(2);
  out.seq = u32(4);
  out.ack = u32(8);
  out.flags = buf[off + 13] ?? 0;
  return src;
}

/** What a received segment means for the probe it reached (by port). */
export type Answer = 'syn-ack' | 'rst' | 'none';

/**
 * Whether a segment from (`from` address, srcPort) answers the probe of
 * target `target`:`port` with initial sequence number `isn`: it must come
 * from the target's address and port and acknowledge our SYN
 * (ACK set, ack = isn + 1); then a SYN-ACK (open port) or RST (closed) is an
 * answer. Anything else is 'none'.
 */
export function answerOf(seg: SegmentHead, from: Uint8Array, target: Uint8Array, port: number, isn: number): Answer {
  if (seg.srcPort !== port || from.length !== target.length) return 'none';
  for (let i = 0; i < from.length; i++) if (from[i] !== target[i]) return 'none';
  if ((seg.flags & TCP_FLAG_ACK) === 0 || seg.ack !== ((isn + 1) >>> 0)) return 'none';
  if ((seg.flags & TCP_FLAG_RST) !== 0) return 'rst';
  if ((seg.flags & TCP_FLAG_SYN) !== 0) return 'syn-ack';
  return 'none';
}

export interface TcpProbeCounters {
  /** SYNs sent. */
  sent: number;
  /** Answered by a SYN-ACK (then reset by us) or a RST. */
  synAcks: number;
  rsts: number;
  /** RSTs we sent after SYN-ACKs. */
  resetsSent: number;
  timeouts: number;
  /** Probes answered null at once: maxOutstanding were waiting, no source address, or a send error. */
  refused: number;
  sendErrors: number;
}

/** The part of raw-socket's API used here (the package ships no types). */
interface RawSocket {
  send(buffer: Buffer, offset: number, length: number, address: string, before: (() => void) | null, after: (error: Error | null, bytes: number) => void): unknown;
  on(event: 'message', listener: (buffer: Buffer, source: string) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  pauseRecv(): unknown;
  resumeRecv(): unknown;
  close(): unknown;
}
interface RawSocketModule {
  createSocket(options: { protocol: number; addressFamily: number }): RawSocket;
  readonly Protocol: { readonly TCP: number };
  readonly AddressFamily: { readonly IPv4: number; readonly IPv6: number };
}

export interface TcpPingerOptions {
  /** The destination port of the SYNs. */
  readonly port: number;
  /** A probe unanswered for this long is a timeout (null). */
  readonly timeoutMs: number;
  /** Probes waiting for answers, at most. */
  readonly maxOutstanding: number;
  readonly onSocketError?: (err: Error) => void;
}

interface Probe {
  readonly port: number; // our source port: the key
  readonly target: Uint8Array;
  readonly targetText: string;
  readonly src: Uint8Array;
  readonly isn: number;
  readonly deadline: number;
  sentAt: number;
  readonly done: (rttMs: number | null) => void;
  readonly v6: boolean;
}

/** Opens the raw TCP sockets (IPv4 required, IPv6 optional as for ICMP). */
export function createTcpPinger(opts: TcpPingerOptions): TcpPinger {
  let mod: RawSocketModule;
  let s4: RawSocket;
  try {
    mod = createRequire(import.meta.url)('raw-socket') as RawSocketModule;
    s4 = mod.createSocket({ protocol: mod.Protocol.TCP, addressFamily: mod.AddressFamily.IPv4 });
  } catch (err) {
    throw new PingerUnavailableError(`cannot open a raw TCP socket for RTT probes (needs root or CAP_NET_RAW): ${(err as Error).message}`, { cause: err });
  }
  let s6: RawSocket | undefined;
  let why6: string | undefined;
  try {
    s6 = mod.createSocket({ protocol: mod.Protocol.TCP, addressFamily: mod.AddressFamily.IPv6 });
  } catch (err) {
    why6 = `cannot open a raw IPv6 TCP socket: ${(err as Error).message}`;
  }
  return new TcpPinger(opts, s4, s6, why6);
}

export class TcpPinger implements Pinger {
  readonly counters: TcpProbeCounters = { sent: 0, synAcks: 0, rsts: 0, resetsSent: 0, timeouts: 0, refused: 0, sendErrors: 0 };
  readonly ipv6Unavailable: string | undefined;
  readonly #opts: TcpPingerOptions;
  readonly #s4: RawSocket;
  readonly #s6: RawSocket | undefined;
  /** Outstanding probes by our source port; insertion order is deadline order (one timeout for all). */
  readonly #probes = new Map<number, Probe>();
  readonly #sources = new Map<string, { readonly src: Uint8Array; readonly at: number }>();
  readonly #lookup: SourceLookup;
  readonly #seg: SegmentHead = { srcPort: 0, dstPort: 0, seq: 0, ack: 0, flags: 0 };
  readonly #rand = new Uint32Array(64);
  #randNext = 64;
  #timer: NodeJS.Timeout | undefined;
  #receiving = false;
  #closed = false;

  constructor(opts: TcpPingerOptions, s4: RawSocket, s6: RawSocket | undefined, why6: string | undefined) {
    this.#opts = opts;
    this.#s4 = s4;
    this.#s6 = s6;
    this.ipv6Unavailable = why6;
    this.#lookup = new SourceLookup();
    s4.on('message', (b, from) => {
      this.#received(b, from, false);
    });
    s4.on('error', (err) => opts.onSocketError?.(err));
    s4.pauseRecv();
    if (s6) {
      s6.on('message', (b, from) => {
        this.#received(b, from, true);
      });
      s6.on('error', (err) => opts.onSocketError?.(err));
      s6.pauseRecv();
    }
  }

  get outstanding(): number {
    return this.#probes.size;
  }

  ping(target: string, done: (rttMs: number | null) => void): void {
    const dst = addressBytes(target);
    const v6 = dst?.length === 16;
    const sock = v6 ? this.#s6 : this.#s4;
    if (this.#closed || dst === undefined || sock === undefined || this.#probes.size >= this.#opts.maxOutstanding) {
      this.counters.refused++;
      done(null);
      return;
    }
    const cached = this.#sources.get(target);
    if (cached && performance.now() - cached.at < SOURCE_TTL_MS) {
      this.#send(target, dst, cached.src, v6, sock, done);
      return;
    }
    this.#lookup.source(target, v6, (src) => {
      if (src === undefined || this.#closed) {
        this.counters.refused++;
        done(null);
        return;
      }
      if (this.#sources.size >= SOURCE_CACHE_MAX) this.#sources.clear();
      this.#sources.set(target, { src, at: performance.now() });
      this.#send(target, dst, src, v6, sock, done);
    });
  }

  #random(): number {
    if (this.#randNext >= this.#rand.length) {
      randomFillSync(this.#rand);
      this.#randNext = 0;
    }
    return this.#rand[this.#randNext++] ?? 0;
  }

  #send(targetText: string, dst: Uint8Array, src: Uint8Array, v6: boolean, sock: RawSocket, done: (rttMs: number | null) => void): void {
    // The bound may have filled while the source was looked up.
    if (this.#probes.size >= this.#opts.maxOutstanding) {
      this.counters.refused++;
      done(null);
      return;
    }
    // A free source port: maxOutstanding (<= 4096 by config) of 16384 are taken at most, so this ends quickly.
    let port = PORT_MIN + (this.#random() % (PORT_MAX - PORT_MIN + 1));
    while (this.#probes.has(port)) port = port === PORT_MAX ? PORT_MIN : port + 1;
    const isn = this.#random();
    const syn = buildSegment({ srcPort: port, dstPort: this.#opts.port, seq: isn, ack: 0, flags: TCP_FLAG_SYN, window: 64240, mss: v6 ? 1440 : 1460 }, src, dst);
    const now = performance.now();
    const p: Probe = { port, target: dst, targetText, src, isn, deadline: now + this.#opts.timeoutMs, sentAt: now, done, v6 };
    this.#probes.set(port, p);
    this.#resume();
    this.#arm();
    this.counters.sent++;
    sock.send(syn, 0, syn.length, targetText, null, (error) => {
      if (error !== null) {
        this.counters.sendErrors++;
        this.#finish(p, null);
        return;
      }
      // The RTT starts when the kernel has taken the SYN (as net-ping stamps its echoes).
      p.sentAt = performance.now();
    });
  }

  #received(buf: Buffer, from: string, v6: boolean): void {
    const seg = this.#seg;
    const src4 = readSegment(buf, buf.length, !v6, seg);
    if (src4 < 0) return;
    const p = this.#probes.get(seg.dstPort);
    if (p?.v6 !== v6) return;
    const fromBytes = v6 ? addressBytes(from) : Uint8Array.of(src4 >>> 24, (src4 >>> 16) & 0xff, (src4 >>> 8) & 0xff, src4 & 0xff);
    if (fromBytes === undefined) return;
    const a = answerOf(seg, fromBytes, p.target, this.#opts.port, p.isn);
    if (a === 'none') return;
    const rtt = Math.round((performance.now() - p.sentAt) * 1000) / 1000;
    if (a === 'rst') this.counters.rsts++;
    else {
      this.counters.synAcks++;
      this.#reset(p);
    }
    this.#finish(p, rtt);
  }

  /** A RST for the half-open connection the SYN-ACK opened at the target (seq = what it acknowledged). */
  #reset(p: Probe): void {
    const sock = p.v6 ? this.#s6 : this.#s4;
    if (!sock) return;
    const rst = buildSegment({ srcPort: p.port, dstPort: this.#opts.port, seq: (p.isn + 1) >>> 0, ack: 0, flags: TCP_FLAG_RST, window: 0, mss: 0 }, p.src, p.target);
    sock.send(rst, 0, rst.length, p.targetText, null, (error) => {
      if (error !== null) this.counters.sendErrors++;
      else this.counters.resetsSent++;
    });
  }

  #finish(p: Probe, rtt: number | null): void {
    if (this.#probes.get(p.port) !== p) return;
    this.#probes.delete(p.port);
    if (this.#probes.size === 0) this.#pause();
    p.done(rtt);
  }

  /** One timer, for the oldest probe's deadline. */
  #arm(): void {
    if (this.#timer !== undefined || this.#closed) return;
    const first = this.#probes.values().next();
    if (first.done === true) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#expire();
      },
      Math.max(1, Math.ceil(first.value.deadline - performance.now())),
    );
    this.#timer.unref();
  }

  #expire(): void {
    const now = performance.now();
    for (const p of this.#probes.values()) {
      if (p.deadline > now) break;
      this.counters.timeouts++;
      this.#finish(p, null);
    }
    this.#arm();
  }

  #resume(): void {
    if (this.#receiving) return;
    this.#receiving = true;
    this.#s4.resumeRecv();
    this.#s6?.resumeRecv();
  }

  #pause(): void {
    if (!this.#receiving) return;
    this.#receiving = false;
    this.#s4.pauseRecv();
    this.#s6?.pauseRecv();
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const pending = [...this.#probes.values()];
    this.#probes.clear();
    for (const p of pending) p.done(null);
    this.#lookup.close();
    this.#s4.close();
    this.#s6?.close();
  }
}

/**
 * The source address the kernel would use toward a target: a UDP socket
 * connect()ed to it (no packet leaves) reports its local address. One
 * socket per family, lookups one after another (a socket has one peer).
 */
class SourceLookup {
  #socks: [UdpSocket | undefined, UdpSocket | undefined] = [undefined, undefined];
  readonly #queue: { target: string; v6: boolean; cb: (src: Uint8Array | undefined) => void }[] = [];
  #busy = false;
  #closed = false;

  source(target: string, v6: boolean, cb: (src: Uint8Array | undefined) => void): void {
    if (this.#closed) {
      cb(undefined);
      return;
    }
    this.#queue.push({ target, v6, cb });
    if (!this.#busy) this.#next();
  }

  #next(): void {
    const job = this.#queue.shift();
    if (!job || this.#closed) {
      this.#busy = false;
      return;
    }
    this.#busy = true;
    const i = job.v6 ? 1 : 0;
    let sock = this.#socks[i];
    if (!sock) {
      sock = createUdpSocket(job.v6 ? 'udp6' : 'udp4');
      sock.on('error', () => undefined);
      sock.unref();
      this.#socks[i] = sock;
    }
    const s = sock;
    const finish = (src: Uint8Array | undefined): void => {
      try {
        s.disconnect();
      } catch {
        // Not connected (connect failed): nothing to undo.
      }
      job.cb(src);
      this.#next();
    };
    try {
      // Node passes connect's error (no route) to the callback, though its types name no argument.
      const onConnect = (err?: Error | null): void => {
        let src: Uint8Array | undefined;
        try {
          src = err ? undefined : addressBytes(s.address().address);
        } catch {
          src = undefined;
        }
        finish(src);
      };
      s.connect(9, job.target, onConnect);
    } catch {
      // No route (ENETUNREACH) and the like surface here or as the socket's error; either way no source.
      job.cb(undefined);
      this.#next();
    }
  }

  close(): void {
    this.#closed = true;
    for (const s of this.#socks) s?.close();
    this.#socks = [undefined, undefined];
    for (const j of this.#queue.splice(0)) j.cb(undefined);
  }
}
