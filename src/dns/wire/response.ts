/**
 * Writes responses into one preallocated buffer:
 *   header | question (the query's own octets) | body | OPT
 *
 * - QR set, opcode and RD and CD copied from the query, RA clear (no
 *   recursion here), AA as the body says.
 * - OPT only when the query had one (RFC 6891 §7): our UDP payload size,
 *   the extended RCODE, version 0, the DO bit copied (RFC 3225 §3), and the
 *   query's ECS echoed with our scope (RFC 7871 §7.2.1: family, source
 *   prefix and address as received).
 * - When the whole response is larger than `limit`, the body is left out
 *   and TC is set (RFC 2181 §9: a truncated answer is never a partial
 *   RRset); the client retries over TCP, where the limit is 65535.
 *
 * Returns the response length. The buffer is reused for the next response:
 * the caller sends it before writing another.
 */
import type { Body } from './body.ts';
import { RCODE, type ParsedQuery } from './query.ts';

export const MAX_MESSAGE = 65535;
const OPT_FIXED = 11;

export class ResponseWriter {
  readonly buf = Buffer.alloc(MAX_MESSAGE);
  /** Responses that were truncated (TC set). */
  truncated = 0;

  /**
   * A full response to a parsed query. `scope` is the ECS scope prefix to
   * return (0 for data that does not depend on the client's address).
   */
  answer(query: Uint8Array, q: ParsedQuery, body: Body, limit: number, udpPayload: number, scope: number): number {
    const b = this.buf;
    const qlen = q.questionEnd;
    const optLen = q.edns ? OPT_FIXED + (q.ecs ? 8 + q.ecsAddressLength : 0) : 0;
    const tc = qlen + body.bytes.length + optLen > limit;
    if (tc) this.truncated++;
    b.set(query.subarray(12, qlen), 12);
    let p = qlen;
    if (!tc) {
      b.set(body.bytes, p);
      p += body.bytes.length;
    }
    this.#header(q, body.rcode, body.aa, tc, 1, tc ? 0 : body.an, tc ? 0 : body.ns, (tc ? 0 : body.ar) + (q.edns ? 1 : 0));
    if (q.edns) p = this.#opt(p, q, body.rcode, udpPayload, scope);
    return p;
  }

  /**
   * An error response (FORMERR, NOTIMP, REFUSED, SERVFAIL, BADVERS): the
   * question echoed when it parsed (questionEnd > 0), OPT when the query had
   * one, nothing else.
   */
  error(query: Uint8Array, q: ParsedQuery, rcode: number, udpPayload: number): number {
    const b = this.buf;
    const qlen = q.questionEnd;
    let p = 12;
    if (qlen > 0) {
      b.set(query.subarray(12, qlen), 12);
      p = qlen;
    }
    this.#header(q, rcode, false, false, qlen > 0 ? 1 : 0, 0, 0, q.edns ? 1 : 0);
    if (q.edns) p = this.#opt(p, q, rcode, udpPayload, 0);
    return p;
  }

  #header(q: ParsedQuery, rcode: number, aa: boolean, tc: boolean, qd: number, an: number, ns: number, ar: number): void {
    const b = this.buf;
    b[0] = q.id >> 8;
    b[1] = q.id & 0xff;
    // QR | opcode | AA | TC | RD ; RA=0 Z=0 AD=0 CD(copied) | RCODE low nibble
    b[2] = 0x80 | (q.opcode << 3) | (aa ? 0x04 : 0) | (tc ? 0x02 : 0) | ((q.flags >> 8) & 0x01);
    b[3] = (q.flags & 0x10) | (rcode & 0x0f);
    b[4] = qd >> 8;
    b[5] = qd & 0xff;
    b[6] = an >> 8;
    b[7] = an & 0xff;
    b[8] = ns >> 8;
    b[9] = ns & 0xff;
    b[10] = ar >> 8;
    b[11] = ar & 0xff;
  }

  #opt(p: number, q: ParsedQuery, rcode: number, udpPayload: number, scope: number): number {
    const b = this.buf;
    const ecsLen = q.ecs ? 4 + q.ecsAddressLength : 0;
    b[p++] = 0; // root owner
    b[p++] = 0;
    b[p++] = 41; // OPT
    b[p++] = udpPayload >> 8;
    b[p++] = udpPayload & 0xff;
    b[p++] = (rcode >> 4) & 0xff; // extended RCODE
    b[p++] = 0; // version 0
    b[p++] = q.doBit ? 0x80 : 0;
    b[p++] = 0;
    const rdlen = ecsLen > 0 ? 4 + ecsLen : 0;
    b[p++] = rdlen >> 8;
    b[p++] = rdlen & 0xff;
    if (ecsLen > 0) {
      b[p++] = 0;
      b[p++] = 8; // ECS
      b[p++] = ecsLen >> 8;
      b[p++] = ecsLen & 0xff;
      b[p++] = 0;
      b[p++] = q.ecsFamily;
      b[p++] = q.ecsSource;
      // Family 0 (no address, RFC 7871 §7.1.2) has no bits to scope.
      b[p++] = rcode === RCODE.NOERROR || rcode === RCODE.NXDOMAIN ? Math.min(scope, q.ecsFamily === 1 ? 32 : q.ecsFamily === 2 ? 128 : 0) : 0;
      for (let i = 0; i < q.ecsAddressLength; i++) b[p++] = (q.ecsAddress[i] ?? 0);
    }
    return p;
  }
}
