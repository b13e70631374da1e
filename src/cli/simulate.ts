/**
 * `sluice simulate --scenario FILE [--out DIR] [--seed N]`: runs the
 * steering simulator (src/sim/) on a scenario and writes its report
 * (report.json, report.html, summary.md) into DIR. Prints the summary
 * table. Exit 0 done, 1 invalid scenario, 2 usage error.
 */
import { parseArgs } from 'node:util';
import { ConfigError } from '../config/load.ts';
import { asErrorLines } from '../log/journal.ts';
import { markdownTable } from '../sim/report.ts';
import { loadScenario } from '../sim/scenario.ts';
import { simulate, writeReport } from '../sim/simulate.ts';
import { UsageError, type Command } from './command.ts';

const USAGE = `usage: sluice simulate --scenario FILE [--out DIR] [--seed N]

  Simulates DNS steering on the scenario (clusters, client prefixes,
  demand, events) with each policy it lists, on the same demand and seed,
  and writes DIR/report.json, DIR/report.html and DIR/summary.md (DIR
  defaults to ./sim-out). --seed overrides the scenario's seed.`;

export const simulateCommand: Command = {
  name: 'simulate',
  summary: 'simulate steering quality on a scenario (policies vs the optimum)',
  usage: USAGE,
  run(argv) {
    let file: string;
    let out: string;
    let seed: number | undefined;
    try {
      const { values } = parseArgs({ args: [...argv], options: { scenario: { type: 'string' }, out: { type: 'string', default: 'sim-out' }, seed: { type: 'string' } } });
      if (values.scenario === undefined) throw new UsageError('--scenario is required');
      file = values.scenario;
      out = values.out;
      if (values.seed !== undefined) {
        seed = Number(values.seed);
        if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 31 - 1) throw new UsageError('--seed must be an integer in [0, 2147483647]');
      }
    } catch (err) {
      if (err instanceof UsageError || (err instanceof TypeError && 'code' in err)) {
        console.error(asErrorLines(`sluice simulate: ${err.message}\n\n${USAGE}`));
        return Promise.resolve(2);
      }
      throw err;
    }
    let scenario;
    try {
      scenario = loadScenario(file);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(asErrorLines(`sluice simulate: ${file}: invalid scenario:\n${err.problems.map((p) => `  ${p.path === '' ? '(top level)' : p.path}: ${p.message}`).join('\n')}`));
      return Promise.resolve(1);
    }
    const report = simulate(scenario, { ...(seed !== undefined ? { seed } : {}), progress: (l) => {
        console.error(`sluice simulate: ${l}`);
      } });
    const files = writeReport(report, out);
    console.log(markdownTable(report));
    console.log(`\nwall ${report.run.wallSeconds.toFixed(1)} s, peak RSS ${report.run.peakRssMiB.toFixed(0)} MiB; wrote ${files.join(', ')}`);
    return Promise.resolve(0);
  },
};
