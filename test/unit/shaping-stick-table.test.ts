// Stick tables (src/shaping/stick_table.ts): bound, expiry, eviction order,
// busy entries kept, memory estimate.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BYTES_PER_SLOT, MAP_BYTES_PER_ENTRY, StickTable } from '../../src/shaping/stick_table.ts';

describe('StickTable', () => {
  it('finds a key again, counts creations', () => {
    const t = new StickTable(4, 1000, 10_000);
    const a = t.acquire(11, 0);
    assert.equal(t.acquire(11, 5), a);
    assert.equal(t.find(11), a);
    assert.equal(t.find(12), -1);
    assert.equal(t.counts.created, 1);
  });

  it('at the bound evicts the least recently touched idle key', () => {
    const t = new StickTable(3, 1000, 10_000);
    t.acquire(1, 0);
    t.acquire(2, 1);
    t.acquire(3, 2);
    t.acquire(1, 3); // 1 is now the most recent; 2 the oldest
    t.acquire(4, 4);
    assert.equal(t.find(2), -1);
    assert.ok(t.find(1) >= 0 && t.find(3) >= 0 && t.find(4) >= 0);
    assert.equal(t.counts.evicted, 1);
  });

  it('never frees busy keys; full of busy keys it refuses new ones', () => {
    const t = new StickTable(2, 1000, 10);
    const a = t.acquire(1, 0);
    const b = t.acquire(2, 0);
    t.concurrent[a] = 1;
    t.queued[b] = 1;
    assert.equal(t.acquire(3, 100), -1);
    assert.equal(t.counts.full, 1);
    assert.equal(t.sweep(100, 10), 0);
    t.queued[b] = 0;
    assert.ok(t.acquire(3, 100) >= 0); // 2 expired and idle: reused
    assert.equal(t.counts.expired, 1);
    assert.ok(t.find(1) >= 0);
  });

  it('sweep frees keys idle for expireMs, oldest first, bounded per call', () => {
    const t = new StickTable(8, 1000, 100);
    for (let k = 0; k < 5; k++) t.acquire(k, k * 10);
    assert.equal(t.sweep(125, 10), 3); // touched at 0, 10, 20
    assert.equal(t.size, 2);
    assert.equal(t.sweep(1000, 1), 1);
    assert.equal(t.size, 1);
  });

  it('memory estimate: slots up front plus the map per live key', () => {
    const t = new StickTable(100, 1000, 100);
    t.acquire(1, 0);
    t.acquire(2, 0);
    assert.equal(t.memoryBytes(), 100 * BYTES_PER_SLOT + 2 * MAP_BYTES_PER_ENTRY);
  });
});
