/**
 * `sluice front --remove-rules`: the explicit step that takes the front
 * node's rules away. A stopped daemon leaves them in place on purpose (the
 * fallback spread keeps serving new connections until the next start,
 * src/front/daemon.ts), so they go only when an operator says so, e.g.
 * `deploy/install.sh --uninstall`.
 *
 * Refused while a front node is bound to a queue its rules send to (or to
 * the configuration's queue or log group): the running daemon would put
 * its rules back within rules.checkSeconds (rules that heal), so the
 * removal would not last and would cut steering for up to that period.
 * Stop the daemon first. Established connections are never affected: their
 * NAT binding lives in conntrack.
 *
 * Idempotent: with none of our chains present it removes nothing and says
 * so. The removal itself is removeRules() (src/front/ruleset.ts), the one
 * function that removes everything the front node installs; this module
 * only decides whether to call it and reports what it found before and
 * after.
 */
import { SluiceError } from '../errors/errors.ts';
import { saveTable } from './iptables.ts';
import { NFT_FAMILY, NFT_TABLE, hasNftTable } from './nft.ts';
import { checkBinding, systemHost, type HostReader } from './preflight.ts';
import { CHAINS, LEGACY_CHAINS, type OwnedChain } from './rules.ts';
import { removeRules } from './ruleset.ts';

/** A front node is bound to the queue (or log group) of the rules: removing them now would not last. */
export class FrontRunningError extends SluiceError {
  readonly code = 'ERR_SLUICE_FRONT_RUNNING';
}

/** Our chains were still there right after removeRules(): something reinstalls them. */
export class RulesNotRemovedError extends SluiceError {
  readonly code = 'ERR_SLUICE_RULES_NOT_REMOVED';
}

/** One of our chains as found in the ruleset. */
export interface FoundChain {
  /** iptables (4) or ip6tables (6): the IPv6 services' chains are the same names in ip6tables. */
  readonly family: 4 | 6;
  readonly table: OwnedChain['table'];
  readonly chain: string;
  readonly rules: number;
  /** Rules in built-in hooks that jump to it. */
  readonly jumps: number;
}

export interface RemoveOptions {
  /** Queue and log group of the configuration, when one was given and could be read. */
  readonly queue?: number;
  readonly nflogGroup?: number;
  readonly host?: HostReader;
  /** Network namespace to act in (tests); the CLI acts in its own. */
  readonly netns?: string;
  /** Reading and removing (unit tests): default iptables-save and removeRules() in `netns`. */
  readonly save?: (table: string) => string;
  /** ip6tables-save of a table (unit tests): default ip6tables-save in `netns`; with `save` injected and this not, no IPv6 rules. */
  readonly save6?: (table: string) => string;
  /** Whether our nft table is present (unit tests): default hasNftTable() in `netns`. */
  readonly nftPresent?: () => boolean;
  /** Whether our ip6 nft table is present (unit tests): default hasNftTable(ip6); with `nftPresent` injected and this not, absent. */
  readonly nftPresent6?: () => boolean;
  readonly remove?: () => void;
}

export interface RemoveOutcome {
  /** Our chains before the removal (empty: nothing was there). */
  readonly removed: readonly FoundChain[];
  /** Lines for the operator (what was checked and done). */
  readonly notes: readonly string[];
}

/** Our chains and their jumps in `iptables-save -t TABLE` output, per table. */
export function findChains(save: (table: string) => string, family: 4 | 6 = 4): FoundChain[] {
  const out: FoundChain[] = [];
  const texts = new Map<string, string>();
  // Also the chains of earlier versions (their nat chains), which removeRules() removes too.
  for (const c of [...(Object.values(CHAINS) as OwnedChain[]), ...(family === 4 ? LEGACY_CHAINS : [])]) {
    let text = texts.get(c.table);
    if (text === undefined) {
      text = save(c.table);
      texts.set(c.table, text);
    }
    const lines = text.split('\n');
    if (!lines.some((l) => l.startsWith(`:${c.chain} `))) continue;
    const rules = lines.filter((l) => l.startsWith(`-A ${c.chain} `)).length;
    const jumps = lines.filter((l) => l.startsWith(`-A ${c.hook} `) && l.endsWith(` -j ${c.chain}`)).length;
    out.push({ family, table: c.table, chain: c.chain, rules, jumps });
  }
  return out;
}

/** Queue numbers our queue chain sends to (`--queue-num N`). */
export function queuesInRules(mangleSave: string): number[] {
  const out = new Set<number>();
  for (const line of mangleSave.split('\n')) {
    if (!line.startsWith(`-A ${CHAINS.queue.chain} `)) continue;
    const m = /--queue-num (\d+)/.exec(line);
    if (m) out.add(Number(m[1]));
  }
  return [...out].sort((a, b) => a - b);
}

/**
 * Removes every rule the front node installs unless a front node is bound
 * to their queue. Throws FrontRunningError (nothing removed) in that case,
 * RulesNotRemovedError if they are back right after, CommandFailedError if
 * iptables fails.
 */
export function removeFrontRules(opts: RemoveOptions = {}): RemoveOutcome {
  const host = opts.host ?? systemHost();
  const save = opts.save ?? ((table: string): string => saveTable(table, opts.netns));
  const notes: string[] = [];
  const save6 = opts.save6 ?? (opts.save !== undefined ? (): string => '' : (table: string): string => saveTable(table, opts.netns, 6));
  const nftPresent = opts.nftPresent ?? ((): boolean => hasNftTable(opts.netns));
  const nftPresent6 = opts.nftPresent6 ?? (opts.nftPresent !== undefined ? (): boolean => false : (): boolean => hasNftTable(opts.netns, 'ip6'));
  const chainsNow = (): FoundChain[] => [...findChains(save), ...findChains(save6, 6)];
  const before = chainsNow();
  const nftBefore = nftPresent();
  const nftBefore6 = nftPresent6();
  const queues = new Set([
    ...queuesInRules(before.some((c) => c.family === 4 && c.table === 'mangle') ? save('mangle') : ''),
    ...queuesInRules(before.some((c) => c.family === 6 && c.table === 'mangle') ? save6('mangle') : ''),
  ]);
  if (opts.queue !== undefined) queues.add(opts.queue);
  const busy: string[] = [];
  let unknown = false;
  for (const q of [...queues].sort((a, b) => a - b)) {
    const r = checkBinding('queue', q, host);
    if (r.skipped === true) unknown = true;
    else if (!r.ok) busy.push(r.detail);
  }
  if (opts.nflogGroup !== undefined) {
    const r = checkBinding('log', opts.nflogGroup, host);
    if (r.skipped === true) unknown = true;
    else if (!r.ok) busy.push(r.detail);
  }
  if (busy.length > 0) {
    throw new FrontRunningError(
      `a front node is running here; its rules were left in place (it would reinstall them within rules.checkSeconds):\n${busy.map((b) => `  ${b}`).join('\n')}\n` +
        'stop it first (systemctl stop sluice-front), then run sluice front --remove-rules again',
    );
  }
  if (unknown) notes.push('the queue owners are listed in a root-only file: not checked as this user (run as root to be sure no front node runs)');
  if (before.length === 0 && !nftBefore && !nftBefore6) {
    notes.push('no rules of the front node here: nothing to remove');
    return { removed: [], notes };
  }
  if (opts.remove) opts.remove();
  else removeRules(opts.netns);
  const left = chainsNow().map((c) => `${c.family === 6 ? 'ip6tables ' : ''}${c.table}/${c.chain}`);
  if (nftPresent()) left.push(`nft table ${NFT_FAMILY} ${NFT_TABLE}`);
  if (nftPresent6()) left.push(`nft table ip6 ${NFT_TABLE}`);
  if (left.length > 0) {
    throw new RulesNotRemovedError(`rules reappeared right after their removal (${left.join(', ')}): some process reinstalls them; stop it and run sluice front --remove-rules again`);
  }
  if (nftBefore) notes.push(`removed nft table ${NFT_FAMILY} ${NFT_TABLE} (classification, DNAT map, fallback map, VIP guard)`);
  if (nftBefore6) notes.push(`removed nft table ip6 ${NFT_TABLE} (the same for the IPv6 services)`);
  for (const c of before) notes.push(`removed ${c.family === 6 ? 'ip6tables ' : ''}${c.table} chain ${c.chain} (${String(c.rules)} rule${c.rules === 1 ? '' : 's'}) and ${String(c.jumps)} jump${c.jumps === 1 ? '' : 's'} to it`);
  notes.push('new connections to the VIPs are no longer steered by this node; established ones continue on their NAT binding');
  return { removed: before, notes };
}
