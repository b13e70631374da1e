/**
 * 128-bit addresses for both families, without allocation on the hot path.
 *
 * Representation: four unsigned 32-bit words, big-endian by word (word 0 is
 * bytes 0..3 on the wire, its most significant byte first), held in a
 * caller-owned Uint32Array(4) (PacketInfo.src6/dst6) or in four columns /
 * a stride-4 Uint32Array of a table. An IPv4 address a.b.c.d is the
 * IPv4-mapped address ::ffff:a.b.c.d (RFC 4291 2.5.5.2): words [0, 0,
 * 0xffff, a.b.c.d as u32]. Why this and not bytes or a BigInt:
 *  - words are what masking, comparing and hashing operate on: a /N mask is
 *    one u32 mask per word (prefixWordMask), a compare is four ===, a hash
 *    mixes four numbers, all SMI/uint32 arithmetic with no allocation;
 *  - a BigInt or a string per packet would allocate; 16 bytes compare and
 *    hash 4x slower;
 *  - the mapped form gives both families ONE layout: a table keyed by
 *    (word0..word3, port) holds IPv4 and IPv6 clients side by side, and an
 *    IPv4 /n prefix is the mapped /(96+n) prefix, so one masking routine
 *    serves IPv4 /24 checkpoints and IPv6 /56 or /64 ones. The mapped range
 *    never appears as a real IPv6 source on the wire (RFC 4291 / RFC 6890:
 *    not to be routed), so the two families cannot collide in such a key;
 *    parseIPv6 nevertheless reports the family, and a packet claiming a
 *    mapped source over IPv6 is still family 6.
 *
 * How later parts are meant to use it (not built here):
 *  - connection records (front/connections.ts): today connectionKey() packs
 *    IPv4 address and port in one double. For both families the table keeps
 *    a stride-4 Uint32Array of address words beside the port and service
 *    columns, and its index hashes (words, port, service); an IPv4 flow's
 *    words are its mapped form, so IPv4 records need no second table. (Or,
 *    cheaper for the common IPv4 case: keep the double key for family 4 and
 *    use the words only for family 6; both work from PacketInfo as it is.)
 *  - checkpoint / client prefixes: maskAddress6(addr, len, scratch) with
 *    len = 96 + n for an IPv4 /n, or the IPv6 prefix length (/64, /56), into
 *    a scratch array owned by the caller, then the four masked words are the
 *    key. No allocation per packet.
 *
 * Text conversions (parseIPv6Address, formatIPv6Address, parseCidr6,
 * formatPrefix6) allocate and are for configuration, logs and status.
 */
import { formatIPv4Address, parseIPv4Address } from './address.ts';
import { readU32, writeU32 } from './checksum.ts';

/** Four big-endian u32 words. */
export type Address6 = Uint32Array;

export function newAddress6(): Address6 {
  return new Uint32Array(4);
}

/** Reads 16 address bytes at `off` into `out`. */
export function readAddress6(buf: Uint8Array, off: number, out: Address6): void {
  out[0] = readU32(buf, off);
  out[1] = readU32(buf, off + 4);
  out[2] = readU32(buf, off + 8);
  out[3] = readU32(buf, off + 12);
}

/** Writes `a` as 16 bytes at `off`. */
export function writeAddress6(buf: Uint8Array, off: number, a: Address6): void {
  writeU32(buf, off, a[0] ?? 0);
  writeU32(buf, off + 4, a[1] ?? 0);
  writeU32(buf, off + 8, a[2] ?? 0);
  writeU32(buf, off + 12, a[3] ?? 0);
}

/** Sets `out` to the IPv4-mapped form of `v4` (a u32). */
export function setIPv4Mapped(out: Address6, v4: number): void {
  out[0] = 0;
  out[1] = 0;
  out[2] = 0xffff;
  out[3] = v4 >>> 0;
}

export function isIPv4Mapped(a: Address6): boolean {
  return a[0] === 0 && a[1] === 0 && a[2] === 0xffff;
}

export function equalAddress6(a: Address6, b: Address6): boolean {
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
}

export function copyAddress6(src: Address6, out: Address6): void {
  out[0] = src[0] ?? 0;
  out[1] = src[1] ?? 0;
  out[2] = src[2] ?? 0;
  out[3] = src[3] ?? 0;
}

/** The mask of word `word` (0..3) of a /`length` prefix (length 0..128), as u32. */
export function prefixWordMask(length: number, word: number): number {
  const bits = length - word * 32;
  if (bits <= 0) return 0;
  if (bits >= 32) return 0xffffffff;
  return (0xffffffff << (32 - bits)) >>> 0;
}

/** out = a masked to its first `length` bits (0..128). `out` may be `a`. */
export function maskAddress6(a: Address6, length: number, out: Address6): void {
  out[0] = ((a[0] ?? 0) & prefixWordMask(length, 0)) >>> 0;
  out[1] = ((a[1] ?? 0) & prefixWordMask(length, 1)) >>> 0;
  out[2] = ((a[2] ?? 0) & prefixWordMask(length, 2)) >>> 0;
  out[3] = ((a[3] ?? 0) & prefixWordMask(length, 3)) >>> 0;
}

/** Whether `a` lies in `network`/`length` (network's host bits are ignored). */
export function inPrefix6(a: Address6, network: Address6, length: number): boolean {
  for (let w = 0; w < 4; w++) {
    const m = prefixWordMask(length, w);
    if ((((a[w] ?? 0) ^ (network[w] ?? 0)) & m) !== 0) return false;
  }
  return true;
}

const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/**
 * Parses IPv6 text (RFC 4291 2.2: hex groups, one "::", an optional dotted
 * IPv4 tail) into `out` (a new array if not given); undefined if it is not
 * one. Zone indexes ("%eth0") are refused: a client address has none.
 */
export function parseIPv6Address(text: string, out: Address6 = newAddress6()): Address6 | undefined {
  const all = parseIPv6Groups(text);
  if (all === undefined) return undefined;
  for (let w = 0; w < 4; w++) out[w] = (((all[2 * w] ?? 0) << 16) | (all[2 * w + 1] ?? 0)) >>> 0;
  return out;
}

/** The 8 groups of IPv6 text, or undefined when it is not strictly one (see the module comment). */
export function parseIPv6Groups(text: string): number[] | undefined {
  if (text.length < 2 || text.length > 45) return undefined;
  const dbl = text.indexOf('::');
  if (dbl >= 0 && text.indexOf('::', dbl + 1) >= 0) return undefined;
  const groups: number[] = [];
  const parseSide = (side: string, isLast: boolean): boolean => {
    if (side === '') return true;
    const parts = side.split(':');
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i] ?? '';
      if (isLast && i === parts.length - 1 && p.includes('.')) {
        const v4 = parseIPv4Address(p);
        if (v4 === undefined) return false;
        groups.push(v4 >>> 16, v4 & 0xffff);
      } else if (HEX_GROUP.test(p)) {
        groups.push(parseInt(p, 16));
      } else {
        return false;
      }
    }
    return true;
  };
  if (dbl < 0) {
    if (!parseSide(text, true) || groups.length !== 8) return undefined;
    return groups;
  }
  if (!parseSide(text.slice(0, dbl), false)) return undefined;
  const head = groups.length;
  if (!parseSide(text.slice(dbl + 2), true)) return undefined;
  const tail = groups.splice(head);
  // `::` stands for at least one zero group.
  if (head + tail.length > 7) return undefined;
  while (groups.length + tail.length < 8) groups.push(0);
  groups.push(...tail);
  return groups;
}

/** RFC 5952 text of 8 groups (no IPv4-mapped special case: canonicalAddress handles that). */
export function formatIPv6Groups(groups: readonly number[]): string {
  let bestAt = -1;
  let bestLen = 1; // a single zero group is not compressed
  for (let i = 0; i < 8; ) {
    if ((groups[i] ?? 0) !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && (groups[j] ?? 0) === 0) j++;
    if (j - i > bestLen) {
      bestAt = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number): string =>
    groups
      .slice(from, to)
      .map((g) => g.toString(16))
      .join(':');
  if (bestAt < 0) return hex(0, 8);
  return `${hex(0, bestAt)}::${hex(bestAt + bestLen, 8)}`;
}

/** The groups of the prefix `length` of `groups` (host bits cleared), for text forms (the packet path uses maskAddress6). */
export function maskIPv6Groups(groups: readonly number[], length: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < 8; i++) {
    const bits = Math.max(0, Math.min(16, length - i * 16));
    out.push((groups[i] ?? 0) & (bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff));
  }
  return out;
}

/**
 * RFC 5952 text: lower case, no leading zeros, the longest run of two or
 * more zero groups (the first of equal runs) as "::", and an IPv4-mapped
 * address as ::ffff:a.b.c.d.
 */
export function formatIPv6Address(a: Address6): string {
  if (isIPv4Mapped(a)) return `::ffff:${formatIPv4Address(a[3] ?? 0)}`;
  const g: number[] = [];
  for (let w = 0; w < 4; w++) g.push((a[w] ?? 0) >>> 16, (a[w] ?? 0) & 0xffff);
  return formatIPv6Groups(g);
}

/** "2001:2::/48" (host bits cleared) or a bare address (/128); undefined if malformed. */
export function parseCidr6(text: string): { network: Address6; length: number } | undefined {
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const lenText = slash < 0 ? '128' : text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(lenText)) return undefined;
  const length = Number(lenText);
  if (length > 128) return undefined;
  const network = parseIPv6Address(addrText);
  if (network === undefined) return undefined;
  maskAddress6(network, length, network);
  return { network, length };
}

/** `a`/`length` as text, host bits cleared: "2001:2:0:1::/64". */
export function formatPrefix6(a: Address6, length: number): string {
  const m = newAddress6();
  maskAddress6(a, length, m);
  return `${formatIPv6Address(m)}/${length}`;
}
