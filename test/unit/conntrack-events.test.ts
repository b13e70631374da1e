/**
 * The conntrack destroy-event decoder (native/src/ct_msg.c, ctevents.c) on netlink
 * messages built here as the kernel builds them (ctnetlink_conntrack_event):
 * the words it fills, what it does without the optional attributes, and
 * what it refuses. The socket side is test/netns/front-ctevents.test.ts.
 * Also the table dump's rows (native/src/ct_dump.c: the same decoder,
 * native/src/ct_msg.c, plus the reply tuple); its socket side is test/netns/ct-dump.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeConntrackEvent } from '../../src/conntrack/events.ts';
import { CT_ROW_WORDS, EventFlag, EventMeta, RowMeta } from '../../src/conntrack/layout.ts';
import { loadNative } from '../../src/nfqueue/native.ts';

const NLA_F_NESTED = 0x8000;
const IPCTNL_MSG_CT_DELETE = 2;
const NFNL_SUBSYS_CTNETLINK = 1;
const CTA = { TupleOrig: 1, TupleReply: 2, Protoinfo: 4, Mark: 8, Id: 12 } as const;
const TUPLE = { Ip: 1, Proto: 2 } as const;
const IP = { V4Src: 1, V4Dst: 2, V6Src: 3, V6Dst: 4 } as const;
const PROTO = { Num: 1, SrcPort: 2, DstPort: 3 } as const;

/** One attribute (payload padded to 4 bytes). */
function attr(type: number, payload: Uint8Array, nested = false): Uint8Array {
  const len = 4 + payload.length;
  const out = new Uint8Array((len + 3) & ~3);
  const v = new DataView(out.buffer);
  v.setUint16(0, len, true);
  v.setUint16(2, type | (nested ? NLA_F_NESTED : 0), true);
  out.set(payload, 4);
  return out;
}
const cat = (...parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const be32 = (n: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n >>> 0);
  return b;
};
const be16 = (n: number): Uint8Array => {
  const b = new Uint8Array(2);
  new DataView(b.buffer).setUint16(0, n);
  return b;
};

/** A netlink message: header, nfgenmsg (family), then attributes. */
function message(family: number, attrs: Uint8Array, type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE): Uint8Array {
  const body = cat(new Uint8Array([family, 0, 0, 0]), attrs);
  const out = new Uint8Array(16 + body.length);
  const v = new DataView(out.buffer);
  v.setUint32(0, out.length, true);
  v.setUint16(4, type, true);
  out.set(body, 16);
  return out;
}

function tuple4(src: number, dst: number, proto: number, sport?: number, dport?: number, which: number = CTA.TupleOrig): Uint8Array {
  const ports = sport === undefined || dport === undefined ? [] : [attr(PROTO.SrcPort, be16(sport)), attr(PROTO.DstPort, be16(dport))];
  return attr(
    which,
    cat(attr(TUPLE.Ip, cat(attr(IP.V4Src, be32(src)), attr(IP.V4Dst, be32(dst))), true), attr(TUPLE.Proto, cat(attr(PROTO.Num, new Uint8Array([proto])), ...ports), true)),
    true,
  );
}

describe('conntrack destroy event decoder', () => {
  it('reads family, protocol, the original tuple, mark, TCP state and id', () => {
    const protoinfo = attr(CTA.Protoinfo, attr(1 /* TCP */, attr(1 /* STATE */, new Uint8Array([7])), true), true);
    const m = decodeConntrackEvent(message(2, cat(tuple4(0xc6120001, 0xc6130064, 6, 40000, 80), protoinfo, attr(CTA.Mark, be32(0x51001002)), attr(CTA.Id, be32(0xdeadbeef)))));
    assert.ok(m);
    assert.equal(m[EventMeta.Family], 2);
    assert.equal(m[EventMeta.Protocol], 6);
    assert.equal(m[EventMeta.Src], 0xc6120001);
    assert.deepEqual([...m.subarray(EventMeta.Src + 1, EventMeta.Src + 4)], [0, 0, 0]);
    assert.equal(m[EventMeta.Dst], 0xc6130064);
    assert.equal(m[EventMeta.SrcPort], 40000);
    assert.equal(m[EventMeta.DstPort], 80);
    assert.equal(m[EventMeta.Mark], 0x51001002);
    assert.equal(m[EventMeta.TcpState], 7);
    assert.equal(m[EventMeta.Id], 0xdeadbeef);
    assert.equal(m[EventMeta.Flags], EventFlag.Mark | EventFlag.Ports | EventFlag.TcpState | EventFlag.Id);
  });

  it('reads an IPv6 tuple into four words per address', () => {
    const v6 = (last: number): Uint8Array => new Uint8Array([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
    const t = attr(CTA.TupleOrig, cat(attr(TUPLE.Ip, cat(attr(IP.V6Src, v6(1)), attr(IP.V6Dst, v6(2))), true), attr(TUPLE.Proto, cat(attr(PROTO.Num, new Uint8Array([17])), attr(PROTO.SrcPort, be16(5353)), attr(PROTO.DstPort, be16(53))), true)), true);
    const m = decodeConntrackEvent(message(10, t));
    assert.ok(m);
    assert.equal(m[EventMeta.Family], 10);
    assert.deepEqual([...m.subarray(EventMeta.Src, EventMeta.Src + 4)], [0x20010db8, 0, 0, 1]);
    assert.deepEqual([...m.subarray(EventMeta.Dst, EventMeta.Dst + 4)], [0x20010db8, 0, 0, 2]);
    assert.equal(m[EventMeta.DstPort], 53);
  });

  it('without optional attributes: mark 0 and no flags (the kernel leaves a zero mark out)', () => {
    const m = decodeConntrackEvent(message(2, tuple4(1, 2, 1)));
    assert.ok(m);
    assert.equal(m[EventMeta.Mark], 0);
    assert.equal(m[EventMeta.Flags], 0);
    assert.equal(m[EventMeta.SrcPort], 0);
  });

  it('refuses a message without addresses, a truncated one, and another subsystem', () => {
    assert.equal(decodeConntrackEvent(message(2, attr(CTA.Mark, be32(1)))), undefined);
    const whole = message(2, tuple4(1, 2, 6, 3, 4));
    assert.equal(decodeConntrackEvent(whole.subarray(0, whole.length - 8)), undefined);
    assert.equal(decodeConntrackEvent(message(2, tuple4(1, 2, 6, 3, 4), (4 << 8) | 0)), undefined);
    // A wrong-length address attribute is ignored, so the tuple has none.
    const bad = attr(CTA.TupleOrig, attr(TUPLE.Ip, cat(attr(IP.V4Src, be16(1)), attr(IP.V4Dst, be32(2))), true), true);
    assert.equal(decodeConntrackEvent(message(2, bad)), undefined);
  });
});

/** The dump's row decoder on one message: the row's words, or undefined if refused. */
function decodeRow(msg: Uint8Array): Uint32Array | undefined {
  const row = new Uint32Array(CT_ROW_WORDS).fill(0xeeeeeeee); // stale words must be overwritten
  return loadNative().ctMessageDecode(msg, row) === 1 ? row : undefined;
}

describe('conntrack table dump row decoder', () => {
  const NEW = (NFNL_SUBSYS_CTNETLINK << 8) | 0; // IPCTNL_MSG_CT_NEW: a dump's entries
  const protoinfo = attr(CTA.Protoinfo, attr(1 /* TCP */, attr(1 /* STATE */, new Uint8Array([3])), true), true);
  const orig = tuple4(0xc6120001, 0xc6130064, 6, 40000, 80);
  const reply = tuple4(0xc6120402, 0xc6120001, 6, 8080, 40000, CTA.TupleReply);
  const cases: [string, Uint8Array, Partial<Record<keyof typeof RowMeta, number>> | undefined][] = [
    ['a DNATed TCP flow: both tuples, state, mark', message(2, cat(orig, reply, protoinfo, attr(CTA.Mark, be32(0x51001002))), NEW), { Family: 2, Protocol: 6, Src: 0xc6120001, Dst: 0xc6130064, SrcPort: 40000, DstPort: 80, ReplySrc: 0xc6120402, ReplySrcPort: 8080, TcpState: 3, Mark: 0x51001002, Flags: EventFlag.Ports | EventFlag.Reply | EventFlag.TcpState | EventFlag.Mark }],
    ['no reply tuple: no Reply flag, its words 0', message(2, cat(orig, protoinfo), NEW), { ReplySrc: 0, ReplySrcPort: 0, Flags: EventFlag.Ports | EventFlag.TcpState }],
    ['a reply tuple without ports (icmp): no Reply flag', message(2, cat(tuple4(1, 2, 1), tuple4(2, 1, 1, undefined, undefined, CTA.TupleReply)), NEW), { Protocol: 1, ReplySrc: 2, Flags: 0 }],
    ['no original tuple: refused', message(2, cat(reply, protoinfo), NEW), undefined],
    ['cut short: refused', message(2, cat(orig, reply), NEW).subarray(0, 40), undefined],
    ['another subsystem: refused', message(2, cat(orig, reply), (4 << 8) | 0), undefined],
  ];
  for (const [name, msg, want] of cases) {
    it(name, () => {
      const row = decodeRow(msg);
      if (want === undefined) {
        assert.equal(row, undefined);
        return;
      }
      assert.ok(row);
      for (const [k, v] of Object.entries(want)) assert.equal(row[RowMeta[k as keyof typeof RowMeta]], v, k);
      assert.deepEqual([...row.subarray(RowMeta.ReplySrc + 1, RowMeta.ReplySrc + 4)], [0, 0, 0], 'an IPv4 address fills word 0 only');
    });
  }
});
