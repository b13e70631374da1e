/**
 * systemd's software watchdog (WatchdogSec= in the unit): systemd sets
 * WATCHDOG_USEC (and WATCHDOG_PID, the process meant); if no WATCHDOG=1
 * arrives within that interval the service is killed and, with
 * Restart=always, started again.
 *
 * WATCHDOG=1 is sent at half the interval, and only when the daemon's
 * liveness check passes. The timer itself proves the event loop turns (a
 * blocked loop sends nothing); the check proves what the timer cannot, e.g.
 * that the front node's packet loop still drains its queue
 * (queue-liveness.ts). A failing check withholds the ping and says why in
 * STATUS= and the log, so `systemctl status` shows the reason of the kill.
 */
import type { Logger } from '../log/logger.ts';
import type { SystemdNotifier } from './notify.ts';

export interface Liveness {
  readonly alive: boolean;
  /** Why not alive (shown in STATUS= and logged). */
  readonly reason?: string;
}

export type LivenessCheck = () => Liveness;

/** The ping interval in ms from the environment, or undefined when no watchdog applies to this process. */
export function watchdogIntervalMs(env: NodeJS.ProcessEnv = process.env, pid: number = process.pid): number | undefined {
  const usec = env['WATCHDOG_USEC'];
  if (usec === undefined || !/^\d{1,15}$/.test(usec)) return undefined;
  const forPid = env['WATCHDOG_PID'];
  if (forPid !== undefined && forPid !== '' && forPid !== String(pid)) return undefined; // meant for another process
  const ms = Number(usec) / 1000;
  if (!(ms >= 2)) return undefined;
  return ms / 2;
}

export class Watchdog {
  readonly #notifier: SystemdNotifier;
  readonly #check: LivenessCheck;
  readonly #log: Logger;
  #timer: ReturnType<typeof setInterval> | undefined;
  #withheld = false;
  pings = 0;
  withheld = 0;

  constructor(notifier: SystemdNotifier, check: LivenessCheck, log: Logger) {
    this.#notifier = notifier;
    this.#check = check;
    this.#log = log;
  }

  /** Starts pinging if systemd asked for it; returns the interval in ms, or undefined. */
  start(env: NodeJS.ProcessEnv = process.env): number | undefined {
    const every = this.#notifier.enabled ? watchdogIntervalMs(env) : undefined;
    if (every === undefined || this.#timer !== undefined) return undefined;
    this.tick();
    this.#timer = setInterval(() => {
      this.tick();
    }, every);
    // The watchdog must not keep a stopping daemon alive.
    this.#timer.unref();
    return every;
  }

  /** One check-and-ping (exposed for tests). */
  tick(): boolean {
    let l: Liveness;
    try {
      l = this.#check();
    } catch (err) {
      l = { alive: false, reason: `liveness check failed: ${(err as Error).message}` };
    }
    if (l.alive) {
      if (this.#withheld) {
        this.#withheld = false;
        this.#log.info('watchdog: alive again');
        this.#notifier.status('running');
      }
      this.pings++;
      return this.#notifier.watchdog();
    }
    this.withheld++;
    if (!this.#withheld) {
      this.#withheld = true;
      this.#log.error({ reason: l.reason }, 'watchdog: not alive, WATCHDOG=1 withheld (systemd restarts the service when the interval runs out)');
    }
    this.#notifier.status(`watchdog withheld: ${l.reason ?? 'not alive'}`);
    return false;
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
