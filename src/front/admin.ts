/**
 * The front node's admin commands, on the admin socket (src/admin/socket.ts:
 * JSON lines on a Unix socket, mode 0600).
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
 * Bad requests (unknown command, unknown service or server, bad value) get
 * {"ok":false,"error":...}, are counted and logged like the socket's own
 * refusals (not JSON, line over 4 KiB).
 */
import { AdminSocket, type Reply } from '../admin/socket.ts';
import { validateConfig, ConfigError } from '../config/load.ts';
import type { Logger } from '../log/logger.ts';
import { frontConfigSchema, type FrontConfig } from './config.ts';

export interface AdminTarget {
  readonly log: Logger;
  config: Readonly<FrontConfig>;
  apply(next: Readonly<FrontConfig>): void;
  reload(): boolean;
  /** The front node's status (FrontStatus), passed through as JSON. */
  status(): object;
}

export class AdminServer {
  readonly #socket: AdminSocket;
  readonly #target: AdminTarget;

  constructor(path: string, target: AdminTarget) {
    this.#target = target;
    this.#socket = new AdminSocket(path, target.log, (r, reject) => this.#command(r, reject));
  }

  get rejected(): number {
    return this.#socket.rejected;
  }
  get handled(): number {
    return this.#socket.handled;
  }

  listen(): Promise<void> {
    return this.#socket.listen();
  }

  close(): void {
    this.#socket.close();
  }

  /** Handles one request line (exposed for tests). */
  handle(line: string): Reply {
    return this.#socket.handle(line);
  }

  #command(r: Record<string, unknown>, reject: (error: string) => Reply): Reply {
    const cmd = r['cmd'];
    switch (cmd) {
      case 'status':
        return { ok: true, status: this.#target.status() };
      case 'reload':
        return this.#target.reload() ? { ok: true } : { ok: false, error: 'configuration refused; see the log' };
      case 'drain':
      case 'enable':
      case 'disable':
      case 'remove':
      case 'weight':
      case 'capacity':
        return this.#change(cmd, r, reject);
      default:
        return reject(`unknown cmd ${JSON.stringify(cmd)}: status, drain, enable, disable, remove, weight, capacity, reload`);
    }
  }

  #change(cmd: string, r: Record<string, unknown>, reject: (error: string) => Reply): Reply {
    const cfg = this.#target.config;
    const si = cfg.services.findIndex((s) => s.name === r['service']);
    const svc = cfg.services[si];
    if (!svc) return reject(`no service named ${JSON.stringify(r['service'])}`);
    const ki = svc.servers.findIndex((s) => s.name === r['server']);
    const srv = svc.servers[ki];
    if (!srv) return reject(`service ${svc.name} has no server named ${JSON.stringify(r['server'])}`);
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
      return reject(err instanceof ConfigError ? err.problems.map((p) => `${p.path}: ${p.message}`).join('; ') : String(err));
    }
    this.#target.apply(next);
    this.#target.log.info({ cmd, service: svc.name, server: srv.name, value }, 'admin change applied');
    return { ok: true };
  }
}
