import { DnsDaemon } from '../dns/daemon.ts';
import { configArg, type Command } from './command.ts';
import { runDaemon } from './run-daemon.ts';

const USAGE = 'usage: sluice dns --config FILE';

export const dnsCommand: Command = {
  name: 'dns',
  summary: "run the site's authoritative DNS server (steers clients to clusters)",
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('dns', USAGE, argv);
    if (configFile === undefined) return 2;
    // Every start failure is an operator's matter (an address in use, a key file).
    return runDaemon('dns', () => new DnsDaemon(configFile), { stopOnStartFailure: true, startFailure: (err) => (err as Error).message });
  },
};
