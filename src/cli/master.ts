import { KeyFileError } from '../control/keys.ts';
import { HttpListenError } from '../http/ops_server.ts';
import { MasterDaemon } from '../throttle/daemon.ts';
import { configArg, type Command } from './command.ts';
import { runDaemon } from './run-daemon.ts';

const USAGE = 'usage: sluice master --config FILE';

export const masterCommand: Command = {
  name: 'master',
  summary: 'run a throttling master (GCRA per client over every front node; seed 004)',
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('master', USAGE, argv);
    if (configFile === undefined) return 2;
    let store = '';
    return runDaemon(
      'master',
      () => {
        const d = new MasterDaemon(configFile);
        store = d.initial.store.kind;
        return d;
      },
      {
        startFailure: (err) =>
          err instanceof KeyFileError || err instanceof HttpListenError ? err.message : `${(err as Error).message}${store === 'redis' ? ' (is Redis reachable at store.host:store.port / store.path?)' : ''}`,
      },
    );
  },
};
