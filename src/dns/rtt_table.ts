/**
 * Measured RTTs per client prefix and cluster (seed 000: front nodes probe
 * clients on the DNS server's request and report averaged RTTs and the
 * number of successful probes).
 *
 * Bounded: at most maxPrefixes entries; a new prefix beyond that evicts the
 * least recently updated one (Map insertion order, refreshed on update), and
 * the eviction is counted. A measurement expires after expireSeconds: an old
 * RTT says little about today's path, and an expired prefix is probed again
 * when its clients next ask.
 *
 * Results name probe targets, not prefixes: a target this server asked for
 * maps back to the prefix it asked for (expect()). With several DNS servers
 * (issue 21) a front node publishes every result to all of them, so a
 * server also receives results of probes another server asked for; given
 * the prefix lengths, it files those under the target's own prefix
 * (counted as `shared`) rather than dropping them, so every server learns
 * the same RTTs from the same reports. Without lengths, or for a target
 * that is no IPv4 address, they are counted as unknownTargets.
 *
 * A probe round with no reply (rttMs null) records the cluster as
 * unreachable for that prefix (Infinity): ICMP may be filtered, so it ranks
 * last rather than excluding the cluster.
 */
import type { Body } from '../control/messages.ts';
import { Buckets, RTT_SECONDS_BOUNDS } from '../metrics/buckets.ts';
import { prefixOfAddress, type PrefixLengths } from './client_prefix.ts';

export interface RttEntry {
  /** RTT in ms per cluster index; NaN = no measurement, Infinity = no reply. */
  readonly rtt: Float64Array;
  readonly at: Float64Array;
  /** Successful probes / probes sent, last round, per cluster. */
  readonly received: Uint16Array;
  readonly sent: Uint16Array;
}

export class RttTable {
  readonly #map = new Map<string, RttEntry>();
  /** Probe targets -> prefix key, so results (which name targets) find their prefix. */
  readonly #targets = new Map<string, string>();
  readonly #clusters: number;
  readonly #max: number;
  readonly #expireMs: number;
  readonly #lengths: PrefixLengths | undefined;
  evicted = 0;
  results = 0;
  unknownTargets = 0;
  /** Results for targets another DNS server asked for, filed under the target's prefix (also in `results`). */
  shared = 0;
  /** Measured RTTs of the results applied, seconds, per cluster index (metrics; no per-client labels). */
  readonly rttSeconds: readonly Buckets[];
  /** Results applied with no reply at all, per cluster index. */
  readonly noReply: Float64Array;

  constructor(clusters: number, maxPrefixes: number, expireSeconds: number, lengths?: PrefixLengths) {
    this.#lengths = lengths;
    this.rttSeconds = Array.from({ length: clusters }, () => new Buckets(RTT_SECONDS_BOUNDS));
    this.noReply = new Float64Array(clusters);
    this.#clusters = clusters;
    this.#max = maxPrefixes;
    this.#expireMs = expireSeconds * 1000;
  }

  get size(): number {
    return this.#map.size;
  }

  /** Remembers which prefix a probe target stands for (called when the probe is requested). */
  expect(target: string, prefixKey: string): void {
    if (this.#targets.size >= this.#max && !this.#targets.has(target)) {
      const oldest = this.#targets.keys().next();
      if (oldest.done !== true) this.#targets.delete(oldest.value);
    }
    this.#targets.set(target, prefixKey);
  }

  /** Applies a front node's rtt_results for cluster index `ci`. */
  receive(ci: number, body: Body<'rtt_results'>, now: number): void {
    for (const r of body.results) {
      let key = this.#targets.get(r.target);
      if (key === undefined) {
        key = this.#lengths ? prefixOfAddress(r.target, this.#lengths)?.key : undefined;
        if (key === undefined) {
          this.unknownTargets++;
          continue;
        }
        this.shared++;
      }
      this.results++;
      if (r.rttMs === null) this.noReply[ci] = (this.noReply[ci] ?? 0) + 1;
      else this.rttSeconds[ci]?.observe(r.rttMs / 1000);
      this.set(key, ci, r.rttMs ?? Infinity, r.received, r.sent, now);
    }
  }

  set(key: string, ci: number, rttMs: number, received: number, sent: number, now: number): void {
    if (ci < 0 || ci >= this.#clusters) return;
    let e = this.#map.get(key);
    if (e) this.#map.delete(key);
    else {
      if (this.#map.size >= this.#max) {
        const oldest = this.#map.keys().next();
        if (oldest.done !== true) {
          this.#map.delete(oldest.value);
          this.evicted++;
        }
      }
      e = { rtt: new Float64Array(this.#clusters).fill(NaN), at: new Float64Array(this.#clusters).fill(-Infinity), received: new Uint16Array(this.#clusters), sent: new Uint16Array(this.#clusters) };
    }
    e.rtt[ci] = rttMs;
    e.at[ci] = now;
    e.received[ci] = Math.min(received, 0xffff);
    e.sent[ci] = Math.min(sent, 0xffff);
    this.#map.set(key, e); // most recently updated last
  }

  /**
   * The prefix's RTTs with expired ones as NaN, written into `out`; returns
   * how many clusters have a current measurement.
   */
  current(key: string, now: number, out: Float64Array): number {
    const e = this.#map.get(key);
    out.fill(NaN);
    if (!e) return 0;
    let n = 0;
    for (let i = 0; i < this.#clusters; i++) {
      if (now - (e.at[i] ?? -Infinity) <= this.#expireMs) {
        out[i] = e.rtt[i] ?? NaN;
        n++;
      }
    }
    return n;
  }

  get(key: string): RttEntry | undefined {
    return this.#map.get(key);
  }

  /** When the prefix's newest measurement was taken (-Infinity: none). */
  newest(key: string): number {
    const e = this.#map.get(key);
    let t = -Infinity;
    if (e) for (let i = 0; i < this.#clusters; i++) t = Math.max(t, e.at[i] ?? -Infinity);
    return t;
  }

  /** The most recently updated prefixes, newest first (for status). */
  recent(limit: number): [string, RttEntry][] {
    const all = [...this.#map];
    return all.slice(-limit).reverse();
  }
}
