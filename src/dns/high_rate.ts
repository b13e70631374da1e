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
 *
 * Both families (control protocol version 2): a reported client is filed
 * under the DNS prefix (steering.ipv4Prefix / ipv6Prefix) holding it. A
 * front node counts clients per prefix too (its control.requestRate
 * ipv4Prefix / ipv6Prefix, /32 and /64 by default) and says so in the
 * report; a reported prefix at least as long as ours lies inside one of our
 * prefixes and marks that one. A reported prefix shorter than ours (a front
 * counting IPv6 per /48 while we key per /56) covers many of ours: it is
 * filed at its own length, and a lookup also tries the client's prefix cut
 * at each such length seen (at most 33 + 129, in practice one or two), so
 * every client inside the heavy network is matched, as the front meant.
 */
import type { Body } from '../control/messages.ts';
import { prefixOfAddress, type PrefixLengths } from './client_prefix.ts';

const KEY_FORM = /^([46]):(.+)\/(\d+)$/;

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
  /** Lengths shorter than ours that reports were filed at, per family (the key's first character). */
  readonly #coarse = { '4': new Set<number>(), '6': new Set<number>() };
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
    for (const [address, rate, length] of body.clients) {
      let p = prefixOfAddress(address, this.#lengths);
      if (!p) continue;
      if (length !== undefined && length < p.length) {
        p = prefixOfAddress(address, { ipv4: length, ipv6: length });
        if (!p) continue;
        this.#coarse[p.family === 4 ? '4' : '6'].add(length);
      }
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

  /** Whether the client prefix `key` (client_prefix.ts's form) is, or lies in, a reported high-rate prefix. */
  isHighRate(key: string, now: number): boolean {
    if (this.#current(key, now)) return true;
    const m = KEY_FORM.exec(key);
    const coarse = m ? this.#coarse[m[1] === '4' ? '4' : '6'] : undefined;
    if (!m || !coarse || coarse.size === 0) return false;
    const len = Number(m[3]);
    for (const l of coarse) {
      if (l >= len) continue;
      const p = prefixOfAddress(m[2] ?? '', { ipv4: l, ipv6: l });
      if (p && this.#current(p.key, now)) return true;
    }
    return false;
  }

  /** The reported request rate of exactly this prefix key while current, else 0 (demand of the mapping policy). */
  rate(key: string, now: number): number {
    const e = this.#map.get(key);
    return e !== undefined && now - e.at <= this.#expireMs ? e.rate : 0;
  }

  #current(key: string, now: number): boolean {
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
