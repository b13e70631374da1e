/**
 * `http` check (keepalived HTTP_GET, HAProxy `option httpchk` with
 * `http-check expect`): an HTTP/1.0 GET of `path` with `Connection: close`
 * (HTTP/1.0 so that no answer is chunked: the body is the bytes after the
 * header, as they come). It passes when the status is in `expectStatus`
 * and, if `bodyMatch` is set, the body contains the substring or matches
 * the regular expression.
 *
 * Bounded: at most MAX_HEAD_BYTES of status line and header and
 * MAX_BODY_BYTES of body are read; the timeout covers connect, request and
 * response together, and destroys the socket when it fires. The check ends
 * as soon as its answer is known (a bad status needs no body; a substring
 * found needs no more), resetting the connection instead of reading on.
 */
import { connect } from 'node:net';
import { CHECK_OK, socketFailure, timeoutReason, type CheckResult } from './result.ts';
import { statusIn, type StatusSet } from './status-set.ts';
import type { CheckTarget } from './tcp-check.ts';

export const MAX_HEAD_BYTES = 16 << 10;
export const MAX_BODY_BYTES = 64 << 10;

export interface HttpCheckOptions {
  readonly path: string;
  /** The Host header (default: the target's address, an IPv6 one in brackets: hostHeader). */
  readonly host?: string | undefined;
  readonly expect: StatusSet;
  /** A substring or a regular expression the body must match. */
  readonly bodyMatch?: string | RegExp | undefined;
}

const STATUS_LINE = /^HTTP\/\d(?:\.\d)? (\d{3})(?: |\r|$)/;
const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * The Host header for an address: an IPv6 literal goes in brackets (RFC
 * 7230 section 5.4, RFC 3986 IP-literal); bare, a server reads the text
 * after its first colon as a port.
 */
export function hostHeader(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

export function httpCheck(t: CheckTarget, o: HttpCheckOptions, timeoutMs: number): Promise<CheckResult> {
  return new Promise((resolve) => {
    let done = false;
    let head: Buffer = Buffer.alloc(0);
    let status = -1;
    let body: Buffer[] = [];
    let bodyBytes = 0;
    const socket = connect({ host: t.address, port: t.port, ...(t.source !== undefined ? { localAddress: t.source } : {}) });
    const finish = (r: CheckResult, reset: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
      if (reset && !socket.connecting && !socket.destroyed) socket.resetAndDestroy();
      else socket.destroy();
    };
    const timer = setTimeout(() => {
      finish(timeoutReason(timeoutMs, !socket.connecting), false);
    }, timeoutMs);
    /** Decides on the body so far; `complete`: no more is coming. */
    const judgeBody = (complete: boolean): void => {
      const m = o.bodyMatch;
      const all = Buffer.concat(body, bodyBytes);
      body = [all];
      const hit = m === undefined ? true : typeof m === 'string' ? all.includes(m) : m.test(all.toString('utf8'));
      if (hit) finish(CHECK_OK, !complete);
      else if (complete || bodyBytes >= MAX_BODY_BYTES) finish({ outcome: 'body', reason: 'body did not match' }, !complete);
    };
    socket.once('connect', () => {
      socket.write(`GET ${o.path} HTTP/1.0\r\nHost: ${o.host ?? hostHeader(t.address)}\r\nUser-Agent: sluice-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n`);
    });
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      if (status < 0) {
        head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
        const end = head.indexOf(HEAD_END);
        if (end < 0) {
          if (head.length > MAX_HEAD_BYTES) finish({ outcome: 'error', reason: `no end of the HTTP header within ${String(MAX_HEAD_BYTES)} bytes` }, true);
          return;
        }
        const m = STATUS_LINE.exec(head.subarray(0, Math.min(end + 2, 64)).toString('latin1'));
        if (!m) {
          finish({ outcome: 'error', reason: 'not an HTTP response' }, true);
          return;
        }
        status = Number(m[1]);
        if (!statusIn(o.expect, status)) {
          finish({ outcome: 'status', reason: `HTTP ${String(status)}` }, true);
          return;
        }
        if (o.bodyMatch === undefined) {
          finish(CHECK_OK, true);
          return;
        }
        chunk = head.subarray(end + HEAD_END.length);
        head = Buffer.alloc(0);
      }
      const room = MAX_BODY_BYTES - bodyBytes;
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      body.push(part);
      bodyBytes += part.length;
      judgeBody(false);
    });
    socket.on('end', () => {
      if (status < 0) finish({ outcome: 'error', reason: 'connection closed before an HTTP status line' }, false);
      else judgeBody(true);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      finish(socketFailure(err), false);
    });
  });
}
