/**
 * In-place address and port rewrites with incremental checksum updates
 * (RFC 1624), for a packet already parsed by parseIPv4() or parseIPv6()
 * into `info`. The port setters serve both families; addresses have a
 * setter per family (IPv6 has no header checksum, and its ICMPv6 checksum
 * covers the pseudo-header, RFC 8200 8.1, unlike ICMP for IPv4).
 *
 * Precondition: the L4 checksum is complete. That holds for NFQUEUE without
 * the GSO flag (the kernel completes checksums before queueing); with GSO,
 * packets flagged checksumNotReady carry a partial pseudo-header sum and
 * must not be rewritten with these functions.
 */
import { writeAddress6 } from './address6.ts';
import { readU16, updateChecksum128, updateChecksum16, updateChecksum32, writeU16, writeU32 } from './checksum.ts';
import { IpProtocol, type PacketInfo } from './ipv4.ts';

const IP_CHECKSUM = 10;
const TCP_CHECKSUM = 16;
const UDP_CHECKSUM = 6;
const ICMPV6_CHECKSUM = 2;
const IPV6_SRC = 8;
const IPV6_DST = 24;

/** Offset of the L4 checksum field, or -1 if the protocol has none we keep. */
function l4ChecksumOffset(info: PacketInfo): number {
  if (info.protocol === IpProtocol.Tcp) return info.l4Offset + TCP_CHECKSUM;
  if (info.protocol === IpProtocol.Udp) return info.l4Offset + UDP_CHECKSUM;
  if (info.protocol === IpProtocol.Icmpv6 && info.family === 6) return info.l4Offset + ICMPV6_CHECKSUM;
  return -1;
}

function fixL4(buf: Uint8Array, info: PacketInfo, oldValue: number, newValue: number, wide: boolean): void {
  const at = l4ChecksumOffset(info);
  if (at < 0) return; // ICMP has no pseudo-header: addresses do not enter it
  const old = readU16(buf, at);
  // UDP checksum 0 means "none" (RFC 768): leave it so.
  if (info.protocol === IpProtocol.Udp && old === 0) return;
  let c = wide ? updateChecksum32(old, oldValue, newValue) : updateChecksum16(old, oldValue, newValue);
  // A computed UDP checksum of 0 is sent as 0xFFFF (RFC 768).
  if (info.protocol === IpProtocol.Udp && c === 0) c = 0xffff;
  writeU16(buf, at, c);
}

function setAddress(buf: Uint8Array, info: PacketInfo, field: number, oldAddr: number, newAddr: number): void {
  const ipc = info.offset + IP_CHECKSUM;
  writeU32(buf, info.offset + field, newAddr);
  writeU16(buf, ipc, updateChecksum32(readU16(buf, ipc), oldAddr, newAddr));
  fixL4(buf, info, oldAddr, newAddr, true);
}

/** Rewrites the destination address (IP and TCP/UDP pseudo-header checksums). */
export function setDestinationAddress(buf: Uint8Array, info: PacketInfo, addr: number): void {
  const a = addr >>> 0;
  setAddress(buf, info, 16, info.dst, a);
  info.dst = a;
}

/** Rewrites the source address (IP and TCP/UDP pseudo-header checksums). */
export function setSourceAddress(buf: Uint8Array, info: PacketInfo, addr: number): void {
  const a = addr >>> 0;
  setAddress(buf, info, 12, info.src, a);
  info.src = a;
}

/** Rewrites the destination port of TCP or UDP; returns false for other protocols. */
export function setDestinationPort(buf: Uint8Array, info: PacketInfo, port: number): boolean {
  if (info.protocol !== IpProtocol.Tcp && info.protocol !== IpProtocol.Udp) return false;
  writeU16(buf, info.l4Offset + 2, port);
  fixL4(buf, info, info.dstPort, port & 0xffff, false);
  info.dstPort = port & 0xffff;
  return true;
}

/** Rewrites the source port of TCP or UDP; returns false for other protocols. */
export function setSourcePort(buf: Uint8Array, info: PacketInfo, port: number): boolean {
  if (info.protocol !== IpProtocol.Tcp && info.protocol !== IpProtocol.Udp) return false;
  writeU16(buf, info.l4Offset, port);
  fixL4(buf, info, info.srcPort, port & 0xffff, false);
  info.srcPort = port & 0xffff;
  return true;
}

function setAddress6(buf: Uint8Array, info: PacketInfo, field: number, old: Uint32Array, addr: Uint32Array): void {
  writeAddress6(buf, info.offset + field, addr);
  const at = l4ChecksumOffset(info);
  if (at >= 0) {
    let c = updateChecksum128(readU16(buf, at), old, addr);
    // A computed UDP checksum of 0 is sent as 0xFFFF (zero is refused by parseIPv6).
    if (info.protocol === IpProtocol.Udp && c === 0) c = 0xffff;
    writeU16(buf, at, c);
  }
  old.set(addr);
}

/**
 * IPv6: rewrites the destination address (four big-endian u32 words) and
 * the TCP, UDP or ICMPv6 checksum; false (nothing changed) if `info` is not
 * an IPv6 packet.
 */
export function setDestinationAddress6(buf: Uint8Array, info: PacketInfo, addr: Uint32Array): boolean {
  if (info.family !== 6) return false;
  setAddress6(buf, info, IPV6_DST, info.dst6, addr);
  return true;
}

/** IPv6: rewrites the source address; see setDestinationAddress6. */
export function setSourceAddress6(buf: Uint8Array, info: PacketInfo, addr: Uint32Array): boolean {
  if (info.family !== 6) return false;
  setAddress6(buf, info, IPV6_SRC, info.src6, addr);
  return true;
}
