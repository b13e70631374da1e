/**
 * The VIP guard's drop counter (nft.ts: packets to a VIP that got no DNAT
 * decision, dropped in the kernel), read over netlink (nft-netlink.ts) at
 * every rule check (rules-health.ts): no command per scrape, no work per
 * packet. Status and /metrics show the last values read, at most one
 * check period old.
 *
 * A reload or repair replaces the table, and renders the counter with the
 * last values read (renderNft's `guard`), so the count does not go back
 * to zero; drops between the last read and the replacement are lost.
 */
import { GUARD_COUNTER } from './nft.ts';

const COUNTER = new RegExp(`counter ${GUARD_COUNTER} \\{\\s*packets (\\d+) bytes (\\d+)`);

export interface GuardCount {
  readonly packets: number;
  readonly bytes: number;
}

/** The guard counter's values in a `nft list table ip sluice` (or `ip6 sluice`) output, or undefined if absent. */
export function guardCountOf(list: string): GuardCount | undefined {
  const m = COUNTER.exec(list);
  if (m === null) return undefined;
  return { packets: Number(m[1]), bytes: Number(m[2]) };
}

/**
 * Both families' guards: `table ip sluice` and `table ip6 sluice` each have
 * their own counter (the same name); an IPv4-only node never reads an ip6
 * dump and its IPv6 count stays zero.
 */
export class VipGuard {
  #last: GuardCount = { packets: 0, bytes: 0 };
  #last6: GuardCount = { packets: 0, bytes: 0 };
  /** Reads that found the counter (rule checks with our table present), both families. */
  reads = 0;

  /** Takes the counter from a dump of our table of family `fam` (absent table or counter: the last values stay). */
  read(list: string, fam: 'ip' | 'ip6' = 'ip'): void {
    const c = guardCountOf(list);
    if (c === undefined) return;
    if (fam === 'ip6') this.#last6 = c;
    else this.#last = c;
    this.reads++;
  }

  /** The ip table's count. */
  last(): GuardCount {
    return this.#last;
  }

  /** The ip6 table's count. */
  last6(): GuardCount {
    return this.#last6;
  }
}
