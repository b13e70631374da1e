/**
 * The front node's local admin socket: one JSON object per line in, one per
 * line out, on a Unix socket (mode 0600: root or the daemon's user only).
 *
 *   {"cmd":"status"}
 *   {"cmd":"drain"|"enable"|"disable"|"remove","service":"www","server":"s1b"}
 *   {"cmd":"weight"|"capacity","service":"www","server":"s1b","value":3}
 *   {"cmd":"reload"}
 *
 * Changes apply at once and are not written to the config file (a reload
 * returns to the file, as with ipvsadm and keepalived). None of them breaks
 * an established connection: drain and disable stop new connections only,
 * remove stops tracking (the kernel keeps the flow).
 *
 * Bad requests (not JSON, unknown command, unknown service or server, bad
 * value, line over 4 KiB) get {"ok":false,"error":...}, are counted and
 * logged; the connection and the daemon carry on.
 */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { validateConfig, ConfigError } from '../config/load.ts';
import type { Logger } from '../log/logger.ts';
import { frontConfigSchema, type FrontConfig } from './config.ts';

const MAX_LINE = 4096;

export interface AdminTarget {
  readonly log: Logger;
  config: Readonly<FrontConfig>;
  apply(next: Readonly<FrontConfig>): void;
  reload(): boolean;
  stats(): Record<string, unknown>;
}

type Reply = Record<string, unknown>;

export class AdminServer {
  readonly #server: Server;
  readonly #path: string;
  readonly #target: AdminTarget;
  rejected = 0;
  handled = 0;

  constructor(path: string, target: AdminTarget) {
    this.#path = path;
    this.#target = target;
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
        sock.write(`${JSON.stringify(this.#reject('request line longer than 4096 bytes'))}\n`);
      }
    });
  }

  #reject(error: string): Reply {
    this.rejected++;
    this.#target.log.warn({ error }, 'admin request rejected');
    return { ok: false, error };
  }

  /** Handles one request line (exposed for tests). */
  handle(line: string): Reply {
    let req: unknown;
    try {
      req = JSON.parse(line);
    } catch {
      return this.#reject('not JSON');
    }
    if (typeof req !== 'object' || req === null) return this.#reject('a request is a JSON object');
    const r = req as Record<string, unknown>;
    const cmd = r['cmd'];
    this.handled++;
    switch (cmd) {
      case 'status':
        return { ok: true, status: this.#target.stats() };
      case 'reload':
        return this.#target.reload() ? { ok: true } : { ok: false, error: 'configuration refused; see the log' };
      case 'drain':
      case 'enable':
      case 'disable':
      case 'remove':
      case 'weight':
      case 'capacity':
        return this.#change(cmd, r);
      default:
        return this.#reject(`unknown cmd ${JSON.stringify(cmd)}: status, drain, enable, disable, remove, weight, capacity, reload`);
    }
  }

  #change(cmd: string, r: Record<string, unknown>): Reply {
    const cfg = this.#target.config;
    const si = cfg.services.findIndex((s) => s.name === r['service']);
    const svc = cfg.services[si];
    if (!svc) return this.#reject(`no service named ${JSON.stringify(r['service'])}`);
    const ki = svc.servers.findIndex((s) => s.name === r['server']);
    const srv = svc.servers[ki];
    if (!srv) return this.#reject(`service ${svc.name} has no server named ${JSON.stringify(r['server'])}`);
    let servers = [...svc.servers];
    const value = r['value'];
    switch (cmd) {
      case 'drain':
        servers[ki] = { ...srv, state: 'drain' };
        break;
      case 'disable':
        servers[ki] = { ...srv, state: 'disabled' };
        break;
      case 'enable':
        servers[ki] = { ...srv, state: 'active' };
        break;
      case 'remove':
        servers = servers.filter((_, i) => i !== ki);
        break;
      case 'weight':
        servers[ki] = { ...srv, weight: value as number };
        break;
      case 'capacity':
        servers[ki] = { ...srv, capacity: value as number };
        break;
    }
    const draft = { ...cfg, services: cfg.services.map((s, i) => (i === si ? { ...s, servers } : s)) };
    let next: Readonly<FrontConfig>;
    try {
      next = validateConfig(frontConfigSchema, draft, 'admin request');
    } catch (err) {
      return this.#reject(err instanceof ConfigError ? err.problems.map((p) => `${p.path}: ${p.message}`).join('; ') : String(err));
    }
    this.#target.apply(next);
    this.#target.log.info({ cmd, service: svc.name, server: srv.name, value }, 'admin change applied');
    return { ok: true };
  }
}
