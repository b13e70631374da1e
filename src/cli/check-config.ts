/**
 * `sluice check-config FILE [--role front|dns|agent|master]`: validates a daemon's
 * configuration exactly as that daemon would at start or reload: the same
 * loader (src/config/load.ts) and schema, plus what the daemon reads or
 * builds from it before serving (dns: every zone file it names, and the
 * steered names inside them; front: the iptables rules it renders).
 *
 * Role detection without --role: each role has keys no other role's schema
 * has (front: services, cluster, uplinkAddress, ...; dns: zones, listen,
 * steering, ...; agent: front, address, accessLog, ...; master: domains,
 * accounting, store, ...), taken from the
 * schemas themselves. The role is the one whose own keys appear in the
 * file; none or several is ambiguous and --role is needed (exit 2).
 *
 * Prints "FILE: ok (role)" or "FILE: invalid (role)" followed by every
 * problem as "  key.path: what is wrong and the fix". Exit 0 valid, 1
 * invalid, 2 usage error or unreadable file. systemd's ExecReload runs it
 * before the reload signal, so a bad file fails `systemctl reload` and the
 * running daemon keeps its configuration.
 *
 * --host (front only): also runs the front node's preflight
 * (src/front/preflight.ts) against this host, i.e. the network namespace
 * and the credentials check-config runs with (run it as the daemon's user
 * with its capabilities, or as root, inside the node's namespace), and
 * prints one line per check: "  ok|skip|FAIL  check: detail" (skip: this
 * user cannot read what the check reads; the detail says what catches it). A queue or log
 * group bound by `sluice front --config FILE` for this same FILE is the
 * running node, not a conflict. Exit 1 when a check fails.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { agentConfigSchema } from '../agent/config.ts';
import { ConfigError, parseConfig, type ConfigProblem } from '../config/load.ts';
import { dnsConfigSchema } from '../dns/config.ts';
import { loadZones } from '../dns/daemon.ts';
import { frontConfigSchema } from '../front/config.ts';
import { runPreflight, systemHost, type CheckResult, type HostReader } from '../front/preflight.ts';
import { configuredSpread } from '../front/nft.ts';
import { renderRuleset } from '../front/ruleset.ts';
import { masterConfigSchema } from '../throttle/config.ts';
import { UsageError, type Command } from './command.ts';

export const ROLES = ['front', 'dns', 'agent', 'master'] as const;
export type Role = (typeof ROLES)[number];

const SCHEMAS = { front: frontConfigSchema, dns: dnsConfigSchema, agent: agentConfigSchema, master: masterConfigSchema } as const;

const USAGE = `usage: sluice check-config FILE [--role ${ROLES.join('|')}] [--host]

  Validates FILE as the daemon of that role would (dns: also the zone files
  it names). Without --role the role is told from the file's keys.
  --host (front): also checks this host as the front node's start does
  (ip_forward, rp_filter, the LAN interface, conntrack access, the queue
  and log group free), in this network namespace with these credentials.
  Exit 0 valid, 1 invalid or a host check failed, 2 usage error or
  unreadable file.`;

/** Top-level keys only `role`'s schema has. */
export function ownKeys(role: Role): string[] {
  const others = ROLES.filter((r) => r !== role).flatMap((r) => Object.keys(SCHEMAS[r].shape));
  return Object.keys(SCHEMAS[role].shape).filter((k) => !others.includes(k));
}

export type Detection = { readonly role: Role; readonly by: readonly string[] } | { readonly role: undefined; readonly candidates: readonly Role[] };

/** The role whose own keys appear in `data` (see the file comment). */
export function detectRole(data: unknown): Detection {
  const keys = data !== null && typeof data === 'object' && !Array.isArray(data) ? Object.keys(data) : [];
  const hits = ROLES.map((role) => ({ role, by: ownKeys(role).filter((k) => keys.includes(k)) })).filter((h) => h.by.length > 0);
  const only = hits[0];
  if (hits.length === 1 && only) return { role: only.role, by: only.by };
  return { role: undefined, candidates: hits.map((h) => h.role) };
}

export type CheckOutcome =
  | { readonly kind: 'ok'; readonly role: Role }
  | { readonly kind: 'invalid'; readonly role: Role | undefined; readonly problems: readonly ConfigProblem[] }
  | { readonly kind: 'usage'; readonly message: string };

function problemsOf(err: unknown): readonly ConfigProblem[] {
  if (err instanceof ConfigError) return err.problems;
  throw err;
}

/** Validates one role's configuration text; every problem, none if valid. */
export function checkRole(role: Role, text: string, file: string): readonly ConfigProblem[] {
  let cfg: unknown;
  try {
    cfg = parseConfig(SCHEMAS[role] as z.ZodType, text, file);
  } catch (err) {
    return problemsOf(err);
  }
  if (role === 'dns') {
    try {
      loadZones(cfg as z.output<typeof dnsConfigSchema>, file);
    } catch (err) {
      return problemsOf(err);
    }
  }
  if (role === 'front') {
    // Pure string building today; checked so that a future failure here
    // is reported by the checker rather than at the daemon's start.
    try {
      const front = cfg as z.output<typeof frontConfigSchema>;
      renderRuleset(front, configuredSpread(front));
    } catch (err) {
      return [{ path: '', message: `the rules (iptables and nft table) cannot be rendered: ${(err as Error).message}` }];
    }
  }
  return [];
}

/** The whole check of one file (no output, no exit). */
export function checkConfigFile(file: string, role: Role | undefined): CheckOutcome {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { kind: 'usage', message: `${file}: cannot read the file (${e.code ?? e.message})` };
  }
  let chosen = role;
  if (chosen === undefined) {
    let data: unknown;
    try {
      data = parseYaml(text);
    } catch {
      // Not YAML: the loader reports where (the schema does not matter).
      return { kind: 'invalid', role: undefined, problems: checkRole('front', text, file) };
    }
    const d = detectRole(data);
    if (d.role === undefined) {
      const why = d.candidates.length === 0 ? `none of the keys of a ${ROLES.join(', ')} configuration` : `keys of ${d.candidates.join(' and ')}`;
      return { kind: 'usage', message: `${file}: cannot tell the role (the file has ${why}); give --role ${ROLES.join('|')}` };
    }
    chosen = d.role;
  }
  const problems = checkRole(chosen, text, file);
  return problems.length === 0 ? { kind: 'ok', role: chosen } : { kind: 'invalid', role: chosen, problems };
}

export function renderOutcome(file: string, o: CheckOutcome): string {
  if (o.kind === 'ok') return `${file}: ok (${o.role})`;
  if (o.kind === 'usage') return o.message;
  return [`${file}: invalid (${o.role ?? 'role unknown'})`, ...o.problems.map((p) => `  ${p.path === '' ? '(top level)' : p.path}: ${p.message}`)].join('\n');
}

/**
 * The front node's preflight for a valid front FILE. A queue bound by the
 * running daemon of this FILE passes (checking a live node).
 */
export function checkHost(text: string, file: string, host: HostReader = systemHost()): readonly CheckResult[] {
  const cfg = parseConfig(frontConfigSchema, text, file);
  return runPreflight(cfg, host, { runningConfig: file });
}

export function renderHost(results: readonly CheckResult[]): string {
  return ['host (this network namespace, these credentials):', ...results.map((r) => `  ${r.ok ? (r.skipped ? 'skip' : 'ok  ') : 'FAIL'}  ${r.check}: ${r.detail}`)].join('\n');
}

export const checkConfigCommand: Command = {
  name: 'check-config',
  summary: "validate a daemon's configuration file (front, dns with its zone files, agent) without running it",
  usage: USAGE,
  run(argv) {
    let file: string | undefined;
    let role: string | undefined;
    let host: boolean;
    try {
      const { values, positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: { role: { type: 'string' }, host: { type: 'boolean', default: false } } });
      host = values.host;
      if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'FILE is required' : 'give one FILE');
      file = positionals[0];
      role = values.role;
      if (role !== undefined && !(ROLES as readonly string[]).includes(role)) throw new UsageError(`--role is one of ${ROLES.join(', ')}`);
    } catch (err) {
      console.error(`sluice check-config: ${(err as Error).message}\n\n${USAGE}`);
      return Promise.resolve(2);
    }
    const outcome = checkConfigFile(file ?? '', role as Role | undefined);
    if (outcome.kind === 'usage') {
      console.error(`sluice check-config: ${outcome.message}`);
      return Promise.resolve(2);
    }
    if (host && outcome.role !== undefined && outcome.role !== 'front') {
      console.error(`sluice check-config: --host checks a front node's host; ${file ?? ''} is a ${outcome.role} configuration`);
      return Promise.resolve(2);
    }
    console.log(renderOutcome(file ?? '', outcome));
    if (outcome.kind !== 'ok') return Promise.resolve(1);
    if (!host) return Promise.resolve(0);
    const results = checkHost(readFileSync(file ?? '', 'utf8'), file ?? '');
    console.log(renderHost(results));
    return Promise.resolve(results.every((r) => r.ok) ? 0 : 1);
  },
};
