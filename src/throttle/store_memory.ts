/**
 * GCRA state in the master's memory: one Map per domain, identifier -> TAT
 * (identifier text of either family: IPv4 has no ':', IPv6 always has).
 * Bounded: at most `maxIdentifiers` per domain. When a domain is full the
 * passed states are swept first; if it is still full the oldest-inserted
 * identifier is dropped (counted in `evicted`): it loses its delay, which
 * fails open, the safe way for a throttle.
 */
import { charge, type GcraRule } from './gcra.ts';
import type { ThrottleStore } from './store.ts';

export class MemoryStore implements ThrottleStore {
  readonly kind = 'memory';
  readonly #domains = new Map<string, Map<string, number>>();
  readonly #max: number;
  evicted = 0;

  constructor(maxIdentifiers: number) {
    this.#max = maxIdentifiers;
  }

  #table(domain: string): Map<string, number> {
    let t = this.#domains.get(domain);
    if (t === undefined) {
      t = new Map();
      this.#domains.set(domain, t);
    }
    return t;
  }

  charge(domain: string, identifier: string, at: number, rule: GcraRule): number {
    const t = this.#table(domain);
    const prev = t.get(identifier);
    const tat = charge(rule, prev, at);
    if (prev === undefined && t.size >= this.#max) {
      sweepTable(t, at);
      if (t.size >= this.#max) {
        const oldest = t.keys().next();
        if (oldest.done !== true) t.delete(oldest.value);
        this.evicted++;
      }
    }
    t.set(identifier, tat);
    return tat;
  }

  scan(domain: string, now: number, visit: (identifier: string, tat: number) => void): Promise<number> {
    let n = 0;
    for (const [id, tat] of this.#domains.get(domain) ?? []) {
      if (tat > now) {
        visit(id, tat);
        n++;
      }
    }
    return Promise.resolve(n);
  }

  tracked(domain: string): number {
    return this.#domains.get(domain)?.size ?? 0;
  }

  sweep(now: number): void {
    for (const t of this.#domains.values()) sweepTable(t, now);
  }

  close(): Promise<void> {
    this.#domains.clear();
    return Promise.resolve();
  }
}

function sweepTable(t: Map<string, number>, now: number): void {
  for (const [id, tat] of t) if (tat <= now) t.delete(id);
}
