import { ConfigError } from '../config/load.ts';
import { SluiceError } from '../errors/errors.ts';
import { KeyFileError } from '../control/keys.ts';
import { MasterDaemon } from '../throttle/daemon.ts';
import { configArg, type Command } from './command.ts';

const USAGE = 'usage: sluice master --config FILE';

export const masterCommand: Command = {
  name: 'master',
  summary: 'run a throttling master (GCRA per client over every front node; seed 004)',
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('master', USAGE, argv);
    if (configFile === undefined) return 2;
    let daemon: MasterDaemon;
    try {
      daemon = new MasterDaemon(configFile);
    } catch (err) {
      if (err instanceof ConfigError) {
        console.error(err.message);
        return 1;
      }
      if (err instanceof SluiceError) {
        // e.g. the addon that sends sd_notify is missing under systemd
        console.error(`sluice master: ${err.message}`);
        return 1;
      }
      throw err;
    }
    try {
      await daemon.start();
    } catch (err) {
      const why = err instanceof KeyFileError ? err.message : `${(err as Error).message}${daemon.initial.store.kind === 'redis' ? ' (is Redis reachable at store.host:store.port / store.path?)' : ''}`;
      console.error(`sluice master: ${why}`);
      process.exit(1); // sockets or the Redis connection may already be open
    }
    const stop = (): void => {
      void daemon.stop().then(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.on('SIGHUP', () => {
      daemon.reload();
    });
    process.on('SIGUSR2', () => {
      daemon.log.info(daemon.status(), 'status');
    });
    return new Promise<number>(() => {
      /* runs until a signal */
    });
  },
};
