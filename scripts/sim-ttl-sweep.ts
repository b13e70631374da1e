/**
 * The TTL sweep of issue 24, part 4: what query volume each TTL setting
 * costs and what responsiveness it buys. Runs `sluice simulate`'s engine
 * (src/sim/simulate.ts) on one scenario once per setting, the policies given
 * only, and prints one row per (setting, policy):
 *
 *   queries/s   the resolvers' re-queries (what the DNS servers answer);
 *   recovery    after each lost cluster, seconds until nothing is answered
 *               with it (the scenario needs a cluster-lost event);
 *   overload    cluster-seconds above capacity while another had room;
 *   vs oracle   demand-weighted RTT against the optimum;
 *   changes     share of prefixes changing answer per minute, steady state.
 *
 * Settings: a number is a fixed TTL (every answer, `ttlSeconds`, and
 * `mappingTtl: fixed`); `adaptive` is the mapping policy's own per-prefix TTL
 * with the scenario's `mapping.ttlMin`..`ttlMax`, and `adaptive:MIN-MAX`
 * with those bounds (its fallback answers keep the scenario's `ttlSeconds`).
 *
 *   flock /tmp/sluice-netns.lock node_modules/.bin/node scripts/sim-ttl-sweep.ts --scenario scenarios/small.yaml [--ttls 10,30,60,300,adaptive] [--policies mapping] [--duration SECONDS] [--step SECONDS]
 *
 * One process, no network; every run is a whole simulation (the full
 * scenarios take minutes each). A TTL below the scenario's step counts as
 * one step: resolvers ask at most once a step (--step overrides it).
 */
import { parseArgs } from 'node:util';
import { scenarioSchema, loadScenario, SIM_POLICIES, type Scenario, type SimPolicyName } from '../src/sim/scenario.ts';
import { simulate } from '../src/sim/simulate.ts';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'scenarios/small.yaml' },
    ttls: { type: 'string', default: '10,30,60,300,adaptive' },
    policies: { type: 'string', default: 'mapping' },
    duration: { type: 'string' },
    step: { type: 'string' },
  },
});

const base = loadScenario(values.scenario);
const policies = values.policies.split(',').map((p) => {
  if (!(SIM_POLICIES as readonly string[]).includes(p)) throw new Error(`--policies: ${p} is not one of ${SIM_POLICIES.join(', ')}`);
  return p as SimPolicyName;
});

/** The scenario with one TTL setting, validated again (bounds, defaults). */
function withSetting(setting: string): Readonly<Scenario> {
  const over: Record<string, unknown> = { policies };
  if (values.duration !== undefined) over['durationSeconds'] = Number(values.duration);
  // A TTL shorter than the step counts as a step (resolvers ask at most once a step): --step 5 resolves ttlMin 5.
  if (values.step !== undefined) over['stepSeconds'] = Number(values.step);
  const m = /^adaptive(?::(\d+)-(\d+))?$/.exec(setting);
  if (m !== null) {
    over['mappingTtl'] = 'adaptive';
    if (m[1] !== undefined && m[2] !== undefined) over['mapping'] = { ...base.mapping, ttlMin: Number(m[1]), ttlMax: Number(m[2]) };
  } else {
    const ttl = Number(setting);
    if (!(ttl >= 1)) throw new Error(`--ttls: ${setting} is neither a TTL in seconds nor adaptive[:MIN-MAX]`);
    over['ttlSeconds'] = ttl;
    over['mappingTtl'] = 'fixed';
  }
  return Object.freeze(scenarioSchema.parse({ ...base, ...over }));
}

interface Row {
  setting: string;
  policy: string;
  queriesPerSecond: number;
  recoverySeconds: (number | null)[];
  overloadClusterSeconds: number;
  rttVsOracle: number;
  steadyChangesPerMinuteShare: number;
  wallSeconds: number;
}
const rows: Row[] = [];
process.stdout.write(`TTL sweep: ${base.name}\n\n| TTL | policy | queries/s | recovery | overload cluster-s | vs oracle | answer changes /min (steady) | wall |\n|---|---|---|---|---|---|---|---|\n`);
for (const setting of values.ttls.split(',')) {
  const r = simulate(withSetting(setting));
  for (const p of r.policies) {
    const s = p.summary;
    const row: Row = {
      setting,
      policy: p.policy,
      queriesPerSecond: Math.round(s.queriesPerSecond),
      recoverySeconds: s.recoverySeconds.map((x) => x.seconds),
      overloadClusterSeconds: Math.round(s.overloadClusterSeconds),
      rttVsOracle: Number(((s.rttVsOracle - 1) * 100).toFixed(2)),
      steadyChangesPerMinuteShare: Number((s.steadyChangesPerMinuteShare * 100).toFixed(3)),
      wallSeconds: Math.round(p.wallMs / 1000),
    };
    rows.push(row);
    const rec = row.recoverySeconds.length === 0 ? '–' : row.recoverySeconds.map((x) => (x === null ? 'never' : `${String(x)} s`)).join(', ');
    process.stdout.write(
      `| ${setting} | ${p.policy} | ${String(row.queriesPerSecond)} | ${rec} | ${String(row.overloadClusterSeconds)} | ${row.rttVsOracle.toFixed(1)}% | ${row.steadyChangesPerMinuteShare.toFixed(3)}% | ${String(row.wallSeconds)} s |\n`,
    );
  }
}
process.stdout.write(`\n${JSON.stringify({ sweep: 'ttl', scenario: base.name, rows })}\n`);
