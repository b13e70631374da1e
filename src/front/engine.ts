/**
 * The front node's packet decision: one entry, decide(), per queued packet,
 * returning a verdict (the mark to set is left in `mark`), and one,
 * teardown(), per FIN/RST copy read from the NFLOG group (no verdict: the
 * kernel has forwarded the packet). Only connection setup and teardown
 * packets reach them (src/front/rules.ts). decide() parses the packet and
 * finds its service; a TCP packet to a service is then seed 000's
 * forward_request (forward_request.ts). No allocation, no logging, no
 * await: every outcome is a counter increment.
 *
 *  client SYN          new: choose a server (or overflow target), record it,
 *                      accept with its mark (the kernel DNATs by mark);
 *                      retransmitted: same record, same mark
 *  client FIN / RST    record -> recycle list (teardown(); or decide() for
 *                      one the kernel has no flow for: then accepted if it
 *                      had a live record, else dropped: teardownNoRecord)
 *  server RST          same, keyed by the client the reset goes to; one
 *                      that answered the SYN (a refusal) is noted for the
 *                      passive health check (refusals.ts)
 *  unanswered SYN      (teardown(): a copy of a retransmitted SYN whose
 *                      server never answered, nft.ts syn_decide) noted for
 *                      the passive health check against its record's server
 *  other non-SYN       (kernel has no flow for it) record -> accept with its
 *                      mark; no record -> drop (seed 000)
 *  malformed           drop, counted by parse status (a malformed log copy
 *                      is only counted: its packet is the kernel's)
 *
 * With checkpoints (src/shaping/shaper.ts), a new connection's SYN goes
 * through them first: it passes (to its server or steered to an overflow
 * cluster), is rejected (accept with REJECT_MARK: the kernel resets it, or
 * a silent drop), or is held: decide() returns HELD and the verdict is
 * given later through `onSettled` (from a queue's timer). A retransmitted
 * SYN of a held connection is dropped: the original's verdict is pending.
 */
import { ConnectionTable, connectionKey } from './connections.ts';
import { type Decision, type Forwarder, clientNumber, destinationMark, forwardRequest, newConnection, packetKey, record, selectTarget, shapedVerdict } from './forward_request.ts';
import { MARK_TAG, MARK_TAG_MASK, OVERFLOW_TARGET_BASE, QUEUE_MARK, SERVICE_SHIFT } from './marks.ts';
import { OVERFLOW_BASE } from './service.ts';
import type { ServerRuntime, ServiceRuntime } from './service.ts';
import { RefusalLog } from './refusals.ts';
import { ServerIndex } from './server-index.ts';
import { ServiceIndex } from './service-index.ts';
import { clampToCopy, parseIP } from '../packet/ip.ts';
import { IpProtocol, PacketInfo, ParseStatus, TcpFlag, parseIPv4, parseStatusName } from '../packet/ipv4.ts';
import { Verdict, type VerdictCode } from '../nfqueue/layout.ts';
import type { Shaper, ShapingHost } from '../shaping/shaper.ts';

/** decide() held the packet: no verdict now (one comes through onSettled). */
export { HELD, type Decision } from './forward_request.ts';

/** Gives a held packet its verdict later (the daemon stages it on the queue). */
export type SettledVerdict = (id: number, verdict: VerdictCode, mark: number) => void;

export class EngineCounters {
  packets = 0;
  syn = 0;
  synRetransmits = 0;
  /** First packets of UDP flows to a UDP service. */
  udpFlows = 0;
  decided = 0;
  overflowed = 0;
  noTarget = 0;
  untracked = 0;
  finishes = 0;
  serverResets = 0;
  /** The part of serverResets that refused a connection (the reset answered its SYN: refusals.ts). */
  serverRefusals = 0;
  /** Copies of retransmitted SYNs their server had not answered (no reply seen in the flow), with a record or not. */
  synUnanswered = 0;
  /** The part of synUnanswered whose record named a server of ours (noted for the passive check). */
  synUnansweredNoted = 0;
  /** FIN/RST copies read from the NFLOG group (teardown()); not in `packets`. */
  logged = 0;
  /** SYNs the kernel decided from the schedule (kernel-schedule.ts), recorded from their log copies (also in `syn` and `decided`). */
  kernelDecided = 0;
  /** Log copies the parser refused (the packets themselves were forwarded by the kernel). */
  loggedMalformed = 0;
  resumed = 0;
  noRecord = 0;
  /** FINs and RSTs queued to a service with no flow and no live record: dropped (they would loop). */
  teardownNoRecord = 0;
  /** Packets the rules should not have queued (not TCP/UDP, not to a VIP, no such UDP service), accepted or dropped. */
  unexpected = 0;
  /** The part of `unexpected` that was dropped (drops by reason: malformed, noTarget, noRecord, teardownNoRecord, this). */
  unexpectedDropped = 0;
  /** Checkpoints: SYNs held, rejected (reset or dropped), retransmits of held SYNs dropped, held verdicts given later. */
  shapingHeld = 0;
  shapingRejected = 0;
  shapingRetransmits = 0;
  shapingSettled = 0;
  /** Malformed packets by ParseStatus (index = status; 0 unused). */
  readonly malformed = new Float64Array(parseStatusName.length);
}

export class FrontEngine implements ShapingHost, Forwarder {
  readonly counters = new EngineCounters();
  /** Mark to set with the verdict decide() just returned (0: leave the packet's mark). */
  mark = 0;
  #services: readonly ServiceRuntime[];
  /** (VIP, port, protocol) -> service index: a lookup that does not grow with the number of services. */
  #index: ServiceIndex;
  /** Every service's servers by address and port (a server's RST copy: #serverReset). */
  #servers: ServerIndex;
  readonly #table: ConnectionTable;
  readonly #info = new PacketInfo();
  #shaper: Shaper | undefined;
  /** Where held packets' verdicts go (set by the daemon). */
  onSettled: SettledVerdict = () => undefined;
  /** Servers that refused a connection, for the passive health check (drained by the daemon's timer). */
  readonly refusals = new RefusalLog<ServerRuntime>();
  /**
   * A SYN the kernel decided filled its server (kernel-schedule.ts): the
   * schedule must be rewritten now, not at the next tick. The daemon reads
   * and clears it after each log batch.
   */
  scheduleDirty = false;

  constructor(services: readonly ServiceRuntime[], table: ConnectionTable, shaper?: Shaper) {
    this.#services = services;
    this.#index = new ServiceIndex(services);
    this.#servers = new ServerIndex(services);
    this.#table = table;
    this.setShaper(shaper);
  }

  get shaper(): Shaper | undefined {
    return this.#shaper;
  }

  get table(): ConnectionTable {
    return this.#table;
  }

  /** The index of the service at (VIP, port, IP protocol), or -1 (conntrack destroy events: src/front/flow-ends.ts). */
  serviceOf(vip: number, port: number, protocol: number): number {
    return this.#index.find(vip, port, protocol);
  }

  /** The index of the service at (IPv6 VIP as four words, port, protocol), or -1. */
  serviceOf6(vip: Uint32Array, port: number, protocol: number): number {
    return this.#index.find6(vip, port, protocol);
  }

  /** The service the parsed packet goes to (its destination), either family, or -1. */
  #serviceOfPacket(protocol: number): number {
    const info = this.#info;
    return info.family === 4 ? this.#index.find(info.dst, info.dstPort, protocol) : this.#index.find6(info.dst6, info.dstPort, protocol);
  }

  /** Installs the checkpoints (undefined or none configured: every SYN goes straight to its server). */
  setShaper(shaper: Shaper | undefined): void {
    this.#shaper = shaper?.enabled === true ? shaper : undefined;
    if (this.#shaper) this.#shaper.host = this;
  }

  /** ShapingHost: a target for a request that passed the service and cluster checkpoints. */
  choose(service: number, src: number): number {
    const svc = this.#services[service];
    if (!svc) return -1;
    return selectTarget(this, svc, src);
  }

  /** ShapingHost: a held request's evaluation ended; give its packet the verdict now. */
  settle(slot: number, outcome: number, now: number): void {
    const shaper = this.#shaper;
    if (!shaper) return;
    const pool = shaper.pool;
    const key = pool.key[slot] ?? 0;
    const v = shapedVerdict(this, shaper, slot, outcome, pool.service[slot] ?? 0, key, now);
    this.#table.releaseKey(key); // held: forwardRequest retained it (its record, if any, holds its own)
    this.counters.shapingSettled++;
    this.onSettled(pool.id[slot] ?? 0, v, this.mark);
  }

  /**
   * A SYN held by checkpoints that were replaced (reload): decided now
   * without checkpoints, its verdict given through onSettled. `key` and
   * `client` as the held pool kept them (the key's IPv6 client id was
   * retained while held: released here).
   */
  admitHeld(id: number, s: number, key: number, client: number, now: number): void {
    const svc = this.#services[s];
    if (!svc) {
      this.#table.releaseKey(key);
      this.counters.unexpected++;
      this.onSettled(id, Verdict.Drop, 0);
      return;
    }
    const v = newConnection(this, s, svc, key, client, now);
    this.#table.releaseKey(key);
    this.counters.shapingSettled++;
    this.onSettled(id, v, this.mark);
  }

  get services(): readonly ServiceRuntime[] {
    return this.#services;
  }

  /** Swaps in reloaded services (same indexes for the same names: see daemon). */
  setServices(services: readonly ServiceRuntime[]): void {
    this.#index = new ServiceIndex(services);
    this.#servers = new ServerIndex(services);
    this.#services = services;
  }

  /**
   * UDP: only a flow's first packet is queued (conntrack NEW). A record that
   * is still active (the same client port seen before, e.g. after the
   * kernel's flow timed out between two datagrams, or a retransmitted first
   * datagram) keeps the flow on its server; otherwise a new decision.
   * Records end by reconcile, when the kernel's flow is gone.
   */
  #udp(now: number): VerdictCode {
    const info = this.#info;
    const s = this.#serviceOfPacket(IpProtocol.Udp);
    const svc = s >= 0 ? this.#services[s] : undefined;
    if (svc !== undefined) {
      this.counters.udpFlows++;
      const key = packetKey(this.#table, info);
      if (key < 0) {
        this.counters.untracked++; // no IPv6 client id left (cannot happen within the bounds)
        return Verdict.Drop;
      }
      const known = this.#table.lookup(s, key);
      if (known >= 0 && this.#table.isActive(s, key)) {
        this.counters.resumed++;
        this.mark = destinationMark(s, known);
        return Verdict.Accept;
      }
      if (known >= 0) this.#table.remove(s, key);
      return newConnection(this, s, svc, key, clientNumber(info), now);
    }
    // No UDP service here (a reload removed it): nothing to steer it to.
    this.counters.unexpected++;
    this.counters.unexpectedDropped++;
    return Verdict.Drop;
  }

  /** `id` is the packet's queue id, kept with a held SYN for its later verdict. */
  decide(buf: Uint8Array, offset: number, length: number, now: number, id = 0): Decision {
    const c = this.counters;
    const info = this.#info;
    this.mark = 0;
    c.packets++;
    // IPv4 straight to its parser (the common case pays no dispatch), any other version through parseIP.
    const st = (buf[offset] ?? 0) >>> 4 === 4 ? parseIPv4(buf, offset, length, info) : parseIP(buf, offset, length, info);
    if (st !== ParseStatus.Ok) {
      c.malformed[st] = (c.malformed[st] ?? 0) + 1;
      return Verdict.Drop;
    }
    if (info.protocol === IpProtocol.Udp) return this.#udp(now);
    if (info.protocol !== IpProtocol.Tcp) {
      c.unexpected++;
      c.unexpectedDropped++;
      return Verdict.Drop;
    }
    const flags = info.tcpFlags;
    const s = info.family === 4 ? this.#index.find(info.dst, info.dstPort, IpProtocol.Tcp) : this.#index.find6(info.dst6, info.dstPort, IpProtocol.Tcp);
    const svc = s >= 0 ? this.#services[s] : undefined;
    if (svc !== undefined) return forwardRequest(this, s, svc, info, now, id);
    // Not to a VIP: a server's reset toward a client.
    if ((flags & TcpFlag.Rst) === 0 || !this.#serverReset(now)) c.unexpected++;
    return Verdict.Accept;
  }

  /**
   * A SYN the kernel decided from the schedule (its log copy, `info`
   * parsed; `mark` the decision): seed 000's "create new connection
   * record" for it, as newConnection does for a queued SYN. The kernel sent
   * it only while its conntrack entry was unconfirmed, so it is a new
   * connection: an active record of the same client port that names the
   * same target is the same connection seen twice (counted as a
   * retransmit); one naming another target is an earlier flow's record
   * that outlived it (replaced).
   */
  #learn(mark: number, now: number): void {
    const c = this.counters;
    const info = this.#info;
    const m = mark >>> 0;
    const s = this.#serviceOfPacket(IpProtocol.Tcp);
    const svc = s >= 0 ? this.#services[s] : undefined;
    const field = m & 0xfff;
    // A mark that is not a decision of ours for this very service (a reload
    // renumbered the services between the kernel's decision and this copy):
    // counted; reconcile and the FIN's copy keep the table right.
    if (svc === undefined || ((m & MARK_TAG_MASK) >>> 0) !== MARK_TAG || (m >>> SERVICE_SHIFT) % 0x1000 !== s || field === 0 || field === 0xfff) {
      c.unexpected++;
      return;
    }
    const target = field < OVERFLOW_TARGET_BASE ? field - 1 : OVERFLOW_BASE + (field - OVERFLOW_TARGET_BASE);
    const srv = target < OVERFLOW_BASE ? svc.servers[target] : undefined;
    const ovf = target >= OVERFLOW_BASE ? svc.overflow[target - OVERFLOW_BASE] : undefined;
    if (srv === undefined && ovf === undefined) {
      c.unexpected++;
      return;
    }
    const table = this.#table;
    const key = packetKey(table, info);
    if (key < 0) {
      c.untracked++; // no IPv6 client id left (cannot happen within the bounds)
      return;
    }
    const known = table.lookup(s, key);
    c.syn++;
    if (known >= 0) {
      if (known === target && table.isActive(s, key)) {
        c.synRetransmits++;
        return;
      }
      table.remove(s, key);
    }
    if (srv !== undefined) srv.decided++;
    else if (ovf !== undefined) {
      ovf.decided++;
      svc.overflowed++;
      c.overflowed++;
    }
    record(this, s, key, target, now);
    c.decided++;
    c.kernelDecided++;
    if (srv !== undefined && srv.load >= srv.capacity) this.scheduleDirty = true;
  }

  /**
   * A server's reset (info parsed, not to a VIP): its client's record ->
   * recycle list. False if from no server of ours. The reset names the
   * server and the client port, not the VIP: a server of several services
   * (two VIPs or ports over the same servers) is found in each (ServerIndex), and
   * the record finished is the one of the service whose record of that
   * client port names this very server. (Finishing the first service's
   * record instead left the right one active until its flow's destroy
   * event: a client port reused meanwhile was taken for a retransmit and
   * sent back to the server that had refused it, a taken-out server too.)
   * Two live connections of one client port to one server port cannot
   * coexist (one 4-tuple at the server), so at most one record matches.
   */
  #serverReset(now: number): boolean {
    const info = this.#info;
    const v4 = info.family === 4;
    const idx = this.#servers;
    // Every service that has this server (ServerIndex: O(1) however many services and servers).
    let pair = v4 ? idx.first4(info.src, info.srcPort) : idx.first6(info.src6, info.srcPort);
    if (pair < 0) return false;
    // An IPv6 client no record uses has no key (findKey6: -1): nothing to finish.
    const key = v4 ? connectionKey(info.dst, info.dstPort) : this.#table.findKey6(info.dst6, info.dstPort);
    if (key < 0) return true;
    for (; pair >= 0; pair = idx.next(pair)) {
      const s = idx.service(pair);
      const target = idx.server(pair);
      if (this.#table.lookup(s, key) === target && this.#table.finish(s, key, now)) {
        this.counters.serverResets++;
        // RST+ACK with sequence 0 answers a segment without ACK: the SYN. A
        // record is finished once, so each refused connection counts once.
        if ((info.tcpFlags & TcpFlag.Ack) !== 0 && info.seq === 0) {
          const srv = this.#services[s]?.servers[target];
          if (srv !== undefined) {
            this.counters.serverRefusals++;
            this.refusals.note(srv);
          }
        }
        break;
      }
    }
    return true;
  }

  /**
   * A retransmitted SYN whose server has not answered (its copy, `info`
   * parsed; syn_decide copies it only while the flow has no reply): noted
   * against the server its record names, for the passive check
   * (health.unansweredLimit). The record is looked up, never made: a flow
   * the daemon did not decide (the fallback's, while it was away) has
   * none, an adopted one is not ours to judge, and an overflow target is
   * another cluster, not a server here.
   */
  #unanswered(): void {
    const c = this.counters;
    const info = this.#info;
    c.synUnanswered++;
    const s = this.#serviceOfPacket(IpProtocol.Tcp);
    if (s < 0) return;
    const table = this.#table;
    const key = info.family === 4 ? connectionKey(info.src, info.srcPort) : table.findKey6(info.src6, info.srcPort);
    // Only a record of our own decision: an adopted one (a pair's takeover
    // of replicated flows) may have had its SYN-ACK sent to the other
    // node, and its retransmitted SYN would blame a server that answered.
    if (key < 0 || !table.waitingOnDecision(s, key)) return;
    const target = table.lookup(s, key);
    const srv = target >= 0 && target < OVERFLOW_BASE ? this.#services[s]?.servers[target] : undefined;
    if (srv === undefined) return;
    c.synUnansweredNoted++;
    this.refusals.noteUnanswered(srv);
  }

  /**
   * A FIN or RST copy from the NFLOG group: the record goes to the recycle
   * list, as decide() does for a queued one. Copies are cut at
   * TEARDOWN_LOG.size bytes and only the headers matter, so a longer
   * packet's IP length field is clamped to the copy before parsing
   * (clampToCopy, either family; the bytes are the log's receive area;
   * nothing is sent back to the kernel).
   */
  teardown(buf: Uint8Array, offset: number, length: number, now: number, mark = 0): void {
    const c = this.counters;
    const info = this.#info;
    c.logged++;
    clampToCopy(buf, offset, length);
    if (parseIP(buf, offset, length, info) !== ParseStatus.Ok) {
      c.loggedMalformed++;
      return;
    }
    const flags = info.tcpFlags;
    if (info.protocol === IpProtocol.Tcp && (flags & (TcpFlag.Syn | TcpFlag.Ack | TcpFlag.Fin | TcpFlag.Rst)) === TcpFlag.Syn) {
      if (mark >>> 0 === QUEUE_MARK) this.#unanswered();
      else this.#learn(mark, now);
      return;
    }
    if (info.protocol !== IpProtocol.Tcp || (flags & (TcpFlag.Fin | TcpFlag.Rst)) === 0) {
      c.unexpected++;
      return;
    }
    const s = this.#serviceOfPacket(IpProtocol.Tcp);
    if (s >= 0) {
      const key = info.family === 4 ? connectionKey(info.src, info.srcPort) : this.#table.findKey6(info.src6, info.srcPort);
      if (key >= 0 && this.#table.finish(s, key, now)) c.finishes++;
      return;
    }
    if ((flags & TcpFlag.Rst) === 0 || !this.#serverReset(now)) c.unexpected++;
  }
}
