import { AgentDaemon, LoadSourceError } from '../agent/agent.ts';
import { ConfigError } from '../config/load.ts';
import { KeyFileError } from '../control/keys.ts';
import { SluiceError } from '../errors/errors.ts';
import { configArg, type Command } from './command.ts';

const USAGE = 'usage: sluice agent --config FILE';

export const agentCommand: Command = {
  name: 'agent',
  summary: "run a server agent (load and per-client request reports to the front node)",
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('agent', USAGE, argv);
    if (configFile === undefined) return 2;
    let daemon: AgentDaemon;
    try {
      daemon = new AgentDaemon(configFile);
      await daemon.start();
    } catch (err) {
      if (err instanceof ConfigError || err instanceof KeyFileError || err instanceof LoadSourceError || err instanceof SluiceError) {
        console.error(`sluice agent: ${err.message}`);
        process.exit(1); // a control socket may already be open
      }
      throw err;
    }
    const stop = (): void => {
      void daemon.stop().then(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.on('SIGUSR2', () => {
      daemon.log.info(daemon.status(), 'status');
    });
    // As front and dns: a refused configuration is logged, the running one stays.
    process.on('SIGHUP', () => {
      daemon.reload();
    });
    return new Promise<number>(() => {
      /* runs until a signal */
    });
  },
};
