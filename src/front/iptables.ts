/**
 * Applying and removing the front node's rules with the iptables tools.
 * Idempotent both ways: install() twice leaves one jump per chain; remove()
 * on a namespace without our rules does nothing.
 */
import { runCommand } from '../util/exec.ts';
import { CHAINS, type RenderedRules } from './rules.ts';

/**
 * Runs an iptables tool, inside network namespace `netns` when given (tests
 * and the testbed run front nodes in namespaces; the daemon itself runs in
 * its own and passes none).
 */
function ipt(netns: string | undefined, args: readonly string[], input?: string): string {
  const argv = netns === undefined ? args : ['ip', 'netns', 'exec', netns, ...args];
  return runCommand(argv[0] ?? 'iptables', argv.slice(1), input);
}

function hasRule(netns: string | undefined, table: string, hook: string, chain: string): boolean {
  try {
    ipt(netns, ['iptables', '-w', '-t', table, '-C', hook, '-j', chain]);
    return true;
  } catch {
    return false;
  }
}

/** Loads our chains (atomically per table), then adds each jump if missing. */
export function installRules(rules: RenderedRules, netns?: string): void {
  ipt(netns, ['iptables-restore', '-w', '--noflush'], rules.restore);
  for (const c of Object.values(CHAINS)) {
    // Insert at the top: our decisions must precede other NAT rules for the VIPs.
    if (!hasRule(netns, c.table, c.hook, c.chain)) ipt(netns, ['iptables', '-w', '-t', c.table, '-I', c.hook, '1', '-j', c.chain]);
  }
}

/** Removes our jumps and chains; leaves everything else. */
export function removeRules(netns?: string): void {
  for (const c of Object.values(CHAINS)) {
    while (hasRule(netns, c.table, c.hook, c.chain)) ipt(netns, ['iptables', '-w', '-t', c.table, '-D', c.hook, '-j', c.chain]);
    try {
      ipt(netns, ['iptables', '-w', '-t', c.table, '-F', c.chain]);
      ipt(netns, ['iptables', '-w', '-t', c.table, '-X', c.chain]);
    } catch {
      /* chain absent: nothing to remove */
    }
  }
}
