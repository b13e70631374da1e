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

/** Pseudo-header sum (RFC 793 / 768) for the packet's L4 segment. */
export function pseudoHeaderSum(info: PacketInfo): number {
  let s = (info.src >>> 16) + (info.src & 0xffff) + (info.dst >>> 16) + (info.dst & 0xffff);
  s += info.protocol + info.l4Length;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** Computes the checksum the L4 header should carry (field itself counted as 0). */
export function computeL4Checksum(buf: Uint8Array, info: PacketInfo): number {
  const l4 = info.l4Offset;
  const field = info.protocol === IpProtocol.Tcp ? 16 : info.protocol === IpProtocol.Udp ? 6 : 2;
  const initial = info.protocol === IpProtocol.Icmp ? 0 : pseudoHeaderSum(info);
  const withField = onesComplementSum(buf, l4, info.l4Length, initial);
  // Remove the stored field from the sum: add its one's complement.
  let s = withField + (~readU16(buf, l4 + field) & 0xffff);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  const c = finishChecksum(s);
  return info.protocol === IpProtocol.Udp && c === 0 ? 0xffff : c;
}

/** Whether the TCP, UDP or ICMP checksum is right (UDP 0 = none = right). */
export function l4ChecksumOk(buf: Uint8Array, info: PacketInfo): boolean {
  const l4 = info.l4Offset;
  if (info.protocol === IpProtocol.Udp && readU16(buf, l4 + 6) === 0) return true;
  const initial = info.protocol === IpProtocol.Icmp ? 0 : pseudoHeaderSum(info);
  return onesComplementSum(buf, l4, info.l4Length, initial) === 0xffff;
}
