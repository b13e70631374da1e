/**
 * Memory layout shared with native/src/nflog.c. loadNative() checks
 * LOG_META_WORDS and LOG_STATS_WORDS against the addon's, so a mismatch
 * fails loudly instead of misreading records.
 */

import { READER_STATS_WORDS, ReaderStat } from '../nfqueue/layout.ts';

/** Words per record in the metadata array filled by C. */
export const LogMeta = { PayloadOffset: 0, PayloadLength: 1, InDev: 2, Mark: 3 } as const;
export const LOG_META_WORDS = 4;

/**
 * Slots of the log's statistics array, updated by C without crossing into
 * JS: the netlink reader's counters (shared with NFQUEUE), then the log's
 * own. A kernel error (NLMSG_ERROR) counts in RecvErrors.
 */
export const LogStat = {
  ...ReaderStat,
  Records: ReaderStat.Items,
  Lost: READER_STATS_WORDS,
} as const;
export const LOG_STATS_WORDS = 12;
