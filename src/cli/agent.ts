import { AgentDaemon } from '../agent/agent.ts';
import { configArg, type Command } from './command.ts';
import { runDaemon } from './run-daemon.ts';

const USAGE = 'usage: sluice agent --config FILE';

export const agentCommand: Command = {
  name: 'agent',
  summary: 'run a server agent (load and per-client request reports to the front node)',
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('agent', USAGE, argv);
    if (configFile === undefined) return 2;
    return runDaemon('agent', () => new AgentDaemon(configFile));
  },
};
