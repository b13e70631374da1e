/**
 * `tcp` check (keepalived TCP_CHECK, HAProxy `check` without options): a
 * connect to the server's check port passes. The connection is then reset
 * (RST, as HAProxy's checks close) rather than closed with FIN: the front
 * node keeps no TIME_WAIT socket per check, which at 1,000 servers checked
 * every second would be 60,000 at any time.
 *
 * The timeout bounds the whole check: when it fires the socket is destroyed
 * and the result is a timeout, whatever arrives later. Nothing here blocks:
 * creating the socket is the only synchronous work.
 */
import { connect } from 'node:net';
import { CHECK_OK, socketFailure, timeoutReason, type CheckResult } from './result.ts';

export interface CheckTarget {
  readonly address: string;
  readonly port: number;
  /** Local address to send from (health.source). */
  readonly source?: string | undefined;
}

export function tcpCheck(t: CheckTarget, timeoutMs: number): Promise<CheckResult> {
  return new Promise((resolve) => {
    let done = false;
    const socket = connect({ host: t.address, port: t.port, ...(t.source !== undefined ? { localAddress: t.source } : {}) });
    const finish = (r: CheckResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const timer = setTimeout(() => {
      finish(timeoutReason(timeoutMs, false));
      socket.destroy();
    }, timeoutMs);
    socket.once('connect', () => {
      finish(CHECK_OK);
      socket.resetAndDestroy();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      finish(socketFailure(err));
      socket.destroy();
    });
  });
}
