/**
 * ConntrackEvents: the typed wrapper over native/src/ctevents.c, a reader of
 * the kernel's conntrack DESTROY events (ctnetlink, NFNLGRP_CONNTRACK_DESTROY)
 * in the caller's network namespace. Its handle's lifecycle, errors and
 * counters are src/nfqueue/reader.ts's, shared with NfQueue and NfLog.
 *
 * Hot-path contract (as NfLog's): onBatch(batch) is called once per batch
 * of events; `batch` is one reused object whose accessors read the shared
 * metadata array, valid only during that call. Nothing is allocated per
 * event on either side.
 *
 * Delivery is asynchronous and may lose events: when our receive buffer is
 * full the kernel drops them and the next read reports ENOBUFS, counted in
 * stats().overruns. Events carry no sequence numbers, so how many were lost
 * is unknown: a consumer that must not miss one resyncs from the table
 * after an overrun. A flow created while nobody in the namespace listened
 * (net.netfilter.nf_conntrack_events=2, the default) has no event extension
 * and reports no end at all.
 *
 * Needs CAP_NET_ADMIN in the namespace (netlink checks it when a socket
 * joins an nfnetlink group).
 */
import { QueueClosedError, fromNativeCtEventsError, type SluiceError } from '../errors/errors.ts';
import { checkInt } from '../util/validate.ts';
import { loadNative, type NativeNfq } from '../nfqueue/native.ts';
import { checkCallbacks, checkOptions, ReaderCore, type ReaderBinding } from '../nfqueue/reader.ts';
import { EV_META_WORDS, EV_STATS_WORDS, EventFlag, EventMeta, EventStat } from './layout.ts';

/** Bytes the C side needs free in the receive area to read one more event (native EV_MSG_MAX). */
const EVENT_MAX_BYTES = 8192;
/** Receive-area bytes per event of a full batch: an event is ~150-300 bytes on the wire. */
const EVENT_AVERAGE_BYTES = 320;

export interface ConntrackEventsOptions {
  /** Most events handed to onBatch at once (also bounds one wakeup's work). Default 1024. */
  readonly maxBatch?: number;
  /** Socket receive buffer (SO_RCVBUFFORCE). Default 8 MiB: some 13k events of slack (1,638 a MiB, measured). */
  readonly receiveBufferBytes?: number;
  readonly onBatch: (batch: ConntrackEventBatch) => void;
  /** Errors after open: socket failures, and exceptions thrown by onBatch. */
  readonly onError: (err: SluiceError | Error) => void;
}

/** Counters kept by the C side (see layout.ts EventStat). */
export interface ConntrackEventsStats {
  events: number;
  batches: number;
  maxBatch: number;
  datagrams: number;
  /** Receive-buffer overflows (ENOBUFS): the kernel dropped events (how many is unknown). */
  overruns: number;
  /**
   * `overruns` as of the last read that found the socket empty. After an
   * overrun the kernel drops every event until then (the socket stays
   * congested while a backlog is read), so events are known to flow again
   * only once this has caught up with `overruns`.
   */
  settledOverruns: number;
  /** Messages that were not decodable destroy events. */
  badMessages: number;
  recvErrors: number;
  lastErrno: number;
  truncatedReads: number;
  callbackErrors: number;
}

const EV_BINDING: ReaderBinding<keyof ConntrackEventsStats> = {
  statsWords: EV_STATS_WORDS,
  stats: {
    events: EventStat.Events,
    batches: EventStat.Batches,
    maxBatch: EventStat.MaxBatch,
    datagrams: EventStat.Datagrams,
    overruns: EventStat.Overruns,
    settledOverruns: EventStat.SettledOverruns,
    badMessages: EventStat.BadMessages,
    recvErrors: EventStat.RecvErrors,
    lastErrno: EventStat.LastErrno,
    truncatedReads: EventStat.TruncatedReads,
    callbackErrors: EventStat.CallbackErrors,
  },
  callbackErrors: EventStat.CallbackErrors,
  mapError: fromNativeCtEventsError,
  close: (native, handle) => {
    native.ctEventsClose(handle);
  },
  ref: (native, handle, on) => {
    native.ctEventsRef(handle, on);
  },
};

/**
 * A view of destroy events over the metadata array; index 0 <= i < count
 * (not checked: hot path). Addresses are IPv4 host numbers (word 0 of the
 * four an address has: IPv6's groups are word(i, ...)).
 */
export class ConntrackEventBatch {
  count = 0;
  readonly #meta: Uint32Array;

  constructor(meta: Uint32Array) {
    this.#meta = meta;
  }
  /** AF_INET (2) or AF_INET6 (10). */
  family(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Family] ?? 0;
  }
  /** IP protocol number (6 TCP, 17 UDP, ...). */
  protocol(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Protocol] ?? 0;
  }
  /** Original direction's source (the client): IPv4 as a host number. */
  src(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Src] ?? 0;
  }
  /** Original direction's destination (a VIP): IPv4 as a host number. */
  dst(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Dst] ?? 0;
  }
  /** One 32-bit group (0..3) of the original source (address 0) or destination (1): IPv6. */
  addressWord(i: number, address: 0 | 1, group: number): number {
    return this.#meta[i * EV_META_WORDS + (address === 0 ? EventMeta.Src : EventMeta.Dst) + (group & 3)] ?? 0;
  }
  srcPort(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.SrcPort] ?? 0;
  }
  dstPort(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.DstPort] ?? 0;
  }
  /** The conntrack mark (0 when the flow had none). */
  mark(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Mark] ?? 0;
  }
  /** EventFlag bits. */
  flags(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Flags] ?? 0;
  }
  /** The TCP state at the end (kernel's enum tcp_conntrack), when flags has EventFlag.TcpState. */
  tcpState(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.TcpState] ?? 0;
  }
  /** The conntrack entry's id, when flags has EventFlag.Id. */
  id(i: number): number {
    return this.#meta[i * EV_META_WORDS + EventMeta.Id] ?? 0;
  }
  hasPorts(i: number): boolean {
    return (this.flags(i) & EventFlag.Ports) !== 0;
  }
}

export class ConntrackEvents {
  readonly #core: ReaderCore<keyof ConntrackEventsStats>;
  readonly #batch: ConntrackEventBatch;
  readonly #onBatch: (batch: ConntrackEventBatch) => void;
  readonly #callOnBatch = (): void => {
    this.#onBatch(this.#batch);
  };

  private constructor(opts: ConntrackEventsOptions, native: NativeNfq) {
    const maxBatch = checkInt('maxBatch', opts.maxBatch ?? 1024, 1, 65536);
    const rcvbuf = checkInt('receiveBufferBytes', opts.receiveBufferBytes ?? 8 << 20, 0, 1 << 30);
    checkCallbacks(opts);
    this.#onBatch = opts.onBatch;
    // Room for a full batch of average events plus one maximal one: the C
    // side reads while a maximal event still fits.
    const rx = new Uint8Array(maxBatch * EVENT_AVERAGE_BYTES + EVENT_MAX_BYTES);
    const meta = new Uint32Array(maxBatch * EV_META_WORDS);
    this.#batch = new ConntrackEventBatch(meta);
    this.#core = new ReaderCore(EV_BINDING, native, opts.onError, (counters, onError) =>
      native.ctEventsOpen(
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

  /** Joins the destroy event group and starts receiving. Throws a typed error on failure. */
  static open(opts: ConntrackEventsOptions): ConntrackEvents {
    checkOptions(opts);
    return new ConntrackEvents(opts, loadNative());
  }

  // Called from C once per batch.
  #dispatch(n: number): void {
    this.#batch.count = n;
    this.#core.run(this.#callOnBatch);
  }

  /** Whether the open reader keeps the process alive (default true). */
  ref(on: boolean): void {
    if (!this.#core.ref(on)) throw new QueueClosedError('conntrack events are closed');
  }

  get closed(): boolean {
    return this.#core.closed;
  }

  /** Snapshot of the native counters. */
  stats(): ConntrackEventsStats {
    return this.#core.stats();
  }

  /** The overrun counter alone (no object): for a cheap check per batch or tick. */
  get overruns(): number {
    return this.#core.counters[EventStat.Overruns] ?? 0;
  }

  /** Overruns whose episode has ended (a read found the socket empty since): see ConntrackEventsStats.settledOverruns. */
  get settledOverruns(): number {
    return this.#core.counters[EventStat.SettledOverruns] ?? 0;
  }

  /** Leaves the group and stops polling; events not yet read are discarded. Idempotent. */
  close(): void {
    this.#core.close();
  }
}

/** The C decoder on one netlink message (tests): the event's words, or undefined if it is not a decodable destroy event. */
export function decodeConntrackEvent(message: Uint8Array): Uint32Array | undefined {
  const meta = new Uint32Array(EV_META_WORDS);
  return loadNative().ctMessageDecode(message, meta) === 1 ? meta : undefined;
}
