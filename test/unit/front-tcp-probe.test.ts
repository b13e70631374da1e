/**
 * The TCP probe's packets (src/front/tcp_probe.ts): checksums against
 * vectors computed by an independent implementation (Python's struct over
 * the RFC 793 / RFC 8200 pseudo-headers) and RFC 1071's worked example,
 * cross-checked with raw-socket's C checksum; segment building and reading
 * round trips; and the answer matching (SYN-ACK, RST, wrong ack, wrong
 * address or port, plain ACK) table-driven.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { addressBytes, answerOf, buildSegment, readSegment, tcpChecksum, TCP_FLAG_ACK, TCP_FLAG_FIN, TCP_FLAG_RST, TCP_FLAG_SYN, type SegmentHead, type SegmentSpec } from '../../src/front/tcp_probe.ts';

const bytes = (s: string): Uint8Array => {
  const b = addressBytes(s);
  assert.ok(b, s);
  return b;
};
const syn = (srcPort: number, dstPort: number, seq: number, mss: number): SegmentSpec => ({ srcPort, dstPort, seq, ack: 0, flags: TCP_FLAG_SYN, window: 64240, mss });
const rst = (srcPort: number, dstPort: number, seq: number): SegmentSpec => ({ srcPort, dstPort, seq, ack: 0, flags: TCP_FLAG_RST, window: 0, mss: 0 });

describe('TCP checksum', () => {
  // Vectors from an independent implementation (see the file comment).
  const vectors: { name: string; spec: SegmentSpec; src: string; dst: string; checksum: number }[] = [
    { name: 'IPv4 SYN with MSS', spec: syn(49152, 443, 0x01020304, 1460), src: '198.18.250.1', dst: '198.18.250.2', checksum: 0x574a },
    { name: 'IPv4 SYN, extreme port and ISN (carries folded twice)', spec: syn(65535, 53, 0xffffffff, 1460), src: '198.18.0.1', dst: '198.19.255.254', checksum: 0x10db },
    { name: 'IPv4 RST, no options', spec: rst(50000, 443, 0x89abcdef), src: '198.18.250.1', dst: '198.18.250.2', checksum: 0x1310 },
    { name: 'IPv6 SYN with MSS', spec: syn(49152, 443, 0x01020304, 1440), src: '2001:2:0:ff::1', dst: '2001:2:0:ff::2', checksum: 0x9581 },
    { name: 'IPv6 RST', spec: rst(60001, 53, 0xdeadbeef), src: '2001:2::1', dst: '2001:2:0:12::abcd', checksum: 0x3bc6 },
  ];
  for (const v of vectors) {
    it(v.name, () => {
      const seg = buildSegment(v.spec, bytes(v.src), bytes(v.dst));
      assert.equal(seg.readUInt16BE(16), v.checksum);
      // A segment with its checksum in place verifies to zero.
      assert.equal(tcpChecksum(bytes(v.src), bytes(v.dst), seg), 0);
      // Another source address does not verify.
      const other = bytes(v.src);
      other[other.length - 1] = (other[other.length - 1] ?? 0) ^ 1;
      assert.notEqual(tcpChecksum(other, bytes(v.dst), seg), 0);
    });
  }

  it("RFC 1071's example sum (0xddf2) with all-zero addresses: ~(0xddf2 + 6 + 8)", () => {
    const zero = new Uint8Array(4);
    assert.equal(tcpChecksum(zero, zero, Uint8Array.from([0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])), ~(0xddf2 + 6 + 8) & 0xffff);
  });

  it('an odd-length segment is padded with a zero byte (vector)', () => {
    const a = bytes('198.18.0.1');
    assert.equal(tcpChecksum(a, a, Uint8Array.from([1, 2, 3])), 0x6fcd);
  });

  it("agrees with raw-socket's C checksum over the pseudo-header on 200 random segments", () => {
    const raw = createRequire(import.meta.url)('raw-socket') as { createChecksum(...bufs: Buffer[]): number };
    let seed = 12345;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed % n;
    };
    for (let i = 0; i < 200; i++) {
      const v6 = i % 2 === 1;
      const src = v6 ? bytes(`2001:2:0:${rnd(0xffff).toString(16)}::${rnd(0xffff).toString(16)}`) : bytes(`198.${18 + rnd(2)}.${rnd(256)}.${rnd(256)}`);
      const dst = v6 ? bytes(`2001:2::${rnd(0xffff).toString(16)}`) : bytes(`198.18.${rnd(256)}.${rnd(256)}`);
      const seg = Buffer.from(buildSegment({ srcPort: rnd(65536), dstPort: rnd(65536), seq: rnd(2 ** 32), ack: rnd(2 ** 32), flags: rnd(64), window: rnd(65536), mss: rnd(2) * 1400 }, src, dst));
      const check = seg.readUInt16BE(16);
      seg.writeUInt16BE(0, 16);
      const len = seg.length;
      const pseudo = v6 ? Buffer.concat([src, dst, Buffer.from([0, 0, len >> 8, len & 0xff, 0, 0, 0, 6])]) : Buffer.concat([src, dst, Buffer.from([0, 6, len >> 8, len & 0xff])]);
      assert.equal(raw.createChecksum(pseudo, seg), check, `segment ${i}`);
    }
  });
});

describe('TCP segments: build and read', () => {
  it('reads back what was built, from an IPv4 datagram (with IP options) and from a bare IPv6 segment', () => {
    const spec: SegmentSpec = { srcPort: 443, dstPort: 51234, seq: 0xfedcba98, ack: 0x01020305, flags: TCP_FLAG_SYN | TCP_FLAG_ACK, window: 1000, mss: 1460 };
    const seg = buildSegment(spec, bytes('198.18.250.2'), bytes('198.18.250.1'));
    for (const ihl of [5, 6]) {
      const ip = Buffer.alloc(ihl * 4);
      ip[0] = 0x40 | ihl;
      ip[9] = 6;
      ip.set(bytes('198.18.250.2'), 12);
      const out: SegmentHead = { srcPort: 0, dstPort: 0, seq: 0, ack: 0, flags: 0 };
      const dg = Buffer.concat([ip, seg]);
      const src = readSegment(dg, dg.length, true, out);
      assert.equal(src, (198 * 2 ** 24 + 18 * 2 ** 16 + 250 * 2 ** 8 + 2) >>> 0);
      assert.deepEqual(out, { srcPort: 443, dstPort: 51234, seq: 0xfedcba98, ack: 0x01020305, flags: TCP_FLAG_SYN | TCP_FLAG_ACK });
    }
    const out: SegmentHead = { srcPort: 0, dstPort: 0, seq: 0, ack: 0, flags: 0 };
    assert.equal(readSegment(seg, seg.length, false, out), 0);
    assert.equal(out.ack, 0x01020305);
  });

  const head = (): SegmentHead => ({ srcPort: 0, dstPort: 0, seq: 0, ack: 0, flags: 0 });
  const ipv4 = (fields: { version?: number; proto?: number; frag?: number; ihl?: number; tcpLen?: number }): Buffer => {
    const ihl = fields.ihl ?? 5;
    const b = Buffer.alloc(Math.max(20, ihl * 4) + (fields.tcpLen ?? 20));
    b[0] = ((fields.version ?? 4) << 4) | ihl;
    b.writeUInt16BE(fields.frag ?? 0, 6);
    b[9] = fields.proto ?? 6;
    return b;
  };
  const unreadable: { name: string; buf: Buffer; ipv4: boolean }[] = [
    { name: 'IPv4: not TCP (UDP)', buf: ipv4({ proto: 17 }), ipv4: true },
    { name: 'IPv4: version 6 in the header', buf: ipv4({ version: 6 }), ipv4: true },
    { name: 'IPv4: a fragment past the first', buf: ipv4({ frag: 0x00b9 }), ipv4: true },
    { name: 'IPv4: header length below 20', buf: ipv4({ ihl: 4 }), ipv4: true },
    { name: 'IPv4: truncated TCP header', buf: ipv4({ tcpLen: 19 }), ipv4: true },
    { name: 'IPv6: truncated TCP header', buf: Buffer.alloc(19), ipv4: false },
  ];
  for (const u of unreadable) {
    it(`ignores ${u.name}`, () => {
      assert.equal(readSegment(u.buf, u.buf.length, u.ipv4, head()), -1);
    });
  }
  it('reads a first fragment (more-fragments set, offset 0)', () => {
    const b = ipv4({ frag: 0x2000 });
    assert.equal(readSegment(b, b.length, true, head()), 0);
  });
});

describe('answer matching', () => {
  const target = bytes('198.18.250.2');
  const isn = 0xfffffffe;
  const cases: { name: string; seg: SegmentHead; from?: string; isn?: number; want: 'syn-ack' | 'rst' | 'none' }[] = [
    { name: 'SYN-ACK acking isn+1', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: 0xffffffff, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, want: 'syn-ack' },
    { name: 'RST-ACK acking isn+1 (closed port)', seg: { srcPort: 443, dstPort: 50000, seq: 0, ack: 0xffffffff, flags: TCP_FLAG_RST | TCP_FLAG_ACK }, want: 'rst' },
    { name: 'ack wraps: isn 0xffffffff acked by 0', seg: { srcPort: 443, dstPort: 50000, seq: 0, ack: 0, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, isn: 0xffffffff, want: 'syn-ack' },
    { name: 'SYN-ACK with a wrong ack (isn)', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: isn, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, want: 'none' },
    { name: 'SYN-ACK with a wrong ack (isn+2)', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: 0, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, want: 'none' },
    { name: 'RST without ACK', seg: { srcPort: 443, dstPort: 50000, seq: 0xffffffff, ack: 0xffffffff, flags: TCP_FLAG_RST }, want: 'none' },
    { name: 'a plain ACK', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: 0xffffffff, flags: TCP_FLAG_ACK }, want: 'none' },
    { name: 'FIN-ACK', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: 0xffffffff, flags: TCP_FLAG_FIN | TCP_FLAG_ACK }, want: 'none' },
    { name: 'SYN-ACK from another port', seg: { srcPort: 53, dstPort: 50000, seq: 7, ack: 0xffffffff, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, want: 'none' },
    { name: 'SYN-ACK from another host', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: 0xffffffff, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, from: '198.18.250.3', want: 'none' },
    { name: 'SYN-ACK from an IPv6 address', seg: { srcPort: 443, dstPort: 50000, seq: 7, ack: 0xffffffff, flags: TCP_FLAG_SYN | TCP_FLAG_ACK }, from: '2001:2::2', want: 'none' },
  ];
  for (const c of cases) {
    it(`${c.name}: ${c.want}`, () => {
      assert.equal(answerOf(c.seg, bytes(c.from ?? '198.18.250.2'), target, 443, c.isn ?? isn), c.want);
    });
  }
});
