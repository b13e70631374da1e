import { execFileSync } from 'node:child_process';
import { CommandFailedError } from '../errors/errors.ts';

/** `argv` run inside network namespace `netns` when given (tests and the testbed run daemons in namespaces; a daemon itself passes none). */
export function argvIn(netns: string | undefined, argv: readonly string[]): string[] {
  return netns === undefined ? [...argv] : ['ip', 'netns', 'exec', netns, ...argv];
}

/**
 * Runs a command synchronously and returns its stdout; a non-zero exit
 * becomes CommandFailedError carrying stderr. Synchronous on purpose: rule
 * installation and testbed teardown also run where nothing asynchronous can
 * (start-up ordering, process 'exit' handlers).
 */
export function runCommand(cmd: string, args: readonly string[], input?: string): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'], timeout: 60_000, ...(input !== undefined ? { input } : {}) });
  } catch (err) {
    const e = err as { stderr?: unknown };
    throw new CommandFailedError(`${cmd} ${args.join(' ')}`, typeof e.stderr === 'string' ? e.stderr : '', { cause: err });
  }
}
