import { packageVersion } from '../util/version.ts';
import type { Command } from './command.ts';

export { packageVersion };

export const versionCommand: Command = {
  name: 'version',
  summary: 'print the Sluice version and the Node.js runtime',
  usage: 'usage: sluice version',
  run() {
    console.log(`sluice ${packageVersion()} (node ${process.version})`);
    return Promise.resolve(0);
  },
};
