import { FrontDaemon } from '../front/daemon.ts';
import { configArg, type Command } from './command.ts';
import { runDaemon } from './run-daemon.ts';

const USAGE = 'usage: sluice front --config FILE';

export const frontCommand: Command = {
  name: 'front',
  summary: 'run a cluster front node (NFQUEUE steering of new connections)',
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('front', USAGE, argv);
    if (configFile === undefined) return 2;
    // A failed start removes whatever rules were installed.
    return runDaemon('front', () => new FrontDaemon(configFile), { stopOnStartFailure: true });
  },
};
