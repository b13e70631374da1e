/**
 * The legacy resync's backoff (src/front/legacy-backoff.ts), table-driven:
 * each step is one period, with the legacy records left at that period and,
 * if the resync ran, how many records it freed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LEGACY_BACKOFF_MAX, LegacyBackoff } from '../../src/front/legacy-backoff.ts';

/** [legacy records at the period, records the resync frees if it runs]. */
type Step = readonly [number, number];

function ran(steps: readonly Step[]): string {
  const b = new LegacyBackoff();
  return steps
    .map(([legacy, freed]) => {
      if (!b.due(legacy)) return '.';
      b.done(freed);
      return freed > 0 ? 'F' : 'R';
    })
    .join('');
}

describe('legacy resync backoff', () => {
  const cases: readonly { name: string; steps: readonly Step[]; want: string }[] = [
    { name: 'no legacy records: never', steps: Array<Step>(5).fill([0, 0]), want: '.....' },
    { name: 'every resync frees some: every period', steps: Array<Step>(5).fill([100, 3]), want: 'FFFFF' },
    // Runs at 0, 2, 6, 14: 2, 4, 8 periods apart.
    { name: 'nothing freed: 2, 4, 8 periods apart', steps: Array<Step>(16).fill([100, 0]), want: 'R.R...R.......R.' },
    { name: 'a resync that frees some starts again at every period', steps: [...Array<Step>(6).fill([100, 0]), [100, 5], [100, 5], [100, 0], [100, 0], [100, 0]], want: 'R.R...FFR.R' },
    { name: 'the last legacy record gone: stops; the next adoption starts at the next period', steps: [[100, 0], [100, 0], [100, 0], [0, 0], [50, 0], [50, 0]], want: 'R.R.R.' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(ran(c.steps), c.want);
    });
  }

  it(`never more than ${String(LEGACY_BACKOFF_MAX)} periods apart, and the skipped periods are counted`, () => {
    const b = new LegacyBackoff();
    const at: number[] = [];
    for (let p = 0; p < 200; p++) {
      if (b.due(1)) {
        at.push(p);
        b.done(0);
      }
    }
    const gaps = at.slice(1).map((p, i) => p - (at[i] ?? 0));
    assert.deepEqual(gaps.slice(0, 5), [2, 4, 8, 16, 16]);
    assert.ok(gaps.every((g) => g <= LEGACY_BACKOFF_MAX), JSON.stringify(gaps));
    assert.equal(b.periods, LEGACY_BACKOFF_MAX);
    assert.equal(b.skipped, 200 - at.length);
  });
});
