/**
 * The server's load figures, read from /proc (and cgroup files), for the
 * agent's load report. Every reader takes a root directory so tests can
 * point it at crafted files.
 *
 * Utilization (the one figure the front node's capacity estimate uses) is
 * one of:
 *   cpu          busy share of all CPUs since the last sample (/proc/stat)
 *   load         1-minute load average / number of CPUs
 *   connections  established connections on the service ports / maxConnections
 *   memory       1 - MemAvailable / MemTotal
 *   cgroup       CPU time used by the web server's cgroup / its CPU quota
 *                (cgroup v2 cpu.stat + cpu.max, or v1 cpuacct.usage +
 *                cpu.cfs_quota_us); for servers that share a machine, as the
 *                testbed's namespaces do
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

export const UTILIZATION_SOURCES = ['cpu', 'load', 'connections', 'memory', 'cgroup'] as const;
export type UtilizationSource = (typeof UTILIZATION_SOURCES)[number];

export interface LoadFigures {
  cpu: number;
  load1: number;
  load5: number;
  load15: number;
  connections: number;
  memoryUsed: number;
  utilization: number;
}

function read(root: string, path: string): string {
  return readFileSync(join(root, path), 'utf8');
}

/** Aggregate busy and total jiffies from the first line of /proc/stat. */
export function readCpuTimes(root = '/'): { busy: number; total: number } {
  const line = read(root, 'proc/stat').split('\n', 1)[0] ?? '';
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is inside user)
  const total = f.slice(0, 8).reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return { busy: total - idle, total };
}

export function readLoadAverage(root = '/'): [number, number, number] {
  const f = read(root, 'proc/loadavg').trim().split(/\s+/).map(Number);
  return [f[0] ?? 0, f[1] ?? 0, f[2] ?? 0];
}

/** 1 - MemAvailable/MemTotal. */
export function readMemoryUsed(root = '/'): number {
  const text = read(root, 'proc/meminfo');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  const total = kb('MemTotal');
  const avail = kb('MemAvailable');
  return total > 0 && Number.isFinite(avail) ? Math.min(1, Math.max(0, 1 - avail / total)) : 0;
}

/** Established TCP connections whose local port is one of `ports` (IPv4 and IPv6; this network namespace). */
export function countEstablished(ports: ReadonlySet<number>, root = '/'): number {
  let n = 0;
  for (const f of ['proc/net/tcp', 'proc/net/tcp6']) {
    let text: string;
    try {
      text = read(root, f);
    } catch {
      continue; // no IPv6
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st ...; local_address = HEXADDR:HEXPORT
      const cols = line.trim().split(/\s+/);
      if (cols[3] !== '01') continue;
      const local = cols[1] ?? '';
      const port = parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
      if (ports.has(port)) n++;
    }
  }
  return n;
}

/** CPU time used by a cgroup (ns) and its quota in CPUs (Infinity when unlimited). */
export function readCgroupCpu(group: string, root = '/'): { usageNs: number; cpus: number } {
  try {
    // cgroup v2
    const stat = read(root, join('sys/fs/cgroup', group, 'cpu.stat'));
    const usec = Number(/^usage_usec (\d+)/m.exec(stat)?.[1] ?? NaN);
    const [quota, period] = read(root, join('sys/fs/cgroup', group, 'cpu.max')).trim().split(/\s+/);
    const cpusV2 = quota === 'max' || quota === undefined ? Infinity : Number(quota) / Number(period ?? 100000);
    return { usageNs: usec * 1000, cpus: cpusV2 };
  } catch {
    // cgroup v1: cpuacct and cpu hierarchies
    const usageNs = Number(read(root, join('sys/fs/cgroup/cpuacct', group, 'cpuacct.usage')).trim());
    const quota = Number(read(root, join('sys/fs/cgroup/cpu', group, 'cpu.cfs_quota_us')).trim());
    const period = Number(read(root, join('sys/fs/cgroup/cpu', group, 'cpu.cfs_period_us')).trim());
    return { usageNs, cpus: quota > 0 && period > 0 ? quota / period : Infinity };
  }
}

export interface SamplerOptions {
  readonly source: UtilizationSource;
  readonly ports: readonly number[];
  /** For `connections`: the established-connection count that means 100%. */
  readonly maxConnections: number;
  /** For `cgroup`: the cgroup path below the hierarchy root, e.g. sluice/s1a. */
  readonly cgroup?: string | undefined;
  readonly root?: string;
}

/** Samples load figures; CPU figures are deltas since the previous sample. */
export class LoadSampler {
  readonly #o: SamplerOptions;
  readonly #root: string;
  readonly #ports: ReadonlySet<number>;
  readonly #ncpu = Math.max(1, cpus().length);
  #lastCpu: { busy: number; total: number };
  #lastGroup: { usageNs: number; at: number } | undefined;

  constructor(o: SamplerOptions, now: number = performance.now()) {
    this.#o = o;
    this.#root = o.root ?? '/';
    this.#ports = new Set(o.ports);
    this.#lastCpu = readCpuTimes(this.#root);
    if (o.source === 'cgroup' && o.cgroup !== undefined) this.#lastGroup = { usageNs: readCgroupCpu(o.cgroup, this.#root).usageNs, at: now };
  }

  /** `now` in ms (performance.now()); only the cgroup source uses it. */
  sample(now: number = performance.now()): LoadFigures {
    const c = readCpuTimes(this.#root);
    const dt = c.total - this.#lastCpu.total;
    const cpu = dt > 0 ? Math.min(1, Math.max(0, (c.busy - this.#lastCpu.busy) / dt)) : 0;
    this.#lastCpu = c;
    const [load1, load5, load15] = readLoadAverage(this.#root);
    const connections = countEstablished(this.#ports, this.#root);
    const memoryUsed = readMemoryUsed(this.#root);
    let utilization: number;
    switch (this.#o.source) {
      case 'cpu':
        utilization = cpu;
        break;
      case 'load':
        utilization = load1 / this.#ncpu;
        break;
      case 'connections':
        utilization = connections / this.#o.maxConnections;
        break;
      case 'memory':
        utilization = memoryUsed;
        break;
      case 'cgroup': {
        const g = readCgroupCpu(this.#o.cgroup ?? '', this.#root);
        const last = this.#lastGroup ?? { usageNs: g.usageNs, at: now };
        const elapsedNs = (now - last.at) * 1e6;
        const budget = Number.isFinite(g.cpus) ? g.cpus : this.#ncpu;
        utilization = elapsedNs > 0 ? Math.max(0, g.usageNs - last.usageNs) / (elapsedNs * budget) : 0;
        this.#lastGroup = { usageNs: g.usageNs, at: now };
        break;
      }
    }
    return { cpu, load1, load5, load15, connections, memoryUsed, utilization: Math.min(64, Math.max(0, utilization)) };
  }
}
