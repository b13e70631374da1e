import { parseArgs } from 'node:util';
import { SluiceError } from '../errors/errors.ts';
import { asErrorLines } from '../log/journal.ts';

/** One `sluice <command>`: commands register here as their features land. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  /** Returns the process exit code (0 ok, 1 failure, 2 usage error). */
  run(argv: readonly string[]): Promise<number>;
}

/** A command's arguments are wrong: the command prints the message and its usage, and exits 2. */
export class UsageError extends SluiceError {
  readonly code = 'ERR_SLUICE_USAGE';
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
