/**
 * Applying and removing the front node's rules with the iptables tools.
 * Idempotent both ways: install() twice leaves one jump per chain; remove()
 * on a namespace without our rules does nothing.
 */
import { execFile } from 'node:child_process';
import { CommandFailedError } from '../errors/errors.ts';
import { runCommand } from '../util/exec.ts';
import { CHAINS, LEGACY_CHAINS, type OwnedChain, type RenderedRules } from './rules.ts';

/**
 * Runs an iptables tool, inside network namespace `netns` when given (tests
 * and the testbed run front nodes in namespaces; the daemon itself runs in
 * its own and passes none).
 */
function ipt(netns: string | undefined, args: readonly string[], input?: string): string {
  const argv = netns === undefined ? args : ['ip', 'netns', 'exec', netns, ...args];
  return runCommand(argv[0] ?? 'iptables', argv.slice(1), input);
}

function hasRule(netns: string | undefined, table: string, hook: string, spec: readonly string[]): boolean {
  try {
    ipt(netns, ['iptables', '-w', '-t', table, '-C', hook, ...spec]);
    return true;
  } catch {
    return false;
  }
}

/** The jump rule into chain `c`, as iptables arguments after the hook. */
function jumpSpec(c: OwnedChain): readonly string[] {
  return [...(c.jumpIf ?? []), '-j', c.chain];
}

/**
 * Jumps an earlier version installed and this one does not: an
 * unconditional jump where the jump now tests a mark. Ours to remove
 * (after a kill -9 of the old daemon they are still in place).
 */
function staleJumps(c: OwnedChain): readonly (readonly string[])[] {
  return c.jumpIf === undefined ? [] : [['-j', c.chain]];
}

/**
 * Loads our chains (atomically per table), then adds each jump if missing.
 * Chains of ours this configuration does not need (the reject chains when
 * no checkpoint can reset) are removed with their jumps, so a reload can
 * add them and take them away again.
 */
export function installRules(rules: RenderedRules, netns?: string): void {
  ipt(netns, ['iptables-restore', '-w', '--noflush'], rules.restore);
  for (const c of LEGACY_CHAINS) removeChain(netns, c);
  for (const c of Object.values(CHAINS) as OwnedChain[]) {
    if (!rules.chains.includes(c)) {
      removeChain(netns, c);
      continue;
    }
    for (const stale of staleJumps(c)) {
      while (hasRule(netns, c.table, c.hook, stale)) ipt(netns, ['iptables', '-w', '-t', c.table, '-D', c.hook, ...stale]);
    }
    // Insert at the top: our decisions must precede other NAT rules for the VIPs.
    const spec = jumpSpec(c);
    if (!hasRule(netns, c.table, c.hook, spec)) ipt(netns, ['iptables', '-w', '-t', c.table, '-I', c.hook, '1', ...spec]);
  }
}

/** `iptables-save -t TABLE` (rules without counters), synchronously: right after an install, which is synchronous too. */
export function saveTable(table: string, netns?: string): string {
  return ipt(netns, ['iptables-save', '-t', table]);
}

/**
 * The same without blocking the event loop (the periodic rule check, off
 * the packet path): killed (SIGKILL) after `timeoutMs`, which then fails
 * as CommandFailedError. Output up to 256 MiB (a large foreign firewall
 * in the same table).
 */
export function saveTableAsync(table: string, timeoutMs: number, netns?: string): Promise<string> {
  const args = ['iptables-save', '-t', table];
  const argv = netns === undefined ? args : ['ip', 'netns', 'exec', netns, ...args];
  const [cmd = 'iptables-save', ...rest] = argv;
  return new Promise((resolve, reject) => {
    execFile(cmd, rest, { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      if (err) {
        const why = err.killed ? `killed after ${String(timeoutMs)} ms` : stderr;
        reject(new CommandFailedError(argv.join(' '), why, { cause: err }));
      } else resolve(stdout);
    });
  });
}

/** Removes our jumps and chains (and those of earlier versions); leaves everything else. The nft table: ruleset.ts removeRules. */
export function removeIptablesRules(netns?: string): void {
  for (const c of [...(Object.values(CHAINS) as OwnedChain[]), ...LEGACY_CHAINS]) removeChain(netns, c);
}

function removeChain(netns: string | undefined, c: OwnedChain): void {
  for (const spec of [jumpSpec(c), ...staleJumps(c)]) {
    while (hasRule(netns, c.table, c.hook, spec)) ipt(netns, ['iptables', '-w', '-t', c.table, '-D', c.hook, ...spec]);
  }
  try {
    ipt(netns, ['iptables', '-w', '-t', c.table, '-F', c.chain]);
    ipt(netns, ['iptables', '-w', '-t', c.table, '-X', c.chain]);
  } catch {
    /* chain absent: nothing to remove */
  }
}
