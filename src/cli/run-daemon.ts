/**
 * The life of a daemon command (`sluice front|dns|agent|master`), in one
 * place: construct (config refused -> exit 1), signals, start (failure ->
 * exit 1), then run until SIGTERM/SIGINT.
 *
 *   SIGHUP   reload (a refused file is logged; the running config stays).
 *            Installed before start(), which sends READY=1: a reload asked
 *            for right after readiness must not meet SIGHUP's default
 *            action (exit). Before start() has finished it is ignored.
 *   SIGTERM, SIGINT  stop, exit 0 (also during start; the front node's
 *            rules stay either way: removing them is its own step)
 *   SIGUSR2  logs the status (the admin socket's `status`)
 */
import { ConfigError } from '../config/load.ts';
import { SluiceError } from '../errors/errors.ts';
import { asErrorLines } from '../log/journal.ts';
import type { Logger } from '../log/logger.ts';

export interface RunnableDaemon {
  readonly log: Logger;
  start(): Promise<void>;
  stop(): void | Promise<void>;
  /** false when the file is refused. */
  reload(): boolean;
  /** The daemon's status: a JSON object (its type is the daemon's own, e.g. FrontStatus). */
  status(): object;
}

export interface RunOptions {
  /** Stop the daemon when start() fails, closing what it opened (sockets, queue). */
  readonly stopOnStartFailure?: boolean;
  /**
   * The line for a start failure, or undefined to rethrow it (a bug keeps
   * its stack). Default: the message of a SluiceError (KeyFileError, ...).
   */
  readonly startFailure?: (err: unknown) => string | undefined;
}

const sluiceMessage = (err: unknown): string | undefined => (err instanceof SluiceError ? err.message : undefined);

export async function runDaemon(command: string, create: () => RunnableDaemon, opts: RunOptions = {}): Promise<number> {
  let daemon: RunnableDaemon;
  try {
    daemon = create();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(asErrorLines(err.message)); // names the file and every key
      return 1;
    }
    if (err instanceof SluiceError) {
      // e.g. the addon that sends sd_notify is missing under systemd
      console.error(asErrorLines(`sluice ${command}: ${err.message}`));
      return 1;
    }
    throw err;
  }
  let started = false;
  process.on('SIGHUP', () => {
    if (started) daemon.reload();
    else daemon.log.warn('SIGHUP before the daemon was started: ignored (the configuration is being read now)');
  });
  const stop = (): void => {
    void Promise.resolve(daemon.stop()).then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Before start() too: its readiness line is logged inside start(), and
  // SIGUSR2's default action is to exit.
  process.on('SIGUSR2', () => {
    if (started) daemon.log.info(daemon.status(), 'status');
    else daemon.log.warn('SIGUSR2 before the daemon was started: no status yet');
  });
  try {
    await daemon.start();
  } catch (err) {
    if (opts.stopOnStartFailure === true) await daemon.stop();
    const line = (opts.startFailure ?? sluiceMessage)(err);
    if (line === undefined) throw err;
    console.error(asErrorLines(`sluice ${command}: ${line}`));
    process.exit(1); // sockets opened before the failure must not keep the process up
  }
  started = true;
  return new Promise<number>(() => {
    /* runs until a signal */
  });
}
