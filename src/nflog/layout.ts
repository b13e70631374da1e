/**
 * Memory layout shared with native/src/nflog.c. loadNative() checks
 * LOG_META_WORDS and LOG_STATS_WORDS against the addon's, so a mismatch
 * fails loudly instead of misreading records.
 */

/** Words per record in the metadata array filled by C. */
export const LogMeta = { PayloadOffset: 0, PayloadLength: 1, InDev: 2, Mark: 3 } as const;
export const LOG_META_WORDS = 4;

/**
 * Slots of the statistics array, updated by C without crossing into JS: the
 * netlink reader's counters first, in the order both bindings share
 * (native/src/nl_reader.h NS_*), then the log's own. A kernel error
 * (NLMSG_ERROR) counts in RecvErrors.
 */
export const LogStat = {
  Records: 0,
  Batches: 1,
  MaxBatch: 2,
  Datagrams: 3,
  Overruns: 4,
  BadMessages: 5,
  RecvErrors: 6,
  LastErrno: 7,
  TruncatedReads: 8,
  CallbackErrors: 9,
  Lost: 10,
} as const;
export const LOG_STATS_WORDS = 11;
