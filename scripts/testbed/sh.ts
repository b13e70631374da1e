/**
 * Synchronous command helpers for the testbed. Synchronous on purpose: the
 * testbed must also tear down from a process 'exit' handler, where nothing
 * asynchronous runs.
 */
import { readFileSync } from 'node:fs';
import { ReadinessTimeoutError } from '../../src/errors/errors.ts';
import { runCommand } from '../../src/util/exec.ts';

export const run = runCommand;

/** Runs a command inside a network namespace. */
export function runIn(ns: string, cmd: string, args: readonly string[], input?: string): string {
  return run('ip', ['netns', 'exec', ns, cmd, ...args], input);
}

/** Like run(), but returns undefined instead of throwing. */
export function tryRun(cmd: string, args: readonly string[]): string | undefined {
  try {
    return run(cmd, args);
  } catch {
    return undefined;
  }
}

/** `ip -n NS -batch -` with one command per line (much faster than one exec each). */
export function ipBatch(ns: string, lines: readonly string[]): void {
  if (lines.length > 0) run('ip', ['-n', ns, '-batch', '-'], lines.join('\n') + '\n');
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
export function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/** Polls `check` every 20 ms until it returns true or `timeoutMs` passes. */
export function waitFor(what: string, timeoutMs: number, check: () => boolean): void {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (check()) return;
    if (Date.now() > deadline) throw new ReadinessTimeoutError(`${what} not ready after ${timeoutMs} ms`);
    sleepSync(20);
  }
}

export function listNamespaces(): string[] {
  return run('ip', ['netns', 'list'])
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n !== '');
}

/**
 * Whether `pid` runs. A child of ours that exited stays a zombie until our
 * event loop reaps it, and a synchronous wait (waitFor) keeps the loop from
 * running: a signal 0 still reaches a zombie, so its state is read too.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // The state follows the command's closing parenthesis: "pid (comm) S ...".
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}
