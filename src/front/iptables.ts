/**
 * Applying and removing the front node's rules with the iptables tools.
 * Idempotent both ways: install() twice leaves one jump per chain; remove()
 * on a namespace without our rules does nothing.
 */
import { runOffLoop } from './run-off-loop.ts';
import { argvIn, runCommand } from '../util/exec.ts';
import { CHAINS, LEGACY_CHAINS, type OwnedChain, type RenderedRules } from './rules.ts';

/**
 * Whether this host's iptables is iptables-nft (its tables live in
 * nf_tables, so a change to them raises the nf_tables ruleset generation
 * that the rule check watches) rather than iptables-legacy. Unknown
 * (no iptables, or an output without the backend): false, the cautious
 * answer (the rule check then reads the iptables tables every period).
 */
export function iptablesIsNft(netns?: string): boolean {
  try {
    return /\(nf_tables\)/.test(ipt(netns, ['iptables', '-V']));
  } catch {
    return false;
  }
}

/** The tool family: iptables for IPv4, ip6tables for IPv6 (the same chains in both: rules.ts RenderedRules.ipv6). */
export type IptFamily = 4 | 6;

/** A tool's name in family `fam` (`iptables`, `iptables-save`, ... or their ip6 twins). */
function tool(fam: IptFamily, name: 'iptables' | 'iptables-save' | 'iptables-restore'): string {
  return fam === 4 ? name : name.replace('iptables', 'ip6tables');
}

/**
 * Runs an iptables tool, inside network namespace `netns` when given (tests
 * and the testbed run front nodes in namespaces; the daemon itself runs in
 * its own and passes none).
 */
function ipt(netns: string | undefined, args: readonly string[], input?: string): string {
  const argv = argvIn(netns, args);
  return runCommand(argv[0] ?? 'iptables', argv.slice(1), input);
}

function hasRule(netns: string | undefined, table: string, hook: string, spec: readonly string[], fam: IptFamily = 4): boolean {
  try {
    ipt(netns, [tool(fam, 'iptables'), '-w', '-t', table, '-C', hook, ...spec]);
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
  installFamily(rules, 4, netns);
  // ip6tables: the same chains with an IPv6 service; else ours are removed
  // if an earlier configuration left them (one ip6tables-save to look).
  if (rules.ipv6) installFamily(rules, 6, netns);
  else if (hasIp6Chains(netns)) removeFamily(netns, 6);
}

function installFamily(rules: RenderedRules, fam: IptFamily, netns: string | undefined): void {
  ipt(netns, [tool(fam, 'iptables-restore'), '-w', '--noflush'], fam === 4 ? rules.restore : rules.restore6);
  if (fam === 4) for (const c of LEGACY_CHAINS) removeChain(netns, c, fam);
  const mine = fam === 4 ? rules.chains : rules.chains6;
  for (const c of chainsOf(fam)) {
    if (!mine.includes(c)) {
      removeChain(netns, c, fam);
      continue;
    }
    for (const stale of staleJumps(c)) {
      while (hasRule(netns, c.table, c.hook, stale, fam)) ipt(netns, [tool(fam, 'iptables'), '-w', '-t', c.table, '-D', c.hook, ...stale]);
    }
    // Insert at the top: our decisions must precede other NAT rules for the VIPs.
    const spec = jumpSpec(c);
    if (!hasRule(netns, c.table, c.hook, spec, fam)) ipt(netns, [tool(fam, 'iptables'), '-w', '-t', c.table, '-I', c.hook, '1', ...spec]);
  }
}

/** Whether ip6tables holds a chain of ours (`ip6tables-save`: every table, one command). */
function hasIp6Chains(netns: string | undefined): boolean {
  try {
    return /^:SLUICE_/m.test(ipt(netns, [tool(6, 'iptables-save')]));
  } catch {
    return false; // no ip6tables here: nothing of ours in it
  }
}

/** `iptables-save -t TABLE` (or ip6tables-save: `fam` 6; rules without counters), synchronously: right after an install, which is synchronous too. */
export function saveTable(table: string, netns?: string, fam: IptFamily = 4): string {
  return ipt(netns, [tool(fam, 'iptables-save'), '-t', table]);
}

/**
 * The same without blocking the event loop (the periodic rule check, off
 * the packet path): killed (SIGKILL) after `timeoutMs`, which then fails
 * as CommandFailedError. Output up to 256 MiB (a large foreign firewall
 * in the same table).
 */
export function saveTableAsync(table: string, timeoutMs: number, netns?: string, fam: IptFamily = 4): Promise<string> {
  const args = [tool(fam, 'iptables-save'), '-t', table];
  return runOffLoop(argvIn(netns, args), { timeoutMs, maxMiB: 256 });
}

/** Removes our jumps and chains (and those of earlier versions); leaves everything else. The nft table: ruleset.ts removeRules. */
export function removeIptablesRules(netns?: string): void {
  removeFamily(netns, 4);
  if (hasIp6Chains(netns)) removeFamily(netns, 6);
}

function removeFamily(netns: string | undefined, fam: IptFamily): void {
  for (const c of [...chainsOf(fam), ...(fam === 4 ? LEGACY_CHAINS : [])]) removeChain(netns, c, fam);
}

/** The chains of CHAINS that family `fam`'s tool can hold (SLUICE_SYNPROXY is ip6tables'). */
function chainsOf(fam: IptFamily): OwnedChain[] {
  return (Object.values(CHAINS) as OwnedChain[]).filter((c) => fam === 6 || c !== CHAINS.synproxy6);
}

function removeChain(netns: string | undefined, c: OwnedChain, fam: IptFamily = 4): void {
  for (const spec of [jumpSpec(c), ...staleJumps(c)]) {
    while (hasRule(netns, c.table, c.hook, spec, fam)) ipt(netns, [tool(fam, 'iptables'), '-w', '-t', c.table, '-D', c.hook, ...spec]);
  }
  try {
    ipt(netns, [tool(fam, 'iptables'), '-w', '-t', c.table, '-F', c.chain]);
    ipt(netns, [tool(fam, 'iptables'), '-w', '-t', c.table, '-X', c.chain]);
  } catch {
    /* chain absent: nothing to remove */
  }
}
