/**
 * `sluice master`: the throttling master as a daemon.
 *
 * Lifecycle:
 *   start   load and validate the config (refused -> exit 1), open the
 *           store (Redis unreachable -> exit 1), bind or connect the
 *           accounting and control sockets, open the admin socket
 *   SIGHUP  reload: domains (rules added, changed, removed) and the
 *           allowlist apply at once; name, sockets, store and the rest of
 *           control need a restart (named in the log, not applied). A
 *           refused config is logged with its reasons and the running one stays.
 *   SIGTERM close sockets and store, exit 0
 * Admin socket commands: {"cmd":"status"}, {"cmd":"reload"}.
 */
import { AdminSocket, statusAndReload } from '../admin/socket.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { masterConfigSchema, type MasterConfig } from './config.ts';
import { Master } from './master.ts';

export class MasterDaemon {
  readonly log: Logger = componentLogger('master');
  readonly configFile: string;
  readonly initial: Readonly<MasterConfig>;
  master: Master | undefined;
  #admin: AdminSocket | undefined;
  reloads = 0;
  reloadsRefused = 0;
  readonly startedAt = Date.now();

  constructor(configFile: string) {
    this.configFile = configFile;
    this.initial = loadConfig(masterConfigSchema, configFile);
  }

  async start(): Promise<void> {
    this.master = await Master.start(this.initial, this.log);
    this.#admin = new AdminSocket(this.initial.adminSocket, this.log, statusAndReload(this));
    await this.#admin.listen();
  }


  /** Re-reads the config; false (running config kept) when refused. */
  reload(): boolean {
    const m = this.master;
    if (!m) return false;
    let next: Readonly<MasterConfig>;
    try {
      next = loadConfig(masterConfigSchema, this.configFile);
    } catch (err) {
      this.reloadsRefused++;
      this.log.error({ err: err instanceof ConfigError ? err.message : err }, 'reload refused; the running configuration stays');
      return false;
    }
    const restart = m.reload(next);
    if (restart.length > 0) this.log.warn({ keys: restart }, 'these changes need a restart and were not applied');
    this.reloads++;
    this.log.info({ domains: [...m.domains.keys()] }, 'reloaded');
    return true;
  }

  status(): Record<string, unknown> {
    return {
      ...(this.master?.status() ?? {}),
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      reloads: this.reloads,
      reloadsRefused: this.reloadsRefused,
      admin: { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 },
    };
  }

  async stop(): Promise<void> {
    this.#admin?.close();
    await this.master?.stop();
  }
}
