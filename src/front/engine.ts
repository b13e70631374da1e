/**
 * The front node's packet decision: one entry, decide(), per queued packet,
 * returning a verdict (the mark to set is left in `mark`). Only connection
 * setup and teardown packets reach it (src/front/rules.ts). No allocation,
 * no logging, no await: every outcome is a counter increment.
 *
 *  client SYN          new: choose a server (or overflow target), record it,
 *                      accept with its mark (the kernel DNATs by mark);
 *                      retransmitted: same record, same mark
 *  client FIN / RST    record -> recycle list; accept (conntrack carries it)
 *  server RST          same, keyed by the client the reset goes to
 *  other non-SYN       (kernel has no flow for it) record -> accept with its
 *                      mark; no record -> drop (seed 000)
 *  malformed           drop, counted by parse status
 */
import { ConnectionTable, connectionKey } from './connections.ts';
import { overflowMark, serverMark } from './marks.ts';
import { OVERFLOW_BASE, type ServiceRuntime } from './service.ts';
import { IpProtocol, PacketInfo, ParseStatus, TcpFlag, parseIPv4, parseStatusName } from '../packet/ipv4.ts';
import { Verdict, type VerdictCode } from '../nfqueue/layout.ts';

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
  resumed = 0;
  noRecord = 0;
  /** Packets the rules should not have queued (not TCP/UDP, not to a VIP, no such UDP service), accepted or dropped. */
  unexpected = 0;
  /** The part of `unexpected` that was dropped (drops by reason: malformed, noTarget, noRecord, this). */
  unexpectedDropped = 0;
  /** Malformed packets by ParseStatus (index = status; 0 unused). */
  readonly malformed = new Float64Array(parseStatusName.length);
}

export class FrontEngine {
  readonly counters = new EngineCounters();
  /** Mark to set with the verdict decide() just returned (0: leave the packet's mark). */
  mark = 0;
  #services: readonly ServiceRuntime[];
  readonly #table: ConnectionTable;
  readonly #info = new PacketInfo();

  constructor(services: readonly ServiceRuntime[], table: ConnectionTable) {
    this.#services = services;
    this.#table = table;
  }

  get services(): readonly ServiceRuntime[] {
    return this.#services;
  }

  /** Swaps in reloaded services (same indexes for the same names: see daemon). */
  setServices(services: readonly ServiceRuntime[]): void {
    this.#services = services;
  }

  #markOf(service: number, target: number): number {
    return target >= OVERFLOW_BASE ? overflowMark(service, target - OVERFLOW_BASE) : serverMark(service, target);
  }

  /** Chooses a target for a new flow, records it, sets the mark. */
  #newFlow(s: number, svc: ServiceRuntime, key: number, now: number): VerdictCode {
    const c = this.counters;
    const target = svc.choose(this.#info.src);
    if (target < 0) {
      c.noTarget++;
      return Verdict.Drop;
    }
    if (target >= OVERFLOW_BASE) c.overflowed++;
    if (this.#table.create(key, s, target, now) >= 0) {
      const srv = svc.servers[target];
      if (srv) srv.active++;
    } else {
      c.untracked++;
    }
    c.decided++;
    this.mark = this.#markOf(s, target);
    return Verdict.Accept;
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
    const services = this.#services;
    for (let s = 0; s < services.length; s++) {
      const svc = services[s];
      if (svc === undefined || svc.vip !== info.dst || svc.port !== info.dstPort || svc.protocol !== IpProtocol.Udp) continue;
      this.counters.udpFlows++;
      const key = connectionKey(s, info.src, info.srcPort);
      const known = this.#table.lookup(key);
      if (known >= 0 && this.#table.isActive(key)) {
        this.counters.resumed++;
        this.mark = this.#markOf(s, known);
        return Verdict.Accept;
      }
      if (known >= 0) this.#table.remove(key);
      return this.#newFlow(s, svc, key, now);
    }
    // No UDP service here (a reload removed it): nothing to steer it to.
    this.counters.unexpected++;
    this.counters.unexpectedDropped++;
    return Verdict.Drop;
  }

  decide(buf: Uint8Array, offset: number, length: number, now: number): VerdictCode {
    const c = this.counters;
    const info = this.#info;
    this.mark = 0;
    c.packets++;
    const st = parseIPv4(buf, offset, length, info);
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
    const services = this.#services;
    for (let s = 0; s < services.length; s++) {
      const svc = services[s];
      if (svc === undefined || svc.vip !== info.dst || svc.port !== info.dstPort || svc.protocol !== IpProtocol.Tcp) continue;
      const key = connectionKey(s, info.src, info.srcPort);
      if ((flags & (TcpFlag.Fin | TcpFlag.Rst)) !== 0) {
        if (this.#table.finish(key, now)) c.finishes++;
        return Verdict.Accept;
      }
      if ((flags & (TcpFlag.Syn | TcpFlag.Ack)) === TcpFlag.Syn) {
        c.syn++;
        const known = this.#table.lookup(key);
        if (known >= 0 && this.#table.isActive(key)) {
          c.synRetransmits++;
          this.mark = this.#markOf(s, known);
          return Verdict.Accept;
        }
        if (known >= 0) this.#table.remove(key); // port reused after FIN: a new connection
        return this.#newFlow(s, svc, key, now);
      }
      // Any other packet the kernel has no flow for.
      const known = this.#table.lookup(key);
      if (known >= 0 && this.#table.isActive(key)) {
        c.resumed++;
        this.mark = this.#markOf(s, known);
        return Verdict.Accept;
      }
      c.noRecord++;
      return Verdict.Drop;
    }
    // Not to a VIP: a server's reset toward a client.
    if ((flags & TcpFlag.Rst) !== 0) {
      for (let s = 0; s < services.length; s++) {
        const svc = services[s];
        if (svc === undefined || svc.serverAt(info.src, info.srcPort) < 0) continue;
        if (this.#table.finish(connectionKey(s, info.dst, info.dstPort), now)) c.serverResets++;
        return Verdict.Accept;
      }
    }
    c.unexpected++;
    return Verdict.Accept;
  }
}
