/**
 * Memory layout shared with native/src/nfq.c. loadNative() (native.ts)
 * checks META_WORDS and STATS_WORDS against the addon's, so a mismatch fails
 * loudly instead of misreading packets. The staged verdicts (Staged,
 * VerdictFlag) stay in TypeScript: queue.ts encodes them for the kernel.
 */

/** Words per packet in the metadata array filled by C. */
export const Meta = {
  Id: 0,
  Hook: 1,
  Mark: 2,
  CtMark: 3,
  CtInfo: 4,
  InDev: 5,
  OutDev: 6,
  PayloadOffset: 7,
  PayloadLength: 8,
  Flags: 9,
  OriginalLength: 10,
  HwProtocol: 11,
} as const;
export const META_WORDS = 12;

/** Bits of Meta.Flags. */
export const PacketFlag = {
  HasConntrack: 1 << 0,
  HasCtInfo: 1 << 1,
  ChecksumNotReady: 1 << 2,
  Gso: 1 << 3,
  Truncated: 1 << 4,
  HasMark: 1 << 5,
} as const;

/** Words per staged verdict (queue.ts stages, then encodes them). */
export const Staged = { Id: 0, Code: 1, Mark: 2, PayloadOffset: 3, PayloadLength: 4 } as const;
export const VERDICT_WORDS = 5;

/** Bits of Staged.Code above the low byte (the verdict itself). */
export const VerdictFlag = {
  SetMark: 1 << 8,
  PayloadTx: 1 << 9,
  PayloadRx: 1 << 10,
} as const;

/**
 * The netlink reader's counters: the first slots of both bindings'
 * statistics arrays, in native/src/nl_reader.h's NS_* order. Slot 0 counts
 * the binding's items (packets, or log records).
 */
export const ReaderStat = {
  Items: 0,
  Batches: 1,
  MaxBatch: 2,
  Datagrams: 3,
  Overruns: 4,
  BadMessages: 5,
  RecvErrors: 6,
  LastErrno: 7,
  TruncatedReads: 8,
  CallbackErrors: 9,
  /** Overruns as of the last read that found the socket empty (nl_reader.h NS_SETTLED_OVERRUNS). */
  SettledOverruns: 10,
} as const;
export const READER_STATS_WORDS = 11;

/**
 * Slots of the queue's statistics array, updated by C without crossing into
 * JS: the reader's counters, then the queue's own. Datagrams is counted but
 * not reported by stats().
 */
export const Stat = {
  ...ReaderStat,
  Packets: ReaderStat.Items,
  KernelErrors: READER_STATS_WORDS,
  Verdicts: READER_STATS_WORDS + 1,
  SendErrors: READER_STATS_WORDS + 2,
  /** Packet ids skipped: numbered by the kernel, never received (nfq.c next_id). */
  IdGaps: READER_STATS_WORDS + 3,
} as const;
export const STATS_WORDS = 15;

/** Kernel NFQA_CFG_F_* flags passed to open(). */
export const OpenFlag = { FailOpen: 1 << 0, Conntrack: 1 << 1, Gso: 1 << 2 } as const;

/** Netfilter verdicts a queue may return (NF_DROP, NF_ACCEPT, NF_REPEAT). */
export const Verdict = { Drop: 0, Accept: 1, Repeat: 4 } as const;
export type VerdictCode = (typeof Verdict)[keyof typeof Verdict];

/** Netfilter hooks as reported in Meta.Hook (NF_INET_*). */
export const Hook = { PreRouting: 0, LocalIn: 1, Forward: 2, LocalOut: 3, PostRouting: 4 } as const;

/** enum ip_conntrack_info, as reported in Meta.CtInfo. */
export const CtInfo = {
  Established: 0,
  Related: 1,
  New: 2,
  EstablishedReply: 3,
  RelatedReply: 4,
} as const;
