/**
 * Compiles a benchmark's C helper (scripts/bench/<name>.c) with `cc -O2`
 * into bench/.build/ (gitignored) when the binary is missing or older than
 * its source; returns the binary's path. `cc` comes with Debian's gcc, which
 * scripts/install.sh installs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function buildC(name: string): string {
  const src = join(ROOT, 'scripts/bench', `${name}.c`);
  const dir = join(ROOT, 'bench/.build');
  const bin = join(dir, name);
  if (existsSync(bin) && statSync(bin).mtimeMs >= statSync(src).mtimeMs) return bin;
  mkdirSync(dir, { recursive: true });
  execFileSync('cc', ['-O2', '-Wall', '-Wextra', '-o', bin, src], { stdio: ['ignore', 'inherit', 'inherit'] });
  return bin;
}
