// Checkpoint queues and evaluation (src/shaping/queue.ts, shaper.ts) on a
// fake clock: exact admitted / delayed / rejected schedules for bursts, the
// head-timer hand-over, concurrency release, retransmitted SYNs.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkpointSchema, type CheckpointConfig } from '../../src/shaping/config.ts';
import { Outcome, Shaper } from '../../src/shaping/shaper.ts';
import type { Checkpoint } from '../../src/shaping/checkpoint.ts';

/** An IPv4 client's address words (checkpoints key IPv4 clients by the number; the words serve IPv6). */
const V4_WORDS = new Uint32Array(4);

const OUT = ['pass', 'held', 'reject', 'drop', 'notarget', 'retransmit'];
const OVERFLOW_BASE = 0x800;

function rule(r: Record<string, unknown>): CheckpointConfig {
  return checkpointSchema.parse(r);
}

/** A Shaper with fake timers; settle() and begin() results are logged as [id, outcome, time]. */
class Harness {
  readonly shaper: Shaper;
  readonly log: [number, string, number][] = [];
  readonly armed = new Map<Checkpoint, number>();
  readonly armLog: [string, number][] = [];
  now = 0;
  #conn = 0;

  constructor(opts: { service?: CheckpointConfig[]; cluster?: CheckpointConfig[]; server?: CheckpointConfig[]; maxHeld?: number; servers?: number }) {
    const servers = Array.from({ length: opts.servers ?? 1 }, () => ({ checkpoints: opts.server ?? [] }));
    this.shaper = new Shaper(
      { cluster: opts.cluster ?? [], services: [{ checkpoints: opts.service ?? [], servers }], overflow: ['cluster2'] },
      {
        maxHeld: opts.maxHeld ?? 64,
        connections: 1024,
        overflowBase: OVERFLOW_BASE,
        scheduler: (index) => ({
          arm: (at) => {
            const cp = this.shaper.all[index]!;
            this.armLog.push([cp.name, at]);
            if (at === Infinity) this.armed.delete(cp);
            else this.armed.set(cp, at);
          },
        }),
      },
    );
    this.shaper.host = {
      choose: () => 0,
      settle: (slot, outcome, now) => {
        this.log.push([this.shaper.pool.id[slot] ?? -1, OUT[outcome] ?? '?', now]);
        if (outcome === Outcome.Pass) this.shaper.commit(slot, this.#conn++, now);
      },
    };
  }

  /** A SYN: id doubles as the client port; src is the client address. */
  syn(id: number, src = 0x0a000001, port = id): number {
    const out = this.shaper.begin(id, src * 0x10000 + port, src, V4_WORDS, 80, 0, this.now);
    if (out !== Outcome.Held && out !== Outcome.Retransmit) this.log.push([id, OUT[out] ?? '?', this.now]);
    if (out === Outcome.Pass) {
      const conn = this.#conn++;
      this.shaper.commit(this.shaper.pool.scratch, conn, this.now);
      return conn;
    }
    return -1;
  }

  /** Advances the fake clock to `t`, firing due queue timers at their armed times, in order. */
  run(t: number): void {
    for (let guard = 0; guard < 10_000; guard++) {
      let next: Checkpoint | undefined;
      let at = Infinity;
      for (const [cp, a] of this.armed) if (a < at) [next, at] = [cp, a];
      if (next === undefined || at > t) break;
      this.armed.delete(next);
      this.now = at;
      next.queue!.fire(at);
    }
    this.now = t;
  }
}

describe('rate-limit queue', () => {
  it('burst of 10 at 5/s, queue 3: 5 pass, 3 delayed one by one, 2 reset', () => {
    const h = new Harness({ service: [rule({ name: 'r', kind: 'rate-limit', criterion: 'none', limit: 5, queue: { maxLength: 3, maxDelayMs: 1500 } })] });
    for (let id = 0; id < 10; id++) h.syn(id);
    h.run(3000);
    assert.deepEqual(h.log, [
      [0, 'pass', 0], [1, 'pass', 0], [2, 'pass', 0], [3, 'pass', 0], [4, 'pass', 0],
      [8, 'reject', 0], [9, 'reject', 0],
      [5, 'pass', 1001], [6, 'pass', 1201], [7, 'pass', 1401],
    ]);
    // Only the head held the timer: armed once for each new head in turn
    // (a fired timer is spent: nothing left to disarm when the queue empties).
    assert.deepEqual(h.armLog, [['r', 1001], ['r', 1201], ['r', 1401]]);
    const cp = h.shaper.all[0]!;
    assert.equal(cp.queue!.length, 0);
    assert.deepEqual(cp.queue!.counts, { enqueued: 3, refused: 2, admitted: 3, expired: 0 });
  });

  it('max delay: the head past its deadline is reset and hands the timer to the next', () => {
    const h = new Harness({ service: [rule({ name: 'r', kind: 'rate-limit', criterion: 'none', limit: 5, queue: { maxLength: 10, maxDelayMs: 1300 } })] });
    for (let id = 0; id < 7; id++) h.syn(id); // 5 pass, 5 and 6 wait (since 0)
    h.run(200);
    for (let id = 7; id < 9; id++) h.syn(id); // wait since 200
    h.run(5000);
    assert.deepEqual(h.log.slice(5), [
      [5, 'pass', 1001], [6, 'pass', 1201],
      [7, 'pass', 1401],
      [8, 'reject', 1500], // its counter time (1601) comes after its deadline 200 + 1300
    ]);
    // Each new head takes over the timer: counter times, then 8's deadline.
    assert.deepEqual(h.armLog, [['r', 1001], ['r', 1201], ['r', 1401], ['r', 1500]]);
  });

  it('heads past their deadline leave together when the timer fires', () => {
    const h = new Harness({ service: [rule({ name: 'r', kind: 'rate-limit', criterion: 'none', limit: 5, queue: { maxLength: 10, maxDelayMs: 1100 } })] });
    for (let id = 0; id < 8; id++) h.syn(id);
    h.run(3000);
    assert.deepEqual(h.log.slice(5), [[5, 'pass', 1001], [6, 'reject', 1100], [7, 'reject', 1100]]);
    assert.deepEqual(h.armLog, [['r', 1001], ['r', 1100]]);
  });

  it('keys queue separately: a second source under its limit is not delayed by the first', () => {
    const h = new Harness({ service: [rule({ name: 'src', kind: 'rate-limit', criterion: 'source', limit: 2, queue: { maxLength: 100, maxDelayMs: 5000 } })] });
    const A = 0x0a000001;
    const B = 0x0a000002;
    for (let id = 0; id < 4; id++) h.syn(id, A);
    h.now = 100;
    h.syn(10, B);
    h.run(400);
    h.syn(11, B);
    h.run(3000);
    assert.deepEqual(h.log, [
      [0, 'pass', 0], [1, 'pass', 0],
      [10, 'pass', 100], [11, 'pass', 400],
      [2, 'pass', 1001], [3, 'pass', 1501],
    ]);
  });

  it('a request waits at one checkpoint, then at the next', () => {
    const h = new Harness({
      service: [rule({ name: 'a', kind: 'rate-limit', criterion: 'none', limit: 2, queue: { maxDelayMs: 5000 } })],
      cluster: [rule({ name: 'b', kind: 'rate-limit', criterion: 'none', limit: 1, queue: { maxDelayMs: 5000 } })],
    });
    for (let id = 0; id < 3; id++) h.syn(id);
    h.run(5000);
    // a: 0,1 at 0, 2 at 1001. b: 0 at 0; 1 waits until 1001 (1/s), 2 then waits behind it until 2001.
    assert.deepEqual(h.log, [[0, 'pass', 0], [1, 'pass', 1001], [2, 'pass', 2001]]);
  });

  it('a retransmitted SYN of a held connection does not queue twice', () => {
    const h = new Harness({ service: [rule({ name: 'r', kind: 'rate-limit', criterion: 'none', limit: 1, queue: { maxDelayMs: 5000 } })] });
    h.syn(0);
    h.syn(1);
    assert.equal(h.shaper.begin(1, 0x0a000001 * 0x10000 + 1, 0x0a000001, V4_WORDS, 80, 0, 10), Outcome.Retransmit);
    assert.equal(h.shaper.all[0]!.queue?.length, 1);
    h.run(5000);
    assert.deepEqual(h.log, [[0, 'pass', 0], [1, 'pass', 1001]]);
    assert.equal(h.shaper.counts.retransmits, 1);
  });

  it('the held-request pool bound rejects beyond it (drop when configured)', () => {
    const h = new Harness({ maxHeld: 2, service: [rule({ name: 'r', kind: 'rate-limit', criterion: 'none', limit: 1, reject: 'drop' })] });
    for (let id = 0; id < 4; id++) h.syn(id);
    assert.deepEqual(h.log, [[0, 'pass', 0], [3, 'drop', 0]]);
    assert.equal(h.shaper.counts.poolFull, 1);
  });
});

describe('concurrency-limit queue', () => {
  it('waiters proceed as connections end; the rest time out', () => {
    const h = new Harness({ service: [rule({ name: 'c', kind: 'concurrency-limit', criterion: 'source', limit: 2, queue: { maxDelayMs: 1000 } })] });
    const c0 = h.syn(0);
    h.syn(1);
    h.syn(2);
    h.syn(3);
    assert.deepEqual(h.armLog, [['c', 1000]]); // the head's deadline only: no counter time
    h.now = 50;
    h.shaper.releaseConnection(c0, 50);
    h.shaper.releaseConnection(c0, 50); // twice: no double release
    h.run(2000);
    assert.deepEqual(h.log, [[0, 'pass', 0], [1, 'pass', 0], [2, 'pass', 50], [3, 'reject', 1000]]);
    const cp = h.shaper.all[0]!;
    const e = cp.table.find(0x0a000001);
    assert.equal(cp.table.concurrent[e], 2);
  });

  it('a rejection further on gives back the count taken here', () => {
    const h = new Harness({
      service: [rule({ name: 'c', kind: 'concurrency-limit', criterion: 'none', limit: 5 })],
      cluster: [rule({ name: 'deny', kind: 'counter', criterion: 'none', when: { destinationPort: [80] }, action: 'reject' })],
    });
    h.syn(0);
    assert.deepEqual(h.log, [[0, 'reject', 0]]);
    assert.equal(h.shaper.all[0]!.table.concurrent[0], 0);
    assert.equal(h.shaper.all[1]!.table.concurrent[0], 0);
  });
});

describe('counter conditions and steering', () => {
  it('a source over 3 per period in its counter is steered to the overflow cluster', () => {
    const h = new Harness({
      service: [
        rule({ name: 'src', kind: 'counter', criterion: 'source' }),
        rule({ name: 'heavy', kind: 'counter', criterion: 'none', when: { counter: { name: 'src', measure: 'rate', above: 3 } }, action: { steer: 'cluster2' } }),
      ],
    });
    const targets: number[] = [];
    for (let id = 0; id < 6; id++) {
      h.syn(id, 0x0a000001);
      targets.push(h.shaper.pool.target[h.shaper.pool.scratch]!);
    }
    h.syn(9, 0x0a000002);
    targets.push(h.shaper.pool.target[h.shaper.pool.scratch]!);
    assert.deepEqual(targets, [0, 0, 0, OVERFLOW_BASE, OVERFLOW_BASE, OVERFLOW_BASE, 0]);
    assert.equal(h.shaper.counts.steered, 3);
  });

  it('conditions on source prefixes select which requests a rule applies to', () => {
    const h = new Harness({ service: [rule({ name: 'r', kind: 'rate-limit', criterion: 'source-prefix', prefixLength: 24, limit: 1, queue: { maxLength: 0 }, when: { sourceIn: ['10.0.0.0/24'] } })] });
    h.syn(0, 0x0a000001);
    h.syn(1, 0x0a000002); // same /24: over its limit, queue length 0: reset
    h.syn(2, 0x0a000102); // 10.0.1.2: not in the list
    h.syn(3, 0x0a000102);
    assert.deepEqual(h.log.map((l) => l[1]), ['pass', 'reject', 'pass', 'pass']);
  });
});
