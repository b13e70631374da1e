/**
 * Builders for throttling tests: CURVE key pairs in a temporary directory,
 * master / gatekeeper / proxy configs through their real schemas, and a
 * simulated client that drives gatekeepers the way a front checkpoint does.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKeyPair } from '../../src/control/keys.ts';
import { gatekeeperSchema, masterConfigSchema, proxyConfigSchema, type GatekeeperConfig, type MasterConfig, type ProxyConfig } from '../../src/throttle/config.ts';
import { ACCEPTED, DELAYED, REJECTED, type Gatekeeper, type GatekeeperDomain } from '../../src/throttle/gatekeeper.ts';
import { nextPort } from './ports.ts';
import { sleep } from './wait.ts';

/** The address words keyOf/account are given for an IPv4 client (never read for a client number < 2^32). */
export const NO_WORDS = new Uint32Array(4);

export const keyDir = mkdtempSync(join(tmpdir(), 'sluice-throttle-'));
export const keys = {
  master: writeKeyPair(keyDir, 'master'),
  gk1: writeKeyPair(keyDir, 'gk1'),
  gk2: writeKeyPair(keyDir, 'gk2'),
  gk3: writeKeyPair(keyDir, 'gk3'),
  proxy: writeKeyPair(keyDir, 'proxy'),
  intruder: writeKeyPair(keyDir, 'intruder'),
};

// The calling test file's own block of ports (test/helpers/ports.ts says
// why: CI failed with EADDRINUSE on 48288, in the ephemeral range, and when
// two files' ranges overlapped).
export { nextPort as freePort };

export interface Ends {
  accounting: string;
  control: string;
}

export function ends(): Ends {
  return { accounting: `tcp://127.0.0.1:${nextPort()}`, control: `tcp://127.0.0.1:${nextPort()}` };
}

export function masterConfig(name: string, e: Ends, domains: unknown[], store: unknown = { kind: 'memory' }, extra: Record<string, unknown> = {}): MasterConfig {
  return masterConfigSchema.parse({
    name,
    adminSocket: join(keyDir, `${name}.sock`),
    control: { keyFile: keys.master.keyFile, allow: [keys.gk1.pubFile, keys.gk2.pubFile, keys.gk3.pubFile] },
    accounting: { listen: e.accounting },
    publish: { listen: e.control },
    store,
    domains,
    ...extra,
  });
}

/** Writes a master config file (for `sluice master` child processes). */
export function writeMasterConfig(name: string, e: Ends, domains: unknown[], store: unknown): string {
  const file = join(keyDir, `${name}.yaml`);
  writeFileSync(file, JSON.stringify({ ...masterConfig(name, e, domains, store) }));
  return file;
}

export function gatekeeperConfig(who: 'gk1' | 'gk2' | 'gk3' | 'intruder', masters: (Ends & { publicKey?: string })[], domains: unknown[], extra: Record<string, unknown> = {}): GatekeeperConfig {
  return gatekeeperSchema.parse({
    name: who,
    control: { keyFile: keys[who].keyFile },
    masters: masters.map((m) => ({ accounting: m.accounting, control: m.control, publicKey: m.publicKey ?? keys.master.pubFile })),
    domains,
    resyncRetryMs: 200,
    ...extra,
  });
}

export function proxyConfig(acc: { frontend: string; backend: string }, pub: { frontend: string; backend: string }): ProxyConfig {
  return proxyConfigSchema.parse({
    name: 'proxy',
    control: { keyFile: keys.proxy.keyFile, allowGatekeepers: [keys.gk1.pubFile, keys.gk2.pubFile], allowMasters: [keys.master.pubFile] },
    accounting: acc,
    publish: pub,
  });
}

export interface Served {
  gatekeeper: number;
  at: number;
}

/**
 * A client sending `perSecond` new connections for `seconds`, alternating
 * over the gatekeepers, from one address. Each is decided like the front
 * checkpoint will: pass now, hold until the delay ends (DELAYED), or reject
 * when the delay exceeds the domain's max. Returns when each was served.
 */
export async function simulateClient(gks: readonly { gk: Gatekeeper; d: GatekeeperDomain }[], addr: number, perSecond: number, seconds: number): Promise<{ served: Served[]; offered: number[]; rejected: number }> {
  const served: Served[] = [];
  const offered = gks.map(() => 0);
  let rejected = 0;
  const start = Date.now();
  const total = Math.round(perSecond * seconds);
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / perSecond;
    const wait0 = due - Date.now();
    if (wait0 > 0) await sleep(wait0);
    const which = i % gks.length;
    const { gk, d } = gks[which]!;
    offered[which]!++;
    const now = Date.now();
    const key = gk.keyOf(d, addr, NO_WORDS, 0);
    const wait = gk.delayFor(d, key, now);
    if (wait === 0) {
      served.push({ gatekeeper: which, at: now });
      gk.account(ACCEPTED, d, key, NO_WORDS, 0, now);
    } else if (wait <= d.maxDelayMs) {
      served.push({ gatekeeper: which, at: now + wait });
      gk.account(DELAYED, d, key, NO_WORDS, 0, now, now + wait);
    } else {
      rejected++;
      gk.account(REJECTED, d, key, NO_WORDS, 0, now);
    }
  }
  return { served, offered, rejected };
}
