/**
 * The front node's admin commands, on the admin socket (src/admin/socket.ts:
 * JSON lines on a Unix socket, mode 0600).
 *
 *   {"cmd":"status"}
 *   {"cmd":"drain"|"enable"|"disable"|"remove","service":"www","server":"s1b"}
 *   {"cmd":"weight"|"capacity","service":"www","server":"s1b","value":3}
 *   {"cmd":"add","service":"www","server":"s1d","address":"198.18.201.14","port":8080,"weight":2,"capacity":100}
 *   {"cmd":"revert","service":"www","server":"s1b"}   drop the server's ctl override
 *   {"cmd":"clear"}                                    drop every ctl override
 *   {"cmd":"reload"}
 *   {"cmd":"ha","state":"master"|"backup"|"fault"}   keepalived's state (the notify hook, `sluice ha notify`)
 *
 * Changes apply at once. They are not written to the config file; they
 * are kept as overrides of it in the state file (overrides.ts,
 * override-store.ts) and so survive a reload and a restart, shown in
 * status as overriding the file. A change is validated against the schema
 * first (the running config with the change applied), so a bad value is
 * refused naming its key. None of them breaks an established connection:
 * drain and disable stop new connections only, remove stops tracking (the
 * kernel keeps the flow).
 *
 * Bad requests (unknown command, unknown service or server, bad value) get
 * {"ok":false,"error":...}, are counted and logged like the socket's own
 * refusals (not JSON, line over 4 KiB).
 */
import { AdminSocket, type Reply } from '../admin/socket.ts';
import { validateConfig, ConfigError } from '../config/load.ts';
import type { Logger } from '../log/logger.ts';
import { frontConfigSchema, type FrontConfig } from './config.ts';
import type { ServerChange, ServerFields } from './overrides.ts';
import { HA_STATES, type HaRole, type HaState } from './ha/role.ts';

export interface AdminTarget {
  readonly log: Logger;
  /** The running configuration (the file with the ctl overrides applied). */
  readonly config: Readonly<FrontConfig>;
  /** Keeps and applies a validated change (FrontDaemon.change); the reason when refused. */
  change(c: ServerChange): string | undefined;
  reload(): boolean;
  /** The front node's status (FrontStatus), passed through as JSON. */
  status(): object;
  /** keepalived's state for this node (FrontDaemon.haNotify): the role before and after, or why it was refused. */
  haNotify?(state: HaState): { from: HaRole; to: HaRole; changed: boolean } | string;
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
      case 'add':
        return this.#add(r, reject);
      case 'revert':
        if (typeof r['service'] !== 'string' || typeof r['server'] !== 'string') return reject('revert takes service and server');
        return this.#commit({ cmd: 'revert', service: r['service'], server: r['server'] }, reject);
      case 'clear':
        return this.#commit({ cmd: 'clear' }, reject);
      case 'ha':
        return this.#ha(r, reject);
      default:
        return reject(`unknown cmd ${JSON.stringify(cmd)}: status, drain, enable, disable, remove, weight, capacity, add, revert, clear, reload, ha`);
    }
  }

  #ha(r: Record<string, unknown>, reject: (error: string) => Reply): Reply {
    const state = r['state'];
    if (typeof state !== 'string' || !HA_STATES.includes(state as HaState)) return reject(`ha takes state ${HA_STATES.join(', ')}`);
    const out = this.#target.haNotify?.(state as HaState) ?? 'this daemon takes no ha state';
    if (typeof out === 'string') return reject(out);
    return { ok: true, ...out };
  }

  /** Hands a change to the daemon (which keeps it in the state file and applies it). */
  #commit(c: ServerChange, reject: (error: string) => Reply): Reply {
    const refused = this.#target.change(c);
    if (refused !== undefined) return reject(refused);
    this.#target.log.info(c, 'admin change applied');
    return { ok: true };
  }

  /** Validates the running config with the change applied: bad values are refused naming their key. */
  #validate(draft: unknown, reject: (error: string) => Reply): Reply | undefined {
    try {
      validateConfig(frontConfigSchema, draft, 'admin request');
      return undefined;
    } catch (err) {
      return reject(err instanceof ConfigError ? err.problems.map((p) => `${p.path}: ${p.message}`).join('; ') : String(err));
    }
  }

  #add(r: Record<string, unknown>, reject: (error: string) => Reply): Reply {
    const cfg = this.#target.config;
    const si = cfg.services.findIndex((s) => s.name === r['service']);
    const svc = cfg.services[si];
    if (!svc) return reject(`no service named ${JSON.stringify(r['service'])}`);
    const server: Record<string, unknown> = { name: r['server'], address: r['address'] };
    for (const k of ['port', 'weight', 'capacity'] as const) if (r[k] !== undefined) server[k] = r[k];
    const draft = { ...cfg, services: cfg.services.map((s, i) => (i === si ? { ...s, servers: [...s.servers, server] } : s)) };
    const bad = this.#validate(draft, reject);
    if (bad) return bad;
    // Validated: the fields have the schema's types.
    const n = (k: string): number | undefined => r[k] as number | undefined;
    return this.#commit({ cmd: 'add', service: svc.name, server: r['server'] as string, address: r['address'] as string, port: n('port'), weight: n('weight'), capacity: n('capacity') }, reject);
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
    let change: ServerChange;
    const set = (fields: ServerFields): ServerChange => ({ cmd: 'set', service: svc.name, server: srv.name, fields });
    switch (cmd) {
      case 'drain':
        servers[ki] = { ...srv, state: 'drain' };
        change = set({ state: 'drain' });
        break;
      case 'disable':
        servers[ki] = { ...srv, state: 'disabled' };
        change = set({ state: 'disabled' });
        break;
      case 'enable':
        servers[ki] = { ...srv, state: 'active' };
        change = set({ state: 'active' });
        break;
      case 'remove':
        servers = servers.filter((_, i) => i !== ki);
        change = { cmd: 'remove', service: svc.name, server: srv.name };
        break;
      case 'weight':
        servers[ki] = { ...srv, weight: value as number };
        change = set({ weight: value as number });
        break;
      default:
        servers[ki] = { ...srv, capacity: value as number };
        change = set({ capacity: value as number });
        break;
    }
    const draft = { ...cfg, services: cfg.services.map((s, i) => (i === si ? { ...s, servers } : s)) };
    return this.#validate(draft, reject) ?? this.#commit(change, reject);
  }
}
