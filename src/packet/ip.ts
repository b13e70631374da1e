/**
 * parseIP: one entry point for packets of either family, as NFQUEUE and
 * NFLOG hand them over (no link-layer header, so the version nibble is the
 * only family mark). It never throws and never allocates: it reads one
 * byte and calls parseIPv4 (ipv4.ts) or parseIPv6 (ipv6.ts), which fill the
 * same PacketInfo (`family` says which).
 */
import { ParseStatus, parseIPv4, type PacketInfo, type ParseStatusCode } from './ipv4.ts';
import { parseIPv6 } from './ipv6.ts';

export function parseIP(buf: Uint8Array, offset: number, length: number, out: PacketInfo): ParseStatusCode {
  if (length < 1 || offset < 0 || offset + length > buf.length) {
    out.reset();
    out.offset = offset;
    return ParseStatus.Truncated;
  }
  const version = (buf[offset] ?? 0) >>> 4;
  if (version === 4) return parseIPv4(buf, offset, length, out);
  if (version === 6) return parseIPv6(buf, offset, length, out);
  out.reset();
  out.offset = offset;
  return ParseStatus.UnknownVersion;
}

/**
 * For a copy cut short on purpose (an NFLOG snaplen: only the headers
 * matter), lowers the length field to what was copied so the parsers do
 * not report the cut as Truncated: IPv4's total length, IPv6's payload
 * length (left alone when 0: a jumbogram stays refused as one). Writes
 * into `buf` (the log's receive area, never sent back). No effect on a
 * complete packet, a copy shorter than the fixed header, or other versions.
 */
export function clampToCopy(buf: Uint8Array, offset: number, length: number): void {
  if (length < 1 || offset < 0 || offset + length > buf.length) return;
  const version = (buf[offset] ?? 0) >>> 4;
  if (version === 4) {
    if (length >= 4 && (((buf[offset + 2] ?? 0) << 8) | (buf[offset + 3] ?? 0)) > length) {
      buf[offset + 2] = length >>> 8;
      buf[offset + 3] = length & 0xff;
    }
  } else if (version === 6 && length >= 40) {
    const payload = ((buf[offset + 4] ?? 0) << 8) | (buf[offset + 5] ?? 0);
    if (payload !== 0 && 40 + payload > length) {
      buf[offset + 4] = (length - 40) >>> 8;
      buf[offset + 5] = (length - 40) & 0xff;
    }
  }
}
