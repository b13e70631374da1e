/**
 * The kernel's own counters in our nft tables that tell an operator what
 * happened without the daemon's help, per family (`table ip sluice` and
 * `table ip6 sluice` each have their own):
 *
 *   fallback_flows  new flows the kernel sent to a server by the fallback
 *                   spread, with no daemon's verdict (nft.ts FALLBACK_COUNTER)
 *   stray_replies   TCP from the LAN with no flow, dropped instead of being
 *                   forwarded un-NATed (nft.ts STRAY_COUNTER; a pair's new
 *                   master sees them between keepalived's move and the
 *                   flows' commit)
 *
 * Both restart at zero whenever the table is replaced whole (start, repair,
 * a structural reload), and carry on when the start finds a table of the
 * same structure and writes only its elements (ruleset.ts mode `kept`). Status and /metrics show running totals instead:
 * a value below the last one read means the table was replaced, and the
 * last value is added to the base first. What was counted between the last
 * read and a replacement is lost (at most one rule-check period's worth).
 *
 * At start, the values the kernel holds before our first install (counted
 * while no daemon ran: the fallback carrying new connections alone) are
 * read once (over netlink, nft-netlink.ts: nft's own listing fetches
 * every set element first, seconds at 1,000 services) and
 * become the base, so "what the fallback did while we were down" is not
 * wiped by our own install. The daemon logs them.
 *
 * Read over netlink (nft-netlink.ts) at every rule check (rules-health.ts):
 * no command per scrape, no work per packet.
 */
import { FALLBACK_COUNTER, STRAY_COUNTER } from './nft.ts';

/** `counter NAME { packets P bytes B }` in a `nft list table` or `nft list counters` output. */
function counterRegex(name: string): RegExp {
  return new RegExp(`counter ${name} \\{\\s*packets (\\d+) bytes (\\d+)`);
}
const FALLBACK = counterRegex(FALLBACK_COUNTER);
const STRAY = counterRegex(STRAY_COUNTER);

/** The packets of counter `re` in `list`, or undefined when absent. */
export function counterPackets(list: string, re: RegExp): number | undefined {
  const m = re.exec(list);
  return m === null ? undefined : Number(m[1]);
}

/** A monotonic total over a kernel counter that restarts at zero when its table is replaced. */
export class RestartingTotal {
  #base = 0;
  #last = 0;
  #seeded = 0;

  /** Takes a new reading. A drop below the last reading is a restart: the last reading joins the base. */
  update(value: number): void {
    if (value < this.#last) this.#base += this.#last;
    this.#last = value;
  }

  /** Counts from before this process's first install: added to the base once, the reading restarts at 0. */
  seed(value: number): void {
    this.#seeded = value;
    this.#base += value;
    this.#last = 0;
  }

  /** The first install kept the kernel's counter (ruleset.ts, mode `kept`): the seeded counts are its reading, not a base. */
  kept(): void {
    this.#base -= this.#seeded;
    this.#last = this.#seeded;
    this.#seeded = 0;
  }

  total(): number {
    return this.#base + this.#last;
  }
}

export interface FamilyCounts {
  readonly ipv4: number;
  readonly ipv6: number;
}

export interface TableCountsStatus {
  /** New flows the kernel's fallback spread sent to a server without a daemon's verdict (totals; include those counted before this start). */
  readonly fallbackFlows: FamilyCounts;
  /** Stray TCP packets from the LAN (no flow) dropped instead of forwarded un-NATed. */
  readonly strayReplies: FamilyCounts;
}

export class TableCounters {
  readonly #fallback = { ip: new RestartingTotal(), ip6: new RestartingTotal() };
  readonly #stray = { ip: new RestartingTotal(), ip6: new RestartingTotal() };

  /** A dump of our table of family `fam` (absent counters: the totals stay). */
  read(list: string, fam: 'ip' | 'ip6'): void {
    const f = counterPackets(list, FALLBACK);
    if (f !== undefined) this.#fallback[fam].update(f);
    const s = counterPackets(list, STRAY);
    if (s !== undefined) this.#stray[fam].update(s);
  }

  /** The counters the kernel held before our first install (start); returns them, for the log. */
  seed(list: string, fam: 'ip' | 'ip6'): { fallbackFlows: number; strayReplies: number } {
    const f = counterPackets(list, FALLBACK) ?? 0;
    const s = counterPackets(list, STRAY) ?? 0;
    this.#fallback[fam].seed(f);
    this.#stray[fam].seed(s);
    return { fallbackFlows: f, strayReplies: s };
  }

  /** The first install kept the table and its counters (both families' or neither's): undoes seed(). */
  kept(): void {
    for (const fam of ['ip', 'ip6'] as const) {
      this.#fallback[fam].kept();
      this.#stray[fam].kept();
    }
  }

  status(): TableCountsStatus {
    return {
      fallbackFlows: { ipv4: this.#fallback.ip.total(), ipv6: this.#fallback.ip6.total() },
      strayReplies: { ipv4: this.#stray.ip.total(), ipv6: this.#stray.ip6.total() },
    };
  }
}
