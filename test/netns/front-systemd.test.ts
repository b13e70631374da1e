/**
 * Issue 20 acceptance 3 through the real unit: deploy/systemd/sluice-front.service,
 * unchanged (User=sluice, AmbientCapabilities, ProtectSystem=strict and
 * the rest of its hardening, Type=notify, WatchdogSec, ExecReload with
 * check-config), run by systemd as PID 1 of its own PID, mount and cgroup
 * namespaces inside the testbed's front network namespace
 * (test/fixtures/systemd-pid1.sh). Under 5 new connections/s and 10
 * rate-limited 50 MiB downloads: `systemctl restart sluice-front`, then
 * `systemctl reload sluice-front` with a server added and one removed.
 * Asserted: 0 failed new connections, every download's SHA-1 intact, the
 * new daemon adopted the downloads' flows (its status), the kernel's
 * counter on the jump into our queue chain only grew (the jump was never
 * removed), and the rules needed no repair.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { FrontStatus } from '../../src/front/status.ts';
import { Download, PacedLoad, SynProbe, jumpCount } from '../helpers/restart-load.ts';
import { useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const PID1 = fileURLToPath(new URL('../fixtures/systemd-pid1.sh', import.meta.url));
const REALTIME_DROP_IN = fileURLToPath(new URL('../../deploy/systemd/sluice-front-realtime.conf', import.meta.url));
/**
 * The downloads' rate until they are released (Download.release, after
 * the reload): 50 MiB would take ~21 s, several times what the restart
 * and the reload below take here, so every download spans both (asserted
 * after the reload).
 */
const DOWNLOAD_RATE = '2500k';
const testbed = useTestbed({ blobMiB: 50, clusters: 1, clients: 1, serversPerCluster: 4 });
const usable = existsSync('/usr/bin/systemd') && existsSync('/sys/fs/cgroup/systemd') && existsSync('/sys/fs/cgroup/unified');

function configYaml(servers: readonly string[]): string {
  const lines = servers.map((n) => `      - { name: ${n}, address: 198.18.201.${String(11 + 'abcd'.indexOf(n.slice(-1)))}, capacity: 1000 }`);
  return `cluster: c1
uplinkAddress: 198.18.101.2
failMode: bypass
adminSocket: /run/sluice/front.sock
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: capacity
    # The queued SYN path, whose jump rule this test watches across restarts
    # and reloads (the kernel schedule's SYNs never take it).
    synPath: queue
    servers:
${lines.join('\n')}
`;
}

/** systemd as PID 1 of its namespaces, and commands run inside them. */
class SystemdNs {
  readonly child: ChildProcess;
  readonly cgroup: string;
  pid = 0;

  constructor(netns: string, cgroup: string, stateDir: string, yaml: string) {
    this.cgroup = cgroup;
    this.child = spawn(PID1, [netns, cgroup, stateDir, yaml], { stdio: 'ignore' });
  }

  /** systemd's pid (the fixture's unshare forks it: its only child). */
  async booted(): Promise<void> {
    await until(() => {
      try {
        const kids = readFileSync(`/proc/${String(this.child.pid)}/task/${String(this.child.pid)}/children`, 'utf8').trim();
        this.pid = Number(kids.split(/\s+/)[0] ?? 0);
        return this.pid > 0 && readFileSync(`/proc/${String(this.pid)}/comm`, 'utf8').trim() === 'systemd';
      } catch {
        return false;
      }
    }, 'systemd is PID 1 of its namespace', 30_000, 100);
  }

  run(cmd: readonly string[], input?: string): { code: number; stdout: string; stderr: string } {
    const r = spawnSync('nsenter', ['-t', String(this.pid), '-m', '-p', '-n', ...cmd], { encoding: 'utf8', timeout: 120_000, ...(input !== undefined ? { input } : {}) });
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
  }

  systemctl(...args: string[]): string {
    const r = this.run(['systemctl', '--no-pager', ...args]);
    assert.equal(r.code, 0, `systemctl ${args.join(' ')}: ${r.stdout}${r.stderr}`);
    return r.stdout.trim();
  }

  prop(name: string): string {
    return this.systemctl('show', '-p', name, '--value', 'sluice-front');
  }

  /** The host's pid of the unit's main process (MainPID is in the namespace's numbering): a child of PID 1. */
  mainPid(): number {
    const inside = this.prop('MainPID');
    const kids = readFileSync(`/proc/${String(this.pid)}/task/${String(this.pid)}/children`, 'utf8').trim().split(/\s+/);
    for (const k of kids) {
      const nspid = (/^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${k}/status`, 'utf8')) ?? [])[1]?.trim().split(/\s+/) ?? [];
      if (nspid.at(-1) === inside) return Number(k);
    }
    throw new Error(`MainPID ${inside}: no such child of systemd`);
  }

  status(): FrontStatus {
    const r = this.run(['/opt/sluice/bin/sluice', 'status', '--json', '--socket', '/run/sluice/front.sock']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as FrontStatus;
  }

  /** Kills PID 1 (the kernel ends every process of its namespace), then removes the cgroups. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const done = new Promise((r) => this.child.once('exit', r));
      if (this.pid > 0) process.kill(this.pid, 'SIGKILL');
      this.child.kill('SIGKILL');
      await done;
    }
    for (const h of ['systemd', 'unified']) {
      const root = `/sys/fs/cgroup/${h}/${this.cgroup}`;
      // Deepest first; an emptied cgroup may take a moment to be removable.
      for (let i = 0; i < 50 && existsSync(root); i++) {
        spawnSync('find', [root, '-depth', '-type', 'd', '-exec', 'rmdir', '{}', ';'], { stdio: 'ignore' });
        if (existsSync(root)) await sleep(100);
      }
    }
  }
}

describe('sluice-front.service under systemd (PID 1 of a namespace): restart and reload under load', { skip: usable ? false : 'systemd or the name=systemd and cgroup2 hierarchies are not available here' }, () => {
  let sd: SystemdNs | undefined;
  let syns: SynProbe | undefined;
  let ns = '';
  let client = '';
  let source = '';
  // Outside /run: the namespace gets its own /run (tmpfs).
  const stateDir = mkdtempSync(join(tmpdir(), 'sluice-systemd-'));

  before(async () => {
    const st = testbed();
    ns = st.plan.clusters[0]?.front.name ?? '';
    client = st.plan.clients[0]?.name ?? '';
    source = st.plan.clients[0]?.address ?? '';
    const yaml = join(stateDir, 'front.yaml');
    writeFileSync(yaml, configYaml(['s1a', 's1b', 's1c']));
    sd = new SystemdNs(ns, `sluice-${basename(st.runDir)}`, stateDir, yaml);
    const kill = (): void => {
      if (sd && sd.pid > 0) {
        try {
          process.kill(sd.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    };
    process.on('exit', kill);
    await sd.booted();
    await until(() => sd?.run(['systemctl', 'is-active', 'sluice-front']).stdout.trim() === 'active', 'sluice-front.service is active (READY=1)', 60_000, 250);
    // The test's own counting table (the daemon's installs replace only ours).
    syns = new SynProbe(ns);
  });

  after(async () => {
    await sd?.stop();
    syns?.remove();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('systemctl restart and reload (s1d added, s1b removed) under 5 conn/s and 10 x 50 MiB: 0 failed, SHA-1 intact, flows adopted, jump never replaced', async (t) => {
    const st = testbed();
    assert.ok(sd && syns);
    const probe = syns;
    // The unit as installed: its own user, only its capabilities.
    const pid0 = sd.mainPid();
    const status0 = readFileSync(`/proc/${String(pid0)}/status`, 'utf8');
    assert.match(status0, /^Uid:\s+64200\s/m, 'User=sluice');
    assert.match(status0, /^CapEff:\s+0000000000003000$/m, 'CAP_NET_ADMIN and CAP_NET_RAW only');
    assert.match(status0, /^NoNewPrivs:\s+1$/m);

    const load = new PacedLoad(client, source);
    const downloads = Array.from({ length: 10 }, () => new Download(client, DOWNLOAD_RATE));
    try {
      await until(() => downloads.every((d) => d.bytes >= 1 << 20), 'every download has 1 MiB', 30_000);
      await load.read();
      const jump0 = jumpCount(ns);
      const fallback0 = probe.read().fallback;

      // What an upgrade does: systemctl restart (SIGTERM, wait for the exit, start, wait for READY=1).
      sd.systemctl('restart', 'sluice-front');
      const pid1 = sd.mainPid();
      assert.notEqual(pid1, pid0, 'a new process');
      assert.equal(sd.prop('ActiveState'), 'active');
      const s1 = sd.status();
      assert.ok(s1.records.adopted >= 10, `the downloads' flows adopted: ${JSON.stringify(s1.records)}`);
      assert.ok(jumpCount(ns) >= jump0, 'the jump into our queue chain was never replaced (its counter only grew)');
      t.diagnostic(`restart: ${String(probe.read().fallback - fallback0)} SYN(s) DNATed by the fallback (no daemon's verdict) while no daemon was bound; adopted ${String(s1.records.adopted)}, corrected ${String(s1.records.corrected)}`);

      // Reload with a changed server list, through ExecReload (check-config, then SIGHUP).
      const w = sd.run(['sh', '-c', 'cat > /etc/sluice/front.yaml'], configYaml(['s1a', 's1c', 's1d']));
      assert.equal(w.code, 0, w.stderr);
      sd.systemctl('reload', 'sluice-front');
      await until(() => sd?.status().services[0]?.servers.some((x) => x.name === 's1d') === true, 'the reload is applied (s1d listed)', 20_000, 250);
      assert.equal(sd.mainPid(), pid1, 'a reload keeps the process');
      await load.read();
      await load.read();
      await until(async () => {
        await load.read();
        return (load.tally['s1d'] ?? 0) >= 3;
      }, 'new connections reach s1d', 20_000, 500);
      assert.equal((await load.read())['s1b'] ?? 0, 0, 'no new connection to the removed server');
      assert.ok(downloads.every((d) => d.child.exitCode === null && d.bytes < 50 << 20), `every download still running after the reload: ${downloads.map((d) => d.bytes).join(' ')} bytes`);

      // The restart and the reload are over: the downloads' rest at full speed.
      for (const d of downloads) d.release();
      const codes = await Promise.all(downloads.map((d) => d.done));
      await load.read();
      assert.deepEqual(codes, downloads.map(() => 0), 'every download completed');
      for (const d of downloads) {
        assert.equal(d.bytes, 50 << 20);
        assert.equal(d.sha1(), st.blobSha1);
      }
      assert.equal(load.failures, 0, `failed new connections: ${String(load.failures)} (answered: ${JSON.stringify(load.tally)})`);
      assert.ok(jumpCount(ns) > jump0, 'the jump counter only grew');
      const end = sd.status();
      assert.equal(end.rules.repaired, 0, 'the rules needed no repair');
      assert.equal(Number(sd.prop('NRestarts')), 0, 'no restart by systemd (watchdog, crash)');
      t.diagnostic(`answered ${JSON.stringify(load.tally)}, 0 failed`);
    } finally {
      await load.stop();
      for (const d of downloads) d.child.kill();
    }
  });
  it('deploy/systemd/sluice-front-realtime.conf as a drop-in: the main thread runs SCHED_RR 5 under the hardened unit, later threads and children do not, and it steers', async () => {
    assert.ok(sd);
    const dropIn = readFileSync(REALTIME_DROP_IN, 'utf8');
    const w = sd.run(['sh', '-c', `mkdir -p ${stateDir}/units/sluice-front.service.d && cat > ${stateDir}/units/sluice-front.service.d/realtime.conf`], dropIn);
    assert.equal(w.code, 0, w.stderr);
    sd.systemctl('daemon-reload');
    sd.systemctl('restart', 'sluice-front');
    assert.equal(sd.prop('ActiveState'), 'active');
    const pid = sd.mainPid();
    // /proc/PID/task/TID/stat: field 40 rt_priority, 41 policy (2: SCHED_RR, 0: SCHED_OTHER).
    const sched = (tid: string): [number, number] => {
      const stat = readFileSync(`/proc/${String(pid)}/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 on
      return [Number(f[41 - 3]), Number(f[40 - 3])];
    };
    assert.deepEqual(sched(String(pid)), [2, 5], 'the event loop (main thread): SCHED_RR, priority 5');
    const others = readdirSync(`/proc/${String(pid)}/task`).filter((tid) => tid !== String(pid));
    assert.ok(others.length > 0);
    for (const tid of others) assert.deepEqual(sched(tid), [0, 0], `thread ${tid} (created after the start): the normal policy (ResetOnFork)`);
    // The processes it runs (nft, conntrack) get the normal policy too: the kernel's reset-on-fork flag on the process.
    const attr = sd.run(['chrt', '-p', sd.prop('MainPID')]);
    assert.equal(attr.code, 0, attr.stderr);
    assert.match(attr.stdout, /SCHED_RR\|SCHED_RESET_ON_FORK/, attr.stdout);
    // And it steers: fetches through the VIP answered by the servers.
    const st = testbed();
    const client = st.plan.clients[0]?.name ?? '';
    await until(() => spawnSync('ip', ['netns', 'exec', client, 'curl', '-s', '-o', '/dev/null', '-m', '2', '-w', '%{http_code}', 'http://198.19.1.1/'], { encoding: 'utf8' }).stdout === '200', 'a fetch through the VIP is answered', 20_000, 250);
    const codes = Array.from({ length: 10 }, () => spawnSync('ip', ['netns', 'exec', client, 'curl', '-s', '-o', '/dev/null', '-m', '2', '-w', '%{http_code}', 'http://198.19.1.1/'], { encoding: 'utf8' }).stdout);
    assert.deepEqual(codes, codes.map(() => '200'));
    assert.equal(sd.status().rules.repaired, 0);
  });
});
