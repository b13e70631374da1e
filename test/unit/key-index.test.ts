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
 * keys[slot] and tags[slot] written before set, delete before the slot is
 * reused) and checks every step against a Map.
 */
function churn(capacity: number, steps: number, seed: number, keyOf: (r: number) => readonly [key: number, tag: number]): void {
  const keys = new Float64Array(capacity);
  const tags = new Uint16Array(capacity);
  const index = new KeyIndex(capacity, keys, tags);
  const ref = new Map<string, readonly [key: number, tag: number, slot: number]>();
  const free = Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
  const next = rng(seed);
  for (let step = 0; step < steps; step++) {
    const r = next();
    const live = [...ref.keys()];
    if (free.length > 0 && (r % 3 !== 0 || live.length === 0)) {
      const [key, tag] = keyOf(next());
      const name = `${String(key)}/${String(tag)}`;
      if (ref.has(name)) continue;
      const slot = free.pop() ?? -1;
      keys[slot] = key;
      tags[slot] = tag;
      index.set(key, tag, slot);
      ref.set(name, [key, tag, slot]);
    } else {
      const name = live[next() % live.length] ?? '';
      const [key, tag, slot] = ref.get(name) ?? [-1, 0, -1];
      assert.equal(index.delete(key, tag), true, `step ${step}: delete ${name}`);
      free.push(slot);
      ref.delete(name);
      assert.equal(index.delete(key, tag), false, `step ${step}: deleted twice`);
    }
    assert.equal(index.size, ref.size);
    // Every live key is found at its slot after every shift; a deleted one is not.
    for (const [name, [k, t, slot]] of ref) assert.equal(index.get(k, t), slot, `step ${step}: get ${name}`);
  }
}

describe('KeyIndex ((connection key, service) -> slot)', () => {
  it('finds, replaces and misses keys at the edges of the key and tag space', () => {
    const cases: (readonly [number, number])[] = [[0, 0], [1, 0], [0xffff, 0], [0x10000, 0], [connectionKey(0xffffffff, 0xffff), 0], [connectionKey(0xc6120001, 443), 31], [connectionKey(0xc6120001, 443), 0xffe], [Number.MAX_SAFE_INTEGER, 0xffff]];
    const keys = new Float64Array(cases.length);
    const tags = new Uint16Array(cases.length);
    const index = new KeyIndex(cases.length, keys, tags);
    cases.forEach(([k, t], slot) => {
      keys[slot] = k;
      tags[slot] = t;
      index.set(k, t, slot);
    });
    cases.forEach(([k, t], slot) => { assert.equal(index.get(k, t), slot); });
    assert.equal(index.get(2, 0), -1);
    // The same address and port under another service is another record.
    assert.equal(index.get(connectionKey(0xc6120001, 443), 30), -1);
    assert.equal(index.get(connectionKey(0xc6120001, 443), 0xffd), -1);
    // set() of a present key points it at the new slot, the size unchanged.
    keys[3] = 0;
    tags[3] = 0;
    index.set(0, 0, 3);
    assert.equal(index.get(0, 0), 3);
    assert.equal(index.size, cases.length);
  });

  it('stays exact under churn in a small table (long probe runs, wrap-around)', () => {
    // Capacity 8 -> 16 entries: runs wrap around the end of the array.
    churn(8, 5000, 7, (r) => [connectionKey(0xc6120000 + (r % 5), r % 7), r & 1]);
    churn(13, 5000, 99, (r) => [r % 40, 0]);
  });

  it('stays exact under churn with realistic keys (clients of a /24, random ports, 1,000 services)', () => {
    churn(1000, 20000, 12345, (r) => [connectionKey(0xc6120100 + (r % 256), 1024 + (r % 60000)), r % 1000]);
    // Few clients and ports, many services: records differ by service alone.
    churn(500, 20000, 777, (r) => [connectionKey(0xc6120101, 40000 + (r % 3)), (r >>> 3) % 4000]);
  });

  it('sizes its array to a power of two at least twice the capacity', () => {
    for (const [capacity, bytes] of [
      [1, 8],
      [8, 64],
      [1000, 8192],
      [1 << 20, 8 << 20],
    ] as const) {
      assert.equal(new KeyIndex(capacity, new Float64Array(capacity), new Uint16Array(capacity)).bytes, bytes, `capacity ${capacity}`);
    }
  });
});
