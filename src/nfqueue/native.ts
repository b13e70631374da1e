import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { NativeAddonMissingError } from '../errors/errors.ts';
import { CT_ROW_WORDS, EV_META_WORDS, EV_STATS_WORDS } from '../conntrack/layout.ts';
import { LOG_META_WORDS, LOG_STATS_WORDS } from '../nflog/layout.ts';
import { META_WORDS, STATS_WORDS } from './layout.ts';

/** What runCommand resolves: status -1 when a signal (its number in `signal`) ended the child. */
export interface NativeCommandResult {
  readonly status: number;
  readonly signal: number;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  readonly timedOut: boolean;
  readonly truncated: boolean;
}

/** The raw binding exported by native/src/nfq.c (and nflog.c, ctevents.c, sd_notify.c; the netlink bindings run on nl_reader.c). Only queue.ts, src/nflog/log.ts, src/conntrack/events.ts and src/systemd/ call it. */
export interface NativeNfq {
  open(
    queue: number,
    copyRange: number,
    maxLength: number,
    flags: number,
    receiveBufferBytes: number,
    rx: Uint8Array,
    meta: Uint32Array,
    tx: Uint8Array,
    stats: Float64Array,
    /** Returns how many bytes of encoded verdicts (verdict-encoder.ts) at the start of tx to send. */
    onBatch: (count: number) => number,
    onError: (err: Error) => void,
  ): NativeHandle;
  /** Sends bytes [0, byteCount) of tx: encoded verdicts, in one datagram. */
  verdicts(handle: NativeHandle, byteCount: number): void;
  close(handle: NativeHandle): void;
  ref(handle: NativeHandle, on: boolean): void;
  /** State of the packet loop, for the systemd watchdog (src/systemd/queue-liveness.ts). */
  liveness(handle: NativeHandle): NativeLiveness;
  /** Messages the kernel could not queue on the socket (sk_drops via SO_MEMINFO); -1 if unknown. A syscall: not for the hot path. */
  socketDrops(handle: NativeHandle): number;
  /** Steers a SO_REUSEPORT UDP group by client prefix (native/src/reuseport.c); throws ERR_SLUICE_REUSEPORT. */
  steerReuseportByPrefix(fd: number, family: 4 | 6, groupSize: number, bits: number): void;
  /**
   * A UDP socket read with recvmmsg and written with sendmmsg (native/src/udp_batch.c; src/dns/udp_batch.ts):
   * created and bound here; onBatch(n) once per batch of n datagrams returns how many answers of txMeta to send.
   * Throws ERR_SLUICE_UDP_BATCH (socket, bind) or ERR_SLUICE_NATIVE_ARG.
   */
  udpOpen(
    family: 4 | 6,
    address: string,
    port: number,
    reusePort: boolean,
    rx: Uint8Array,
    rxMeta: Uint32Array,
    tx: Uint8Array,
    txMeta: Uint32Array,
    stats: Float64Array,
    onBatch: (count: number) => number,
    onError: (err: Error) => void,
  ): NativeHandle;
  /** Sends txMeta entries [0, count) now; only inside onBatch (tx full). */
  udpSend(handle: NativeHandle, count: number): void;
  udpFd(handle: NativeHandle): number;
  udpLocalPort(handle: NativeHandle): number;
  /** The source address of a slot of the current batch, as inet_ntop writes it; only inside onBatch. */
  udpSourceText(handle: NativeHandle, slot: number): string;
  udpClose(handle: NativeHandle): void;
  readonly UDP_RX_META_WORDS: number;
  readonly UDP_TX_META_WORDS: number;
  readonly UDP_STATS_WORDS: number;
  /**
   * Starts the per-turn CPU-time measure of the event loop (native/src/loop_turns.c): writes into
   * `stats` (LOOP_TURN_WORDS doubles: longest turn ns since JS wrote 0 there, turns, thread CPU ns).
   * Once per process; throws ERR_SLUICE_NATIVE_ARG.
   */
  loopTurnsStart(stats: Float64Array): void;
  readonly LOOP_TURN_WORDS: number;
  /**
   * The named counters of nf_tables table `table` of `family` (2 ip, 10 ip6) over netlink (native/src/nft_netlink.c):
   * [name, packets, bytes] per counter, none when the table is absent. Throws ERR_SLUICE_NFT_COUNTERS or ERR_SLUICE_NATIVE_ARG.
   */
  nftCounters(family: 2 | 10, table: string): [string, number, number][];
  /** The namespace's nf_tables ruleset generation (NFT_MSG_GETGEN; raised by every commit). Throws ERR_SLUICE_NFT_GENERATION. */
  nftGeneration(): number;
  /**
   * The elements of set `set` of table `table` with a counter: [key bytes (keyLength, as the kernel holds them), packets, bytes].
   * Throws ERR_SLUICE_NFT_SET (no such set, or a key of another length) or ERR_SLUICE_NATIVE_ARG.
   */
  nftSetCounters(family: 2 | 10, table: string, set: string, keyLength: number): [Buffer, number, number][];
  /**
   * Table `table`: ['table', its comment ("" if none)] then ['chain', name, is a base chain] per chain;
   * empty when the table is absent. Throws ERR_SLUICE_NFT_LAYOUT.
   */
  nftLayout(family: 2 | 10, table: string): (['table', string] | ['chain', string, boolean])[];
  /**
   * The same three reads on libuv's threadpool: the kernel answers them only after a running nf_tables
   * transaction commits (~400 ms behind a 256k-element fill), which must not stall the event loop.
   * Promises of the same answers, rejected with the same Errors; argument errors throw at once.
   */
  nftCountersAsync(family: 2 | 10, table: string): Promise<[string, number, number][]>;
  nftGenerationAsync(): Promise<number>;
  /** A child process run on the threadpool (native/src/run_command.c; src/front/run-off-loop.ts); rejects with ERR_SLUICE_SPAWN. */
  runCommand(argv: readonly string[], input: Buffer | null, timeoutMs: number, maxMiB: number): Promise<NativeCommandResult>;
  /** read(2) repeated on a threadpool thread until `length` bytes are in buffer[offset..] or the file ends (native/src/read_full.c: a seq_file such as /proc/net/nf_conntrack returns ~4 KiB per read); resolves the bytes read, 0 at the end; rejects ERR_SLUICE_READ. */
  readFull(fd: number, buffer: Buffer, offset: number, length: number): Promise<number>;
  nftSetCountersAsync(family: 2 | 10, table: string, set: string, keyLength: number): Promise<[Buffer, number, number][]>;
  /** One datagram to $NOTIFY_SOCKET (native/src/sd_notify.c); throws ERR_SD_NOTIFY. */
  notify(socketPath: string, message: string): void;
  readonly META_WORDS: number;
  readonly STATS_WORDS: number;
  readonly MSG_OVERHEAD: number;
  /** NFLOG reader (native/src/nflog.c): binds `group` and calls onBatch(n) once per batch of records. */
  nflogOpen(
    group: number,
    copyRange: number,
    bufferBytes: number,
    timeoutCs: number,
    threshold: number,
    receiveBufferBytes: number,
    rx: Uint8Array,
    meta: Uint32Array,
    stats: Float64Array,
    onBatch: (count: number) => void,
    onError: (err: Error) => void,
  ): NativeHandle;
  nflogClose(handle: NativeHandle): void;
  nflogRef(handle: NativeHandle, on: boolean): void;
  readonly LOG_META_WORDS: number;
  readonly LOG_STATS_WORDS: number;
  readonly LOG_MSG_OVERHEAD: number;
  /** Conntrack destroy events (native/src/ctevents.c): joins NFNLGRP_CONNTRACK_DESTROY, calls onBatch(n) once per batch of events. */
  ctEventsOpen(
    receiveBufferBytes: number,
    rx: Uint8Array,
    meta: Uint32Array,
    stats: Float64Array,
    onBatch: (count: number) => void,
    onError: (err: Error) => void,
  ): NativeHandle;
  /** The conntrack message decoder on one netlink message (tests, native/src/ct_msg.c): 1 if it filled words[0..EV_META_WORDS), and with CT_ROW_WORDS words the reply tuple's too. */
  ctMessageDecode(message: Uint8Array, words: Uint32Array): number;
  ctEventsClose(handle: NativeHandle): void;
  ctEventsRef(handle: NativeHandle, on: boolean): void;
  readonly EV_META_WORDS: number;
  readonly EV_STATS_WORDS: number;
  /**
   * The kernel's conntrack table over ctnetlink (native/src/ct_dump.c): sends
   * the dump request and receives its first datagram; throws
   * ERR_SLUICE_CT_DUMP with errno (EPERM: no CAP_NET_ADMIN).
   */
  ctDumpOpen(): NativeHandle;
  /** Fills `rows` (CT_ROW_WORDS words each: TCP and UDP flows) on the threadpool; resolves how many, 0 once the dump is over; rejects ERR_SLUICE_CT_DUMP (EBADMSG: a message that is not a whole entry of the dump). One read at a time. */
  ctDumpRead(handle: NativeHandle, rows: Uint32Array): Promise<number>;
  /** Ends the dump; idempotent. */
  ctDumpClose(handle: NativeHandle): void;
  readonly CT_ROW_WORDS: number;
  /**
   * Deletes, over ctnetlink on the threadpool, the flows with ct mark `mark`
   * (both families) whose reply comes from `server` (four words, IPv4
   * mapped) and `port`, that the dead server cannot answer: TCP ones it
   * never replied to and every UDP one (native/src/ct_expire.c). matched:
   * those that qualified; gone: ended before their delete. Rejects
   * ERR_SLUICE_CT_EXPIRE with errno (EPERM: no CAP_NET_ADMIN).
   */
  ctExpire(mark: number, server: Uint32Array, port: number): Promise<{ matched: number; deleted: number; gone: number }>;
}

export interface NativeLiveness {
  /** The uv_poll on the netlink socket is registered (libuv stops it for good on a poll error). */
  readonly polling: boolean;
  /** Our netlink port id: the kernel names the queue's owner by it. */
  readonly portid: number;
  /** How many times the poll callback ran. */
  readonly wakeups: number;
  /** Data is waiting on the socket right now. */
  readonly readable: boolean;
}

/** Opaque external value owned by the C side. */
export type NativeHandle = { readonly __brand: 'NativeHandle' };

export const ADDON_PATH = fileURLToPath(new URL('../../native/build/Release/sluice_nfq.node', import.meta.url));

let cached: NativeNfq | undefined;

/** Loads the addon once; throws NativeAddonMissingError with the fix if absent or mismatched. */
export function loadNative(): NativeNfq {
  if (cached) return cached;
  let mod: NativeNfq;
  try {
    mod = createRequire(import.meta.url)(ADDON_PATH) as NativeNfq;
  } catch (err) {
    throw new NativeAddonMissingError(
      `cannot load the NFQUEUE addon at ${ADDON_PATH}: run scripts/install.sh (it builds native/ with node-gyp)`,
      { cause: err },
    );
  }
  if (
    mod.META_WORDS !== META_WORDS ||
    mod.STATS_WORDS !== STATS_WORDS ||
    mod.LOG_META_WORDS !== LOG_META_WORDS ||
    mod.LOG_STATS_WORDS !== LOG_STATS_WORDS ||
    mod.EV_META_WORDS !== EV_META_WORDS ||
    mod.EV_STATS_WORDS !== EV_STATS_WORDS ||
    mod.CT_ROW_WORDS !== CT_ROW_WORDS
  ) {
    throw new NativeAddonMissingError(
      `the NFQUEUE addon at ${ADDON_PATH} was built from other sources (layout mismatch): rebuild with scripts/install.sh`,
    );
  }
  cached = mod;
  return mod;
}
