import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatIPv4Address, inPrefix, parseCidr, parseIPv4Address, prefixMask } from '../../src/packet/address.ts';
import { updateChecksum16 } from '../../src/packet/checksum.ts';
import { PacketInfo, ParseStatus, TcpFlag, parseIPv4, parseStatusName, type ParseStatusCode } from '../../src/packet/ipv4.ts';
import { setDestinationAddress, setDestinationPort, setSourceAddress, setSourcePort } from '../../src/packet/rewrite.ts';
import { ipv4HeaderChecksumOk, l4ChecksumOk } from '../../src/packet/verify.ts';
import { icmp, ipv4, prng, tcp, udp } from '../helpers/packets.ts';

const A = (s: string): number => parseIPv4Address(s) ?? -1;
const MSS_SACK_TS_WS = [2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];

type NumericField = { [K in keyof PacketInfo]: PacketInfo[K] extends number ? K : never }[keyof PacketInfo];

interface Case {
  name: string;
  bytes: Uint8Array;
  status: ParseStatusCode;
  expect?: Partial<Record<NumericField, number>>;
}

const cases: Case[] = [
  // --- well-formed ---------------------------------------------------------
  {
    name: 'TCP SYN',
    bytes: tcp({}, { flags: TcpFlag.Syn, srcPort: 40000, dstPort: 80, seq: 7 }),
    status: ParseStatus.Ok,
    expect: { protocol: 6, src: A('198.18.11.2'), dst: A('198.18.201.11'), srcPort: 40000, dstPort: 80, tcpFlags: TcpFlag.Syn, seq: 7, tcpHeaderLength: 20, payloadOffset: 40, payloadLength: 0, totalLength: 40 },
  },
  {
    name: 'TCP SYN with MSS, SACK, timestamps, window scale',
    bytes: tcp({}, { flags: TcpFlag.Syn, options: MSS_SACK_TS_WS }),
    status: ParseStatus.Ok,
    expect: { tcpHeaderLength: 40, payloadOffset: 60, payloadLength: 0 },
  },
  {
    name: 'TCP FIN|ACK with data',
    bytes: tcp({}, { flags: TcpFlag.Fin | TcpFlag.Ack, ack: 99, payload: [104, 101, 108, 108, 111] }),
    status: ParseStatus.Ok,
    expect: { tcpFlags: TcpFlag.Fin | TcpFlag.Ack, ack: 99, payloadOffset: 40, payloadLength: 5 },
  },
  { name: 'TCP RST', bytes: tcp({}, { flags: TcpFlag.Rst }), status: ParseStatus.Ok, expect: { tcpFlags: TcpFlag.Rst } },
  {
    name: 'TCP with link padding after total length',
    bytes: tcp({ trailer: 6 }, { flags: TcpFlag.Ack }),
    status: ParseStatus.Ok,
    expect: { totalLength: 40, l4Length: 20, payloadLength: 0 },
  },
  {
    name: 'TCP with DF set (not a fragment)',
    bytes: tcp({ flags: 2 }, { flags: TcpFlag.Ack }),
    status: ParseStatus.Ok,
  },
  {
    name: 'TCP 1500-byte segment',
    bytes: tcp({}, { flags: TcpFlag.Ack | TcpFlag.Psh, payload: new Array<number>(1460).fill(0x61) }),
    status: ParseStatus.Ok,
    expect: { totalLength: 1500, payloadLength: 1460 },
  },
  {
    name: 'UDP DNS query',
    bytes: udp({ dst: '198.18.2.2' }, { srcPort: 5353, dstPort: 53, payload: new Array<number>(29).fill(1) }),
    status: ParseStatus.Ok,
    expect: { protocol: 17, srcPort: 5353, dstPort: 53, udpLength: 37, payloadOffset: 28, payloadLength: 29 },
  },
  { name: 'UDP without checksum', bytes: udp({}, { zeroChecksum: true, payload: [1, 2, 3] }), status: ParseStatus.Ok, expect: { udpLength: 11 } },
  { name: 'UDP empty payload', bytes: udp({}, {}), status: ParseStatus.Ok, expect: { payloadLength: 0 } },
  {
    name: 'ICMP echo request',
    bytes: icmp({}, { type: 8, id: 0x77, seq: 3, payload: [1, 2, 3, 4] }),
    status: ParseStatus.Ok,
    expect: { protocol: 1, icmpType: 8, icmpCode: 0, icmpId: 0x77, icmpSeq: 3, payloadLength: 4 },
  },
  { name: 'ICMP echo reply', bytes: icmp({}, { type: 0, id: 1, seq: 9 }), status: ParseStatus.Ok, expect: { icmpType: 0, icmpSeq: 9 } },
  { name: 'ICMP port unreachable', bytes: icmp({}, { type: 3, code: 3 }), status: ParseStatus.Ok, expect: { icmpType: 3, icmpCode: 3 } },
  { name: 'GRE (other protocol) is well-formed IP', bytes: ipv4({ protocol: 47 }, [0, 0, 8, 0]), status: ParseStatus.Ok, expect: { protocol: 47, payloadOffset: 20, payloadLength: 4, srcPort: 0 } },
  // --- malformed -----------------------------------------------------------
  { name: 'empty', bytes: new Uint8Array(0), status: ParseStatus.Truncated },
  { name: '10 bytes of IPv4', bytes: tcp({}, {}).subarray(0, 10), status: ParseStatus.Truncated },
  { name: 'IPv6 header', bytes: Uint8Array.from([0x60, 0, 0, 0, 0, 8, 17, 64, ...new Array<number>(32).fill(0)]), status: ParseStatus.NotIPv4 },
  { name: 'all zeros', bytes: new Uint8Array(40), status: ParseStatus.NotIPv4 },
  { name: 'IHL 4', bytes: tcp({ ihl: 4 }, {}), status: ParseStatus.BadHeaderLength },
  { name: 'IP options (IHL 6)', bytes: tcp({ options: [1, 1, 1, 0] }, {}), status: ParseStatus.IpOptions },
  { name: 'total length below header', bytes: tcp({ totalLength: 12 }, {}), status: ParseStatus.BadTotalLength },
  { name: 'total length beyond buffer', bytes: tcp({ totalLength: 400 }, {}), status: ParseStatus.Truncated },
  { name: 'first fragment (MF)', bytes: tcp({ flags: 1 }, {}), status: ParseStatus.Fragment },
  { name: 'later fragment (offset 100)', bytes: tcp({ fragmentOffset: 100 }, {}), status: ParseStatus.Fragment },
  { name: 'reserved flag', bytes: tcp({ flags: 4 }, {}), status: ParseStatus.ReservedFlag },
  { name: 'TCP segment of 12 bytes', bytes: ipv4({ protocol: 6 }, new Array<number>(12).fill(0)), status: ParseStatus.Truncated },
  { name: 'TCP data offset 4', bytes: tcp({}, { dataOffset: 4 }), status: ParseStatus.BadTcpHeader },
  { name: 'TCP data offset past segment', bytes: tcp({}, { dataOffset: 15 }), status: ParseStatus.Truncated },
  { name: 'UDP length 4', bytes: udp({}, { length: 4 }), status: ParseStatus.BadUdpLength },
  { name: 'UDP length past segment', bytes: udp({}, { length: 100, payload: [1] }), status: ParseStatus.BadUdpLength },
  { name: 'UDP segment of 6 bytes', bytes: ipv4({ protocol: 17 }, [0, 1, 0, 2, 0, 6]), status: ParseStatus.Truncated },
  { name: 'ICMP of 4 bytes', bytes: ipv4({ protocol: 1 }, [8, 0, 0, 0]), status: ParseStatus.Truncated },
];

describe('parseIPv4', () => {
  const info = new PacketInfo();
  for (const c of cases) {
    it(`${c.name} -> ${parseStatusName[c.status] ?? '?'}`, () => {
      assert.equal(parseIPv4(c.bytes, 0, c.bytes.length, info), c.status);
      for (const [k, v] of Object.entries(c.expect ?? {})) {
        assert.equal(info[k as NumericField], v, `field ${k}`);
      }
      if (c.status === ParseStatus.Ok) {
        assert.ok(ipv4HeaderChecksumOk(c.bytes, info), 'IP header checksum');
        if (info.protocol === 6 || info.protocol === 17 || info.protocol === 1) assert.ok(l4ChecksumOk(c.bytes, info), 'L4 checksum');
      }
    });
  }

  it('parses a packet at a non-zero offset inside a larger buffer', () => {
    const pkt = tcp({}, { flags: TcpFlag.Syn, srcPort: 1234 });
    const big = new Uint8Array(pkt.length + 100);
    big.set(pkt, 37);
    assert.equal(parseIPv4(big, 37, pkt.length, info), ParseStatus.Ok);
    assert.equal(info.offset, 37);
    assert.equal(info.l4Offset, 57);
    assert.equal(info.srcPort, 1234);
  });

  it('refuses a range that runs past the buffer', () => {
    const pkt = tcp({}, {});
    assert.equal(parseIPv4(pkt, 10, pkt.length, info), ParseStatus.Truncated);
  });

  it('never throws on random bytes and always returns a known status', () => {
    const rnd = prng(1);
    const buf = new Uint8Array(128);
    const seen = new Set<number>();
    for (let n = 0; n < 20000; n++) {
      const len = Math.floor(rnd() * 129);
      for (let i = 0; i < len; i++) buf[i] = Math.floor(rnd() * 256);
      // Bias toward plausible headers so deeper branches are reached.
      if (rnd() < 0.7) buf[0] = 0x45;
      if (rnd() < 0.5) {
        buf[2] = 0;
        buf[3] = len;
        buf[6] = 0;
        buf[7] = 0;
      }
      const s = parseIPv4(buf, 0, len, info);
      assert.ok(s >= 0 && s < parseStatusName.length);
      seen.add(s);
    }
    assert.ok(seen.has(ParseStatus.Ok) && seen.has(ParseStatus.Truncated) && seen.has(ParseStatus.NotIPv4));
  });
});

describe('RFC 1624 incremental update', () => {
  it('reproduces the RFC 1624 section 4 example (0x5555 -> 0x3285 gives 0x0000)', () => {
    assert.equal(updateChecksum16(0xdd2f, 0x5555, 0x3285), 0x0000);
  });

  const rewrites: { name: string; make: () => Uint8Array }[] = [
    { name: 'TCP SYN', make: () => tcp({}, { flags: TcpFlag.Syn, options: MSS_SACK_TS_WS }) },
    { name: 'TCP data, odd length', make: () => tcp({}, { flags: TcpFlag.Ack, payload: [1, 2, 3, 4, 5, 6, 7] }) },
    { name: 'UDP', make: () => udp({}, { payload: [9, 8, 7] }) },
    { name: 'ICMP echo', make: () => icmp({}, { payload: [5, 5] }) },
  ];
  const info = new PacketInfo();
  for (const r of rewrites) {
    it(`${r.name}: destination rewrite equals a packet built with the new address`, () => {
      const pkt = r.make();
      assert.equal(parseIPv4(pkt, 0, pkt.length, info), ParseStatus.Ok);
      setDestinationAddress(pkt, info, A('198.18.202.13'));
      assert.ok(ipv4HeaderChecksumOk(pkt, info));
      assert.ok(l4ChecksumOk(pkt, info));
      assert.equal(formatIPv4Address(info.dst), '198.18.202.13');
    });
  }

  it('TCP: address and port rewrite give byte-identical packets to fresh ones', () => {
    const before = tcp({ dst: '198.19.1.1' }, { dstPort: 80, flags: TcpFlag.Syn, options: MSS_SACK_TS_WS });
    const expected = tcp({ dst: '198.18.201.12' }, { dstPort: 8080, flags: TcpFlag.Syn, options: MSS_SACK_TS_WS });
    assert.equal(parseIPv4(before, 0, before.length, info), ParseStatus.Ok);
    setDestinationAddress(before, info, A('198.18.201.12'));
    assert.ok(setDestinationPort(before, info, 8080));
    assert.deepEqual(before, expected);
  });

  it('UDP: source rewrite keeps a zero checksum zero', () => {
    const pkt = udp({}, { zeroChecksum: true, payload: [1, 2] });
    assert.equal(parseIPv4(pkt, 0, pkt.length, info), ParseStatus.Ok);
    setSourceAddress(pkt, info, A('198.18.12.2'));
    assert.equal(pkt[26], 0);
    assert.equal(pkt[27], 0);
    assert.ok(setSourcePort(pkt, info, 1111));
    assert.equal(pkt[26], 0);
    assert.ok(ipv4HeaderChecksumOk(pkt, info));
  });

  it('ICMP has no ports to rewrite', () => {
    const pkt = icmp({}, {});
    assert.equal(parseIPv4(pkt, 0, pkt.length, info), ParseStatus.Ok);
    assert.equal(setDestinationPort(pkt, info, 1), false);
    assert.equal(setSourcePort(pkt, info, 1), false);
  });

  it('random rewrites always leave valid checksums (2000 seeded cases)', () => {
    const rnd = prng(42);
    const ip = (): string => `198.${18 + Math.floor(rnd() * 2)}.${Math.floor(rnd() * 256)}.${Math.floor(rnd() * 256)}`;
    for (let n = 0; n < 2000; n++) {
      const payload = Array.from({ length: Math.floor(rnd() * 40) }, () => Math.floor(rnd() * 256));
      const kind = n % 3;
      const pkt =
        kind === 0
          ? tcp({ src: ip(), dst: ip() }, { srcPort: Math.floor(rnd() * 65536), flags: TcpFlag.Ack, payload })
          : kind === 1
            ? udp({ src: ip(), dst: ip() }, { srcPort: Math.floor(rnd() * 65536), payload })
            : icmp({ src: ip(), dst: ip() }, { payload });
      assert.equal(parseIPv4(pkt, 0, pkt.length, info), ParseStatus.Ok);
      setDestinationAddress(pkt, info, A(ip()));
      setSourceAddress(pkt, info, A(ip()));
      setDestinationPort(pkt, info, Math.floor(rnd() * 65536));
      setSourcePort(pkt, info, Math.floor(rnd() * 65536));
      assert.ok(ipv4HeaderChecksumOk(pkt, info), `IP checksum case ${n}`);
      assert.ok(l4ChecksumOk(pkt, info), `L4 checksum case ${n}`);
    }
  });
});

describe('addresses', () => {
  const table: [string, number | undefined][] = [
    ['198.18.0.1', 0xc6120001],
    ['255.255.255.255', 0xffffffff],
    ['0.0.0.0', 0],
    ['256.1.1.1', undefined],
    ['1.2.3', undefined],
    ['01.2.3.4', undefined],
    ['a.b.c.d', undefined],
  ];
  for (const [text, value] of table) {
    it(`parseIPv4Address(${text})`, () => {
      assert.equal(parseIPv4Address(text), value);
      if (value !== undefined) assert.equal(formatIPv4Address(value), text);
    });
  }
  it('inPrefix', () => {
    assert.ok(inPrefix(A('198.19.255.1'), A('198.18.0.0'), 15));
    assert.ok(!inPrefix(A('198.20.0.1'), A('198.18.0.0'), 15));
    assert.ok(inPrefix(A('8.8.8.8'), 0, 0));
  });
  it('prefixMask', () => {
    assert.equal(prefixMask(0), 0);
    assert.equal(prefixMask(15), 0xfffe0000);
    assert.equal(prefixMask(32), 0xffffffff);
  });
  it('parseCidr: the network (host bits cleared) and its mask; no length is /32', () => {
    assert.deepEqual(parseCidr('198.51.100.7/24'), [A('198.51.100.0'), 0xffffff00]);
    assert.deepEqual(parseCidr('198.51.100.7'), [A('198.51.100.7'), 0xffffffff]);
    assert.deepEqual(parseCidr('0.0.0.0/0'), [0, 0]);
  });
});
