/**
 * Memory layout shared with native/src/ct_msg.h (conntrack events and table
 * dumps). loadNative() checks EV_META_WORDS, EV_STATS_WORDS and
 * CT_ROW_WORDS against the addon's, so a mismatch fails loudly instead of
 * misreading events.
 *
 * An address takes four words: IPv4 in the first (the address as a host
 * number, as src/packet/address.ts parses it), the other three 0; IPv6 as
 * its four 32-bit groups in order. IPv6 needs no new layout.
 */
import { READER_STATS_WORDS, ReaderStat } from '../nfqueue/layout.ts';

/** Words per event in the metadata array filled by C. */
export const EventMeta = {
  Family: 0,
  Protocol: 1,
  Src: 2,
  Dst: 6,
  SrcPort: 10,
  DstPort: 11,
  Mark: 12,
  Flags: 13,
  TcpState: 14,
  Id: 15,
} as const;
export const EV_META_WORDS = 16;

/**
 * A row of a table dump (native/src/ct_dump.c): an event's words, then the
 * reply tuple's source address (four words) and source port: the server a
 * DNATed flow goes to.
 */
export const RowMeta = { ...EventMeta, ReplySrc: 16, ReplySrcPort: 20 } as const;
export const CT_ROW_WORDS = 21;

/** Bits of EventMeta.Flags: which optional attributes the message carried (Reply: a dump row's reply tuple). */
export const EventFlag = { Mark: 1, Ports: 2, TcpState: 4, Id: 8, Reply: 16 } as const;

/**
 * Slots of the statistics array: the netlink reader's counters only (Items
 * counts decoded events; Overruns the ENOBUFS seen: events were lost;
 * BadMessages the events without an original tuple, and foreign messages).
 */
export const EventStat = { ...ReaderStat, Events: ReaderStat.Items } as const;
export const EV_STATS_WORDS = READER_STATS_WORDS;
