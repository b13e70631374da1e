import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConnectionTable, REUSE_GUARD_MS, connectionKey } from '../../src/front/connections.ts';

function table(capacity = 4, recycleMs = 1000) {
  const released: [number, number][] = [];
  const t = new ConnectionTable(capacity, recycleMs, { released: (svc, srv) => released.push([svc, srv]) });
  return { t, released };
}

const C = 0xc6120b02; // 198.18.11.2

describe('connectionKey', () => {
  it('is exact and distinct over the whole domain corners', () => {
    const keys = [
      connectionKey(0, 0),
      connectionKey(0, 1),
      connectionKey(1, 0),
      connectionKey(0xffffffff, 0xffff),
      connectionKey(0xffffffff, 0xfffe),
    ];
    assert.equal(new Set(keys).size, keys.length);
    assert.ok(Number.isSafeInteger(connectionKey(0xffffffff, 0xffff)));
  });
});

describe('ConnectionTable', () => {
  it('keeps records of the same client address and port apart by service, up to the last service index', () => {
    const { t } = table();
    const k = connectionKey(C, 40000);
    t.create(k, 0, 1, 0);
    t.create(k, 0xffe, 2, 0);
    t.create(k, 31, 3, 0);
    assert.equal(t.lookup(0, k), 1);
    assert.equal(t.lookup(0xffe, k), 2);
    assert.equal(t.lookup(31, k), 3);
    assert.equal(t.lookup(32, k), -1);
    assert.equal(t.finish(0xffe, k, 1), true);
    assert.equal(t.isActive(0xffe, k), false);
    assert.equal(t.isActive(0, k), true);
    t.remap((svc, srv) => (svc === 31 ? [1000, srv] : [svc, srv]));
    assert.equal(t.lookup(31, k), -1);
    assert.equal(t.lookup(1000, k), 3);
    assert.equal(t.lookup(0, k), 1);
  });

  it('SYN creates, retransmitted SYN finds the same server, FIN recycles, sweep frees later', () => {
    const { t, released } = table();
    const k = connectionKey(C, 40000);
    assert.ok(t.create(k, 0, 2, 0) >= 0);
    assert.equal(t.lookup(0, k), 2);
    assert.equal(t.active, 1);
    assert.equal(t.finish(0, k, 100), true);
    assert.equal(t.finish(0, k, 150), false, 'second FIN is not a second release');
    assert.deepEqual(released, [[0, 2]]);
    assert.equal(t.lookup(0, k), 2, 'recycled records still answer late packets');
    assert.equal(t.sweep(1099), 0);
    assert.equal(t.sweep(1100), 1);
    assert.equal(t.lookup(0, k), -1);
    assert.equal(t.size, 0);
  });

  it('sweeps in finish order and skips records removed meanwhile', () => {
    const { t } = table(8, 1000);
    const k = [1, 2, 3].map((p) => connectionKey(C, p));
    k.forEach((key, i) => t.create(key, 0, i, 0));
    t.finish(0, k[0]!, 10);
    t.finish(0, k[1]!, 20);
    t.finish(0, k[2]!, 30);
    t.remove(0, k[1]!); // reused port: removed before its time
    t.create(k[1]!, 0, 5, 40); // and a new connection on it
    assert.equal(t.sweep(1015), 1);
    assert.equal(t.lookup(0, k[0]!), -1);
    assert.equal(t.sweep(1035), 1, 'the stale ring entry of k[1] is skipped, k[2] freed');
    assert.equal(t.lookup(0, k[1]!), 5);
    assert.equal(t.active, 1);
  });

  it('at the bound: frees the oldest recycled record early, else refuses (counted)', () => {
    const { t } = table(2);
    const a = connectionKey(C, 1);
    const b = connectionKey(C, 2);
    const c = connectionKey(C, 3);
    const d = connectionKey(C, 4);
    t.create(a, 0, 0, 0);
    t.create(b, 0, 1, 0);
    t.finish(0, a, 5);
    assert.ok(t.create(c, 0, 0, 6) >= 0);
    assert.equal(t.counts.recycledEarly, 1);
    assert.equal(t.lookup(0, a), -1);
    assert.equal(t.create(d, 0, 0, 7), -1);
    assert.equal(t.counts.full, 1);
    assert.equal(t.active, 2, 'active records are never evicted');
  });

  it('the resync frees old active records whose kernel flow is gone, keeps young ones', () => {
    const { t, released } = table(8);
    const gone = connectionKey(C, 1);
    const alive = connectionKey(C, 2);
    const young = connectionKey(C, 3);
    t.create(gone, 0, 0, 0);
    t.create(alive, 0, 1, 0);
    t.create(young, 0, 2, 500);
    t.resyncBegin();
    t.resyncSeen(0, alive);
    t.resyncSeen(0, connectionKey(C, 9)); // a flow without a record: nothing
    // Swept in two slices, as the daemon does.
    const n = t.resyncSweep(100, 0, 1) + t.resyncSweep(100, 1, 100);
    assert.equal(n, 1);
    assert.deepEqual(released, [[0, 0]]);
    assert.equal(t.lookup(0, gone), -1);
    assert.equal(t.lookup(0, alive), 1);
    assert.equal(t.lookup(0, young), 2);
    // A stamp counts for its own pass only.
    t.resyncBegin();
    assert.equal(t.resyncSweep(100, 0, t.capacity), 1);
    assert.equal(t.lookup(0, alive), -1);
  });

  it('ended (destroy event) frees an active record (released) or a recycled one (not released again), once', () => {
    const { t, released } = table(8);
    const a = connectionKey(C, 1);
    const b = connectionKey(C, 2);
    t.create(a, 0, 0, 0);
    t.create(b, 1, 3, 0);
    t.finish(1, b, 10);
    assert.deepEqual(released, [[1, 3]]);
    assert.equal(t.ended(0, a, 20), true);
    assert.equal(t.ended(1, b, 20), true);
    assert.deepEqual(released, [[1, 3], [0, 0]]);
    assert.equal(t.ended(0, a, 30), false);
    assert.equal(t.ended(1, a, 30), false); // another service's key: not ours
    assert.equal(t.active, 0);
    assert.equal(t.recycled, 0);
    assert.equal(t.size, 0);
    assert.equal(t.counts.ended, 2);
    // The recycled record's ring entry went stale: the sweep frees nothing twice.
    assert.equal(t.sweep(1e9), 0);
    assert.equal(t.recycled, 0);
  });

  it('ended: a port reuse ignores one destroy event within the guard (the old flow\'s), not later ones', () => {
    const { t, released } = table(8);
    const k = connectionKey(C, 7);
    t.create(k, 0, 0, 0);
    t.finish(0, k, 100);
    // A new SYN on the same port: the old record goes, the new one is created.
    t.remove(0, k);
    t.create(k, 0, 1, 200);
    assert.equal(t.ended(0, k, 250), false, 'the old flow\'s event must not free the new record');
    assert.equal(t.counts.endedStale, 1);
    assert.equal(t.lookup(0, k), 1);
    assert.equal(t.ended(0, k, 300), true, 'the guard is spent: the next event is the new flow\'s');
    assert.deepEqual(released, [[0, 0], [0, 1]]);
    // Past the guard an event frees a reused record at once.
    t.create(k, 0, 0, 1000);
    t.finish(0, k, 1100);
    t.remove(0, k);
    t.create(k, 0, 2, 1200);
    assert.equal(t.ended(0, k, 1200 + REUSE_GUARD_MS), true);
    // A create of another key in between: no reuse flag.
    const other = connectionKey(C, 8);
    t.create(k, 0, 0, 2e4);
    t.remove(0, k);
    t.create(other, 0, 0, 2e4);
    t.create(k, 0, 0, 2e4);
    assert.equal(t.ended(0, k, 2e4), true);
  });

  it('ended: a young active record ignores the destroy of a closed flow (a reused port whose old record was gone)', () => {
    const { t, released } = table(8);
    const k = connectionKey(C, 9);
    // The old flow's record is long freed; a new SYN on the port creates a plain record.
    t.create(k, 0, 1, 1000);
    // The old flow's destroy (TIME_WAIT: it had closed) read after the new SYN: stale.
    assert.equal(t.ended(0, k, 1010, true), false);
    assert.equal(t.counts.endedStale, 1);
    assert.equal(t.lookup(0, k), 1);
    assert.deepEqual(released, []);
    // An event of a flow that had not closed (ESTABLISHED, or no TCP state) frees it at once.
    assert.equal(t.ended(0, k, 1020, false), true);
    assert.deepEqual(released, [[0, 1]]);
    // Past the guard a closed flow's event frees the record (its FIN copy was lost).
    t.create(k, 0, 2, 2000);
    assert.equal(t.ended(0, k, 2000 + REUSE_GUARD_MS, true), true);
    // A recycled record (its FIN seen) is freed by its own closed flow's event, young or not.
    t.create(k, 0, 0, 3000);
    t.finish(0, k, 3001);
    assert.equal(t.ended(0, k, 3002, true), true);
  });

  it('legacy records are counted until freed, however they go', () => {
    const { t } = table(8);
    const a = t.create(connectionKey(C, 1), 0, 0, 0);
    const b = t.create(connectionKey(C, 2), 0, 0, 0);
    const c = t.create(connectionKey(C, 3), 0, 0, 0);
    t.markLegacy(a);
    t.markLegacy(a);
    t.markLegacy(b);
    t.markLegacy(c);
    assert.equal(t.legacy, 3);
    t.ended(0, connectionKey(C, 1), 10);
    t.remove(0, connectionKey(C, 2));
    t.resyncBegin();
    assert.equal(t.resyncSweep(1, 0, t.capacity), 1);
    assert.equal(t.legacy, 0);
    // A slot freed and reused is not legacy.
    t.create(connectionKey(C, 4), 0, 0, 20);
    assert.equal(t.legacy, 0);
  });

  it('waitingOnDecision: an active record this daemon decided; not an adopted one, a recycled one, or none; a freed slot forgets it was adopted', () => {
    const { t } = table(2);
    const mine = connectionKey(C, 1);
    const adopted = connectionKey(C, 2);
    t.create(mine, 0, 0, 0);
    t.markAdopted(t.create(adopted, 0, 1, 0));
    // [key, expected, why]
    const cases: readonly (readonly [number, boolean, string])[] = [
      [mine, true, 'decided here, active'],
      [adopted, false, 'adopted'],
      [connectionKey(C, 3), false, 'no record'],
    ];
    for (const [key, want, why] of cases) assert.equal(t.waitingOnDecision(0, key), want, why);
    assert.equal(t.waitingOnDecision(1, mine), false, 'another service');
    t.finish(0, mine, 1);
    assert.equal(t.waitingOnDecision(0, mine), false, 'recycled');
    t.ended(0, adopted, 2);
    t.ended(0, mine, 2);
    // Both slots free again: the next records are decisions of ours.
    t.create(connectionKey(C, 4), 0, 0, 3);
    t.create(connectionKey(C, 5), 0, 0, 3);
    assert.equal(t.waitingOnDecision(0, connectionKey(C, 4)), true);
    assert.equal(t.waitingOnDecision(0, connectionKey(C, 5)), true);
  });

  it('records removed before their sweep never overflow the recycle list', () => {
    const { t } = table(3, 1_000_000);
    const keep = connectionKey(C, 9);
    t.create(keep, 0, 7, 0);
    t.finish(0, keep, 0); // one live recycled entry that must survive compaction
    for (let i = 0; i < 50; i++) {
      const k = connectionKey(C, 100 + (i % 2));
      assert.ok(t.create(k, 0, 1, i) >= 0);
      assert.equal(t.finish(0, k, i), true);
      t.remove(0, k); // port reused at once: leaves a stale ring entry
    }
    assert.equal(t.lookup(0, keep), 7);
    assert.equal(t.recycled, 1);
    assert.equal(t.sweep(2_000_000), 1);
    assert.equal(t.size, 0);
  });

  it('reuses slots: a long churn never exceeds capacity', () => {
    const { t } = table(16, 10);
    for (let i = 0; i < 10_000; i++) {
      const k = connectionKey(C, i & 0xffff);
      if (t.lookup(0, k) >= 0) t.remove(0, k);
      assert.ok(t.create(k, 0, i % 3, i) >= 0, `create ${i}`);
      t.finish(0, k, i);
      t.sweep(i);
    }
    assert.ok(t.size <= 16);
    assert.equal(t.active, 0);
  });
});
