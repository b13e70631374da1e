/**
 * The shedding summary and its rate-limited log (src/front/shed.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EngineCounters } from '../../src/front/engine.ts';
import { ShedLog, shedCounts } from '../../src/front/shed.ts';

describe('shed', () => {
  it('names every reason from its counter', () => {
    const c = new EngineCounters();
    c.noTarget = 3;
    c.untracked = 2;
    c.malformed[4] = 5;
    c.malformed[7] = 1;
    c.shapingRejected = 4;
    assert.deepEqual(shedCounts(c, 9, 8), { no_target: 3, table_full: 2, malformed: 6, no_record: 0, teardown_no_record: 0, unexpected: 0, checkpoint: 4, queue_lost: 9, log_lost: 8 });
  });

  it('logs at most once per interval, with the counts since the previous line; nothing shed, no line', () => {
    const lines: Record<string, unknown>[] = [];
    const log = new ShedLog({ warn: (o) => lines.push(o) }, 10_000);
    const c = new EngineCounters();
    const at = (t: number): boolean => log.poll(shedCounts(c, 0, 0), t);
    c.noTarget = 5;
    assert.equal(at(0), false, 'the first reading is the baseline');
    assert.equal(at(1000), false, 'nothing since');
    c.noTarget = 8;
    assert.equal(at(2000), true);
    assert.deepEqual(lines[0], { shed: { no_target: 3 } });
    c.noTarget = 100;
    assert.equal(at(5000), false, 'within the interval');
    assert.equal(at(12_000), true);
    assert.deepEqual(lines[1], { shed: { no_target: 92 } });
    assert.equal(lines.length, 2);
  });
});
