/**
 * `sluice simulate` (src/sim/): a malformed scenario is refused with the key
 * named (as configs are), the engine's figures on a two-unit world worked
 * out by hand, and the fast policy path answering exactly as the DNS
 * server's pipeline does.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { ConfigError } from '../../src/config/load.ts';
import { loadScenario, parseScenario } from '../../src/sim/scenario.ts';
import { markdownTable, renderHtml } from '../../src/sim/report.ts';
import { simulate, writeReport } from '../../src/sim/simulate.ts';
import { Simulation } from '../../src/sim/engine.ts';
import type { Steerer } from '../../src/sim/steerers.ts';
import { buildWorld } from '../../src/sim/world.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const SMALL = fileURLToPath(new URL('../../scenarios/small.yaml', import.meta.url));
const SCENARIOS = fileURLToPath(new URL('../../scenarios/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'sluice-sim-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Two clusters, two units of 10 prefixes each, flat demand of 50 per unit; unit A is near c0, unit B near c1. */
function tiny(extra: string): string {
  return `name: tiny
seed: 3
durationSeconds: 600
stepSeconds: 10
reportSeconds: 2
downAfterIntervals: 3
reportDelaySeconds: 2
ttlSeconds: 30
oracleEverySeconds: 60
steadySettleSeconds: 60
phaseBins: 1
regions: [{ name: r, lat: 0, lon: 0 }]
clusters:
  - { name: c0, lat: 0, lon: 0, capacity: 100 }
  - { name: c1, lat: 0, lon: 1, capacity: 100 }
prefixes:
  explicit:
    - { prefixes: 10, region: r, rttMs: [10, 50] }
    - { prefixes: 10, region: r, rttMs: [40, 20] }
demand: { peak: 100, troughRatio: 1 }
${extra}`;
}

function problems(text: string): { path: string; message: string }[] {
  try {
    parseScenario(text, 'x.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return [...err.problems];
  }
  assert.fail('the scenario was accepted');
}

describe('simulate: scenario validation names the key', () => {
  const cases: { name: string; text: string; path: string; says: RegExp }[] = [
    { name: 'misspelt key', text: tiny('ttlSecond: 5'), path: 'ttlSecond', says: /did you mean "ttlSeconds"/ },
    { name: 'missing capacity', text: tiny('').replace('lon: 1, capacity: 100', 'lon: 1'), path: 'clusters[1].capacity', says: /required key is missing/ },
    { name: 'negative capacity', text: tiny('').replace('capacity: 100 }\n  - { name: c1', 'capacity: -5 }\n  - { name: c1'), path: 'clusters[0].capacity', says: /must be > 0/ },
    { name: 'RTT row of the wrong length', text: tiny('').replace('rttMs: [10, 50]', 'rttMs: [10]'), path: 'prefixes.explicit[0].rttMs', says: /2 expected, 1 given/ },
    { name: 'event names an unknown cluster', text: tiny('events: [{ type: cluster-lost, at: 100, cluster: c9 }]'), path: 'events[0].cluster', says: /no cluster "c9"/ },
    { name: 'unknown event type', text: tiny('events: [{ type: meteor, at: 100 }]'), path: 'events[0].type', says: /cluster-lost, capacity, flash-crowd or report-delay/ },
    { name: 'flash crowd ends before it starts', text: tiny('events: [{ type: flash-crowd, at: 100, until: 50, region: r, factor: 5 }]'), path: 'events[0].until', says: /after at/ },
    { name: 'unknown policy', text: tiny('policies: [rtt, magic]'), path: 'policies[1]', says: /policies are/ },
    { name: 'mapping option out of range', text: tiny('mapping: { headroom: 2 }'), path: 'mapping.headroom', says: /1/ },
    { name: 'mapping ttlMin above ttlMax', text: tiny('mapping: { ttlMin: 90, ttlMax: 60 }'), path: 'mapping.ttlMin', says: /must not exceed ttlMax/ },
    { name: 'unknown mappingTtl', text: tiny('mappingTtl: sometimes'), path: 'mappingTtl', says: /adaptive or fixed/ },
    { name: 'oracle interval not a multiple of the step', text: tiny('').replace('oracleEverySeconds: 60', 'oracleEverySeconds: 15'), path: 'oracleEverySeconds', says: /multiple of stepSeconds/ },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const p = problems(c.text).find((x) => x.path === c.path);
      assert.ok(p, `no problem at ${c.path}: ${JSON.stringify(problems(c.text))}`);
      assert.match(p.message, c.says);
    });
  }
  it('the command exits 1 and prints the key, without running', () => {
    const f = join(dir, 'bad.yaml');
    writeFileSync(f, tiny('events: [{ type: cluster-lost, at: 100, cluster: c9 }]'));
    const r = spawnSync(BIN, ['simulate', '--scenario', f, '--out', join(dir, 'out-bad')], { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /invalid scenario/);
    assert.match(r.stderr, /events\[0\]\.cluster: no cluster "c9"/);
  });
  it('every shipped scenario (scenarios/*.yaml) is valid', () => {
    const files = readdirSync(SCENARIOS).filter((f) => f.endsWith('.yaml'));
    assert.ok(files.length >= 5, files.join(', '));
    for (const f of files) assert.doesNotThrow(() => loadScenario(join(SCENARIOS, f)), f);
  });
  it('usage errors exit 2', () => {
    const r = spawnSync(BIN, ['simulate'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--scenario is required/);
  });
});

describe('simulate: the engine on a hand-computed world', () => {
  it('nearest: each unit on its near cluster, mean RTT (50x10 + 50x20)/100 = 15 ms = the oracle', () => {
    const r = simulate(parseScenario(tiny('policies: [nearest, rtt]')));
    for (const p of r.policies) {
      assert.equal(p.summary.meanRttAtOracleSamplesMs, 15, p.policy);
      assert.equal(p.summary.oracleRttMs, 15);
      assert.equal(p.summary.overloadClusterSeconds, 0);
      assert.equal(p.summary.steadyChangesPerMinuteShare, 0);
      // 20 prefixes, one query per TTL each.
      assert.ok(Math.abs(p.summary.queriesPerSecond - 20 / 30) < 0.05, String(p.summary.queriesPerSecond));
    }
  });
  it('a cluster lost between steps: down at the next step, every prefix moved at its next expiry', () => {
    // phaseBins 1: all prefixes expire at 0, 30, 60, ... The loss at 305 applies at step 310 (c0
    // silent since 300, down after 3 x 2 s); unit A's prefixes re-query at 330: recovered 25 s after
    // the loss, and its 50/s were unserved for the steps 310 and 320 (2 x 10 s).
    const r = simulate(parseScenario(tiny('policies: [nearest]\nevents: [{ type: cluster-lost, at: 305, cluster: c0 }]')));
    const s = r.policies[0]?.summary;
    assert.ok(s);
    assert.deepEqual(s.recoverySeconds, [{ cluster: 0, at: 305, seconds: 25 }]);
    assert.equal(s.unservedDemandSeconds, 50 * 20);
    // After the move c1 carries 100 of 100: full, not over.
    assert.equal(s.overloadClusterSeconds, 0);
  });
  it('the rtt policy herds when the near cluster is small: overload and answer changes', () => {
    // c0 holds 30 of unit A's 50: the rtt policy sends A to c0 while it has room, then all of A to c1, and back.
    const r = simulate(parseScenario(tiny('policies: [rtt]').replace('lon: 0, capacity: 100', 'lon: 0, capacity: 30')));
    const s = r.policies[0]?.summary;
    assert.ok((s?.overloadClusterSeconds ?? 0) > 0);
    assert.ok((s?.steadyChangesPerMinuteShare ?? 0) > 0);
    // The oracle puts 30 of A on c0 and 20 on c1 (50 ms), B on c1: (30x10 + 20x50 + 50x20)/100 = 23 ms.
    assert.ok(Math.abs((s?.oracleRttMs ?? 0) - 23) < 1e-9, String(s?.oracleRttMs));
  });

  it('mapping on the same world: overload only before the first table, no answer changes after; A split by whole classes within headroom', () => {
    // headroom 0.9 leaves 27 of c0's 30 to the assignment. A's 10 prefixes enter it as 8 classes (i mod 8:
    // two classes of 2 prefixes, six of 1; 5 each): c0 takes 25. Steady state: (25x10 + 25x50 + 50x20)/100 =
    // 25 ms against the oracle's 23. Before the first table has demand (the first TTL, 30 s) the fallback
    // (rtt) sends all of A to c0: 30 cluster-seconds of overload, and none after.
    const r = simulate(parseScenario(tiny('policies: [mapping]\nmappingTtl: fixed\nmapping: { headroom: 0.9 }').replace('lon: 0, capacity: 100', 'lon: 0, capacity: 30')));
    const p = r.policies[0];
    assert.ok(p);
    assert.equal(p.summary.overloadClusterSeconds, 30);
    assert.equal(p.summary.steadyChangesPerMinuteShare, 0);
    assert.ok(Math.abs(p.summary.oracleRttMs - 23) < 1e-9, String(p.summary.oracleRttMs));
    assert.ok(Math.abs((p.series.rttMs.at(-1) ?? 0) - 25) < 1e-9, JSON.stringify(p.series.rttMs));
  });
});

describe('simulate: mapping in a flash crowd beyond headroom × capacity', () => {
  it('demand 190 of capacity 200 (headroom 0.9 holds 180): the headroom is raised to fit, no overload', () => {
    // Unit A (weight 0.65, nearest c0) and B (0.35, nearest c1); from 120 s the region asks 1.9 × 100:
    // A 123.5, B 66.5. At headroom 0.9 (90 + 90) 10 of A would be unserved and answered as `rtt` does,
    // onto its nearest cluster c0, already at 90: over its 100. The assignment raises the headroom to
    // 190/200 = 0.95 instead: c0 95 (of A), c1 28.5 of A + 66.5 of B = 95; the member of A straddling the
    // two goes where the slack (5 of 100) takes it. Before the crowd (100 of 200) nothing binds.
    const text = tiny('policies: [mapping]\nmappingTtl: fixed\nmapping: { headroom: 0.9 }\nevents: [{ type: flash-crowd, at: 120, until: 600, region: r, factor: 1.9, rampSeconds: 0 }]')
      .replace('{ prefixes: 10, region: r, rttMs: [10, 50] }', '{ prefixes: 10, region: r, weight: 0.65, rttMs: [10, 50] }')
      .replace('{ prefixes: 10, region: r, rttMs: [40, 20] }', '{ prefixes: 10, region: r, weight: 0.35, rttMs: [40, 20] }');
    const r = simulate(parseScenario(text));
    const p = r.policies[0];
    assert.ok(p);
    // The jump at 120 s (no ramp) lands on the answers cached before it: c0 carries A's 123.5 until its
    // resolvers ask again, within a TTL (30 s). From then on (the next step, 160 s) nothing is over.
    const late = p.series.t.flatMap((t, i) => (t >= 160 && (p.series.overloaded[i] ?? 0) > 0 ? [t] : []));
    assert.deepEqual(late, []);
    assert.ok(p.summary.overloadClusterSeconds <= 40, String(p.summary.overloadClusterSeconds));
    // The oracle at its samples (every 60 s from the first TTL on): at 60 s A 65 on c0 and B 35 on c1,
    // (65 × 10 + 35 × 20) / 100 = 13.5 ms; at 120, 180, ..., 540 s A 100 on c0 and 23.5 on c1, B on c1,
    // (100 × 10 + 23.5 × 50 + 66.5 × 20) / 190 = 18.45 ms; demand-weighted over the samples.
    const crowd = (100 * 10 + 23.5 * 50 + 66.5 * 20) / 190;
    const want = (13.5 * 100 + crowd * 190 * 8) / (100 + 190 * 8);
    assert.ok(Math.abs(p.summary.oracleRttMs - want) < 1e-9, `${p.summary.oracleRttMs} vs ${want}`);
  });
});

describe('simulate: resolvers cache each answer for its own TTL', () => {
  it('a policy that answers unit A with TTL 60 and unit B with TTL 10: A asks 10 times in 600 s, B 60 times', () => {
    // phaseBins 1: every prefix's first query is at 0. A's 10 prefixes then ask at 60, 120, ..., 540 (10 queries
    // each), B's at 10, 20, ..., 590 (60 each): (100 + 600) / 600 s.
    const s = parseScenario(tiny('policies: [nearest]'));
    const w = buildWorld(s, s.seed);
    const sim = new Simulation(s, w, s.seed, () => ({ cost: 0, served: 1, unserved: 0, solveMs: 0 }));
    const stub: Steerer = { name: 'stub', classes: 1, beginStep: () => undefined, answer: (u) => u, ttlOf: (u) => (u === 0 ? 60 : 10) };
    const r = sim.run('stub', () => stub);
    assert.ok(Math.abs(r.summary.queriesPerSecond - 700 / 600) < 1e-9, String(r.summary.queriesPerSecond));
    // Without ttlOf: the scenario's 30 s for both, 20 prefixes × 20 queries.
    const fixed = sim.run('fixed', () => ({ name: 'fixed', classes: 1, beginStep: () => undefined, answer: (u: number) => u }));
    assert.ok(Math.abs(fixed.summary.queriesPerSecond - 400 / 600) < 1e-9, String(fixed.summary.queriesPerSecond));
  });

  it('mapping, adaptive: the table\'s TTLs (ttlMin 5 to ttlMax 60) reach the resolvers; fixed: the scenario\'s 30 s', () => {
    const adaptive = simulate(parseScenario(tiny('policies: [mapping]\nmapping: { ttlMin: 5, ttlMax: 60, freshRttSeconds: 0, stableSeconds: 0 }')));
    const fixed = simulate(parseScenario(tiny('policies: [mapping]\nmappingTtl: fixed\nmapping: { headroom: 0.9 }')));
    // stableSeconds 0: every mapped answer has ttlMax (60 s) as soon as the table has the prefix (the
    // first answers, before it has demand, are the fallback's, with 30 s): fewer queries than at 30 s.
    const qa = adaptive.policies[0]?.summary.queriesPerSecond ?? 0;
    const qf = fixed.policies[0]?.summary.queriesPerSecond ?? 0;
    assert.ok(Math.abs(qf - 20 / 30) < 0.05, String(qf));
    assert.ok(qa < qf * 0.6 && qa > 20 / 60 - 0.05, `${qa} vs ${qf}`);
  });
});

describe('simulate: the report', () => {
  it('HTML is self-contained (no script, no external reference) with the charts; JSON and the table list every policy', () => {
    const r = simulate(parseScenario(tiny('policies: [round-robin, nearest, rtt, capacity]')));
    const html = renderHtml(r);
    assert.doesNotMatch(html, /<script|\bsrc=|href=|url\(/i);
    // RTT vs oracle, overload, answer changes, queries, and one utilization chart per policy.
    assert.equal(html.match(/<svg /g)?.length, 4 + 4);
    const table = markdownTable(r).split('\n');
    assert.equal(table.length, 2 + 4);
    assert.match(table[2] ?? '', /^\| round-robin \|/);
    const files = writeReport(r, join(dir, 'out'));
    const json = JSON.parse(readFileSync(files[0] ?? '', 'utf8')) as { policies: { policy: string }[] };
    assert.deepEqual(
      json.policies.map((p) => p.policy),
      ['round-robin', 'nearest', 'rtt', 'capacity'],
    );
  });
});

describe('simulate: the policy path answers as the pipeline does', () => {
  it('rtt and capacity on the small scenario (1 h): identical figures', () => {
    const text = readFileSync(SMALL, 'utf8').replace(/^durationSeconds: .*$/m, 'durationSeconds: 3600').replace(/^policies: .*$/m, 'policies: [rtt, capacity]').replace(/^events:[\s\S]*$/m, '');
    const pipe = simulate(parseScenario(text.replace(/^steer: .*$/m, 'steer: pipeline')));
    const fast = simulate(parseScenario(text.replace(/^steer: .*$/m, 'steer: policy')));
    for (let i = 0; i < 2; i++) {
      assert.deepEqual(fast.policies[i]?.summary, pipe.policies[i]?.summary);
      assert.deepEqual(fast.policies[i]?.series, pipe.policies[i]?.series);
    }
    assert.ok((pipe.policies[0]?.summary.meanRttMs ?? 0) > 0);
  });
});
