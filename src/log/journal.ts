/**
 * Syslog priorities for journald. Under systemd a daemon's stderr is a
 * stream to the journal, which reads a leading `<N>` on each line as the
 * line's priority and strips it (sd-daemon(3); SyslogLevelPrefix=, on by
 * default, systemd.exec(5)). Without it every line is stored at the
 * unit's SyslogLevel= (info), and `journalctl -p err` finds nothing.
 *
 * The prefix is written only when stderr really is the journal:
 * $JOURNAL_STREAM names the journal stream's device and inode, and it is
 * inherited by children whose stderr may be a pipe or a terminal (a test
 * harness run from a unit, `sluice check-config` in a shell), so the
 * variable alone is not enough; it must match fstat(2) of our fd
 * (systemd.exec(5), "$JOURNAL_STREAM").
 */
import { fstatSync } from 'node:fs';

/** sd-daemon(3) prefixes by pino's numeric level: fatal and error <3> (SD_ERR), warn <4>, info <6>, debug and trace <7>. */
const ERR = '<3>';
const WARNING = '<4>';
const INFO = '<6>';
const DEBUG = '<7>';

/** The `<N>` prefix for a pino level (10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal). */
export function journalPrefix(level: number): string {
  if (level >= 50) return ERR;
  if (level >= 40) return WARNING;
  if (level >= 30) return INFO;
  return DEBUG;
}

/**
 * Whether `fd` is the stream $JOURNAL_STREAM ("DEVICE:INODE", decimal)
 * names. False when the variable is absent or malformed, or when fd
 * cannot be examined.
 */
export function isJournalStream(env: NodeJS.ProcessEnv = process.env, fd = 2): boolean {
  const m = /^(\d+):(\d+)$/.exec(env['JOURNAL_STREAM'] ?? '');
  if (!m) return false;
  let st;
  try {
    st = fstatSync(fd, { bigint: true });
  } catch {
    return false;
  }
  return st.dev === BigInt(m[1] ?? '') && st.ino === BigInt(m[2] ?? '');
}

/**
 * `text` as stderr lines of error priority: each non-empty line (journald
 * reads a prefix per line) starts with `<3>` when `journal` holds. For messages
 * that do not go through pino: a daemon command's refusal to start (a
 * refused config, a port in use), printed with console.error.
 */
export function asErrorLines(text: string, journal: boolean = isJournalStream()): string {
  return journal ? text.replace(/^(?!$)/gm, ERR) : text;
}

/** Where the prefixed lines go: pino's own destination (SonicBoom) or anything with write(). */
export interface LineSink {
  write(line: string): unknown;
  flushSync?: () => void;
}

/** pino's destination flag: set lastLevel (and more) on the stream before each write. */
const PINO_METADATA: unique symbol = Symbol.for('pino.metadata');

/**
 * A pino destination that prefixes each line with its journald priority.
 * pino fills `lastLevel` before every write because of the metadata flag
 * (pino's documented `Symbol.for('pino.metadata')` destination protocol).
 */
export class JournalPrefixStream {
  readonly [PINO_METADATA] = true;
  /** Set by pino before each write(). */
  lastLevel = 30;
  readonly #sink: LineSink;

  constructor(sink: LineSink) {
    this.#sink = sink;
  }

  write(line: string): void {
    this.#sink.write(journalPrefix(this.lastLevel) + line);
  }

  flushSync(): void {
    this.#sink.flushSync?.();
  }
}
