/**
 * Seed 002's sliding-window bucket and the hierarchy's weights, on a fake
 * clock: quiesce, the window starting at the first request, the slide,
 * weights as token costs, weight 0 always admitted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SlidingBucket } from '../../src/admission/bucket.ts';
import { Hierarchy, NOT_CONFIGURED, Verdict } from '../../src/admission/hierarchy.ts';
import { admissionSchema } from '../../src/admission/config.ts';

/** The address words an IPv4 client's admit() is given (never read for a client number < 2^32). */
const NO_WORDS = new Uint32Array(4);

/** Admits `n` requests of `cost` at time t; returns how many passed. */
function burst(b: SlidingBucket, t: number, n: number, cost = 1): number {
  let ok = 0;
  for (let i = 0; i < n; i++) if (b.admit(cost, t)) ok++;
  return ok;
}

test('bucket: vectors (limit 10 tokens/s, window from the first request out of quiesce)', () => {
  // [time ms, requests offered, expected admitted, quiesced before?]
  const vectors: [number, number, number][] = [
    [300, 15, 10], // quiesce -> window starts at 300: the whole limit at once
    [900, 5, 0], // same window, full
    [1300, 5, 0], // next window: the previous (10) still counts fully
    [1800, 10, 5], // half of the previous window slid out: 5 fit
    [2300, 10, 5], // prev = 5 (window 1300-2300), weight 1: 10 - 5 = 5
    [5000, 20, 10], // a whole idle window passed: quiesce, new window at 5000, whole limit
  ];
  const b = new SlidingBucket(10);
  assert.equal(b.quiesced, true);
  for (const [t, n, want] of vectors) assert.equal(burst(b, t, n), want, `t=${t}`);
  assert.equal(b.start, 5000, 'the window restarted at the request after quiesce, not on a clock boundary');
});

test('bucket: goes back to quiesce after a window with nothing taken, and not before', () => {
  const b = new SlidingBucket(10);
  b.admit(1, 100);
  b.advance(1099);
  assert.equal(b.quiesced, false);
  b.advance(1100); // window 2 begins: prev = 1
  assert.equal(b.quiesced, false);
  assert.equal(b.prev, 1);
  b.advance(2100); // window 3: prev = 0 (window 2 took nothing) -> quiesce
  assert.equal(b.quiesced, true);
});

test('bucket: the average over a long run stays at the limit whatever the arrival shape', () => {
  for (const step of [1, 7, 50, 333]) {
    const b = new SlidingBucket(100);
    let admitted = 0;
    // Offer 10x the limit for 20 s, in bursts every `step` ms.
    for (let t = 0; t < 20_000; t += step) admitted += burst(b, t, Math.ceil((1000 * step) / 1000));
    const rate = admitted / 20;
    assert.ok(rate <= 100 * 1.05 && rate >= 100 * 0.9, `step ${step}: ${rate}/s`);
  }
});

test('bucket: costs are tokens; a cost of 0 is always admitted and takes nothing', () => {
  const b = new SlidingBucket(10);
  assert.equal(burst(b, 0, 5, 3), 3); // 9 tokens
  assert.equal(b.admit(2, 0), false); // 11 > 10
  assert.equal(b.admit(1, 0), true); // exactly 10
  assert.equal(burst(b, 0, 100, 0), 100);
  assert.equal(b.cur, 10);
});

function hierarchy(yaml: object, services = ['web', 'mail'], members = 1): Hierarchy {
  return new Hierarchy(admissionSchema.parse(yaml), services, members);
}

test('hierarchy: cost = service weight x operation weight against operation and service limits', () => {
  const h = hierarchy({
    services: [
      {
        service: 'web',
        weight: 2,
        localLimit: 40,
        operations: [
          { name: 'api', weight: 3, when: { destinationPort: [8080] }, localLimit: 30 },
          { name: 'free', weight: 0, when: { sourceIn: ['198.18.9.0/24'] } },
        ],
      },
    ],
  });
  const api = h.operation('web/api');
  assert.equal(api?.cost, 6);
  // api: 30 tokens local = 5 connections at cost 6
  let ok = 0;
  for (let i = 0; i < 10; i++) if (h.admit(0, 0x0a000001, NO_WORDS, 0, 8080, 0) === Verdict.Admit) ok++;
  assert.equal(ok, 5);
  // other (weight 1 -> cost 2): the service has 40 - 30 = 10 left: 5 connections
  ok = 0;
  let serviceRejections = 0;
  for (let i = 0; i < 10; i++) {
    const v = h.admit(0, 0x0a000001, NO_WORDS, 0, 80, 0);
    if (v === Verdict.Admit) ok++;
    if (v === Verdict.ServiceLocal) serviceRejections++;
  }
  assert.equal(ok, 5);
  assert.equal(serviceRejections, 5);
  assert.equal(h.last?.name, 'web/other');
  // weight 0: admitted with the service full
  const free = 0xc6120905; // 198.18.9.5
  for (let i = 0; i < 100; i++) assert.equal(h.admit(0, free, NO_WORDS, 0, 80, 0), Verdict.Admit);
  assert.equal(h.operation('web/free')?.counts.free, 100);
  // mail has no admission section
  assert.equal(h.admit(1, 1, NO_WORDS, 0, 25, 0), NOT_CONFIGURED);
});

test('hierarchy: cluster buckets start empty (fail closed) and follow the allocation; the service bucket is the sum', () => {
  const h = hierarchy(
    {
      services: [{ service: 'web', clusterLimit: 300, operations: [{ name: 'a', when: { destinationPort: [1] }, clusterLimit: 120 }] }],
      cluster: { member: 'm1', listen: 'tcp://198.18.0.1:7400', control: { plaintext: true }, members: [{ name: 'm1', endpoint: 'tcp://198.18.0.1:7400' }, { name: 'm2', endpoint: 'tcp://198.18.0.2:7400' }, { name: 'm3', endpoint: 'tcp://198.18.0.3:7400' }], coordinator: { static: 'm1' } },
    },
    ['web'],
    3,
  );
  const a = h.operation('web/a');
  const other = h.operation('web/other');
  assert.ok(a && other);
  assert.equal(a.share, 40); // min(120/3, 300/(3*2))
  assert.equal(other.share, 50); // 300/(3*2)
  assert.equal(h.admit(0, 1, NO_WORDS, 0, 1, 0), Verdict.OperationCluster);
  assert.equal(a.short, true);
  h.setAllocation(a, 3);
  h.setAllocation(other, 2);
  assert.equal(h.services[0]?.cluster?.limit, 5);
  let ok = 0;
  for (let i = 0; i < 10; i++) if (h.admit(0, 1, NO_WORDS, 0, 1, 0) === Verdict.Admit) ok++;
  assert.equal(ok, 3);
});

test('hierarchy: local and cluster limits apply at once, whichever is smaller binds', () => {
  const cluster = { member: 'm1', listen: 'tcp://198.18.0.1:7400', control: { plaintext: true }, members: [{ name: 'm1', endpoint: 'tcp://198.18.0.1:7400' }], coordinator: { static: 'm1' } };
  // [local limit, cluster allocation granted to this member, admitted of 20 at once, verdict of the rest]
  const cases = [
    [5, 10, 5, Verdict.ServiceLocal],
    [20, 3, 3, Verdict.OperationCluster],
  ] as const;
  for (const [localLimit, allocation, admitted, rest] of cases) {
    const h = hierarchy({ services: [{ service: 'web', localLimit, clusterLimit: 300 }], cluster }, ['web']);
    const other = h.operation('web/other');
    assert.ok(other);
    h.setAllocation(other, allocation);
    const verdicts: number[] = [];
    for (let i = 0; i < 20; i++) verdicts.push(h.admit(0, 1, NO_WORDS, 0, 80, 0));
    assert.equal(verdicts.filter((v) => v === Verdict.Admit).length, admitted, `local ${localLimit}, allocation ${allocation}`);
    assert.ok(verdicts.slice(admitted).every((v) => v === rest), `local ${localLimit}, allocation ${allocation}: ${verdicts.join(',')}`);
  }
});
