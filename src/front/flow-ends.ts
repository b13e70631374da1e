/**
 * Flows end by conntrack events (docs/front-node-design.md "Flows end by
 * conntrack events"): the kernel's destroy event for a flow frees its
 * connection record at once (ConnectionTable.ended), so the daemon no longer
 * dumps the whole conntrack table every period to find the ended flows.
 *
 * Per event (hot path: no allocation, no logging, no await): a flow whose
 * conntrack mark is not ours (tag 0x51, marks.ts; the daemon-down
 * fallback's QUEUE_MARK flows included) is only counted; an IPv4 flow to
 * one of our services (found by the original tuple's VIP, port and
 * protocol, not the mark's service field: a reload may have renumbered the
 * services since the flow's mark was set) frees the record of its client
 * address and port.
 *
 * When the full dump (the daemon's reconcile, now a resync) still runs:
 *   overrun   the event socket reported ENOBUFS: events were lost, and how
 *             many is unknown; a resync follows within a second, at most
 *             once per RESYNC_MIN_GAP_MS
 *   legacy    records adopted at start from the kernel's table whose flows
 *             may predate every event listener (with the default
 *             net.netfilter.nf_conntrack_events=2 such a flow never reports
 *             its end): the periodic reconcile runs while any remain, less
 *             often while it finds nothing the events missed
 *             (legacy-backoff.ts), and stops once they are gone
 *   no events the socket could not be opened: the periodic reconcile as before
 */
import { ConntrackEvents, type ConntrackEventBatch, type ConntrackEventsStats } from '../conntrack/events.ts';
import type { SluiceError } from '../errors/errors.ts';
import { connectionKey, type ConnectionTable } from './connections.ts';
import { MARK_TAG, MARK_TAG_MASK } from './marks.ts';
import { EventFlag } from '../conntrack/layout.ts';
import { LegacyBackoff } from './legacy-backoff.ts';

// The kernel's enum tcp_conntrack: a flow in FIN_WAIT..CLOSE has seen a FIN or RST.
const TCP_NONE = 0;
const TCP_FIN_WAIT = 4;
const TCP_CLOSE = 8;

const AF_INET = 2;
const AF_INET6 = 10;

/** Most destroy events read per wakeup (ConntrackEvents maxBatch). */
export const EVENT_BATCH = 256;

/** A full batch read longer ago than this no longer means a backlog (FlowEnds.backlogged). */
export const BACKLOG_FRESH_MS = 20;

/** Overrun resyncs start at least this far apart: under a sustained overrun a dump of a large table every second would make things worse. */
export const RESYNC_MIN_GAP_MS = 30_000;

/** What the events need of the daemon. */
export interface FlowEndsHost {
  readonly table: ConnectionTable;
  /** The service at (VIP, port, IP protocol), or -1 (FrontEngine.serviceOf). */
  serviceOf(vip: number, port: number, protocol: number): number;
  /** The same for an IPv6 VIP as four words (FrontEngine.serviceOf6). */
  serviceOf6(vip: Uint32Array, port: number, protocol: number): number;
}

/** Why a resync (full read of the kernel's table) runs. */
export type ResyncReason = 'overrun' | 'legacy' | 'periodic';

export class FlowEnds {
  /** Destroy events by outcome (freed: a record was freed; the rest were not). */
  readonly counts = {
    /** A record freed (active or recycled). */
    freed: 0,
    /** Ours, but no record (freed already: a reuse race lost, a record never made, or a table read). */
    noRecord: 0,
    /** Ours, the record is a port reuse younger than REUSE_GUARD_MS: the previous flow's event, ignored. */
    stale: 0,
    /** Ours, to no current service (a reload removed it). */
    noService: 0,
    /** Not ours: no mark with our tag. */
    foreign: 0,
    /** Neither IPv4 nor IPv6. */
    otherFamily: 0,
  };
  /** Times a resync's read or sweep waited for backlogged events to be read (yieldWhileBacklogged). */
  resyncYields = 0;
  /** Resyncs run, by reason. */
  readonly resyncs: Record<ResyncReason, number> = { overrun: 0, legacy: 0, periodic: 0 };
  /** How often legacy resyncs run while they find nothing the events missed. */
  readonly legacyBackoff = new LegacyBackoff();
  readonly #host: FlowEndsHost;
  #events: ConntrackEvents | undefined;
  /**
   * When the last batch was handled if it stopped at EVENT_BATCH (more
   * events may be waiting in the socket: the reader takes the rest one
   * bounded batch per loop turn), else -Infinity (performance.now() ms).
   * The resync's read of the whole table yields while this is fresh
   * (backlogged), so it never takes the loop turns the events need.
   */
  #fullAt = -Infinity;
  /** Overruns already answered by a resync. */
  #overrunsSeen = 0;
  #lastOverrunResync = -Infinity;
  /** An IPv6 event's addresses (no allocation per event). */
  readonly #src6 = new Uint32Array(4);
  readonly #dst6 = new Uint32Array(4);

  constructor(host: FlowEndsHost) {
    this.#host = host;
  }

  /**
   * Joins the destroy event group; throws its typed error (the caller then
   * runs without events: the periodic reconcile).
   */
  open(receiveBufferBytes: number, onError: (err: SluiceError | Error) => void): void {
    this.#events = ConntrackEvents.open({
      // Events handed to JS per wakeup: bounds the stall one wakeup causes
      // on the loop the SYNs share (measured in docs/operations.md "Flow ends").
      maxBatch: EVENT_BATCH,
      // The slack for a backlog (connections.eventBufferMiB): the bounded
      // batches read a backlog one per loop turn, so while the daemon waits
      // for a CPU the events wait here. Losing them costs a full read of the
      // table (seconds with a million flows); holding them costs only time.
      receiveBufferBytes,
      onBatch: (batch) => {
        this.handle(batch, performance.now());
      },
      onError,
    });
  }

  /**
   * Whether destroy events may be waiting beyond the last bounded read (see
   * #fullAt). A backlogged reader reads a batch every loop turn, so a full
   * batch older than BACKLOG_FRESH_MS means the socket was emptied by it
   * (exactly EVENT_BATCH waiting) or the events stopped: not backlogged.
   */
  backlogged(now = performance.now()): boolean {
    return now - this.#fullAt < BACKLOG_FRESH_MS;
  }

  /**
   * Loop turns for the events while they are backlogged, at most `maxMs`:
   * the pace of a resync's read and sweep (daemon.ts RESYNC_YIELD_MAX_MS).
   */
  async yieldWhileBacklogged(maxMs: number): Promise<void> {
    if (!this.backlogged()) return;
    this.resyncYields++;
    const until = performance.now() + maxMs;
    while (this.backlogged() && performance.now() < until) await new Promise<void>((r) => setImmediate(r));
  }

  get available(): boolean {
    return this.#events !== undefined && !this.#events.closed;
  }

  /** The batch handler (public for tests). */
  handle(batch: ConntrackEventBatch, now: number): void {
    this.#fullAt = batch.count >= EVENT_BATCH ? now : -Infinity;
    const c = this.counts;
    const host = this.#host;
    for (let i = 0; i < batch.count; i++) {
      if (((batch.mark(i) & MARK_TAG_MASK) >>> 0) !== MARK_TAG) {
        c.foreign++;
        continue;
      }
      const family = batch.family(i);
      let s: number;
      let key: number;
      const table = host.table;
      if (family === AF_INET) {
        s = host.serviceOf(batch.dst(i), batch.dstPort(i), batch.protocol(i));
        key = connectionKey(batch.src(i), batch.srcPort(i));
      } else if (family === AF_INET6) {
        const src = this.#src6;
        const dst = this.#dst6;
        for (let w = 0; w < 4; w++) {
          src[w] = batch.addressWord(i, 0, w);
          dst[w] = batch.addressWord(i, 1, w);
        }
        s = host.serviceOf6(dst, batch.dstPort(i), batch.protocol(i));
        // -1: no record or held SYN uses the client's address (client6.ts): no record to free.
        key = table.findKey6(src, batch.srcPort(i));
      } else {
        c.otherFamily++;
        continue;
      }
      if (s < 0) {
        c.noService++;
        continue;
      }
      const stale = table.counts.endedStale;
      const state = (batch.flags(i) & EventFlag.TcpState) !== 0 ? batch.tcpState(i) : TCP_NONE;
      const closedFlow = state >= TCP_FIN_WAIT && state <= TCP_CLOSE;
      if (key >= 0 && table.ended(s, key, now, closedFlow)) c.freed++;
      else if (table.counts.endedStale !== stale) c.stale++;
      else c.noRecord++;
    }
  }

  /**
   * Whether an overrun not yet answered calls for a resync now (then it is
   * taken as answered: overruns during the resync call for another).
   * Only once the overrun has settled: until a read finds the socket empty
   * the kernel keeps dropping events (the socket stays congested while its
   * backlog is read), so a resync started at the overrun itself would miss
   * the flows that end during that backlog (seen in front-ctevents: 5
   * flows deleted right after the resync were never freed).
   */
  overrunResyncDue(now: number, resyncRunning: boolean): boolean {
    const ev = this.#events;
    return ev !== undefined && this.answerOverruns(ev.settledOverruns, now, resyncRunning);
  }

  /**
   * overrunResyncDue's rule on the settled overrun count `settled`. Never
   * while a resync runs: the running one may already have read, as live,
   * flows whose destroy events the overrun lost (their records would stay
   * until the next resync, and with no legacy records left none comes), so
   * the overrun stays unanswered until it ends (measured: 10 overruns
   * during a resync of 1M flows, 7,502 records left behind).
   */
  answerOverruns(settled: number, now: number, resyncRunning: boolean): boolean {
    if (resyncRunning || settled === this.#overrunsSeen || now - this.#lastOverrunResync < RESYNC_MIN_GAP_MS) return false;
    this.#overrunsSeen = settled;
    this.#lastOverrunResync = now;
    return true;
  }

  /**
   * Why the periodic timer should resync now, or undefined (events cover
   * every record, or the legacy resyncs are backing off: legacy-backoff.ts).
   */
  periodicReason(resyncRunning = false): ResyncReason | undefined {
    if (!this.available) return 'periodic';
    // The running one answers this period; the backoff counts periods between reads it was told of (resyncDone).
    if (resyncRunning) return undefined;
    return this.legacyBackoff.due(this.#host.table.legacy) ? 'legacy' : undefined;
  }

  /** A resync for `reason` ended having freed `freed` records (the legacy backoff's evidence). */
  resyncDone(reason: ResyncReason, freed: number): void {
    if (reason === 'legacy') this.legacyBackoff.done(freed);
  }

  stats(): ConntrackEventsStats | undefined {
    return this.#events?.stats();
  }

  close(): void {
    this.#events?.close();
  }
}
