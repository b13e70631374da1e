/**
 * The DNS server's sockets: UDP and TCP on every configured address, IPv4
 * and IPv6, all feeding the one Answerer.
 *
 * UDP, `udpIo: batch` (the default): a UdpBatchSocket per address
 * (udp_batch.ts): recvmmsg hands over up to UDP_BATCH datagrams at once,
 * each answered by one `respond`, and sendmmsg sends the batch's answers.
 * `udpIo: dgram`: Node's dgram, one datagram, one `respond`, one send (of
 * a copy: the writer's buffer is reused by the next query before dgram is
 * done with it). Either way every answer goes to the query's source address
 * and port, from the socket bound to the address it came to (one socket per
 * listen address; a wildcard address answers from the address the kernel's
 * routing picks, as before).
 * TCP (RFC 7766): two-octet length framing, several queries per
 * connection, answered in order; a connection is closed after idleSeconds of
 * silence or on a frame of length 0, and new ones are refused beyond
 * maxConnections (counted). Input is bounded by what one frame can need
 * (2 + 65535 octets) plus one read; output by the socket's high-water mark:
 * past it we stop reading until the client drains its answers.
 * A TCP message is first offered to the zone-transfer handler (when set):
 * an AXFR/IXFR request is answered there with several messages.
 */
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import type { Answerer } from './answerer.ts';
import { loadNative } from '../nfqueue/native.ts';
import { SluiceError } from '../errors/errors.ts';
import { UdpBatchSocket, UdpStat } from './udp_batch.ts';

/** Datagrams per recvmmsg at most (the batch one crossing into JavaScript answers). */
export const UDP_BATCH = 64;

/** How UDP is read and written: recvmmsg/sendmmsg through the addon, or Node's dgram. */
export type UdpIo = 'batch' | 'dgram';

/** The kernel would not take the per-prefix steering program on a worker's UDP socket (SO_ATTACH_REUSEPORT_CBPF). */
export class ReuseportSteerError extends SluiceError {
  readonly code = 'ERR_SLUICE_REUSEPORT_STEER';
}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
  readonly family: 4 | 6;
}

export function parseListen(s: string): ListenAddress {
  const i = s.lastIndexOf(':');
  let host = s.slice(0, i);
  const port = Number(s.slice(i + 1));
  const v6 = host.startsWith('[');
  if (v6) host = host.slice(1, -1);
  return { host, port, family: v6 ? 6 : 4 };
}

/**
 * How a worker binds when several processes serve the same addresses:
 * SO_REUSEPORT on UDP and TCP; with `steer`, the UDP group is steered by
 * client prefix (native/src/reuseport.c) so that one prefix's datagrams all
 * reach one worker and its per-prefix RRL buckets.
 */
export interface SharedListen {
  readonly steer?: { readonly groupSize: number; readonly ipv4Bits: number; readonly ipv6Bits: number };
}

export interface ServerCounters {
  udpErrors: number;
  /** recvmmsg batches answered (udpIo batch): queries over this is the mean batch size. */
  udpBatches: number;
  tcpAccepted: number;
  tcpRefused: number;
  tcpIdleClosed: number;
  tcpBadFrames: number;
}

/** Answers a TCP message that is a zone-transfer request (several messages, unframed); undefined for any other. */
export type TransferHandler = (msg: Buffer, source: string) => Buffer[] | undefined;

export class DnsServer {
  readonly #answerer: Answerer;
  readonly #log: Logger;
  readonly #limited: LimitedLog;
  readonly #udp: UdpSocket[] = [];
  readonly #batch: UdpBatchSocket[] = [];
  /** Per batch socket: its errors and batches already added to the counters. */
  readonly #seen: { errors: number; batches: number }[] = [];
  readonly #udpIo: UdpIo;
  readonly #tcp: Server[] = [];
  readonly #conns = new Set<Socket>();
  readonly #maxConns: number;
  readonly #idleMs: number;
  transfer: TransferHandler | undefined;
  readonly #counters: ServerCounters = { udpErrors: 0, udpBatches: 0, tcpAccepted: 0, tcpRefused: 0, tcpIdleClosed: 0, tcpBadFrames: 0 };

  constructor(answerer: Answerer, opts: { maxConnections: number; idleSeconds: number; udpIo?: UdpIo }, log: Logger) {
    this.#answerer = answerer;
    this.#udpIo = opts.udpIo ?? 'batch';
    this.#log = log;
    this.#limited = new LimitedLog(log);
    this.#maxConns = opts.maxConnections;
    this.#idleMs = opts.idleSeconds * 1000;
  }

  /**
   * The counters, with the batch sockets' native statistics added since
   * the last read (by delta: a primary overwrites these fields with its
   * workers' sums, and has no socket of its own).
   */
  get counters(): ServerCounters {
    this.#sync();
    return this.#counters;
  }

  #sync(): void {
    const c = this.#counters;
    for (let i = 0; i < this.#batch.length; i++) {
      const s = this.#batch[i];
      const seen = this.#seen[i];
      if (s === undefined || seen === undefined) continue;
      const errors = s.errors;
      const batches = s.stats[UdpStat.BATCHES] ?? 0;
      c.udpErrors += errors - seen.errors;
      c.udpBatches += batches - seen.batches;
      seen.errors = errors;
      seen.batches = batches;
    }
  }

  get tcpConnections(): number {
    return this.#conns.size;
  }

  async listen(addresses: readonly ListenAddress[], shared?: SharedListen): Promise<void> {
    for (const a of addresses) {
      await this.#listenUdp(a, shared);
      await this.#listenTcp(a, shared !== undefined);
      this.#log.info({ address: a.host, port: a.port }, 'serving DNS on UDP and TCP');
    }
  }

  #listenUdp(a: ListenAddress, shared: SharedListen | undefined): Promise<void> {
    if (this.#udpIo === 'batch') {
      this.#listenBatch(a, shared);
      return Promise.resolve();
    }
    const sock = createSocket({ type: a.family === 6 ? 'udp6' : 'udp4', ipv6Only: a.family === 6, reusePort: shared !== undefined });
    this.#udp.push(sock);
    sock.on('message', (msg, rinfo) => {
      const n = this.#answerer.respond(msg, msg.length, rinfo.address, false, performance.now());
      if (n > 0) this.#sendUdp(sock, n, rinfo.port, rinfo.address);
    });
    sock.on('error', (err) => {
      // Failed sends land here too (sends have no callback): count all, log a few.
      this.#counters.udpErrors++;
      this.#limited.warn('udp', { err: err.message }, 'UDP socket error');
    });
    return new Promise((resolve, reject) => {
      sock.once('error', reject);
      sock.bind({ address: a.host, port: a.port, exclusive: true }, () => {
        sock.off('error', reject);
        const steer = shared?.steer;
        if (steer !== undefined) {
          try {
            // dgram has no public accessor for the descriptor; _handle.fd is
            // the libuv socket's (Linux).
            const fd = (sock as unknown as { _handle?: { fd?: number } })._handle?.fd;
            if (fd === undefined || fd < 0) throw new ReuseportSteerError('the UDP socket has no descriptor to attach the per-prefix steering to');
            steerGroup(fd, a, steer);
          } catch (err) {
            sock.close();
            reject(err instanceof Error ? err : new ReuseportSteerError(String(err)));
            return;
          }
        }
        resolve();
      });
    });
  }

  /** A batch socket on `a`; throws UdpBatchSocketError (bind) or ReuseportSteerError. */
  #listenBatch(a: ListenAddress, shared: SharedListen | undefined): void {
    const answerer = this.#answerer;
    const sock = new UdpBatchSocket({
      host: a.host,
      port: a.port,
      family: a.family,
      reusePort: shared !== undefined,
      slots: UDP_BATCH,
      reply: answerer.writer.buf,
      handler: (msg, len, source, now) => answerer.respond(msg, len, source, false, now),
      onError: (err) => {
        // The poll could not be restarted: this address no longer serves UDP. Loud, once.
        this.#counters.udpErrors++;
        this.#log.error({ err, address: a.host, port: a.port }, 'UDP batch socket failed: this address no longer answers UDP');
      },
    });
    this.#batch.push(sock);
    this.#seen.push({ errors: 0, batches: 0 });
    const steer = shared?.steer;
    if (steer !== undefined) {
      try {
        steerGroup(sock.fd, a, steer);
      } catch (err) {
        sock.close();
        this.#batch.pop();
        this.#seen.pop();
        throw new ReuseportSteerError(`UDP ${a.host}:${a.port}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
    }
  }

  #sendUdp(sock: UdpSocket, n: number, port: number, address: string): void {
    // dgram keeps a reference to the buffer until the send completes, and
    // the writer's buffer is reused by the next query: send a copy.
    // Without a callback a failed send is an 'error' event (counted there).
    sock.send(Buffer.from(this.#answerer.writer.buf.subarray(0, n)), port, address);
  }

  #listenTcp(a: ListenAddress, reusePort: boolean): Promise<void> {
    const server = createServer({ noDelay: true }, (sock) => {
      this.#serveTcp(sock);
    });
    this.#tcp.push(server);
    server.on('error', (err) => {
      this.#log.error({ err }, 'TCP server error');
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: a.host, port: a.port, ipv6Only: a.family === 6, reusePort, exclusive: true }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  }

  #serveTcp(sock: Socket): void {
    if (this.#conns.size >= this.#maxConns) {
      this.#counters.tcpRefused++;
      sock.destroy();
      return;
    }
    this.#counters.tcpAccepted++;
    this.#conns.add(sock);
    sock.setTimeout(this.#idleMs, () => {
      this.#counters.tcpIdleClosed++;
      sock.destroy();
    });
    sock.on('error', () => {
      /* peer reset: nothing to do */
    });
    sock.on('close', () => {
      this.#conns.delete(sock);
    });
    // Unparsed input as a list of chunks, joined only when a whole frame is
    // there (a frame dribbled in byte by byte costs one copy, not one per byte).
    const chunks: Buffer[] = [];
    let have = 0;
    const source = sock.remoteAddress ?? '';
    const take = (n: number): Buffer => {
      const first = chunks[0];
      const all = chunks.length === 1 && first !== undefined ? first : Buffer.concat(chunks, have);
      chunks.length = 0;
      if (all.length > n) chunks.push(all.subarray(n));
      have -= n;
      return all.subarray(0, n);
    };
    const work = (): void => {
      while (have >= 2) {
        // Backpressure: a client that sends queries and never reads its
        // answers must not make us buffer answers without bound. Stop
        // reading; TCP flow control then slows the client down.
        if (sock.writableNeedDrain) {
          sock.pause();
          sock.once('drain', () => {
            sock.resume();
            work();
          });
          return;
        }
        const first = chunks[0];
        const head = first !== undefined && first.length >= 2 ? first : Buffer.concat(chunks, have);
        const len = head.readUInt16BE(0);
        if (len === 0) {
          this.#counters.tcpBadFrames++;
          sock.destroy();
          return;
        }
        if (have < 2 + len) return;
        const frame = take(2 + len);
        const xfr = this.transfer?.(frame.subarray(2), source);
        if (xfr !== undefined) {
          for (const m of xfr) {
            const out = Buffer.allocUnsafe(2 + m.length);
            out.writeUInt16BE(m.length, 0);
            m.copy(out, 2);
            sock.write(out);
          }
          continue;
        }
        const n = this.#answerer.respond(frame.subarray(2), len, source, true, performance.now());
        if (n > 0) {
          const out = Buffer.allocUnsafe(2 + n);
          out.writeUInt16BE(n, 0);
          this.#answerer.writer.buf.copy(out, 2, 0, n);
          sock.write(out);
        }
      }
    };
    sock.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      have += chunk.length;
      if (!sock.isPaused()) work();
    });
  }

  close(): void {
    for (const s of this.#udp) s.close();
    for (const s of this.#batch) s.close();
    this.#sync(); // keep the closing sockets' last statistics
    this.#batch.length = 0;
    this.#seen.length = 0;
    for (const s of this.#tcp) s.close();
    for (const c of this.#conns) c.destroy();
    this.#udp.length = 0;
    this.#tcp.length = 0;
  }
}

/**
 * Attaches the per-prefix steering program to a worker's UDP socket.
 * Attaching is per group: every worker attaches the same program, so a
 * replacement needs nobody else.
 */
function steerGroup(fd: number, a: ListenAddress, steer: NonNullable<SharedListen['steer']>): void {
  loadNative().steerReuseportByPrefix(fd, a.family, steer.groupSize, a.family === 6 ? Math.min(64, steer.ipv6Bits) : steer.ipv4Bits);
}
