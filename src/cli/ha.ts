/**
 * `sluice ha`: the front-node pair's tools (docs/operations.md, "Front-node
 * pairs").
 *
 *   render --config FRONT.yaml [--out DIR]
 *     writes keepalived.conf and conntrackd.conf for THIS node (the
 *     config's `node`) from its `ha:` section (src/front/ha/render.ts), to
 *     the paths in `ha.files`, or both into DIR; prints what it wrote.
 *     Each file is written beside its target and renamed over it, so a
 *     daemon reloading at that moment reads the old file or the new one.
 *
 *   notify [--socket PATH] [--timeout-ms N] master|backup|fault
 *     tells the front node on PATH its VRRP role ({"cmd":"ha","state":...}
 *     on the admin socket). keepalived's notify hook (deploy/ha/
 *     sluice-ha-notify) runs it AFTER conntrackd committed the replicated
 *     flows. A front node that is down or stuck must not hold up the hook:
 *     the request is bounded by the timeout (default 2000 ms), and the exit
 *     status says what happened (0 told, 1 not told), nothing waits longer.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { adminRequest } from '../admin/client.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import { frontConfigSchema } from '../front/config.ts';
import { HA_STATES, type HaState } from '../front/ha/role.ts';
import { HaMissingError, renderHa } from '../front/ha/render.ts';
import { asErrorLines } from '../log/journal.ts';
import type { Command } from './command.ts';

const USAGE = `usage: sluice ha render --config FRONT.yaml [--out DIR]
       sluice ha notify [--socket PATH] [--timeout-ms N] master|backup|fault
  render: keepalived.conf and conntrackd.conf for this node (the config's node) from its ha section,
          to ha.files.keepalived and ha.files.conntrackd, or into DIR
  notify: tell the front node its VRRP role (keepalived's notify hook runs it); default socket
          /run/sluice/front.sock, timeout 2000 ms`;

/** Writes `text` next to `path` and renames it over (no reader sees half a file). */
function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.sluice-${String(process.pid)}.tmp`;
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, path);
}

export function haRender(argv: readonly string[]): number {
  let v: { config?: string; out?: string };
  try {
    v = parseArgs({ args: [...argv], options: { config: { type: 'string' }, out: { type: 'string' } } }).values;
  } catch (err) {
    console.error(asErrorLines(`sluice ha render: ${(err as Error).message}\n${USAGE}`));
    return 2;
  }
  if (v.config === undefined) {
    console.error(asErrorLines(`sluice ha render: --config is required\n${USAGE}`));
    return 2;
  }
  try {
    const cfg = loadConfig(frontConfigSchema, v.config);
    const r = renderHa(cfg, v.config);
    const files = cfg.ha?.files;
    if (files === undefined) throw new HaMissingError('no ha section');
    const out = v.out;
    if (out !== undefined) mkdirSync(out, { recursive: true });
    const targets = [
      { path: out !== undefined ? join(out, basename(files.keepalived)) : files.keepalived, text: r.keepalived, what: 'keepalived' },
      { path: out !== undefined ? join(out, basename(files.conntrackd)) : files.conntrackd, text: r.conntrackd, what: 'conntrackd' },
    ];
    for (const t of targets) {
      writeAtomic(t.path, t.text);
      console.log(`wrote ${t.path} (${t.what}, node ${r.node}, peer ${r.peer})`);
    }
    if (out !== undefined) console.log(`note: the notify hook reads ${files.conntrackd} (ha.files.conntrackd); install the files there, or point ha.files at them`);
    return 0;
  } catch (err) {
    console.error(asErrorLines(`sluice ha render: ${err instanceof ConfigError || err instanceof HaMissingError ? err.message : (err as Error).message}`));
    return 1;
  }
}

export async function haNotify(argv: readonly string[]): Promise<number> {
  let v: { socket?: string; 'timeout-ms'?: string };
  let positionals: string[];
  try {
    ({ values: v, positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: { socket: { type: 'string' }, 'timeout-ms': { type: 'string' } } }));
  } catch (err) {
    console.error(asErrorLines(`sluice ha notify: ${(err as Error).message}\n${USAGE}`));
    return 2;
  }
  const state = positionals[0]?.toLowerCase();
  if (positionals.length !== 1 || !HA_STATES.includes(state as HaState)) {
    console.error(asErrorLines(`sluice ha notify: takes one state, ${HA_STATES.join(', ')}\n${USAGE}`));
    return 2;
  }
  const timeoutMs = Number(v['timeout-ms'] ?? 2000);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 60_000) {
    console.error(asErrorLines(`sluice ha notify: --timeout-ms is an integer 1..60000\n${USAGE}`));
    return 2;
  }
  const socket = v.socket ?? '/run/sluice/front.sock';
  try {
    const reply = await adminRequest(socket, { cmd: 'ha', state }, timeoutMs);
    if (reply.ok !== true) {
      console.error(asErrorLines(`sluice ha notify: ${socket} refused: ${reply.error ?? 'no reason given'}`));
      return 1;
    }
    console.log(`front node on ${socket} told: ${String(state)}`);
    return 0;
  } catch (err) {
    console.error(asErrorLines(`sluice ha notify: front node not told (${(err as Error).message})`));
    return 1;
  }
}

export const haCommand: Command = {
  name: 'ha',
  summary: 'front-node pairs: render keepalived.conf and conntrackd.conf from the front config\'s ha section; tell the front node its VRRP role (the notify hook)',
  usage: USAGE,
  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub === 'render') return haRender(rest);
    if (sub === 'notify') return haNotify(rest);
    console.error(asErrorLines(`sluice ha: unknown subcommand ${JSON.stringify(sub ?? '')}\n${USAGE}`));
    return 2;
  },
};
