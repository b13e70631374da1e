/**
 * Reads every source once per interval, all in parallel, each bounded by its
 * timeout, and hands the results to SiteState. A round never overlaps the
 * previous one (a slow source delays the next round, it never stacks
 * requests), and no failure of a source escapes: it is recorded as that
 * source being down. After each round the view is added to the history
 * (history.ts: the last 10 minutes, drawn as charts).
 */
import { History } from './history.ts';
import { StatusTimeoutError, type StatusSource } from './source.ts';
import { SiteState, type DashboardState } from './state.ts';

export interface PollerOptions {
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** Monotonic clock in ms (tests pass their own). */
  readonly now?: () => number;
  /** Series the history keeps at most (default SERIES_MAX). */
  readonly maxSeries?: number;
}

export class Poller {
  readonly state: SiteState;
  readonly history: History;
  readonly #sources: readonly StatusSource[];
  readonly #opts: PollerOptions;
  readonly #now: () => number;
  readonly #listeners = new Set<(s: DashboardState) => void>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running = false;
  #latest: DashboardState;
  rounds = 0;

  constructor(sources: readonly StatusSource[], opts: PollerOptions) {
    this.#sources = sources;
    this.#opts = opts;
    this.#now = opts.now ?? (() => performance.now());
    this.state = new SiteState(sources);
    this.history = new History({ intervalMs: opts.intervalMs, ...(opts.maxSeries === undefined ? {} : { maxSeries: opts.maxSeries }) });
    this.#latest = this.state.view(this.#now());
  }

  get latest(): DashboardState {
    return this.#latest;
  }

  /** The poller's clock (monotonic ms), which the history's times are on. */
  now(): number {
    return this.#now();
  }

  /** Called with every new state; returns the unsubscribe function. */
  subscribe(fn: (s: DashboardState) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  get listeners(): number {
    return this.#listeners.size;
  }

  /** One round: every source read (or failed) and recorded. */
  async poll(): Promise<DashboardState> {
    await Promise.all(
      this.#sources.map(async (src) => {
        let result: { status: unknown } | { error: string };
        let timer: ReturnType<typeof setTimeout> | undefined;
        // The source bounds its own read; this bound also holds for one that does not.
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            reject(new StatusTimeoutError(`no status within ${this.#opts.timeoutMs} ms`));
          }, this.#opts.timeoutMs + 100);
        });
        try {
          result = { status: await Promise.race([src.read(this.#opts.timeoutMs), late]) };
        } catch (err) {
          result = { error: err instanceof Error ? err.message : String(err) };
        } finally {
          clearTimeout(timer);
        }
        this.state.record(src.name, this.#now(), result);
      }),
    );
    this.rounds++;
    const now = this.#now();
    this.#latest = this.state.view(now);
    this.history.record(now, this.#latest);
    for (const fn of this.#listeners) {
      try {
        fn(this.#latest);
      } catch {
        /* a listener's failure (a closed HTTP stream) is its own; the others still get the state */
      }
    }
    return this.#latest;
  }

  /** Polls now and then every interval until stop(). */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const loop = async (): Promise<void> => {
      const began = this.#now();
      await this.poll();
      if (!this.#running) return;
      const wait = Math.max(0, this.#opts.intervalMs - (this.#now() - began));
      this.#timer = setTimeout(() => void loop(), wait);
    };
    void loop();
  }

  stop(): void {
    this.#running = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
