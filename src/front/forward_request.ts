/**
 * Seed 000's forward_request:
 *
 *   procedure forward_request {
 *     if (connection already exists for this client IP and port) {
 *       if (packet is fin) move this connection record to a list where it
 *         will be recycled after few minutes
 *       update time stamp for this connection
 *       write IP address of server in destination field and re-inject on network
 *     } else if (packet is syn) {
 *       select servers in proportion to their remaining capacity
 *       create new connection record with current time stamp
 *       write IP address of server in destination field and re-inject on network
 *     } else drop this packet
 *     if (load on each server > capacity and least loaded cluster list not empty)
 *       redirect request to other clusters in proportion to their free capacity
 *   }
 *
 * forwardRequest() below is that procedure for one TCP packet to a virtual
 * service, in the seed's order. What each line is in Sluice:
 *  - "packet": only packets the kernel has no flow for are queued (the SYN,
 *    a packet of a flow the kernel lost); every later packet of a decided
 *    connection is carried by the kernel and never reaches this procedure
 *    (src/front/rules.ts). FINs and RSTs of live flows arrive as log copies
 *    and go to FrontEngine.teardown(), which does the fin line alone.
 *  - the record: ConnectionTable (connections.ts), keyed by service, client
 *    address and client port; "a list where it will be recycled" is its
 *    recycle list (finish(), freed by sweep()). "packet is fin" is FIN or RST.
 *  - "update time stamp": no per-packet stamp, since the packets of a live
 *    connection do not come here. An idle record is freed when the kernel's
 *    flow is gone (ConnectionTable.reconcile).
 *  - "write IP address of server in destination field and re-inject": the
 *    verdict Accept with the target's mark (destinationMark); the nat rule
 *    of that mark DNATs the packet and conntrack the rest of the flow
 *    (marks.ts, nft.ts). A FIN or RST of a live record is accepted as it
 *    is (mark 0): it ends the connection and needs no server. One with no
 *    record is dropped (counted): it has nowhere to go but back out.
 *  - "select servers in proportion to their remaining capacity": the
 *    service's selection method (select/; `capacity`, select/capacity.ts, is
 *    the seed's; the others are configurable alternatives). Checkpoints
 *    (seed 001, src/shaping/), when configured, come between the SYN and the
 *    selection and may hold, reject or steer it.
 *  - the overflow: selectTarget(). "Load on each server > capacity" is the
 *    method finding no eligible server; the least-loaded cluster list is
 *    each overflow target's free capacity, written by LeastLoadedClusters
 *    (least_loaded_clusters.ts) from the other clusters' reports.
 *  - "drop this packet": a non-SYN without a live record (counted: noRecord,
 *    or teardownNoRecord for a FIN or RST).
 *
 * Hot path: no allocation, no logging, no await; every outcome is a counter
 * of the engine (EngineCounters, engine.ts). The state worked on is the
 * engine's, seen through Forwarder.
 */
import { clientNumber6 } from './client6.ts';
import { connectionKey, type ConnectionTable } from './connections.ts';
import { REJECT_MARK, overflowMark, serverMark } from './marks.ts';
import { OVERFLOW_BASE, type ServiceRuntime } from './service.ts';
import { TcpFlag, type PacketInfo } from '../packet/ipv4.ts';
import { Verdict, type VerdictCode } from '../nfqueue/layout.ts';
import { Outcome, type Shaper } from '../shaping/shaper.ts';

/** The packet is held by a checkpoint: no verdict now (one comes later, see FrontEngine.onSettled). */
export const HELD = -1;
export type Decision = VerdictCode | typeof HELD;

/** The engine's counters this procedure moves (EngineCounters has them all). */
export interface ForwardCounters {
  syn: number;
  synRetransmits: number;
  resumed: number;
  finishes: number;
  noRecord: number;
  /** FINs and RSTs to a service with no flow and no live record: dropped. */
  teardownNoRecord: number;
  decided: number;
  overflowed: number;
  noTarget: number;
  untracked: number;
  shapingHeld: number;
  shapingRejected: number;
  shapingRetransmits: number;
}

/** The state forward_request works on: the front engine's (FrontEngine implements it). */
export interface Forwarder {
  readonly table: ConnectionTable;
  /** The current services by index (a reload swaps them; a held SYN is recorded against the current ones). */
  readonly services: readonly ServiceRuntime[];
  readonly counters: ForwardCounters;
  /** Checkpoints, or undefined when none are configured. */
  readonly shaper: Shaper | undefined;
  /** Out: the mark to set with the verdict just returned; left as the caller set it (0) when there is none. */
  mark: number;
}

/**
 * One TCP packet `info` (parsed) to service `s` (`svc`, matched on VIP and
 * port): its verdict, the mark in `f.mark`. `id` is the packet's queue id,
 * kept with a held SYN for its later verdict.
 */
export function forwardRequest(f: Forwarder, s: number, svc: ServiceRuntime, info: PacketInfo, now: number, id: number): Decision {
  const c = f.counters;
  const table = f.table;
  const flags = info.tcpFlags;
  const key = packetKey(table, info);
  if (key < 0) {
    // No IPv6 client id left (cannot happen within the bounds: client6.ts): like a full table.
    c.untracked++;
    return Verdict.Drop;
  }
  const server = table.lookup(s, key);
  // The connection already exists (a recycled record does not count: its connection has ended).
  if (server >= 0 && table.isActive(s, key)) {
    if ((flags & (TcpFlag.Fin | TcpFlag.Rst)) !== 0) {
      table.finish(s, key, now);
      c.finishes++;
      return Verdict.Accept;
    }
    if ((flags & (TcpFlag.Syn | TcpFlag.Ack)) === TcpFlag.Syn) {
      c.syn++;
      c.synRetransmits++;
    } else {
      c.resumed++;
    }
    f.mark = destinationMark(s, server);
    return Verdict.Accept;
  }
  // A FIN or RST with nothing to recycle (no flow in the kernel, no live
  // record): no server to send it to, and accepted unmarked it would leave
  // the node toward the VIP's route and loop (issue 20 part 5). Dropped and
  // counted, as the kernel's VIP guard would drop it anyway (nft.ts).
  if ((flags & (TcpFlag.Fin | TcpFlag.Rst)) !== 0) {
    c.teardownNoRecord++;
    return Verdict.Drop;
  }
  if ((flags & (TcpFlag.Syn | TcpFlag.Ack)) === TcpFlag.Syn) {
    c.syn++;
    if (server >= 0) table.remove(s, key); // its port reused after a FIN: a new connection
    const shaper = f.shaper;
    const client = clientNumber(info);
    if (shaper === undefined) return newConnection(f, s, svc, key, client, now);
    const out = shaper.begin(id, key, client, info.src6, info.dstPort, s, now);
    if (out === Outcome.Held) {
      // An IPv6 key's client id must outlive this packet: the held SYN is
      // recorded later (released when settled: FrontEngine.settle, admitHeld).
      table.retainKey(key);
      c.shapingHeld++;
      return HELD;
    }
    if (out === Outcome.Retransmit) {
      // A SYN of a held connection: the original's verdict is pending.
      c.shapingRetransmits++;
      return Verdict.Drop;
    }
    return shapedVerdict(f, shaper, shaper.pool.scratch, out, s, key, now);
  }
  c.noRecord++;
  return Verdict.Drop;
}

/**
 * The connection key of the client (source) of parsed packet `info`, either
 * family (connections.ts); an IPv6 one interns its address (-1: no id left).
 */
export function packetKey(table: ConnectionTable, info: PacketInfo): number {
  return info.family === 4 ? connectionKey(info.src, info.srcPort) : table.key6(info.src6, info.srcPort);
}

/**
 * The client number selection methods and checkpoints see: IPv4's address
 * as u32, or an IPv6 address's clientNumber6 (>= 2^32, client6.ts).
 */
export function clientNumber(info: PacketInfo): number {
  return info.family === 4 ? info.src : clientNumber6(info.src6);
}

/**
 * Selection with the seed's overflow: a server of the service, else (every
 * server full or unusable) another cluster in proportion to its free
 * capacity. Server index, OVERFLOW_BASE + overflow target index, or -1 (no
 * server, and no cluster with free capacity). Deterministic.
 */
export function selectTarget(f: Forwarder, svc: ServiceRuntime, client: number): number {
  const server = svc.pickServer(client);
  if (server >= 0) return server;
  const cluster = svc.pickOverflow();
  if (cluster < 0) return -1;
  f.counters.overflowed++;
  return OVERFLOW_BASE + cluster;
}

/** A new connection without checkpoints: selects its target, records it, sets the mark. */
export function newConnection(f: Forwarder, s: number, svc: ServiceRuntime, key: number, client: number, now: number): VerdictCode {
  const c = f.counters;
  const target = selectTarget(f, svc, client);
  if (target < 0) {
    c.noTarget++;
    return Verdict.Drop;
  }
  record(f, s, key, target, now);
  c.decided++;
  f.mark = destinationMark(s, target);
  return Verdict.Accept;
}

/**
 * The verdict for a checkpoint outcome (at once, or later for a held SYN),
 * setting `f.mark`; a passed connection is recorded and its checkpoint
 * counts handed to the record.
 */
export function shapedVerdict(f: Forwarder, shaper: Shaper, slot: number, outcome: number, s: number, key: number, now: number): VerdictCode {
  const c = f.counters;
  f.mark = 0;
  if (outcome === Outcome.Pass) {
    const target = shaper.pool.target[slot] ?? -1;
    const conn = record(f, s, key, target, now);
    shaper.commit(slot, conn, now);
    c.decided++;
    f.mark = destinationMark(s, target);
    return Verdict.Accept;
  }
  if (outcome === Outcome.NoTarget) {
    c.noTarget++;
    return Verdict.Drop;
  }
  c.shapingRejected++;
  if (outcome === Outcome.Reject) {
    f.mark = REJECT_MARK;
    return Verdict.Accept;
  }
  return Verdict.Drop;
}

/** The mark that has the kernel DNAT a connection to `target` of service `s` (a server, or an overflow cluster's VIP). */
export function destinationMark(s: number, target: number): number {
  return target >= OVERFLOW_BASE ? overflowMark(s, target - OVERFLOW_BASE) : serverMark(s, target);
}

/**
 * Creates the connection record with the current time and counts it on its
 * server. Returns its slot, or -1 when the table is full: the connection
 * goes on untracked (counted), the kernel still carries it.
 */
export function record(f: Forwarder, s: number, key: number, target: number, now: number): number {
  const slot = f.table.create(key, s, target, now);
  if (slot >= 0) {
    const srv = f.services[s]?.servers[target];
    if (srv) srv.active++;
  } else {
    f.counters.untracked++;
  }
  return slot;
}
