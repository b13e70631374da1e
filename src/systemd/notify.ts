/**
 * sd_notify(3) for the daemons: READY=1 once serving, STATUS= lines,
 * RELOADING=1 / READY=1 around a reload, STOPPING=1 at stop, WATCHDOG=1
 * from the watchdog (watchdog.ts). The datagram is sent by the C addon
 * (native/src/sd_notify.c): Node has no AF_UNIX datagram sockets.
 *
 * Without $NOTIFY_SOCKET (not started by systemd with Type=notify) every
 * call is a no-op and the addon is not loaded. With it, the addon is loaded
 * at construction, so a missing addon stops the daemon at start (systemd
 * would otherwise wait for a READY=1 that never comes) rather than later.
 *
 * A failed send is logged (rate limited) and never throws: the service
 * keeps running; systemd notices what it missed (start timeout, watchdog).
 */
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import { loadNative } from '../nfqueue/native.ts';

/** The part of the addon this file uses (a fake in unit tests). */
export interface NotifySender {
  notify(socketPath: string, message: string): void;
}

export class SystemdNotifier {
  /** $NOTIFY_SOCKET, or undefined when not supervised by systemd. */
  readonly socket: string | undefined;
  readonly #sender: NotifySender | undefined;
  readonly #failures: LimitedLog;
  /** Messages sent and failed, for status output and tests. */
  sent = 0;
  failed = 0;

  constructor(log: Logger, env: NodeJS.ProcessEnv = process.env, sender?: NotifySender) {
    const socket = env['NOTIFY_SOCKET'];
    this.socket = socket === undefined || socket === '' ? undefined : socket;
    this.#sender = this.socket === undefined ? undefined : (sender ?? loadNative());
    this.#failures = new LimitedLog(log, 60_000);
  }

  get enabled(): boolean {
    return this.socket !== undefined;
  }

  /** Sends newline-separated KEY=VALUE assignments; false if not sent. */
  send(fields: Readonly<Record<string, string>>): boolean {
    if (this.socket === undefined || this.#sender === undefined) return false;
    // A newline inside a value would start a new assignment: flatten it.
    const message = Object.entries(fields)
      .map(([k, v]) => `${k}=${v.replace(/\n/g, ' ')}`)
      .join('\n');
    try {
      this.#sender.notify(this.socket, message);
      this.sent++;
      return true;
    } catch (err) {
      this.failed++;
      this.#failures.warn('notify', { err: (err as Error).message, socket: this.socket }, 'sd_notify failed');
      return false;
    }
  }

  ready(status: string): boolean {
    return this.send({ READY: '1', STATUS: status });
  }

  status(status: string): boolean {
    return this.send({ STATUS: status });
  }

  /**
   * Before re-reading the configuration. MONOTONIC_USEC (CLOCK_MONOTONIC,
   * which process.hrtime uses) lets systemd >= 253 (Type=notify-reload)
   * match the reload to its request; older versions ignore it.
   */
  reloading(): boolean {
    return this.send({ RELOADING: '1', MONOTONIC_USEC: String(process.hrtime.bigint() / 1000n), STATUS: 'reloading the configuration' });
  }

  stopping(): boolean {
    return this.send({ STOPPING: '1', STATUS: 'stopping' });
  }

  watchdog(): boolean {
    return this.send({ WATCHDOG: '1' });
  }
}
