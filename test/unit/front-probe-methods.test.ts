/**
 * The per-target probe method choice (src/front/probe_methods.ts) on a fake
 * clock with fake pingers: which methods one ping tries, in which order,
 * what it remembers, when it retries the cheaper method, the LRU bound and
 * the counters. Table-driven: each case is a sequence of pings, each at a
 * time, against a network that says which methods a target answers then.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pinger } from '../../src/front/icmp_echo.ts';
import { MethodPinger } from '../../src/front/probe_methods.ts';

const METHODS = ['icmp', 'tcp:443', 'tcp:53'] as const;
type Method = (typeof METHODS)[number];

/** RTT each method answers with (distinct, so the result names its method). */
const RTT: Record<Method, number> = { icmp: 11, 'tcp:443': 22, 'tcp:53': 33 };

interface Step {
  /** Clock (ms) at the ping. */
  readonly at: number;
  readonly target: string;
  /** The methods the target answers at this step. */
  readonly answers: readonly Method[];
  /** Methods tried, in order. */
  readonly tried: readonly Method[];
  /** The RTT the ping is answered with (null: nothing answered). */
  readonly rtt: number | null;
  /** The method remembered for the target afterwards. */
  readonly remembered: Method | undefined;
}

function harness(memory = 100, retryCheaperMs = 60_000): { mp: MethodPinger; tried: Method[]; set: (target: string, answers: readonly Method[]) => void; clock: { now: number } } {
  const clock = { now: 0 };
  const answers = new Map<string, readonly Method[]>();
  const tried: Method[] = [];
  const fake = (m: Method): Pinger => ({
    ping: (target, done) => {
      tried.push(m);
      done((answers.get(target) ?? []).includes(m) ? RTT[m] : null);
    },
    close: () => undefined,
  });
  const mp = new MethodPinger(
    METHODS.map((name) => ({ name, pinger: fake(name) })),
    { memory, retryCheaperMs, timeoutMs: 500 },
    () => clock.now,
  );
  return { mp, tried, set: (t, a) => answers.set(t, a), clock };
}

const cases: { name: string; steps: Step[] }[] = [
  {
    name: 'a target that answers ICMP is probed by ICMP only',
    steps: [
      { at: 0, target: 'a', answers: ['icmp', 'tcp:443'], tried: ['icmp'], rtt: 11, remembered: 'icmp' },
      // Remembered at the first method: no cheaper retry ever, however late.
      { at: 10_000_000, target: 'a', answers: ['icmp'], tried: ['icmp'], rtt: 11, remembered: 'icmp' },
    ],
  },
  {
    name: 'ICMP dropped: TCP 443 answers and is tried first from then on',
    steps: [
      { at: 0, target: 'a', answers: ['tcp:443', 'tcp:53'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 1000, target: 'a', answers: ['tcp:443', 'tcp:53'], tried: ['tcp:443'], rtt: 22, remembered: 'tcp:443' },
    ],
  },
  {
    name: 'only port 53 answers (a resolver): icmp, 443, 53 once, then 53 directly',
    steps: [
      { at: 0, target: 'r', answers: ['tcp:53'], tried: ['icmp', 'tcp:443', 'tcp:53'], rtt: 33, remembered: 'tcp:53' },
      { at: 5, target: 'r', answers: ['tcp:53'], tried: ['tcp:53'], rtt: 33, remembered: 'tcp:53' },
    ],
  },
  {
    name: 'the cheaper method is retried after retryCheaperMs, and kept when it answers again',
    steps: [
      { at: 0, target: 'a', answers: ['tcp:443'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 59_999, target: 'a', answers: ['icmp', 'tcp:443'], tried: ['tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 60_000, target: 'a', answers: ['icmp', 'tcp:443'], tried: ['icmp'], rtt: 11, remembered: 'icmp' },
      { at: 60_001, target: 'a', answers: ['icmp', 'tcp:443'], tried: ['icmp'], rtt: 11, remembered: 'icmp' },
    ],
  },
  {
    name: 'a cheaper retry that fails falls through to the remembered method; the next retry is a period later',
    steps: [
      { at: 0, target: 'a', answers: ['tcp:443'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 60_000, target: 'a', answers: ['tcp:443'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 100_000, target: 'a', answers: ['tcp:443'], tried: ['tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 120_000, target: 'a', answers: ['tcp:443'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
    ],
  },
  {
    name: 'the remembered method stops answering: the later ones, then the earlier ones, are tried',
    steps: [
      { at: 0, target: 'a', answers: ['tcp:443'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 10, target: 'a', answers: ['tcp:53'], tried: ['tcp:443', 'tcp:53'], rtt: 33, remembered: 'tcp:53' },
      { at: 20, target: 'a', answers: ['icmp'], tried: ['tcp:53', 'icmp'], rtt: 11, remembered: 'icmp' },
    ],
  },
  {
    name: 'a target that answers nothing: every method once, null, nothing remembered; an earlier memory is kept',
    steps: [
      { at: 0, target: 'x', answers: [], tried: ['icmp', 'tcp:443', 'tcp:53'], rtt: null, remembered: undefined },
      { at: 10, target: 'y', answers: ['tcp:443'], tried: ['icmp', 'tcp:443'], rtt: 22, remembered: 'tcp:443' },
      { at: 20, target: 'y', answers: [], tried: ['tcp:443', 'tcp:53', 'icmp'], rtt: null, remembered: 'tcp:443' },
    ],
  },
];

describe('per-target probe method choice', () => {
  for (const c of cases) {
    it(c.name, () => {
      const h = harness();
      for (const [i, s] of c.steps.entries()) {
        h.clock.now = s.at;
        h.set(s.target, s.answers);
        h.tried.length = 0;
        let got: number | null | undefined;
        h.mp.ping(s.target, (r) => {
          got = r;
        });
        assert.deepEqual(h.tried, s.tried, `step ${i}: methods tried`);
        assert.equal(got, s.rtt, `step ${i}: result`);
        assert.equal(h.mp.methodOf(s.target), s.remembered, `step ${i}: remembered`);
      }
    });
  }

  it('counts per method what was sent, answered and lost, the fallbacks and the cheaper retries', () => {
    const h = harness(100, 1000);
    h.set('a', ['tcp:443']);
    h.set('b', ['icmp']);
    h.set('c', []);
    const ping = (t: string): void => {
      h.mp.ping(t, () => undefined);
    };
    ping('a'); // icmp lost, 443 answers (fell back)
    ping('a'); // 443 answers
    ping('b'); // icmp answers
    ping('c'); // all three lost
    h.clock.now = 1000;
    ping('a'); // cheaper retry: icmp lost, 443 answers (a fallback: this run started at icmp)
    const counts = Object.fromEntries([...h.mp.counters].map(([k, v]) => [k, { ...v }]));
    assert.deepEqual(counts, {
      icmp: { sent: 4, answered: 1, timeouts: 3 },
      'tcp:443': { sent: 4, answered: 3, timeouts: 1 },
      'tcp:53': { sent: 1, answered: 0, timeouts: 1 },
    });
    assert.equal(h.mp.fellBack, 2);
    assert.equal(h.mp.cheaperRetries, 1);
    assert.deepEqual(h.mp.remembered(), { icmp: 1, 'tcp:443': 1, 'tcp:53': 0 });
    assert.deepEqual(
      h.mp.recent(10, 1000).map((r) => [r.target, r.method]),
      [
        ['a', 'tcp:443'],
        ['b', 'icmp'],
      ],
    );
    assert.equal(h.mp.worstCaseMs, 1500);
  });

  it('remembers at most `memory` targets, forgetting the least recently answered', () => {
    const h = harness(2);
    for (const t of ['a', 'b', 'c']) h.set(t, ['tcp:53']);
    for (const t of ['a', 'b']) h.mp.ping(t, () => undefined);
    h.mp.ping('a', () => undefined); // a is now the most recent
    h.mp.ping('c', () => undefined); // evicts b
    assert.equal(h.mp.evicted, 1);
    assert.deepEqual(['a', 'b', 'c'].map((t) => h.mp.methodOf(t)), ['tcp:53', undefined, 'tcp:53']);
    h.tried.length = 0;
    h.mp.ping('b', () => undefined);
    assert.deepEqual(h.tried, ['icmp', 'tcp:443', 'tcp:53'], 'a forgotten target starts from the first method');
  });

  it('answers every ping exactly once, also with pingers that answer late or twice, and null after close', () => {
    const pending: ((r: number | null) => void)[] = [];
    const late: Pinger = {
      ping: (_t, done) => {
        pending.push(done);
      },
      close: () => undefined,
    };
    const mp = new MethodPinger(
      [
        { name: 'icmp', pinger: late },
        { name: 'tcp:443', pinger: late },
      ],
      { memory: 10, retryCheaperMs: 1000, timeoutMs: 100 },
      () => 0,
    );
    const results: (number | null)[] = [];
    mp.ping('a', (r) => results.push(r));
    assert.equal(pending.length, 1);
    pending[0]!(null);
    pending[0]!(5); // a second answer from the first method is ignored
    assert.equal(pending.length, 2, 'the second method was tried once');
    pending[1]!(7);
    assert.deepEqual([...results], [7]);
    mp.close();
    mp.ping('a', (r) => results.push(r));
    assert.deepEqual(results, [7, null]);
  });
});
