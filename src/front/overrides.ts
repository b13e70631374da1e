/**
 * Changes made with `sluice ctl` (drain, enable, disable, weight, capacity,
 * add, remove) as overrides on top of the configuration file, so they
 * survive a reload and a restart (kept in the state file, state-file.ts).
 *
 * One override per (service, server) at most:
 *   set     some of state, weight, capacity of a server the file has; each
 *           field records the file's value it was made against (`file`)
 *   add     a server the file does not have
 *   remove  a server the file has
 *
 * Precedence (anchors: HAProxy's server-state-file applies a saved weight
 * only while the configured one is unchanged; keepalived keeps nothing and
 * a reload returns to the file):
 *   1. the file is the base;
 *   2. overrides are applied on top of it at start and at every reload;
 *   3. the file wins whenever it changed what an override was made
 *      against: a `set` field whose file value is no longer the recorded
 *      one, a `set` or `remove` whose server (or service) the file no
 *      longer has, an `add` whose name the file now has. Such an override
 *      (or field) is stale: dropped, reported (logged, counted, shown) and
 *      never an error: a valid file always loads;
 *   4. an override that makes the merged configuration invalid (e.g. the
 *      file now uses the `capacity` method and an added server has none)
 *      is stale too, with the schema's message;
 *   5. a ctl change that sets a value back to the file's drops that field
 *      (`enable` after `drain` leaves no override); `revert` drops a
 *      server's override, `clear` all of them.
 *
 * Invariant: everything here is a pure function of (file config, list); the
 * list is never mutated (callers swap it whole, after the state file is
 * written).
 */
import { ConfigError, validateConfig } from '../config/load.ts';
import { frontConfigSchema, type FrontConfig } from './config.ts';

export type AdminState = 'active' | 'drain' | 'disabled';

/** The server fields a `set` override may change. */
export interface ServerFields {
  readonly state?: AdminState;
  readonly weight?: number;
  /** null: no capacity (no limit). */
  readonly capacity?: number | null;
}

export interface SetOverride {
  readonly kind: 'set';
  readonly service: string;
  readonly server: string;
  readonly values: ServerFields;
  /** The file's value of each field in `values` when the override was made. */
  readonly file: ServerFields;
}

export interface AddOverride {
  readonly kind: 'add';
  readonly service: string;
  readonly server: string;
  readonly address: string;
  readonly port?: number | undefined;
  readonly weight?: number | undefined;
  readonly capacity?: number | undefined;
  readonly state?: AdminState | undefined;
}

export interface RemoveOverride {
  readonly kind: 'remove';
  readonly service: string;
  readonly server: string;
}

export type Override = SetOverride | AddOverride | RemoveOverride;

/** A ctl change, as the admin socket received it. */
export type ServerChange =
  | { readonly cmd: 'set'; readonly service: string; readonly server: string; readonly fields: ServerFields }
  | { readonly cmd: 'add'; readonly service: string; readonly server: string; readonly address: string; readonly port?: number | undefined; readonly weight?: number | undefined; readonly capacity?: number | undefined }
  | { readonly cmd: 'remove'; readonly service: string; readonly server: string }
  | { readonly cmd: 'revert'; readonly service: string; readonly server: string }
  | { readonly cmd: 'clear' };

/** An override (or one field of it) the file made stale, and why. */
export interface StaleOverride {
  readonly service: string;
  readonly server: string;
  readonly kind: Override['kind'];
  /** The field of a `set` that went stale; absent: the whole override. */
  readonly field?: keyof ServerFields;
  readonly reason: string;
}

export interface Merged {
  /** The file's configuration with the overrides that hold applied (validated, frozen). */
  readonly config: Readonly<FrontConfig>;
  /** The overrides that hold (stale fields removed): the new list. */
  readonly kept: readonly Override[];
  readonly stale: readonly StaleOverride[];
}

type ServerConfig = FrontConfig['services'][number]['servers'][number];
type ServiceConfig = FrontConfig['services'][number];

const FIELDS: readonly (keyof ServerFields)[] = ['state', 'weight', 'capacity'];

/** A file server's value of `f` (capacity absent: null). */
function fileValue(srv: ServerConfig, f: keyof ServerFields): AdminState | number | null {
  return f === 'capacity' ? (srv.capacity ?? null) : srv[f];
}

const same = (o: { service: string; server: string }, service: string, server: string): boolean => o.service === service && o.server === server;

/**
 * One override applied to a draft of the services (in place), or why it
 * cannot be: a stale whole override, or per-field stale reports with what
 * is left of it.
 */
function applyOne(services: ServiceConfig[], o: Override): { kept?: Override; stale: StaleOverride[] } {
  const whole = (reason: string): { stale: StaleOverride[] } => ({ stale: [{ service: o.service, server: o.server, kind: o.kind, reason }] });
  const si = services.findIndex((s) => s.name === o.service);
  const svc = services[si];
  if (!svc) return whole(`service ${o.service} is no longer in the file`);
  const ki = svc.servers.findIndex((s) => s.name === o.server);
  const srv = svc.servers[ki];
  switch (o.kind) {
    case 'add': {
      if (srv) return whole(`the file now has a server named ${o.server}: the file's applies`);
      const added: Record<string, unknown> = { name: o.server, address: o.address };
      if (o.port !== undefined) added['port'] = o.port;
      if (o.weight !== undefined) added['weight'] = o.weight;
      if (o.capacity !== undefined) added['capacity'] = o.capacity;
      if (o.state !== undefined) added['state'] = o.state;
      services[si] = { ...svc, servers: [...svc.servers, added as ServerConfig] };
      return { kept: o, stale: [] };
    }
    case 'remove':
      if (!srv) return whole(`server ${o.server} is no longer in the file (nothing left to remove)`);
      services[si] = { ...svc, servers: svc.servers.filter((_, i) => i !== ki) };
      return { kept: o, stale: [] };
    case 'set': {
      if (!srv) return whole(`server ${o.server} is no longer in the file`);
      const stale: StaleOverride[] = [];
      const values: Record<string, unknown> = {};
      const file: Record<string, unknown> = {};
      const next: Record<string, unknown> = { ...srv };
      for (const f of FIELDS) {
        if (o.values[f] === undefined) continue;
        const now = fileValue(srv, f);
        const then = o.file[f] ?? null;
        if (now !== then) {
          stale.push({ service: o.service, server: o.server, kind: 'set', field: f, reason: `the file changed ${f} from ${String(then)} to ${String(now)} since the override (${String(o.values[f])}): the file's applies` });
          continue;
        }
        values[f] = o.values[f];
        file[f] = then;
        if (f === 'capacity' && o.values.capacity === null) delete next['capacity'];
        else next[f] = o.values[f];
      }
      if (Object.keys(values).length === 0) return { stale };
      services[si] = { ...svc, servers: svc.servers.map((s, i) => (i === ki ? (next as ServerConfig) : s)) };
      return { kept: { ...o, values, file }, stale };
    }
  }
}

function problems(err: unknown): string {
  return err instanceof ConfigError ? err.problems.map((p) => `${p.path}: ${p.message}`).join('; ') : String(err);
}

/**
 * The file's configuration with `list` applied (rules 1-4 of the header).
 * Never throws for a valid `file`: what cannot apply is reported stale.
 */
export function mergeOverrides(file: Readonly<FrontConfig>, list: readonly Override[]): Merged {
  if (list.length === 0) return { config: file, kept: [], stale: [] };
  const services = [...file.services];
  const kept: Override[] = [];
  const stale: StaleOverride[] = [];
  for (const o of list) {
    const r = applyOne(services, o);
    stale.push(...r.stale);
    if (r.kept) kept.push(r.kept);
  }
  try {
    return { config: validateConfig(frontConfigSchema, { ...file, services }, 'ctl overrides'), kept, stale };
  } catch {
    // Some override breaks the schema: apply them one at a time from the
    // file, keeping each only if the result still validates (the file
    // itself is valid, so this ends valid).
  }
  let config = file;
  const valid: Override[] = [];
  for (const o of kept) {
    const draft = [...config.services];
    const r = applyOne(draft, o);
    if (!r.kept) continue;
    try {
      config = validateConfig(frontConfigSchema, { ...config, services: draft }, 'ctl overrides');
      valid.push(r.kept);
    } catch (err) {
      stale.push({ service: o.service, server: o.server, kind: o.kind, reason: `the configuration would be invalid with it: ${problems(err)}` });
    }
  }
  return { config, kept: valid, stale };
}

/**
 * The list after one ctl change, judged against the file and the running
 * (merged) configuration; or the reason it is refused. The caller merges,
 * validates, persists and applies the new list.
 */
export function recordChange(file: Readonly<FrontConfig>, running: Readonly<FrontConfig>, list: readonly Override[], change: ServerChange): readonly Override[] | string {
  if (change.cmd === 'clear') return [];
  const { service, server } = change;
  const others = list.filter((o) => !same(o, service, server));
  const mine = list.find((o) => same(o, service, server));
  if (change.cmd === 'revert') return mine ? others : `no ctl override for ${service}/${server}`;
  const rsvc = running.services.find((s) => s.name === service);
  if (!rsvc) return `no service named ${JSON.stringify(service)}`;
  const running_ = rsvc.servers.find((s) => s.name === server);
  const fsrv = file.services.find((s) => s.name === service)?.servers.find((s) => s.name === server);
  if (change.cmd === 'add') {
    if (running_) return `service ${service} already has a server named ${server}`;
    if (fsrv) return `the file has a server named ${server} (removed with ctl): \`sluice ctl revert ${service} ${server}\` brings it back`;
    return [...others, { kind: 'add', service, server, address: change.address, port: change.port, weight: change.weight, capacity: change.capacity }];
  }
  if (!running_) return `service ${service} has no server named ${JSON.stringify(server)}`;
  if (change.cmd === 'remove') return fsrv ? [...others, { kind: 'remove', service, server }] : others; // an added server just goes
  if (mine?.kind === 'add') {
    const c = change.fields;
    const next: AddOverride = { ...mine, ...(c.state !== undefined ? { state: c.state } : {}), ...(c.weight !== undefined ? { weight: c.weight } : {}), ...(c.capacity !== undefined ? { capacity: c.capacity ?? undefined } : {}) };
    return [...others, next];
  }
  if (!fsrv) return `service ${service} has no server named ${JSON.stringify(server)} in the file`;
  const prev = mine?.kind === 'set' ? mine : undefined;
  let values: Record<string, unknown> = { ...prev?.values };
  let at: Record<string, unknown> = { ...prev?.file };
  for (const f of FIELDS) {
    const v = change.fields[f];
    if (v === undefined) continue;
    if (v === fileValue(fsrv, f)) {
      // Back to the file's value: no override for this field (rule 5).
      const without = (r: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(Object.entries(r).filter(([k]) => k !== f));
      values = without(values);
      at = without(at);
    } else {
      values[f] = v;
      if (!(f in at)) at[f] = fileValue(fsrv, f);
    }
  }
  if (Object.keys(values).length === 0) return others;
  return [...others, { kind: 'set', service, server, values, file: at }];
}

/** What status shows of a server's override: how it differs from the file. */
export type ServerOverrideStatus = { readonly kind: 'add' } | { readonly kind: 'set'; readonly file: ServerFields };

export function overrideOf(list: readonly Override[], service: string, server: string): ServerOverrideStatus | null {
  const o = list.find((x) => same(x, service, server));
  if (o?.kind === 'add') return { kind: 'add' };
  if (o?.kind === 'set') return { kind: 'set', file: o.file };
  return null;
}

/** The file's servers of `service` that ctl removed. */
export function removedOf(list: readonly Override[], service: string): string[] {
  return list.filter((o) => o.kind === 'remove' && o.service === service).map((o) => o.server);
}
