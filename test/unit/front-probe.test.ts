/**
 * receive_probe_for_rtt on a fake clock with a fake Pinger: echo counts and
 * spacing, means and losses, dedupe and bounds, the global rate limit,
 * report splitting, and the config's cap on a request's count.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { decodeMessage, encodeMessage } from '../../src/control/codec.ts';
import { MAX_LIST, MESSAGE_TYPES, rttResults, type Body, type MessageType } from '../../src/control/messages.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import type { Pinger } from '../../src/front/icmp_echo.ts';
import { resultMessages, RttProber, type ProbeOptions, type ProbeResult } from '../../src/front/receive_probe_for_rtt.ts';

/** What the fake network does with the n-th echo (0-based) to a target. */
type Reply = number | 'lost' | 'error' | 'sync';
type ReplyFn = (target: string, n: number) => Reply;

interface Ping {
  readonly target: string;
  readonly at: number;
}

/**
 * A fake clock with an event queue, a fake Pinger on it, and the prober.
 * run() advances the clock to the next reply or to the prober's nextDue,
 * whichever is first, as FrontControl's timer chain does; or, with a step,
 * ticks at every step regardless (a prober ticked more often than it asks
 * must keep its limits).
 */
class Sim {
  now = 0;
  readonly pings: Ping[] = [];
  readonly prober: RttProber;
  #events: { at: number; fire: () => void }[] = [];
  readonly #sent = new Map<string, number>();

  constructor(opts: Partial<ProbeOptions>, reply: ReplyFn) {
    const pinger: Pinger = {
      ping: (target, done) => {
        this.pings.push({ target, at: this.now });
        const n = this.#sent.get(target) ?? 0;
        this.#sent.set(target, n + 1);
        const r = reply(target, n);
        if (r === 'sync') done(null);
        else if (r === 'error') {
          this.#at(this.now + 1, () => {
            done(null);
          });
        } else if (r !== 'lost') {
          this.#at(this.now + r, () => {
            done(r);
          });
        }
      },
      close: () => undefined,
    };
    this.prober = new RttProber('c1', { count: 3, spacingMs: 200, timeoutMs: 1000, maxTargets: 4096, maxPerSecond: 200, ...opts }, pinger, 0, () => this.now);
  }

  #at(at: number, fire: () => void): void {
    this.#events.push({ at, fire });
    this.#events.sort((a, b) => a.at - b.at);
  }

  request(targets: string[], count = 3): ReturnType<RttProber['receive']> {
    return this.prober.receive({ targets, count }, this.now);
  }

  /** Runs until idle (mustFinish) or for limitMs at most. */
  run(step?: number, limitMs = 600_000, mustFinish = true): void {
    const end = this.now + limitMs;
    for (let first = true; ; first = false) {
      const due = this.prober.nextDue(this.now);
      const ev = this.#events[0]?.at;
      if (due === undefined && ev === undefined) return;
      const next = step !== undefined ? this.now + step : Math.min(due ?? Infinity, ev ?? Infinity);
      // After a tick the prober never asks for another at the same instant (that would spin its timer).
      assert.ok(next > this.now || (first && next === this.now), `the clock moves on (${next} after ${this.now})`);
      if (next > end) {
        assert.ok(!mustFinish, 'prober still busy at the end of the simulation');
        return;
      }
      this.now = next;
      while (this.#events[0] && this.#events[0].at <= this.now) this.#events.shift()?.fire();
      this.prober.tick(this.now);
    }
  }

  results(): ProbeResult[] {
    const bodies = this.prober.drainResults();
    for (const b of bodies) rttResults.parse(b); // every body is a valid message
    return bodies.flatMap((b) => b.results);
  }
}

const T = (i: number): string => `198.18.${10 + Math.floor(i / 250)}.${(i % 250) + 2}`;

describe('receive_probe_for_rtt: one target', () => {
  const rows: { name: string; replies: Reply[]; want: Omit<ProbeResult, 'target'>; timeouts: number }[] = [
    { name: 'all answered: mean of the replies', replies: [10, 20, 30], want: { sent: 3, received: 3, rttMs: 20 }, timeouts: 0 },
    { name: 'none answered: null', replies: ['lost', 'lost', 'lost'], want: { sent: 3, received: 0, rttMs: null }, timeouts: 3 },
    { name: 'partial loss: mean of those that came back', replies: [10, 'lost', 31], want: { sent: 3, received: 2, rttMs: 20.5 }, timeouts: 1 },
    { name: 'errors (unreachable) count as lost', replies: ['error', 40, 'error'], want: { sent: 3, received: 1, rttMs: 40 }, timeouts: 2 },
    { name: 'a pinger answering synchronously', replies: ['sync', 'sync', 'sync'], want: { sent: 3, received: 0, rttMs: null }, timeouts: 3 },
    { name: 'a reply after the timeout is a loss', replies: [1500, 20, 20], want: { sent: 3, received: 2, rttMs: 20 }, timeouts: 1 },
    { name: 'fractional RTTs are averaged, not rounded to ms', replies: [20.25, 20.5, 21], want: { sent: 3, received: 3, rttMs: 20.583 }, timeouts: 0 },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const sim = new Sim({}, (_t, n) => row.replies[n] ?? 'lost');
      sim.request(['198.18.11.2']);
      sim.run();
      assert.deepEqual(sim.results(), [{ target: '198.18.11.2', ...row.want }]);
      assert.equal(sim.prober.counters.timeouts, row.timeouts);
      assert.equal(sim.prober.counters.replies, row.want.received);
      assert.equal(sim.prober.pendingTargets, 0);
      assert.equal(sim.prober.nextDue(sim.now), undefined, 'idle: no timer needed');
    });
  }

  it('sends count echoes spacingMs apart; finishes when the last one is answered', () => {
    const sim = new Sim({ spacingMs: 250 }, () => 20);
    sim.request(['198.18.11.2'], 3);
    assert.equal(sim.prober.status().queued, 1);
    sim.run();
    assert.deepEqual(sim.pings.map((p) => p.at), [0, 250, 500]);
    assert.equal(sim.now, 520, 'finished with the last reply');
  });

  it('a lost echo expires at timeoutMs after it was sent', () => {
    const sim = new Sim({ timeoutMs: 700 }, (_t, n) => (n === 2 ? 'lost' : 5));
    sim.request(['198.18.11.2']);
    sim.run();
    assert.equal(sim.now, 400 + 700);
    assert.deepEqual(sim.results(), [{ target: '198.18.11.2', sent: 3, received: 2, rttMs: 5 }]);
  });
});

describe('receive_probe_for_rtt: results shared across DNS servers (dedupMs)', () => {
  // Each row: a first request at 0 (probed: 3 echoes of 20 ms, finished at 420),
  // the report drained, then a second request (another DNS server) at `again`.
  const rows: { name: string; dedupMs: number; again: number; drainFirst: boolean; echoes: number; second: 'cached' | 'queued' | 'deduped'; reported: number }[] = [
    { name: 'within dedupMs: answered from the cache, no new echo, the result reported again', dedupMs: 10_000, again: 5_000, drainFirst: true, echoes: 3, second: 'cached', reported: 1 },
    { name: 'at dedupMs after the finish: probed again', dedupMs: 10_000, again: 420 + 10_000, drainFirst: true, echoes: 6, second: 'queued', reported: 1 },
    { name: 'dedupMs 0 (off): probed again at once', dedupMs: 0, again: 5_000, drainFirst: true, echoes: 6, second: 'queued', reported: 1 },
    { name: 'the result still waits for its report: cached, not queued twice', dedupMs: 10_000, again: 500, drainFirst: false, echoes: 3, second: 'cached', reported: 1 },
    { name: 'still being probed: deduped as before', dedupMs: 10_000, again: 100, drainFirst: false, echoes: 3, second: 'deduped', reported: 1 },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const sim = new Sim({ dedupMs: row.dedupMs }, () => 20);
      sim.request(['198.18.11.2']);
      if (row.again < 420) {
        sim.run(row.again, row.again, false);
      } else {
        sim.run();
        assert.equal(sim.now, 420);
        if (row.drainFirst) assert.equal(sim.results().length, 1);
        sim.now = row.again;
      }
      const r = sim.request(['198.18.11.2']);
      assert.equal(r[row.second], 1, JSON.stringify(r));
      sim.run();
      assert.equal(sim.pings.length, row.echoes);
      const results = sim.results();
      assert.equal(results.length, row.reported);
      assert.deepEqual(results[0], { target: '198.18.11.2', sent: 3, received: 3, rttMs: 20 });
      const c = sim.prober.counters;
      assert.equal(c.requested, c.deduped + c.cached + c.dropped + c.finished + sim.prober.pendingTargets, 'the counts add up');
    });
  }

  it('the cache is bounded by maxTargets, the oldest evicted (counted)', () => {
    const sim = new Sim({ dedupMs: 10_000, maxTargets: 2 }, () => 20);
    for (const t of [T(0), T(1), T(2)]) {
      sim.request([t]);
      sim.run();
    }
    assert.equal(sim.prober.status().cachedResults, 2);
    assert.equal(sim.prober.counters.cacheEvicted, 1);
    sim.results();
    const r = sim.request([T(0), T(1), T(2)]);
    assert.deepEqual(r, { queued: 1, deduped: 0, cached: 2, dropped: 0 }, 'the oldest (T0) was evicted and is probed again');
  });
});

describe('receive_probe_for_rtt: the request count, capped by the config', () => {
  const rows: [config: number, request: number, echoes: number][] = [
    [3, 1, 1],
    [3, 3, 3],
    [3, 16, 3],
    [2, 5, 2],
    [16, 16, 16],
  ];
  for (const [config, request, echoes] of rows) {
    it(`config ${config}, request ${request}: ${echoes} echoes`, () => {
      const sim = new Sim({ count: config }, () => 10);
      sim.request(['198.18.11.2'], request);
      sim.run();
      assert.equal(sim.pings.length, echoes);
      assert.deepEqual(sim.results(), [{ target: '198.18.11.2', sent: echoes, received: echoes, rttMs: 10 }]);
    });
  }
});

describe('receive_probe_for_rtt: dedupe and bounds', () => {
  it('a target pending or in progress is not added again; a finished one is probed anew', () => {
    const sim = new Sim({}, () => 10);
    assert.deepEqual(sim.request(['198.18.11.2', '198.18.12.2', '198.18.11.2']), { queued: 2, deduped: 1, cached: 0, dropped: 0 });
    sim.prober.tick(0); // both in progress now
    assert.deepEqual(sim.request(['198.18.12.2', '198.18.13.2']), { queued: 1, deduped: 1, cached: 0, dropped: 0 });
    sim.run();
    assert.equal(sim.pings.length, 9, 'three targets x 3 echoes');
    assert.deepEqual(sim.results().map((r) => r.target), ['198.18.11.2', '198.18.12.2', '198.18.13.2']);
    sim.request(['198.18.11.2']);
    sim.run();
    assert.equal(sim.pings.length, 12);
    const c = sim.prober.counters;
    assert.deepEqual([c.requests, c.requested, c.deduped, c.dropped, c.finished], [3, 6, 2, 0, 4]);
  });

  it('at most maxTargets pending: the excess is dropped and counted', () => {
    const sim = new Sim({ maxTargets: 3 }, () => 10);
    assert.deepEqual(sim.request([T(0), T(1), T(2), T(3), T(4)]), { queued: 3, deduped: 0, cached: 0, dropped: 2 });
    assert.deepEqual(sim.request([T(5)]), { queued: 0, deduped: 0, cached: 0, dropped: 1 });
    sim.run();
    assert.deepEqual(sim.results().map((r) => r.target), [T(0), T(1), T(2)]);
    assert.equal(sim.prober.counters.dropped, 3);
    assert.deepEqual(sim.request([T(5)]), { queued: 1, deduped: 0, cached: 0, dropped: 0 }, 'room again once they finished');
  });

  it('at most maxResults wait for the report: the rest are dropped and counted', () => {
    const sim = new Sim({ maxResults: 2 }, () => 10);
    sim.request([T(0), T(1), T(2)], 1);
    sim.run();
    assert.equal(sim.results().length, 2);
    assert.equal(sim.prober.counters.resultsDropped, 1);
  });
});

describe('receive_probe_for_rtt: global rate limit', () => {
  // N targets x count echoes at maxPerSecond with a bucket of `burst`: the
  // last echo cannot leave before (N*count - burst) / maxPerSecond seconds,
  // and no one-second window holds more than maxPerSecond + burst echoes.
  const rows: { name: string; targets: number; count: number; maxPerSecond: number; burst?: number; step?: number }[] = [
    { name: '50 targets x 4 at 20/s, timer-driven', targets: 50, count: 4, maxPerSecond: 20 },
    { name: '50 targets x 4 at 20/s, ticked every ms', targets: 50, count: 4, maxPerSecond: 20, step: 1 },
    { name: '1000 targets x 3 at 200/s (defaults)', targets: 1000, count: 3, maxPerSecond: 200 },
    { name: '300 targets x 1 at 50/s, burst 1', targets: 300, count: 1, maxPerSecond: 50, burst: 1, step: 3 },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const sim = new Sim({ maxPerSecond: row.maxPerSecond, count: row.count, ...(row.burst !== undefined ? { burst: row.burst } : {}) }, () => 30);
      const burst = row.burst ?? Math.ceil(row.maxPerSecond / 10);
      sim.request(Array.from({ length: row.targets }, (_, i) => T(i)), row.count);
      sim.run(row.step);
      const total = row.targets * row.count;
      assert.equal(sim.pings.length, total);
      const last = sim.pings.at(-1)!.at;
      const floor = ((total - burst) / row.maxPerSecond) * 1000;
      assert.ok(last >= floor - 1e-6, `last echo at ${last} ms, the rate allows no earlier than ${floor} ms`);
      let lo = 0;
      for (let hi = 0; hi < sim.pings.length; hi++) {
        while (sim.pings[hi]!.at - sim.pings[lo]!.at >= 1000) lo++;
        assert.ok(hi - lo + 1 <= row.maxPerSecond + burst, `${hi - lo + 1} echoes within one second at ${sim.pings[hi]!.at} ms`);
      }
      // Spacing per target still holds under the limit.
      const byTarget = new Map<string, number[]>();
      for (const p of sim.pings) byTarget.set(p.target, [...(byTarget.get(p.target) ?? []), p.at]);
      for (const ats of byTarget.values()) for (let i = 1; i < ats.length; i++) assert.ok(ats[i]! - ats[i - 1]! >= 200);
      assert.equal(sim.results().length, row.targets);
    });
  }

  it('a flood of requests adds targets (bounded), not echoes per second', () => {
    const sim = new Sim({ maxPerSecond: 100, maxTargets: 1000 }, () => 10);
    for (let r = 0; r < 100; r++) sim.request(Array.from({ length: 50 }, (_, i) => T(r * 50 + i)), 3);
    assert.deepEqual([sim.prober.pendingTargets, sim.prober.counters.dropped], [1000, 4000]);
    sim.run(undefined, 5000, false);
    // 5 s at 100/s plus the bucket of 10.
    assert.ok(sim.pings.length <= 510, `${sim.pings.length} echoes in 5 s`);
    assert.ok(sim.pings.length >= 490, `${sim.pings.length} echoes in 5 s: the rate is used`);
  });
});

describe('receive_probe_for_rtt: reports', () => {
  it('drainResults splits at MAX_LIST and empties the queue', () => {
    const n = MAX_LIST + 10;
    const sim = new Sim({ maxPerSecond: 5000, maxTargets: 2 * MAX_LIST, spacingMs: 0 }, () => 1);
    sim.request(Array.from({ length: MAX_LIST }, (_, i) => T(i)), 1);
    sim.request(Array.from({ length: 10 }, (_, i) => T(MAX_LIST + i)), 1);
    sim.run();
    assert.equal(sim.prober.pendingResults, n);
    const bodies: Body<'rtt_results'>[] = sim.prober.drainResults();
    assert.deepEqual(bodies.map((b) => [b.cluster, b.results.length]), [['c1', MAX_LIST], ['c1', 10]]);
    for (const b of bodies) rttResults.parse(b);
    assert.deepEqual(sim.prober.drainResults(), []);
    assert.equal(sim.prober.counters.reported, n);
  });

  it('close() stops everything: no more echoes, late replies ignored, no timer needed', () => {
    const sim = new Sim({}, () => 50);
    sim.request([T(0), T(1)]);
    sim.prober.tick(0);
    assert.equal(sim.pings.length, 2);
    sim.prober.close();
    assert.equal(sim.prober.nextDue(0), undefined);
    sim.run(10, 2000);
    assert.equal(sim.pings.length, 2);
    assert.deepEqual(sim.prober.drainResults(), []);
    assert.deepEqual(sim.request([T(2)]), { queued: 0, deduped: 0, cached: 0, dropped: 0 });
  });
});

describe('receive_probe_for_rtt: IPv6 targets through the control messages', () => {
  it('a version-2 probe request with IPv6 targets is probed and reported, IPv4 results apart at version 1', () => {
    const now = 1_800_000_000_000;
    const all = new Set<MessageType>(MESSAGE_TYPES);
    const limits = { maxBytes: 1 << 20, maxAgeMs: 30_000, maxFutureMs: 5000 };
    // The DNS side's request, as it arrives: non-canonical IPv6 text becomes canonical, so a repeat is deduped.
    const req = encodeMessage('rtt_probe_request', 'dns1', { targets: ['2001:2:0:11:0:0:0:1', '198.18.11.2', '2001:2::12'], count: 2 }, now);
    assert.equal((JSON.parse(req[1]) as { v: number }).v, 2);
    const d = decodeMessage([Buffer.from(req[0]), Buffer.from(req[1])], limits, all, now);
    assert.ok(d.ok && d.message.type === 'rtt_probe_request');
    const body = d.message.body as Body<'rtt_probe_request'>;
    assert.deepEqual(body.targets, ['2001:2:0:11::1', '198.18.11.2', '2001:2::12']);
    const rtts: Record<string, number | 'lost'> = { '2001:2:0:11::1': 12, '198.18.11.2': 30, '2001:2::12': 'lost' };
    const sim = new Sim({}, (t) => rtts[t] ?? 'lost');
    sim.prober.receive(body, sim.now);
    assert.deepEqual(sim.prober.receive({ targets: ['2001:2:0:11::1'], count: 2 }, sim.now), { queued: 0, deduped: 1, cached: 0, dropped: 0 });
    sim.run();
    assert.deepEqual(new Set(sim.pings.map((p) => p.target)), new Set(['2001:2:0:11::1', '198.18.11.2', '2001:2::12']));
    const bodies = sim.prober.drainResults().flatMap(resultMessages);
    // The messages the front node publishes, decoded by a DNS server.
    const got = bodies.map((b) => {
      const [topic, text] = encodeMessage('rtt_results', 'c1', b, now);
      const r = decodeMessage([Buffer.from(topic), Buffer.from(text)], limits, all, now);
      assert.ok(r.ok);
      return { v: r.message.v, results: (r.message.body as Body<'rtt_results'>).results.map((x) => [x.target, x.received, x.rttMs]) };
    });
    assert.deepEqual(
      got.map((g) => ({ ...g, results: g.results.sort() })),
      [
        { v: 1, results: [['198.18.11.2', 2, 30]] },
        { v: 2, results: [['2001:2:0:11::1', 2, 12], ['2001:2::12', 0, null]] },
      ],
    );
  });
});

describe('front config: control.probe', () => {
  const base = `cluster: c1
uplinkAddress: 198.18.101.2
services:
  - { name: www, vip: 198.19.1.1, port: 80, method: byrequests, servers: [{ name: s1a, address: 198.18.201.11 }] }
control:
  keyFile: /x.key
`;
  it('has defaults', () => {
    const cfg = parseConfig(frontConfigSchema, base, 't');
    assert.deepEqual({ ...cfg.control?.probe }, { count: 3, spacingMs: 200, timeoutMs: 1000, maxTargets: 4096, maxPerSecond: 200, reportSeconds: 1, dedupSeconds: 10, methods: ['icmp', 'tcp:443', 'tcp:53'], retryCheaperSeconds: 600, methodMemory: 16_384, tcpMaxOutstanding: 1024 });
  });
  it('checks bounds', () => {
    assert.throws(() => parseConfig(frontConfigSchema, `${base}  probe: { count: 17 }\n`, 't'));
    assert.throws(() => parseConfig(frontConfigSchema, `${base}  probe: { maxPerSecond: 0 }\n`, 't'));
    assert.equal(parseConfig(frontConfigSchema, `${base}  probe: { count: 1, reportSeconds: 0.5 }\n`, 't').control?.probe.count, 1);
    // Methods: icmp or tcp:<port 1-65535>, each once, at least one; the error names the key.
    for (const bad of ['[]', '[udp:53]', '[tcp:0]', '[tcp:65536]', '[tcp:]', '[icmp, icmp]', '[tcp:053]']) {
      assert.throws(() => parseConfig(frontConfigSchema, `${base}  probe: { methods: ${bad} }\n`, 't'), /control\.probe\.methods/, bad);
    }
    assert.deepEqual(parseConfig(frontConfigSchema, `${base}  probe: { methods: [tcp:53, icmp, tcp:65535] }\n`, 't').control?.probe.methods, ['tcp:53', 'icmp', 'tcp:65535']);
  });
});
