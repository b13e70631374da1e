/**
 * `sluice master`: the throttling master as a daemon.
 *
 * Lifecycle:
 *   start   load and validate the config (refused -> exit 1), open the
 *           store (Redis unreachable -> exit 1), bind or connect the
 *           accounting and control sockets, the ops HTTP server with
 *           http.listen (GET /metrics, GET /status; a bind failure -> exit
 *           1), open the admin socket
 *   SIGHUP  reload: domains (rules added, changed, removed) and the
 *           allowlist apply at once; name, sockets, store, http and the rest of
 *           control need a restart (named in the log, not applied). A
 *           refused config is logged with its reasons and the running one stays.
 *   SIGTERM close sockets, the ops HTTP server and the store, exit 0
 * Admin socket commands: {"cmd":"status"}, {"cmd":"reload"}.
 *
 * Under systemd (Type=notify, src/systemd/; deploy/systemd/sluice-master.service):
 * READY=1 once store, sockets, ops HTTP server and admin socket are up; RELOADING=1 then
 * READY=1 around a reload (accepted or refused: the master serves either
 * way); STOPPING=1 at stop; WATCHDOG=1 from a timer (it firing proves the
 * event loop that receives accounting turns).
 */
import { AdminSocket, statusAndReload } from '../admin/socket.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { newRegistry } from '../metrics/collect.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { Watchdog } from '../systemd/watchdog.ts';
import { masterConfigSchema, type MasterConfig } from './config.ts';
import { Master } from './master.ts';
import type { MasterDaemonStatus, MasterStatus } from './status.ts';
import { registerMasterMetrics } from './metrics.ts';

export class MasterDaemon {
  readonly log: Logger = componentLogger('master');
  readonly configFile: string;
  readonly initial: Readonly<MasterConfig>;
  master: Master | undefined;
  #admin: AdminSocket | undefined;
  #ops: OpsServer | undefined;
  reloads = 0;
  reloadsRefused = 0;
  readonly startedAt = Date.now();
  /** sd_notify; a no-op unless started by systemd with Type=notify. */
  readonly systemd: SystemdNotifier;
  readonly watchdog: Watchdog;
  #stopping = false;

  constructor(configFile: string) {
    this.configFile = configFile;
    this.initial = loadConfig(masterConfigSchema, configFile);
    this.systemd = new SystemdNotifier(this.log);
    this.watchdog = new Watchdog(this.systemd, () => ({ alive: true }), this.log);
  }

  async start(): Promise<void> {
    const master = await Master.start(this.initial, this.log);
    this.master = master;
    const http = this.initial.http;
    if (http) {
      const registry = newRegistry();
      registerMasterMetrics(registry, { daemon: this, master: () => this.master, admin: () => this.#admin, ops: () => this.#ops });
      this.#ops = new OpsServer({ listen: http.listen, registry, status: () => this.status(), log: this.log });
      try {
        await this.#ops.start();
      } catch (err) {
        // Its sockets and store must not outlive a start that failed (tests start daemons in process).
        await master.stop();
        throw err;
      }
    }
    this.#admin = new AdminSocket(this.initial.adminSocket, this.log, statusAndReload(this));
    await this.#admin.listen();
    this.systemd.ready(this.#statusLine());
    const every = this.watchdog.start();
    if (every !== undefined) this.log.info({ everyMs: every }, 'systemd watchdog: WATCHDOG=1 from a timer');
  }

  #statusLine(): string {
    const m = this.master;
    return `master ${this.initial.name}: ${m ? m.domains.size : 0} domain(s), store ${this.initial.store.kind}`;
  }


  /** Re-reads the config; false (running config kept) when refused. */
  reload(): boolean {
    const m = this.master;
    if (!m) return false;
    this.systemd.reloading();
    let next: Readonly<MasterConfig>;
    try {
      next = loadConfig(masterConfigSchema, this.configFile);
    } catch (err) {
      this.reloadsRefused++;
      this.log.error({ err: err instanceof ConfigError ? err.message : err }, 'reload refused; the running configuration stays');
      this.systemd.ready(`${this.#statusLine()}; last reload refused (see the log)`);
      return false;
    }
    try {
      const restart = m.reload(next);
      if (restart.length > 0) this.log.warn({ keys: restart }, 'these changes need a restart and were not applied');
    } finally {
      // systemd must not be left in "reloading" (an error still reaches the caller).
      this.systemd.ready(this.#statusLine());
    }
    this.reloads++;
    this.log.info({ domains: [...m.domains.keys()] }, 'reloaded');
    return true;
  }

  /** The ops HTTP server while it runs (http.listen set). */
  ops(): OpsServer | undefined {
    return this.#ops;
  }

  /** MasterStatus once the master started (before: the daemon's part only). */
  status(): MasterStatus | MasterDaemonStatus {
    return {
      ...(this.master?.status() ?? {}),
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      reloads: this.reloads,
      reloadsRefused: this.reloadsRefused,
      admin: { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 },
    };
  }

  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    this.systemd.stopping();
    this.watchdog.stop();
    this.#admin?.close();
    this.#ops?.close();
    await this.master?.stop();
  }
}
