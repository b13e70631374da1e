/**
 * CPU cgroups for the testbed's servers. Namespaces share one kernel, so
 * /proc/stat is the same for every server; a cgroup per server (nginx in
 * it, with a CPU quota) gives each one its own CPU utilization, which the
 * agents report (utilization source `cgroup`). cgroup v1 (cpu + cpuacct
 * hierarchies, as on these machines) or v2 (cpu controller).
 *
 * Groups are named sluice-testbed/<prefix>/<server id>; down() removes them.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = '/sys/fs/cgroup';
export const CGROUP_BASE = 'sluice-testbed';

type Version = 'v1' | 'v2';

export function cgroupVersion(): Version | undefined {
  if (existsSync(join(ROOT, 'cpuacct')) && existsSync(join(ROOT, 'cpu', 'cpu.cfs_quota_us'))) return 'v1';
  try {
    if (readFileSync(join(ROOT, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('cpu')) return 'v2';
  } catch {
    /* neither */
  }
  return undefined;
}

function dirs(group: string, v: Version): string[] {
  return v === 'v1' ? [join(ROOT, 'cpu', group), join(ROOT, 'cpuacct', group)] : [join(ROOT, group)];
}

/** Creates `group` with a quota of `cpus` CPUs. */
export function cgroupCreate(group: string, cpus: number): void {
  const v = cgroupVersion();
  if (!v) throw new Error('no CPU cgroup controller available (cgroup v1 cpu+cpuacct or v2 cpu)');
  if (v === 'v2') {
    // Enable the cpu controller down the path.
    const parts = group.split('/');
    let p = ROOT;
    for (const part of parts) {
      try {
        writeFileSync(join(p, 'cgroup.subtree_control'), '+cpu');
      } catch {
        /* already enabled or not needed */
      }
      p = join(p, part);
      mkdirSync(p, { recursive: true });
    }
  }
  for (const d of dirs(group, v)) mkdirSync(d, { recursive: true });
  setCgroupQuota(group, cpus);
}

export function setCgroupQuota(group: string, cpus: number): void {
  const v = cgroupVersion();
  const period = 100_000;
  const quota = Math.max(1000, Math.round(cpus * period));
  if (v === 'v1') {
    writeFileSync(join(ROOT, 'cpu', group, 'cpu.cfs_period_us'), String(period));
    writeFileSync(join(ROOT, 'cpu', group, 'cpu.cfs_quota_us'), String(quota));
  } else if (v === 'v2') {
    writeFileSync(join(ROOT, group, 'cpu.max'), `${quota} ${period}`);
  }
}

export function cgroupAdd(group: string, pid: number): void {
  const v = cgroupVersion();
  if (!v) return;
  for (const d of dirs(group, v)) writeFileSync(join(d, 'cgroup.procs'), String(pid));
}

/** Removes a group tree (its processes must have exited; leftovers move to the root). */
export function cgroupRemove(group: string): void {
  const v = cgroupVersion();
  if (!v) return;
  for (const d of dirs(group, v)) removeTree(d, v === 'v1' ? join(d.slice(0, d.length - group.length - 1)) : ROOT);
}

function removeTree(dir: string, root: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeTree(join(dir, e.name), root);
  try {
    for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter((x) => x !== '')) {
      try {
        writeFileSync(join(root, 'cgroup.procs'), pid);
      } catch {
        /* exited meanwhile */
      }
    }
    rmdirSync(dir);
  } catch {
    /* busy: left for the next down() */
  }
}
