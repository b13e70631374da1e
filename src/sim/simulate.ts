/**
 * One simulation run: the scenario's world, every policy it lists on the
 * same demand, events and seed, the oracle's samples shared between them,
 * and the report (JSON and HTML) written to `out`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Simulation, type Oracle, type PolicyRun, type SteererFactory } from './engine.ts';
import { exactOracle } from './oracle.ts';
import { markdownTable, renderHtml, type SimReport } from './report.ts';
import type { Scenario, SimPolicyName } from './scenario.ts';
import { NearestSteerer, PipelineSteerer, PolicySteerer, RoundRobinSteerer } from './steerers.ts';
import { buildWorld, type World } from './world.ts';
import { MappingSteerer } from './mapping-steerer.ts';

export function steererFactory(policy: SimPolicyName, s: Readonly<Scenario>, w: World, seed: number): SteererFactory {
  switch (policy) {
    case 'round-robin':
      return (t) => new RoundRobinSteerer(t, seed);
    case 'nearest':
      return (t) => new NearestSteerer(w, t);
    case 'rtt':
    case 'capacity':
      return s.steer === 'pipeline' ? (t) => new PipelineSteerer(s, w, policy, t) : (t) => new PolicySteerer(s, w, policy, t);
    case 'mapping':
      return (t) => new MappingSteerer(s, w, t);
  }
}

export interface SimulateOptions {
  readonly seed?: number;
  /** Progress lines (one per policy); none when absent. */
  readonly progress?: (line: string) => void;
  /** Replaces the exact oracle (tests). */
  readonly oracle?: Oracle;
}

export function simulate(s: Readonly<Scenario>, opts: SimulateOptions = {}): SimReport {
  const started = performance.now();
  const seed = opts.seed ?? s.seed;
  const world = buildWorld(s, seed);
  const sim = new Simulation(s, world, seed, opts.oracle ?? exactOracle(world));
  const setupSeconds = (performance.now() - started) / 1000;
  opts.progress?.(`world: ${world.clusterNames.length} clusters, ${world.prefixes} prefixes in ${world.units} map units, ${sim.steps} steps of ${sim.dt} s (${setupSeconds.toFixed(1)} s)`);
  const runs: PolicyRun[] = [];
  let peakRss = process.memoryUsage.rss();
  for (const p of s.policies) {
    const r = sim.run(p, steererFactory(p, s, world, seed));
    runs.push(r);
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
    opts.progress?.(`${p}: ${(r.wallMs / 1000).toFixed(1)} s, rtt ${r.summary.meanRttAtOracleSamplesMs.toFixed(1)} ms vs oracle ${r.summary.oracleRttMs.toFixed(1)} ms, overload ${r.summary.overloadClusterSeconds.toFixed(0)} cluster-s`);
  }
  const samples = [...sim.oracleSamples.values()];
  const solve = samples.map((o) => o.solveMs);
  return {
    scenario: s.name,
    seed,
    world: {
      clusters: world.clusterNames.length,
      prefixes: world.prefixes,
      units: world.units,
      stepSeconds: sim.dt,
      steps: sim.steps,
      durationSeconds: s.durationSeconds,
      ttlSeconds: s.ttlSeconds,
      reportDelaySeconds: s.reportDelaySeconds,
      drawClasses: s.drawClasses,
    },
    oracle: {
      everySeconds: sim.oracleSteps * sim.dt,
      grouping: `${world.units} map units (prefixes sharing an RTT row and a region's demand curve; a unit's demand may split between clusters)`,
      samples,
      meanSolveMs: solve.length > 0 ? solve.reduce((a, b) => a + b, 0) / solve.length : 0,
      maxSolveMs: solve.length > 0 ? Math.max(...solve) : 0,
    },
    policies: runs,
    run: { wallSeconds: (performance.now() - started) / 1000, peakRssMiB: peakRss / 2 ** 20, setupSeconds },
  };
}

/** Writes report.json, report.html and summary.md into `dir`; returns their paths. */
export function writeReport(r: SimReport, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const files = [join(dir, 'report.json'), join(dir, 'report.html'), join(dir, 'summary.md')];
  writeFileSync(files[0] ?? '', JSON.stringify(r, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v)));
  writeFileSync(files[1] ?? '', renderHtml(r));
  writeFileSync(files[2] ?? '', `${markdownTable(r)}\n`);
  return files;
}
