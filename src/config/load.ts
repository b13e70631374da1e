/**
 * Configuration loading shared by every daemon: YAML text -> one schema
 * (zod, with defaults) -> deeply frozen object. Nothing else in Sluice
 * parses configuration.
 *
 * Every problem is reported at once, each naming its key path and, where
 * the schema gives one, the fix, e.g.
 *   services[0].servers[1].address: expected an IPv4 address like 198.18.201.11
 * A file that does not parse reports the YAML line and column.
 */
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { SluiceError } from '../errors/errors.ts';

export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

/** A configuration was refused; `problems` lists every reason. */
export class ConfigError extends SluiceError {
  readonly code = 'ERR_SLUICE_CONFIG';
  readonly file: string;
  readonly problems: readonly ConfigProblem[];
  constructor(file: string, problems: readonly ConfigProblem[]) {
    super(`${file}: invalid configuration:\n${problems.map((p) => `  ${p.path === '' ? '(top level)' : p.path}: ${p.message}`).join('\n')}`);
    this.file = file;
    this.problems = problems;
  }
}

function pathText(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out;
}

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** Validates already-parsed data. `file` only labels messages. */
export function validateConfig<S extends z.ZodType>(schema: S, data: unknown, file: string): Readonly<z.output<S>> {
  const r = schema.safeParse(data);
  if (!r.success) {
    throw new ConfigError(
      file,
      r.error.issues.map((i) => ({ path: pathText(i.path), message: i.message })),
    );
  }
  return deepFreeze(r.data);
}

/** Parses YAML text and validates it. */
export function parseConfig<S extends z.ZodType>(schema: S, text: string, file: string): Readonly<z.output<S>> {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((e) => ({ path: e.linePos ? `line ${e.linePos[0].line} column ${e.linePos[0].col}` : '', message: e.message.split('\n')[0] ?? e.message })),
    );
  }
  return validateConfig(schema, doc.toJS() as unknown, file);
}

/** Reads, parses and validates a configuration file. */
export function loadConfig<S extends z.ZodType>(schema: S, file: string): Readonly<z.output<S>> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new ConfigError(file, [{ path: '', message: `cannot read the file (${e.code ?? e.message})` }]);
  }
  return parseConfig(schema, text, file);
}
