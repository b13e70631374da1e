import { ConfigError } from '../config/load.ts';
import { SluiceError } from '../errors/errors.ts';
import { KeyFileError } from '../control/keys.ts';
import { FrontDaemon } from '../front/daemon.ts';
import { configArg, type Command } from './command.ts';

const USAGE = 'usage: sluice front --config FILE';

export const frontCommand: Command = {
  name: 'front',
  summary: 'run a cluster front node (NFQUEUE steering of new connections)',
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('front', USAGE, argv);
    if (configFile === undefined) return 2;
    let daemon: FrontDaemon;
    try {
      daemon = new FrontDaemon(configFile);
    } catch (err) {
      if (err instanceof ConfigError) {
        console.error(err.message);
        return 1;
      }
      if (err instanceof SluiceError) {
        // e.g. the addon that sends sd_notify is missing under systemd
        console.error(`sluice front: ${err.message}`);
        return 1;
      }
      throw err;
    }
    const stop = (): void => {
      daemon.stop();
      process.exit(0);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    try {
      await daemon.start({});
    } catch (err) {
      daemon.stop(); // removes whatever rules were installed
      if (err instanceof KeyFileError || err instanceof SluiceError) {
        console.error(`sluice front: ${err.message}`);
        process.exit(1); // sockets opened before the failure must not keep the process up
      }
      throw err;
    }
    // Status on request: SIGUSR2 logs the counters (the admin socket is not built yet).
    process.on('SIGUSR2', () => {
      daemon.log.info(daemon.stats(), 'status');
    });
    return new Promise<number>(() => {
      /* runs until a signal */
    });
  },
};
