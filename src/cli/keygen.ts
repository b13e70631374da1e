import { parseArgs } from 'node:util';
import { KeyFileError, writeKeyPair } from '../control/keys.ts';
import type { Command } from './command.ts';

const USAGE = 'usage: sluice keygen --name NAME [--dir DIR] [--force]';

export const keygenCommand: Command = {
  name: 'keygen',
  summary: 'write a CURVE key pair (NAME.key, mode 0600, and NAME.pub) for the control plane',
  usage: USAGE,
  run(argv) {
    let v: { name?: string; dir?: string; force?: boolean };
    try {
      v = parseArgs({ args: [...argv], options: { name: { type: 'string' }, dir: { type: 'string', default: '.' }, force: { type: 'boolean', default: false } } }).values;
    } catch (err) {
      console.error(`sluice keygen: ${(err as Error).message}\n${USAGE}`);
      return Promise.resolve(2);
    }
    if (v.name === undefined) {
      console.error(`sluice keygen: --name is required\n${USAGE}`);
      return Promise.resolve(2);
    }
    try {
      const r = writeKeyPair(v.dir ?? '.', v.name, { force: v.force === true });
      console.log(`${r.keyFile}\n${r.pubFile}\npublic key ${r.publicKey}`);
      return Promise.resolve(0);
    } catch (err) {
      if (err instanceof KeyFileError) {
        console.error(`sluice keygen: ${err.message}`);
        return Promise.resolve(1);
      }
      throw err;
    }
  },
};
