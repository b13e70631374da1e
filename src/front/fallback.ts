/**
 * The daemon-down fallback's contents: which servers the kernel spreads new
 * connections over when the daemon is not there to decide (nft.ts, map
 * `fallback`: FALLBACK_SLOTS slots per service, each a usable server).
 *
 * FallbackWriter.update(services) is the one hook for "the set of usable
 * servers may have changed": an admin drain or disable (through the reload),
 * an agent falling silent (down), a health check's verdict. It compares the
 * usable flags with the last ones asked for and, on a change, writes the
 * map's elements that changed against what it last wrote (one `nft -f`
 * transaction of deletes and adds; never a rule change): with 1,000
 * services x 256 slots a full rewrite is 256k elements and seconds of nft.
 * When what the map holds is unknown (the first write, a failed write, a
 * write that raced with a whole-table install), the map is flushed and
 * refilled in the transaction instead. Writes are coalesced: at most one
 * per `minIntervalMs` (100 ms), always of the latest state, one at a time.
 *
 * Installs: one that replaces the whole table fills the map only when it
 * is small (nft.ts FALLBACK_INLINE_MAX; else it declares it empty, and
 * afterInstall() has this writer fill it right after, in the background);
 * one that only updates elements leaves the map alone. Either way
 * afterInstall() then writes what differs from the running spread.
 *
 * Invariants:
 *   - update() is cheap when nothing changed (a flag comparison, no
 *     allocation), so callers may call it on every tick;
 *   - the latest state asked for is always written eventually: a change
 *     during a write, or within minIntervalMs of one, is written when that
 *     ends; a failed write is retried (flush and refill) after retryMs,
 *     doubling up to MAX_RETRY_MS while it keeps failing (a deferred fill
 *     that timed out on a loaded machine must not leave the map empty
 *     until the next change);
 *   - after an install (start, reload, repair: installed(), then
 *     afterInstall()), the map is brought to spread() by the next write; a
 *     write in flight then is followed by another with the latest state,
 *     so an older write never has the last word, and what it wrote is
 *     taken as unknown (the next write flushes and refills).
 */
import type { Logger } from '../log/logger.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { formatIPv6Address } from '../packet/address6.ts';
import type { FrontConfig } from './config.ts';
import { FALLBACK_SLOTS, fallbackDiffScript, hasFallback, tableOf, type FallbackHeld, type FallbackSpread } from './nft.ts';
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
  /** A failed write is retried after this many ms (default 2000), doubling up to MAX_RETRY_MS. */
  readonly retryMs?: number;
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
  /** A write is due or in flight (after a start with a large table: the map's deferred fill). */
  readonly pending?: boolean;
}

/** The longest wait before retrying a failed write. */
export const MAX_RETRY_MS = 30_000;

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
  /** What the map holds per service as last written, or undefined: unknown (flush and refill next). */
  #held: FallbackHeld | undefined;
  /** The next write fills the map a whole install declared empty (logged at info, with its duration). */
  #filling = false;
  /** Bumped by each whole-table install: a write that started before it does not know what the map holds. */
  #tableEpoch = 0;
  #lastWriteAt = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #writes = 0;
  #writeFailures = 0;
  #failing = false;
  /** The wait before the next retry while writes fail. */
  #retryMs: number;

  constructor(deps: FallbackWriterDeps) {
    this.#deps = deps;
    this.#minIntervalMs = deps.minIntervalMs ?? 100;
    this.#retryMs = deps.retryMs ?? 2000;
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

  /**
   * The install after installed() is done: `whole`, it replaced the table,
   * whose map now holds `rendered` (RenderedNft fallbackHeld: nothing
   * when deferred); else the map kept what it held. The next write (after
   * this turn of the event loop: the caller may still be switching to the
   * new configuration) brings the map to spread(); it writes nothing when
   * the map already holds it.
   */
  afterInstall(whole: boolean, rendered: FallbackHeld): void {
    if (whole) {
      this.#tableEpoch++;
      this.#held = rendered;
      this.#filling = rendered.size === 0;
    }
    this.#dirty = true;
    this.#generation++;
    setImmediate(() => {
      this.#kick();
    }).unref();
  }

  /** For the rule check: what the map should hold now. */
  state(): FallbackState {
    const cfg = this.#deps.config();
    // Per table: a service's spread is in its family's map (nft.ts tableOf).
    let v4 = 0;
    let v6 = 0;
    if (hasFallback(cfg)) {
      this.#spread.forEach((u, si) => {
        if (u.length === 0) return;
        const svc = cfg.services[si];
        if (svc !== undefined && tableOf(svc) === 'ip6') v6++;
        else v4++;
      });
    }
    return { elements: v4 * FALLBACK_SLOTS, elements6: v6 * FALLBACK_SLOTS, generation: this.#generation, writing: this.#writing || this.#dirty };
  }

  status(): FallbackWriterStatus {
    const st = this.state();
    return { writes: this.#writes, writeFailures: this.#writeFailures, usableServers: this.#spread.reduce((n, u) => n + u.length, 0), elements: st.elements + (st.elements6 ?? 0), pending: this.#writing || this.#dirty };
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
    const wait = this.#lastWriteAt + (this.#failing ? this.#retryMs : this.#minIntervalMs) - this.#now();
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
    const spread = this.#spread;
    const epoch = this.#tableEpoch;
    const { script, held } = fallbackDiffScript(cfg, spread, this.#held);
    const filling = this.#filling;
    this.#filling = false;
    // Nothing changed (an install that rendered the same spread): no command.
    if (script === '') return;
    this.#writing = true;
    this.#lastWriteAt = this.#now();
    try {
      await this.#deps.write(script);
      // A whole-table install during the write: the map holds the install's elements or ours, unknown which.
      this.#held = epoch === this.#tableEpoch ? held : undefined;
      this.#writes++;
      if (filling) this.#deps.log.info({ elements: this.state().elements, ms: Math.round(this.#now() - this.#lastWriteAt) }, 'fallback map filled (the table was installed without its elements)');
      if (this.#failing) this.#deps.log.info('fallback map written again');
      this.#failing = false;
      this.#retryMs = this.#deps.retryMs ?? 2000;
      this.#deps.log.debug({ usableServers: spread.reduce((n, u) => n + u.length, 0) }, 'fallback map rewritten');
    } catch (err) {
      this.#held = undefined;
      this.#writeFailures++;
      // Written again at the next change, and a repair of the table (rules-health.ts) renders the latest state in full.
      if (!this.#failing) this.#deps.log.warn({ err: err instanceof Error ? err.message : err }, 'fallback map could not be written (retried; logged once until a write works)');
      else this.#retryMs = Math.min(MAX_RETRY_MS, this.#retryMs * 2);
      this.#failing = true;
      // Retried (flush and refill: what the map holds is unknown now), after retryMs.
      this.#dirty = true;
      this.#filling ||= filling;
    } finally {
      this.#writing = false;
      this.#generation++;
    }
    this.#kick();
  }
}

/** The usable servers of each service, as the fallback map's values. */
export function spreadOf(services: readonly ServiceRuntime[]): FallbackSpread {
  // An IPv6 service's servers in RFC 5952 text: the form nft prints, and the config's (config.ts canonicalIPv6).
  return services.map((s) => s.servers.filter((b) => b.usable).map((b) => [s.family === 6 ? formatIPv6Address(b.address6) : formatIPv4Address(b.address), b.port] as const));
}
