/**
 * Client addresses of both families as text: strict parsing, the canonical
 * text form, and prefixes. For the control plane, the agent and the DNS
 * tables (minute-scale work on strings); the packet path keeps its own
 * allocation-free forms in src/packet/.
 *
 * Canonical text (the one form every table keys by and every message
 * carries, so one client is one key whatever its log wrote):
 *   - IPv4: dotted quad without leading zeros (parseIPv4Address's form);
 *   - IPv6: RFC 5952 (lower case, no leading zeros in a group, the longest
 *     run of two or more zero groups compressed to `::`, the first on a tie);
 *   - an IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack socket
 *     or an nginx on `listen [::]` logs for an IPv4 client) is that IPv4
 *     client, in IPv4 form.
 *
 * Refused: zone ids (`fe80::1%eth0`: a link-local address names no client
 * beyond the link, and the zone is the host's own interface name), brackets
 * (callers that accept `[addr]` strip them first), more than one `::`, a
 * group of more than 4 hex digits, an embedded IPv4 tail anywhere but the
 * last 32 bits, and text longer than any address (45 characters).
 */
import { formatIPv4Address, parseIPv4Address, prefixMask } from '../packet/address.ts';
import { formatIPv6Groups, maskIPv6Groups, parseIPv6Groups } from '../packet/address6.ts';

/** Longest valid IPv6 text: 6 groups of 4, 6 colons, a dotted quad of 15. */
export const MAX_ADDRESS_TEXT = 45;

function isMapped(g: readonly number[]): boolean {
  return g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff;
}

export type ClientAddress = { readonly family: 4; readonly text: string; readonly v4: number } | { readonly family: 6; readonly text: string; readonly groups: readonly number[] };

/** A client address of either family in canonical form; undefined when the text is not strictly one. */
export function parseClientAddress(text: string): ClientAddress | undefined {
  const v4 = parseIPv4Address(text);
  if (v4 !== undefined) return { family: 4, text, v4 };
  if (!text.includes(':')) return undefined;
  const g = parseIPv6Groups(text);
  if (g === undefined) return undefined;
  if (isMapped(g)) {
    const n = (((g[6] ?? 0) << 16) | (g[7] ?? 0)) >>> 0;
    return { family: 4, text: formatIPv4Address(n), v4: n };
  }
  return { family: 6, text: formatIPv6Groups(g), groups: g };
}

/** The canonical text of a client address, or undefined. */
export function canonicalAddress(text: string): string | undefined {
  return parseClientAddress(text)?.text;
}

/** Prefix lengths per family: the unit a client is counted or keyed by. */
export interface FamilyPrefixLengths {
  readonly ipv4: number;
  readonly ipv6: number;
}

/** A client's prefix: canonical text of its network address, with family and length. */
export interface AddressPrefix {
  readonly family: 4 | 6;
  /** Canonical text of the prefix's first address. */
  readonly network: string;
  readonly length: number;
}

/** The prefix of `a` at its family's length. */
export function prefixOf(a: ClientAddress, lengths: FamilyPrefixLengths): AddressPrefix {
  if (a.family === 4) {
    const len = lengths.ipv4;
    return { family: 4, network: len === 32 ? a.text : formatIPv4Address((a.v4 & prefixMask(len)) >>> 0), length: len };
  }
  const len = lengths.ipv6;
  if (len === 128) return { family: 6, network: a.text, length: 128 };
  const out = maskIPv6Groups(a.groups, len);
  return { family: 6, network: formatIPv6Groups(out), length: len };
}
