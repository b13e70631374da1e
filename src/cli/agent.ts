import { agentCtl, AGENT_CTL_USAGE } from './agent-ctl.ts';
import { configArg, type Command } from './command.ts';
import { runDaemon } from './run-daemon.ts';

const USAGE = `usage: sluice agent --config FILE\n${AGENT_CTL_USAGE.replace(/^usage: /, '       ')}`;
const RUN_USAGE = 'usage: sluice agent --config FILE';

export const agentCommand: Command = {
  name: 'agent',
  summary: 'run a server agent (load, health and per-client request reports to the front node); agent ctl: drain, maint, ready, show',
  usage: USAGE,
  async run(argv) {
    if (argv[0] === 'ctl') return agentCtl(argv.slice(1));
    const configFile = configArg('agent', RUN_USAGE, argv);
    if (configFile === undefined) return 2;
    // The daemon's modules load only when it runs: `sluice agent ctl` starts without them.
    const { AgentDaemon } = await import('../agent/agent.ts');
    return runDaemon('agent', () => new AgentDaemon(configFile));
  },
};
