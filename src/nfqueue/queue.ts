/**
 * NfQueue: the typed wrapper over native/src/nfq.c (its handle's lifecycle,
 * errors and counters are reader.ts's, shared with NfLog).
 *
 * Hot-path contract:
 *  - onBatch(batch) is called once per batch of packets. `batch` is one
 *    reused object; its accessors read the shared metadata array; payload
 *    bytes are `batch.data[payloadOffset(i) .. + payloadLength(i)]`.
 *    Nothing is allocated per packet on either side.
 *  - Payload bytes are valid only during that onBatch call (the next batch
 *    overwrites them). Ids stay valid until their verdict is given, so a
 *    verdict may be staged later (e.g. from a timer), which is how the WAN
 *    delay holds packets.
 *  - Verdicts staged during onBatch go to the kernel when onBatch returns,
 *    in the same native call (one JS/C crossing per batch). Verdicts staged
 *    at any other time are sent by flush(), or automatically at the end of
 *    the current tick (one crossing for everything staged in that tick).
 *    They are encoded here (verdict-encoder.ts); the addon only sends.
 *
 * Every argument is validated here; the C side only asserts.
 */
import { QueueClosedError, InvalidArgumentError, fromNativeQueueError, type SluiceError } from '../errors/errors.ts';
import { checkBool, checkInt, U32_MAX } from '../util/validate.ts';
import {
  META_WORDS,
  Meta,
  OpenFlag,
  PacketFlag,
  STATS_WORDS,
  Stat,
  Staged,
  VERDICT_WORDS,
  Verdict,
  VerdictFlag,
  type VerdictCode,
} from './layout.ts';
import { loadNative, type NativeLiveness, type NativeNfq } from './native.ts';
import { checkCallbacks, checkOptions, ReaderCore, type ReaderBinding } from './reader.ts';
import { TX_LIMIT, VerdictEncoder, verdictMessageBytes } from './verdict-encoder.ts';

export interface QueueOptions {
  /** Queue number, as in `iptables -j NFQUEUE --queue-num N`. */
  readonly queue: number;
  /** Kernel queue length bound (packets waiting for a verdict). Default 4096. */
  readonly maxLength?: number;
  /** Payload bytes copied per packet, 0..65535 (0 = whole packet). Default 65535. */
  readonly copyRange?: number;
  /** When the kernel queue is full, accept instead of drop. Default true. */
  readonly failOpen?: boolean;
  /** Receive GSO super-packets unsegmented (checksums may be partial). Default false. */
  readonly gso?: boolean;
  /** Ask for conntrack mark and state with each packet. Default false. */
  readonly conntrack?: boolean;
  /** Most packets handed to onBatch at once. Default 256. */
  readonly maxBatch?: number;
  /** Most verdicts staged before an automatic flush. Default 4096. */
  readonly maxStaged?: number;
  /** Socket receive buffer (SO_RCVBUFFORCE). Default 8 MiB. */
  readonly receiveBufferBytes?: number;
  /** Bytes available for replacement payloads between flushes. Default 256 KiB. */
  readonly replacementBytes?: number;
  readonly onBatch: (batch: PacketBatch, queue: NfQueue) => void;
  /** Errors after open: socket failures, and exceptions thrown by onBatch. */
  readonly onError: (err: SluiceError | Error) => void;
}

/** Counters kept by the C side (see layout.ts Stat), and `lost`. */
export interface QueueStats {
  packets: number;
  /**
   * Packets the kernel numbered for this queue that never reached us: their
   * message did not fit the socket's receive buffer. The kernel did not queue
   * them (FAIL_OPEN accepted them, unsteered; otherwise the kernel dropped
   * them and counts them in /proc's queue_user_dropped), so no verdict is
   * owed for them. The socket's own count (sk_drops), read now: it includes
   * an overrun at the end of a burst that no later packet has revealed yet.
   */
  lost: number;
  /** The same packets seen as skipped ids (a gap shows when the next packet arrives): idGaps <= lost. */
  idGaps: number;
  batches: number;
  maxBatch: number;
  verdicts: number;
  sendErrors: number;
  kernelErrors: number;
  overruns: number;
  badMessages: number;
  recvErrors: number;
  lastErrno: number;
  truncatedReads: number;
  callbackErrors: number;
}

const QUEUE_BINDING: ReaderBinding<Exclude<keyof QueueStats, 'lost'>> = {
  statsWords: STATS_WORDS,
  stats: {
    packets: Stat.Packets,
    batches: Stat.Batches,
    maxBatch: Stat.MaxBatch,
    verdicts: Stat.Verdicts,
    idGaps: Stat.IdGaps,
    sendErrors: Stat.SendErrors,
    kernelErrors: Stat.KernelErrors,
    overruns: Stat.Overruns,
    badMessages: Stat.BadMessages,
    recvErrors: Stat.RecvErrors,
    lastErrno: Stat.LastErrno,
    truncatedReads: Stat.TruncatedReads,
    callbackErrors: Stat.CallbackErrors,
  },
  callbackErrors: Stat.CallbackErrors,
  mapError: fromNativeQueueError,
  close: (native, handle) => {
    native.close(handle);
  },
  ref: (native, handle, on) => {
    native.ref(handle, on);
  },
};

/**
 * A view of one batch. Accessors take the packet index (0 <= i < count);
 * indexes outside that range read stale data (not checked: hot path).
 */
export class PacketBatch {
  count = 0;
  /** The receive area; payloads are slices of it (by offset, not copied). */
  readonly data: Uint8Array;
  readonly #meta: Uint32Array;

  constructor(data: Uint8Array, meta: Uint32Array) {
    this.data = data;
    this.#meta = meta;
  }
  #word(i: number, field: number): number {
    return this.#meta[i * META_WORDS + field] ?? 0;
  }
  id(i: number): number {
    return this.#word(i, Meta.Id);
  }
  hook(i: number): number {
    return this.#word(i, Meta.Hook);
  }
  mark(i: number): number {
    return this.#word(i, Meta.Mark);
  }
  ctMark(i: number): number {
    return this.#word(i, Meta.CtMark);
  }
  /** enum ip_conntrack_info (layout.ts CtInfo); meaningful if hasCtInfo(i). */
  ctInfo(i: number): number {
    return this.#word(i, Meta.CtInfo);
  }
  hasConntrack(i: number): boolean {
    return (this.#word(i, Meta.Flags) & PacketFlag.HasConntrack) !== 0;
  }
  hasCtInfo(i: number): boolean {
    return (this.#word(i, Meta.Flags) & PacketFlag.HasCtInfo) !== 0;
  }
  inDevice(i: number): number {
    return this.#word(i, Meta.InDev);
  }
  outDevice(i: number): number {
    return this.#word(i, Meta.OutDev);
  }
  payloadOffset(i: number): number {
    return this.#word(i, Meta.PayloadOffset);
  }
  payloadLength(i: number): number {
    return this.#word(i, Meta.PayloadLength);
  }
  /** Length of the packet in the kernel (larger than payloadLength if truncated). */
  originalLength(i: number): number {
    return this.#word(i, Meta.OriginalLength);
  }
  truncated(i: number): boolean {
    return (this.#word(i, Meta.Flags) & PacketFlag.Truncated) !== 0;
  }
  checksumNotReady(i: number): boolean {
    return (this.#word(i, Meta.Flags) & PacketFlag.ChecksumNotReady) !== 0;
  }
  gso(i: number): boolean {
    return (this.#word(i, Meta.Flags) & PacketFlag.Gso) !== 0;
  }
  hwProtocol(i: number): number {
    return this.#word(i, Meta.HwProtocol);
  }
}

function checkVerdict(v: unknown): VerdictCode {
  if (v !== Verdict.Accept && v !== Verdict.Drop && v !== Verdict.Repeat) {
    throw new InvalidArgumentError(`verdict must be Verdict.Accept, Drop or Repeat, got ${String(v)}`);
  }
  return v;
}

export class NfQueue {
  readonly queue: number;
  readonly #native: NativeNfq;
  readonly #core: ReaderCore<Exclude<keyof QueueStats, 'lost'>>;
  readonly #batch: PacketBatch;
  readonly #staged: Uint32Array;
  readonly #maxStaged: number;
  readonly #tx: Uint8Array;
  /** Buffer views of the replacement-payload area and the receive area, made once (the encoder copies from them). */
  readonly #txSource: Buffer;
  readonly #rxSource: Buffer;
  readonly #encoder = new VerdictEncoder();
  readonly #onBatch: (batch: PacketBatch, queue: NfQueue) => void;
  readonly #callOnBatch = (): void => {
    this.#onBatch(this.#batch, this);
  };
  readonly #flushSoon = (): void => {
    this.#flushScheduled = false;
    if (!this.#core.closed) this.flush();
  };
  #count = 0;
  #txUsed = 0;
  #inBatch = false;
  #flushScheduled = false;
  /** The socket's sk_drops when last read (kept after close, which frees the socket). */
  #socketDrops = -1;

  private constructor(opts: QueueOptions, native: NativeNfq) {
    this.queue = checkInt('queue', opts.queue, 0, 0xffff);
    const maxLength = checkInt('maxLength', opts.maxLength ?? 4096, 1, U32_MAX);
    const copyRange = checkInt('copyRange', opts.copyRange ?? 0xffff, 0, 0xffff);
    const failOpen = checkBool('failOpen', opts.failOpen ?? true);
    const gso = checkBool('gso', opts.gso ?? false);
    const conntrack = checkBool('conntrack', opts.conntrack ?? false);
    const maxBatch = checkInt('maxBatch', opts.maxBatch ?? 256, 1, 65536);
    this.#maxStaged = checkInt('maxStaged', opts.maxStaged ?? 4096, 1, 1 << 20);
    const rcvbuf = checkInt('receiveBufferBytes', opts.receiveBufferBytes ?? 8 << 20, 0, 1 << 30);
    const txBytes = checkInt('replacementBytes', opts.replacementBytes ?? 256 << 10, 0, 1 << 28);
    checkCallbacks(opts);
    this.#onBatch = opts.onBatch;

    // The receive area must hold one maximal message after the last packet
    // of a batch; small packets pack densely, so ~2 KiB per batch slot plus
    // one maximal message covers a full batch of MTU-sized packets.
    const perMessage = (copyRange === 0 ? 0xffff : copyRange) + native.MSG_OVERHEAD;
    const rx = new Uint8Array(maxBatch * 2048 + perMessage);
    const meta = new Uint32Array(maxBatch * META_WORDS);
    this.#staged = new Uint32Array(this.#maxStaged * VERDICT_WORDS);
    this.#tx = new Uint8Array(Math.max(txBytes, 1));
    this.#txSource = Buffer.from(this.#tx.buffer, this.#tx.byteOffset, this.#tx.length);
    this.#rxSource = Buffer.from(rx.buffer, rx.byteOffset, rx.length);
    this.#batch = new PacketBatch(rx, meta);
    this.#native = native;

    const flags = (failOpen ? OpenFlag.FailOpen : 0) | (gso ? OpenFlag.Gso : 0) | (conntrack ? OpenFlag.Conntrack : 0);
    this.#core = new ReaderCore(QUEUE_BINDING, native, opts.onError, (counters, onError) =>
      native.open(
        this.queue,
        copyRange,
        maxLength,
        flags,
        rcvbuf,
        rx,
        meta,
        this.#encoder.bytes,
        counters,
        (n) => this.#dispatch(n),
        onError,
      ),
    );
  }

  /** Binds queue `opts.queue` and starts receiving. Throws a typed error on failure. */
  static open(opts: QueueOptions): NfQueue {
    checkOptions(opts);
    return new NfQueue(opts, loadNative());
  }

  // Called from C once per batch; returns how many bytes of encoded verdicts C must send.
  #dispatch(n: number): number {
    this.#batch.count = n;
    this.#inBatch = true;
    try {
      this.#core.run(this.#callOnBatch);
    } finally {
      this.#inBatch = false;
    }
    const staged = this.#count;
    this.#count = 0;
    this.#txUsed = 0;
    return this.#encode(staged);
  }

  /**
   * Encodes staged verdicts [0, n) into the encoder's transmit area and
   * returns the bytes left there for the caller to send; a full area (each
   * datagram stays under TX_LIMIT) is sent on the way. A verdict whose
   * payload lies outside its area is skipped and counted as a send error.
   */
  #encode(n: number): number {
    const enc = this.#encoder;
    const staged = this.#staged;
    const counters = this.#core.counters;
    enc.length = 0;
    for (let i = 0; i < n; i++) {
      const base = i * VERDICT_WORDS;
      const code = staged[base + Staged.Code] ?? 0;
      const offset = staged[base + Staged.PayloadOffset] ?? 0;
      const length = staged[base + Staged.PayloadLength] ?? 0;
      const source = (code & VerdictFlag.PayloadTx) !== 0 ? this.#txSource : (code & VerdictFlag.PayloadRx) !== 0 ? this.#rxSource : null;
      if (source !== null && (offset + length > source.length || length > 0xffff)) {
        counters[Stat.SendErrors] = (counters[Stat.SendErrors] ?? 0) + 1;
        continue;
      }
      const hasMark = (code & VerdictFlag.SetMark) !== 0;
      if (enc.length + verdictMessageBytes(hasMark, source === null ? -1 : length) > TX_LIMIT) {
        this.#native.verdicts(this.#core.handle, enc.length);
        enc.length = 0;
      }
      enc.put(this.queue, staged[base + Staged.Id] ?? 0, code & 0xff, hasMark, staged[base + Staged.Mark] ?? 0, source, offset, length);
    }
    counters[Stat.Verdicts] = (counters[Stat.Verdicts] ?? 0) + n;
    return enc.length;
  }

  #slot(id: number, code: number, mark: number | undefined): number {
    if (this.#core.closed) throw new QueueClosedError(`queue ${this.queue} is closed`);
    checkInt('id', id, 0, U32_MAX);
    if (this.#count === this.#maxStaged) this.flush();
    const base = this.#count * VERDICT_WORDS;
    let c = code;
    if (mark !== undefined) {
      checkInt('mark', mark, 0, U32_MAX);
      c |= VerdictFlag.SetMark;
      this.#staged[base + Staged.Mark] = mark;
    }
    this.#staged[base + Staged.Id] = id;
    this.#staged[base + Staged.Code] = c;
    this.#count++;
    if (!this.#inBatch && !this.#flushScheduled) {
      this.#flushScheduled = true;
      queueMicrotask(this.#flushSoon);
    }
    return base;
  }

  /** Stages a verdict, optionally setting the packet mark. */
  verdict(id: number, verdict: VerdictCode, mark?: number): void {
    this.#slot(id, checkVerdict(verdict), mark);
  }

  /** Stages a verdict that replaces the packet with `payload` (copied now). */
  verdictWithPayload(id: number, verdict: VerdictCode, payload: Uint8Array, mark?: number): void {
    const code = checkVerdict(verdict);
    if (!(payload instanceof Uint8Array) || payload.length > 0xffff) {
      throw new InvalidArgumentError('payload must be a Uint8Array of at most 65535 bytes');
    }
    if (payload.length > this.#tx.length) {
      throw new InvalidArgumentError(`payload of ${payload.length} bytes exceeds replacementBytes (${this.#tx.length})`);
    }
    if (this.#txUsed + payload.length > this.#tx.length) this.flush();
    const base = this.#slot(id, code | VerdictFlag.PayloadTx, mark);
    this.#tx.set(payload, this.#txUsed);
    this.#staged[base + Staged.PayloadOffset] = this.#txUsed;
    this.#staged[base + Staged.PayloadLength] = payload.length;
    this.#txUsed += payload.length;
  }

  /**
   * Stages a verdict for packet `index` of the current batch that sends its
   * payload back as it now is in batch.data (after an in-place rewrite).
   * Only valid inside onBatch; zero copy.
   */
  verdictWithBatchPayload(index: number, verdict: VerdictCode, mark?: number): void {
    if (!this.#inBatch) throw new InvalidArgumentError('verdictWithBatchPayload is only valid inside onBatch');
    checkInt('index', index, 0, this.#batch.count - 1);
    const code = checkVerdict(verdict);
    const base = this.#slot(this.#batch.id(index), code | VerdictFlag.PayloadRx, mark);
    this.#staged[base + Staged.PayloadOffset] = this.#batch.payloadOffset(index);
    this.#staged[base + Staged.PayloadLength] = this.#batch.payloadLength(index);
  }

  /** Sends every staged verdict now (one native call). */
  flush(): void {
    if (this.#core.closed) throw new QueueClosedError(`queue ${this.queue} is closed`);
    if (this.#count === 0) return;
    const n = this.#count;
    this.#count = 0;
    this.#txUsed = 0;
    const bytes = this.#encode(n);
    if (bytes > 0) this.#native.verdicts(this.#core.handle, bytes);
  }

  /** Whether the open queue keeps the process alive (default true). */
  ref(on: boolean): void {
    this.#core.ref(on);
  }

  /**
   * The packet loop's state, read from the C side without touching the
   * queue (src/systemd/queue-liveness.ts judges it). Undefined once closed.
   */
  liveness(): NativeLiveness | undefined {
    return this.#core.closed ? undefined : this.#native.liveness(this.#core.handle);
  }

  get closed(): boolean {
    return this.#core.closed;
  }

  /** Snapshot of the native counters (one getsockopt for `lost`: not for the hot path). */
  stats(): QueueStats {
    const { packets, ...rest } = this.#core.stats();
    this.#readDrops();
    // Both count the same packets; ids alone where the kernel does not tell sk_drops.
    return { packets, lost: Math.max(this.#socketDrops, rest.idGaps), ...rest };
  }

  #readDrops(): void {
    if (!this.#core.closed) this.#socketDrops = Math.max(this.#socketDrops, this.#native.socketDrops(this.#core.handle));
  }

  /**
   * Sends staged verdicts, unbinds and stops polling. Packets still waiting
   * for a verdict are dropped by the kernel at unbind. Idempotent.
   */
  close(): void {
    if (this.#core.closed) return;
    if (this.#count > 0 && !this.#inBatch) this.flush();
    this.#readDrops();
    this.#core.close();
  }
}

export { Verdict, type VerdictCode } from './layout.ts';
