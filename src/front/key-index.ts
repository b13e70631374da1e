/**
 * The connection table's index: record (key, tag) -> slot. The key is a
 * double below 2^53 (client address and port: connections.ts), the tag a
 * 16-bit number (the virtual service index): the service no longer fits in
 * the double's 53 exact bits beside 48 bits of address and port once there
 * are more than 32 services, so it is compared on its own.
 *
 * Why not a Map: every new connection inserted a key that is not a small
 * integer, so V8 boxed it as a heap number (an allocation per SYN), and a
 * Map of 10^5..10^6 such entries cost more per lookup than the rest of the
 * SYN's decision (measured: Map lookups were ~40% of the front daemon's
 * own JavaScript time in the new-connection benchmark).
 *
 * Open addressing with linear probing over one Int32Array, no per-entry
 * object. An entry holds slot + 1 (0: empty); the key and tag themselves are
 * read from the table's arrays (`keys[slot]`, `tags[slot]`), which the
 * caller keeps in step.
 * Deletion shifts the following entries of the probe run back (no
 * tombstones), so lookups never slow down with churn.
 *
 * Invariants: the array has a power-of-two length at least twice the
 * table's capacity, so the load factor stays <= 1/2 and a probe always
 * reaches an empty entry; every entry's slot s has keys[s] and tags[s] equal
 * to the key and tag it was inserted under until delete() of them (callers
 * delete before overwriting either); a (key, tag) is present at most once.
 */
export class KeyIndex {
  readonly #entries: Int32Array;
  readonly #mask: number;
  readonly #keys: Float64Array;
  readonly #tags: Uint16Array;
  size = 0;

  constructor(capacity: number, keys: Float64Array, tags: Uint16Array) {
    let n = 2;
    while (n < capacity * 2) n *= 2;
    this.#entries = new Int32Array(n);
    this.#mask = n - 1;
    this.#keys = keys;
    this.#tags = tags;
  }

  /** Bytes held by the index (for the RSS budget). */
  get bytes(): number {
    return this.#entries.byteLength;
  }

  /** A 32-bit mix of both halves of the key and the tag (client address and port vary in the low bits). */
  static hash(key: number, tag: number): number {
    const lo = key >>> 0; // ToUint32: key mod 2^32, exact for integers below 2^53
    const hi = ((key / 0x100000000) >>> 0) ^ Math.imul(tag, 0x27d4eb2f);
    let h = Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return h ^ (h >>> 16);
  }

  /** The slot of (`key`, `tag`), or -1. */
  get(key: number, tag: number): number {
    const e = this.#entries;
    const mask = this.#mask;
    for (let i = KeyIndex.hash(key, tag) & mask; ; i = (i + 1) & mask) {
      const s = e[i] ?? 0;
      if (s === 0) return -1;
      if (this.#keys[s - 1] === key && this.#tags[s - 1] === tag) return s - 1;
    }
  }

  /** Points (`key`, `tag`) at `slot` (keys[slot] and tags[slot] must already hold them); replaces the slot of a present one. */
  set(key: number, tag: number, slot: number): void {
    const e = this.#entries;
    const mask = this.#mask;
    let i = KeyIndex.hash(key, tag) & mask;
    for (; ; i = (i + 1) & mask) {
      const s = e[i] ?? 0;
      if (s === 0) break;
      if (this.#keys[s - 1] === key && this.#tags[s - 1] === tag) {
        e[i] = slot + 1;
        return;
      }
    }
    e[i] = slot + 1;
    this.size++;
  }

  /** Removes (`key`, `tag`); false if absent. keys[] and tags[] must still hold those of every entry. */
  delete(key: number, tag: number): boolean {
    const e = this.#entries;
    const mask = this.#mask;
    let hole = KeyIndex.hash(key, tag) & mask;
    for (; ; hole = (hole + 1) & mask) {
      const s = e[hole] ?? 0;
      if (s === 0) return false;
      if (this.#keys[s - 1] === key && this.#tags[s - 1] === tag) break;
    }
    // Backward shift: an entry after the hole in the same run moves into it
    // unless its home position lies cyclically in (hole, j], where it is
    // still reachable from its home without crossing the hole.
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const s = e[j] ?? 0;
      if (s === 0) break;
      const home = KeyIndex.hash(this.#keys[s - 1] ?? -1, this.#tags[s - 1] ?? 0) & mask;
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
