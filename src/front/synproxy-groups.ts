/**
 * The SYN-cookie-capable services (config.ts synproxyOf: mode auto or on)
 * grouped by their cookie options, for the two renderers that install the
 * cookies: nft.ts (the sets, the counting and, for IPv4, nft's `synproxy`
 * statement) and rules.ts (for IPv6, ip6tables' SYNPROXY target).
 *
 * Why two mechanisms: on our kernels nft's `synproxy` checks the TCP
 * checksum of an IPv6 packet with the IPv4 function (nft_synproxy_do_eval
 * -> nf_ip_checksum) and drops every IPv6 SYN or ACK whose checksum it must
 * verify (CHECKSUM_NONE or _COMPLETE: anything through the WAN, every
 * raw-socket SYN). ip6tables' SYNPROXY target (ip6t_SYNPROXY) checks it
 * with nf_ip6_checksum. So in the ip6 table nft picks the packet (engaged
 * service, INVALID or UNTRACKED) and marks it with its group's
 * synproxyMark; ip6tables' filter INPUT chain SLUICE_SYNPROXY answers it.
 */
import { synproxyOf, familyOf, type FrontConfig } from './config.ts';
import { QUEUE_MARK } from './marks.ts';

/** One set of cookie options (distinct options) and the capable services it serves. */
export interface SynproxyGroup {
  /** nft's statement: `synproxy mss 1460 wscale 7 timestamp sack-perm`. */
  readonly stmt: string;
  /** ip6tables' target with the same options: `-j SYNPROXY --sack-perm --timestamp --wscale 7 --mss 1460`. */
  readonly target: string;
  readonly services: readonly { readonly name: string; readonly key: string; readonly mode: 'auto' | 'on'; readonly above: number; readonly calmSeconds: number }[];
}

/** The families of our nft tables (nft.ts NftFamily). */
export type GroupFamily = 'ip' | 'ip6';

/**
 * The groups, of table `fam` only when given (each table has its own
 * groups and `synproxied_N` sets; without it, every family's, keys of
 * both). There is one rule per group, each with its own set of VIP . port
 * (one lookup per packet). The grouping depends on the configuration only,
 * never on what is engaged, so engaging changes elements, not rules.
 */
export function synproxyGroups(cfg: Pick<FrontConfig, 'checkpoints' | 'services'>, fam?: GroupFamily): SynproxyGroup[] {
  const groups = new Map<string, { stmt: string; target: string; services: SynproxyGroup['services'][number][] }>();
  for (const svc of cfg.services) {
    if (fam !== undefined && (familyOf(svc.vip) === 6 ? 'ip6' : 'ip') !== fam) continue;
    const o = synproxyOf(cfg, svc);
    if (o === undefined) continue;
    const stmt = `synproxy mss ${String(o.mss)} wscale ${String(o.wscale)}${o.timestamps ? ' timestamp' : ''}${o.sack ? ' sack-perm' : ''}`;
    // iptables-save's own order of the options (the rule check compares its output).
    const target = `-j SYNPROXY${o.sack ? ' --sack-perm' : ''}${o.timestamps ? ' --timestamp' : ''} --wscale ${String(o.wscale)} --mss ${String(o.mss)}`;
    const g = groups.get(stmt) ?? { stmt, target, services: [] };
    g.services.push({ name: svc.name, key: `${svc.vip} . ${String(svc.port)}`, mode: o.mode, above: o.above, calmSeconds: o.calmSeconds });
    groups.set(stmt, g);
  }
  return [...groups.values()];
}

/**
 * The packet mark the ip6 table gives a packet for SYNPROXY group `i`
 * (IPv6 only): the specials' service field 0xfff, target i + 1 (at most
 * 0xffe: there are no more groups than services, MAX_SERVICES_MARKED; the
 * target 0xfff is REJECT_MARK's), never a decision (marks.ts decodeMark: not ours to DNAT; nat_pre runs before it
 * is set, and it lives on that one packet, which SYNPROXY consumes).
 */
export function synproxyMark(i: number): number {
  return (QUEUE_MARK + 1 + i) >>> 0;
}

/**
 * The value/mask every group mark shares with the other specials
 * (QUEUE_MARK, REJECT_MARK): the jump into SLUICE_SYNPROXY tests it, the
 * chain's rules test each group's own mark (a special of another kind
 * matches none of them and returns).
 */
export const SYNPROXY_MARKS = { value: QUEUE_MARK, mask: 0xffff_f000 } as const;
