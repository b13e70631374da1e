/**
 * The front node's state file: the `sluice ctl` overrides (overrides.ts)
 * kept across reloads and restarts. JSON, written by the daemon only:
 *
 *   {"version":1,"written":"2026-...Z","overrides":[{"kind":"set",...}]}
 *
 * Written atomically (a temporary file in the same directory, fsync,
 * rename over the old one, fsync of the directory), mode 0600: a crash
 * leaves the old file or the new one, never half of one.
 *
 * Where: `stateFile` in the config; without it $STATE_DIRECTORY/front.state.json
 * under systemd (the unit's StateDirectory=sluice: /var/lib/sluice), else
 * beside the config file (<config>.state.json).
 *
 * A file that cannot be read or does not validate is refused with a
 * StateFileError naming the file and the fix; the caller runs on the
 * configuration file alone (overrides ignored, counted, logged). A missing
 * file is no overrides.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { SluiceError } from '../errors/errors.ts';
import type { Override } from './overrides.ts';

/** The state file cannot be read, parsed or written. */
export class StateFileError extends SluiceError {
  readonly code = 'ERR_SLUICE_STATE_FILE';
  readonly file: string;
  constructor(file: string, message: string, options?: ErrorOptions) {
    super(`state file ${file}: ${message}`, options);
    this.file = file;
  }
}

const name = z.string().min(1).max(32);
const state = z.enum(['active', 'drain', 'disabled']);
const fields = z.strictObject({ state: state.optional(), weight: z.number().positive().optional(), capacity: z.int().positive().nullable().optional() });
const override = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('set'), service: name, server: name, values: fields, file: fields }),
  z.strictObject({
    kind: z.literal('add'),
    service: name,
    server: name,
    address: z.ipv4(),
    port: z.int().min(1).max(65535).optional(),
    weight: z.number().positive().optional(),
    capacity: z.int().positive().optional(),
    state: state.optional(),
  }),
  z.strictObject({ kind: z.literal('remove'), service: name, server: name }),
]);
const stateSchema = z.strictObject({ version: z.literal(1), written: z.string().optional(), overrides: z.array(override).max(100_000) });

/** The state file's path for a config file (see the header). */
export function stateFilePath(configFile: string, configured: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (configured !== undefined) return configured;
  // systemd sets STATE_DIRECTORY (colon-separated when several) for StateDirectory=.
  const dir = env['STATE_DIRECTORY']?.split(':')[0];
  if (dir !== undefined && dir !== '') return join(dir, 'front.state.json');
  return join(dirname(configFile), `${basename(configFile)}.state.json`);
}

/** The overrides in `file`: [] when it does not exist; StateFileError when it is unreadable or invalid. */
export function readStateFile(file: string): Override[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    // No such file (or no such directory): no overrides yet.
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return [];
    throw new StateFileError(file, `cannot be read (${e.code ?? e.message}): let the daemon's user read it (mode 0600, owner sluice), or remove it to drop every ctl override`, { cause: err });
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new StateFileError(file, `is not JSON (${(err as Error).message}): the ctl overrides are ignored; remove the file (or \`sluice ctl clear\`) to start again from the configuration file`, { cause: err });
  }
  const r = stateSchema.safeParse(data);
  if (!r.success) {
    const why = r.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(top level)'}: ${i.message}`).join('; ');
    throw new StateFileError(file, `is not a valid state file (${why}): the ctl overrides are ignored; remove the file (or \`sluice ctl clear\`) to start again from the configuration file`);
  }
  return r.data.overrides as Override[];
}

/** Replaces `file` with `list`, atomically (see the header). Throws StateFileError. */
export function writeStateFile(file: string, list: readonly Override[], now = new Date()): void {
  const dir = dirname(file);
  const tmp = join(dir, `.${basename(file)}.${String(process.pid)}.tmp`);
  const text = `${JSON.stringify({ version: 1, written: now.toISOString(), overrides: list }, null, 1)}\n`;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
    // The rename itself is durable only once the directory is synced.
    const dfd = openSync(dir, 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // not created, or already renamed
    }
    const e = err as NodeJS.ErrnoException;
    throw new StateFileError(file, `cannot be written (${e.code ?? e.message}): the daemon's user needs write access to ${dir} (under systemd: StateDirectory=sluice, /var/lib/sluice), or set stateFile to a writable path`, { cause: err });
  }
}
