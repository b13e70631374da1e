/**
 * The daemon-down fallback's contents: which servers the kernel spreads new
 * connections over when the daemon is not there to decide (nft.ts, map
 * `fallback`: FALLBACK_SLOTS slots per service, each a usable server).
 *
 * FallbackWriter.update(services) is the one hook for "the set of usable
 * servers may have changed": an admin drain or disable (through the reload),
 * an agent falling silent (down), a health check's verdict. It compares the
 * usable flags with the last ones asked for and, on a change, rewrites the
 * map's elements (one `nft -f` transaction: flush the map, add the
 * elements; never a rule change). Writes are coalesced: at most one per
 * `minIntervalMs` (100 ms), always of the latest state, one at a time.
 *
 * Invariants:
 *   - update() is cheap when nothing changed (a flag comparison, no
 *     allocation), so callers may call it on every tick;
 *   - the latest state asked for is always written eventually: a change
 *     during a write, or within minIntervalMs of one, is written when that
 *     ends;
 *   - after a full install (start, reload, repair: installed()), the map
 *     holds spread() as rendered; a write in flight then is followed by
 *     another with the latest state, so an older write never has the last
 *     word.
 */
import type { Logger } from '../log/logger.ts';
import { formatIPv4Address } from '../packet/address.ts';
import type { FrontConfig } from './config.ts';
import { FALLBACK_SLOTS, fallbackUpdateScript, hasFallback, type FallbackSpread } from './nft.ts';
import type { FallbackState } from './rules-health.ts';
import type { ServiceRuntime } from './service.ts';

export interface FallbackWriterDeps {
  readonly log: Logger;
  /** The running configuration (VIPs, ports, failMode). */
  readonly config: () => Readonly<FrontConfig>;
  /** Loads an `nft -f` script off the event loop (nft.ts nftLoadAsync). */
  readonly write: (script: string) => Promise<void>;
  /** At most one write per this many ms (default 100). */
  readonly minIntervalMs?: number;
  /** Monotonic clock in ms (tests inject one). */
  readonly now?: () => number;
}

export interface FallbackWriterStatus {
  /** Writes of the map's elements that succeeded / failed. */
  readonly writes: number;
  readonly writeFailures: number;
  /** Usable servers per service in the latest state asked for, summed. */
  readonly usableServers: number;
  /** Elements the map should hold (services with a usable server x FALLBACK_SLOTS). */
  readonly elements: number;
}

export class FallbackWriter {
  readonly #deps: FallbackWriterDeps;
  readonly #minIntervalMs: number;
  readonly #now: () => number;
  /** Usable flags per service and server, as last asked for. */
  #flags: Uint8Array[] = [];
  #spread: FallbackSpread = [];
  /** Bumped when the state asked for changes, and by each write. */
  #generation = 0;
  /** The state asked for differs from what the map holds (a write is due). */
  #dirty = false;
  #writing = false;
  #lastWriteAt = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #writes = 0;
  #writeFailures = 0;
  #failing = false;

  constructor(deps: FallbackWriterDeps) {
    this.#deps = deps;
    this.#minIntervalMs = deps.minIntervalMs ?? 100;
    this.#now = deps.now ?? (() => performance.now());
  }

  /** The latest usable servers asked for, per service (what a full install renders). */
  spread(): FallbackSpread {
    return this.#spread;
  }

  /**
   * The hook: the usable servers of `services` may have changed. Writes the
   * map's elements (coalesced) if they did.
   */
  update(services: readonly ServiceRuntime[]): void {
    if (!this.#changed(services)) return;
    this.#flags = services.map((s) => Uint8Array.from(s.servers, (b) => (b.usable ? 1 : 0)));
    this.#spread = spreadOf(services);
    this.#generation++;
    this.#dirty = true;
    this.#kick();
  }

  /**
   * A full install (start, reload, repair) just rendered spread() into the
   * table, from `services` (whose flags it records). A write in flight is
   * followed by another.
   */
  installed(services: readonly ServiceRuntime[]): void {
    this.#flags = services.map((s) => Uint8Array.from(s.servers, (b) => (b.usable ? 1 : 0)));
    this.#spread = spreadOf(services);
    this.#generation++;
    this.#dirty = this.#writing;
  }

  /** For the rule check: what the map should hold now. */
  state(): FallbackState {
    const cfg = this.#deps.config();
    const withServers = hasFallback(cfg) ? this.#spread.filter((u) => u.length > 0).length : 0;
    return { elements: withServers * FALLBACK_SLOTS, generation: this.#generation, writing: this.#writing || this.#dirty };
  }

  status(): FallbackWriterStatus {
    return { writes: this.#writes, writeFailures: this.#writeFailures, usableServers: this.#spread.reduce((n, u) => n + u.length, 0), elements: this.state().elements };
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #changed(services: readonly ServiceRuntime[]): boolean {
    const flags = this.#flags;
    if (flags.length !== services.length) return true;
    for (let s = 0; s < services.length; s++) {
      const f = flags[s];
      const servers = services[s]?.servers ?? [];
      if (f === undefined || f.length !== servers.length) return true;
      for (let i = 0; i < servers.length; i++) if ((f[i] === 1) !== (servers[i]?.usable === true)) return true;
    }
    return false;
  }

  #kick(): void {
    if (this.#stopped || this.#writing || this.#timer !== undefined || !this.#dirty) return;
    const wait = this.#lastWriteAt + this.#minIntervalMs - this.#now();
    if (wait > 0) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#kick();
      }, wait);
      this.#timer.unref();
      return;
    }
    void this.#write();
  }

  async #write(): Promise<void> {
    const cfg = this.#deps.config();
    this.#dirty = false;
    if (!hasFallback(cfg)) return;
    this.#writing = true;
    this.#lastWriteAt = this.#now();
    const spread = this.#spread;
    try {
      await this.#deps.write(fallbackUpdateScript(cfg, spread));
      this.#writes++;
      if (this.#failing) this.#deps.log.info('fallback map written again');
      this.#failing = false;
      this.#deps.log.debug({ usableServers: spread.reduce((n, u) => n + u.length, 0) }, 'fallback map rewritten');
    } catch (err) {
      this.#writeFailures++;
      // Written again at the next change, and a repair of the table (rules-health.ts) renders the latest state in full.
      if (!this.#failing) this.#deps.log.warn({ err: err instanceof Error ? err.message : err }, 'fallback map could not be written (logged once until a write works)');
      this.#failing = true;
    } finally {
      this.#writing = false;
      this.#generation++;
    }
    this.#kick();
  }
}

/** The usable servers of each service, as the fallback map's values. */
export function spreadOf(services: readonly ServiceRuntime[]): FallbackSpread {
  return services.map((s) => s.servers.filter((b) => b.usable).map((b) => [formatIPv4Address(b.address), b.port] as const));
}
