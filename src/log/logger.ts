/**
 * Structured logs: one pino root per process, one child per component
 * (`component` field), JSON on stderr so stdout stays free for command
 * output. Level from SLUICE_LOG_LEVEL (default info). When stderr is the
 * journal (a systemd unit), each line starts with its syslog priority
 * (journal.ts), so `journalctl -p err` selects errors.
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import { isJournalStream, JournalPrefixStream } from './journal.ts';

let root: Logger | undefined;

export function rootLogger(): Logger {
  if (root) return root;
  const stderr = pino.destination({ fd: 2, sync: true });
  const dest: DestinationStream = isJournalStream(process.env, 2) ? new JournalPrefixStream(stderr) : stderr;
  root = pino({ level: process.env['SLUICE_LOG_LEVEL'] ?? 'info', base: { pid: process.pid } }, dest);
  return root;
}

export function componentLogger(component: string): Logger {
  return rootLogger().child({ component });
}

export type { Logger };
