/**
 * Internet checksum (RFC 1071) and its incremental update (RFC 1624).
 *
 * Checksum fields are stored big-endian on the wire; every function here
 * reads and writes 16-bit words big-endian explicitly, so the arithmetic is
 * done on the values the RFCs talk about, whatever the host byte order.
 */

/** One's-complement sum of `len` bytes at `off`, folded to 16 bits, added to `initial`. */
export function onesComplementSum(buf: Uint8Array, off: number, len: number, initial = 0): number {
  let sum = initial;
  const end = off + (len & ~1);
  for (let i = off; i < end; i += 2) sum += ((buf[i] ?? 0) << 8) | (buf[i + 1] ?? 0);
  if ((len & 1) !== 0) sum += (buf[off + len - 1] ?? 0) << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + Math.floor(sum / 0x10000);
  return sum;
}

/** The checksum field value for data whose one's-complement sum is `sum`. */
export function finishChecksum(sum: number): number {
  return ~sum & 0xffff;
}

/**
 * RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), for one 16-bit word changed from
 * `oldWord` to `newWord`. Unlike eqn. 2 of RFC 1141 it never yields 0x0000
 * from a non-zero-data header, which the receiver would treat differently.
 */
export function updateChecksum16(checksum: number, oldWord: number, newWord: number): number {
  let s = (~checksum & 0xffff) + (~oldWord & 0xffff) + (newWord & 0xffff);
  s = (s & 0xffff) + (s >>> 16);
  s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

/** RFC 1624 update for a 32-bit field (an IPv4 address): both halves. */
export function updateChecksum32(checksum: number, oldValue: number, newValue: number): number {
  const c = updateChecksum16(checksum, oldValue >>> 16, newValue >>> 16);
  return updateChecksum16(c, oldValue & 0xffff, newValue & 0xffff);
}

/**
 * RFC 1624 update for a 128-bit field (an IPv6 address) given as four
 * big-endian u32 words (address6.ts): all eight 16-bit halves.
 */
export function updateChecksum128(checksum: number, oldWords: Uint32Array, newWords: Uint32Array): number {
  let c = checksum;
  for (let w = 0; w < 4; w++) c = updateChecksum32(c, oldWords[w] ?? 0, newWords[w] ?? 0);
  return c;
}

export function readU16(buf: Uint8Array, off: number): number {
  return ((buf[off] ?? 0) << 8) | (buf[off + 1] ?? 0);
}

export function writeU16(buf: Uint8Array, off: number, value: number): void {
  buf[off] = (value >>> 8) & 0xff;
  buf[off + 1] = value & 0xff;
}

export function readU32(buf: Uint8Array, off: number): number {
  return (((buf[off] ?? 0) << 24) | ((buf[off + 1] ?? 0) << 16) | ((buf[off + 2] ?? 0) << 8) | (buf[off + 3] ?? 0)) >>> 0;
}

export function writeU32(buf: Uint8Array, off: number, value: number): void {
  buf[off] = (value >>> 24) & 0xff;
  buf[off + 1] = (value >>> 16) & 0xff;
  buf[off + 2] = (value >>> 8) & 0xff;
  buf[off + 3] = value & 0xff;
}
