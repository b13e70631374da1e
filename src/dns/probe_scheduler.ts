/**
 * Which clients to ask the front nodes to probe, and when (seed 000: the DNS
 * server "requests for measuring RTT between client and cluster").
 *
 * A prefix is requested when a query comes from it and it has no current
 * RTT for some usable cluster, at most once per retrySeconds (probes take
 * time, and a prefix whose clients ignore ICMP must not be asked for on every
 * query). Requests wait in a bounded pending set (maxPending; the excess is
 * counted as dropped and asked for on a later query) and leave at most
 * maxTargetsPerSecond per second, in one rtt_probe_request per flush: the
 * DNS server can never make the front nodes flood anyone with ICMP, whatever
 * the query mix.
 */
import { MAX_LIST } from '../control/messages.ts';

export class ProbeScheduler {
  readonly #pending = new Map<string, string>(); // target -> prefix key
  readonly #asked = new Map<string, number>(); // prefix key -> when last requested
  readonly #maxPending: number;
  readonly #perSecond: number;
  readonly #retryMs: number;
  #tokens: number;
  #last: number;
  requested = 0;
  dropped = 0;
  sent = 0;

  constructor(opts: { maxPending: number; maxTargetsPerSecond: number; retrySeconds: number }, now: number) {
    this.#maxPending = opts.maxPending;
    this.#perSecond = opts.maxTargetsPerSecond;
    this.#retryMs = opts.retrySeconds * 1000;
    this.#tokens = opts.maxTargetsPerSecond;
    this.#last = now;
  }

  get pending(): number {
    return this.#pending.size;
  }

  /** Asks for a probe of `target` on behalf of prefix `key`; false when not queued (recently asked, or full). */
  request(key: string, target: string, now: number): boolean {
    const last = this.#asked.get(key);
    if (last !== undefined && now - last < this.#retryMs) return false;
    if (this.#pending.has(target)) return false;
    if (this.#pending.size >= this.#maxPending) {
      this.dropped++;
      return false;
    }
    if (this.#asked.size >= this.#maxPending * 4) this.#forgetOld(now);
    this.#asked.set(key, now);
    this.#pending.set(target, key);
    this.requested++;
    return true;
  }

  /** Targets due now (token bucket of maxTargetsPerSecond, burst of one second's worth). */
  flush(now: number): [string, string][] {
    this.#tokens = Math.min(this.#perSecond, this.#tokens + ((now - this.#last) / 1000) * this.#perSecond);
    this.#last = now;
    const n = Math.min(Math.floor(this.#tokens), this.#pending.size, MAX_LIST);
    const out: [string, string][] = [];
    for (const [target, key] of this.#pending) {
      if (out.length >= n) break;
      out.push([target, key]);
    }
    for (const [t] of out) this.#pending.delete(t);
    this.#tokens -= out.length;
    this.sent += out.length;
    return out;
  }

  #forgetOld(now: number): void {
    for (const [k, at] of this.#asked) if (now - at >= this.#retryMs) this.#asked.delete(k);
    // Still over the bound: all entries are recent; drop the oldest half.
    if (this.#asked.size >= this.#maxPending * 4) {
      let drop = this.#asked.size >> 1;
      for (const k of this.#asked.keys()) {
        if (drop-- <= 0) break;
        this.#asked.delete(k);
      }
    }
  }
}
