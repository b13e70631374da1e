/**
 * NFQNL_MSG_VERDICT messages, encoded back to back into the transmit area
 * the addon sends from (native/src/nfq.c does only the sendto). The kernel's
 * netlink_rcv_skb() walks every message of one datagram, so a batch of
 * verdicts costs one syscall per TX_LIMIT bytes. One reused DataView, no
 * allocation per verdict.
 *
 * A message: nlmsghdr (16 bytes: length, type NFNL_SUBSYS_QUEUE << 8 |
 * NFQNL_MSG_VERDICT, flags NLM_F_REQUEST, seq 0, pid 0), nfgenmsg (4 bytes:
 * AF_UNSPEC, NFNETLINK_V0, the queue number big-endian), then attributes
 * (u16 length without padding, u16 type, value padded to 4 bytes):
 * NFQA_VERDICT_HDR (verdict, packet id: both big-endian), NFQA_MARK
 * (big-endian) if a mark is set, NFQA_PAYLOAD (the replacement packet) if
 * one is given. Netlink values are big-endian inside nfnetlink attributes,
 * host order (little-endian here, as on every machine Sluice runs on) in the
 * netlink headers.
 */

/**
 * netlink_sendmsg() refuses a datagram larger than sk_sndbuf - 32 with
 * EMSGSIZE. The addon raises sk_sndbuf to 1 MiB at open; each send stays
 * under this bound, which still fits one 64 KiB replacement payload.
 */
export const TX_LIMIT = 192 * 1024;

const NLMSG_HDRLEN = 16;
const NFGENMSG_LEN = 4;
const NFNL_SUBSYS_QUEUE = 3;
const NFQNL_MSG_VERDICT = 1;
const NLM_F_REQUEST = 1;
const NFQA_VERDICT_HDR = 2;
const NFQA_MARK = 3;
const NFQA_PAYLOAD = 10;
/** Header, nfgenmsg and the 12-byte NFQA_VERDICT_HDR attribute. */
const BASE_LEN = NLMSG_HDRLEN + NFGENMSG_LEN + 12;
const MARK_LEN = 8;

const align4 = (n: number): number => (n + 3) & ~3;

/** Bytes one message takes; payloadLength < 0 for none. */
export function verdictMessageBytes(hasMark: boolean, payloadLength: number): number {
  return BASE_LEN + (hasMark ? MARK_LEN : 0) + (payloadLength < 0 ? 0 : 4 + align4(payloadLength));
}

export class VerdictEncoder {
  /** The transmit area: messages [0, length) are ready to send. */
  readonly bytes = new Uint8Array(TX_LIMIT);
  length = 0;
  readonly #view = new DataView(this.bytes.buffer);

  /**
   * Appends one message for packet `id` of queue `queue`. The caller checks
   * there is room (verdictMessageBytes) and that the payload, bytes
   * [offset, offset + payloadLength) of `source` (none if null), lies in it
   * and is at most 65535 bytes (an attribute's length is 16 bits). `source`
   * is a Buffer view made once: Buffer#copy takes offsets, so no view is
   * made per verdict.
   */
  put(queue: number, id: number, verdict: number, hasMark: boolean, mark: number, source: Buffer | null, offset: number, payloadLength: number): void {
    const v = this.#view;
    const start = this.length;
    const len = verdictMessageBytes(hasMark, source === null ? -1 : payloadLength);
    v.setUint32(start, len, true);
    v.setUint16(start + 4, (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT, true);
    v.setUint16(start + 6, NLM_F_REQUEST, true);
    v.setUint32(start + 8, 0, true); // seq
    v.setUint32(start + 12, 0, true); // pid
    v.setUint8(start + 16, 0); // AF_UNSPEC
    v.setUint8(start + 17, 0); // NFNETLINK_V0
    v.setUint16(start + 18, queue, false);
    let p = start + NLMSG_HDRLEN + NFGENMSG_LEN;
    v.setUint16(p, 12, true);
    v.setUint16(p + 2, NFQA_VERDICT_HDR, true);
    v.setUint32(p + 4, verdict, false);
    v.setUint32(p + 8, id, false);
    p += 12;
    if (hasMark) {
      v.setUint16(p, MARK_LEN, true);
      v.setUint16(p + 2, NFQA_MARK, true);
      v.setUint32(p + 4, mark, false);
      p += MARK_LEN;
    }
    if (source !== null) {
      v.setUint16(p, 4 + payloadLength, true);
      v.setUint16(p + 2, NFQA_PAYLOAD, true);
      source.copy(this.bytes, p + 4, offset, offset + payloadLength);
      this.bytes.fill(0, p + 4 + payloadLength, start + len); // padding
    }
    this.length = start + len;
  }
}
