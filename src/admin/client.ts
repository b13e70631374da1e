/**
 * Client side of a daemon's admin socket (JSON lines, socket.ts):
 * one request, one reply.
 */
import { createConnection } from 'node:net';

export interface AdminReply {
  ok?: boolean;
  error?: string;
  status?: unknown;
}

export function adminRequest(socket: string, req: Record<string, unknown>, timeoutMs = 10_000): Promise<AdminReply> {
  return new Promise((resolve, reject) => {
    const sock = createConnection(socket);
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply from ${socket} within ${timeoutMs} ms`));
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
        reject(new Error(`unreadable reply from ${socket}`));
      }
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot reach ${socket}: ${err.message}`));
    });
  });
}
