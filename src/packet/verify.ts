/**
 * Full checksum verification: for tests, diagnostics and the benchmark's
 * self-check, not for the hot path (the kernel has already verified what it
 * queues to us).
 */
import { finishChecksum, onesComplementSum, readU16 } from './checksum.ts';
import { IpProtocol, type PacketInfo } from './ipv4.ts';

export function ipv4HeaderChecksumOk(buf: Uint8Array, info: PacketInfo): boolean {
  return onesComplementSum(buf, info.offset, info.headerLength) === 0xffff;
}

/**
 * IPv6 pseudo-header sum (RFC 8200 8.1): both addresses, the upper-layer
 * length as 32 bits and the next header, for the packet's L4 segment.
 */
export function pseudoHeaderSum6(info: PacketInfo): number {
  let s = info.protocol + (info.l4Length >>> 16) + (info.l4Length & 0xffff);
  for (let w = 0; w < 4; w++) {
    const a = info.src6[w] ?? 0;
    const b = info.dst6[w] ?? 0;
    s += (a >>> 16) + (a & 0xffff) + (b >>> 16) + (b & 0xffff);
  }
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** Pseudo-header sum (RFC 793 / 768; RFC 8200 8.1 for IPv6) for the packet's L4 segment. */
export function pseudoHeaderSum(info: PacketInfo): number {
  if (info.family === 6) return pseudoHeaderSum6(info);
  let s = (info.src >>> 16) + (info.src & 0xffff) + (info.dst >>> 16) + (info.dst & 0xffff);
  s += info.protocol + info.l4Length;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** ICMP for IPv4 sums its message only; ICMPv6, TCP and UDP include the pseudo-header. */
function noPseudoHeader(info: PacketInfo): boolean {
  return info.protocol === IpProtocol.Icmp && info.family !== 6;
}

/** Computes the checksum the L4 header should carry (field itself counted as 0). */
export function computeL4Checksum(buf: Uint8Array, info: PacketInfo): number {
  const l4 = info.l4Offset;
  const field = info.protocol === IpProtocol.Tcp ? 16 : info.protocol === IpProtocol.Udp ? 6 : 2;
  const initial = noPseudoHeader(info) ? 0 : pseudoHeaderSum(info);
  const withField = onesComplementSum(buf, l4, info.l4Length, initial);
  // Remove the stored field from the sum: add its one's complement.
  let s = withField + (~readU16(buf, l4 + field) & 0xffff);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  const c = finishChecksum(s);
  return info.protocol === IpProtocol.Udp && c === 0 ? 0xffff : c;
}

/** Whether the TCP, UDP, ICMP or ICMPv6 checksum is right (UDP 0 = none = right for IPv4; wrong for IPv6). */
export function l4ChecksumOk(buf: Uint8Array, info: PacketInfo): boolean {
  const l4 = info.l4Offset;
  if (info.protocol === IpProtocol.Udp && readU16(buf, l4 + 6) === 0) return info.family !== 6;
  const initial = noPseudoHeader(info) ? 0 : pseudoHeaderSum(info);
  return onesComplementSum(buf, l4, info.l4Length, initial) === 0xffff;
}
