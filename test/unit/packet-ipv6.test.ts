/**
 * The IPv6 codec (src/packet/ipv6.ts, ip.ts, address6.ts and the IPv6 parts
 * of checksum.ts, rewrite.ts, verify.ts), table-driven.
 *
 * Captured vectors: queued by NFQUEUE on kernel 6.18 in two namespaces on a
 * veth (2001:2::1 -> 2001:2::2, RFC 5180 range) with a queue listener on the
 * addon: ping6 -s 56 -p 61 and -s 3000 -p 62, a 2000-byte and an empty UDP
 * datagram, a TCP connect to a closed port, and what came back. "ct": the
 * rule used conntrack (nf_defrag_ipv6 active, as on a front node); "raw":
 * no conntrack in the namespace (fragments queued as sent). Each is kept as
 * its first bytes plus the fill byte that repeats to its end.
 */
import assert from 'node:assert/strict';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import {
  equalAddress6,
  formatIPv6Address,
  formatPrefix6,
  inPrefix6,
  isIPv4Mapped,
  maskAddress6,
  newAddress6,
  parseCidr6,
  parseIPv6Address,
  prefixWordMask,
  readAddress6,
  setIPv4Mapped,
} from '../../src/packet/address6.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { updateChecksum128 } from '../../src/packet/checksum.ts';
import { clampToCopy, parseIP } from '../../src/packet/ip.ts';
import { PacketInfo, ParseStatus, TcpFlag, parseIPv4, parseStatusName, type ParseStatusCode } from '../../src/packet/ipv4.ts';
import { MAX_EXT_HEADERS, parseIPv6 } from '../../src/packet/ipv6.ts';
import { setDestinationAddress6, setDestinationPort, setSourceAddress6, setSourcePort } from '../../src/packet/rewrite.ts';
import { computeL4Checksum, l4ChecksumOk } from '../../src/packet/verify.ts';
import { icmp, prng, tcp, udp } from '../helpers/packets.ts';
import {
  addr6,
  ah,
  captured,
  destOpts,
  esp,
  fragment,
  hopByHop,
  icmp6,
  ipv6,
  rawExt,
  routing,
  tcp6,
  udp6,
  type Ip6Spec,
} from '../helpers/packets6.ts';

const MSS_SACK_TS_WS = [2, 4, 5, 0xa0, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];
const ROUTER_ALERT = [5, 2, 0, 0];
const JUMBO = [0xc2, 4, 0, 1, 0, 0];

type NumericField = { [K in keyof PacketInfo]: PacketInfo[K] extends number ? K : never }[keyof PacketInfo];

interface Case {
  name: string;
  bytes: Uint8Array;
  status: ParseStatusCode;
  expect?: Partial<Record<NumericField, number>>;
  src?: string;
  dst?: string;
}

const A6 = (text: string): Uint32Array => {
  const a = parseIPv6Address(text);
  assert.ok(a, text);
  return a;
};

// --- captured -------------------------------------------------------------
const capturedCases: Case[] = [
  {
    name: 'ct: ICMPv6 echo request (ping6 -s 56)',
    bytes: captured('600861b700403a4020010002000000000000000000000001200100020000000000000000000000028000ee2f778e0001669b076b00000000c21a0e0000000000', 104, 0x61),
    status: ParseStatus.Ok,
    expect: { family: 6, protocol: 58, icmpType: 128, icmpCode: 0, icmpId: 0x778e, icmpSeq: 1, ttl: 64, flowLabel: 0x861b7, totalLength: 104, headerLength: 40, payloadLength: 56 },
    src: '2001:2::1',
    dst: '2001:2::2',
  },
  {
    name: 'ct: ICMPv6 echo reply',
    bytes: captured('600da1ef00403a4020010002000000000000000000000002200100020000000000000000000000018100ed2f778e0001669b076b00000000c21a0e0000000000', 104, 0x61),
    status: ParseStatus.Ok,
    expect: { icmpType: 129, icmpId: 0x778e, icmpSeq: 1 },
    src: '2001:2::2',
    dst: '2001:2::1',
  },
  {
    name: 'ct: a 3000-byte ping6, reassembled by nf_defrag_ipv6 (no Fragment header left)',
    bytes: captured('600861b70bc03a4020010002000000000000000000000001200100020000000000000000000000028000ccc1778f0001669b076b000000000e3e0e0000000000', 3048, 0x62),
    status: ParseStatus.Ok,
    expect: { protocol: 58, extHeaderCount: 0, totalLength: 3048, icmpType: 128, payloadLength: 3000, identification: 0 },
  },
  {
    name: 'ct: a 2000-byte UDP datagram, reassembled',
    bytes: captured('6008667007d8114020010002000000000000000000000001200100020000000000000000000000029c4114e907d82c38', 2048, 0x75),
    status: ParseStatus.Ok,
    expect: { protocol: 17, srcPort: 40001, dstPort: 5353, udpLength: 2008, payloadOffset: 48, payloadLength: 2000 },
  },
  {
    name: 'ct: UDP with an empty payload',
    bytes: captured('600866700008114020010002000000000000000000000001200100020000000000000000000000029c4114e900080eab', 48, 0),
    status: ParseStatus.Ok,
    expect: { protocol: 17, udpLength: 8, payloadOffset: 48, payloadLength: 0 },
  },
  {
    name: 'ct: TCP SYN with MSS, SACK, timestamps, window scale',
    bytes: captured('6006c097002806402001000200000000000000000000000120010002000000000000000000000002cc581f90ff2174a300000000a002fd2061f80000020405a00402080a29d11f70000000000103030a', 80, 0),
    status: ParseStatus.Ok,
    expect: { protocol: 6, srcPort: 0xcc58, dstPort: 8080, tcpFlags: TcpFlag.Syn, tcpHeaderLength: 40, seq: 0xff2174a3, window: 0xfd20, payloadOffset: 80, payloadLength: 0 },
  },
  {
    name: 'ct: TCP RST|ACK',
    bytes: captured('600dd6420014064020010002000000000000000000000002200100020000000000000000000000011f90cc5800000000ff2174a45014000010190000', 60, 0),
    status: ParseStatus.Ok,
    expect: { tcpFlags: TcpFlag.Rst | TcpFlag.Ack, ack: 0xff2174a4, srcPort: 8080 },
  },
  {
    name: 'ct: ICMPv6 port unreachable quoting the UDP datagram',
    bytes: captured('60079c9604d83a4020010002000000000000000000000002200100020000000000000000000000010104156c000000006008667007d8114020010002000000000000000000000001200100020000000000000000000000029c4114e907d82c38', 1280, 0x75),
    status: ParseStatus.Ok,
    expect: { icmpType: 1, icmpCode: 4, totalLength: 1280 },
  },
  {
    name: 'ct: MLDv2 report with Hop-by-Hop (router alert, PadN)',
    bytes: captured('6000000000380001fe80000000000000384e58fffe501dc3ff0200000000000000000000000000163a000502000001008f00a3780000000204000000ff0200000000000000000001ff501dc304000000ff0200000000000000000001ff000002', 96, 0),
    status: ParseStatus.Ok,
    expect: { protocol: 58, extHeaderCount: 1, headerLength: 48, l4Offset: 48, icmpType: 143, ttl: 1 },
    dst: 'ff02::16',
  },
  {
    name: 'ct: router solicitation',
    bytes: captured('6000000000103afffe80000000000000384e58fffe501dc3ff02000000000000000000000000000285001e6b0000000001013a4e58501dc3', 56, 0),
    status: ParseStatus.Ok,
    expect: { icmpType: 133, ttl: 255 },
  },
  {
    name: 'raw: first fragment of the 3000-byte ping6 (offset 0, M)',
    bytes: captured('600861b705b02c4020010002000000000000000000000001200100020000000000000000000000023a000001e2c112cb80002b8d780f00016c9b076b00000000b4f2020000000000', 1496, 0x62),
    status: ParseStatus.Fragment,
  },
  {
    name: 'raw: middle fragment (offset 1448, M)',
    bytes: captured('600861b705b02c4020010002000000000000000000000001200100020000000000000000000000023a0005a9e2c112cb', 1496, 0x62),
    status: ParseStatus.Fragment,
  },
  {
    name: 'raw: last fragment (offset 2896)',
    bytes: captured('600861b700782c4020010002000000000000000000000001200100020000000000000000000000023a000b50e2c112cb', 160, 0x62),
    status: ParseStatus.Fragment,
  },
  {
    name: 'raw: first fragment of the UDP datagram',
    bytes: captured('6008667005b02c40200100020000000000000000000000012001000200000000000000000000000211000001b691e9829c4114e907d82c38', 1496, 0x75),
    status: ParseStatus.Fragment,
  },
  {
    name: 'raw: last fragment of the UDP datagram',
    bytes: captured('6008667002382c402001000200000000000000000000000120010002000000000000000000000002110005a8b691e982', 608, 0x75),
    status: ParseStatus.Fragment,
  },
];

// --- synthetic ------------------------------------------------------------
const ip: Ip6Spec = {};
const syn: Parameters<typeof tcp6>[1] = { flags: TcpFlag.Syn, srcPort: 40000, dstPort: 80, seq: 7 };
const many = (n: number): Ip6Spec => ({ ext: Array.from({ length: n }, () => destOpts()) });

const syntheticCases: Case[] = [
  {
    name: 'TCP SYN, no extension headers',
    bytes: tcp6(ip, syn),
    status: ParseStatus.Ok,
    expect: { family: 6, protocol: 6, srcPort: 40000, dstPort: 80, seq: 7, tcpFlags: TcpFlag.Syn, headerLength: 40, l4Offset: 40, totalLength: 60, extHeaderCount: 0, src: 0, dst: 0 },
    src: '2001:2:0:11::2',
    dst: '2001:2:0:201::11',
  },
  { name: 'TCP SYN with options', bytes: tcp6(ip, { ...syn, options: MSS_SACK_TS_WS }), status: ParseStatus.Ok, expect: { tcpHeaderLength: 40, payloadOffset: 80 } },
  { name: 'TCP FIN|ACK with data', bytes: tcp6(ip, { flags: TcpFlag.Fin | TcpFlag.Ack, payload: [104, 105] }), status: ParseStatus.Ok, expect: { tcpFlags: TcpFlag.Fin | TcpFlag.Ack, payloadLength: 2 } },
  { name: 'traffic class and flow label', bytes: tcp6({ trafficClass: 0xb8, flowLabel: 0xabcde }, syn), status: ParseStatus.Ok, expect: { trafficClass: 0xb8, flowLabel: 0xabcde } },
  { name: 'link padding after the payload', bytes: tcp6({ trailer: 6 }, syn), status: ParseStatus.Ok, expect: { totalLength: 60, l4Length: 20 } },
  { name: 'UDP', bytes: udp6(ip, { srcPort: 5353, dstPort: 53, payload: [1, 2, 3] }), status: ParseStatus.Ok, expect: { srcPort: 5353, dstPort: 53, udpLength: 11, payloadLength: 3 } },
  { name: 'UDP zero-length payload', bytes: udp6(ip, {}), status: ParseStatus.Ok, expect: { udpLength: 8, payloadLength: 0 } },
  { name: 'ICMPv6 echo request', bytes: icmp6(ip, { type: 128, id: 0x77, seq: 3, payload: [1, 2, 3, 4] }), status: ParseStatus.Ok, expect: { protocol: 58, icmpType: 128, icmpId: 0x77, icmpSeq: 3, payloadLength: 4 } },
  { name: 'ICMPv6 echo reply', bytes: icmp6(ip, { type: 129, id: 0x77, seq: 4 }), status: ParseStatus.Ok, expect: { icmpType: 129, icmpSeq: 4 } },
  // each extension header
  { name: 'Hop-by-Hop (router alert) + TCP', bytes: tcp6({ ext: [hopByHop(ROUTER_ALERT)] }, syn), status: ParseStatus.Ok, expect: { extHeaderCount: 1, headerLength: 48, l4Offset: 48, dstPort: 80 } },
  { name: 'Hop-by-Hop with Pad1 only + UDP', bytes: udp6({ ext: [hopByHop([0, 0, 0, 0, 0, 0])] }, {}), status: ParseStatus.Ok, expect: { extHeaderCount: 1, l4Offset: 48 } },
  { name: 'Destination Options + TCP', bytes: tcp6({ ext: [destOpts([1, 4, 0, 0, 0, 0])] }, syn), status: ParseStatus.Ok, expect: { extHeaderCount: 1, l4Offset: 48 } },
  { name: 'Routing, segments left 0 + TCP', bytes: tcp6({ ext: [routing(4, 0, ['2001:2::9'])] }, syn), status: ParseStatus.Ok, expect: { extHeaderCount: 1, l4Offset: 64 } },
  { name: 'atomic fragment (offset 0, no M) + TCP', bytes: tcp6({ ext: [fragment(0, false, 0xdeadbeef)] }, syn), status: ParseStatus.Ok, expect: { extHeaderCount: 1, l4Offset: 48, identification: 0xdeadbeef } },
  { name: 'atomic fragment with the reserved bits set (ignored)', bytes: tcp6({ ext: [{ nh: 44, rest: [0xff, 0, 6, 0, 0, 0, 1] }] }, syn), status: ParseStatus.Ok },
  // chains
  {
    name: 'HbH, DestOpts, Routing(0 left), DestOpts, atomic Fragment + TCP',
    bytes: tcp6({ ext: [hopByHop(ROUTER_ALERT), destOpts(), routing(0, 0, ['2001:2::9']), destOpts([1, 12, ...new Array<number>(12).fill(0)]), fragment(0, false)] }, syn),
    status: ParseStatus.Ok,
    expect: { extHeaderCount: 5, l4Offset: 40 + 8 + 8 + 24 + 16 + 8, dstPort: 80 },
  },
  { name: 'HbH, DestOpts + ICMPv6 echo', bytes: icmp6({ ext: [hopByHop(), destOpts()] }, { type: 128, id: 9 }), status: ParseStatus.Ok, expect: { icmpType: 128, icmpId: 9, extHeaderCount: 2 } },
  { name: `${MAX_EXT_HEADERS} Destination Options headers`, bytes: tcp6(many(MAX_EXT_HEADERS), syn), status: ParseStatus.Ok, expect: { extHeaderCount: MAX_EXT_HEADERS } },
  { name: 'No Next Header', bytes: ipv6({ ext: [destOpts()] }, 59, [1, 2, 3]), status: ParseStatus.Ok, expect: { protocol: 59, payloadLength: 0 } },
  { name: 'GRE (another upper layer) is well-formed IP', bytes: ipv6({}, 47, [0, 0, 0x86, 0xdd]), status: ParseStatus.Ok, expect: { protocol: 47, payloadOffset: 40, payloadLength: 4 } },
  // refused
  { name: 'empty', bytes: new Uint8Array(0), status: ParseStatus.Truncated },
  { name: '39 bytes', bytes: tcp6(ip, syn).subarray(0, 39), status: ParseStatus.Truncated },
  { name: 'IPv4 packet', bytes: tcp({}, {}), status: ParseStatus.NotIPv6 },
  { name: 'version 5', bytes: tcp6({ version: 5 }, syn), status: ParseStatus.NotIPv6 },
  { name: 'payload length beyond the buffer', bytes: tcp6({ payloadLength: 400 }, syn), status: ParseStatus.Truncated },
  { name: 'Hop-by-Hop not first', bytes: tcp6({ ext: [destOpts(), hopByHop()] }, syn), status: ParseStatus.HopByHopNotFirst },
  { name: 'two Hop-by-Hop headers', bytes: tcp6({ ext: [hopByHop(), hopByHop()] }, syn), status: ParseStatus.HopByHopNotFirst },
  { name: `${MAX_EXT_HEADERS + 1} extension headers`, bytes: tcp6(many(MAX_EXT_HEADERS + 1), syn), status: ParseStatus.TooManyExtHeaders },
  { name: 'AH', bytes: tcp6({ ext: [ah()] }, syn), status: ParseStatus.Ipsec },
  { name: 'ESP', bytes: ipv6({ ext: [esp()] }, 6, []), status: ParseStatus.Ipsec },
  { name: 'AH after Hop-by-Hop', bytes: tcp6({ ext: [hopByHop(), ah()] }, syn), status: ParseStatus.Ipsec },
  { name: 'Mobility header', bytes: tcp6({ ext: [rawExt(135)] }, syn), status: ParseStatus.UnknownExtHeader },
  { name: 'HIP header', bytes: tcp6({ ext: [rawExt(139)] }, syn), status: ParseStatus.UnknownExtHeader },
  { name: 'Shim6 header', bytes: tcp6({ ext: [rawExt(140)] }, syn), status: ParseStatus.UnknownExtHeader },
  { name: 'experimental 253', bytes: tcp6({ ext: [rawExt(253)] }, syn), status: ParseStatus.UnknownExtHeader },
  { name: 'Routing type 0, segments left 1', bytes: tcp6({ ext: [routing(0, 1, ['2001:2::9'])] }, syn), status: ParseStatus.RoutingHeader },
  { name: 'SRH (type 4), segments left 2', bytes: tcp6({ ext: [routing(4, 2, ['2001:2::9', '2001:2::a'])] }, syn), status: ParseStatus.RoutingHeader },
  { name: 'first fragment (offset 0, M)', bytes: tcp6({ ext: [fragment(0, true)] }, syn), status: ParseStatus.Fragment },
  { name: 'later fragment (offset 185)', bytes: ipv6({ ext: [fragment(185, false)] }, 6, [1, 2, 3, 4, 5, 6, 7, 8]), status: ParseStatus.Fragment },
  { name: 'fragment after HbH and DestOpts', bytes: tcp6({ ext: [hopByHop(), destOpts(), fragment(1, true)] }, syn), status: ParseStatus.Fragment },
  { name: 'jumbo option, payload length 0', bytes: tcp6({ ext: [hopByHop(JUMBO)], payloadLength: 0 }, syn), status: ParseStatus.Jumbogram },
  { name: 'jumbo option with a non-zero payload length', bytes: tcp6({ ext: [hopByHop(JUMBO)] }, syn), status: ParseStatus.Jumbogram },
  { name: 'payload length 0 with Hop-by-Hop, no jumbo option', bytes: tcp6({ ext: [hopByHop()], payloadLength: 0 }, syn), status: ParseStatus.Truncated },
  { name: 'payload length 0 with TCP', bytes: tcp6({ payloadLength: 0 }, syn), status: ParseStatus.Truncated },
  { name: 'HbH option overruns its header', bytes: tcp6({ ext: [{ nh: 0, rest: [0, 1, 9, 0, 0, 0, 0] }] }, syn), status: ParseStatus.BadExtOption },
  { name: 'DestOpts option type without its length byte', bytes: tcp6({ ext: [{ nh: 60, rest: [0, 0, 0, 0, 0, 0, 5] }] }, syn), status: ParseStatus.BadExtOption },
  { name: 'extension header longer than the payload', bytes: tcp6({ ext: [{ nh: 60, rest: [200, 1, 4, 0, 0, 0, 0] }] }, syn), status: ParseStatus.Truncated },
  { name: 'extension header cut by the payload length', bytes: ipv6({ ext: [destOpts()], payloadLength: 4 }, 6, []), status: ParseStatus.Truncated },
  { name: 'TCP segment of 12 bytes', bytes: ipv6({}, 6, new Array<number>(12).fill(0)), status: ParseStatus.Truncated },
  { name: 'TCP data offset 4', bytes: tcp6(ip, { dataOffset: 4 }), status: ParseStatus.BadTcpHeader },
  { name: 'TCP data offset past the segment', bytes: tcp6(ip, { dataOffset: 15 }), status: ParseStatus.Truncated },
  { name: 'UDP length 4', bytes: udp6(ip, { length: 4 }), status: ParseStatus.BadUdpLength },
  { name: 'UDP length past the segment', bytes: udp6(ip, { length: 100, payload: [1] }), status: ParseStatus.BadUdpLength },
  { name: 'UDP zero checksum', bytes: udp6(ip, { zeroChecksum: true, payload: [1] }), status: ParseStatus.UdpZeroChecksum },
  { name: 'UDP of 6 bytes', bytes: ipv6({}, 17, [0, 1, 0, 2, 0, 6]), status: ParseStatus.Truncated },
  { name: 'ICMPv6 of 4 bytes', bytes: ipv6({}, 58, [128, 0, 0, 0]), status: ParseStatus.Truncated },
];

function check(c: Case, info: PacketInfo): void {
  assert.equal(parseStatusName[parseIPv6(c.bytes, 0, c.bytes.length, info)], parseStatusName[c.status]);
  for (const [k, v] of Object.entries(c.expect ?? {})) assert.equal(info[k as NumericField], v, `field ${k}`);
  if (c.src !== undefined) assert.equal(formatIPv6Address(info.src6), c.src);
  if (c.dst !== undefined) assert.equal(formatIPv6Address(info.dst6), c.dst);
  if (c.status === ParseStatus.Ok && (info.protocol === 6 || info.protocol === 17 || info.protocol === 58)) {
    assert.ok(l4ChecksumOk(c.bytes, info), 'L4 checksum');
  }
}

describe('parseIPv6: captured packets', () => {
  const info = new PacketInfo();
  for (const c of capturedCases) it(`${c.name} -> ${parseStatusName[c.status] ?? '?'}`, () => { check(c, info); });
});

describe('parseIPv6: built packets', () => {
  const info = new PacketInfo();
  for (const c of syntheticCases) it(`${c.name} -> ${parseStatusName[c.status] ?? '?'}`, () => { check(c, info); });

  it('parses a packet at a non-zero offset inside a larger buffer', () => {
    const pkt = tcp6({ ext: [hopByHop()] }, { flags: TcpFlag.Syn, srcPort: 1234 });
    const big = new Uint8Array(pkt.length + 100);
    big.set(pkt, 37);
    assert.equal(parseIPv6(big, 37, pkt.length, info), ParseStatus.Ok);
    assert.equal(info.offset, 37);
    assert.equal(info.l4Offset, 37 + 48);
    assert.equal(info.srcPort, 1234);
    assert.ok(l4ChecksumOk(big, info));
  });

  it('refuses a range that runs past the buffer', () => {
    const pkt = tcp6(ip, syn);
    assert.equal(parseIPv6(pkt, 10, pkt.length, info), ParseStatus.Truncated);
    assert.equal(parseIPv6(pkt, -1, 10, info), ParseStatus.Truncated);
  });

  it('a refused packet leaves no fields of the previous packet behind', () => {
    const ok = udp6(ip, { payload: [1] });
    assert.equal(parseIPv6(ok, 0, ok.length, info), ParseStatus.Ok);
    const bad = tcp6({ ext: [ah()] }, syn);
    assert.equal(parseIPv6(bad, 0, bad.length, info), ParseStatus.Ipsec);
    assert.equal(info.srcPort, 0);
    assert.equal(info.udpLength, 0);
    assert.equal(info.protocol, 0);
  });
});

describe('parseIPv6: truncation at every byte offset', () => {
  const info = new PacketInfo();
  const packets: [string, Uint8Array][] = [
    ['TCP SYN with options behind a 5-header chain', tcp6({ ext: [hopByHop(ROUTER_ALERT), destOpts(), routing(0, 0, ['2001:2::9']), destOpts(), fragment(0, false)] }, { ...syn, options: MSS_SACK_TS_WS })],
    ['UDP behind HbH', udp6({ ext: [hopByHop()] }, { payload: [1, 2, 3, 4, 5] })],
    ['ICMPv6 echo behind DestOpts', icmp6({ ext: [destOpts()] }, { payload: [9, 9, 9] })],
    ['captured TCP SYN', capturedCases[5]?.bytes ?? new Uint8Array(0)],
  ];
  for (const [name, pkt] of packets) {
    it(`${name}: every cut of the buffer is Truncated`, () => {
      assert.equal(parseIPv6(pkt, 0, pkt.length, info), ParseStatus.Ok);
      for (let k = 0; k < pkt.length; k++) assert.equal(parseIPv6(pkt, 0, k, info), ParseStatus.Truncated, `cut at ${k}`);
    });
    it(`${name}: every cut with a payload length to match gets the status of what is missing`, () => {
      assert.equal(parseIPv6(pkt, 0, pkt.length, info), ParseStatus.Ok);
      const l4 = info.l4Offset;
      const proto = info.protocol;
      const doff = info.tcpHeaderLength;
      const ulen = info.udpLength;
      for (let k = 40; k < pkt.length; k++) {
        const cut = pkt.slice(0, k);
        cut[4] = ((k - 40) >>> 8) & 0xff;
        cut[5] = (k - 40) & 0xff;
        let want: ParseStatusCode = ParseStatus.Truncated;
        if (k >= l4 + 8 && proto === 17) want = ulen > k - l4 ? ParseStatus.BadUdpLength : ParseStatus.Ok;
        if (k >= l4 + 8 && proto === 58) want = ParseStatus.Ok;
        if (k >= l4 + doff && proto === 6) want = ParseStatus.Ok;
        const got = parseIPv6(cut, 0, k, info);
        assert.equal(parseStatusName[got], parseStatusName[want], `cut at ${k}`);
      }
    });
  }
});

describe('parseIPv6: garbage', () => {
  it('never throws on random bytes and always returns a known status (30000 seeded cases)', () => {
    const rnd = prng(6);
    const info = new PacketInfo();
    const buf = new Uint8Array(160);
    const seen = new Set<number>();
    const nhs = [0, 43, 44, 60, 6, 17, 58, 51, 50, 135, 59];
    for (let n = 0; n < 30000; n++) {
      const len = Math.floor(rnd() * 161);
      for (let i = 0; i < len; i++) buf[i] = Math.floor(rnd() * 256);
      // Bias toward plausible headers so the walk and the upper layers are reached.
      if (rnd() < 0.8) buf[0] = 0x60;
      if (rnd() < 0.7 && len >= 40) {
        buf[4] = 0;
        buf[5] = len - 40;
      }
      if (rnd() < 0.7) buf[6] = nhs[Math.floor(rnd() * nhs.length)] ?? 0;
      for (let p = 40; p + 1 < len; p += 8) {
        if (rnd() < 0.5) buf[p] = nhs[Math.floor(rnd() * nhs.length)] ?? 0;
        if (rnd() < 0.7) buf[p + 1] = 0;
        if (rnd() < 0.5) buf.fill(0, p + 2, Math.min(p + 8, len)); // Pad1 options, Segments Left 0, fragment offset 0
      }
      const s = parseIPv6(buf, 0, len, info);
      assert.ok(s >= 0 && s < parseStatusName.length);
      if (s === ParseStatus.Ok) assert.ok(info.l4Offset + info.l4Length <= len && info.payloadOffset + info.payloadLength <= len);
      assert.equal(parseIP(buf, 0, len, info), buf[0] === 0x60 || len === 0 ? s : parseIP(buf, 0, len, info));
      seen.add(s);
    }
    for (const want of [ParseStatus.Ok, ParseStatus.Truncated, ParseStatus.NotIPv6, ParseStatus.Ipsec, ParseStatus.UnknownExtHeader, ParseStatus.HopByHopNotFirst, ParseStatus.Fragment]) {
      assert.ok(seen.has(want), `fuzz reached ${parseStatusName[want] ?? want}`);
    }
  });
});

describe('parseIP dispatches on the version nibble', () => {
  const info = new PacketInfo();
  it('IPv4 gives what parseIPv4 gives, plus the family and the mapped address', () => {
    const pkt = tcp({ src: '198.18.11.2' }, { flags: TcpFlag.Syn, srcPort: 4321 });
    assert.equal(parseIP(pkt, 0, pkt.length, info), ParseStatus.Ok);
    assert.equal(info.family, 4);
    assert.equal(info.src, parseIPv4Address('198.18.11.2'));
    assert.equal(info.srcPort, 4321);
    assert.ok(isIPv4Mapped(info.src6));
    assert.equal(formatIPv6Address(info.src6), '::ffff:198.18.11.2');
    assert.equal(formatIPv6Address(info.dst6), '::ffff:198.18.201.11');
    for (const bytes of [udp({}, { payload: [1] }), icmp({}, {}), tcp({ flags: 1 }, {})]) {
      const a = parseIP(bytes, 0, bytes.length, info);
      const b = parseIPv4(bytes, 0, bytes.length, new PacketInfo());
      assert.equal(a, b);
    }
  });
  it('IPv6 goes to parseIPv6', () => {
    const pkt = udp6({}, { srcPort: 999 });
    assert.equal(parseIP(pkt, 0, pkt.length, info), ParseStatus.Ok);
    assert.equal(info.family, 6);
    assert.equal(info.srcPort, 999);
    assert.equal(formatIPv6Address(info.src6), '2001:2:0:11::2');
  });
  it('an IPv4 parse after an IPv6 one leaves no IPv6 words behind', () => {
    const six = udp6({ src: '2001:2:ffff:ffff::1' }, {});
    assert.equal(parseIP(six, 0, six.length, info), ParseStatus.Ok);
    const bad4 = tcp({ flags: 4 }, {}); // reserved flag: refused before the addresses
    assert.equal(parseIP(bad4, 0, bad4.length, info), ParseStatus.ReservedFlag);
    assert.deepEqual([...info.src6, ...info.dst6], new Array<number>(8).fill(0));
    assert.equal(info.family, 0);
  });
  const others: [string, Uint8Array, ParseStatusCode][] = [
    ['version 0', new Uint8Array(40), ParseStatus.UnknownVersion],
    ['version 5', Uint8Array.from([0x50, 0, 0, 0]), ParseStatus.UnknownVersion],
    ['version 15', Uint8Array.from([0xff]), ParseStatus.UnknownVersion],
    ['empty', new Uint8Array(0), ParseStatus.Truncated],
  ];
  for (const [name, bytes, status] of others) {
    it(`${name} -> ${parseStatusName[status] ?? '?'}`, () => { assert.equal(parseIP(bytes, 0, bytes.length, info), status); });
  }
});

describe('clampToCopy (NFLOG copies cut at the snaplen)', () => {
  const info = new PacketInfo();
  it('an IPv6 FIN with data cut at 128 bytes parses after the clamp, with its ports and flags', () => {
    const pkt = tcp6({ ext: [hopByHop(ROUTER_ALERT)] }, { flags: TcpFlag.Fin | TcpFlag.Ack, srcPort: 4444, payload: new Array<number>(500).fill(7) });
    const copy = pkt.slice(0, 128);
    assert.equal(parseIP(copy, 0, 128, info), ParseStatus.Truncated);
    clampToCopy(copy, 0, 128);
    assert.equal(parseIP(copy, 0, 128, info), ParseStatus.Ok);
    assert.equal(info.srcPort, 4444);
    assert.equal(info.tcpFlags, TcpFlag.Fin | TcpFlag.Ack);
    assert.equal(info.totalLength, 128);
  });
  it('an IPv4 copy is clamped as the engine does today', () => {
    const pkt = tcp({}, { flags: TcpFlag.Rst, payload: new Array<number>(300).fill(1) });
    const copy = pkt.slice(0, 128);
    clampToCopy(copy, 0, 128);
    assert.equal(parseIP(copy, 0, 128, info), ParseStatus.Ok);
    assert.equal(info.totalLength, 128);
  });
  it('leaves complete packets, jumbograms and short copies alone', () => {
    for (const pkt of [tcp6({}, syn), tcp6({ ext: [hopByHop(JUMBO)], payloadLength: 0 }, syn), tcp6({}, syn).slice(0, 30), tcp({}, {})]) {
      const copy = pkt.slice();
      clampToCopy(copy, 0, copy.length);
      assert.deepEqual(copy, pkt);
    }
  });
});

describe('parse statuses', () => {
  it('the IPv4 codes and labels are unchanged (metric labels depend on them)', () => {
    assert.deepEqual(parseStatusName.slice(0, 10), ['ok', 'truncated', 'not_ipv4', 'bad_header_length', 'ip_options', 'bad_total_length', 'fragment', 'reserved_flag', 'bad_tcp_header', 'bad_udp_length']);
  });
  it('every code has one distinct label', () => {
    const codes = Object.values(ParseStatus);
    assert.equal(codes.length, parseStatusName.length);
    assert.deepEqual([...codes].sort((a, b) => a - b), codes.map((_, i) => i));
    assert.equal(new Set(parseStatusName).size, parseStatusName.length);
    for (const n of parseStatusName) assert.match(n, /^[a-z0-9_]+$/);
  });
});

describe('IPv6 checksums and rewrites', () => {
  const info = new PacketInfo();
  it('updateChecksum128 equals a checksum computed afresh', () => {
    const a = tcp6({ dst: '2001:2:0:201::11' }, syn);
    const b = tcp6({ dst: '2001:2:ffff:1234::abcd' }, syn);
    const ca = ((a[56] ?? 0) << 8) | (a[57] ?? 0);
    const cb = ((b[56] ?? 0) << 8) | (b[57] ?? 0);
    assert.equal(updateChecksum128(ca, A6('2001:2:0:201::11'), A6('2001:2:ffff:1234::abcd')), cb);
  });

  const rewrites: { name: string; make: (dst: string) => Uint8Array }[] = [
    { name: 'TCP SYN with options', make: (dst) => tcp6({ dst }, { ...syn, options: MSS_SACK_TS_WS }) },
    { name: 'TCP behind HbH and DestOpts', make: (dst) => tcp6({ dst, ext: [hopByHop(ROUTER_ALERT), destOpts()] }, { flags: TcpFlag.Ack, payload: [1, 2, 3] }) },
    { name: 'UDP, odd length', make: (dst) => udp6({ dst }, { payload: [9, 8, 7] }) },
    { name: 'ICMPv6 echo (pseudo-header included)', make: (dst) => icmp6({ dst }, { payload: [5, 5] }) },
  ];
  for (const r of rewrites) {
    it(`${r.name}: destination rewrite gives the packet built with the new address`, () => {
      const pkt = r.make('2001:2:0:201::11');
      assert.equal(parseIPv6(pkt, 0, pkt.length, info), ParseStatus.Ok);
      assert.ok(setDestinationAddress6(pkt, info, A6('2001:2:0:202::13')));
      assert.deepEqual(pkt, r.make('2001:2:0:202::13'));
      assert.equal(formatIPv6Address(info.dst6), '2001:2:0:202::13');
      assert.ok(l4ChecksumOk(pkt, info));
      assert.equal(computeL4Checksum(pkt, info), ((pkt[info.l4Offset + (info.protocol === 6 ? 16 : info.protocol === 17 ? 6 : 2)] ?? 0) << 8) | (pkt[info.l4Offset + (info.protocol === 6 ? 17 : info.protocol === 17 ? 7 : 3)] ?? 0));
    });
  }

  it('the IPv6 setters refuse an IPv4 packet and leave it alone', () => {
    const pkt = tcp({}, {});
    const copy = pkt.slice();
    assert.equal(parseIPv4(pkt, 0, pkt.length, info), ParseStatus.Ok);
    assert.equal(setDestinationAddress6(pkt, info, A6('2001:2::1')), false);
    assert.equal(setSourceAddress6(pkt, info, A6('2001:2::1')), false);
    assert.deepEqual(pkt, copy);
  });

  it('random address and port rewrites always leave valid checksums (2000 seeded cases)', () => {
    const rnd = prng(66);
    const word = (): string => Math.floor(rnd() * 0x10000).toString(16);
    const a = (): string => `2001:2:${word()}:${word()}:${word()}:${word()}:${word()}:${word()}`;
    for (let n = 0; n < 2000; n++) {
      const payload = Array.from({ length: Math.floor(rnd() * 40) }, () => Math.floor(rnd() * 256));
      const spec: Ip6Spec = { src: a(), dst: a(), ext: rnd() < 0.3 ? [hopByHop()] : [] };
      const kind = n % 3;
      const pkt = kind === 0 ? tcp6(spec, { srcPort: Math.floor(rnd() * 65536), flags: TcpFlag.Ack, payload }) : kind === 1 ? udp6(spec, { payload }) : icmp6(spec, { payload });
      assert.equal(parseIPv6(pkt, 0, pkt.length, info), ParseStatus.Ok, `case ${n}`);
      const newDst = A6(a());
      const newSrc = A6(a());
      setDestinationAddress6(pkt, info, newDst);
      setSourceAddress6(pkt, info, newSrc);
      setDestinationPort(pkt, info, Math.floor(rnd() * 65536));
      setSourcePort(pkt, info, Math.floor(rnd() * 65536));
      assert.ok(l4ChecksumOk(pkt, info), `L4 checksum case ${n}`);
      const check = new PacketInfo();
      assert.equal(parseIPv6(pkt, 0, pkt.length, check), ParseStatus.Ok);
      assert.ok(equalAddress6(check.dst6, newDst) && equalAddress6(check.src6, newSrc));
      assert.equal(check.dstPort, info.dstPort);
    }
  });
});

describe('IPv6 addresses', () => {
  const table: [string, string | undefined, number[]?][] = [
    ['2001:2::1', '2001:2::1', [0x20010002, 0, 0, 1]],
    ['2001:0002:0000:0000:0000:0000:0000:0001', '2001:2::1'],
    ['::', '::', [0, 0, 0, 0]],
    ['::1', '::1', [0, 0, 0, 1]],
    ['1::', '1::', [0x10000, 0, 0, 0]],
    ['2001:DB8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // RFC 5952 4.2.3: the first of equal runs
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // 4.2.2: one zero group is not compressed
    ['2001:db8::2:1', '2001:db8::2:1'],
    ['fe80::384e:58ff:fe50:1dc3', 'fe80::384e:58ff:fe50:1dc3'],
    ['::ffff:198.18.0.1', '::ffff:198.18.0.1', [0, 0, 0xffff, 0xc6120001]],
    ['::ffff:c612:1', '::ffff:198.18.0.1'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff]],
    ['2001:2::1::2', undefined],
    ['2001:2:::1', undefined],
    ['1:2:3:4:5:6:7', undefined],
    ['1:2:3:4:5:6:7:8:9', undefined],
    ['1:2:3:4::5:6:7:8', undefined],
    ['12345::', undefined],
    ['fe80::1%eth0', undefined],
    ['::ffff:256.1.1.1', undefined],
    ['1.2.3.4::', undefined],
    ['g::', undefined],
    ['198.18.0.1', undefined],
    ['', undefined],
  ];
  for (const [text, canon, words] of table) {
    it(`parseIPv6Address(${JSON.stringify(text)}) -> ${canon ?? 'undefined'}`, () => {
      const a = parseIPv6Address(text);
      if (canon === undefined) { assert.equal(a, undefined); return; }
      assert.ok(a);
      assert.equal(formatIPv6Address(a), canon);
      if (words) assert.deepEqual([...a], words);
      assert.deepEqual(parseIPv6Address(canon), a);
    });
  }

  it('readAddress6 reads the wire bytes big-endian', () => {
    const a = newAddress6();
    readAddress6(Uint8Array.from(addr6('2001:2:0:11::2')), 0, a);
    assert.equal(formatIPv6Address(a), '2001:2:0:11::2');
  });

  it('prefixWordMask', () => {
    const masks = (len: number): number[] => [0, 1, 2, 3].map((w) => prefixWordMask(len, w));
    assert.deepEqual(masks(0), [0, 0, 0, 0]);
    assert.deepEqual(masks(48), [0xffffffff, 0xffff0000, 0, 0]);
    assert.deepEqual(masks(56), [0xffffffff, 0xffffff00, 0, 0]);
    assert.deepEqual(masks(64), [0xffffffff, 0xffffffff, 0, 0]);
    assert.deepEqual(masks(65), [0xffffffff, 0xffffffff, 0x80000000, 0]);
    assert.deepEqual(masks(120), [0xffffffff, 0xffffffff, 0xffffffff, 0xffffff00]);
    assert.deepEqual(masks(128), [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff]);
  });

  const masking: [string, number, string][] = [
    ['2001:2:ab:cdef:1:2:3:4', 64, '2001:2:ab:cdef::/64'],
    ['2001:2:ab:cdef:1:2:3:4', 56, '2001:2:ab:cd00::/56'],
    ['2001:2:ab:cdef:1:2:3:4', 48, '2001:2:ab::/48'],
    ['2001:2:ab:cdef:1:2:3:4', 127, '2001:2:ab:cdef:1:2:3:4/127'],
    ['2001:2:ab:cdef:1:2:3:5', 127, '2001:2:ab:cdef:1:2:3:4/127'],
    ['2001:2:ab:cdef:1:2:3:4', 0, '::/0'],
    ['::ffff:198.18.7.9', 96 + 24, '::ffff:198.18.7.0/120'],
  ];
  for (const [text, len, want] of masking) {
    it(`mask ${text} to /${len}`, () => {
      const a = A6(text);
      assert.equal(formatPrefix6(a, len), want);
      const m = newAddress6();
      maskAddress6(a, len, m);
      assert.ok(inPrefix6(a, m, len));
      maskAddress6(a, len, a); // in place
      assert.ok(equalAddress6(a, m));
    });
  }

  it('inPrefix6', () => {
    assert.ok(inPrefix6(A6('2001:2:0:ff::1'), A6('2001:2::'), 48));
    assert.ok(!inPrefix6(A6('2001:3::1'), A6('2001:2::'), 48));
    assert.ok(inPrefix6(A6('2001:2:0:1:ffff::'), A6('2001:2:0:1::'), 64));
    assert.ok(!inPrefix6(A6('2001:2:0:2::'), A6('2001:2:0:1::'), 64));
    assert.ok(inPrefix6(A6('::1'), A6('ffff::'), 0));
  });

  it('parseCidr6', () => {
    const p = parseCidr6('2001:2:0:1:2::7/64');
    assert.ok(p);
    assert.equal(p.length, 64);
    assert.equal(formatIPv6Address(p.network), '2001:2:0:1::');
    assert.equal(parseCidr6('2001:2::5')?.length, 128);
    for (const bad of ['2001:2::/129', '2001:2::/-1', '2001:2::/', 'x/64', '2001:2::/6 4']) assert.equal(parseCidr6(bad), undefined, bad);
  });

  it('IPv4-mapped helpers', () => {
    const a = newAddress6();
    setIPv4Mapped(a, 0xc6120001);
    assert.ok(isIPv4Mapped(a));
    assert.equal(formatIPv6Address(a), '::ffff:198.18.0.1');
    assert.ok(!isIPv4Mapped(A6('2001:2::1')));
  });
});

describe('no allocation', () => {
  it('parseIPv6, parseIP and the prefix mask allocate nothing per packet (1e6 parses, no GC, heap growth < 1 MB)', async () => {
    const pkts = [
      tcp6({ ext: [hopByHop(ROUTER_ALERT), destOpts(), fragment(0, false)] }, { ...syn, options: MSS_SACK_TS_WS }),
      udp6({}, { payload: [1, 2, 3] }),
      icmp6({}, { type: 129 }),
      tcp6({ ext: [ah()] }, syn),
      capturedCases[2]?.bytes ?? new Uint8Array(0),
      tcp({}, {}),
    ];
    const info = new PacketInfo();
    const scratch = newAddress6();
    let sink = 0;
    const run = (n: number): void => {
      for (let i = 0; i < n; i++) {
        const p = pkts[i % pkts.length] ?? pkts[0];
        if (p === undefined) continue;
        sink += parseIP(p, 0, p.length, info);
        maskAddress6(info.src6, 64, scratch);
        sink += (scratch[1] ?? 0) & 1;
      }
    };
    run(200_000); // warm up: let the optimizing compiler finish first
    const gcTimes: number[] = [];
    const obs = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcTimes.push(e.startTime);
    });
    obs.observe({ entryTypes: ['gc'] });
    const t0 = performance.now();
    const before = process.memoryUsage().heapUsed;
    run(1_000_000);
    const grown = process.memoryUsage().heapUsed - before;
    const t1 = performance.now();
    // Entries are delivered asynchronously, also for collections before t0: count those inside the loop.
    await new Promise((r) => setTimeout(r, 50));
    obs.disconnect();
    const gcs = gcTimes.filter((t) => t >= t0 && t <= t1).length;
    assert.ok(sink > 0);
    // 1e6 allocations of even 16 bytes would be 16 MB: visible as growth or as a collection.
    assert.ok(grown < 1_000_000, `heap grew ${grown} bytes`);
    assert.equal(gcs, 0, 'garbage collections during the loop');
  });
});
