/**
 * The iptables rules `sluice front` owns, rendered from its configuration,
 * installed atomically per table with iptables-restore --noflush, and
 * removed at stop. Only the SLUICE_* chains and the single jump into each
 * are ever touched: other rules in the namespace are left alone.
 *
 * What each rule is for, and what was verified on this kernel:
 * docs/front-node-design.md.
 */
import type { FrontConfig } from './config.ts';
import { REJECT_MARK, fallbackMark, hex, overflowMark, serverMark } from './marks.ts';

export const CHAINS = {
  queue: { table: 'mangle', chain: 'SLUICE_QUEUE', hook: 'PREROUTING' },
  dnat: { table: 'nat', chain: 'SLUICE_DNAT', hook: 'PREROUTING' },
  snat: { table: 'nat', chain: 'SLUICE_SNAT', hook: 'POSTROUTING' },
  // Checkpoint rejections (src/shaping): the daemon accepts the SYN with
  // REJECT_MARK and the kernel answers it with a TCP reset. REJECT exists
  // only in the filter table; a VIP is forwarded (FORWARD) or, if it is on
  // one of our interfaces, local (INPUT).
  // The jump itself tests the mark: every forwarded packet passes this
  // hook, and only a rejected SYN carries the mark, so the rest pay one
  // mark comparison instead of a jump into the chain and back.
  rejectForward: { table: 'filter', chain: 'SLUICE_REJECT', hook: 'FORWARD', jumpIf: ['-m', 'mark', '--mark', hex(REJECT_MARK)] },
  rejectInput: { table: 'filter', chain: 'SLUICE_REJECT_IN', hook: 'INPUT', jumpIf: ['-m', 'mark', '--mark', hex(REJECT_MARK)] },
} as const satisfies Record<string, OwnedChain>;

/** A chain we own, and the one rule in its hook that jumps to it. */
export interface OwnedChain {
  readonly table: 'mangle' | 'nat' | 'filter';
  readonly chain: string;
  readonly hook: string;
  /** Matches of the jump rule (none: every packet at the hook jumps). */
  readonly jumpIf?: readonly string[];
}

/**
 * How FIN and RST copies reach the daemon (NFLOG, src/nflog/log.ts). Both
 * values are set in the rules, where they override the group's own:
 *   size       bytes copied per packet: IPv4 (20; options are dropped as
 *              malformed anyway) + TCP with options (<= 60) fit in 128,
 *              and nothing after the headers is read. Copying the whole
 *              packet would cost a memcpy of every FIN's data for nothing.
 *   threshold  records the kernel gathers into one datagram before sending
 *              it. Batching is the point: at ~13k closes/s a 64-record
 *              datagram means ~200 wakeups/s instead of one per FIN. The
 *              group's timeout (daemon: 10 ms) sends a partial datagram at
 *              low rates, so a record is never older than that when read;
 *              a client port reused within those 10 ms (conntrack keeps it
 *              in TIME_WAIT far longer) would see its new record recycled
 *              by the old FIN, which only shortens that record's life.
 */
export const TEARDOWN_LOG = { size: 128, threshold: 64, timeoutCentiseconds: 1 } as const;

/** The first rules of the queue chain: established traffic leaves it at once (see renderRules). */
export const ESTABLISHED_TCP_RETURN = '-p tcp --tcp-flags SYN,FIN,RST NONE -m conntrack --ctstate ESTABLISHED -j RETURN';
export const ESTABLISHED_UDP_RETURN = '-p udp -m conntrack --ctstate ESTABLISHED -j RETURN';
/**
 * Replies (server to client) matter to the daemon only when they reset a
 * flow: the SYN-ACK and the server's FIN leave here instead of walking
 * every service's and server's rules.
 */
export const REPLY_TCP_RETURN = '-p tcp --tcp-flags RST NONE -m conntrack --ctdir REPLY -j RETURN';

export interface RenderedRules {
  /** iptables-restore input (mangle and nat), flushing and refilling our chains only. */
  readonly restore: string;
  /** Rules per chain, for tests and `status`. */
  readonly byChain: Readonly<Record<string, readonly string[]>>;
  /** The chains (of CHAINS) this configuration needs; the others are removed. */
  readonly chains: readonly OwnedChain[];
}

/**
 * Whether some checkpoint can answer a SYN with a reset, i.e. the engine can
 * accept a SYN with REJECT_MARK (src/shaping/shaper.ts: a rejection is a
 * reset unless the checkpoint says `reject: drop`; a counter rejects only
 * with `action: reject`). Only then are the reject chains installed:
 * without them the filter hooks are not walked by every forwarded packet.
 * If this says no while the shaper can reset, a rejected SYN would go on
 * unrewritten: the two must change together.
 */
export function resetsClients(cfg: Pick<FrontConfig, 'checkpoints' | 'services'>): boolean {
  const all = [...cfg.checkpoints, ...cfg.services.flatMap((svc) => [...svc.checkpoints, ...svc.servers.flatMap((srv) => srv.checkpoints)])];
  return all.some((cp) => cp.reject === 'rst' && (cp.kind !== 'counter' || cp.action === 'reject'));
}

/** Servers that receive the fallback spread when the daemon is down: the active ones. */
export function fallbackServers(svc: FrontConfig['services'][number]): number[] {
  const out: number[] = [];
  svc.servers.forEach((s, i) => {
    if (s.state === 'active') out.push(i);
  });
  return out;
}

export function renderRules(cfg: FrontConfig): RenderedRules {
  const q = `-j NFQUEUE --queue-num ${cfg.queue}${cfg.failMode === 'bypass' ? ' --queue-bypass' : ''}`;
  // NFLOG is not terminating: the packet goes on through the chain (none
  // of the rules after it match a logged packet) and the kernel forwards
  // it at once. With the daemon down nobody reads the group and the copy
  // is discarded; the packet is unaffected either way.
  const log = `-j NFLOG --nflog-group ${cfg.nflogGroup} --nflog-size ${TEARDOWN_LOG.size} --nflog-threshold ${TEARDOWN_LOG.threshold}`;
  const queue: string[] = [];
  const dnat: string[] = [];
  const snat: string[] = [];
  // Every packet the front node forwards, in both directions, walks this
  // chain (mangle PREROUTING), and nearly all of them belong to established
  // flows the daemon never needs to see. One rule sends those back first:
  // an established TCP packet without SYN, FIN or RST, and an established
  // UDP packet, can match none of the rules below (they need SYN, FIN, RST,
  // or a state other than ESTABLISHED). Without it each data packet was
  // tested against every service's and server's rules (the interface match
  // of the server RST rules copies a name per packet): measured as the
  // largest kernel cost the front node added over plain DNAT. The second
  // rule does the same for replies without RST (SYN-ACK, the server's
  // FIN), and each service ends with a RETURN, so that a client's FIN
  // stops at its service's rules: per connection, the packets that pass
  // the first rule now test a handful of rules each instead of all.
  if (cfg.services.some((svc) => svc.protocol === 'tcp')) queue.push(ESTABLISHED_TCP_RETURN, REPLY_TCP_RETURN);
  if (cfg.services.some((svc) => svc.protocol === 'udp')) queue.push(ESTABLISHED_UDP_RETURN);
  cfg.services.forEach((svc, si) => {
    const m = `-d ${svc.vip}/32 -p ${svc.protocol} --dport ${svc.port}`;
    if (svc.protocol === 'tcp') {
      // Setup and teardown only. Queued (a verdict decides them): SYN, and
      // any packet the kernel has no flow for (NEW, or INVALID: the daemon
      // resumes a known record or drops and counts it, seed 000; a FIN or
      // RST among them is handled as below, then accepted). Logged (NFLOG:
      // the daemon only moves the record to its recycle list, nothing
      // waits for it): FIN and RST of known flows, from the client or
      // from a server. Order matters: a packet leaves the chain at its
      // first NFQUEUE rule, so none is both queued and logged.
      // `! --tcp-flags FIN,RST NONE` is "FIN or RST" in one rule. The
      // RETURN ends the walk of a packet to this service: no later rule
      // can match it (other services differ in VIP, port or protocol; the
      // server rules match replies, which never go to a VIP:port).
      queue.push(`${m} --tcp-flags SYN,ACK,FIN,RST SYN ${q}`);
      queue.push(`${m} -m conntrack --ctstate NEW,INVALID ${q}`);
      queue.push(`${m} ! --tcp-flags FIN,RST NONE ${log}`);
      queue.push(`${m} -j RETURN`);
      svc.servers.forEach((srv) => {
        queue.push(`-i ${cfg.lanInterface} -s ${srv.address}/32 -p tcp --sport ${srv.port ?? svc.port} --tcp-flags RST RST ${log}`);
      });
    } else {
      // UDP: the first packet of each flow; conntrack carries the rest until
      // the flow times out (no teardown packet exists).
      queue.push(`${m} -m conntrack --ctstate NEW ${q}`);
    }
    const newOnly = svc.protocol === 'tcp' ? ' --tcp-flags SYN,ACK,FIN,RST SYN' : '';

    const fb = fallbackServers(svc);
    if (cfg.failMode === 'bypass' && fb.length > 0) {
      // Reached only by SYNs the daemon did not mark (it is down): a static
      // spread by source address over the active servers.
      dnat.push(`${m} -m mark --mark 0${newOnly} -j HMARK --hmark-tuple src --hmark-mod ${fb.length} --hmark-offset ${hex(fallbackMark(si, 0))} --hmark-rnd 0x5175`);
      fb.forEach((srvIndex, slot) => {
        const srv = svc.servers[srvIndex];
        if (srv) dnat.push(`${m} -m mark --mark ${hex(fallbackMark(si, slot))} -j DNAT --to-destination ${srv.address}:${srv.port ?? svc.port}`);
      });
    }
    svc.servers.forEach((srv, i) => {
      dnat.push(`${m} -m mark --mark ${hex(serverMark(si, i))} -j DNAT --to-destination ${srv.address}:${srv.port ?? svc.port}`);
    });
    cfg.overflow.forEach((o, oi) => {
      const mark = hex(overflowMark(si, oi));
      dnat.push(`${m} -m mark --mark ${mark} -j DNAT --to-destination ${o.vip}:${svc.port}`);
      // Replies must come back through us: the other cluster answers our uplink.
      snat.push(`-d ${o.vip}/32 -p ${svc.protocol} --dport ${svc.port} -m mark --mark ${mark} -j SNAT --to-source ${cfg.uplinkAddress}`);
    });
  });

  // Kernel-side reset: no raw socket or packet crafting in the daemon, the
  // reset comes from the VIP with the right sequence numbers, and it costs
  // one mark match per forwarded packet, only while the daemon runs and
  // only if a checkpoint can reset (resetsClients).
  const reject = [`-p tcp -m mark --mark ${hex(REJECT_MARK)} -j REJECT --reject-with tcp-reset`];
  const chains: OwnedChain[] = [CHAINS.queue, CHAINS.dnat, CHAINS.snat];
  const byChain: Record<string, readonly string[]> = { [CHAINS.queue.chain]: queue, [CHAINS.dnat.chain]: dnat, [CHAINS.snat.chain]: snat };
  if (resetsClients(cfg)) {
    chains.push(CHAINS.rejectForward, CHAINS.rejectInput);
    byChain[CHAINS.rejectForward.chain] = reject;
    byChain[CHAINS.rejectInput.chain] = reject;
  }
  const lines: string[] = [];
  for (const table of ['mangle', 'nat', 'filter'] as const) {
    const inTable = chains.filter((c) => c.table === table);
    if (inTable.length === 0) continue;
    lines.push(`*${table}`);
    for (const c of inTable) {
      // Declaring a chain in iptables-restore creates it if absent and
      // flushes it if present; nothing else in the table is touched.
      lines.push(`:${c.chain} - [0:0]`);
      for (const r of byChain[c.chain] ?? []) lines.push(`-A ${c.chain} ${r}`);
    }
    lines.push('COMMIT');
  }
  return { restore: lines.join('\n') + '\n', byChain, chains };
}
