import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connectionKey } from '../../src/front/connections.ts';
import { KeyIndex } from '../../src/front/key-index.ts';

/** xorshift32: a fixed sequence, so a failure replays. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

/**
 * Drives an index the way ConnectionTable does (slots from a free list,
 * keys[slot] written before set, delete before the slot is reused) and
 * checks every step against a Map.
 */
function churn(capacity: number, steps: number, seed: number, keyOf: (r: number) => number): void {
  const keys = new Float64Array(capacity);
  const index = new KeyIndex(capacity, keys);
  const ref = new Map<number, number>();
  const free = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
  const next = rng(seed);
  for (let step = 0; step < steps; step++) {
    const r = next();
    const live = [...ref.keys()];
    if (free.length > 0 && (r % 3 !== 0 || live.length === 0)) {
      const key = keyOf(next());
      if (ref.has(key)) continue;
      const slot = free.pop() ?? -1;
      keys[slot] = key;
      index.set(key, slot);
      ref.set(key, slot);
    } else {
      const key = live[next() % live.length] ?? -1;
      assert.equal(index.delete(key), true, `step ${step}: delete ${key}`);
      free.push(ref.get(key) ?? -1);
      ref.delete(key);
      assert.equal(index.delete(key), false, `step ${step}: deleted twice`);
    }
    assert.equal(index.size, ref.size);
    // Every live key is found at its slot after every shift; a deleted one is not.
    for (const [k, slot] of ref) assert.equal(index.get(k), slot, `step ${step}: get ${k}`);
  }
}

describe('KeyIndex (connection key -> slot)', () => {
  it('finds, replaces and misses keys at the edges of the key space', () => {
    const cases = [0, 1, 0xffff, 0x10000, connectionKey(0, 0xffffffff, 0xffff), connectionKey(31, 0xc6120001, 443), Number.MAX_SAFE_INTEGER];
    const keys = new Float64Array(cases.length);
    const index = new KeyIndex(cases.length, keys);
    cases.forEach((k, slot) => {
      keys[slot] = k;
      index.set(k, slot);
    });
    cases.forEach((k, slot) => { assert.equal(index.get(k), slot); });
    assert.equal(index.get(2), -1);
    assert.equal(index.get(connectionKey(30, 0xc6120001, 443)), -1);
    // set() of a present key points it at the new slot, the size unchanged.
    const k0 = cases[0] ?? 0;
    keys[3] = k0;
    index.set(k0, 3);
    assert.equal(index.get(k0), 3);
    assert.equal(index.size, cases.length);
  });

  it('stays exact under churn in a small table (long probe runs, wrap-around)', () => {
    // Capacity 8 -> 16 entries: runs wrap around the end of the array.
    churn(8, 5000, 7, (r) => connectionKey(r & 1, 0xc6120000 + (r % 5), r % 7));
    churn(13, 5000, 99, (r) => r % 40);
  });

  it('stays exact under churn with realistic keys (clients of a /24, random ports)', () => {
    churn(1000, 20000, 12345, (r) => connectionKey(r % 3, 0xc6120100 + (r % 256), 1024 + (r % 60000)));
  });

  it('sizes its array to a power of two at least twice the capacity', () => {
    for (const [capacity, bytes] of [
      [1, 8],
      [8, 64],
      [1000, 8192],
      [1 << 20, 8 << 20],
    ] as const) {
      assert.equal(new KeyIndex(capacity, new Float64Array(capacity)).bytes, bytes, `capacity ${capacity}`);
    }
  });
});
