/**
 * FlowEnds.backlogged(): whether destroy events may still wait in their
 * socket, which the daemon's resync yields to (daemon.ts #yieldToEvents).
 * A read stopped at its bound (EVENT_BATCH events) means more may wait; a
 * shorter one, or a full one that no further batch followed within
 * BACKLOG_FRESH_MS (the reader takes a batch every loop turn while there is
 * a backlog), means none do. And FlowEnds.answerOverruns(): when an event
 * overrun calls for a resync (never while one runs).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConntrackEventBatch } from '../../src/conntrack/events.ts';
import { EV_META_WORDS } from '../../src/conntrack/layout.ts';
import { BACKLOG_FRESH_MS, EVENT_BATCH, FlowEnds, RESYNC_MIN_GAP_MS } from '../../src/front/flow-ends.ts';

/** Events of no service of ours (mark 0: foreign), `count` of them. */
function batchOf(count: number): ConntrackEventBatch {
  const b = new ConntrackEventBatch(new Uint32Array(EVENT_BATCH * EV_META_WORDS));
  b.count = count;
  return b;
}

function ends(): FlowEnds {
  return new FlowEnds({ table: undefined as never, serviceOf: () => -1, serviceOf6: () => -1 });
}

describe('FlowEnds.backlogged', () => {
  const cases: { name: string; batches: [at: number, count: number][]; now: number; want: boolean }[] = [
    { name: 'no batch read yet', batches: [], now: 0, want: false },
    { name: 'a full batch just read', batches: [[1000, EVENT_BATCH]], now: 1000, want: true },
    { name: 'a full batch, just under the freshness bound', batches: [[1000, EVENT_BATCH]], now: 1000 + BACKLOG_FRESH_MS - 0.001, want: true },
    { name: 'a full batch at the bound: no batch followed, the socket was emptied', batches: [[1000, EVENT_BATCH]], now: 1000 + BACKLOG_FRESH_MS, want: false },
    { name: 'one short of full', batches: [[1000, EVENT_BATCH - 1]], now: 1000, want: false },
    { name: 'full, then a shorter read: drained', batches: [[1000, EVENT_BATCH], [1001, 3]], now: 1001, want: false },
    { name: 'short, then full: backlogged again', batches: [[1000, 3], [1005, EVENT_BATCH]], now: 1010, want: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const e = ends();
      for (const [at, count] of c.batches) e.handle(batchOf(count), at);
      assert.equal(e.backlogged(c.now), c.want);
      assert.equal(e.counts.foreign, c.batches.reduce((n, [, k]) => n + k, 0), 'every event handled');
    });
  }
});

describe('FlowEnds.answerOverruns: when an event overrun calls for a resync', () => {
  // Steps on one FlowEnds: [settled overruns, now ms, a resync running] -> due.
  const cases: { name: string; steps: [settled: number, now: number, running: boolean, due: boolean][] }[] = [
    { name: 'no overrun: never', steps: [[0, 1000, false, false]] },
    { name: 'a settled overrun: once', steps: [[1, 1000, false, true], [1, 2000, false, false]] },
    {
      name: 'settled while a resync runs: not then (the running read may have seen flows whose events were lost), but as soon as it ends',
      steps: [[1, 1000, true, false], [1, 2000, true, false], [1, 3000, false, true], [1, 4000, false, false]],
    },
    { name: 'another overrun within RESYNC_MIN_GAP_MS: waits for the gap', steps: [[1, 1000, false, true], [2, 1000 + RESYNC_MIN_GAP_MS - 1, false, false], [2, 1000 + RESYNC_MIN_GAP_MS, false, true]] },
    { name: 'several overruns settled at once: one resync', steps: [[3, 1000, false, true], [3, 1000 + RESYNC_MIN_GAP_MS, false, false]] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const e = ends();
      c.steps.forEach(([settled, now, running, due], i) => {
        assert.equal(e.answerOverruns(settled, now, running), due, `step ${String(i)}`);
      });
    });
  }
});
