/**
 * A daemon's local admin socket: one JSON object per line in, one per line
 * out, on a Unix socket (mode 0600: root or the daemon's user only). The
 * commands are the daemon's (src/front/admin.ts, src/dns/admin.ts); this
 * part owns the socket, the framing and the bounds.
 *
 * Bad requests (not JSON, not an object, line over 4 KiB) get
 * {"ok":false,"error":...}, are counted and logged; the connection and the
 * daemon carry on.
 */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Logger } from '../log/logger.ts';

const MAX_LINE = 4096;

export type Reply = Record<string, unknown>;

/** Handles one parsed request object; `reject` counts and logs a refusal. */
export type CommandHandler = (req: Record<string, unknown>, reject: (error: string) => Reply) => Reply;

export class AdminSocket {
  readonly #server: Server;
  readonly #path: string;
  readonly #log: Logger;
  readonly #handler: CommandHandler;
  rejected = 0;
  handled = 0;

  constructor(path: string, log: Logger, handler: CommandHandler) {
    this.#path = path;
    this.#log = log;
    this.#handler = handler;
    this.#server = createServer((sock) => {
      this.#serve(sock);
    });
  }

  listen(): Promise<void> {
    mkdirSync(dirname(this.#path), { recursive: true, mode: 0o755 });
    rmSync(this.#path, { force: true }); // a stale socket of a killed daemon
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#path, () => {
        chmodSync(this.#path, 0o600);
        resolve();
      });
    });
  }

  close(): void {
    this.#server.close();
    rmSync(this.#path, { force: true });
  }

  #serve(sock: Socket): void {
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('error', () => {
      /* client went away */
    });
    sock.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        sock.write(`${JSON.stringify(this.handle(line))}\n`);
      }
      if (buf.length > MAX_LINE) {
        buf = '';
        sock.write(`${JSON.stringify(this.reject('request line longer than 4096 bytes'))}\n`);
      }
    });
  }

  reject(error: string): Reply {
    this.rejected++;
    this.#log.warn({ error }, 'admin request rejected');
    return { ok: false, error };
  }

  /** Handles one request line (exposed for tests). */
  handle(line: string): Reply {
    let req: unknown;
    try {
      req = JSON.parse(line);
    } catch {
      return this.reject('not JSON');
    }
    if (typeof req !== 'object' || req === null || Array.isArray(req)) return this.reject('a request is a JSON object');
    this.handled++;
    return this.#handler(req as Record<string, unknown>, (e) => this.reject(e));
  }
}

/** A daemon whose admin commands are the common two. */
export interface StatusAndReload {
  /** The daemon's status: a JSON object (its type is the daemon's own, e.g. FrontStatus). */
  status(): object;
  /** false when the file is refused (the running configuration stays). */
  reload(): boolean;
}

/** The handler of a daemon with only `status` and `reload` (dns, agent, master). */
export function statusAndReload(daemon: StatusAndReload): CommandHandler {
  return (r, reject) => {
    switch (r['cmd']) {
      case 'status':
        return { ok: true, status: daemon.status() };
      case 'reload':
        return daemon.reload() ? { ok: true } : { ok: false, error: 'configuration refused; see the log' };
      default:
        return reject(`unknown cmd ${JSON.stringify(r['cmd'])}: status, reload`);
    }
  };
}
