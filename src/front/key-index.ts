/**
 * The connection table's index: record key (a double, < 2^53) -> slot.
 *
 * Why not a Map: every new connection inserted a key that is not a small
 * integer, so V8 boxed it as a heap number (an allocation per SYN), and a
 * Map of 10^5..10^6 such entries cost more per lookup than the rest of the
 * SYN's decision (measured: Map lookups were ~40% of the front daemon's
 * own JavaScript time in the new-connection benchmark).
 *
 * Open addressing with linear probing over one Int32Array, no per-entry
 * object. An entry holds slot + 1 (0: empty); the key itself is read from
 * the table's key array (`keys[slot]`), which the caller keeps in step.
 * Deletion shifts the following entries of the probe run back (no
 * tombstones), so lookups never slow down with churn.
 *
 * Invariants: the array has a power-of-two length at least twice the
 * table's capacity, so the load factor stays <= 1/2 and a probe always
 * reaches an empty entry; every entry's slot s has keys[s] equal to the key
 * it was inserted under until delete() of that key (callers delete before
 * overwriting keys[s]); a key is present at most once.
 */
export class KeyIndex {
  readonly #entries: Int32Array;
  readonly #mask: number;
  readonly #keys: Float64Array;
  size = 0;

  constructor(capacity: number, keys: Float64Array) {
    let n = 2;
    while (n < capacity * 2) n *= 2;
    this.#entries = new Int32Array(n);
    this.#mask = n - 1;
    this.#keys = keys;
  }

  /** Bytes held by the index (for the RSS budget). */
  get bytes(): number {
    return this.#entries.byteLength;
  }

  /** A 32-bit mix of both halves of the key (client address and port vary in the low bits). */
  static hash(key: number): number {
    const lo = key >>> 0; // ToUint32: key mod 2^32, exact for integers below 2^53
    const hi = (key / 0x100000000) >>> 0;
    let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return h ^ (h >>> 16);
  }

  /** The slot of `key`, or -1. */
  get(key: number): number {
    const e = this.#entries;
    const mask = this.#mask;
    for (let i = KeyIndex.hash(key) & mask; ; i = (i + 1) & mask) {
      const s = e[i] ?? 0;
      if (s === 0) return -1;
      if (this.#keys[s - 1] === key) return s - 1;
    }
  }

  /** Points `key` at `slot` (keys[slot] must already be `key`); replaces the slot of a present key. */
  set(key: number, slot: number): void {
    const e = this.#entries;
    const mask = this.#mask;
    let i = KeyIndex.hash(key) & mask;
    for (; ; i = (i + 1) & mask) {
      const s = e[i] ?? 0;
      if (s === 0) break;
      if (this.#keys[s - 1] === key) {
        e[i] = slot + 1;
        return;
      }
    }
    e[i] = slot + 1;
    this.size++;
  }

  /** Removes `key`; false if absent. keys[] must still hold the keys of every entry. */
  delete(key: number): boolean {
    const e = this.#entries;
    const mask = this.#mask;
    let hole = KeyIndex.hash(key) & mask;
    for (; ; hole = (hole + 1) & mask) {
      const s = e[hole] ?? 0;
      if (s === 0) return false;
      if (this.#keys[s - 1] === key) break;
    }
    // Backward shift: an entry after the hole in the same run moves into it
    // unless its home position lies cyclically in (hole, j], where it is
    // still reachable from its home without crossing the hole.
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const s = e[j] ?? 0;
      if (s === 0) break;
      const home = KeyIndex.hash(this.#keys[s - 1] ?? -1) & mask;
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      e[hole] = s;
      hole = j;
    }
    e[hole] = 0;
    this.size--;
    return true;
  }
}
