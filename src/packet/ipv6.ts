/**
 * Allocation-free parsing of IPv6 packets as NFQUEUE and NFLOG hand them
 * over (no link-layer header), into the same caller-owned PacketInfo as
 * parseIPv4 (ipv4.ts), with the same contract: it never throws and never
 * allocates, whatever the bytes, and returns a ParseStatus (labels in
 * parseStatusName; IPv6 adds codes after the IPv4 ones).
 *
 * The chain walked: the fixed header, then any of Hop-by-Hop Options (first
 * only), Destination Options, Routing and Fragment headers, in any order
 * (RFC 8200 4.1: receivers accept any order; the kernel's own walk,
 * ipv6_skip_exthdr, does too), at most MAX_EXT_HEADERS of them, then the
 * upper layer: TCP, UDP and ICMPv6 parsed like TCP, UDP and ICMP for IPv4;
 * any other upper-layer protocol is well-formed IP (Ok, protocol set,
 * payload = its bytes), as for IPv4.
 *
 * Fragments, as this kernel hands them over (checked on 6.18 in network
 * namespaces, and in net/ipv6/netfilter/nf_conntrack_reasm.c): once
 * conntrack is in use in the namespace (the front node's DNAT needs it),
 * nf_defrag_ipv6 reassembles at PREROUTING/OUTPUT priority -400, before any
 * queue or log rule, and nf_ct_frag6_reasm() REMOVES the Fragment header:
 * the queued packet is a plain IPv6 packet whose payload length covers the
 * whole datagram (a 3000-byte ping6 arrived as one 3048-byte packet with
 * next header 58). An atomic fragment (offset 0, M clear, RFC 6946) goes
 * through the same reassembly and loses its header too. What can still
 * arrive with a Fragment header: packets of a namespace without conntrack
 * (each fragment queued as sent: seen), and fragments the defragmenter
 * passes untouched (e.g. a first fragment missing the upper-layer header,
 * RFC 8200 4.5). So: an atomic fragment is accepted (it is a whole packet;
 * its id goes to `identification`); any fragment with a non-zero offset or
 * M set is refused as Fragment (same code as IPv4), since only the first
 * has ports and steering by connection needs them.
 *
 * Refused, and why (each a status of its own, counted by label):
 *  - HopByHopNotFirst: RFC 8200 4.3 allows Hop-by-Hop only right after the
 *    fixed header; the kernel drops it elsewhere on local delivery.
 *  - TooManyExtHeaders: more than MAX_EXT_HEADERS headers. A legitimate
 *    client sends at most a few (RFC 8200's full recommended order is 6
 *    before the upper layer); long chains are an evasion and CPU trick
 *    (RFC 7112, RFC 9098).
 *  - Ipsec: AH or ESP. ESP hides the ports; AH-protected web traffic does
 *    not exist in practice, and a rewrite would break its ICV.
 *  - UnknownExtHeader: a header registered as an extension header that we
 *    cannot walk (Mobility 135, HIP 139, Shim6 140, experimental 253/254):
 *    the upper layer behind it cannot be found safely.
 *  - RoutingHeader: a Routing header with Segments Left > 0: the
 *    destination address is not the final one, so steering by it would be
 *    wrong (and type 0 is deprecated, RFC 5095). Segments Left 0 (the
 *    header is spent) is accepted.
 *  - Jumbogram: a Hop-by-Hop Jumbo Payload option (RFC 2675) or a zero
 *    payload length with Hop-by-Hop: never on a link of MTU < 64 KiB, and
 *    every length below assumes 16 bits.
 *  - BadExtOption: Hop-by-Hop or Destination Options TLVs that overrun
 *    their header (the kernel drops those as well).
 *  - UdpZeroChecksum: UDP over IPv6 must carry a checksum (RFC 8200 8.1);
 *    receivers discard zero, and an incremental rewrite cannot fix it.
 *  - Truncated, BadTcpHeader, BadUdpLength: as for IPv4. Bytes beyond
 *    40 + payload length are ignored.
 */
import { readU16, readU32 } from './checksum.ts';
import { IpProtocol, ParseStatus, parseTransport, type PacketInfo, type ParseStatusCode } from './ipv4.ts';

/** Next Header values of the extension headers (IANA "IPv6 Extension Header Types"). */
export const NextHeader = {
  HopByHop: 0,
  Routing: 43,
  Fragment: 44,
  Esp: 50,
  Ah: 51,
  NoNextHeader: 59,
  DestinationOptions: 60,
  Mobility: 135,
  Hip: 139,
  Shim6: 140,
  Experimental1: 253,
  Experimental2: 254,
} as const;

/** Most extension headers walked before the upper layer. */
export const MAX_EXT_HEADERS = 8;

const IPV6_HEADER = 40;
const UDP_HEADER = 8;
const JUMBO_OPTION = 0xc2;

/**
 * Checks the TLV options of a Hop-by-Hop or Destination Options header at
 * [start, end) (after its 2-byte prefix); returns Ok, Jumbogram or
 * BadExtOption.
 */
function checkOptions(buf: Uint8Array, start: number, end: number): ParseStatusCode {
  let i = start;
  while (i < end) {
    const type = buf[i] ?? 0;
    if (type === 0) {
      i++; // Pad1 has no length byte
      continue;
    }
    if (i + 2 > end) return ParseStatus.BadExtOption;
    const next = i + 2 + (buf[i + 1] ?? 0);
    if (next > end) return ParseStatus.BadExtOption;
    if (type === JUMBO_OPTION) return ParseStatus.Jumbogram;
    i = next;
  }
  return ParseStatus.Ok;
}

/** Parses the IPv6 packet at buf[offset .. offset+length) into `out`. */
export function parseIPv6(buf: Uint8Array, offset: number, length: number, out: PacketInfo): ParseStatusCode {
  out.reset();
  out.offset = offset;
  if (length < 1 || offset < 0 || offset + length > buf.length) return ParseStatus.Truncated;
  const b0 = buf[offset] ?? 0;
  if (b0 >>> 4 !== 6) return ParseStatus.NotIPv6;
  if (length < IPV6_HEADER) return ParseStatus.Truncated;
  const payloadLength = readU16(buf, offset + 4);
  let nh = buf[offset + 6] ?? 0;
  if (payloadLength === 0 && nh === NextHeader.HopByHop) {
    // RFC 2675: a jumbogram says zero here and its length in the option.
    // Report it as such when the option is visible; anything else with a
    // zero payload length cannot hold a Hop-by-Hop header.
    const hbhEnd = offset + IPV6_HEADER + ((buf[offset + IPV6_HEADER + 1] ?? 0) + 1) * 8;
    if (length >= IPV6_HEADER + 8 && hbhEnd <= offset + length) {
      if (checkOptions(buf, offset + IPV6_HEADER + 2, hbhEnd) === ParseStatus.Jumbogram) return ParseStatus.Jumbogram;
    }
    return ParseStatus.Truncated;
  }
  const total = IPV6_HEADER + payloadLength;
  if (total > length) return ParseStatus.Truncated;

  const w0 = readU32(buf, offset);
  out.family = 6;
  out.trafficClass = (w0 >>> 20) & 0xff;
  out.flowLabel = w0 & 0xfffff;
  out.totalLength = total;
  out.ttl = buf[offset + 7] ?? 0;
  const s = out.src6;
  const d = out.dst6;
  s[0] = readU32(buf, offset + 8);
  s[1] = readU32(buf, offset + 12);
  s[2] = readU32(buf, offset + 16);
  s[3] = readU32(buf, offset + 20);
  d[0] = readU32(buf, offset + 24);
  d[1] = readU32(buf, offset + 28);
  d[2] = readU32(buf, offset + 32);
  d[3] = readU32(buf, offset + 36);

  // The extension-header walk: `pos` only grows, by at least 8 per header,
  // and every header is checked to lie within [offset, end) before a byte
  // of it is read, so the loop is bounded by both the count and the length.
  const end = offset + total;
  let pos = offset + IPV6_HEADER;
  let count = 0;
  for (;;) {
    if (
      nh === NextHeader.HopByHop ||
      nh === NextHeader.DestinationOptions ||
      nh === NextHeader.Routing ||
      nh === NextHeader.Fragment
    ) {
      if (nh === NextHeader.HopByHop && count !== 0) return ParseStatus.HopByHopNotFirst;
      if (count === MAX_EXT_HEADERS) return ParseStatus.TooManyExtHeaders;
      if (pos + 8 > end) return ParseStatus.Truncated;
      const next = buf[pos] ?? 0;
      let len = 8; // the Fragment header's fixed size
      if (nh === NextHeader.Fragment) {
        const frag = readU16(buf, pos + 2);
        // Offset (high 13 bits) non-zero or M (bit 0) set: a real fragment
        // (bits 1-2 are reserved, ignored on receipt).
        if ((frag & 0xfff9) !== 0) return ParseStatus.Fragment;
        out.identification = readU32(buf, pos + 4);
      } else {
        len = ((buf[pos + 1] ?? 0) + 1) * 8;
        if (pos + len > end) return ParseStatus.Truncated;
        if (nh === NextHeader.Routing) {
          if ((buf[pos + 3] ?? 0) !== 0) return ParseStatus.RoutingHeader;
        } else {
          const st = checkOptions(buf, pos + 2, pos + len);
          if (st !== ParseStatus.Ok) return st;
        }
      }
      nh = next;
      pos += len;
      count++;
      continue;
    }
    if (nh === NextHeader.Esp || nh === NextHeader.Ah) return ParseStatus.Ipsec;
    if (
      nh === NextHeader.Mobility ||
      nh === NextHeader.Hip ||
      nh === NextHeader.Shim6 ||
      nh === NextHeader.Experimental1 ||
      nh === NextHeader.Experimental2
    ) {
      return ParseStatus.UnknownExtHeader;
    }
    break;
  }

  out.extHeaderCount = count;
  out.protocol = nh;
  out.headerLength = pos - offset;
  const l4 = pos;
  const l4Length = end - pos;
  out.l4Offset = l4;
  out.l4Length = l4Length;

  // RFC 8200 8.1: a zero UDP checksum is not allowed over IPv6 (receivers discard it).
  if (nh === IpProtocol.Udp && l4Length >= UDP_HEADER && readU16(buf, l4 + 6) === 0 && readU16(buf, l4 + 4) >= UDP_HEADER && readU16(buf, l4 + 4) <= l4Length) return ParseStatus.UdpZeroChecksum;
  // No Next Header (59): nothing follows, whatever the payload length says.
  if (nh === NextHeader.NoNextHeader) {
    out.payloadOffset = l4;
    out.payloadLength = 0;
    return ParseStatus.Ok;
  }
  return parseTransport(buf, l4, l4Length, nh, IpProtocol.Icmpv6, out);
}
