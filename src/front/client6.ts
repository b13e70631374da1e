/**
 * IPv6 clients on the front node's hot path, without allocation and
 * without touching the IPv4 path:
 *
 *  - ClientIds: the connection table's interning of IPv6 client addresses
 *    (128 bits) to small ids, so that an IPv6 connection key is a double
 *    like an IPv4 one (connections.ts: CLIENT6_KEY_BASE + id * 2^16 +
 *    port) and everything keyed by a connection key (the key index, the
 *    checkpoints' held pool, flow ends, the resync) works unchanged. The
 *    key is exact: the id names one address for as long as a record or a
 *    held SYN uses it (reference counts), never a hash of it.
 *  - clientNumber6: the number a selection method (maglev) and the
 *    checkpoints see for an IPv6 client, in place of IPv4's address as u32:
 *    always >= 2^32, so the two families never meet in one number.
 *
 * Why interning and not 128-bit keys in the index: the IPv4 key, its
 * index and every consumer of a connection key stay as they are (the
 * IPv4 SYN path is unchanged, instruction for instruction), and an IPv6
 * SYN costs one extra probe of a table of the same kind as the key index.
 */

/** An IPv6 client number is CLIENT6_BASE + a 52-bit hash; IPv4 client numbers are the address (< 2^32). */
export const CLIENT6_BASE = 0x100000000;

/**
 * A 32-bit hash of four words with a seed (murmur3's block and tail
 * steps): every bit of the address moves every bit of the result.
 */
export function hashWords(w0: number, w1: number, w2: number, w3: number, seed: number): number {
  let h = seed >>> 0;
  h = block(h, w0);
  h = block(h, w1);
  h = block(h, w2);
  h = block(h, w3);
  return fmix32(h ^ 16);
}

/** murmur3's 32-bit finalizer. */
function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function block(h: number, k: number): number {
  let x = Math.imul(k, 0xcc9e2d51);
  x = (x << 15) | (x >>> 17);
  x = Math.imul(x, 0x1b873593);
  let y = h ^ x;
  y = (y << 13) | (y >>> 19);
  return (Math.imul(y, 5) + 0xe6546b64) >>> 0;
}

/**
 * The client number of an IPv6 address (four words): CLIENT6_BASE + 52
 * bits of two fixed-seed hashes, a double below 2^53. Fixed seeds: maglev
 * must map a client to the same server after a restart, on any host. Not
 * exact (two addresses may share a number, ~2^-52 per pair): it is used
 * where that is harmless (a consistent-hash slot, the family test); the
 * checkpoints key IPv6 clients by a seeded hash of their own
 * (shaping/checkpoint.ts), and connection records by ClientIds (exact).
 */
export function clientNumber6(a: Uint32Array): number {
  const w0 = a[0] ?? 0;
  const w1 = a[1] ?? 0;
  const w2 = a[2] ?? 0;
  const w3 = a[3] ?? 0;
  const hi = hashWords(w0, w1, w2, w3, 0x6b43a9b5) & 0xfffff;
  const lo = hashWords(w0, w1, w2, w3, 0x2f9be6cd);
  return CLIENT6_BASE * (1 + hi) + lo;
}

/**
 * IPv6 client address -> id, reference counted. Storage: a stride-4
 * Uint32Array of address words per id, a reference count per id, a free
 * stack, and an open-addressing index (linear probing, backward-shift
 * deletion, as key-index.ts) from the address hash to id + 1.
 *
 * Lifetime of an id: intern() returns the id of an address, making one if
 * needed, and makes it the "provisional" id: the caller is deciding a
 * packet with it, and it is not freed, even if its last reference goes
 * meanwhile (the port reuse of a client's only record: remove() then
 * create() of the same key), until the next intern() of another address,
 * which frees it if nobody holds a reference then (the packet was dropped,
 * or it was a lookup of an unknown client). So at most one unreferenced id
 * exists at any time. retain() and
 * release() count the users: connection records (create / free) and held
 * SYNs (the engine retains while checkpoints hold one). release() to zero
 * frees the id.
 *
 * Invariants: an id is in the index iff it is allocated; allocated ids =
 * ids with refs > 0, plus at most the provisional one; capacity = records
 * + held SYNs + 1, so intern() always finds a free id when its callers
 * keep to their bounds (it returns -1 otherwise, and the caller treats the
 * packet like one of a full table).
 */
export class ClientIds {
  readonly capacity: number;
  readonly #words: Uint32Array;
  readonly #refs: Int32Array;
  readonly #free: Int32Array;
  #freeTop: number;
  readonly #entries: Int32Array;
  readonly #mask: number;
  #provisional = -1;
  size = 0;

  constructor(capacity: number) {
    this.capacity = capacity;
    this.#words = new Uint32Array(capacity * 4);
    this.#refs = new Int32Array(capacity);
    this.#free = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.#free[i] = capacity - 1 - i;
    this.#freeTop = capacity;
    let n = 2;
    while (n < capacity * 2) n *= 2;
    this.#entries = new Int32Array(n);
    this.#mask = n - 1;
  }

  /** Bytes held (status, RSS budget). */
  get bytes(): number {
    return this.#words.byteLength + this.#refs.byteLength + this.#free.byteLength + this.#entries.byteLength;
  }

  #home(w0: number, w1: number, w2: number, w3: number): number {
    return hashWords(w0, w1, w2, w3, 0x3c6ef372) & this.#mask;
  }

  /** The id of address `a`, or -1 when no record or held SYN uses it (nor is it the provisional one). */
  find(a: Uint32Array): number {
    const w0 = a[0] ?? 0;
    const w1 = a[1] ?? 0;
    const w2 = a[2] ?? 0;
    const w3 = a[3] ?? 0;
    const e = this.#entries;
    const mask = this.#mask;
    const words = this.#words;
    for (let i = this.#home(w0, w1, w2, w3); ; i = (i + 1) & mask) {
      const s = e[i] ?? 0;
      if (s === 0) return -1;
      const at = (s - 1) * 4;
      if (words[at] === w0 && words[at + 1] === w1 && words[at + 2] === w2 && words[at + 3] === w3) return s - 1;
    }
  }

  /** The id of address `a`, made (provisional) if new; -1 if every id is in use. */
  intern(a: Uint32Array): number {
    const found = this.find(a);
    const p = this.#provisional;
    if (found >= 0 && found === p) return found;
    this.#provisional = -1;
    if (p >= 0 && this.#refs[p] === 0) this.#drop(p);
    if (found >= 0) {
      this.#provisional = found;
      return found;
    }
    if (this.#freeTop === 0) return -1;
    const id = this.#free[--this.#freeTop] ?? 0;
    const w0 = a[0] ?? 0;
    const w1 = a[1] ?? 0;
    const w2 = a[2] ?? 0;
    const w3 = a[3] ?? 0;
    const at = id * 4;
    this.#words[at] = w0;
    this.#words[at + 1] = w1;
    this.#words[at + 2] = w2;
    this.#words[at + 3] = w3;
    this.#refs[id] = 0;
    const e = this.#entries;
    const mask = this.#mask;
    let i = this.#home(w0, w1, w2, w3);
    while ((e[i] ?? 0) !== 0) i = (i + 1) & mask;
    e[i] = id + 1;
    this.size++;
    this.#provisional = id;
    return id;
  }

  retain(id: number): void {
    this.#refs[id] = (this.#refs[id] ?? 0) + 1;
  }

  /** One user of `id` is gone; the last one frees it. */
  release(id: number): void {
    const r = (this.#refs[id] ?? 0) - 1;
    this.#refs[id] = r;
    if (r <= 0) {
      this.#refs[id] = 0;
      if (id !== this.#provisional) this.#drop(id);
    }
  }

  /** Users of `id` (tests, status). */
  refs(id: number): number {
    return this.#refs[id] ?? 0;
  }

  /** Copies the address of `id` into `out`. */
  address(id: number, out: Uint32Array): void {
    const at = id * 4;
    out[0] = this.#words[at] ?? 0;
    out[1] = this.#words[at + 1] ?? 0;
    out[2] = this.#words[at + 2] ?? 0;
    out[3] = this.#words[at + 3] ?? 0;
  }

  #drop(id: number): void {
    const words = this.#words;
    const at = id * 4;
    const e = this.#entries;
    const mask = this.#mask;
    let hole = this.#home(words[at] ?? 0, words[at + 1] ?? 0, words[at + 2] ?? 0, words[at + 3] ?? 0);
    for (; ; hole = (hole + 1) & mask) {
      const s = e[hole] ?? 0;
      if (s === 0) return; // not present (cannot happen: an allocated id is indexed)
      if (s - 1 === id) break;
    }
    // Backward shift (key-index.ts): an entry moves into the hole unless its
    // home lies cyclically in (hole, j].
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const s = e[j] ?? 0;
      if (s === 0) break;
      const b = (s - 1) * 4;
      const home = this.#home(words[b] ?? 0, words[b + 1] ?? 0, words[b + 2] ?? 0, words[b + 3] ?? 0);
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      e[hole] = s;
      hole = j;
    }
    e[hole] = 0;
    this.size--;
    this.#free[this.#freeTop++] = id;
    if (this.#provisional === id) this.#provisional = -1;
  }
}
