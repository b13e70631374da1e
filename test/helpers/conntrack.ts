/**
 * What the ctnetlink suites (ct-dump, ct-expire) share: flows inserted into
 * a namespace's table with `conntrack`, and a command run as an
 * unprivileged user with only the given capabilities (as the systemd unit's
 * User= and AmbientCapabilities= would run it).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { nsRun } from './testbed.ts';

/** Inserts flows into `ns` with one `conntrack -R` of `-I` lines (written to a file in `dir`). */
export function insertFlows(ns: string, dir: string, lines: readonly string[]): void {
  const file = join(dir, `flows-${String(Math.random()).slice(2)}`);
  writeFileSync(file, lines.join('\n') + '\n');
  nsRun(ns, 'conntrack', ['-R', file]);
}

/** argv run as uid `uid` with only capabilities `caps` ('' for none, e.g. '+net_admin'); undefined: argv as is (root). */
export function withCaps(uid: number, caps: string | undefined, argv: readonly string[]): string[] {
  if (caps === undefined) return [...argv];
  return ['setpriv', `--reuid=${String(uid)}`, `--regid=${String(uid)}`, '--clear-groups', `--inh-caps=${caps || '-all'}`, ...(caps ? [`--ambient-caps=${caps}`] : []), `--bounding-set=-all${caps ? `,${caps}` : ''}`, '--no-new-privs', ...argv];
}
