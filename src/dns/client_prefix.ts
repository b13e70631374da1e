/**
 * A client's identity for steering: its address prefix. Queries name the
 * client either by their source address (a stub resolving directly) or by
 * an EDNS Client Subnet option (a recursive resolver speaking for it, RFC
 * 7871); both are reduced to a prefix, and every per-client table (RTTs,
 * high-rate clients, stickiness, rate limiting) is keyed by that prefix, so
 * one client's many addresses share measurements and a table holds one entry
 * per network rather than per host.
 *
 * Keys are strings ("4:198.18.11.0/24", "6:fd00:0:0:1::/56") so IPv4 and
 * IPv6 share one Map without collisions. IPv4 prefixes also keep the
 * representative address (the first address seen), which is what front
 * nodes probe.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { formatIPv4Address, parseIPv4Address, prefixMask } from '../packet/address.ts';

export interface ClientPrefix {
  readonly key: string;
  readonly family: 4 | 6;
  /** The prefix length the key was cut at (the ECS scope of a steered answer). */
  readonly length: number;
  /** An IPv4 address inside the prefix to probe; undefined for IPv6 (probe messages are IPv4). */
  readonly probeTarget: string | undefined;
}

function maskV4(n: number, len: number): number {
  return (n & prefixMask(len)) >>> 0;
}

/** Expands an IPv6 text address into 8 groups; undefined when invalid. */
export function ipv6Groups(s: string): number[] | undefined {
  if (!isIPv6(s)) return undefined;
  let text = s;
  const groups: number[] = [];
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two groups.
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  let v4: number[] = [];
  if (isIPv4(tail)) {
    const n = parseIPv4Address(tail) ?? 0;
    v4 = [n >>> 16, n & 0xffff];
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const h = head === '' ? [] : head.split(':');
  const r = rest === undefined || rest === '' ? [] : rest.split(':');
  const fill = rest === undefined ? 0 : 8 - h.length - r.length;
  for (const g of h) groups.push(parseInt(g, 16));
  for (let i = 0; i < fill; i++) groups.push(0);
  for (const g of r) groups.push(parseInt(g, 16));
  if (v4.length === 2) groups.splice(6, 2, (v4[0] ?? 0), (v4[1] ?? 0));
  return groups.length === 8 ? groups : undefined;
}

function v6Key(groups: readonly number[], len: number): string {
  const out: string[] = [];
  for (let i = 0; i < 8; i++) {
    const bits = Math.max(0, Math.min(16, len - i * 16));
    const mask = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
    out.push(((groups[i] ?? 0) & mask).toString(16));
  }
  return `6:${out.join(':')}/${len}`;
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
  return { key: v6Key(g, lengths.ipv6), family: 6, length: lengths.ipv6, probeTarget: undefined };
}

/**
 * The prefix named by an ECS option (family 1/2, source prefix, left-aligned
 * address octets). The prefix is the shorter of the option's and ours: a
 * resolver that reveals only a /20 gets answers for the /20.
 */
export function prefixOfEcs(family: number, source: number, addr: Uint8Array, lengths: PrefixLengths): ClientPrefix {
  if (family === 1) {
    const len = Math.min(source, lengths.ipv4);
    const n = (((addr[0] ?? 0) << 24) | ((addr[1] ?? 0) << 16) | ((addr[2] ?? 0) << 8) | (addr[3] ?? 0)) >>> 0;
    const net = maskV4(n, len);
    // Probe a host inside the prefix: the network address + 1 stands for it.
    return { key: `4:${formatIPv4Address(net)}/${len}`, family: 4, length: len, probeTarget: len <= 30 ? formatIPv4Address(net + 1) : formatIPv4Address(net) };
  }
  const len = Math.min(source, lengths.ipv6);
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push(((addr[2 * i] ?? 0) << 8) | (addr[2 * i + 1] ?? 0));
  return { key: v6Key(groups, len), family: 6, length: len, probeTarget: undefined };
}
