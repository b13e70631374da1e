/**
 * Everything `sluice front` installs in the kernel, as one unit: the
 * iptables chains (rules.ts, iptables.ts: the NFQUEUE rule and the
 * checkpoints' REJECT) and sluice's nftables table (nft.ts:
 * classification, DNAT, fallback, VIP guard). Start, reload and repair
 * install it with installRuleset; removeRules removes all of it, and is the
 * one function for that (the daemon's stop, `--remove-rules`, tests).
 *
 * Order: the nft table first (it sets QUEUE_MARK and DNATs by the
 * verdict's mark), then the iptables chains (the NFQUEUE rule that matches
 * QUEUE_MARK). Between the two loads of a first install, a packet marked
 * for the queue finds no NFQUEUE rule yet and meets the nft fallback or
 * the VIP guard: never an unsteered packet routed out.
 */
import { CommandFailedError } from '../errors/errors.ts';
import type { FrontConfig } from './config.ts';
import { installRules as installIptables, removeIptablesRules } from './iptables.ts';
import { NFT_FAMILY, NFT_TABLE, dropTableScript, elementDiffScript, listTable, nftLoad, removeNftTable, renderNft, type FallbackSpread, type HeldSchedule, type LayoutItem, type NftFamily, type RenderedNft } from './nft.ts';
import { NftLayoutError } from './nft-netlink.ts';
import { renderRules, type RenderedRules } from './rules.ts';
import type { ScheduleTargets } from './kernel-schedule.ts';

export interface RuleSet {
  readonly iptables: RenderedRules;
  readonly nft: RenderedNft;
}

/**
 * Renders both parts; `guard` carries the VIP guard counter's last values
 * into the new table, `engaged` names the auto SYN-cookie services engaged
 * now (synproxy-auto.ts), so an install under a flood keeps their cookies.
 */
export function renderRuleset(cfg: FrontConfig, spread: FallbackSpread, guard?: { packets: number; bytes: number }, schedule?: ScheduleTargets, engaged?: ReadonlySet<string>, guard6?: { packets: number; bytes: number }): RuleSet {
  return { iptables: renderRules(cfg), nft: renderNft(cfg, spread, guard, schedule, engaged, guard6) };
}

/**
 * The whole-table script of both families, one transaction: the ip table,
 * and the ip6 table when an IPv6 service exists, else the deletion of an
 * ip6 table an earlier configuration left (a reload that removed the last
 * IPv6 service, a start after one).
 */
export function wholeScript(nft: RenderedNft): string {
  return nft.script + (nft.v6 !== undefined ? nft.v6.script : dropTableScript('ip6'));
}

/** Reads what our table of a family holds now (nft-netlink.ts readTableLayout, or the same run in another namespace). */
export type LayoutReader = (fam: NftFamily) => readonly LayoutItem[];

/**
 * The script that gives the tables the kernel holds `nft`'s contents
 * without replacing them (nft.ts keptScript), when each family's table is
 * of `nft`'s structure; undefined otherwise. One transaction, as
 * wholeScript.
 */
export function keptScript(nft: RenderedNft, layout: LayoutReader): string | undefined {
  const ip = nft.kept(layout('ip'));
  if (ip === undefined) return undefined;
  if (nft.v6 === undefined) return ip + dropTableScript('ip6');
  const ip6 = nft.v6.kept(layout('ip6'));
  return ip6 === undefined ? undefined : ip + ip6;
}

/** The start's wish to keep a table of the same structure: how to read what the kernel holds, and whom to tell when keeping it failed (the table is then replaced). */
export interface KeepTable {
  readonly read: LayoutReader;
  readonly onRefused: (err: Error) => void;
}

/** How installRuleset wrote the nft table: the elements that changed (over its own last install), every element over a table of the same structure (`keep`), or the table replaced whole. */
export type InstallMode = 'elements' | 'kept' | 'whole';

/**
 * Installs both parts (each atomic on its own), nft first. Throws
 * CommandFailedError.
 *
 * Over `over` (the rules this process installed last, still intact: a
 * reload or a ctl change) with the same nft structure, only the sets' and
 * maps' elements are replaced (one transaction): the chains, their hooks
 * and the counters stay; only the elements that changed are written
 * (elementDiffScript), so the fallback map is left to the fallback writer.
 * If the element update fails (the table is gone or changed), or without
 * `over` (start, repair), the whole table is written. With `keep` (the
 * start), which reads what the kernel holds (and hears why, if keeping
 * fails: the table is then replaced), a table of the same structure
 * as `rules` (its comment says) gets every element instead, and is not
 * replaced: a replacement could drop a SYN that straddled its commit
 * (nft.ts keptScript). Not for a repair: a table found altered may have a
 * rule changed under the same comment. `held`: what the kernel holds of
 * the kernel schedule (the writer's state, nft.ts heldSchedule), so that
 * only the schedule's slots and chains that differ are written. Returns
 * how the table was written.
 */
export function installRuleset(rules: RuleSet, netns?: string, over?: RuleSet, held?: HeldSchedule, keep?: KeepTable): InstallMode {
  let done = false;
  if (over !== undefined && over.nft.structure === rules.nft.structure && over.nft.v6?.structure === rules.nft.v6?.structure) {
    try {
      // Kernel-schedule chains the new rendering lacks go after the update
      // (which has already emptied the verdict map that jumped to them).
      // Each table's own (an IPv6 service's chain is in the ip6 table).
      const gone = [...goneChains(over.nft, rules.nft), ...(over.nft.v6 !== undefined && rules.nft.v6 !== undefined ? goneChains(over.nft.v6, rules.nft.v6) : [])];
      // Only the elements that changed (elementDiffScript): a reload of
      // 1,000 services x 100 servers that changes one service writes ~100
      // elements, not 10^5 (flush and add took 4.7 s).
      const script = elementDiffScript(over.nft, rules.nft, held) + gone.map(([fam, c]) => `delete chain ${fam} ${NFT_TABLE} ${c}\n`).join('');
      if (script !== '') nftLoad(script, netns);
      done = true;
    } catch (err) {
      if (!(err instanceof CommandFailedError)) throw err;
    }
  }
  let mode: InstallMode = done ? 'elements' : 'whole';
  if (!done && keep !== undefined) {
    // Over a table of the same structure (the start's: a restart of the same
    // version and configuration): its elements, not the table. The whole
    // replacement if the layout cannot be read or the kernel refuses the
    // update (it is atomic: nothing of it applied).
    try {
      const script = keptScript(rules.nft, keep.read);
      if (script !== undefined) {
        nftLoad(script, netns);
        mode = 'kept';
      }
    } catch (err) {
      if (!(err instanceof NftLayoutError) && !(err instanceof CommandFailedError)) throw err;
      keep.onRefused(err);
    }
  }
  if (mode === 'whole') nftLoad(wholeScript(rules.nft), netns);
  installIptables(rules.iptables, netns);
  return mode;
}

/** The kernel-schedule chains of table `over` that `next` lacks, with their table's family. */
function goneChains(over: RenderedNft, next: RenderedNft): (readonly [NftFamily, string])[] {
  return over.kernelChains.filter((c) => !next.kernelChains.includes(c)).map((c) => [over.family, c] as const);
}

/** Removes everything the front node installs: our iptables chains and jumps (also those of earlier versions), and our nft table. Idempotent. */
export function removeRules(netns?: string): void {
  removeIptablesRules(netns);
  removeNftTable(netns);
}

/** Our nft table of family `fam` as `nft list table` prints it (the read-back). */
export function listNft(netns?: string, fam: NftFamily = NFT_FAMILY): string {
  return listTable(netns, fam);
}
