/**
 * A UDP socket that hands JavaScript its datagrams in batches and sends the
 * answers of a batch with one sendmmsg (native/src/udp_batch.c): one
 * crossing into JavaScript per batch (up to `slots` datagrams), one syscall
 * per batch each way, instead of dgram's event and send per datagram.
 *
 * Every buffer is allocated once here and shared with C: datagram i of a
 * batch is in `views[i]` (a view made at open), its source in rxMeta; an
 * answer is copied from the handler's `reply` buffer into the packed tx
 * slab and named in txMeta by its rx slot (C sends it to that slot's
 * source address and port). The only per-datagram allocation is none: the
 * source address text comes from a direct-mapped cache keyed by the binary
 * address (a miss asks C for inet_ntop's text, the form dgram's
 * rinfo.address has, so the answerer sees exactly what it saw before).
 *
 * Invariants: rx slots are 64 KiB, larger than any UDP datagram, so no
 * query is ever cut (a cut one would be counted and dropped); tx holds any
 * one answer (<= 65535 octets): when the next one does not fit, or txMeta
 * is full, what is there is sent first. Destinations are only valid during
 * the batch; C refuses any other (counted as badTx, never sent).
 */
import { QueueSystemError } from '../errors/errors.ts';
import { loadNative, type NativeHandle, type NativeNfq } from '../nfqueue/native.ts';

/** The UDP batch socket could not be created, bound or polled (errno and syscall from the kernel). */
export class UdpBatchSocketError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_UDP_BATCH';
}

/** Layout shared with native/src/udp_batch.c (keep in sync; checked at open). */
const RX_META_WORDS = 8;
const RX_LEN = 0;
const RX_FLAGS = 1;
const RX_FAMILY = 2;
const RX_ADDR = 4;
const RXF_TRUNCATED = 1;
const TX_META_WORDS = 3;
/** Indexes of `stats` (the C side's U_*). */
export const UdpStat = {
  DATAGRAMS: 0,
  BATCHES: 1,
  MAX_BATCH: 2,
  SENT: 3,
  SEND_ERRORS: 4,
  SEND_DROPPED: 5,
  RECV_ERRORS: 6,
  LAST_ERRNO: 7,
  TRUNCATED: 8,
  WAKEUPS: 9,
  CALLBACK_ERRORS: 10,
  BAD_TX: 11,
  SEND_CALLS: 12,
} as const;
const STATS_WORDS = 13;

/** One slot per datagram: room for the largest UDP payload (65507 octets over IPv4). */
const SLOT_BYTES = 65536;
/** Room for any one answer (the ResponseWriter's MAX_MESSAGE). */
const TX_BYTES = 65536;
/** Source address cache: entries (a power of two) and its hash's shift. */
const CACHE_BITS = 12;
const CACHE_SIZE = 1 << CACHE_BITS;

/**
 * Answers one datagram of `len` octets in `msg` from `source` (address
 * text): writes the answer at the start of the `reply` buffer given to the
 * socket and returns its length; 0 sends nothing. Called once per datagram,
 * in order, synchronously.
 */
export type DatagramHandler = (msg: Uint8Array, len: number, source: string, now: number) => number;

export interface UdpBatchOptions {
  readonly host: string;
  readonly port: number;
  readonly family: 4 | 6;
  /** SO_REUSEPORT (several workers on one address). */
  readonly reusePort: boolean;
  /** Datagrams per batch at most (recvmmsg's vlen), 1..1024. */
  readonly slots: number;
  /** The buffer the handler writes its answer into. */
  readonly reply: Uint8Array;
  readonly handler: DatagramHandler;
  /** The poll failed for good (the socket no longer serves). */
  readonly onError: (err: Error) => void;
}

export class UdpBatchSocket {
  readonly stats = new Float64Array(STATS_WORDS);
  readonly #native: NativeNfq;
  readonly #handle: NativeHandle;
  readonly #rxMeta: Uint32Array;
  readonly #views: Uint8Array[];
  readonly #tx = new Uint8Array(TX_BYTES);
  readonly #txMeta: Uint32Array;
  readonly #txMax: number;
  readonly #reply: Uint8Array;
  readonly #handler: DatagramHandler;
  /** Cache keys: family, then the address's four words (IPv4: one and three zeros); family 0 = empty. */
  readonly #keys = new Uint32Array(CACHE_SIZE * 5);
  readonly #texts: string[] = new Array<string>(CACHE_SIZE).fill('');
  #closed = false;

  constructor(o: UdpBatchOptions) {
    if (!Number.isInteger(o.slots) || o.slots < 1 || o.slots > 1024) throw new UdpBatchSocketError(`slots is 1..1024, not ${o.slots}`);
    const native = loadNative();
    if (native.UDP_RX_META_WORDS !== RX_META_WORDS || native.UDP_TX_META_WORDS !== TX_META_WORDS || native.UDP_STATS_WORDS !== STATS_WORDS) {
      throw new UdpBatchSocketError('the addon was built from other sources (UDP batch layout mismatch): rebuild it with scripts/install.sh');
    }
    this.#native = native;
    this.#reply = o.reply;
    this.#handler = o.handler;
    // allocUnsafeSlow: not zero-filled, so only the pages datagrams touch become resident (slots * 64 KiB of address space).
    const rx = Buffer.allocUnsafeSlow(o.slots * SLOT_BYTES);
    this.#rxMeta = new Uint32Array(o.slots * RX_META_WORDS);
    this.#views = Array.from({ length: o.slots }, (_, i) => rx.subarray(i * SLOT_BYTES, (i + 1) * SLOT_BYTES));
    this.#txMax = o.slots;
    this.#txMeta = new Uint32Array(o.slots * TX_META_WORDS);
    try {
      this.#handle = native.udpOpen(o.family, o.host, o.port, o.reusePort, rx, this.#rxMeta, this.#tx, this.#txMeta, this.stats, (n) => this.#batch(n), o.onError);
    } catch (err) {
      const e = err as { message?: string; errno?: number; syscall?: string };
      throw new UdpBatchSocketError(e.message ?? String(err), e.errno, e.syscall, { cause: err });
    }
  }

  /** The socket's descriptor (to attach the reuseport steering program). */
  get fd(): number {
    return this.#native.udpFd(this.#handle);
  }

  /** The bound port (the kernel's choice when opened with port 0). */
  get port(): number {
    return this.#native.udpLocalPort(this.#handle);
  }

  /** Send and receive failures the kernel reported, and answers dropped for a full send buffer. */
  get errors(): number {
    const s = this.stats;
    return (s[UdpStat.SEND_ERRORS] ?? 0) + (s[UdpStat.SEND_DROPPED] ?? 0) + (s[UdpStat.RECV_ERRORS] ?? 0);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#native.udpClose(this.#handle);
  }

  /** n datagrams in slots [0, n): answer each, return how many answers txMeta names (C sends them). */
  #batch(n: number): number {
    const meta = this.#rxMeta;
    const views = this.#views;
    const reply = this.#reply;
    const tx = this.#tx;
    const txMeta = this.#txMeta;
    const handler = this.#handler;
    // One clock reading per batch: a batch is read in one syscall, its datagrams arrived together.
    const now = performance.now();
    let count = 0;
    let off = 0;
    for (let i = 0; i < n; i++) {
      const b = i * RX_META_WORDS;
      if (((meta[b + RX_FLAGS] ?? 0) & RXF_TRUNCATED) !== 0) continue; // counted in C (cannot happen with 64 KiB slots)
      const view = views[i];
      if (view === undefined) break;
      const r = handler(view, meta[b + RX_LEN] ?? 0, this.#source(i, b), now);
      if (r <= 0) continue;
      if (off + r > tx.length || count === this.#txMax) {
        this.#native.udpSend(this.#handle, count);
        count = 0;
        off = 0;
      }
      // A byte loop: answers are tens of octets, and it allocates nothing (subarray + set would).
      for (let k = 0; k < r; k++) tx[off + k] = reply[k] ?? 0;
      const t = count * TX_META_WORDS;
      txMeta[t] = i;
      txMeta[t + 1] = off;
      txMeta[t + 2] = r;
      count++;
      off += r;
    }
    return count;
  }

  /** The source address text of slot i (meta offset b), from the cache or, on a miss, from C. */
  #source(i: number, b: number): string {
    const meta = this.#rxMeta;
    const fam = meta[b + RX_FAMILY] ?? 0;
    const a0 = meta[b + RX_ADDR] ?? 0;
    const a1 = meta[b + RX_ADDR + 1] ?? 0;
    const a2 = meta[b + RX_ADDR + 2] ?? 0;
    const a3 = meta[b + RX_ADDR + 3] ?? 0;
    const h = Math.imul(a0 ^ Math.imul(a1, 0x85ebca6b) ^ Math.imul(a2, 0xc2b2ae35) ^ Math.imul(a3 ^ fam, 0x27d4eb2f), 0x9e3779b1) >>> (32 - CACHE_BITS);
    const keys = this.#keys;
    const k = h * 5;
    if (keys[k] === fam && keys[k + 1] === a0 && keys[k + 2] === a1 && keys[k + 3] === a2 && keys[k + 4] === a3) return this.#texts[h] ?? '';
    const text = this.#native.udpSourceText(this.#handle, i);
    keys[k] = fam;
    keys[k + 1] = a0;
    keys[k + 2] = a1;
    keys[k + 3] = a2;
    keys[k + 4] = a3;
    this.#texts[h] = text;
    return text;
  }
}
