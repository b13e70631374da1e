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
    let daemon: AgentDaemon | undefined;
    let started = false;
    // Installed before start(), which sends READY=1: a reload asked for
    // right after readiness must not meet SIGHUP's default action (exit).
    // As front and dns: a refused configuration is logged, the running one stays.
    process.on('SIGHUP', () => {
      if (started) daemon?.reload();
      else daemon?.log.warn('SIGHUP before the agent was started: ignored (the configuration is being read now)');
    });
    try {
      daemon = new AgentDaemon(configFile);
      await daemon.start();
      started = true;
    } catch (err) {
      if (err instanceof ConfigError || err instanceof KeyFileError || err instanceof LoadSourceError || err instanceof SluiceError) {
        console.error(`sluice agent: ${err.message}`);
        process.exit(1); // a control socket may already be open
      }
      throw err;
    }
    const running = daemon;
    const stop = (): void => {
      void running.stop().then(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.on('SIGUSR2', () => {
      running.log.info(running.status(), 'status');
    });
    return new Promise<number>(() => {
      /* runs until a signal */
    });
  },
};
