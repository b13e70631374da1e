/**
 * A command run without stalling the event loop: the daemons' periodic
 * children (the front node's rule check read-backs, its schedule and
 * fallback writes) go through here, not through child_process.
 *
 * child_process forks on the event loop's thread and waits there for the
 * child's exec; fork copies the page tables of the whole process, so each
 * spawn stalls the loop in proportion to the daemon's RSS (measured with
 * Node 24 on this machine: median 1.7 ms at 67 MB, 4.0 ms at 189 MB,
 * 14.3 ms at 492 MB; a front node holding a million flows is ~250 MB).
 * native/src/run_command.c runs the whole child on a threadpool thread
 * with posix_spawn (clone with CLONE_VM | CLONE_VFORK: nothing copied), so
 * the loop goes on deciding SYNs while it runs.
 *
 * Same contract as the execFile forms it replaces: stdout as text, or
 * CommandFailedError (a non-zero exit with its stderr, output over
 * `maxMiB`, or a program that cannot be started); a kill after `timeoutMs`
 * is a CommandTimeoutError.
 */
import { CommandFailedError, CommandTimeoutError } from '../errors/errors.ts';
import { loadNative } from '../nfqueue/native.ts';

export interface RunOptions {
  /** Written to the child's stdin, which is then closed; absent: stdin is /dev/null. */
  readonly input?: string;
  /** The child is killed (SIGKILL) after this long, and the run fails. */
  readonly timeoutMs: number;
  /** Stdout and stderr together beyond this kill the child, and the run fails (default 512). */
  readonly maxMiB?: number;
}

/** Runs argv[0] (looked up on PATH) with argv[1..]; resolves its stdout. */
export async function runOffLoop(argv: readonly string[], opts: RunOptions): Promise<string> {
  const command = argv.join(' ');
  let r;
  try {
    r = await loadNative().runCommand(argv, opts.input !== undefined ? Buffer.from(opts.input) : null, Math.max(1, Math.ceil(opts.timeoutMs)), opts.maxMiB ?? 512);
  } catch (err) {
    throw new CommandFailedError(command, (err as Error).message, { cause: err });
  }
  if (r.timedOut) throw new CommandTimeoutError(command, opts.timeoutMs);
  if (r.truncated) throw new CommandFailedError(command, `killed: output over ${String(opts.maxMiB ?? 512)} MiB`);
  if (r.status !== 0) throw new CommandFailedError(command, r.signal !== 0 ? `killed by signal ${String(r.signal)}` : r.stderr.toString('utf8') || `exit status ${String(r.status)}`);
  return r.stdout.toString('utf8');
}
