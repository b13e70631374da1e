/**
 * Allocation-free parsing of IPv4 packets carrying TCP, UDP or ICMP, as
 * handed over by NFQUEUE (no link-layer header).
 *
 * parseIPv4() fills a caller-owned PacketInfo and returns a ParseStatus
 * number; it never throws and never allocates, whatever the bytes. Callers
 * count non-Ok results by status (parseStatusName gives the label).
 *
 * What counts as malformed, and why:
 *  - Truncated: fewer bytes than the IP header, the total length or the L4
 *    header claims. (Bytes beyond the total length, e.g. link padding, are
 *    ignored.)
 *  - IpOptions: IHL > 5. No legitimate client of a web VIP needs options,
 *    and refusing them keeps L4 offsets fixed and closes source-routing
 *    tricks.
 *  - Fragment: MF set or a non-zero offset. A non-first fragment has no
 *    ports, so it cannot be steered by connection; connection setup
 *    packets are never fragmented in practice.
 *  - ReservedFlag: the reserved IP flag bit (RFC 791 says must be zero).
 */
import { readU16, readU32 } from './checksum.ts';

export const ParseStatus = {
  Ok: 0,
  Truncated: 1,
  NotIPv4: 2,
  BadHeaderLength: 3,
  IpOptions: 4,
  BadTotalLength: 5,
  Fragment: 6,
  ReservedFlag: 7,
  BadTcpHeader: 8,
  BadUdpLength: 9,
  // IPv6 (parseIPv6, parseIP in ip.ts). Appended: the codes above are metric
  // labels' indexes and must never move.
  NotIPv6: 10,
  UnknownVersion: 11,
  HopByHopNotFirst: 12,
  TooManyExtHeaders: 13,
  Ipsec: 14,
  UnknownExtHeader: 15,
  RoutingHeader: 16,
  Jumbogram: 17,
  BadExtOption: 18,
  UdpZeroChecksum: 19,
} as const;
export type ParseStatusCode = (typeof ParseStatus)[keyof typeof ParseStatus];

/** Labels for counters and logs, indexed by ParseStatusCode. */
export const parseStatusName: readonly string[] = [
  'ok',
  'truncated',
  'not_ipv4',
  'bad_header_length',
  'ip_options',
  'bad_total_length',
  'fragment',
  'reserved_flag',
  'bad_tcp_header',
  'bad_udp_length',
  'not_ipv6',
  'unknown_version',
  'hop_by_hop_not_first',
  'too_many_ext_headers',
  'ipsec',
  'unknown_ext_header',
  'routing_header',
  'jumbogram',
  'bad_ext_option',
  'udp_zero_checksum',
];

export const IpProtocol = { Icmp: 1, Tcp: 6, Udp: 17, Icmpv6: 58 } as const;

export const TcpFlag = {
  Fin: 0x01,
  Syn: 0x02,
  Rst: 0x04,
  Psh: 0x08,
  Ack: 0x10,
  Urg: 0x20,
  Ece: 0x40,
  Cwr: 0x80,
} as const;

const IPV4_HEADER = 20;
const TCP_HEADER = 20;
const UDP_HEADER = 8;
const ICMP_HEADER = 8;

/**
 * Parsed fields. One instance is reused for every packet; all offsets are
 * absolute (into the same buffer). Fields of other protocols are zero.
 *
 * Both families fill the same object (parseIPv4 here, parseIPv6 in
 * ipv6.ts); `family` says which parsed it. Addresses (design in address6.ts):
 * `src6`/`dst6` hold the 128-bit address as four big-endian u32 words for
 * BOTH families, an IPv4 address in its IPv4-mapped form ::ffff:a.b.c.d, so
 * code keyed by client address can serve both families with one layout;
 * `src`/`dst` keep the IPv4 address as a number (0 for IPv6), so the IPv4
 * paths written against them are unchanged.
 */
export class PacketInfo {
  /** 4 or 6 once a parser got as far as the addresses; 0 otherwise. */
  family = 0;
  /** Offset of the IP header in the buffer. */
  offset = 0;
  /** IPv4: IHL in bytes. IPv6: fixed header plus extension headers (l4Offset - offset). */
  headerLength = 0;
  /** IPv4: the total length field. IPv6: 40 + the payload length field. */
  totalLength = 0;
  /** The upper-layer protocol (IPv6: the last Next Header of the chain). */
  protocol = 0;
  /** IPv4 TTL or IPv6 hop limit. */
  ttl = 0;
  /** IPv4: the 16-bit identification. IPv6: the 32-bit id of an atomic Fragment header, else 0. */
  identification = 0;
  /** IPv6 only: traffic class, flow label, and how many extension headers were walked. */
  trafficClass = 0;
  flowLabel = 0;
  extHeaderCount = 0;
  /** IPv4 only: source and destination addresses as unsigned 32-bit numbers (0 for IPv6). */
  src = 0;
  dst = 0;
  /** Both families: the address as four big-endian u32 words (IPv4: ::ffff:a.b.c.d). Never replaced, only written. */
  readonly src6 = new Uint32Array(4);
  readonly dst6 = new Uint32Array(4);
  /** Offset of the L4 header and its length including data (totalLength - headerLength). */
  l4Offset = 0;
  l4Length = 0;
  srcPort = 0;
  dstPort = 0;
  /** TCP only. */
  tcpFlags = 0;
  tcpHeaderLength = 0;
  seq = 0;
  ack = 0;
  window = 0;
  /** UDP only: the UDP length field. */
  udpLength = 0;
  /** ICMP only. */
  icmpType = 0;
  icmpCode = 0;
  /** ICMP echo only: identifier and sequence number. */
  icmpId = 0;
  icmpSeq = 0;
  /** Application payload (after the L4 header). */
  payloadOffset = 0;
  payloadLength = 0;

  reset(): void {
    this.family = this.trafficClass = this.flowLabel = this.extHeaderCount = 0;
    const s = this.src6;
    const d = this.dst6;
    s[0] = s[1] = s[2] = s[3] = d[0] = d[1] = d[2] = d[3] = 0;
    this.offset = this.headerLength = this.totalLength = this.protocol = this.ttl = this.identification = 0;
    this.src = this.dst = this.l4Offset = this.l4Length = this.srcPort = this.dstPort = 0;
    this.tcpFlags = this.tcpHeaderLength = this.seq = this.ack = this.window = this.udpLength = 0;
    this.icmpType = this.icmpCode = this.icmpId = this.icmpSeq = this.payloadOffset = this.payloadLength = 0;
  }
}

/** Parses the packet at buf[offset .. offset+length). */
export function parseIPv4(buf: Uint8Array, offset: number, length: number, out: PacketInfo): ParseStatusCode {
  out.reset();
  out.offset = offset;
  if (length < 1 || offset < 0 || offset + length > buf.length) return ParseStatus.Truncated;
  const b0 = buf[offset] ?? 0;
  if (b0 >>> 4 !== 4) return ParseStatus.NotIPv4;
  if (length < IPV4_HEADER) return ParseStatus.Truncated;
  const ihl = (b0 & 0x0f) * 4;
  if (ihl < IPV4_HEADER) return ParseStatus.BadHeaderLength;
  if (ihl > IPV4_HEADER) return ParseStatus.IpOptions;
  const total = readU16(buf, offset + 2);
  if (total < ihl) return ParseStatus.BadTotalLength;
  if (total > length) return ParseStatus.Truncated;
  const fragWord = readU16(buf, offset + 6);
  if ((fragWord & 0x8000) !== 0) return ParseStatus.ReservedFlag;
  if ((fragWord & 0x2000) !== 0 || (fragWord & 0x1fff) !== 0) return ParseStatus.Fragment;

  out.headerLength = ihl;
  out.totalLength = total;
  out.identification = readU16(buf, offset + 4);
  out.ttl = buf[offset + 8] ?? 0;
  out.protocol = buf[offset + 9] ?? 0;
  out.src = readU32(buf, offset + 12);
  out.dst = readU32(buf, offset + 16);
  // The IPv4-mapped form ::ffff:a.b.c.d (address6.ts): words 0 and 1 stay 0 from reset().
  out.family = 4;
  out.src6[2] = out.dst6[2] = 0xffff;
  out.src6[3] = out.src;
  out.dst6[3] = out.dst;
  const l4 = offset + ihl;
  const l4Length = total - ihl;
  out.l4Offset = l4;
  out.l4Length = l4Length;

  return parseTransport(buf, l4, l4Length, out.protocol, IpProtocol.Icmp, out);
}

/**
 * The transport header at `l4` (`l4Length` bytes up to the IP packet's
 * end), shared by parseIPv4 and parseIPv6: TCP, UDP, and ICMP of the
 * family (`icmpProtocol`: 1, or 58 for ICMPv6, whose echo id and sequence
 * sit at the same offsets). Other protocols are well-formed IP: their
 * payload is the rest. Never throws, never allocates.
 */
export function parseTransport(buf: Uint8Array, l4: number, l4Length: number, protocol: number, icmpProtocol: number, out: PacketInfo): ParseStatusCode {
  switch (protocol) {
    case IpProtocol.Tcp: {
      if (l4Length < TCP_HEADER) return ParseStatus.Truncated;
      const doff = ((buf[l4 + 12] ?? 0) >>> 4) * 4;
      if (doff < TCP_HEADER) return ParseStatus.BadTcpHeader;
      if (doff > l4Length) return ParseStatus.Truncated;
      out.srcPort = readU16(buf, l4);
      out.dstPort = readU16(buf, l4 + 2);
      out.seq = readU32(buf, l4 + 4);
      out.ack = readU32(buf, l4 + 8);
      out.tcpFlags = buf[l4 + 13] ?? 0;
      out.window = readU16(buf, l4 + 14);
      out.tcpHeaderLength = doff;
      out.payloadOffset = l4 + doff;
      out.payloadLength = l4Length - doff;
      return ParseStatus.Ok;
    }
    case IpProtocol.Udp: {
      if (l4Length < UDP_HEADER) return ParseStatus.Truncated;
      const ulen = readU16(buf, l4 + 4);
      if (ulen < UDP_HEADER || ulen > l4Length) return ParseStatus.BadUdpLength;
      out.srcPort = readU16(buf, l4);
      out.dstPort = readU16(buf, l4 + 2);
      out.udpLength = ulen;
      out.payloadOffset = l4 + UDP_HEADER;
      out.payloadLength = ulen - UDP_HEADER;
      return ParseStatus.Ok;
    }
    case icmpProtocol: {
      if (l4Length < ICMP_HEADER) return ParseStatus.Truncated;
      out.icmpType = buf[l4] ?? 0;
      out.icmpCode = buf[l4 + 1] ?? 0;
      out.icmpId = readU16(buf, l4 + 4);
      out.icmpSeq = readU16(buf, l4 + 6);
      out.payloadOffset = l4 + ICMP_HEADER;
      out.payloadLength = l4Length - ICMP_HEADER;
      return ParseStatus.Ok;
    }
    default:
      // Other protocols are well-formed IP; callers decide what to do.
      out.payloadOffset = l4;
      out.payloadLength = l4Length;
      return ParseStatus.Ok;
  }
}
