/**
 * A running front node's `sluice ctl` overrides: the list (overrides.ts),
 * the state file that keeps it (state-file.ts), and what an operator needs
 * to see of both (status, metrics).
 *
 *   load(file)     at start and every accepted reload: re-reads the state
 *                  file, applies it on top of the file's configuration;
 *                  stale overrides are logged, counted, kept for status and
 *                  dropped from the state file. An unreadable or invalid
 *                  state file: the configuration loads without overrides
 *                  (logged, counted, shown); the next ctl change sets the
 *                  bad file aside (<file>.corrupt) before writing.
 *   change(c)      a ctl change: the new list, merged and validated, is
 *                  written first, then returned for the daemon to apply.
 *                  A state file that cannot be written refuses the change
 *                  (it would not survive a reload): nothing applies.
 */
import { renameSync } from 'node:fs';
import type { Logger } from '../log/logger.ts';
import type { FrontConfig } from './config.ts';
import { mergeOverrides, recordChange, type Override, type ServerChange, type StaleOverride } from './overrides.ts';
import { readStateFile, StateFileError, writeStateFile } from './state-file.ts';

export interface OverridesStatus {
  readonly stateFile: string;
  /** Overrides in force. */
  readonly count: number;
  /** Stale overrides (or fields) dropped since start. */
  readonly staleTotal: number;
  /** Those of the last start or reload that had any. */
  readonly lastStale: readonly StaleOverride[];
  /** State file read or write failures since start. */
  readonly stateFileErrors: number;
  /** Why the state file was last refused (null: it was read or written fine since). */
  readonly error: string | null;
}

export class OverrideStore {
  readonly file: string;
  readonly #log: Logger;
  /** The configuration file's (restart keys kept), as last loaded: the base of every merge. */
  #base: Readonly<FrontConfig> | undefined;
  #list: readonly Override[] = [];
  #lastStale: readonly StaleOverride[] = [];
  #staleTotal = 0;
  #errors = 0;
  #error: string | null = null;
  /** The file on disk is one we refused: set it aside before overwriting it. */
  #corrupt = false;

  constructor(file: string, log: Logger) {
    this.file = file;
    this.#log = log;
  }

  get list(): readonly Override[] {
    return this.#list;
  }

  get base(): Readonly<FrontConfig> | undefined {
    return this.#base;
  }

  /** The file's configuration with the state file's overrides applied (never throws for a valid `file`). */
  load(file: Readonly<FrontConfig>): Readonly<FrontConfig> {
    this.#base = file;
    let list: Override[];
    try {
      list = readStateFile(this.file);
      this.#corrupt = false;
      this.#error = null;
    } catch (err) {
      if (!(err instanceof StateFileError)) throw err;
      this.#errors++;
      this.#error = err.message;
      this.#corrupt = true;
      this.#list = [];
      this.#lastStale = [];
      this.#log.error({ stateFile: this.file, err: err.message }, 'state file refused: running on the configuration file alone, without ctl overrides');
      return file;
    }
    const m = mergeOverrides(file, list);
    this.#list = m.kept;
    this.#lastStale = m.stale;
    if (m.stale.length > 0) {
      this.#staleTotal += m.stale.length;
      for (const s of m.stale) this.#log.warn({ stateFile: this.file, ...s }, 'ctl override dropped: stale against the configuration file');
      this.#write(m.kept, 'stale overrides dropped');
    }
    if (m.kept.length > 0) this.#log.info({ stateFile: this.file, overrides: m.kept.length }, 'ctl overrides applied over the configuration file');
    return m.config;
  }

  /** Applies a ctl change: the merged configuration to apply, or why it is refused. */
  change(c: ServerChange, running: Readonly<FrontConfig>): Readonly<FrontConfig> | string {
    const base = this.#base;
    if (!base) return 'not started';
    const next = recordChange(base, running, this.#list, c);
    if (typeof next === 'string') return next;
    const m = mergeOverrides(base, next);
    // The admin socket validated the change against the running config; an
    // override that still cannot apply is refused rather than half kept.
    const mine = m.stale.find((s) => c.cmd !== 'clear' && s.service === c.service && s.server === c.server);
    if (mine) return mine.reason;
    const err = this.#write(m.kept, c.cmd);
    if (err !== undefined) return err;
    this.#list = m.kept;
    return m.config;
  }

  status(): OverridesStatus {
    return { stateFile: this.file, count: this.#list.length, staleTotal: this.#staleTotal, lastStale: this.#lastStale, stateFileErrors: this.#errors, error: this.#error };
  }

  /** Writes `list`; the error text when it cannot (counted and logged). */
  #write(list: readonly Override[], why: string): string | undefined {
    try {
      if (this.#corrupt) {
        const aside = `${this.file}.corrupt`;
        try {
          renameSync(this.file, aside);
          this.#log.warn({ stateFile: this.file, setAside: aside }, 'refused state file set aside');
        } catch (e) {
          // Removed by the operator meanwhile: nothing to keep.
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new StateFileError(this.file, `cannot be set aside as ${aside} (${(e as Error).message}): remove it by hand`, { cause: e });
        }
        this.#corrupt = false;
      }
      writeStateFile(this.file, list);
      this.#error = null;
      return undefined;
    } catch (err) {
      this.#errors++;
      const msg = err instanceof StateFileError ? err.message : `state file ${this.file}: ${(err as Error).message}`;
      this.#error = msg;
      this.#log.error({ stateFile: this.file, err: msg, why }, 'state file not written');
      return msg;
    }
  }
}
