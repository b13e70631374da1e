/**
 * The operator's verb for this server, HAProxy agent-check style, kept in
 * one small state file (`stateFile.path`):
 *
 *   drain [reason]   no new connections; established ones finish
 *   maint [reason]   the same, shown as maintenance
 *   up | ready       back in service (also: no file, or an empty one)
 *
 * The file is the one source of truth. An operator may write it by hand
 * (`echo drain > FILE`); `sluice agent ctl drain|maint|ready` writes it too
 * (atomically: a temporary file renamed over it), so a verb set either way
 * survives an agent restart, and the later write wins. The agent re-reads it
 * every `stateFile.pollSeconds` and at once after a ctl write.
 *
 * Bad content (an unknown verb, a reason too long or with control
 * characters, a file over 4 KiB, an unreadable file) is rejected: counted
 * once per distinct content, logged, and the previous verb stays. Lines
 * starting with # and blank lines are ignored.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { SluiceError } from '../errors/errors.ts';
import type { Logger } from '../log/logger.ts';

/** An operator's reason that the state file cannot hold (too long, control characters). */
export class OperatorReasonError extends SluiceError {
  readonly code = 'ERR_SLUICE_OPERATOR_REASON';
}

export type OperatorVerb = 'up' | 'drain' | 'maint';
export const VERBS = ['drain', 'maint', 'up', 'ready'] as const;
export const MAX_REASON = 200;
const MAX_FILE = 4096;

export type Parsed = { readonly ok: true; readonly verb: OperatorVerb; readonly reason: string } | { readonly ok: false; readonly error: string };

/** Parses a state file's text (pure; the unit test's table drives it). */
export function parseStateText(text: string): Parsed {
  if (text.length > MAX_FILE) return { ok: false, error: `longer than ${MAX_FILE} bytes` };
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const [line] = lines;
  if (line === undefined) return { ok: true, verb: 'up', reason: '' };
  if (lines.length > 1) return { ok: false, error: `${lines.length} lines; expected one: drain|maint|up|ready [reason]` };
  const sp = line.search(/\s/);
  const word = (sp < 0 ? line : line.slice(0, sp)).toLowerCase();
  const reason = sp < 0 ? '' : line.slice(sp + 1).trim();
  const verb = parseVerb(word);
  if (verb === undefined) return { ok: false, error: `unknown verb ${JSON.stringify(word.slice(0, 32))}; expected drain, maint, up or ready` };
  const bad = checkReason(reason);
  if (bad !== undefined) return { ok: false, error: bad };
  return { ok: true, verb, reason };
}

/** drain, maint, up; ready is up. */
export function parseVerb(word: string): OperatorVerb | undefined {
  switch (word) {
    case 'drain':
    case 'maint':
    case 'up':
      return word;
    case 'ready':
      return 'up';
    default:
      return undefined;
  }
}

/** undefined when the reason is acceptable, else why not. */
export function checkReason(reason: string): string | undefined {
  if (reason.length > MAX_REASON) return `reason longer than ${MAX_REASON} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(reason)) return 'reason contains control characters';
  return undefined;
}

export interface OperatorCounters {
  /** Reads whose content changed and was taken. */
  applied: number;
  /** Distinct contents rejected (garbage), each also logged. */
  rejected: number;
  /** Writes by ctl. */
  written: number;
}

export class OperatorState {
  path: string;
  verb: OperatorVerb = 'up';
  reason = '';
  /** How the current verb was last set: 'file' (read) or 'ctl' (written by us). */
  source: 'none' | 'file' | 'ctl' = 'none';
  /** The last rejection, for status; undefined when the file's content is good. */
  lastError: string | undefined;
  readonly counters: OperatorCounters = { applied: 0, rejected: 0, written: 0 };
  readonly #log: Logger;
  /** The content last looked at (good or bad): unchanged content is skipped. */
  #lastText: string | undefined;

  constructor(path: string, log: Logger) {
    this.path = path;
    this.#log = log;
  }

  /**
   * Re-reads the file. Returns whether the verb (or its reason) changed.
   * A missing file means up; an unreadable or bad one keeps the verb.
   */
  read(): boolean {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8').slice(0, MAX_FILE + 1);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') text = '';
      else return this.#reject(`\0${code ?? 'error'}`, `cannot read: ${code ?? (err as Error).message}`);
    }
    if (text === this.#lastText) return false;
    const p = parseStateText(text);
    if (!p.ok) return this.#reject(text, p.error);
    this.#lastText = text;
    this.lastError = undefined;
    this.counters.applied++;
    if (p.verb === this.verb && p.reason === this.reason) return false;
    this.#log.info({ file: this.path, verb: p.verb, reason: p.reason, was: this.verb }, 'operator state read from the state file');
    this.verb = p.verb;
    this.reason = p.reason;
    this.source = 'file';
    return true;
  }

  #reject(key: string, error: string): false {
    if (key === this.#lastText) return false;
    this.#lastText = key;
    this.counters.rejected++;
    this.lastError = error;
    this.#log.error({ file: this.path, error, kept: this.verb }, 'state file rejected: the previous operator state stays');
    return false;
  }

  /**
   * Writes the verb (ctl), then takes it. Throws (the caller answers the
   * operator with the error) when it cannot be written: a verb that would
   * not survive a restart is not applied.
   */
  write(verb: OperatorVerb, reason: string): boolean {
    const bad = checkReason(reason);
    if (bad !== undefined) throw new OperatorReasonError(bad);
    const text = `${verb}${reason === '' ? '' : ` ${reason}`}\n`;
    mkdirSync(dirname(this.path), { recursive: true, mode: 0o755 });
    const tmp = `${this.path}.${process.pid}.tmp`;
    try {
      writeFileSync(tmp, text, { mode: 0o644 });
      renameSync(tmp, this.path);
    } catch (err) {
      rmSync(tmp, { force: true });
      throw err;
    }
    this.counters.written++;
    this.#lastText = text;
    this.lastError = undefined;
    const changed = verb !== this.verb || reason !== this.reason;
    this.verb = verb;
    this.reason = reason;
    this.source = 'ctl';
    this.#log.info({ file: this.path, verb, reason }, 'operator state set by ctl');
    return changed;
  }
}
