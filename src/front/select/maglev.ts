/**
 * Maglev consistent hashing (Eisenbud et al., NSDI 2016) of the client
 * address (IPv4's u32, or an IPv6 address's client number, whose low 32
 * bits are a fixed hash of all 128 bits: front/client6.ts). Each server has a permutation of the M table slots given by
 * (offset, skip); servers take turns claiming their next free preferred
 * slot until the table is full. A client maps to table[hash(addr) mod M].
 *
 * Stateless across restarts: offsets and skips come from a fixed hash of the
 * server id and the client hash is fixed, so a restarted front node maps
 * every client exactly as before. Weights: per round a server claims as many
 * slots as its weight divided by the weights' GCD.
 *
 * Only usable servers enter the table (rebuild() on change), so a drained
 * server's clients move and nobody else's do (beyond Maglev's small churn).
 * A server that is in the table but full (active >= capacity) is skipped by
 * probing the following slots, deterministically.
 */
import { eligible, type Backend, type Selector } from './backend.ts';

/** 65537 is prime, > 100 x any sane server count (the paper's guidance). */
export const DEFAULT_TABLE_SIZE = 65537;

export interface MaglevInput {
  readonly offset: number;
  readonly skip: number;
  readonly weight: number;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/**
 * Pseudocode 1 of the paper. Returns table[slot] = input index, or an empty
 * table if there is no input. `size` must be prime and skips in [1, size-1].
 */
export function populateMaglev(size: number, inputs: readonly MaglevInput[]): Int32Array {
  const entry = new Int32Array(size).fill(-1);
  if (inputs.length === 0) return new Int32Array(0);
  const g = inputs.reduce((acc, x) => gcd(acc, Math.max(1, Math.round(x.weight))), 0);
  const turns = inputs.map((x) => Math.max(1, Math.round(x.weight)) / g);
  const next = new Int32Array(inputs.length);
  let filled = 0;
  for (;;) {
    for (let i = 0; i < inputs.length; i++) {
      const inp = inputs[i];
      if (inp === undefined) continue;
      for (let t = 0; t < (turns[i] ?? 1); t++) {
        let c = (inp.offset + (next[i] ?? 0) * inp.skip) % size;
        while ((entry[c] ?? 0) >= 0) {
          next[i] = (next[i] ?? 0) + 1;
          c = (inp.offset + (next[i] ?? 0) * inp.skip) % size;
        }
        entry[c] = i;
        next[i] = (next[i] ?? 0) + 1;
        if (++filled === size) return entry;
      }
    }
  }
}

/** FNV-1a 32-bit of a string's UTF-16 code units, with a seed (stable across runs and hosts). */
export function fnv1a(text: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** murmur3's 32-bit finalizer: spreads client addresses over the table. */
export function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

export class Maglev implements Selector {
  readonly method = 'maglev';
  readonly size: number;
  #table: Int32Array = new Int32Array(0);
  /** table entries are indexes into #members; #members into the backends array. */
  #members: number[] = [];

  constructor(size = DEFAULT_TABLE_SIZE) {
    this.size = size;
  }

  rebuild(backends: readonly Backend[]): void {
    this.#members = [];
    const inputs: MaglevInput[] = [];
    backends.forEach((b, i) => {
      if (!b.usable) return;
      this.#members.push(i);
      inputs.push({
        offset: fnv1a(b.id, 0x5eed0001) % this.size,
        skip: (fnv1a(b.id, 0x5eed0002) % (this.size - 1)) + 1,
        weight: b.weight,
      });
    });
    this.#table = populateMaglev(this.size, inputs);
  }

  pick(backends: readonly Backend[], client: number): number {
    const t = this.#table;
    if (t.length === 0) return -1;
    // Probing only pays off if some member is eligible: check that first
    // (O(members)), so a fully loaded service never scans the table.
    let any = false;
    for (const idx of this.#members) {
      const b = backends[idx];
      if (b !== undefined && eligible(b)) {
        any = true;
        break;
      }
    }
    if (!any) return -1;
    const start = mix32(client) % t.length; // mix32 reads the low 32 bits: all of IPv4, the hash of IPv6
    for (let k = 0; k < t.length; k++) {
      const idx = this.#members[t[(start + k) % t.length] ?? -1] ?? -1;
      const b = backends[idx];
      if (b !== undefined && eligible(b)) return idx;
    }
    return -1;
  }

  /** Slot owners by backend index (for tests and status). */
  tableOwners(): Int32Array {
    return this.#table.map((m) => this.#members[m] ?? -1);
  }
}
