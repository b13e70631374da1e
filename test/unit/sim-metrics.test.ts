/**
 * The simulator's quality metrics (src/sim/metrics.ts) on tiny cases whose
 * figures are worked out by hand in the comments.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QualityMetrics, type StepObservation } from '../../src/sim/metrics.ts';

type Scalars = Omit<StepObservation, 'load' | 'capacity' | 'alive'>;

function obs(o: Partial<Scalars> & { load: number[]; capacity: number[]; alive?: number[] }): StepObservation {
  return {
    t: o.t ?? 0,
    dt: o.dt ?? 10,
    load: Float64Array.from(o.load),
    capacity: Float64Array.from(o.capacity),
    alive: Uint8Array.from(o.alive ?? o.load.map(() => 1)),
    rttSum: o.rttSum ?? 0,
    served: o.served ?? 0,
    changes: o.changes ?? 0,
    queries: o.queries ?? 0,
  };
}

describe('sim metrics: overload while another cluster had room (b)', () => {
  const cases: { name: string; load: number[]; capacity: number[]; alive?: number[]; want: number }[] = [
    // c0 at 15/10 over, c1 at 5/10 has room: one cluster for 10 s.
    { name: 'one over, other has room', load: [15, 5], capacity: [10, 10], want: 10 },
    // c1 exactly full has no room: overload with nowhere to go does not count.
    { name: 'other exactly full', load: [15, 10], capacity: [10, 10], want: 0 },
    // The only other cluster is lost: its "room" does not count.
    { name: 'other lost', load: [15, 3], capacity: [10, 10], alive: [1, 0], want: 0 },
    // Two over, a third with room: 2 clusters x 10 s.
    { name: 'two over, one with room', load: [12, 11, 1], capacity: [10, 10, 10], want: 20 },
    { name: 'none over', load: [9, 9], capacity: [10, 10], want: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const m = new QualityMetrics(100, []);
      m.observe(obs({ load: c.load, capacity: c.capacity, ...(c.alive ? { alive: c.alive } : {}) }));
      assert.equal(m.summary().overloadClusterSeconds, c.want);
    });
  }
});

describe('sim metrics: utilization spread (e) and unserved demand', () => {
  it('spread is max - min and std is the population deviation, time-weighted', () => {
    const m = new QualityMetrics(100, []);
    // utils 1.5 and 0.5: spread 1.0, std 0.5, for 10 s; then 0.5 and 0.5: spread 0, std 0, for 30 s.
    m.observe(obs({ load: [15, 5], capacity: [10, 10], dt: 10 }));
    m.observe(obs({ load: [5, 5], capacity: [10, 10], dt: 30, t: 10 }));
    const s = m.summary();
    assert.equal(s.utilSpreadMean, (1.0 * 10 + 0 * 30) / 40);
    assert.equal(s.utilStdMean, (0.5 * 10) / 40);
  });
  it('a lost cluster is left out of the spread and its load counts as unserved', () => {
    const m = new QualityMetrics(100, []);
    m.observe(obs({ load: [4, 3, 8], capacity: [10, 10, 10], alive: [1, 0, 1], dt: 10 }));
    const s = m.summary();
    assert.ok(Math.abs(s.utilSpreadMean - 0.4) < 1e-12); // 0.8 - 0.4
    assert.equal(s.unservedDemandSeconds, 30); // 3 x 10 s
  });
});

describe('sim metrics: RTT against the oracle (a)', () => {
  it('means are demand-weighted over time; the ratio uses the oracle sample instants only', () => {
    const m = new QualityMetrics(100, []);
    // 10 served at mean 30 ms for 10 s, then 10 served at mean 10 ms for 10 s: mean 20 ms.
    m.observe(obs({ load: [10], capacity: [20], rttSum: 300, served: 10, dt: 10 }));
    m.observe(obs({ load: [10], capacity: [20], rttSum: 100, served: 10, dt: 10, t: 10 }));
    // One oracle sample at the first step: the policy 300/10 = 30 ms there, the oracle 200/10 = 20 ms.
    m.oracleSample(300, 10, 200, 10);
    const s = m.summary();
    assert.equal(s.meanRttMs, 20);
    assert.equal(s.meanRttAtOracleSamplesMs, 30);
    assert.equal(s.oracleRttMs, 20);
    assert.equal(s.rttVsOracle, 1.5);
  });
});

describe('sim metrics: stability in steady state (c)', () => {
  it('changes per minute as a share of prefixes, steady steps only', () => {
    const m = new QualityMetrics(100, [{ from: 0, to: 60 }]);
    m.observe(obs({ load: [1], capacity: [2], t: 30, dt: 20, changes: 50 })); // excluded (warm-up)
    m.observe(obs({ load: [1], capacity: [2], t: 60, dt: 20, changes: 5 })); // 5/100 per 20 s = 0.15 /min
    m.observe(obs({ load: [1], capacity: [2], t: 80, dt: 20, changes: 1 })); // 0.03 /min
    const s = m.summary();
    assert.ok(Math.abs(s.steadyChangesPerMinuteShare - 0.09) < 1e-12);
    assert.ok(Math.abs(s.steadyChangesPerMinuteShareMax - 0.15) < 1e-12);
    assert.equal(s.steadySeconds, 40);
  });
});

describe('sim metrics: recovery after a cluster loss (d)', () => {
  it('the first step at which nothing is answered with the lost cluster', () => {
    const m = new QualityMetrics(100, []);
    m.lost(1, 95);
    m.observe(obs({ load: [5, 4], capacity: [10, 10], alive: [1, 0], t: 100 }));
    m.observe(obs({ load: [8, 1], capacity: [10, 10], alive: [1, 0], t: 110 }));
    m.observe(obs({ load: [9, 0], capacity: [10, 10], alive: [1, 0], t: 120 }));
    m.observe(obs({ load: [9, 0], capacity: [10, 10], alive: [1, 0], t: 130 }));
    assert.deepEqual(m.summary().recoverySeconds, [{ cluster: 1, at: 95, seconds: 25 }]);
  });
  it('never recovered within the run: null', () => {
    const m = new QualityMetrics(100, []);
    m.lost(0, 0);
    m.observe(obs({ load: [1, 0], capacity: [10, 10], alive: [0, 1], t: 0 }));
    assert.deepEqual(m.summary().recoverySeconds, [{ cluster: 0, at: 0, seconds: null }]);
  });
});
