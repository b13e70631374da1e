import { ConfigError, loadConfig } from '../config/load.ts';
import { KeyFileError } from '../control/keys.ts';
import { asErrorLines } from '../log/journal.ts';
import { componentLogger } from '../log/logger.ts';
import { proxyConfigSchema, type ProxyConfig } from '../throttle/config.ts';
import { MasterProxy } from '../throttle/proxy.ts';
import { configArg, type Command } from './command.ts';

const USAGE = 'usage: sluice master-proxy --config FILE';

export const masterProxyCommand: Command = {
  name: 'master-proxy',
  summary: 'shard throttling accounting by domain over several masters (ZeroMQ XSUB/XPUB proxy)',
  usage: USAGE,
  async run(argv) {
    const configFile = configArg('master-proxy', USAGE, argv);
    if (configFile === undefined) return 2;
    const log = componentLogger('master-proxy');
    let cfg: Readonly<ProxyConfig>;
    try {
      cfg = loadConfig(proxyConfigSchema, configFile);
    } catch (err) {
      if (err instanceof ConfigError) {
        console.error(asErrorLines(err.message));
        return 1;
      }
      throw err;
    }
    let proxy: MasterProxy;
    try {
      proxy = await MasterProxy.start(cfg, log);
    } catch (err) {
      console.error(asErrorLines(`sluice master-proxy: ${err instanceof KeyFileError ? err.message : (err as Error).message}`));
      process.exit(1);
    }
    const stop = (): void => {
      proxy.stop();
      process.exit(0);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.on('SIGUSR2', () => {
      log.info(proxy.status(), 'status');
    });
    return new Promise<number>(() => {
      /* runs until a signal */
    });
  },
};
