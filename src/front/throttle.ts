/**
 * The front node's gatekeeper (distributed throttling, issue 8): the
 * `throttle:` section says how to reach the masters; the domains are those
 * of the `gatekeeper` checkpoints (src/shaping/shaper.ts). This owns the
 * running Gatekeeper, starts it at start, and replaces it when a reload
 * changes either; the checkpoints are attached to it (Shaper.attachGatekeeper).
 *
 * Invariant: at most one Gatekeeper runs. A replacement is started before
 * the old one stops (the checkpoints keep deciding with the old one's
 * delays meanwhile), takes over its counts, and is dropped if a later
 * reload superseded it while it started.
 */
import { deepFreeze } from '../config/load.ts';
import type { Logger } from '../log/logger.ts';
import type { Shaper } from '../shaping/shaper.ts';
import type { GatekeeperConfig } from '../throttle/config.ts';
import { Gatekeeper } from '../throttle/gatekeeper.ts';
import type { FrontConfig } from './config.ts';

/** The gatekeeper configuration for a front config and its checkpoints; undefined when nothing is throttled. */
export function gatekeeperConfigOf(cfg: Readonly<FrontConfig>, shaper: Shaper | undefined): GatekeeperConfig | undefined {
  const domains = shaper?.gatekeeperDomains() ?? [];
  if (cfg.throttle === undefined || domains.length === 0) return undefined;
  return deepFreeze({
    ...cfg.throttle,
    // maxDelaySeconds is the gatekeeper's own view; each checkpoint applies its queue.maxDelayMs.
    domains: domains.map((d) => ({ name: d.name, prefixLength: d.prefixLength, prefixLength6: d.prefixLength6, maxDelaySeconds: Math.max(1, d.maxDelayMs) / 1000 })),
  });
}

export class FrontThrottle {
  readonly #log: Logger;
  #gk: Gatekeeper | undefined;
  #key = 'null';
  #generation = 0;
  #stopped = false;

  constructor(log: Logger) {
    this.#log = log;
  }

  get gatekeeper(): Gatekeeper | undefined {
    return this.#gk;
  }

  /**
   * Makes the gatekeeper match `cfg` (start, keep, replace or stop) and
   * attaches the current checkpoints to it. Rejects when the new gatekeeper
   * cannot start (a key file unreadable): the running one stays.
   */
  async apply(cfg: Readonly<FrontConfig>, shaper: () => Shaper | undefined): Promise<void> {
    const gcfg = gatekeeperConfigOf(cfg, shaper());
    const key = JSON.stringify(gcfg ?? null);
    const generation = ++this.#generation;
    if (key !== this.#key) {
      const next = gcfg === undefined ? undefined : await Gatekeeper.start(gcfg, this.#log);
      if (generation !== this.#generation || this.#stopped) {
        next?.stop();
        return;
      }
      if (next && this.#gk) next.inheritCounts(this.#gk);
      this.#gk?.stop();
      this.#gk = next;
      this.#key = key;
      if (next) this.#log.info({ domains: next.domains.map((d) => d.name), masters: next.config.masters.map((m) => m.accounting) }, 'gatekeeper started');
    }
    this.attach(shaper());
  }

  /** Attaches `shaper`'s gatekeeper checkpoints to the running gatekeeper (a rebuilt shaper, at once). */
  attach(shaper: Shaper | undefined): void {
    const missing = shaper?.attachGatekeeper(this.#gk) ?? [];
    if (missing.length > 0) this.#log.warn({ domains: missing }, 'gatekeeper checkpoints whose domain the running gatekeeper does not have pass everything until it is replaced');
  }

  stop(): void {
    this.#stopped = true;
    this.#gk?.stop();
    this.#gk = undefined;
  }
}
