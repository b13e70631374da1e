/**
 * A client's identity for steering: its address prefix. Queries name the
 * client either by their source address (a stub resolving directly) or by
 * an EDNS Client Subnet option (a recursive resolver speaking for it, RFC
 * 7871); both are reduced to a prefix, and every per-client table (RTTs,
 * high-rate clients, stickiness, rate limiting) is keyed by that prefix, so
 * one client's many addresses share measurements and a table holds one entry
 * per network rather than per host.
 *
 * Keys are strings ("4:198.18.11.0/24", "6:2001:2:0:1200::/56") so IPv4 and
 * IPv6 share one Map without collisions. A prefix also carries the address
 * the front nodes probe for it: the source address (a query without ECS
 * comes from the resolver, so that is the resolver's own address), or for an
 * ECS prefix its network address + 1, with the resolver's prefix beside it
 * for when that address answers no probe.
 */
import { formatIPv4Address, parseIPv4Address, prefixMask } from '../packet/address.ts';
import { formatIPv6Groups, maskIPv6Groups, parseIPv6Groups } from '../packet/address6.ts';

export interface ClientPrefix {
  readonly key: string;
  readonly family: 4 | 6;
  /** The prefix length the key was cut at (the ECS scope of a steered answer). */
  readonly length: number;
  /** An address inside the prefix for the front nodes to probe (ICMP or ICMPv6 echo, else TCP), in canonical text. */
  readonly probeTarget: string | undefined;
  /**
   * For an ECS prefix: the querying resolver's own prefix (its source
   * address the probe target). The ECS probe target (network address + 1)
   * often answers nothing; when the subnet's probes all went unanswered,
   * the resolver's RTTs stand in (steer.ts). Absent for a source prefix:
   * there the source, the resolver itself, is the probe target already.
   */
  readonly resolver?: ClientPrefix | undefined;
}

function maskV4(n: number, len: number): number {
  return (n & prefixMask(len)) >>> 0;
}

/**
 * Expands an IPv6 text address into 8 groups; undefined when invalid. A
 * zone index (a link-local source, "fe80::1%eth0") is dropped: the prefix
 * is the address's.
 */
export function ipv6Groups(s: string): number[] | undefined {
  const zone = s.indexOf('%');
  return parseIPv6Groups(zone >= 0 ? s.slice(0, zone) : s);
}

function v6Key(groups: readonly number[], len: number): string {
  return `6:${formatIPv6Groups(maskIPv6Groups(groups, len))}/${String(len)}`;
}

export interface PrefixLengths {
  readonly ipv4: number;
  readonly ipv6: number;
}

/** The prefix of a source address (string from the socket). */
export function prefixOfAddress(address: string, lengths: PrefixLengths): ClientPrefix | undefined {
  const n = parseIPv4Address(address);
  if (n !== undefined) return { key: `4:${formatIPv4Address(maskV4(n, lengths.ipv4))}/${lengths.ipv4}`, family: 4, length: lengths.ipv4, probeTarget: address };
  const g = ipv6Groups(address);
  if (g === undefined) return undefined;
  // IPv4-mapped sources (a dual-stack socket) are IPv4 clients.
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return prefixOfAddress(formatIPv4Address((((g[6] ?? 0) << 16) | (g[7] ?? 0)) >>> 0), lengths);
  }
  // The source itself is probed (RFC 5952 text: the front node reports its RTT under the same text).
  return { key: v6Key(g, lengths.ipv6), family: 6, length: lengths.ipv6, probeTarget: formatIPv6Groups(g) };
}

/**
 * The prefix named by an ECS option (family 1/2, source prefix, left-aligned
 * address octets). The prefix is the shorter of the option's and ours: a
 * resolver that reveals only a /20 gets answers for the /20.
 */
export function prefixOfEcs(family: number, source: number, addr: Uint8Array, lengths: PrefixLengths, resolver?: ClientPrefix): ClientPrefix {
  const r = resolver === undefined ? {} : { resolver };
  if (family === 1) {
    const len = Math.min(source, lengths.ipv4);
    const n = (((addr[0] ?? 0) << 24) | ((addr[1] ?? 0) << 16) | ((addr[2] ?? 0) << 8) | (addr[3] ?? 0)) >>> 0;
    const net = maskV4(n, len);
    // Probe a host inside the prefix: the network address + 1 stands for it.
    return { key: `4:${formatIPv4Address(net)}/${len}`, family: 4, length: len, probeTarget: len <= 30 ? formatIPv4Address(net + 1) : formatIPv4Address(net), ...r };
  }
  const len = Math.min(source, lengths.ipv6);
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push(((addr[2 * i] ?? 0) << 8) | (addr[2 * i + 1] ?? 0));
  // As for IPv4: the network address + 1 stands for a host inside the prefix.
  const net = maskIPv6Groups(groups, len);
  if (len <= 126) net[7] = (net[7] ?? 0) + 1;
  return { key: v6Key(groups, len), family: 6, length: len, probeTarget: formatIPv6Groups(net), ...r };
}
