import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DelayLine, type Ticker } from '../../scripts/testbed/delay-line.ts';

/** A fake clock and ticker: time moves only when the test says so. */
function harness(capacityPerClass = 8, maxClasses = 4) {
  let now = 0;
  let running: (() => void) | undefined;
  const released: [number, number][] = [];
  let flushes = 0;
  const ticker: Ticker = {
    start(fn) {
      running = fn;
    },
    stop() {
      running = undefined;
    },
  };
  const line = new DelayLine({
    capacityPerClass,
    maxClasses,
    now: () => now,
    ticker,
    release: (id) => released.push([id, now]),
    afterRelease: () => flushes++,
  });
  return {
    line,
    released,
    flushes: () => flushes,
    ticking: () => running !== undefined,
    /** Advance to `t` ms, ticking every 1 ms like the real ticker. */
    runTo(t: number) {
      while (now < t) {
        now += 1;
        running?.();
      }
    },
    at(t: number) {
      now = t;
    },
  };
}

describe('DelayLine', () => {
  it('releases each packet after its own delay, keeping order within a path', () => {
    const h = harness();
    h.line.push(1, 10_000);
    h.line.push(2, 40_000);
    h.at(3);
    h.line.push(3, 10_000);
    h.runTo(60);
    assert.deepEqual(h.released, [
      [1, 10],
      [3, 13],
      [2, 40],
    ]);
  });

  it('releases up to SLACK_MS (0.5 ms) early, never earlier', () => {
    const h = harness();
    h.at(0.4);
    h.line.push(1, 10_000); // due 10.4
    h.at(9.8);
    h.line.tick();
    assert.deepEqual(h.released, []);
    h.at(9.9);
    h.line.tick();
    assert.deepEqual(h.released, [[1, 9.9]]);
  });

  it('ticks only while holding packets, one flush per releasing tick', () => {
    const h = harness();
    assert.equal(h.ticking(), false);
    h.line.push(1, 5_000);
    h.line.push(2, 5_000);
    assert.equal(h.ticking(), true);
    h.runTo(10);
    assert.equal(h.ticking(), false);
    assert.equal(h.flushes(), 1);
    assert.equal(h.line.held, 0);
    assert.equal(h.line.released, 2);
  });

  it('refuses packets beyond a class capacity or the class limit, and counts them', () => {
    const h = harness(2, 2);
    assert.equal(h.line.push(1, 1000), true);
    assert.equal(h.line.push(2, 1000), true);
    assert.equal(h.line.push(3, 1000), false);
    assert.equal(h.line.push(4, 2000), true);
    assert.equal(h.line.push(5, 3000), false);
    assert.equal(h.line.overflows, 2);
    assert.equal(h.line.held, 3);
  });

  it('wraps around its ring', () => {
    const h = harness(2, 1);
    for (let id = 1; id <= 6; id++) {
      assert.equal(h.line.push(id, 1000), true);
      h.runTo(id * 2);
    }
    assert.deepEqual(
      h.released.map(([id]) => id),
      [1, 2, 3, 4, 5, 6],
    );
  });

  it('releaseAll empties every class at once', () => {
    const h = harness();
    h.line.push(1, 10_000);
    h.line.push(2, 40_000);
    h.line.releaseAll();
    assert.deepEqual(
      h.released.map(([id]) => id),
      [1, 2],
    );
    assert.equal(h.ticking(), false);
  });
});
