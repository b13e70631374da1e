import { parseArgs } from 'node:util';
import { asErrorLines } from '../log/journal.ts';

/** One `sluice <command>`: commands register here as their features land. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  /** Returns the process exit code (0 ok, 1 failure, 2 usage error). */
  run(argv: readonly string[]): Promise<number>;
}

/**
 * The `--config FILE` every daemon command takes; prints the problem and
 * returns undefined on a usage error (the caller exits 2).
 */
export function configArg(command: string, usage: string, argv: readonly string[]): string | undefined {
  let file: string | undefined;
  try {
    file = parseArgs({ args: [...argv], options: { config: { type: 'string' } } }).values.config;
  } catch (err) {
    console.error(asErrorLines(`sluice ${command}: ${(err as Error).message}\n${usage}`));
    return undefined;
  }
  if (file === undefined) console.error(asErrorLines(`sluice ${command}: --config is required\n${usage}`));
  return file;
}
