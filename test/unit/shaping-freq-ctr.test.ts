// Sliding-window frequency counter (src/shaping/freq_ctr.ts) on a fake
// integer-ms clock: exact admissions, rotation, and next-admission times.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FreqCounters } from '../../src/shaping/freq_ctr.ts';

function counter(periodMs = 1000): FreqCounters {
  const f = new FreqCounters(4, periodMs);
  f.reset(0, 0);
  return f;
}

describe('FreqCounters', () => {
  it('a burst passes exactly `limit` events, then none until the window slides', () => {
    const f = counter();
    const got = Array.from({ length: 8 }, () => f.take(0, 0, 5));
    assert.deepEqual(got, [true, true, true, true, true, false, false, false]);
    assert.equal(f.estimate(0, 0), 5);
    // Rotated at 1000: prev = 5 weighs fully, nothing yet.
    assert.equal(f.take(0, 1000, 5), false);
    assert.equal(f.estimate(0, 1000), 5);
    // 1 ms later the weighted previous count is floor(5 * 999 / 1000) = 4.
    assert.equal(f.take(0, 1001, 5), true);
  });

  it('nextAdmitAt gives the first ms past each boundary (table)', () => {
    const f = counter();
    for (let k = 0; k < 5; k++) f.take(0, 0, 5);
    const schedule: number[] = [];
    let t = 0;
    for (let n = 0; n < 6; n++) {
      t = f.nextAdmitAt(0, t, 5);
      assert.equal(f.admits(0, t - 1, 5), false, `not admitted 1 ms before ${t}`);
      assert.equal(f.take(0, t, 5), true, `admitted at ${t}`);
      schedule.push(t);
    }
    // One per 200 ms in steady state (5 per 1000 ms), after the first period.
    assert.deepEqual(schedule, [1001, 1201, 1401, 1601, 1801, 2001]);
  });

  it('rotation: one period keeps the previous count, two periods forget it', () => {
    const f = counter();
    for (let k = 0; k < 4; k++) f.add(0, 10);
    assert.equal(f.estimate(0, 999), 4);
    assert.equal(f.estimate(0, 1500), 2); // floor(4 * 500 / 1000)
    f.add(0, 1500);
    assert.equal(f.estimate(0, 1500), 3);
    assert.equal(f.estimate(0, 3600), 0); // idle for over a period after 1000..2000
    assert.equal(f.nextAdmitAt(0, 3600, 1), 3600);
  });

  it('a sustained load settles at the limit per period', () => {
    const f = counter(1000);
    let admitted = 0;
    // 4 attempts per ms for 10 s against 50 per second.
    for (let t = 0; t < 10_000; t++) for (let k = 0; k < 4; k++) if (f.take(0, t, 50)) admitted++;
    assert.ok(admitted >= 500 && admitted <= 510, `admitted ${admitted} in 10 s at 50/s`);
  });

  it('ratePerSecond scales the estimate by the period', () => {
    const f = counter(100);
    for (let k = 0; k < 7; k++) f.add(0, 0);
    assert.equal(f.ratePerSecond(0, 50), 70);
  });
});
