/**
 * The NFQUEUE verdict encoder against bytes the addon's C encoder produced
 * (libnetfilter_queue's nfq_nlmsg_put, nfq_nlmsg_verdict_put,
 * nfq_nlmsg_verdict_put_mark and nfq_nlmsg_verdict_put_pkt, as
 * native/src/nfq.c called them before the encoding moved to TypeScript).
 * libmnl leaves attribute padding as it finds it (the kernel ignores it);
 * these vectors were captured from a zeroed area, and the encoder writes zeros.
 * Payload byte i is (i * 7 + 1) & 0xff.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TX_LIMIT, VerdictEncoder, verdictMessageBytes } from '../../src/nfqueue/verdict-encoder.ts';

const VECTORS: readonly (readonly [string, number, number, number, number | undefined, number | undefined, string])[] = [
  // name, queue, id, verdict, mark, payload length, bytes
  ['accept', 7, 1, 1, undefined, undefined, '20000000010301000000000000000000000000070c0002000000000100000001'],
  ['drop, high id, queue 65535', 65535, 0xfffffffe, 0, undefined, undefined, '200000000103010000000000000000000000ffff0c00020000000000fffffffe'],
  ['repeat with mark', 3, 42, 4, 0xdeadbeef, undefined, '28000000010301000000000000000000000000030c000200000000040000002a08000300deadbeef'],
  ['empty payload', 1, 5, 1, undefined, 0, '24000000010301000000000000000000000000010c000200000000010000000504000a00'],
  ['payload of 1 byte', 1, 6, 1, undefined, 1, '28000000010301000000000000000000000000010c000200000000010000000605000a0001000000'],
  ['payload of 2 bytes', 1, 7, 0, undefined, 2, '28000000010301000000000000000000000000010c000200000000000000000706000a0001080000'],
  ['payload of 3 bytes with mark', 1, 8, 1, 9, 3, '30000000010301000000000000000000000000010c0002000000000100000008080003000000000907000a0001080f00'],
  ['payload of 4 bytes', 1, 9, 1, undefined, 4, '28000000010301000000000000000000000000010c000200000000010000000908000a0001080f16'],
  ['payload of 5 bytes, mark 0', 2, 10, 1, 0, 5, '34000000010301000000000000000000000000020c000200000000010000000a080003000000000009000a0001080f161d000000'],
  ['payload of 13 bytes', 2, 11, 4, undefined, 13, '34000000010301000000000000000000000000020c000200000000040000000b11000a0001080f161d242b323940474e55000000'],
];

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.length).toString('hex');

describe('VerdictEncoder', () => {
  const source = Buffer.alloc(64);
  for (let i = 0; i < source.length; i++) source[i] = (i * 7 + 1) & 0xff;

  for (const [name, queue, id, verdict, mark, plen, bytes] of VECTORS) {
    it(`encodes as the C encoder did: ${name}`, () => {
      const enc = new VerdictEncoder();
      enc.bytes.fill(0xee); // padding must not keep stale bytes
      enc.put(queue, id, verdict, mark !== undefined, mark ?? 0, plen === undefined ? null : source, 0, plen ?? 0);
      assert.equal(hex(enc.bytes.subarray(0, enc.length)), bytes);
      assert.equal(enc.length, verdictMessageBytes(mark !== undefined, plen ?? -1));
    });
  }

  it('appends messages back to back, a payload taken from its offset', () => {
    const enc = new VerdictEncoder();
    enc.put(7, 1, 1, false, 0, null, 0, 0);
    enc.put(1, 8, 1, true, 9, source, 0, 3);
    enc.put(2, 11, 4, false, 0, source, 4, 2);
    const last = '28000000010301000000000000000000000000020c000200000000040000000b06000a001d240000';
    assert.equal(hex(enc.bytes.subarray(0, enc.length)), (VECTORS[0]?.[6] ?? '') + (VECTORS[6]?.[6] ?? '') + last);
  });

  it('a maximal payload fits the transmit area', () => {
    assert.ok(verdictMessageBytes(true, 0xffff) <= TX_LIMIT);
  });
});
