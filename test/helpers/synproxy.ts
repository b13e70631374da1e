/**
 * Reading the kernel's SYN-cookie counters in a test namespace.
 *
 * A flood generator that has finished sending has not finished being
 * received: on a busy machine its last SYNs still wait in a CPU's input
 * backlog (seen in CI: 18,513 of 20,000 counted when the sender exited,
 * 1,337 more a second later), and some are dropped there when the backlog
 * is full (netdev_max_backlog). So a test waits for the counter to settle
 * and allows for the backlog drops the kernel itself counted.
 */
import { readFileSync } from 'node:fs';
import { nsRun } from './testbed.ts';

/** Summed columns of /proc/net/stat/synproxy (one line per CPU, hex; both families' SYNPROXY count here). */
export function synproxyStat(ns: string): Record<string, number> {
  const [head = '', ...rows] = nsRun(ns, 'cat', ['/proc/net/stat/synproxy']).trim().split('\n');
  const keys = head.trim().split(/\s+/);
  const out: Record<string, number> = {};
  for (const r of rows) r.trim().split(/\s+/).forEach((v, i) => (out[keys[i] ?? ''] = (out[keys[i] ?? ''] ?? 0) + parseInt(v, 16)));
  return out;
}

export const statDelta = (a: Record<string, number>, b: Record<string, number>, k: string): number => (b[k] ?? 0) - (a[k] ?? 0);

/**
 * Packets dropped by the per-CPU input backlogs, all CPUs (second column of
 * /proc/net/softnet_stat). The file is system-wide, not per namespace: the
 * figure is an upper bound on the drops of a test's own packets.
 */
export function softnetDropped(): number {
  let n = 0;
  for (const l of readFileSync('/proc/net/softnet_stat', 'utf8').trim().split('\n')) n += parseInt(l.trim().split(/\s+/)[1] ?? '0', 16);
  return n;
}

/**
 * The counters once `key` has grown by `want` over `base`, or has not grown
 * for 1 s (bounded: 15 s in all): what the kernel received of a flood.
 */
export async function settledSynproxy(ns: string, base: Record<string, number>, key: string, want: number): Promise<Record<string, number>> {
  let last = synproxyStat(ns);
  let still = 0;
  for (let waited = 0; waited < 15_000 && statDelta(base, last, key) < want && still < 1_000; waited += 100) {
    await new Promise((res) => setTimeout(res, 100));
    const now = synproxyStat(ns);
    still = (now[key] ?? 0) === (last[key] ?? 0) ? still + 100 : 0;
    last = now;
  }
  return last;
}
