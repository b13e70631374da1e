/**
 * High-rate clients reported by the front nodes (seed 000: send_request_rate
 * sends "request rate information of only those clients which have high
 * request rate to DNS"). Such clients are steered to the clusters with the
 * most free capacity rather than the nearest: one heavy client should land
 * where it hurts least.
 *
 * Keyed by the client's prefix (the same key as every per-client table), so
 * a heavy client behind an ECS-speaking resolver is recognised too. An entry
 * lives expireSeconds after its last report (front nodes repeat reports every
 * pass while the client stays heavy). Bounded: at most maxClients; a new one
 * beyond that evicts the oldest, counted.
 */
import type { Body } from '../control/messages.ts';
import { prefixOfAddress, type PrefixLengths } from './client_prefix.ts';

interface Entry {
  rate: number;
  cluster: string;
  at: number;
}

export class HighRateTable {
  readonly #map = new Map<string, Entry>();
  readonly #max: number;
  readonly #expireMs: number;
  readonly #lengths: PrefixLengths;
  evicted = 0;
  reported = 0;

  constructor(maxClients: number, expireSeconds: number, lengths: PrefixLengths) {
    this.#max = maxClients;
    this.#expireMs = expireSeconds * 1000;
    this.#lengths = lengths;
  }

  get size(): number {
    return this.#map.size;
  }

  receive(body: Body<'high_rate_clients'>, now: number): void {
    for (const [address, rate] of body.clients) {
      const p = prefixOfAddress(address, this.#lengths);
      if (!p) continue;
      this.reported++;
      const prev = this.#map.get(p.key);
      if (prev) this.#map.delete(p.key);
      else if (this.#map.size >= this.#max) {
        const oldest = this.#map.keys().next();
        if (oldest.done !== true) {
          this.#map.delete(oldest.value);
          this.evicted++;
        }
      }
      // Several fronts may report the same client: keep the highest current rate.
      const rateNow = prev && now - prev.at <= this.#expireMs && prev.rate > rate ? prev.rate : rate;
      this.#map.set(p.key, { rate: rateNow, cluster: body.cluster, at: now });
    }
  }

  isHighRate(key: string, now: number): boolean {
    const e = this.#map.get(key);
    return e !== undefined && now - e.at <= this.#expireMs;
  }

  list(now: number, limit: number): { prefix: string; rate: number; cluster: string; ageSeconds: number }[] {
    const out: { prefix: string; rate: number; cluster: string; ageSeconds: number }[] = [];
    for (const [k, e] of this.#map) {
      if (now - e.at > this.#expireMs) continue;
      out.push({ prefix: k.slice(2), rate: e.rate, cluster: e.cluster, ageSeconds: Math.round((now - e.at) / 100) / 10 });
    }
    return out.sort((a, b) => b.rate - a.rate).slice(0, limit);
  }
}
