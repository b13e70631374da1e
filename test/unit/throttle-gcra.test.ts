/**
 * GCRA on a fake clock, table-driven: each row is a sequence of request
 * times; every request is served at its allowedAt (a gatekeeper that delays
 * instead of rejecting) and charged there, as the master does.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allowedAt, charge, gcraRule, nextAllowed, type GcraRule } from '../../src/throttle/gcra.ts';

/** Serves each request at its earliest allowed time; returns those times. */
function run(rule: GcraRule, arrivals: readonly number[]): number[] {
  let tat: number | undefined;
  return arrivals.map((t) => {
    const at = allowedAt(rule, tat, t);
    tat = charge(rule, tat, at);
    return at;
  });
}

const zeros = (n: number): number[] => Array.from({ length: n }, () => 0);

describe('GCRA', () => {
  const onePerSecondBurst10 = gcraRule(1, 1000, 10);

  const table: { name: string; rule: GcraRule; arrivals: number[]; served: number[] }[] = [
    {
      name: 'rate 1/s burst 10: requests 1-10 at t=0 pass, the 11th is delayed to t=1 s',
      rule: onePerSecondBurst10,
      arrivals: zeros(11),
      served: [...zeros(10), 1000],
    },
    {
      name: 'rate 1/s burst 10: the 12th and 13th at t=0 go to 2 s and 3 s',
      rule: onePerSecondBurst10,
      arrivals: zeros(13),
      served: [...zeros(10), 1000, 2000, 3000],
    },
    {
      name: 'a 5 s gap after exhausting the burst refills 5 of it (not all 10)',
      rule: onePerSecondBurst10,
      arrivals: [...zeros(10), 5000, 5000, 5000, 5000, 5000, 5000],
      // at t=5 s: TAT=10 s, allowedAt = max(TAT-9 s, 5 s) = 5 s: five pass (TAT 11..15 s), the sixth waits to 6 s
      served: [...zeros(10), 5000, 5000, 5000, 5000, 5000, 6000],
    },
    {
      name: 'a gap of burst*T or more refills the whole burst',
      rule: onePerSecondBurst10,
      arrivals: [...zeros(10), ...Array.from({ length: 11 }, () => 10_000)],
      served: [...zeros(10), ...Array.from({ length: 10 }, () => 10_000), 11_000],
    },
    {
      name: 'burst 1 is a strict spacing of T',
      rule: gcraRule(4, 1000, 1),
      arrivals: [0, 0, 0, 100, 900],
      served: [0, 250, 500, 750, 1000],
    },
    {
      name: 'requests at the sustained rate are never delayed',
      rule: gcraRule(10, 1000, 2),
      arrivals: [0, 100, 200, 300, 400, 500],
      served: [0, 100, 200, 300, 400, 500],
    },
    {
      name: 'a fractional interval (3 per second) keeps its precision',
      rule: gcraRule(3, 1000, 1),
      arrivals: [0, 0, 0, 0],
      served: [0, 1000 / 3, 2000 / 3, 1000],
    },
  ];

  for (const row of table) {
    it(row.name, () => {
      const got = run(row.rule, row.arrivals);
      assert.equal(got.length, row.served.length);
      got.forEach((g, i) => {
        assert.ok(Math.abs(g - (row.served[i] ?? NaN)) < 1e-6, `request ${i + 1}: served at ${g}, expected ${row.served[i]}`);
      });
    });
  }

  it('the master publishes a delay exactly when the next request would not be allowed now', () => {
    const r = onePerSecondBurst10;
    let tat: number | undefined;
    const published: number[] = [];
    for (let i = 0; i < 11; i++) {
      tat = charge(r, tat, i < 10 ? 0 : 1000);
      const next = nextAllowed(r, tat);
      if (next > 0) published.push(next);
    }
    // after the 10th charge the next is allowed at 1 s; after the 11th (served at 1 s), at 2 s
    assert.deepEqual(published, [1000, 2000]);
  });

  it('state whose TAT has passed is equivalent to no state', () => {
    const r = gcraRule(5, 1000, 3);
    const tat = charge(r, charge(r, undefined, 0), 0); // 400
    for (const t of [400, 401, 10_000]) {
      assert.equal(allowedAt(r, tat, t), allowedAt(r, undefined, t));
      assert.equal(charge(r, tat, t), charge(r, undefined, t));
    }
  });

  it('refuses rules outside the domain', () => {
    assert.throws(() => gcraRule(0, 1000, 1), { code: 'ERR_SLUICE_INVALID_ARGUMENT' });
    assert.throws(() => gcraRule(1, 0, 1), { code: 'ERR_SLUICE_INVALID_ARGUMENT' });
    assert.throws(() => gcraRule(1, 1000, 0), { code: 'ERR_SLUICE_INVALID_ARGUMENT' });
    assert.throws(() => gcraRule(1.5, 1000, 1), { code: 'ERR_SLUICE_INVALID_ARGUMENT' });
  });
});
