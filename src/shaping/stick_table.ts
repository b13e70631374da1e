/**
 * A bounded, expiring table of key -> counters (HAProxy's stick tables, as
 * the seed asks: "a table very similar to the stickiness tables, but with a
 * frequency counter"). Keys are numbers the checkpoint extracts (an IPv4
 * address or masked prefix as uint32, a service or server index, 0 for the
 * one shared counter). Per entry: a sliding-window frequency counter
 * (freq_ctr.ts), the concurrent count, the total count, the number of
 * requests held in a queue for it, and the last time it was touched.
 *
 * Storage: typed arrays sized to `capacity` plus one Map<number, slot>; an
 * intrusive doubly linked list orders entries by last touch (head: most
 * recent, tail: least recent).
 *
 * Busy entries (concurrent > 0 or queued > 0) are never freed: a
 * concurrency count must be released by the connection that took it, and a
 * held request points at its entry.
 *
 * Expiry: an idle entry untouched for `expireMs` is freed by sweep(), which
 * walks from the tail (oldest) and stops at the first entry touched within
 * `expireMs` (everything nearer the head is newer).
 *
 * Eviction at the bound: acquire() of a new key on a full table frees the
 * least recently touched idle entry among the EVICT_SCAN oldest ones: an
 * expired entry if there is one (expired entries are the oldest), else the
 * oldest idle one (counted `evicted`). If all of those are busy, the key is
 * not tracked: acquire() returns -1 (counted `full`) and the caller lets
 * the request through untracked by that rule.
 *
 * Memory: BYTES_PER_SLOT bytes per slot of typed arrays, allocated up front,
 * plus about MAP_BYTES_PER_ENTRY per live key in the Map (V8's hash table
 * with number keys and values; an estimate). memoryBytes() reports both.
 */
import { FreqCounters } from './freq_ctr.ts';

const EVICT_SCAN = 16;
/** key f64 + freq 3 x f64 + total f64 + touched f64 + concurrent i32 + queued i32 + lru 2 x i32 + free i32. */
export const BYTES_PER_SLOT = 8 + 24 + 8 + 8 + 4 + 4 + 8 + 4;
export const MAP_BYTES_PER_ENTRY = 40;

export class StickTable {
  readonly capacity: number;
  readonly expireMs: number;
  readonly freq: FreqCounters;
  readonly #map = new Map<number, number>();
  readonly #key: Float64Array;
  readonly total: Float64Array;
  readonly #touched: Float64Array;
  readonly concurrent: Int32Array;
  readonly queued: Int32Array;
  readonly #newer: Int32Array;
  readonly #older: Int32Array;
  #head = -1;
  #tail = -1;
  readonly #free: Int32Array;
  #freeTop: number;
  readonly counts = { created: 0, expired: 0, evicted: 0, full: 0 };

  constructor(capacity: number, periodMs: number, expireMs: number) {
    this.capacity = capacity;
    this.expireMs = expireMs;
    this.freq = new FreqCounters(capacity, periodMs);
    this.#key = new Float64Array(capacity);
    this.total = new Float64Array(capacity);
    this.#touched = new Float64Array(capacity);
    this.concurrent = new Int32Array(capacity);
    this.queued = new Int32Array(capacity);
    this.#newer = new Int32Array(capacity);
    this.#older = new Int32Array(capacity);
    this.#free = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.#free[i] = capacity - 1 - i;
    this.#freeTop = capacity;
  }

  get size(): number {
    return this.#map.size;
  }

  memoryBytes(): number {
    return this.capacity * BYTES_PER_SLOT + this.#map.size * MAP_BYTES_PER_ENTRY;
  }

  /** The slot of `key`, or -1 (no creation, no touch: for conditions and status). */
  find(key: number): number {
    return this.#map.get(key) ?? -1;
  }

  keyOf(slot: number): number {
    return this.#key[slot] ?? 0;
  }

  busy(slot: number): boolean {
    return (this.concurrent[slot] ?? 0) > 0 || (this.queued[slot] ?? 0) > 0;
  }

  /** The slot of `key`, created if absent, marked most recently used; -1 if the table is full of busy entries. */
  acquire(key: number, now: number): number {
    let slot = this.#map.get(key);
    if (slot !== undefined) {
      this.#touch(slot, now);
      return slot;
    }
    if (this.#freeTop === 0 && !this.#evictOne(now)) {
      this.counts.full++;
      return -1;
    }
    slot = this.#free[--this.#freeTop] ?? 0;
    this.#key[slot] = key;
    this.total[slot] = 0;
    this.concurrent[slot] = 0;
    this.queued[slot] = 0;
    this.freq.reset(slot, now);
    this.#map.set(key, slot);
    this.#touched[slot] = now;
    this.#linkHead(slot);
    this.counts.created++;
    return slot;
  }

  /** Frees idle entries untouched for expireMs, at most `max` of them. Returns how many. */
  sweep(now: number, max: number): number {
    let n = 0;
    let slot = this.#tail;
    while (slot >= 0 && n < max) {
      const newer = this.#newer[slot] ?? -1;
      if (now - (this.#touched[slot] ?? 0) < this.expireMs) break;
      if (!this.busy(slot)) {
        this.#release(slot);
        this.counts.expired++;
        n++;
      }
      slot = newer;
    }
    return n;
  }

  /** Calls fn for every live slot (status; not on the packet path). */
  forEach(fn: (slot: number, key: number) => void): void {
    for (const [key, slot] of this.#map) fn(slot, key);
  }

  #evictOne(now: number): boolean {
    let slot = this.#tail;
    for (let k = 0; k < EVICT_SCAN && slot >= 0; k++) {
      if (!this.busy(slot)) {
        if (now - (this.#touched[slot] ?? 0) >= this.expireMs) this.counts.expired++;
        else this.counts.evicted++;
        this.#release(slot);
        return true;
      }
      slot = this.#newer[slot] ?? -1;
    }
    return false;
  }

  #touch(slot: number, now: number): void {
    this.#touched[slot] = now;
    if (this.#head === slot) return;
    this.#unlink(slot);
    this.#linkHead(slot);
  }

  #linkHead(slot: number): void {
    this.#newer[slot] = -1;
    this.#older[slot] = this.#head;
    if (this.#head >= 0) this.#newer[this.#head] = slot;
    this.#head = slot;
    if (this.#tail < 0) this.#tail = slot;
  }

  #unlink(slot: number): void {
    const newer = this.#newer[slot] ?? -1;
    const older = this.#older[slot] ?? -1;
    if (newer >= 0) this.#older[newer] = older;
    else this.#head = older;
    if (older >= 0) this.#newer[older] = newer;
    else this.#tail = newer;
  }

  #release(slot: number): void {
    this.#unlink(slot);
    this.#map.delete(this.#key[slot] ?? -1);
    this.#free[this.#freeTop++] = slot;
  }
}
