/**
 * Client side of a daemon's admin socket (JSON lines, socket.ts):
 * one request, one reply.
 */
import { createConnection } from 'node:net';
import { SluiceError } from '../errors/errors.ts';

/** The socket could not be connected to (no daemon, wrong path, no permission) or failed. */
export class AdminUnreachableError extends SluiceError {
  readonly code = 'ERR_SLUICE_ADMIN_UNREACHABLE';
}
/** The daemon gave no reply within the timeout. */
export class AdminTimeoutError extends SluiceError {
  readonly code = 'ERR_SLUICE_ADMIN_TIMEOUT';
}
/** The reply line is not JSON. */
export class AdminReplyError extends SluiceError {
  readonly code = 'ERR_SLUICE_ADMIN_REPLY';
}

export interface AdminReply {
  ok?: boolean;
  error?: string;
  status?: unknown;
}

/** Sends `req`; resolves with the reply, or rejects with one of the errors above. */
export function adminRequest(socket: string, req: Record<string, unknown>, timeoutMs = 10_000): Promise<AdminReply> {
  return new Promise((resolve, reject) => {
    const sock = createConnection(socket);
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new AdminTimeoutError(`no reply from ${socket} within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(`${JSON.stringify(req)}\n`));
    sock.on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      sock.end();
      try {
        resolve(JSON.parse(buf.slice(0, nl)) as AdminReply);
      } catch {
        reject(new AdminReplyError(`unreadable reply from ${socket}`));
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(new AdminUnreachableError(`cannot reach ${socket}: ${err.message}`, { cause: err }));
    });
  });
}
