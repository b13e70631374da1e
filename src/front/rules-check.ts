/**
 * Is our rule set still installed as we installed it? The comparison of
 * `iptables-save -t TABLE` output with the expected set, for the periodic
 * check of rules-health.ts.
 *
 * The expected set is iptables' own rendering of our rules, read back
 * right after each install (readBack), not the text renderRules produced:
 * iptables-save normalises what it prints (`-m tcp` added, flag lists
 * reordered, `--nflog-group 0` and HMARK's option order dropped or
 * changed, and that differs between iptables versions), so only its own
 * output compares line for line with its own output.
 *
 * What belongs to us (OwnedPart), per table: the chains of CHAINS
 * (declared, with their rules in order) and the rules in the built-in
 * hooks that jump to one of them. Everything else in the dump (foreign
 * chains, foreign rules in PREROUTING, FORWARD, ...) is ignored: it is
 * neither damage nor ours to restore or remove.
 */
import { SluiceError } from '../errors/errors.ts';
import { CHAINS, LEGACY_CHAINS, type OwnedChain } from './rules.ts';
import type { RuleSet } from './ruleset.ts';

/**
 * An iptables table with chains of ours, or `nft`: sluice's own nft table
 * (nft.ts), read with `nft list table ip sluice` and compared the same way
 * (ownedNftPart: each set, map and chain a "chain" of lines).
 */
export type Table = OwnedChain['table'] | 'nft' | IPv6Table;

/**
 * The IPv6 twins, present with an IPv6 service: `nft6` is our `ip6 sluice`
 * table (nft.ts, compared as `nft` is), `mangle6` and `filter6` the
 * ip6tables tables holding the same chains as their iptables twins
 * (rules.ts RenderedRules.ipv6). Each is read every period: the ip6
 * table holds the IPv6 services only (the large-table pacing of `nft`,
 * rules-health.ts NFT_CHECK_SHARE, is the ip table's).
 */
export type IPv6Table = 'nft6' | 'mangle6' | 'filter6';

/** The iptables table behind a table name (`mangle6` -> `mangle`), or undefined for an nft table. */
export function iptablesOf(table: Table): OwnedChain['table'] | undefined {
  if (table === 'nft' || table === 'nft6') return undefined;
  return table === 'mangle6' ? 'mangle' : table === 'filter6' ? 'filter' : table;
}

/** The nft chains our table must hold (the read-back refuses a table without them). */
const NFT_CHAINS = ['classify', 'to_service', 'nat_pre', 'vip_guard', 'nat_post'] as const;

/** Right after an install, iptables-save did not show the rules just installed (someone changed them meanwhile). */
export class RulesReadBackError extends SluiceError {
  readonly code = 'ERR_SLUICE_RULES_READ_BACK';
}

/** Our part of one table's iptables-save output. */
export interface OwnedPart {
  /** Each chain of ours that is declared, with its rules (the text after `-A CHAIN `) in order. */
  readonly chains: ReadonlyMap<string, readonly string[]>;
  /** Rules of the built-in hooks that jump to a chain of ours, as saved (`-A HOOK ...`). */
  readonly jumps: readonly string[];
}

// Earlier versions' chains are ours too (a dump may still hold them); a
// chain the expected set lacks is never judged (compareOwned).
const OURS: ReadonlySet<string> = new Set([...(Object.values(CHAINS) as OwnedChain[]), ...LEGACY_CHAINS].map((c) => c.chain));

/** Our chains and jumps from the output of `iptables-save -t TABLE` (one table). */
export function ownedPart(save: string): OwnedPart {
  const chains = new Map<string, string[]>();
  const jumps: string[] = [];
  for (const line of save.split('\n')) {
    if (line.startsWith(':')) {
      // `:NAME POLICY [packets:bytes]`
      const name = line.slice(1).split(' ', 1)[0] ?? '';
      if (OURS.has(name) && !chains.has(name)) chains.set(name, []);
      continue;
    }
    if (!line.startsWith('-A ')) continue;
    const rest = line.slice(3);
    const space = rest.indexOf(' ');
    const chain = space < 0 ? rest : rest.slice(0, space);
    const rule = space < 0 ? '' : rest.slice(space + 1);
    if (OURS.has(chain)) {
      let rules = chains.get(chain);
      if (rules === undefined) chains.set(chain, (rules = []));
      rules.push(rule);
      continue;
    }
    const target = / -j (\S+)$/.exec(line)?.[1];
    if (target !== undefined && OURS.has(target)) jumps.push(line);
  }
  return { chains, jumps };
}

/** What is missing or changed, in counts (what the warning logs: never the whole dump). */
export interface RulesDamage {
  /** Chains of ours no longer declared (a flushed table, `-X`, `nft flush ruleset`). */
  readonly missingChains: number;
  /** Our rules no longer in their chain (a flushed chain, a deleted or changed rule). */
  readonly missingRules: number;
  /** Rules in a chain of ours that we did not put there (a changed rule, an appended one). */
  readonly unexpectedRules: number;
  /** Chains of ours holding the right rules in another order. */
  readonly reorderedChains: number;
  /** Our jumps no longer in their hook (a flushed built-in chain, a deleted or changed jump). */
  readonly missingJumps: number;
}

export const NO_DAMAGE: RulesDamage = { missingChains: 0, missingRules: 0, unexpectedRules: 0, reorderedChains: 0, missingJumps: 0 };

export function isDamaged(d: RulesDamage): boolean {
  return d.missingChains + d.missingRules + d.unexpectedRules + d.reorderedChains + d.missingJumps > 0;
}

/** Multiset difference: how many of `a` are not matched by one of `b`. */
function notIn(a: readonly string[], b: readonly string[]): number {
  const left = new Map<string, number>();
  for (const x of b) left.set(x, (left.get(x) ?? 0) + 1);
  let n = 0;
  for (const x of a) {
    const k = left.get(x) ?? 0;
    if (k > 0) left.set(x, k - 1);
    else n++;
  }
  return n;
}

/**
 * The damage of `actual` against `expected` (both one table's OwnedPart).
 * Jumps into our chains that we did not install are not damage: they are
 * someone else's rules (and our own jump, if still there, still works);
 * chains of ours that `expected` lacks (the reject chains of a
 * configuration without them) are not looked at.
 */
export function compareOwned(expected: OwnedPart, actual: OwnedPart): RulesDamage {
  let missingChains = 0;
  let missingRules = 0;
  let unexpectedRules = 0;
  let reorderedChains = 0;
  for (const [chain, want] of expected.chains) {
    const got = actual.chains.get(chain);
    if (got === undefined) {
      missingChains++;
      missingRules += want.length;
      continue;
    }
    const missing = notIn(want, got);
    const extra = notIn(got, want);
    missingRules += missing;
    unexpectedRules += extra;
    if (missing === 0 && extra === 0 && want.some((r, i) => got[i] !== r)) reorderedChains++;
  }
  return { missingChains, missingRules, unexpectedRules, reorderedChains, missingJumps: notIn(expected.jumps, actual.jumps) };
}

/** The damage summed over tables. */
export function addDamage(a: RulesDamage, b: RulesDamage): RulesDamage {
  return {
    missingChains: a.missingChains + b.missingChains,
    missingRules: a.missingRules + b.missingRules,
    unexpectedRules: a.unexpectedRules + b.unexpectedRules,
    reorderedChains: a.reorderedChains + b.reorderedChains,
    missingJumps: a.missingJumps + b.missingJumps,
  };
}

/** The tables `rules` has parts in, in install order. */
export function tablesOf(rules: RuleSet): Table[] {
  const ipt = (['mangle', 'nat', 'filter'] as const).filter((t) => rules.iptables.chains.some((c) => c.table === t));
  // ip6tables' own chain list: with an IPv6 SYNPROXY service its filter table holds SLUICE_SYNPROXY even when iptables' holds nothing.
  const ipt6 = (['mangle', 'filter'] as const).filter((t) => rules.iptables.chains6.some((c) => c.table === t));
  const v6: Table[] = [...(rules.nft.v6 !== undefined ? (['nft6'] as const) : []), ...(rules.iptables.ipv6 ? ipt6.map((t) => (t === 'mangle' ? 'mangle6' : 'filter6') as Table) : [])];
  return ['nft', ...ipt, ...v6];
}

/** The fallback map's element count in a `nft list table` output (its elements are compared by count: fallback.ts rewrites them). */
export function fallbackCountOf(list: string): number {
  const block = /\bmap fallback \{([\s\S]*?)\n\t\}/.exec(list)?.[1] ?? '';
  const els = /elements = \{([\s\S]*)\}/.exec(block)?.[1] ?? '';
  return els.split(' : ').length - 1;
}

/**
 * Our nft table's `nft list table` output as an OwnedPart: one entry per
 * set, map, counter and chain (`set vips`, `chain classify`, ...) with its
 * lines, trimmed. Counter values are dropped (they move), and so are the
 * fallback map's elements (rewritten by fallback.ts between installs:
 * checked by count, fallbackCountOf) and the schedule map's (rewritten by
 * kernel-schedule.ts as the servers' state changes; a schedule emptied by
 * someone else only sends SYNs back to the queue, where the daemon decides),
 * and the `synproxied*` sets' (written by synproxy-auto.ts as floods come
 * and go; the next install renders the engaged state). An absent table is
 * an empty part.
 */
export function ownedNftPart(list: string): OwnedPart {
  const chains = new Map<string, string[]>();
  let current: string[] | undefined;
  let changing = false;
  let inFallbackElements = false;
  let inKernelChain = false;
  for (const raw of list.split('\n')) {
    const line = raw.trim();
    const head = /^(set|map|chain|counter) (\S+) \{$/.exec(line);
    if (head !== null && raw.startsWith('\t') && !raw.startsWith('\t\t')) {
      current = [];
      const key = `${head[1] ?? ''} ${head[2] ?? ''}`;
      chains.set(key, current);
      changing = changingElements(key);
      inKernelChain = head[1] === 'chain' && /^k_\d+$/.test(head[2] ?? '');
      inFallbackElements = false;
      continue;
    }
    if (current === undefined || line === '' || line === '}') continue;
    if (changing && (inFallbackElements || line.startsWith('elements = '))) {
      inFallbackElements = !line.endsWith('}');
      continue;
    }
    // A kernel-schedule chain's slot count follows the eligible servers
    // (kernel-schedule.ts rewrites it): not damage.
    current.push((inKernelChain ? line.replace(/numgen inc mod \d+/, 'numgen inc mod N') : line).replace(/packets \d+ bytes \d+/g, 'packets - bytes -'));
  }
  return { chains, jumps: [] };
}

/** Whether set or map `key` (`map fallback`) holds elements the daemon rewrites between installs. */
function changingElements(key: string): boolean {
  return key === 'map fallback' || key === 'map schedule' || /^set synproxied(_\d+)?$/.test(key);
}

/** Elements per set or map (by name) of an ownedNftPart (the fallback map's are not in it). */
export function elementCountsOf(part: OwnedPart): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, lines] of part.chains) {
    const [kind, name = ''] = key.split(' ');
    if (kind !== 'set' && kind !== 'map') continue;
    const text = lines.join(' ');
    const at = text.indexOf('elements = {');
    if (at < 0) {
      out.set(name, 0);
      continue;
    }
    // Elements hold no comma of their own (addresses, ports, marks, concatenations).
    out.set(name, text.slice(at).split(',').length);
  }
  return out;
}

/** Our part of one table's dump: iptables-save output, or `nft list table` for `nft`. */
export function partOf(table: Table, dump: string): OwnedPart {
  return table === 'nft' || table === 'nft6' ? ownedNftPart(dump) : ownedPart(dump);
}

/**
 * The expected set of one table: our part of `save`, read right after
 * installing `rules`. Checked against the rendering by shape (each chain
 * declared with as many rules as rendered, and at least one jump into it
 * from its hook), so a read-back that raced with someone else's change
 * is refused (RulesReadBackError) instead of becoming the reference.
 */
export function readBack(rules: RuleSet, table: Table, save: string): OwnedPart {
  if (table === 'nft' || table === 'nft6') {
    const nft = table === 'nft' ? rules.nft : rules.nft.v6;
    if (nft === undefined) throw new RulesReadBackError('nft6: no ip6 table in this rendering');
    const part = ownedNftPart(save);
    for (const c of NFT_CHAINS) if (!part.chains.has(`chain ${c}`)) throw new RulesReadBackError(`nft table: chain ${c} absent right after installing it`);
    for (const [c, want] of Object.entries(nft.chainSizes)) {
      const got = part.chains.get(`chain ${c}`)?.length ?? 0;
      if (got !== want) throw new RulesReadBackError(`nft table: chain ${c} holds ${String(got)} lines right after installing ${String(want)}`);
    }
    // Every set and map as full as rendered (the fallback map, rewritten by fallback.ts, is checked by count elsewhere).
    const counts = elementCountsOf(part);
    for (const [name, want] of Object.entries(nft.elements)) {
      if (name === 'fallback' || name === 'schedule' || /^synproxied(_\d+)?$/.test(name)) continue;
      const got = counts.get(name) ?? 0;
      if (got !== want) throw new RulesReadBackError(`nft table: ${name} holds ${String(got)} elements right after installing ${String(want)}`);
    }
    return part;
  }
  const part = ownedPart(save);
  for (const c of table === 'mangle6' || table === 'filter6' ? rules.iptables.chains6 : rules.iptables.chains) {
    if (c.table !== iptablesOf(table)) continue;
    const want = rules.iptables.byChain[c.chain]?.length ?? 0;
    const got = part.chains.get(c.chain);
    if (got === undefined) throw new RulesReadBackError(`${table} ${c.chain}: not declared right after installing it`);
    if (got.length !== want) throw new RulesReadBackError(`${table} ${c.chain}: ${got.length} rules right after installing ${want}`);
    if (!part.jumps.some((j) => j.startsWith(`-A ${c.hook} `) && j.endsWith(` -j ${c.chain}`))) throw new RulesReadBackError(`${table} ${c.hook}: no jump to ${c.chain} right after installing it`);
  }
  return part;
}
