/**
 * The iptables rules `sluice front` owns, rendered from its configuration,
 * installed atomically per table with iptables-restore --noflush, and
 * removed by removeRules (iptables.ts). Only the SLUICE_* chains and the
 * single jump into each are ever touched: other rules in the namespace are
 * left alone.
 *
 * Since sluice has its own nftables table (nft.ts: classification, DNAT by
 * mark, fallback, VIP guard), only what nft cannot do here stays in
 * iptables: the NFQUEUE rule (nft's `queue` statement is not available on
 * our kernels), one rule matching the QUEUE_MARK that the nft classify
 * chain sets, and the checkpoints' REJECT (kept with the filter table's
 * xt REJECT, as before).
 *
 * What each rule is for, and what was verified on this kernel:
 * docs/front-node-design.md.
 */
import { familyOf, synproxyOf, type FrontConfig } from './config.ts';
import { QUEUE_MARK, REJECT_MARK, hex } from './marks.ts';
import { SYNPROXY_MARKS, synproxyGroups, synproxyMark } from './synproxy-groups.ts';

export const CHAINS = {
  // The jump tests QUEUE_MARK, set by sluice's nft classify chain (which
  // runs before iptables' mangle hook): only packets the daemon must decide
  // enter the chain; its one rule queues them.
  queue: { table: 'mangle', chain: 'SLUICE_QUEUE', hook: 'PREROUTING', jumpIf: ['-m', 'mark', '--mark', hex(QUEUE_MARK)] },
  // The same for the SYN that SYNPROXY sends (client -> VIP) once a client
  // completed the cookie handshake: it is local output, classified by the
  // nft out_classify chain (nft.ts). Installed only with a SYNPROXY service.
  queueOut: { table: 'mangle', chain: 'SLUICE_QUEUE_OUT', hook: 'OUTPUT', jumpIf: ['-m', 'mark', '--mark', hex(QUEUE_MARK)] },
  // Checkpoint rejections (src/shaping): the daemon accepts the SYN with
  // REJECT_MARK and the kernel answers it with a TCP reset. REJECT exists
  // only in the filter table; a VIP is forwarded (FORWARD) or, if it is on
  // one of our interfaces, local (INPUT).
  // The jump itself tests the mark: every forwarded packet passes this
  // hook, and only a rejected SYN carries the mark, so the rest pay one
  // mark comparison instead of a jump into the chain and back.
  rejectForward: { table: 'filter', chain: 'SLUICE_REJECT', hook: 'FORWARD', jumpIf: ['-m', 'mark', '--mark', hex(REJECT_MARK)] },
  rejectInput: { table: 'filter', chain: 'SLUICE_REJECT_IN', hook: 'INPUT', jumpIf: ['-m', 'mark', '--mark', hex(REJECT_MARK)] },
  // ip6tables only: SYN cookies for IPv6 services. The ip6 nft table marks
  // a packet for SYNPROXY group i with synproxyMark(i) in its synproxy_in
  // chain (an engaged service's untracked SYN or INVALID cookie ACK); one
  // rule per group answers it with ip6tables' SYNPROXY target, which
  // checks the IPv6 checksum as IPv6 (nft's synproxy does not on our
  // kernels: synproxy-groups.ts). Installed only with an IPv6 SYNPROXY
  // service. The jump tests the specials' mark prefix, which only a
  // packet of ours carries.
  synproxy6: { table: 'filter', chain: 'SLUICE_SYNPROXY', hook: 'INPUT', jumpIf: ['-m', 'mark', '--mark', `${hex(SYNPROXY_MARKS.value)}/${hex(SYNPROXY_MARKS.mask)}`] },
} as const satisfies Record<string, OwnedChain>;

/**
 * Chains earlier versions installed and this one does not (the nat side is
 * in the nft table now; the queue chain's jump used to be unconditional).
 * Ours to remove: after a kill -9 of an old daemon they are still there.
 */
export const LEGACY_CHAINS: readonly OwnedChain[] = [
  { table: 'nat', chain: 'SLUICE_DNAT', hook: 'PREROUTING' },
  { table: 'nat', chain: 'SLUICE_SNAT', hook: 'POSTROUTING' },
];

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

export interface RenderedRules {
  /** iptables-restore input (mangle and filter), flushing and refilling our chains only. */
  readonly restore: string;
  /** ip6tables-restore input: `restore`'s chains plus the ip6tables-only ones (`chains6`). */
  readonly restore6: string;
  /** Rules per chain (both tools' chains), for tests and `status`. */
  readonly byChain: Readonly<Record<string, readonly string[]>>;
  /** The chains (of CHAINS) this configuration needs in iptables; the others are removed. */
  readonly chains: readonly OwnedChain[];
  /** The same for ip6tables: `chains` plus SLUICE_SYNPROXY with an IPv6 SYNPROXY service. */
  readonly chains6: readonly OwnedChain[];
  /**
   * Whether ip6tables gets chains too (the configuration has an IPv6
   * service): the same chains and rules as iptables (they match the mark
   * the family's own nft table sets, QUEUE_MARK, REJECT_MARK, never an
   * address, so they read the same in both families; one queue and one
   * daemon take both), plus SLUICE_SYNPROXY with an IPv6 SYNPROXY service.
   */
  readonly ipv6: boolean;
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

/**
 * The iptables part of the rules: the queue chain (one NFQUEUE rule for
 * QUEUE_MARK) and, when a checkpoint can reset, the reject chains. The
 * rest is sluice's nft table (nft.ts), installed beside it.
 */
export function renderRules(cfg: FrontConfig): RenderedRules {
  // With --queue-bypass, a packet nobody reads (daemon away) goes on with
  // QUEUE_MARK: the nft fallback DNATs a SYN by it, the VIP guard drops
  // the rest (nft.ts).
  const queue = [`-j NFQUEUE --queue-num ${String(cfg.queue)}${cfg.failMode === 'bypass' ? ' --queue-bypass' : ''}`];
  // Kernel-side reset: no raw socket or packet crafting in the daemon, the
  // reset comes from the VIP with the right sequence numbers, and it costs
  // one mark match per forwarded packet, only while the daemon runs and
  // only if a checkpoint can reset (resetsClients).
  const reject = [`-p tcp -m mark --mark ${hex(REJECT_MARK)} -j REJECT --reject-with tcp-reset`];
  const chains: OwnedChain[] = [CHAINS.queue];
  const byChain: Record<string, readonly string[]> = { [CHAINS.queue.chain]: queue };
  if (cfg.services.some((svc) => synproxyOf(cfg, svc) !== undefined)) {
    chains.push(CHAINS.queueOut);
    byChain[CHAINS.queueOut.chain] = queue;
  }
  if (resetsClients(cfg)) {
    chains.push(CHAINS.rejectForward, CHAINS.rejectInput);
    byChain[CHAINS.rejectForward.chain] = reject;
    byChain[CHAINS.rejectInput.chain] = reject;
  }
  const chains6 = [...chains];
  const groups6 = synproxyGroups(cfg, 'ip6');
  if (groups6.length > 0) {
    chains6.push(CHAINS.synproxy6);
    // -p tcp: the SYNPROXY target refuses a rule without it.
    byChain[CHAINS.synproxy6.chain] = groups6.map((g, i) => `-p tcp -m mark --mark ${hex(synproxyMark(i))} ${g.target}`);
  }
  return { restore: restoreOf(chains, byChain), restore6: restoreOf(chains6, byChain), byChain, chains, chains6, ipv6: cfg.services.some((svc) => familyOf(svc.vip) === 6) };
}

/** iptables-restore (or ip6tables-restore) input declaring `chains` with their rules. */
function restoreOf(chains: readonly OwnedChain[], byChain: Readonly<Record<string, readonly string[]>>): string {
  const lines: string[] = [];
  for (const table of ['mangle', 'filter'] as const) {
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
  return lines.join('\n') + '\n';
}
