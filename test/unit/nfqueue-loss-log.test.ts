import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QueueLossLog, type WarnLog } from '../../src/nfqueue/loss-log.ts';

function recorder(): { lines: Record<string, unknown>[]; log: WarnLog } {
  const lines: Record<string, unknown>[] = [];
  return { lines, log: { warn: (o) => lines.push(o) } };
}

describe('QueueLossLog', () => {
  it('writes nothing while nothing is lost or the queue is not open', () => {
    const r = recorder();
    const l = new QueueLossLog(r.log, 10_000);
    assert.equal(l.poll(3, undefined, 0, 0), false);
    assert.equal(l.poll(3, 0, 0, 1000), false);
    assert.equal(l.poll(3, 0, 0, 50_000), false);
    assert.equal(r.lines.length, 0);
  });

  it('one line per interval at most, carrying every loss since the previous line', () => {
    const r = recorder();
    const l = new QueueLossLog(r.log, 10_000);
    assert.equal(l.poll(3, 5, 1, 1000), true);
    assert.equal(l.poll(3, 9, 2, 2000), false); // within the interval
    assert.equal(l.poll(3, 12, 3, 9000), false);
    assert.equal(l.poll(3, 12, 3, 11_000), true);
    assert.equal(l.poll(3, 12, 3, 30_000), false); // nothing new
    assert.deepEqual(r.lines, [
      { queue: 3, lost: 5, lostTotal: 5, overruns: 1 },
      { queue: 3, lost: 7, lostTotal: 12, overruns: 3 },
    ]);
  });

  it('a reopened queue (its count back at a lower value) counts from zero', () => {
    const r = recorder();
    const l = new QueueLossLog(r.log, 0);
    l.poll(3, 100, 1, 0);
    l.poll(3, 4, 1, 1);
    assert.deepEqual(r.lines.map((x) => x['lost']), [100, 4]);
  });
});
