/**
 * Structured logs: one pino root per process, one child per component
 * (`component` field), JSON on stderr so stdout stays free for command
 * output. Level from SLUICE_LOG_LEVEL (default info).
 */
import { pino, type Logger } from 'pino';

let root: Logger | undefined;

export function rootLogger(): Logger {
  root ??= pino(
    { level: process.env['SLUICE_LOG_LEVEL'] ?? 'info', base: { pid: process.pid } },
    pino.destination({ fd: 2, sync: true }),
  );
  return root;
}

export function componentLogger(component: string): Logger {
  return rootLogger().child({ component });
}

export type { Logger };
