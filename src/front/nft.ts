/**
 * sluice's own nftables table, `table ip sluice`: classification, DNAT by
 * mark, the daemon-down fallback, the overflow SNAT and the VIP guard.
 * Rendered from the configuration (and the usable servers, for the
 * fallback), loaded with one `nft -f` transaction that deletes and
 * recreates the table (atomic: a packet sees the old table or the new one),
 * and never touching another table. Only NFQUEUE stays an iptables rule
 * (rules.ts): nft's own `queue` statement is not available on our kernels.
 *
 * Per packet, nothing grows with the number of services or servers: each
 * step is one set or map lookup (hash).
 *
 *   classify   (prerouting, before iptables' mangle) established traffic
 *              returns at once, as the first rules of the old iptables
 *              queue chain did; a packet to a service (set `services`,
 *              keyed VIP . protocol . port) goes to `to_service`; a
 *              server's RST (a reply from the LAN interface in a flow
 *              whose conntrack mark is one of our decisions) is logged to
 *              the NFLOG group; a TCP packet from the LAN to be forwarded
 *              that has no flow (no NAT binding: a pair's new master
 *              before its flows are committed) is dropped and counted
 *              (counter STRAY_COUNTER), never sent on un-NATed.
 *   to_service a SYN, a new UDP flow, or a TCP packet the kernel has no
 *              flow for gets QUEUE_MARK (the iptables NFQUEUE rule matches
 *              it); a FIN or RST of a known flow is logged to the NFLOG
 *              group (the daemon recycles its record; nothing waits).
 *   nat_pre    (dstnat - 1: before any other nat rule) DNAT by the verdict's
 *              mark: one lookup in map `targets` (mark -> address . port).
 *              The mark is copied to the flow's conntrack mark (once per
 *              connection: nat chains see a flow's first packet only), so
 *              `conntrack -L` shows each flow's decision.
 *              A SYN or new UDP flow still carrying QUEUE_MARK (the daemon
 *              is away, or the fail-open queue was full) is DNATed by
 *              map `fallback`: jhash of the source over FALLBACK_SLOTS
 *              slots per service, filled with the usable servers
 *              (fallback.ts rewrites the elements when they change),
 *              counted by counter FALLBACK_COUNTER.
 *   vip_guard  (dstnat + 1: after the DNAT) a packet whose destination is
 *              still a VIP got no DNAT decision: dropped and counted
 *              (counter GUARD_COUNTER). Without it such a packet would be
 *              routed toward the VIP's route, i.e. back out the uplink, and
 *              loop (issue 20 part 5). A REJECT_MARK SYN is let through: the
 *              filter table's REJECT answers it.
 *   nat_post   SNAT of overflowed connections to the uplink address (the
 *              other cluster must answer us).
 *
 * SYN cookies (services with `synproxy` auto or on; see
 * docs/front-node-design.md, "SYN cookies in front of the decision"). Set
 * `syn_seen` holds every such service (VIP . port) with a counter per
 * element; sets `synproxied` and `synproxied_N` hold those whose cookies
 * are engaged now (mode on: always; auto: while under a SYN flood, written
 * by synproxy-auto.ts), so for the others every rule below misses:
 *   synproxy_raw  (raw) a client's SYN is counted in `syn_seen`; if its
 *                 service is engaged, it is not tracked: no conntrack entry.
 *                 classify returns it and the client's cookie ACK (INVALID:
 *                 nf_conntrack_tcp_loose=0) at once, vip_guard lets both
 *                 on, and the VIP's local route delivers them to INPUT.
 *   synproxy_in   (input) SYNPROXY answers the SYN with a cookie and, on a
 *                 valid cookie ACK, sends its own SYN (client -> VIP) in
 *                 OUTPUT; anything else to a VIP here is dropped and
 *                 counted by the guard's counter (nothing local answers a
 *                 VIP, nothing is forwarded unsteered). In the ip6 table
 *                 the SYNPROXY is ip6tables' target (synproxy-groups.ts):
 *                 synproxy_in marks the packet for it (rules.ts
 *                 SLUICE_SYNPROXY, filter INPUT), and synproxy_left
 *                 (after filter INPUT) drops and counts what it leaves.
 *   out_classify  (output) that SYN goes to syn_decide, the one chain that
 *                 decides how a SYN gets its decision (today: QUEUE_MARK,
 *                 the iptables mangle OUTPUT rule queues it; the daemon
 *                 decides it as any SYN: source the client, destination
 *                 the VIP).
 *   nat_out       (output, before any other nat rule) the DNAT by mark and
 *                 the conntrack mark copy of nat_pre, and its fallback.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { runOffLoop } from './run-off-loop.ts';
import { CommandFailedError } from '../errors/errors.ts';
import { argvIn, runCommand } from '../util/exec.ts';
import { familyOf, type FrontConfig } from './config.ts';
import { QUEUE_MARK, REJECT_MARK, hex, overflowMark, serverMark } from './marks.ts';
import { TEARDOWN_LOG } from './rules.ts';
import { synproxyGroups, synproxyMark, type SynproxyGroup } from './synproxy-groups.ts';

export { synproxyGroups, type SynproxyGroup };
import { SCHEDULE_SLOTS, configuredSchedule, kernelChain, kernelChainRules, scheduleElements, scheduleLayout, type ScheduleTargets, type ScheduledService } from './kernel-schedule.ts';

export const NFT_FAMILY = 'ip';
/**
 * The families of our tables: `ip sluice` for IPv4 services (always
 * installed), `ip6 sluice` for IPv6 ones (installed when the configuration
 * has one). Two tables rendered by the same code rather than one `inet`
 * table: the IPv4 table stays what it was, rule for rule (an upgrade
 * changes nothing for IPv4-only nodes), and each table's sets keep one
 * address type (docs/front-node-design.md, "IPv6 rules").
 */
export type NftFamily = 'ip' | 'ip6';
/** The family of a service's table. */
export function tableOf(svc: { readonly vip: string }): NftFamily {
  return familyOf(svc.vip) === 6 ? 'ip6' : 'ip';
}
/** Whether the configuration has an IPv6 service (then the ip6 table and the ip6tables chains exist). */
export function hasIPv6(cfg: Pick<FrontConfig, 'services'>): boolean {
  return cfg.services.some((s) => familyOf(s.vip) === 6);
}
export const NFT_TABLE = 'sluice';
/** The named counter of the VIP guard's drops (`nft list counter ip sluice vip_guard_drops`). */
export const GUARD_COUNTER = 'vip_guard_drops';
/**
 * The named counter of the fallback's DNATs (`nft list counter ip sluice
 * fallback_flows`): new flows (a SYN, a new UDP flow) the kernel sent to a
 * server with no daemon's verdict. It starts at zero with every install
 * (start, reload, repair: the table is replaced); the kernel keeps it, so
 * it shows what happened while no daemon was bound, which no daemon can.
 */
export const FALLBACK_COUNTER = 'fallback_flows';
/**
 * The named counter of the stray LAN packets dropped (`nft list counter ip
 * sluice stray_replies`, and ip6): TCP from the LAN, to be forwarded, that
 * neither belongs to a flow the kernel tracks nor opens one (see classify).
 * Like FALLBACK_COUNTER it starts at zero with every install.
 */
export const STRAY_COUNTER = 'stray_replies';
/**
 * Fallback slots per service: the source hash picks one, each holds a
 * usable server. Fixed, so that a change of the usable servers is an
 * element update, never a rule change. With more usable servers than
 * slots, the fallback covers FALLBACK_SLOTS of them.
 */
export const FALLBACK_SLOTS = 256;
/** jhash seed of the fallback spread (any constant; the same in every rendering, so a source keeps its slot). */
const FALLBACK_SEED = 0x5175;

/**
 * Above this many fallback elements a whole-table install (start, repair, a
 * change of the table's chains) declares the fallback map empty, and the
 * fallback writer (fallback.ts) fills it right after, off the event loop:
 * the map is used only while no daemon is bound, and the daemon that just
 * installed the table is bound. Measured with 1,000 services (256k
 * elements): the table with its fallback 3.4 s of `nft -f`, without 0.6 s;
 * the writer's fill 2.8 s in the background. Below, the map is filled in
 * the same transaction, as before.
 */
export const FALLBACK_INLINE_MAX = 16_384;

/**
 * Above this many kernel-schedule slots (both tables together) a
 * whole-table install declares map `schedule` empty, with every `k_<i>`
 * chain in place, and the schedule writer (kernel-schedule.ts) fills the
 * slots right after, off the event loop. Until then a scheduled service's
 * lookup misses and its SYNs are queued: the daemon that just installed
 * the table decides them, so nothing is unsteered. Measured with 1,000
 * services x 100 servers (100k slots): the install 2.7 s with its slots
 * against 0.8 s without (the queue path's); nft 1.0.6 takes ~2 s for the
 * 100k elements whenever they are written, and ~12 ms per rule that names
 * the map once it holds them, so chains always go before elements.
 */
export const SCHEDULE_INLINE_MAX = 16_384;

/** The usable servers of each service (by service index), for the fallback: address and port. */
export type FallbackSpread = readonly (readonly (readonly [address: string, port: number])[])[];

/** The active servers of the configuration (start, reload: before any health is known). */
export function configuredSpread(cfg: Pick<FrontConfig, 'services'>): FallbackSpread {
  return cfg.services.map((svc) => svc.servers.filter((s) => s.state === 'active').map((s) => [s.address, s.port ?? svc.port] as const));
}

/** The fallback map's elements (`key : value`) for `spread`: slot k of a service holds usable server k mod n. */
export function fallbackElements(cfg: Pick<FrontConfig, 'services'>, spread: FallbackSpread, fam?: NftFamily): string[] {
  const out: string[] = [];
  cfg.services.forEach((svc, si) => {
    if (fam !== undefined && tableOf(svc) !== fam) return;
    const usable = spread[si] ?? [];
    if (usable.length === 0) return;
    for (let k = 0; k < FALLBACK_SLOTS; k++) {
      const [addr, port] = usable[k % usable.length] ?? usable[0] ?? ['0.0.0.0', 0];
      out.push(`${svc.vip} . ${svc.protocol} . ${String(svc.port)} . ${String(k)} : ${addr} . ${String(port)}`);
    }
  });
  return out;
}

/** How many elements fallbackElements(cfg, spread) returns, without building them. */
export function fallbackCount(cfg: Pick<FrontConfig, 'services'>, spread: FallbackSpread, fam?: NftFamily): number {
  let n = 0;
  cfg.services.forEach((svc, si) => {
    if (fam !== undefined && tableOf(svc) !== fam) return;
    if ((spread[si]?.length ?? 0) > 0) n += FALLBACK_SLOTS;
  });
  return n;
}

/** Whether this configuration has a daemon-down fallback (only with --queue-bypass: else a queue without reader drops). */
export function hasFallback(cfg: Pick<FrontConfig, 'failMode'>): boolean {
  return cfg.failMode === 'bypass';
}

export interface RenderedNft {
  /** The table's family (`table ip sluice` or `table ip6 sluice`). */
  readonly family: NftFamily;
  /**
   * The ip6 table, when the configuration has an IPv6 service (rendered
   * beside this, the ip table; installed in the same transaction; the
   * element diff covers both).
   */
  readonly v6?: RenderedNft;
  /** The `nft -f` script: creates, deletes and recreates our table in one transaction (built when read: megabytes for a large table). */
  readonly script: string;
  /**
   * A fingerprint of `structure` (SHA-256, 16 hex digits), written as the
   * table's comment (`comment "sluice structure TAG"`): the kernel's table
   * tells which rendering's structure it has.
   */
  readonly structureTag: string;
  /**
   * Over a table of ours whose comment names this rendering's structure
   * (`layout`, just read: nft-netlink.ts readTableLayout), the script that
   * gives it this rendering's contents without replacing it: see
   * keptScript. Undefined when the table is absent or of another
   * structure, or the kernel schedule is not written inline (its chains
   * would cost nft seconds to rewrite over a filled map).
   */
  kept(layout: readonly LayoutItem[]): string | undefined;
  /**
   * The table without its elements and counter values: two renderings with
   * the same structure differ only in set and map contents, and the second
   * can be installed over the first by `update` alone.
   */
  readonly structure: string;
  /** The kernel schedule's per-service chains (outside `structure`: `update` rewrites them; chains of an older rendering that this one lacks are deleted after it). */
  readonly kernelChains: readonly string[];
  /** Each kernel-schedule chain's rules (elementDiffScript rewrites those that changed). */
  readonly kernelRules: Readonly<Record<string, readonly string[]>>;
  /**
   * The `nft -f` script that replaces every set's and map's elements in
   * one transaction (flush and add), leaving chains, hooks and counters in
   * place. Valid only over a table of the same `structure`. Built when
   * read; installs use elementDiffScript (only what changed).
   */
  readonly update: string;
  /**
   * The elements rendered per set and map (`key : value` for a map), as
   * elementDiffScript compares them. The fallback map's are those of the
   * whole-table script: none when it is deferred (fallbackInline false).
   */
  readonly sets: Readonly<Record<string, readonly string[]>>;
  /** The lines that set the `synproxied*` sets to the engaged state rendered (none without a SYN-cookie service). */
  readonly synproxiedLines: readonly string[];
  /** Whether `script` fills the fallback map (else the fallback writer does, after the install: FALLBACK_INLINE_MAX). */
  readonly fallbackInline: boolean;
  /** What `script` leaves in the fallback map (empty when deferred). */
  readonly fallbackHeld: FallbackHeld;
  /**
   * Whether `script` fills map `schedule` (else it declares it empty and
   * the schedule writer fills it after the install: SCHEDULE_INLINE_MAX).
   * `sets.schedule` is the rendered schedule either way (what a diff
   * install compares with when the writer's state is unknown).
   */
  readonly scheduleInline: boolean;
  /** The table's declaration alone (tests, docs). */
  readonly table: string;
  /** Elements per set or map (tests, the rule check's counts). */
  readonly elements: Readonly<Record<string, number>>;
  /** Lines per chain (its hook line and rules), as `nft list` prints them (the rule check's read-back). */
  readonly chainSizes: Readonly<Record<string, number>>;
}

function elements(list: readonly string[]): string {
  return list.length === 0 ? '' : ` elements = { ${list.join(', ')} }`;
}

/**
 * Renders our table. `guard` carries the guard counter's last known values
 * into the new table, so a reload or repair (which replaces the table)
 * does not set it back to zero.
 */
export function renderNft(cfg: FrontConfig, spread: FallbackSpread, guard: { packets: number; bytes: number } = { packets: 0, bytes: 0 }, schedule?: ScheduleTargets, engaged: ReadonlySet<string> = NONE_ENGAGED, guard6: { packets: number; bytes: number } = { packets: 0, bytes: 0 }): RenderedNft {
  const targets = schedule ?? configuredSchedule(cfg);
  // One decision for both tables: the writer fills every service's slots or none.
  let slots = 0;
  for (const l of scheduleLayout(cfg)) for (const t of targets[l.index] ?? []) if (t >= 0) slots++;
  const inline = slots <= SCHEDULE_INLINE_MAX;
  const v6 = hasIPv6(cfg) ? renderTable('ip6', cfg, spread, guard6, targets, inline, engaged) : undefined;
  return renderTable('ip', cfg, spread, guard, targets, inline, engaged, v6);
}

/**
 * One table: `ip` with the IPv4 services, `ip6` with the IPv6 ones (their
 * marks keep the service's index in the whole configuration, so a verdict
 * mark names one service whatever its family). The kernel SYN path is
 * IPv4's only (config.ts checkFamilies): the ip6 table's kernel and
 * schedule maps stay empty. SYN cookies are per table: each has the
 * SYNPROXY part of its own family's capable services; the ip6 table's
 * cookies are answered by ip6tables' SYNPROXY target behind a mark
 * (synproxy-groups.ts says why).
 */
function renderTable(fam: NftFamily, cfg: FrontConfig, spread: FallbackSpread, guard: { packets: number; bytes: number }, targets0: ScheduleTargets, scheduleInline: boolean, engaged: ReadonlySet<string>, v6?: RenderedNft): RenderedNft {
  const mine = (svc: { readonly vip: string }): boolean => tableOf(svc) === fam;
  const ipx = fam;
  const addrType = fam === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
  const layout = tableLayout(cfg, fam);
  const kernel = layout.map((l) => {
    const svc = cfg.services[l.index];
    return `${svc?.vip ?? ''} . tcp . ${String(svc?.port ?? 0)} : goto ${kernelChain(l.index)}`;
  });
  const { elements: sched, rules: kernelRules } = scheduleParts(cfg, layout, targets0);
  const ours = cfg.services.filter(mine);
  const vips = [...new Set(ours.map((s) => s.vip))];
  const services = ours.map((s) => `${s.vip} . ${s.protocol} . ${String(s.port)}`);
  const targets: string[] = [];
  const overflow: string[] = [];
  cfg.services.forEach((svc, si) => {
    if (!mine(svc)) return;
    svc.servers.forEach((srv, i) => targets.push(`${hex(serverMark(si, i))} : ${srv.address} . ${String(srv.port ?? svc.port)}`));
    cfg.overflow.forEach((o, oi) => {
      // An IPv6 service overflows to the other cluster's IPv6 VIP (config.ts requires it).
      const to = fam === 'ip' ? o.vip : o.vip6;
      if (to === undefined) return;
      const mark = hex(overflowMark(si, oi));
      targets.push(`${mark} : ${to} . ${String(svc.port)}`);
      overflow.push(mark);
    });
  });
  const fbCount = hasFallback(cfg) ? fallbackCount(cfg, spread, fam) : 0;
  const fallbackInline = fbCount <= FALLBACK_INLINE_MAX;
  const fb = fallbackInline && fbCount > 0 ? fallbackElements(cfg, spread, fam) : [];
  // SYN cookies: services grouped by options (synproxyGroups); the sets
  // hold the services whose cookies are engaged now (mode on, or auto
  // under a flood: `engaged`), syn_seen every capable one (the counts).
  const groups = synproxyGroups(cfg, fam);
  const groupEls = groups.map((g) => synproxiedOf(g, engaged));
  const synproxy = groupEls.flat();
  const seen = groups.flatMap((g) => g.services.map((x) => x.key));
  // Without a SYNPROXY-capable service none of its sets, rules or chains
  // exist: the table is the one of before, and no packet pays for the
  // lookups. With one, they exist whether or not cookies are engaged now
  // (engaging is an element update, never a rule change).
  const sp = <T>(lines: T[]): T[] => (seen.length > 0 ? lines : []);
  const log = teardownLog(cfg);
  const q = hex(QUEUE_MARK);
  // The per-service chains of the kernel schedule, with their rules (name, rules).
  const kernelChains = Object.entries(kernelRules);
  const synOnly = 'tcp flags & (syn | ack | fin | rst) == syn';
  const lines = [
    `table ${fam} ${NFT_TABLE} {`,
    `  counter ${GUARD_COUNTER} { packets ${String(guard.packets)} bytes ${String(guard.bytes)} }`,
    `  counter ${FALLBACK_COUNTER} { packets 0 bytes 0 }`,
    `  counter ${STRAY_COUNTER} { packets 0 bytes 0 }`,
    `  set vips { type ${addrType};${elements(vips)} }`,
    `  set services { type ${addrType} . inet_proto . inet_service;${elements(services)} }`,
    `  set overflow_marks { type mark;${elements(overflow)} }`,
    `  map targets { type mark : ${addrType} . inet_service;${elements(targets)} }`,
    `  map kernel { type ${addrType} . inet_proto . inet_service : verdict;${elements(kernel)} }`,
    `  map schedule { typeof numgen inc mod ${String(SCHEDULE_SLOTS)} : meta mark;${elements(sched)} }`,
    `  map fallback { typeof ${ipx} daddr . meta l4proto . th dport . numgen inc mod ${String(FALLBACK_SLOTS)} : ${ipx} daddr . th dport;${elements(fb)} }`,
    ...sp([`  set ${SYN_SEEN_SET} { type ${addrType} . inet_service; counter;${elements(seen)} }`]),
    ...sp([`  set synproxied { type ${addrType} . inet_service;${elements(synproxy)} }`]),
    ...groups.map((_, i) => `  set synproxied_${String(i)} { type ${addrType} . inet_service;${elements(groupEls[i] ?? [])} }`),
    '  chain classify {',
    '    type filter hook prerouting priority mangle - 10; policy accept;',
    // Every forwarded packet passes here; nearly all belong to established
    // flows the daemon never needs to see (no SYN, FIN or RST; an
    // established UDP flow; a reply without RST): they leave first.
    '    tcp flags & (syn | fin | rst) == 0 ct state established return',
    '    meta l4proto udp ct state established return',
    '    ct direction reply tcp flags & rst == 0 return',
    // A server's TCP packet the kernel has no flow for (INVALID; or, with
    // nf_conntrack_tcp_loose=1, NEW without a SYN: a mid-stream pickup) has
    // no NAT binding: forwarded, it would reach the client from the
    // server's own address, the client's kernel would answer it with a RST
    // to that address, and the RST (no flow either) would reach the server
    // and kill its end of the connection. That is what a pair's new master
    // did with the servers' retransmissions that arrived after keepalived
    // moved the LAN gateway and before the notify hook had committed the
    // replicated flows: the client then got a reset, or a stall, once the
    // flow was committed. Dropped (and counted) instead, the retransmission
    // that follows the commit finds the flow. Only forwarded packets: the
    // node's own TCP peers on the LAN (agents, health checks) are its
    // sockets' business.
    `    iifname ${JSON.stringify(cfg.lanInterface)} tcp flags & (syn | ack) != syn ct state invalid,new fib daddr type != local counter name ${STRAY_COUNTER} drop`,
    // SYNPROXY's part (synproxy_raw untracked the SYN; the cookie ACK is
    // INVALID): neither is queued, SYNPROXY in INPUT answers them.
    ...sp([`    ${ipx} daddr . tcp dport @synproxied ct state invalid,untracked return`]),
    `    ${ipx} daddr . meta l4proto . th dport @services goto to_service`,
    // A server's reset: a reply from the LAN in a flow the daemon decided
    // (its conntrack mark is a decision of ours: nat_pre copies it).
    `    iifname ${JSON.stringify(cfg.lanInterface)} ct direction reply ct mark & 0xff000000 == 0x51000000 ct mark != ${q} tcp flags & rst == rst ${log}`,
    '  }',
    '  chain to_service {',
    // Queued (a verdict decides them): a SYN, a new UDP flow, and any TCP
    // packet the kernel has no flow for (NEW, or INVALID: the daemon
    // resumes a known record or drops and counts it; a FIN or RST among
    // them recycles a live record or is dropped). Logged: FIN and RST of
    // known flows. The order makes each packet either queued or logged.
    `    ${synOnly} goto syn_decide`,
    `    meta l4proto udp ct state new meta mark set ${q} return`,
    `    meta l4proto tcp ct state new,invalid meta mark set ${q} return`,
    `    tcp flags & (fin | rst) != 0 ${log}`,
    '  }',
    // One chain per scheduled service: its own numgen counter walks its
    // slots (offset..offset+slots). The SYN is logged for the daemon's
    // record; an empty slot misses the map and falls to the queue.
    ...kernelChains.flatMap(([name, rules]) => [`  chain ${name} {`, ...rules.map((r) => `    ${r}`), '  }']),
    '  chain nat_pre {',
    '    type nat hook prerouting priority dstnat - 1; policy accept;',
    `    meta mark & 0xff000000 == 0x51000000 meta l4proto { tcp, udp } ct mark set meta mark dnat ${ipx} to meta mark map @targets`,
    ...(fbCount > 0
      ? [
          `    meta mark ${q} ${synOnly} counter name ${FALLBACK_COUNTER} dnat ${ipx} to ${ipx} daddr . meta l4proto . th dport . jhash ${ipx} saddr mod ${String(FALLBACK_SLOTS)} seed ${hex(FALLBACK_SEED)} map @fallback`,
          `    meta mark ${q} meta l4proto udp counter name ${FALLBACK_COUNTER} dnat ${ipx} to ${ipx} daddr . meta l4proto . th dport . jhash ${ipx} saddr mod ${String(FALLBACK_SLOTS)} seed ${hex(FALLBACK_SEED)} map @fallback`,
        ]
      : []),
    '  }',
    '  chain vip_guard {',
    '    type filter hook prerouting priority dstnat + 1; policy accept;',
    ...sp([`    ${ipx} daddr . tcp dport @synproxied ct state invalid,untracked return`]),
    `    meta mark != ${hex(REJECT_MARK)} ${ipx} daddr @vips counter name ${GUARD_COUNTER} drop`,
    '  }',
    // syn_decide: every SYN the node decides gets its decision through this
    // one chain: a client's SYN from to_service (prerouting), and for a
    // SYNPROXY service the SYN the kernel sends once the client completed
    // the cookie handshake (out_classify, output).
    // A first SYN (its conntrack entry not confirmed yet: not a
    // retransmit, whose flow conntrack already carries) to a service on the
    // kernel schedule takes its mark from the schedule (kernel-schedule.ts).
    // Only a SYN the daemon's parser would take (no IP options, no
    // reserved flag, not a fragment: src/packet/ipv4.ts): the others go on
    // to the queue, where they are dropped and counted as malformed.
    '  chain syn_decide {',
    // IPv6: only a SYN with TCP right after the fixed header (no
    // extension header, so no fragment either); one with extension
    // headers goes on to the queue, where the daemon's parser takes it.
    fam === 'ip'
      ? '    ip hdrlength 5 ip frag-off & 0xbfff == 0 ct status & confirmed == 0 ip daddr . meta l4proto . th dport vmap @kernel'
      : '    ip6 nexthdr tcp ct status & confirmed == 0 ip6 daddr . meta l4proto . th dport vmap @kernel',
    `    meta mark set ${q}`,
    // A retransmitted SYN (its flow confirmed: the first one left the
    // node) whose server has not answered (no reply seen): a copy for the
    // passive check (health.unansweredLimit). Its mark, QUEUE_MARK, tells
    // it from the schedule's copies, which carry a decision. A SYN-ACK
    // lost toward the client leaves the flow with a reply seen: not copied.
    `    ct status & (confirmed | seen-reply) == confirmed ${log}`,
    '  }',
    ...sp([
    '  chain synproxy_raw {',
    '    type filter hook prerouting priority raw; policy accept;',
    // Counted first, engaged or not: the daemon's reading of each
    // service's SYN rate (synproxy-auto.ts) must not depend on cookies.
    `    ${synOnly} ${ipx} daddr . tcp dport @${SYN_SEEN_SET}`,
    `    ${synOnly} ${ipx} daddr . tcp dport @synproxied notrack`,
    '  }',
    '  chain synproxy_in {',
    // Before the filter table's INPUT (a REJECT_MARK SYN of another
    // service passes on to SLUICE_REJECT_IN).
    '    type filter hook input priority filter - 10; policy accept;',
    // IPv4: nft's synproxy answers. IPv6: the packet gets its group's mark
    // and goes on to ip6tables' filter INPUT, where SLUICE_SYNPROXY's
    // SYNPROXY target answers it (synproxy-groups.ts: nft's synproxy
    // checks an IPv6 checksum as IPv4); synproxy_left drops what that
    // target leaves.
    ...groups.map((g, i) => `    ${ipx} daddr . tcp dport @synproxied_${String(i)} ct state invalid,untracked ${fam === 'ip' ? g.stmt : `meta mark set ${hex(synproxyMark(i))} accept`}`),
    `    meta mark != ${hex(REJECT_MARK)} ${ipx} daddr @vips counter name ${GUARD_COUNTER} drop`,
    '  }',
    // After ip6tables' filter INPUT (priority filter): a marked packet that
    // SYNPROXY neither answered nor dropped (neither a SYN nor an ACK: a
    // FIN, RST or data of no flow) reached a VIP undecided, as the guard
    // drops and counts in synproxy_in for IPv4.
    ...(fam === 'ip6' && groups.length > 0
      ? ['  chain synproxy_left {', '    type filter hook input priority filter + 10; policy accept;', `    meta mark ${hex(synproxyMark(0))}${groups.length > 1 ? `-${hex(synproxyMark(groups.length - 1))}` : ''} counter name ${GUARD_COUNTER} drop`, '  }']
      : []),
    '  chain out_classify {',
    '    type filter hook output priority mangle - 10; policy accept;',
    `    ${synOnly} ${ipx} daddr . tcp dport @synproxied goto syn_decide`,
    '  }',
    '  chain nat_out {',
    // dstnat - 1 (nft accepts the name in prerouting only).
    '    type nat hook output priority -101; policy accept;',
    `    meta mark & 0xff000000 == 0x51000000 meta l4proto tcp ct mark set meta mark dnat ${ipx} to meta mark map @targets`,
    ...(fbCount > 0 ? [`    meta mark ${q} ${synOnly} counter name ${FALLBACK_COUNTER} dnat ${ipx} to ${ipx} daddr . meta l4proto . th dport . jhash ${ipx} saddr mod ${String(FALLBACK_SLOTS)} seed ${hex(FALLBACK_SEED)} map @fallback`] : []),
    '  }',
    ]),
    '  chain nat_post {',
    '    type nat hook postrouting priority srcnat - 1; policy accept;',
    // The ip6 table SNATs to uplinkAddress6 (config.ts requires it when an IPv6 service can overflow).
    ...(fam === 'ip' ? [`    meta mark @overflow_marks snat ip to ${cfg.uplinkAddress}`] : cfg.uplinkAddress6 !== undefined ? [`    meta mark @overflow_marks snat ip6 to ${cfg.uplinkAddress6}`] : []),
    '  }',
    '}',
  ];
  const chainSizes: Record<string, number> = {};
  let chain: string | undefined;
  for (const l of lines) {
    const head = /^ {2}chain (\S+) \{$/.exec(l);
    if (head) chain = head[1];
    else if (l === '  }') chain = undefined;
    else if (chain !== undefined) chainSizes[chain] = (chainSizes[chain] ?? 0) + 1;
  }
  // The kernel schedule's per-service chains are not part of the structure:
  // they hang off no hook, so the update rewrites them in place (a new
  // byrequests cycle, a service added or removed) without replacing the
  // table; a chain's rewritten rule starts its counter again, at the new
  // cycle's first slot.
  const kernelNames = new Set(kernelChains.map(([n]) => n));
  let inKernelChain = false;
  const structure =
    lines
      .filter((l) => {
        const head = /^ {2}chain (\S+) \{$/.exec(l);
        if (head) inKernelChain = kernelNames.has(head[1] ?? '');
        const keep = !inKernelChain;
        if (l === '  }') inKernelChain = false;
        return keep;
      })
      .map((l) => l.replace(/ elements = \{ .* \} \}$/, ' }').replace(/ \{ packets \d+ bytes \d+ \}$/, ' {}'))
      .join('\n') + '\n';
  // The table says which structure it has (keptScript reads it back).
  const tag = createHash('sha256').update(structure).digest('hex').slice(0, 16);
  lines.splice(1, 0, `  comment "${STRUCTURE_COMMENT}${tag}"`);
  const table = lines.join('\n') + '\n';
  const sets: Record<string, readonly string[]> = { vips, services, overflow_marks: overflow, targets, kernel, schedule: sched, fallback: fb };
  if (seen.length > 0) {
    sets[SYN_SEEN_SET] = seen;
    sets['synproxied'] = synproxy;
    groupEls.forEach((els, i) => (sets[`synproxied_${String(i)}`] = els));
  }
  const bodyOf = (): string => {
  const bare = lines.map((l) => l.replace(/ elements = \{ .* \} \}$/, ' }')).join('\n') + '\n';
  const adds = [...elementAdds(fam, 'vips', vips), ...elementAdds(fam, 'services', services), ...elementAdds(fam, 'overflow_marks', overflow), ...elementAdds(fam, 'targets', targets), ...elementAdds(fam, 'kernel', kernel), ...(scheduleInline ? elementAdds(fam, 'schedule', sched) : []), ...elementAdds(fam, 'fallback', fb)];
  if (seen.length > 0) {
    adds.push(...elementAdds(fam, SYN_SEEN_SET, seen), ...elementAdds(fam, 'synproxied', synproxy));
    groupEls.forEach((els, i) => adds.push(...elementAdds(fam, `synproxied_${String(i)}`, els)));
  }
  // Declaring the table first makes the delete valid when it is absent;
  // all statements are one transaction. The elements are added after the
  // declarations (`add element`), not declared inline: measured with 1,000
  // services x 100 servers (456k elements), inline 13.1 s (10.8 s of it in
  // the kernel), added 5.5 s, the same table.
  return `${bare}${adds.map((l) => l + '\n').join('')}`;
  };
  const scriptOf = (): string => `table ${fam} ${NFT_TABLE}\ndelete table ${fam} ${NFT_TABLE}\n${bodyOf()}`;
  // What a whole install leaves in each set and map, written over the sets
  // the kernel holds: the deferred ones (fallback, a large schedule) left
  // empty for their writers, as a whole install leaves them.
  const keptElements = (): string[] => [
    ...elementUpdate(fam, 'set', 'vips', vips),
    ...elementUpdate(fam, 'set', 'services', services),
    ...elementUpdate(fam, 'set', 'overflow_marks', overflow),
    ...elementUpdate(fam, 'map', 'targets', targets),
    ...elementUpdate(fam, 'map', 'kernel', kernel),
    ...elementUpdate(fam, 'map', 'schedule', scheduleInline ? sched : []),
    ...elementUpdate(fam, 'map', 'fallback', fb),
    ...(seen.length > 0 ? [...elementUpdate(fam, 'set', SYN_SEEN_SET, seen), ...elementUpdate(fam, 'set', 'synproxied', synproxy), ...groupEls.flatMap((els, i) => elementUpdate(fam, 'set', `synproxied_${String(i)}`, els))] : []),
  ];
  // Every chain the rendering declares (the kernel-schedule chains among them).
  const declaredChains = new Set(lines.flatMap((l) => /^ {2}chain (\S+) \{$/.exec(l)?.[1] ?? []));
  const updateOf = (): string => [
    // Chains first: the verdict map's new elements may jump to a new one.
    ...kernelChains.flatMap(([name, rules]) => [`add chain ${fam} ${NFT_TABLE} ${name}`, `flush chain ${fam} ${NFT_TABLE} ${name}`, ...rules.map((r) => `add rule ${fam} ${NFT_TABLE} ${name} ${r}`)]),
    ...elementUpdate(fam, 'set', 'vips', vips),
    ...elementUpdate(fam, 'set', 'services', services),
    ...elementUpdate(fam, 'set', 'overflow_marks', overflow),
    ...elementUpdate(fam, 'map', 'targets', targets),
    ...elementUpdate(fam, 'map', 'kernel', kernel),
    ...elementUpdate(fam, 'map', 'schedule', sched),
    ...elementUpdate(fam, 'map', 'fallback', fbCount > 0 && fb.length === 0 ? fallbackElements(cfg, spread, fam) : fb),
    ...(seen.length > 0 ? [...elementUpdate(fam, 'set', SYN_SEEN_SET, seen), ...synproxiedUpdate(fam, groups, engaged)] : []),
  ].join('\n') + '\n';
  return {
    family: fam,
    ...(v6 !== undefined ? { v6 } : {}),
    get script() {
      return scriptOf();
    },
    structureTag: tag,
    kept(layout) {
      // A large kernel schedule: its chains' rules, rewritten while the map
      // already holds its slots, cost nft ~12 ms each ("The SYN path" in
      // docs/front-node-design.md: 12 s for 1,000 services), where the
      // whole install declares the map empty first. Replaced whole, then.
      return scheduleInline ? keptScript(fam, layout, tag, kernelChains, declaredChains, keptElements) : undefined;
    },
    structure,
    get update() {
      return updateOf();
    },
    sets,
    fallbackInline,
    fallbackHeld: fallbackInline ? fallbackHeldOf(cfg, hasFallback(cfg) ? spread : [], fam) : new Map(),
    scheduleInline,
    synproxiedLines: seen.length > 0 ? synproxiedUpdate(fam, groups, engaged) : [],
    table,
    kernelChains: [...kernelNames],
    kernelRules: Object.fromEntries(kernelChains.map(([n, r]) => [n, r])),
    elements: { vips: vips.length, services: services.length, overflow_marks: overflow.length, targets: targets.length, kernel: kernel.length, schedule: sched.length, fallback: fbCount, ...(seen.length > 0 ? { [SYN_SEEN_SET]: seen.length, synproxied: synproxy.length } : {}), ...Object.fromEntries(groupEls.map((els, i) => [`synproxied_${String(i)}`, els.length])) },
    chainSizes,
  };
}

/**
 * The set with a counter per SYN-cookie-capable service (VIP . port): every
 * client SYN to it, cookies engaged or not (`nft list set ip sluice
 * syn_seen`, read each second by synproxy-auto.ts).
 */
export const SYN_SEEN_SET = 'syn_seen';
const NONE_ENGAGED: ReadonlySet<string> = new Set();

/** The elements of a group's `synproxied_N` set: its `on` services and the `auto` ones named in `engaged`. */
function synproxiedOf(g: SynproxyGroup, engaged: ReadonlySet<string>): string[] {
  return g.services.filter((x) => x.mode === 'on' || engaged.has(x.name)).map((x) => x.key);
}

function synproxiedUpdate(fam: NftFamily, groups: readonly SynproxyGroup[], engaged: ReadonlySet<string>): string[] {
  const per = groups.map((g) => synproxiedOf(g, engaged));
  return [...elementUpdate(fam, 'set', 'synproxied', per.flat()), ...per.flatMap((els, i) => elementUpdate(fam, 'set', `synproxied_${String(i)}`, els))];
}

/**
 * The `nft -f` script that sets the engaged SYN cookies (synproxy-auto.ts):
 * sets `synproxied` and `synproxied_N` flushed and refilled in one
 * transaction (a packet sees the old elements or the new), idempotent, so
 * a write that lands after an install of the same state changes nothing.
 * Both tables' sets, each with its own family's groups, in the one
 * transaction; a table without a capable service has no such sets and no
 * lines. Empty without a capable service.
 */
export function synproxiedUpdateScript(cfg: Pick<FrontConfig, 'checkpoints' | 'services'>, engaged: ReadonlySet<string>): string {
  const lines = (['ip', 'ip6'] as const).flatMap((fam) => {
    const groups = synproxyGroups(cfg, fam);
    return groups.length === 0 ? [] : synproxiedUpdate(fam, groups, engaged);
  });
  return lines.length === 0 ? '' : lines.join('\n') + '\n';
}

/** The tables holding a SYN-cookie-capable service (each has its own `syn_seen`). */
export function synproxyFamilies(cfg: Pick<FrontConfig, 'checkpoints' | 'services'>): NftFamily[] {
  return (['ip', 'ip6'] as const).filter((fam) => synproxyGroups(cfg, fam).length > 0);
}

/**
 * The sets and maps whose elements only installs write: an install over
 * the rules this process installed last writes only their changed
 * elements (elementDiffScript). The others are rewritten between installs
 * by their writers, so the last rendering is not what they hold: `schedule`
 * (kernel-schedule.ts) and `synproxied*` (synproxy-auto.ts) are flushed and
 * refilled (small, or empty with no kernel-schedule service), `fallback` is
 * left to the fallback writer, which diffs against what it last wrote.
 */
const DIFFED: readonly string[] = ['vips', 'services', 'overflow_marks', 'targets', 'kernel', SYN_SEEN_SET];

/** An element's key: the text before ` : ` for a map, the element itself for a set. */
function elementKey(e: string): string {
  const i = e.indexOf(' : ');
  return i < 0 ? e : e.slice(0, i);
}

/**
 * The `nft -f` lines that turn set or map `name` holding `before` into one
 * holding `after`: deletes (keys gone or whose value changed) before adds
 * (keys new or changed), so one transaction replaces a changed mapping.
 */
export function elementDiff(name: string, before: Iterable<string>, after: readonly string[], fam: NftFamily = NFT_FAMILY): string[] {
  const held = new Map<string, string>();
  for (const e of before) held.set(elementKey(e), e);
  const dels: string[] = [];
  const adds: string[] = [];
  for (const e of after) {
    const k = elementKey(e);
    const old = held.get(k);
    if (old === e) {
      held.delete(k);
      continue;
    }
    if (old !== undefined) {
      dels.push(k);
      held.delete(k);
    }
    adds.push(e);
  }
  for (const k of held.keys()) dels.push(k);
  return [...elementLines(fam, 'delete', name, dels), ...elementLines(fam, 'add', name, adds)];
}

/**
 * The `nft -f` script that turns the table `over` rendered into the one
 * `next` renders, for the same `structure`: the kernel-schedule chains
 * rewritten, and only the elements that changed (DIFFED). Valid when the
 * kernel holds `over`'s elements; if it does not (an element removed by
 * someone else), a delete of it fails the transaction and the caller
 * replaces the whole table. Empty when nothing changed.
 */
export function elementDiffScript(over: RenderedNft, next: RenderedNft, held?: HeldSchedule): string {
  const fam = next.family;
  const lines: string[] = [];
  const mine = held?.[fam];
  // Chains first: the verdict map's new elements may jump to a new one.
  // Without `held`, all of them, as `update` does: the schedule writer
  // rewrites a chain's rule between installs (its slot count), so `over`
  // may not be what the kernel holds, and the schedule map below is
  // refilled to match `next`. With it (what the writer holds), only new
  // chains and those whose rules differ, and only the slots that differ:
  // each rule that names a map of 100k elements cost nft ~12 ms here, so
  // rewriting 1,000 chains made a reload take 11-24 s.
  const same = (a: readonly string[] | undefined, b: readonly string[]): boolean => a !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);
  const had = new Set(over.kernelChains);
  for (const name of next.kernelChains) {
    const rules = next.kernelRules[name] ?? [];
    if (mine !== undefined && had.has(name) && same(mine.rules[name], rules)) continue;
    lines.push(`add chain ${fam} ${NFT_TABLE} ${name}`, `flush chain ${fam} ${NFT_TABLE} ${name}`, ...rules.map((r) => `add rule ${fam} ${NFT_TABLE} ${name} ${r}`));
  }
  for (const name of DIFFED) {
    const after = next.sets[name];
    if (after === undefined) continue;
    lines.push(...elementDiff(name, over.sets[name] ?? [], after, fam));
  }
  // Without a kernel-schedule service, before or after, the schedule map is empty and stays so.
  if (next.kernelChains.length > 0 || over.kernelChains.length > 0) {
    if (mine !== undefined) lines.push(...elementDiff('schedule', mine.elements, next.sets['schedule'] ?? [], fam));
    else lines.push(...elementUpdate(fam, 'map', 'schedule', next.sets['schedule'] ?? []));
  }
  lines.push(...next.synproxiedLines);
  // The ip6 table's elements, in the same transaction (the caller checked that both renderings have it, of the same structure).
  const v6 = next.v6 !== undefined && over.v6 !== undefined ? elementDiffScript(over.v6, next.v6, held) : '';
  return lines.length === 0 ? v6 : lines.join('\n') + '\n' + v6;
}

/** Lines that replace the elements of one set or map (part of one `nft -f` transaction). */
function elementUpdate(fam: NftFamily, kind: 'set' | 'map', name: string, els: readonly string[]): string[] {
  return [`flush ${kind} ${fam} ${NFT_TABLE} ${name}`, ...elementAdds(fam, name, els)];
}

/** Lines that add `els` to set or map `name`. */
function elementAdds(fam: NftFamily, name: string, els: readonly string[]): string[] {
  return elementLines(fam, 'add', name, els);
}

/** `add element` or `delete element` lines for `els` (elements, or keys to delete). */
function elementLines(fam: NftFamily, verb: 'add' | 'delete', name: string, els: readonly string[]): string[] {
  const lines: string[] = [];
  // Chunks keep each line of the script short for nft's parser.
  for (let i = 0; i < els.length; i += 4096) lines.push(`${verb} element ${fam} ${NFT_TABLE} ${name} { ${els.slice(i, i + 4096).join(', ')} }`);
  return lines;
}

/** The log statement of FIN/RST copies and of the kernel schedule's SYNs (the daemon's NFLOG group). */
function teardownLog(cfg: Pick<FrontConfig, 'nflogGroup'>): string {
  return `log group ${String(cfg.nflogGroup)} snaplen ${String(TEARDOWN_LOG.size)} queue-threshold ${String(TEARDOWN_LOG.threshold)}`;
}

/** The kernel-schedule services of table `fam` (each table has its own maps and k_<i> chains). */
function tableLayout(cfg: Pick<FrontConfig, 'checkpoints' | 'services' | 'failMode'>, fam: NftFamily): ScheduledService[] {
  return scheduleLayout(cfg).filter((l) => {
    const svc = cfg.services[l.index];
    return svc !== undefined && tableOf(svc) === fam;
  });
}

/** Map `schedule`'s elements and the `k_<i>` chains' rules of one table for schedule `targets`. */
function scheduleParts(cfg: Pick<FrontConfig, 'nflogGroup'>, layout: readonly ScheduledService[], targets: ScheduleTargets): HeldTable {
  const log = teardownLog(cfg);
  const q = hex(QUEUE_MARK);
  return {
    elements: scheduleElements(layout, targets),
    rules: Object.fromEntries(layout.map((l) => [kernelChain(l.index), kernelChainRules(l, targets[l.index]?.length ?? SCHEDULE_SLOTS, log, q)])),
  };
}

/** What one table's schedule map and k_<i> chains hold. */
export interface HeldTable {
  readonly elements: readonly string[];
  readonly rules: Readonly<Record<string, readonly string[]>>;
}

/** What the kernel holds of the kernel schedule, per table: elementDiffScript diffs against it. */
export type HeldSchedule = Readonly<Record<NftFamily, HeldTable>>;

/**
 * What the kernel holds of the schedule when configuration `cfg` is
 * installed and the schedule writer holds `targets` (KernelScheduleWriter
 * held()): the writer rewrites slots and chains between installs, so the
 * last rendering is not what the kernel holds.
 */
export function heldSchedule(cfg: Pick<FrontConfig, 'checkpoints' | 'services' | 'failMode' | 'nflogGroup'>, targets: ScheduleTargets): HeldSchedule {
  return { ip: scheduleParts(cfg, tableLayout(cfg, 'ip'), targets), ip6: scheduleParts(cfg, tableLayout(cfg, 'ip6'), targets) };
}

/** The `nft -f` lines that replace one service's slots in map `schedule` (kernel-schedule.ts): one transaction with the rest of the write. */
export function scheduleUpdateScript(cfg: Pick<FrontConfig, 'nflogGroup' | 'services'>, service: ScheduledService, oldKeys: readonly number[], els: readonly string[], slots?: number): string {
  const lines: string[] = [];
  // The service's own table: an IPv6 service's map and chain are in the ip6 table.
  const svc = cfg.services[service.index];
  const fam = svc !== undefined ? tableOf(svc) : NFT_FAMILY;
  if (slots !== undefined) {
    const name = kernelChain(service.index);
    lines.push(`flush chain ${fam} ${NFT_TABLE} ${name}`, ...kernelChainRules(service, slots, teardownLog(cfg), hex(QUEUE_MARK)).map((r) => `add rule ${fam} ${NFT_TABLE} ${name} ${r}`));
  }
  if (oldKeys.length > 0) lines.push(`delete element ${fam} ${NFT_TABLE} schedule { ${oldKeys.join(', ')} }`);
  if (els.length > 0) lines.push(`add element ${fam} ${NFT_TABLE} schedule { ${els.join(', ')} }`);
  return lines.map((l) => l + '\n').join('');
}

/**
 * The `nft -f` script that makes the kernel schedule `targets` whatever the
 * kernel holds of it now: per table, map `schedule` flushed and refilled,
 * and the chains of services `chains` (indices; those a raced write may
 * have changed) rewritten for their slot counts, in one transaction
 * (packets see the old schedule or the new one). For when what the kernel
 * holds is unknown: a write that raced with an install (kernel-schedule.ts
 * KernelScheduleWriter). The chains must exist: they are in the layout of
 * the running configuration, which the install rendered.
 */
export function scheduleRewriteScript(cfg: Pick<FrontConfig, 'nflogGroup' | 'services'>, layout: readonly ScheduledService[], targets: ScheduleTargets, chains: ReadonlySet<number>): string {
  const log = teardownLog(cfg);
  const q = hex(QUEUE_MARK);
  const fams: NftFamily[] = hasIPv6(cfg) ? ['ip', 'ip6'] : ['ip'];
  const lines: string[] = [];
  for (const fam of fams) {
    const mine = layout.filter((l) => {
      const svc = cfg.services[l.index];
      return svc !== undefined && tableOf(svc) === fam;
    });
    // Chains before elements: nft evaluates each rule naming the map against the elements it holds in its view of the transaction (~12 ms per rule at 100k).
    for (const l of mine) {
      if (!chains.has(l.index)) continue;
      const name = kernelChain(l.index);
      lines.push(`flush chain ${fam} ${NFT_TABLE} ${name}`, ...kernelChainRules(l, targets[l.index]?.length ?? SCHEDULE_SLOTS, log, q).map((r) => `add rule ${fam} ${NFT_TABLE} ${name} ${r}`));
    }
    lines.push(`flush map ${fam} ${NFT_TABLE} schedule`, ...elementLines(fam, 'add', 'schedule', scheduleElements(mine, targets)));
  }
  return lines.map((l) => l + '\n').join('');
}

/**
 * What the fallback map holds, per service (`VIP . protocol . port`, its
 * slots' key prefix): the usable servers its slots were written from (slot
 * k holds server k mod n). Services without a usable server are absent.
 */
export type FallbackHeld = ReadonlyMap<string, readonly (readonly [address: string, port: number])[]>;

/** The FallbackHeld of `spread` (what fallbackElements(cfg, spread) writes). */
export function fallbackHeldOf(cfg: Pick<FrontConfig, 'services'>, spread: FallbackSpread, fam?: NftFamily): Map<string, readonly (readonly [string, number])[]> {
  const out = new Map<string, readonly (readonly [string, number])[]>();
  cfg.services.forEach((svc, si) => {
    if (fam !== undefined && tableOf(svc) !== fam) return;
    const usable = spread[si] ?? [];
    if (usable.length > 0) out.set(`${svc.vip} . ${svc.protocol} . ${String(svc.port)}`, usable);
  });
  return out;
}

function sameServers(a: readonly (readonly [string, number])[], b: readonly (readonly [string, number])[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]?.[0] !== b[i]?.[0] || a[i]?.[1] !== b[i]?.[1]) return false;
  return true;
}

/**
 * The `nft -f` script that turns the fallback map holding `held` (what the
 * writer last wrote, or undefined: unknown) into `spread`'s elements: per
 * service whose usable servers changed, only the slots whose server
 * changed; a flush and every element when `held` is unknown or nothing is
 * left. Compared per service, not per element: with 1,000 services x 256
 * slots a comparison of the elements' text took ~1 s of the event loop.
 * Empty when nothing changed.
 */
export function fallbackDiffScript(cfg: Pick<FrontConfig, 'services'>, spread: FallbackSpread, held: FallbackHeld | undefined): { script: string; held: Map<string, readonly (readonly [string, number])[]> } {
  const next = fallbackHeldOf(cfg, spread);
  if (held === undefined || next.size === 0) return { script: fallbackUpdateScript(cfg, spread), held: next };
  // Per table: a service's key begins with its VIP (an IPv6 one has colons).
  const dels: Record<NftFamily, string[]> = { ip: [], ip6: [] };
  const adds: Record<NftFamily, string[]> = { ip: [], ip6: [] };
  const famOf = (key: string): NftFamily => (key.slice(0, key.indexOf(' ')).includes(':') ? 'ip6' : 'ip');
  for (const [key, now] of next) {
    const fam = famOf(key);
    const was = held.get(key);
    if (was !== undefined && sameServers(was, now)) continue;
    for (let k = 0; k < FALLBACK_SLOTS; k++) {
      const n = now[k % now.length] ?? now[0] ?? ['0.0.0.0', 0];
      const o = was === undefined ? undefined : was[k % was.length];
      if (o !== undefined && o[0] === n[0] && o[1] === n[1]) continue;
      if (o !== undefined) dels[fam].push(`${key} . ${String(k)}`);
      adds[fam].push(`${key} . ${String(k)} : ${n[0]} . ${String(n[1])}`);
    }
  }
  for (const key of held.keys()) {
    if (next.has(key)) continue;
    for (let k = 0; k < FALLBACK_SLOTS; k++) dels[famOf(key)].push(`${key} . ${String(k)}`);
  }
  const lines = (['ip', 'ip6'] as const).flatMap((f) => [...elementLines(f, 'delete', 'fallback', dels[f]), ...elementLines(f, 'add', 'fallback', adds[f])]);
  return { script: lines.length === 0 ? '' : lines.join('\n') + '\n', held: next };
}

/** The `nft -f` script that replaces the fallback map's elements (one transaction: flush and add). */
export function fallbackUpdateScript(cfg: Pick<FrontConfig, 'services'>, spread: FallbackSpread): string {
  // The ip6 table's map only when that table exists (an IPv6 service).
  const fams: NftFamily[] = hasIPv6(cfg) ? ['ip', 'ip6'] : ['ip'];
  return fams.map((f) => fallbackScriptOf(f, fallbackElements(cfg, spread, f))).join('');
}

function fallbackScriptOf(fam: NftFamily, els: readonly string[]): string {
  const lines = [`flush map ${fam} ${NFT_TABLE} fallback`];
  // Chunks keep each line of the script short for nft's parser.
  for (let i = 0; i < els.length; i += 4096) lines.push(`add element ${fam} ${NFT_TABLE} fallback { ${els.slice(i, i + 4096).join(', ')} }`);
  return lines.join('\n') + '\n';
}

/** Loads `script` with `nft -f -` (synchronously: start, reload and repair install synchronously). */
export function nftLoad(script: string, netns?: string): void {
  const [cmd = 'nft', ...rest] = argvIn(netns, ['nft', '-f', '-']);
  runCommand(cmd, rest, script);
}

/** Loads `script` off the event loop (the fallback writer), failing after `timeoutMs`. */
export function nftLoadAsync(script: string, timeoutMs: number, netns?: string): Promise<void> {
  return nftAsync(['-f', '-'], timeoutMs, netns, script).then(() => undefined);
}

/** `nft list table ip sluice`, synchronously (the read-back right after an install). */
export function listTable(netns?: string, fam: NftFamily = NFT_FAMILY): string {
  const [cmd = 'nft', ...rest] = argvIn(netns, ['nft', 'list', 'table', fam, NFT_TABLE]);
  return execFileSyncBig(cmd, rest);
}

/** The same without blocking the event loop (the periodic check); an absent table is an empty string. */
export async function listTableAsync(timeoutMs: number, netns?: string, fam: NftFamily = NFT_FAMILY): Promise<string> {
  try {
    return await nftAsync(['list', 'table', fam, NFT_TABLE], timeoutMs, netns);
  } catch (err) {
    if (err instanceof CommandFailedError && /No such file or directory/.test(err.message)) return '';
    throw err;
  }
}

/**
 * The chains our table declares (`nft list chains ip`: names and hooks,
 * no rules, no elements: milliseconds however large the sets, where a
 * listing of the table or of one chain makes nft fetch every element
 * first, seconds at 10^5 elements). Empty when the table is absent.
 */
export async function listChainsAsync(timeoutMs: number, netns?: string): Promise<string[]> {
  return chainsOf(await nftAsync(['list', 'chains', NFT_FAMILY], timeoutMs, netns));
}

/** The chain names of our table in a `nft list chains` output. */
export function chainsOf(list: string): string[] {
  const out: string[] = [];
  let ours = false;
  for (const line of list.split('\n')) {
    const table = /^table (\S+) (\S+) \{$/.exec(line);
    if (table !== null) {
      ours = table[1] === NFT_FAMILY && table[2] === NFT_TABLE;
      continue;
    }
    const chain = /^\tchain (\S+) \{$/.exec(line);
    if (ours && chain !== null) out.push(chain[1] ?? '');
  }
  return out;
}

/** What the kernel holds of our table (nft-netlink.ts readTableLayout): its comment, and its chains by name. */
export type LayoutItem = { readonly kind: 'table'; readonly comment: string } | { readonly kind: 'chain'; readonly name: string; readonly base: boolean };

/** The table comment that names a rendering's structure (`structureTag`). */
export const STRUCTURE_COMMENT = 'sluice structure ';

/**
 * The script that gives a table the kernel holds (`layout`) a rendering's
 * contents in place, when the table's comment names that rendering's
 * structure (`tag`): every set's and map's elements replaced (flush and
 * add), the kernel-schedule chains rewritten and those the rendering lacks
 * deleted. Chains, rules, hooks and counters stay. Undefined when the
 * table is absent or its comment names another structure (or none: a
 * table written before the comment existed).
 *
 * Why: replacing the whole table (`delete table` and add, one transaction)
 * lost 1-7 SYNs per ~1.7M over 300 installs under a SYN flood
 * (test/netns/front-restart.test.ts), all dropped by the VIP guard, undecided, in
 * two ways a packet straddling the commit could meet:
 * - The new base chains register their hooks beside the old ones', and the
 *   kernel runs a hook added at a priority before those already there
 *   (checked in a scratch namespace). A chain reads the ruleset
 *   generation when a packet enters it, so a SYN that entered the new
 *   `classify` just before the commit (its rules not yet visible) and the
 *   old one just after (its rules gone) was never classified.
 * - A map lookup reads the generation again, at the lookup. Deleting a map
 *   deactivates its elements in the next generation, so an old rule
 *   entered before the commit that looked in the old `fallback` map after
 *   it found nothing: not DNATed (seen with the chains kept and the maps
 *   replaced: every lost SYN had been queued). A map kept and refilled
 *   holds the elements of one generation or the other.
 * Rebuilding in place (flush the rules, keep the maps) is not possible
 * with nft 1.0.6: a rule that names an existing `typeof ... th dport`
 * map (the fallback) is refused ("conflicting protocols specified").
 */
function keptScript(fam: NftFamily, layout: readonly LayoutItem[], tag: string, kernelChains: readonly (readonly [string, readonly string[]])[], declared: ReadonlySet<string>, elements: () => string[]): string | undefined {
  const table = layout.find((x) => x.kind === 'table');
  if (table?.comment !== `${STRUCTURE_COMMENT}${tag}`) return undefined;
  const t = `${fam} ${NFT_TABLE}`;
  return [
    // Chains first: the verdict map's new elements may jump to a new one.
    ...kernelChains.flatMap(([name, rules]) => [`add chain ${t} ${name}`, `flush chain ${t} ${name}`, ...rules.map((r) => `add rule ${t} ${name} ${r}`)]),
    ...elements(),
    // After the verdict map's refill, nothing jumps to these any more.
    ...layout.flatMap((x) => (x.kind === 'chain' && !x.base && !declared.has(x.name) ? [`delete chain ${t} ${x.name}`] : [])),
  ].join('\n') + '\n';
}

/** The `nft -f` lines that delete our table of family `fam` if present (declared first, so the delete is valid when it is absent). */
export function dropTableScript(fam: NftFamily): string {
  return `table ${fam} ${NFT_TABLE}\ndelete table ${fam} ${NFT_TABLE}\n`;
}

/** Deletes our tables (ip and ip6) if present, in one transaction; leaves every other table alone. */
export function removeNftTable(netns?: string): void {
  nftLoad(dropTableScript('ip') + dropTableScript('ip6'), netns);
}

/** Whether our table of family `fam` exists (`nft list tables`: names only). */
export function hasNftTable(netns?: string, fam: NftFamily = NFT_FAMILY): boolean {
  const [cmd = 'nft', ...rest] = argvIn(netns, ['nft', 'list', 'tables', fam]);
  return execFileSyncBig(cmd, rest).split('\n').some((l) => l.trim() === `table ${fam} ${NFT_TABLE}`);
}

/** A table with 10^5..10^6 elements lists to tens of MB: past execFileSync's 1 MiB default. */
function execFileSyncBig(cmd: string, args: readonly string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000, maxBuffer: 512 << 20 });
  } catch (err) {
    const e = err as { stderr?: unknown };
    throw new CommandFailedError(`${cmd} ${args.join(' ')}`, typeof e.stderr === 'string' ? e.stderr : '', { cause: err });
  }
}

/** nft off the event loop (run-off-loop.ts: no fork on the loop's thread, whatever the daemon's RSS). */
function nftAsync(args: readonly string[], timeoutMs: number, netns: string | undefined, input?: string): Promise<string> {
  return runOffLoop(argvIn(netns, ['nft', ...args]), { timeoutMs, ...(input !== undefined ? { input } : {}) });
}
