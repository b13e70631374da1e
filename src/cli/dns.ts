import { ConfigError } from '../config/load.ts';
import { SluiceError } from '../errors/errors.ts';
import { KeyFileError } from '../control/keys.ts';
import { DnsDaemon } from '../dns/daemon.ts';
import { configArg, type Command } from './command.ts';

const USAGE = 'usage: sluice dns --config FILE';

export const dnsCommand: Command = {
  name: 'dns',
  summary: "run the site's authoritative DNS server (steers clients to clusters)",
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('dns', USAGE, argv);
    if (configFile === undefined) return 2;
    let daemon: DnsDaemon;
    try {
      daemon = new DnsDaemon(configFile);
    } catch (err) {
      if (err instanceof ConfigError) {
        console.error(err.message);
        return 1;
      }
      if (err instanceof SluiceError) {
        // e.g. the addon that sends sd_notify is missing under systemd
        console.error(`sluice dns: ${err.message}`);
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
    process.on('SIGHUP', () => {
      daemon.reload();
    });
    try {
      await daemon.start();
    } catch (err) {
      daemon.stop();
      console.error(`sluice dns: ${err instanceof KeyFileError ? err.message : (err as Error).message}`);
      process.exit(1); // sockets opened before the failure must not keep the process up
    }
    return new Promise<number>(() => {
      /* runs until a signal */
    });
  },
};
