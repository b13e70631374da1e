import { readFileSync } from 'node:fs';
import type { Command } from './command.ts';

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : 'unknown';
}

export const versionCommand: Command = {
  name: 'version',
  summary: 'print the Sluice version and the Node.js runtime',
  usage: 'usage: sluice version',
  run() {
    console.log(`sluice ${packageVersion()} (node ${process.version})`);
    return Promise.resolve(0);
  },
};
