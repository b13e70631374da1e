/**
 * Per-target choice of the probe method that gets an answer: ICMP echo
 * where the target answers it, else a TCP SYN to a service port (443, then
 * 53, or as configured). Many resolvers and client networks drop ICMP;
 * probing them by ICMP alone leaves their prefixes without an RTT.
 *
 * A MethodPinger is itself a Pinger (icmp_echo.ts) over an ordered list of
 * methods, cheapest first (the configured order: `probe.methods`). One
 * ping() of a target runs its methods one after another until one answers:
 *
 *   - a target not seen before starts at the first method;
 *   - a target whose last answer came by method m starts at m, and goes on
 *     to the methods after m, then to those before it, when m fails;
 *   - a target remembered at a method other than the first is tried from
 *     the first method again once `retryCheaperMs` have passed since it was
 *     last so tried (the filter that dropped ICMP may have gone); the
 *     retry is a whole run from the first method, so it costs at most the
 *     cheaper methods' timeouts once per retry period.
 *
 * The method that answered is remembered per target in a bounded LRU
 * (`memory` entries, least recently used evicted): targets stand for client
 * prefixes (the DNS server names one address per prefix), so this is a
 * per-prefix choice. A target that answered nothing keeps its entry (if
 * any): its earlier method may answer again.
 *
 * One ping() may take up to `methods.length` timeouts: worstCaseMs says how
 * long, and the prober's own deadline must be at least that (control.ts).
 *
 * Counters per method (sent, answered, timeouts) and how targets are spread
 * over methods feed status and metrics. Pure logic on an injected clock.
 */
import { InvalidArgumentError } from '../errors/errors.ts';
import type { Pinger } from './icmp_echo.ts';

export interface ProbeMethod {
  /** Its name in config, status and metrics: 'icmp' or 'tcp:<port>'. */
  readonly name: string;
  readonly pinger: Pinger;
}

export interface MethodCounters {
  sent: number;
  answered: number;
  /** No answer: timed out, refused or failed. */
  timeouts: number;
}

export interface MethodPingerOptions {
  /** Targets whose method is remembered, at most. */
  readonly memory: number;
  /** A target remembered at a costlier method is tried from the first method again this often (ms). */
  readonly retryCheaperMs: number;
  /** One method's timeout (ms): worstCaseMs is this times the number of methods. */
  readonly timeoutMs: number;
}

interface Memory {
  /** Index of the method that last answered. */
  method: number;
  /** When the target last answered (ms). */
  at: number;
  /** When a run from the first method last started for it (ms). */
  cheaperTriedAt: number;
}

export class MethodPinger implements Pinger {
  readonly counters: ReadonlyMap<string, MethodCounters>;
  /** Pings answered by a method other than the one they started with. */
  fellBack = 0;
  /** Runs from the first method for a target remembered at a costlier one. */
  cheaperRetries = 0;
  /** Memory entries evicted (memory full). */
  evicted = 0;
  readonly #methods: readonly ProbeMethod[];
  readonly #counters: MethodCounters[];
  readonly #memory = new Map<string, Memory>();
  readonly #opts: MethodPingerOptions;
  readonly #clock: () => number;
  #closed = false;

  constructor(methods: readonly ProbeMethod[], opts: MethodPingerOptions, clock: () => number = () => performance.now()) {
    if (methods.length === 0) throw new InvalidArgumentError('MethodPinger needs at least one method');
    this.#methods = methods;
    this.#opts = opts;
    this.#clock = clock;
    this.#counters = methods.map(() => ({ sent: 0, answered: 0, timeouts: 0 }));
    this.counters = new Map(methods.map((m, i) => [m.name, this.#counters[i] ?? { sent: 0, answered: 0, timeouts: 0 }]));
  }

  get methodList(): readonly ProbeMethod[] {
    return this.#methods;
  }

  /** The longest a ping() takes before done: every method timing out in turn. */
  get worstCaseMs(): number {
    return this.#opts.timeoutMs * this.#methods.length;
  }

  /** IPv6 is off only if no method can probe it. */
  get ipv6Unavailable(): string | undefined {
    const why = this.#methods.map((m) => m.pinger.ipv6Unavailable);
    return why.every((w) => w !== undefined) ? why.join('; ') : undefined;
  }

  /** The method order one ping of `target` uses now (and notes a cheaper retry when it starts one). */
  order(target: string, now: number): number[] {
    const n = this.#methods.length;
    const m = this.#memory.get(target);
    let start = 0;
    if (m !== undefined) {
      start = m.method;
      if (start > 0 && now - m.cheaperTriedAt >= this.#opts.retryCheaperMs) {
        m.cheaperTriedAt = now;
        this.cheaperRetries++;
        start = 0;
      }
    }
    const out: number[] = [];
    for (let i = start; i < n; i++) out.push(i);
    for (let i = 0; i < start; i++) out.push(i);
    return out;
  }

  ping(target: string, done: (rttMs: number | null) => void): void {
    if (this.#closed) {
      done(null);
      return;
    }
    const order = this.order(target, this.#clock());
    const first = order[0] ?? 0;
    const step = (k: number): void => {
      const i = order[k];
      if (i === undefined || this.#closed) {
        done(null);
        return;
      }
      const c = this.#counters[i];
      const method = this.#methods[i];
      if (!c || !method) {
        done(null);
        return;
      }
      c.sent++;
      let called = false;
      method.pinger.ping(target, (rtt) => {
        if (called) return;
        called = true;
        if (rtt === null) {
          c.timeouts++;
          step(k + 1);
          return;
        }
        c.answered++;
        if (i !== first) this.fellBack++;
        this.#remember(target, i);
        done(rtt);
      });
    };
    step(0);
  }

  #remember(target: string, method: number): void {
    const now = this.#clock();
    const m = this.#memory.get(target);
    if (m !== undefined) {
      this.#memory.delete(target);
      // Learning a costlier method starts its retry period now; a cheaper one needs none.
      if (method > m.method) m.cheaperTriedAt = now;
      m.method = method;
      m.at = now;
      this.#memory.set(target, m);
      return;
    }
    if (this.#memory.size >= this.#opts.memory) {
      const oldest = this.#memory.keys().next();
      if (oldest.done !== true) {
        this.#memory.delete(oldest.value);
        this.evicted++;
      }
    }
    this.#memory.set(target, { method, at: now, cheaperTriedAt: now });
  }

  /** The method remembered for a target (undefined: none answered yet, or forgotten). */
  methodOf(target: string): string | undefined {
    const m = this.#memory.get(target);
    return m === undefined ? undefined : this.#methods[m.method]?.name;
  }

  /** Remembered targets per method (status; a scan of at most `memory` entries). */
  remembered(): Record<string, number> {
    const out: Record<string, number> = Object.fromEntries(this.#methods.map((m) => [m.name, 0]));
    for (const m of this.#memory.values()) {
      const name = this.#methods[m.method]?.name;
      if (name !== undefined) out[name] = (out[name] ?? 0) + 1;
    }
    return out;
  }

  /** The most recently answered targets and their methods, newest first. */
  recent(limit: number, now: number): { target: string; method: string; ageSeconds: number }[] {
    const out: { target: string; method: string; ageSeconds: number }[] = [];
    const all = [...this.#memory];
    for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
      const e = all[i];
      if (!e) continue;
      out.push({ target: e[0], method: this.#methods[e[1].method]?.name ?? '?', ageSeconds: Math.round((now - e[1].at) / 100) / 10 });
    }
    return out;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const m of this.#methods) m.pinger.close();
    this.#memory.clear();
  }
}
