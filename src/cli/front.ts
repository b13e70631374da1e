/**
 * `sluice front --config FILE`: runs the front node (src/front/daemon.ts).
 * A stop leaves its rules in place (the fallback serves while no daemon
 * runs; the next start adopts them).
 *
 * `sluice front --remove-rules [--config FILE]`: removes every rule the
 * front node installs and exits (src/front/remove-rules.ts): 0 when they
 * are gone (or were not there), 1 when refused (a front node is running:
 * stop it first) or iptables failed. FILE, when given, adds its queue and
 * log group to those checked for a running daemon; a FILE that cannot be
 * read or is invalid does not prevent the removal (an operator removing a
 * broken installation still gets a clean host).
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config/load.ts';
import { SluiceError } from '../errors/errors.ts';
import { frontConfigSchema } from '../front/config.ts';
import { removeFrontRules } from '../front/remove-rules.ts';
import { asErrorLines } from '../log/journal.ts';
import type { Command } from './command.ts';
import { runDaemon } from './run-daemon.ts';

const USAGE = `usage: sluice front --config FILE
       sluice front --remove-rules [--config FILE]
  A stopped front node leaves its rules in place (new connections meet the
  fallback until the next start, which adopts them). --remove-rules removes
  them and exits; it refuses while a front node is running.`;

export const frontCommand: Command = {
  name: 'front',
  summary: 'run a cluster front node (NFQUEUE steering of new connections); --remove-rules removes its rules',
  usage: USAGE,
  async run(argv) {
    let values: { config?: string | undefined; 'remove-rules'?: boolean | undefined };
    try {
      values = parseArgs({ args: [...argv], options: { config: { type: 'string' }, 'remove-rules': { type: 'boolean' } } }).values;
    } catch (err) {
      console.error(asErrorLines(`sluice front: ${(err as Error).message}\n${USAGE}`));
      return 2;
    }
    const configFile = values.config;
    if (values['remove-rules'] === true) return removeCommand(configFile);
    if (configFile === undefined) {
      console.error(asErrorLines(`sluice front: --config is required\n${USAGE}`));
      return 2;
    }
    // The daemon's modules load only when it runs: --remove-rules and --help start without them.
    const { FrontDaemon } = await import('../front/daemon.ts');
    // A failed start closes what it opened; the rules stay (like a stop).
    return runDaemon('front', () => new FrontDaemon(configFile), { stopOnStartFailure: true });
  },
};

function removeCommand(configFile: string | undefined): number {
  let queue: number | undefined;
  let nflogGroup: number | undefined;
  if (configFile !== undefined) {
    try {
      const cfg = loadConfig(frontConfigSchema, configFile);
      queue = cfg.queue;
      nflogGroup = cfg.nflogGroup;
    } catch (err) {
      const why = err instanceof ConfigError ? err.message.split('\n')[0] : (err as Error).message;
      console.log(`sluice front: ${configFile} not used (${why ?? ''}): checking the queues the installed rules name`);
    }
  }
  try {
    const out = removeFrontRules({ ...(queue !== undefined ? { queue } : {}), ...(nflogGroup !== undefined ? { nflogGroup } : {}) });
    for (const n of out.notes) console.log(`sluice front: ${n}`);
    return 0;
  } catch (err) {
    if (!(err instanceof SluiceError)) throw err;
    console.error(asErrorLines(`sluice front --remove-rules: ${err.message}`));
    return 1;
  }
}
