/**
 * NfLog: the typed wrapper over native/src/nflog.c, an NFLOG (nfnetlink_log)
 * reader (its handle's lifecycle, errors and counters are
 * src/nfqueue/reader.ts's, shared with NfQueue). NFLOG hands userspace a copy of a packet while the kernel carries
 * on with the packet itself: nothing waits for us, nothing is sent back. The
 * front node uses it for the packets it only needs to hear about (TCP FIN
 * and RST: the record goes to the recycle list), where NFQUEUE would hold
 * each one until its verdict.
 *
 * Hot-path contract (as NfQueue's): onBatch(batch) is called once per batch
 * of records; `batch` is one reused object whose accessors read the shared
 * metadata array; record bytes are `batch.data[payloadOffset(i) .. +
 * payloadLength(i)]`, valid only during that call, and the wrapper's to
 * scribble on (the kernel never reads them back). Nothing is allocated per
 * record on either side.
 *
 * Delivery is asynchronous and may lose records: the kernel batches them
 * (threshold / timeout / bufferBytes below) and drops whole datagrams when
 * our receive buffer is full. stats() counts both the overflows (ENOBUFS)
 * and, from the records' sequence numbers, exactly how many records were
 * lost. A consumer must not depend on seeing every record.
 */
import { QueueClosedError, fromNativeLogError, type SluiceError } from '../errors/errors.ts';
import { checkInt } from '../util/validate.ts';
import { loadNative, type NativeNfq } from '../nfqueue/native.ts';
import { checkCallbacks, checkOptions, ReaderCore, type ReaderBinding } from '../nfqueue/reader.ts';
import { LOG_META_WORDS, LOG_STATS_WORDS, LogMeta, LogStat } from './layout.ts';

export interface LogOptions {
  /** NFLOG group, as in `iptables -j NFLOG --nflog-group N`. */
  readonly group: number;
  /** Bytes of each packet copied, 1..65535 (the rule's --nflog-size, if set, wins). Default 128. */
  readonly copyRange?: number;
  /** Kernel batching: records per datagram before it is sent. Default 64. */
  readonly threshold?: number;
  /** Kernel batching: a datagram is sent this many 1/100 s after its first record at the latest. Default 1 (10 ms). */
  readonly timeoutCentiseconds?: number;
  /** Kernel batching: datagram size, 8 KiB..128 KiB (sent when full). Default 16 KiB. */
  readonly bufferBytes?: number;
  /** Most records handed to onBatch at once. Default 256. */
  readonly maxBatch?: number;
  /** Socket receive buffer (SO_RCVBUFFORCE). Default 8 MiB. */
  readonly receiveBufferBytes?: number;
  readonly onBatch: (batch: LogBatch) => void;
  /** Errors after open: socket failures, and exceptions thrown by onBatch. */
  readonly onError: (err: SluiceError | Error) => void;
}

/** Counters kept by the C side (see layout.ts LogStat). */
export interface LogStats {
  records: number;
  batches: number;
  maxBatch: number;
  datagrams: number;
  /** Receive-buffer overflows (ENOBUFS): the kernel dropped datagrams. */
  overruns: number;
  /** Records lost, from gaps in the records' sequence numbers. */
  lost: number;
  badMessages: number;
  recvErrors: number;
  lastErrno: number;
  truncatedReads: number;
  callbackErrors: number;
}

const LOG_BINDING: ReaderBinding<keyof LogStats> = {
  statsWords: LOG_STATS_WORDS,
  stats: {
    records: LogStat.Records,
    batches: LogStat.Batches,
    maxBatch: LogStat.MaxBatch,
    datagrams: LogStat.Datagrams,
    overruns: LogStat.Overruns,
    lost: LogStat.Lost,
    badMessages: LogStat.BadMessages,
    recvErrors: LogStat.RecvErrors,
    lastErrno: LogStat.LastErrno,
    truncatedReads: LogStat.TruncatedReads,
    callbackErrors: LogStat.CallbackErrors,
  },
  callbackErrors: LogStat.CallbackErrors,
  mapError: fromNativeLogError,
  close: (native, handle) => {
    native.nflogClose(handle);
  },
  ref: (native, handle, on) => {
    native.nflogRef(handle, on);
  },
};

/** A view of one batch of records; index 0 <= i < count (not checked: hot path). */
export class LogBatch {
  count = 0;
  /** The receive area; records are slices of it (by offset, not copied). */
  readonly data: Uint8Array;
  readonly #meta: Uint32Array;

  constructor(data: Uint8Array, meta: Uint32Array) {
    this.data = data;
    this.#meta = meta;
  }
  payloadOffset(i: number): number {
    return this.#meta[i * LOG_META_WORDS + LogMeta.PayloadOffset] ?? 0;
  }
  payloadLength(i: number): number {
    return this.#meta[i * LOG_META_WORDS + LogMeta.PayloadLength] ?? 0;
  }
  inDevice(i: number): number {
    return this.#meta[i * LOG_META_WORDS + LogMeta.InDev] ?? 0;
  }
  mark(i: number): number {
    return this.#meta[i * LOG_META_WORDS + LogMeta.Mark] ?? 0;
  }
}

export class NfLog {
  readonly group: number;
  readonly #core: ReaderCore<keyof LogStats>;
  readonly #batch: LogBatch;
  readonly #onBatch: (batch: LogBatch) => void;
  readonly #callOnBatch = (): void => {
    this.#onBatch(this.#batch);
  };

  private constructor(opts: LogOptions, native: NativeNfq) {
    this.group = checkInt('group', opts.group, 0, 0xffff);
    const copyRange = checkInt('copyRange', opts.copyRange ?? 128, 1, 0xffff);
    const threshold = checkInt('threshold', opts.threshold ?? 64, 1, 1 << 20);
    const timeout = checkInt('timeoutCentiseconds', opts.timeoutCentiseconds ?? 1, 0, 100 * 60);
    const bufferBytes = checkInt('bufferBytes', opts.bufferBytes ?? 16 << 10, 8 << 10, 128 << 10);
    const maxBatch = checkInt('maxBatch', opts.maxBatch ?? 256, 1, 65536);
    const rcvbuf = checkInt('receiveBufferBytes', opts.receiveBufferBytes ?? 8 << 20, 0, 1 << 30);
    checkCallbacks(opts);
    this.#onBatch = opts.onBatch;

    // Room for two maximal datagrams: the first drained datagram is read,
    // and the next still fits behind it, so a wakeup usually takes both.
    const datagram = Math.max(bufferBytes, copyRange + native.LOG_MSG_OVERHEAD);
    const rx = new Uint8Array(2 * datagram);
    const meta = new Uint32Array(maxBatch * LOG_META_WORDS);
    this.#batch = new LogBatch(rx, meta);
    this.#core = new ReaderCore(LOG_BINDING, native, opts.onError, (counters, onError) =>
      native.nflogOpen(
        this.group,
        copyRange,
        bufferBytes,
        timeout,
        threshold,
        rcvbuf,
        rx,
        meta,
        counters,
        (n) => {
          this.#dispatch(n);
        },
        onError,
      ),
    );
  }

  /** Binds group `opts.group` and starts receiving. Throws a typed error on failure. */
  static open(opts: LogOptions): NfLog {
    checkOptions(opts);
    return new NfLog(opts, loadNative());
  }

  // Called from C once per batch.
  #dispatch(n: number): void {
    this.#batch.count = n;
    this.#core.run(this.#callOnBatch);
  }

  /** Whether the open reader keeps the process alive (default true). */
  ref(on: boolean): void {
    if (!this.#core.ref(on)) throw new QueueClosedError(`nflog group ${this.group} is closed`);
  }

  get closed(): boolean {
    return this.#core.closed;
  }

  /** Snapshot of the native counters. */
  stats(): LogStats {
    return this.#core.stats();
  }

  /** Unbinds and stops polling; records not yet read are discarded. Idempotent. */
  close(): void {
    this.#core.close();
  }
}
