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

/** The schema's internals, as far as unknownKeyProblems walks them. */
interface SchemaDef {
  readonly type?: string;
  readonly shape?: Record<string, unknown>;
  readonly element?: unknown;
  readonly innerType?: unknown;
  readonly in?: unknown;
}

function defOf(schema: unknown): SchemaDef | undefined {
  return (schema as { _zod?: { def?: SchemaDef } } | undefined)?._zod?.def;
}

/**
 * The keys an object schema allows at `path` (through arrays, optional,
 * default and pipe wrappers); undefined where the walk cannot follow.
 */
export function allowedKeysAt(schema: unknown, path: readonly PropertyKey[]): string[] | undefined {
  let cur: unknown = schema;
  let i = 0;
  for (let guard = 0; guard < 64; guard++) {
    const def = defOf(cur);
    if (def === undefined) return undefined;
    if (def.innerType !== undefined) cur = def.innerType;
    else if (def.type === 'pipe') cur = def.in;
    else if (i === path.length) return def.type === 'object' && def.shape ? Object.keys(def.shape) : undefined;
    else if (def.type === 'array') {
      cur = def.element;
      i++;
    } else if (def.type === 'object' && def.shape) {
      cur = def.shape[String(path[i])];
      i++;
    } else return undefined;
  }
  return undefined;
}

/** Levenshtein distance, for "did you mean" (keys are short). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row.push(Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1)));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let cur = data;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}

/** One problem per unknown key, naming the key itself and the fix. */
function unknownKeyProblems(schema: unknown, path: readonly PropertyKey[], keys: readonly string[]): ConfigProblem[] {
  const allowed = allowedKeysAt(schema, path) ?? [];
  return keys.map((k) => {
    const near = allowed.map((a) => [a, distance(k, a)] as const).sort((x, y) => x[1] - y[1])[0];
    const hint = near !== undefined && near[1] <= Math.max(2, Math.floor(k.length / 3)) ? `did you mean "${near[0]}"? ` : '';
    const list = allowed.length > 0 ? `keys allowed here: ${allowed.join(', ')}` : 'remove it';
    return { path: pathText([...path, k]), message: `unknown key; ${hint}${list}` };
  });
}

/** Validates already-parsed data. `file` only labels messages. */
export function validateConfig<S extends z.ZodType>(schema: S, data: unknown, file: string): Readonly<z.output<S>> {
  const r = schema.safeParse(data);
  if (!r.success) {
    throw new ConfigError(
      file,
      r.error.issues.flatMap((i) => {
        if (i.code === 'unrecognized_keys') return unknownKeyProblems(schema, i.path, i.keys);
        // zod words a missing key as a wrong type ("expected string"): say it is missing.
        if (i.code === 'invalid_type' && i.path.length > 0 && valueAt(data, i.path) === undefined) {
          return [{ path: pathText(i.path), message: `required key is missing (${i.message})` }];
        }
        return [{ path: pathText(i.path), message: i.message }];
      }),
    );
  }
  return deepFreeze(r.data);
}

/**
 * `text` as JSON when it is JSON without a repeated key, else undefined.
 *
 * Why: JSON is YAML (1.2), and a generated configuration is often JSON;
 * the YAML parser takes ~4 s and ~0.5 GB for 1,000 services x 100 servers
 * (5 MB), JSON.parse ~20 ms. The data is the same either way, with one
 * difference: JSON.parse keeps the last of two equal keys where YAML
 * (uniqueKeys) refuses the file. So the keys written in the text (every
 * `:` outside a string follows one) are counted against the keys parsed;
 * on a difference, and on any JSON syntax error, the YAML parser runs and
 * reports the problem with its line and column.
 */
export function parseJsonConfig(text: string): unknown {
  const first = /\S/.exec(text)?.[0];
  if (first !== '{' && first !== '[') return undefined;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return undefined;
  }
  let written = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x3a) written++;
  }
  let parsed = 0;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) for (const x of v) walk(x);
    else if (v !== null && typeof v === 'object') {
      for (const x of Object.values(v)) {
        parsed++;
        walk(x);
      }
    }
  };
  walk(data);
  return written === parsed ? data : undefined;
}

/** Parses YAML text (or JSON, parseJsonConfig) and validates it. */
export function parseConfig<S extends z.ZodType>(schema: S, text: string, file: string): Readonly<z.output<S>> {
  const json = parseJsonConfig(text);
  if (json !== undefined) return validateConfig(schema, json, file);
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

/**
 * A reloaded configuration with the keys a daemon binds at start (sockets,
 * queue numbers, table sizes) kept at their running values: a reload
 * applies the rest, and `changed` names the kept keys whose file value
 * differs (the caller logs them as needing a restart).
 */
export function keepRestartKeys<T extends object, K extends keyof T>(running: Readonly<T>, next: Readonly<T>, keys: readonly K[]): { applied: Readonly<T>; changed: K[] } {
  const changed = keys.filter((k) => JSON.stringify(next[k]) !== JSON.stringify(running[k]));
  if (changed.length === 0) return { applied: next, changed };
  const applied: T = { ...next };
  for (const k of keys) applied[k] = running[k];
  return { applied: deepFreeze(applied), changed };
}
