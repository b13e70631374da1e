/**
 * Rules that heal: the front node's periodic check of its own rules.
 *
 * Someone else may flush them at any time (`iptables -t mangle -F`, a
 * firewall reload: Debian's stock /etc/nftables.conf begins with `flush
 * ruleset`), and steering then ends silently. Every `rules.checkSeconds`
 * this reads `iptables-save -t TABLE` for each table with chains of ours,
 * and `nft list table ip sluice` (our nft table, with its sets and maps),
 * and compares our part of each with the set read back right after the
 * last install (rules-check.ts); the fallback map, which fallback.ts
 * rewrites between installs, by its element count. A large nft table is
 * dumped only every so often (NFT_CHECK_SHARE: every nft command that
 * reads rules fetches every element first, seconds at 10^5 elements); the
 * checks between read its chains only (`nft list chains`, milliseconds),
 * which finds a deleted table or chain within a period, while a rule or an
 * element removed inside an intact chain waits for the next dump. On a difference it reinstalls the running
 * configuration's rules through the same install as start and reload
 * (atomic per table), logs the event once at warn with counts of what was
 * missing or changed, and counts it.
 *
 * Every check first reads the namespace's nf_tables ruleset generation
 * (one netlink exchange), which the kernel raises at every committed
 * transaction: nft's, ours, and iptables-nft's. While it stays where a
 * check that read every table and found them intact saw it, and no
 * install happened since, nothing can have changed, and the check reads
 * nothing (`unchanged`). Each read is a child process forked from the
 * daemon, and at the default 2 s period they were what moved the connect
 * latency the node adds at p99 most (scripts/bench/front.ts --only
 * latency); at 1,000 services each dump of our table is seconds of nft.
 * With iptables-legacy (its tables outside nf_tables) its tables are
 * still read every period.
 *
 * Invariants:
 *   - Off the packet path: the dump is a child process awaited
 *     asynchronously (killed after the check period, at least 1 s); only
 *     a repair is synchronous, as every install is.
 *   - Never overlaps itself: the next check is scheduled when the previous
 *     one has finished, and check() refuses to run while one is running.
 *   - No race with a reload or stop: install() (start, reload, repair) is
 *     synchronous and bumps a generation; a check whose dump was read
 *     under another generation, or that returns after stop(), is dropped
 *     without judging or repairing anything (the next period checks the
 *     new set). The comparison and the repair run in one turn of the event
 *     loop, so no install can fall between them.
 *   - Foreign rules are never touched: a repair replaces only our chains'
 *     contents and adds our missing jumps (iptables.ts), exactly as start.
 *   - The watchdog: after `rules.restartAfterFailures` failed repairs in a
 *     row, liveness() says not alive, the daemon withholds WATCHDOG=1, and
 *     systemd restarts it (whose start installs the rules again, or fails
 *     and says why). A successful check or repair clears the count.
 */
import type { Logger } from '../log/logger.ts';
import type { Liveness } from '../systemd/watchdog.ts';
import { NO_DAMAGE, addDamage, compareOwned, fallbackCountOf, isDamaged, partOf, readBack, tablesOf, type OwnedPart, type RulesDamage, type Table } from './rules-check.ts';
import type { RuleSet } from './ruleset.ts';

/** What the fallback writer last wrote (fallback.ts): the map's element count, and a generation bumped by each write. */
export interface FallbackState {
  /** In the ip table's map (IPv4 services). */
  readonly elements: number;
  /** In the ip6 table's map (IPv6 services; absent: 0). */
  readonly elements6?: number;
  readonly generation: number;
  /** A write is in flight: the map's contents are not judged. */
  readonly writing: boolean;
}

export interface RulesHealthDeps {
  readonly log: Logger;
  /** The running configuration's rules (rendered when a repair needs them). */
  readonly render: () => RuleSet;
  /** Installs `rules` (ruleset.ts installRuleset): synchronous, throws on failure. */
  /** Returns whether only the nft elements were replaced (installRuleset). */
  readonly apply: (rules: RuleSet, whole: boolean) => boolean;
  /** iptables-save of one table, or `nft list table` for `nft`, synchronously (the read-back after an install). */
  readonly save: (table: Table) => string;
  /** The same off the event loop, failing after `timeoutMs`. */
  readonly saveAsync: (table: Table, timeoutMs: number) => Promise<string>;
  /** The fallback map's expected contents (undefined: not checked). */
  readonly fallback?: () => FallbackState | undefined;
  /**
   * The chains our nft table declares, off the event loop (nft.ts
   * listChainsAsync: milliseconds at any size). Read at each check that
   * does not dump the table: a deleted table or chain (`nft flush ruleset`,
   * `nft delete table`) is found within one period even when the table is
   * dumped only every few minutes. Absent: only the dumps check it.
   */
  readonly nftChains?: (timeoutMs: number) => Promise<readonly string[]>;
  /**
   * The namespace's nf_tables ruleset generation (nft-netlink.ts
   * rulesetGenerationAsync: one netlink exchange off the event loop, no
   * child process), raised by every committed transaction: ours, nft's,
   * iptables-nft's. Undefined (or throwing, or rejecting): unknown, and the
   * check reads everything. Absent: never known.
   */
  readonly generation?: () => number | undefined | Promise<number | undefined>;
  /**
   * Whether the iptables tables live in nf_tables (iptables-nft: a change
   * to them raises the generation). False (iptables-legacy): they are read
   * every period whatever the generation says.
   */
  readonly generationCoversIptables?: boolean;
  /** After each completed check, read or skipped (the daemon refreshes the table's counters here). */
  readonly onChecked?: () => void;
  /** Monotonic clock in ms (tests inject one). */
  readonly now?: () => number;
  /** The check period (rules.checkSeconds, read at each scheduling: a reload changes it). */
  readonly periodMs: () => number;
  /** Failed repairs in a row after which liveness() says not alive (rules.restartAfterFailures). */
  readonly failuresBeforeDead: () => number;
}

export interface RulesHealthStatus {
  /** Completed checks (the rules were read and compared). */
  readonly checks: number;
  /** Checks that found our rules removed or changed and reinstalled them. */
  readonly repaired: number;
  /** Reinstalls that failed (iptables refused); retried every period. */
  readonly repairFailures: number;
  /** Checks that could not read the rules (iptables-save failed or timed out). */
  readonly checkFailures: number;
  /** Failed repairs since the last good check (the watchdog's count). */
  readonly failingRepairs: number;
  /** When the last repair happened (ISO 8601), or null. */
  readonly lastRepair: string | null;
  /** Checks that read nothing: no nf_tables commit since an intact check (counted in `checks` too). */
  readonly unchanged: number;
  /** How long the last dump of our nft table took (ms): it sets how often that table is checked (NFT_CHECK_SHARE). */
  readonly nftDumpMs: number;
  /** Installs that replaced the whole nft table (start, repair, a change of its chains). */
  readonly wholeInstalls: number;
  /** Installs that replaced only its sets' and maps' elements (reloads, ctl changes). */
  readonly elementUpdates: number;
}

/**
 * The largest share of the time the check spends dumping our nft table:
 * after a dump that took d ms, the next waits until d / NFT_CHECK_SHARE ms
 * have passed. A small table (milliseconds) is dumped every period; one of
 * 10^5..10^6 elements every few minutes, so its repair may take that long
 * (the iptables tables are still checked every period).
 */
export const NFT_CHECK_SHARE = 0.1;

/**
 * A dump's expected cost per set or map element (ms), before one was
 * measured: ~6-7 s for 356k elements here (nft 1.0.6). After an install,
 * the first dump (the read-back) waits as long as NFT_CHECK_SHARE asks of
 * a dump that long, so a large table's install is not followed at once by
 * seconds of nft and a 20 MB parse on the packet loop (measured: the ratio
 * of 1,000 VIPs to one fell to 0.71 with the dump during the benchmark).
 */
export const NFT_DUMP_MS_PER_ELEMENT = 0.02;

/**
 * `unchanged`: nothing was read, because no nf_tables transaction was
 * committed since a check read every table and found them intact (and no
 * install happened since): the rules are as that check saw them.
 */
export type CheckOutcome = 'intact' | 'unchanged' | 'repaired' | 'repair-failed' | 'check-failed' | 'superseded' | 'skipped';

export class RulesHealth {
  readonly #deps: RulesHealthDeps;
  /** The read-back of the last install, per table; undefined while the last install failed. */
  #expected: Map<Table, OwnedPart> | undefined;
  /**
   * The last install's rules while our nft table has not been read back
   * yet: its read-back is the next check's dump (asynchronous), because an
   * nft command takes seconds on a large table and an install must not
   * block the packet loop that long.
   */
  #nftPending: RuleSet | undefined;
  #generation = 0;
  #running = false;
  #stopped = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #failingRepairs = 0;
  #lastError = '';
  #checkFailing = false;
  #checks = 0;
  #repaired = 0;
  #repairFailures = 0;
  #checkFailures = 0;
  #lastRepair: string | null = null;
  /** Not before this time (ms, deps.now) is our nft table dumped again (see NFT_CHECK_SHARE). */
  #nftDueAt = 0;
  #nftDumpMs = 0;
  /** The chains the last install rendered in our nft table (the structural check between dumps). */
  #nftChainNames: readonly string[] = [];
  /**
   * The ruleset generation read at the start of the last check that read
   * every table (our nft table dumped, not only its chains) and found them
   * intact; undefined after an install or any other outcome. While the
   * generation stays there, nothing was committed since, so nothing of
   * ours can have changed: the check reads nothing.
   */
  #verifiedGeneration: number | undefined;
  #unchanged = 0;

  constructor(deps: RulesHealthDeps) {
    this.#deps = deps;
  }

  #now(): number {
    return this.#deps.now?.() ?? performance.now();
  }

  /**
   * Installs `rules` and reads them back as the expected set (start,
   * reload, repair). Throws what the install or the read-back throws; the
   * expected set is then unknown, and the next check reinstalls.
   */
  #wholeInstalls = 0;
  #elementUpdates = 0;

  install(rules: RuleSet, whole = false): void {
    this.#generation++;
    this.#verifiedGeneration = undefined;
    this.#expected = undefined;
    this.#nftPending = undefined;
    if (this.#deps.apply(rules, whole)) this.#elementUpdates++;
    else this.#wholeInstalls++;
    const expected = new Map<Table, OwnedPart>();
    for (const t of tablesOf(rules)) {
      if (t === 'nft') continue;
      expected.set(t, readBack(rules, t, this.#deps.save(t)));
    }
    this.#expected = expected;
    this.#nftPending = rules;
    this.#nftChainNames = Object.keys(rules.nft.chainSizes);
    let els = 0;
    for (const n of Object.values(rules.nft.elements)) els += n;
    const estimate = els * NFT_DUMP_MS_PER_ELEMENT;
    this.#nftDueAt = estimate > this.#deps.periodMs() ? this.#now() + estimate / NFT_CHECK_SHARE : 0;
  }

  /** Starts the periodic check (after the first install). */
  start(): void {
    this.#stopped = false;
    this.#schedule();
  }

  /** Stops checking; a check in flight is dropped when it returns. Idempotent. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.check()
        .catch((err: unknown) => {
          this.#deps.log.error({ err: err instanceof Error ? err.message : err }, 'rule check failed unexpectedly');
        })
        .finally(() => {
          this.#schedule();
        });
    }, this.#deps.periodMs());
    // The check must not keep a stopping daemon alive.
    this.#timer.unref();
  }

  /** One check, and a repair if needed (exposed for tests; the timer calls it). */
  async check(): Promise<CheckOutcome> {
    if (this.#running || this.#stopped) return 'skipped';
    this.#running = true;
    try {
      return await this.#check();
    } finally {
      this.#running = false;
    }
  }

  /** The ruleset generation now, or undefined when unknown (no dep, or the read failed). */
  async #rulesetGeneration(): Promise<number | undefined> {
    try {
      return await this.#deps.generation?.();
    } catch {
      return undefined;
    }
  }

  /** An install (or stop) since a check that began at install generation `generation` (a method: the checks below re-read the fields after each await). */
  #supersedes(generation: number): boolean {
    return generation !== this.#generation || this.#stopped;
  }

  async #check(): Promise<CheckOutcome> {
    const outcome = await this.#checkOnce();
    if (outcome !== 'superseded' && outcome !== 'check-failed' && outcome !== 'skipped') this.#deps.onChecked?.();
    return outcome;
  }

  async #checkOnce(): Promise<CheckOutcome> {
    const generation = this.#generation;
    const expected = this.#expected;
    // The last install failed (a reload's, or a repair's): nothing to compare with; install again.
    if (expected === undefined) return this.#repair(NO_DAMAGE, []);
    // Read before any table: a commit during the reads below leaves the
    // kernel past this value, so the next check reads again.
    const rulesetGen = await this.#rulesetGeneration();
    // An install or stop while the kernel answered: this check is not the one that counts.
    if (this.#supersedes(generation)) return 'superseded';
    const unchanged = rulesetGen !== undefined && rulesetGen === this.#verifiedGeneration && this.#nftPending === undefined;
    if (unchanged && this.#deps.generationCoversIptables === true) {
      this.#checks++;
      this.#unchanged++;
      this.#failingRepairs = 0;
      return 'unchanged';
    }
    let everyTableRead = true;
    const timeoutMs = Math.max(1000, this.#deps.periodMs());
    const fbBefore = this.#deps.fallback?.();
    const actual = new Map<Table, string>();
    /** Our nft table's chains, read when the table is not dumped this time. */
    let chains: readonly string[] | undefined;
    try {
      // One table after the other: one child process at a time. Our nft
      // table only when due: every nft command loads the whole table's
      // elements first, which takes seconds for a large one (measured:
      // ~8 s for 1,000 services x 256 servers, ~16 s for a full listing),
      // so the dump's share of the time is kept below NFT_CHECK_SHARE.
      const nftPending = this.#nftPending;
      for (const t of [...(nftPending !== undefined || expected.has('nft') ? (['nft'] as const) : []), ...[...expected.keys()].filter((x) => x !== 'nft')]) {
        // Unchanged since an intact check, with iptables outside nf_tables
        // (legacy): only their tables are read.
        if (unchanged && (t === 'nft' || t === 'nft6')) continue;
        if (t === 'nft') {
          if (this.#now() < this.#nftDueAt) {
            everyTableRead = false;
            if (this.#deps.nftChains !== undefined) chains = await this.#deps.nftChains(timeoutMs);
            continue;
          }
          const t0 = this.#now();
          actual.set(t, await this.#deps.saveAsync(t, Math.max(timeoutMs, 60_000)));
          const t1 = this.#now();
          this.#nftDumpMs = t1 - t0;
          // A dump that costs less than the share of a period is simply done every period.
          this.#nftDueAt = this.#nftDumpMs / NFT_CHECK_SHARE > this.#deps.periodMs() ? t0 + this.#nftDumpMs / NFT_CHECK_SHARE : 0;
          continue;
        }
        actual.set(t, await this.#deps.saveAsync(t, timeoutMs));
      }
    } catch (err) {
      if (generation !== this.#generation || this.#stopped) return 'superseded';
      this.#checkFailures++;
      if (!this.#checkFailing) {
        this.#checkFailing = true;
        this.#deps.log.warn({ err: err instanceof Error ? err.message : err }, 'rule check: cannot read the rules (retried every period; logged once until it works again)');
      }
      return 'check-failed';
    }
    if (generation !== this.#generation || this.#stopped) return 'superseded';
    this.#checks++;
    if (this.#checkFailing) {
      this.#checkFailing = false;
      this.#deps.log.info('rule check: the rules can be read again');
    }
    const nftDump = actual.get('nft');
    let damage = NO_DAMAGE;
    const tables: Table[] = [];
    const pending = this.#nftPending;
    if (pending !== undefined && nftDump !== undefined) {
      // The install's read-back of our nft table: adopted if it has the
      // rendering's shape (its chains, its sets and maps as full as
      // rendered), else reinstalled.
      try {
        expected.set('nft', readBack(pending, 'nft', nftDump));
        this.#nftPending = undefined;
      } catch {
        damage = addDamage(damage, { ...NO_DAMAGE, missingChains: nftDump === '' ? 1 : 0, missingRules: 1 });
        tables.push('nft');
      }
    }
    if (chains !== undefined) {
      // Between dumps: every chain the install rendered still declared.
      const have = new Set(chains);
      const missing = this.#nftChainNames.filter((c) => !have.has(c)).length;
      if (missing > 0) {
        damage = addDamage(damage, { ...NO_DAMAGE, missingChains: missing });
        tables.push('nft');
      }
    }
    for (const [t, want] of expected) {
      const dump = actual.get(t);
      if (dump === undefined) continue; // not dumped this time (our nft table, not due)
      let d = compareOwned(want, partOf(t, dump));
      // The fallback map's elements, by count, unless a write ran during the dump.
      const fbAfter = this.#deps.fallback?.();
      if ((t === 'nft' || t === 'nft6') && fbBefore !== undefined && fbAfter !== undefined && !fbBefore.writing && !fbAfter.writing && fbBefore.generation === fbAfter.generation) {
        const missing = (t === 'nft' ? fbAfter.elements : (fbAfter.elements6 ?? 0)) - fallbackCountOf(dump);
        if (missing !== 0) d = addDamage(d, { ...NO_DAMAGE, missingRules: Math.max(0, missing), unexpectedRules: Math.max(0, -missing) });
      }
      if (isDamaged(d)) tables.push(t);
      damage = addDamage(damage, d);
    }
    if (!isDamaged(damage)) {
      this.#failingRepairs = 0;
      if (unchanged) return 'unchanged';
      if (everyTableRead && this.#nftPending === undefined) this.#verifiedGeneration = rulesetGen;
      return 'intact';
    }
    this.#verifiedGeneration = undefined;
    return this.#repair(damage, tables);
  }

  /** Reinstalls the running rules; synchronous, in the same turn as the comparison. */
  #repair(damage: RulesDamage, tables: readonly Table[]): CheckOutcome {
    try {
      // Whole: an element update over a damaged table would leave the damage.
      this.install(this.#deps.render(), true);
    } catch (err) {
      this.#repairFailures++;
      this.#failingRepairs++;
      this.#lastError = err instanceof Error ? err.message : String(err);
      if (this.#failingRepairs === 1) {
        this.#deps.log.error({ tables, ...damage, err: this.#lastError }, 'rules removed or changed and could not be reinstalled (retried every period; logged once until it works)');
      }
      return 'repair-failed';
    }
    this.#repaired++;
    this.#lastRepair = new Date().toISOString();
    this.#deps.log.warn({ tables, ...damage, ...(this.#failingRepairs > 0 ? { failedAttempts: this.#failingRepairs } : {}) }, 'rules were removed or changed by someone else: reinstalled');
    this.#failingRepairs = 0;
    return 'repaired';
  }

  /** For the watchdog: not alive after rules.restartAfterFailures failed repairs in a row. */
  liveness(): Liveness {
    const n = this.#failingRepairs;
    if (n >= this.#deps.failuresBeforeDead()) return { alive: false, reason: `rules could not be reinstalled ${String(n)} checks in a row: ${this.#lastError}` };
    return { alive: true };
  }

  status(): RulesHealthStatus {
    return {
      checks: this.#checks,
      repaired: this.#repaired,
      repairFailures: this.#repairFailures,
      checkFailures: this.#checkFailures,
      failingRepairs: this.#failingRepairs,
      lastRepair: this.#lastRepair,
      unchanged: this.#unchanged,
      nftDumpMs: Math.round(this.#nftDumpMs),
      wholeInstalls: this.#wholeInstalls,
      elementUpdates: this.#elementUpdates,
    };
  }
}
