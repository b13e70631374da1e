/**
 * Hitless stop, restart and reload of `sluice front` (issue 20, part 4 and
 * acceptance 3), on the testbed with real nginx, curl, NFQUEUE and kernel
 * NAT. Everything is judged from one clock that sees the truth: the
 * kernel's rule counters, the daemon's own log and status, the clients'
 * outcomes. No wall-clock comparisons between processes.
 *
 *  1. Installing over existing chains is atomic: SYNs sent while the rules
 *     are reinstalled 300 times all meet our queue and nat rules (counting
 *     rules placed after our jumps see none of them); with our chain
 *     flushed for real, they see every one (the probe can fail).
 *  2. Under 5 new connections/s plus 10 rate-limited 50 MiB downloads:
 *     SIGTERM then a new start (what `systemctl restart` does), a reload
 *     that adds a server and removes one, and a kill -9 then a start. No
 *     new connection fails, every download's SHA-1 is intact, the new
 *     daemon adopts the downloads' flows, the fallback's HMARK rule carried
 *     SYNs while no daemon was bound, and the jump into our queue chain is
 *     the same rule object throughout (its counter never went back).
 *  3. As an operator: a second start while one runs is refused (queue
 *     owned); `--remove-rules` while it runs is refused and leaves the
 *     rules; SIGTERM twice exits 0 with the rules in place; then
 *     `--remove-rules` removes them, and again finds nothing.
 *  4. SYNs held by a checkpoint at SIGTERM get a server's mark before the
 *     queue closes (none is left to be retransmitted to the fallback).
 *  5. deploy/install.sh --uninstall, run as on a real host (ROOT=/) in a
 *     private mount namespace: removes the rules; with a front node still
 *     running outside systemd, leaves them, exits 1 and says why.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { installRules } from '../../src/front/iptables.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { renderRules } from '../../src/front/rules.ts';
import { loadConfig } from '../../src/config/load.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';
import { Download, PacedLoad, UNMARKED, VIP, fallbackSyns, hmarkCount, jumpCount, ruleCount, synFlood } from '../helpers/restart-load.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const UNINSTALL = fileURLToPath(new URL('../fixtures/uninstall-here.sh', import.meta.url));
const testbed = useTestbed({ blobMiB: 50, clusters: 1, clients: 1, serversPerCluster: 4 });

function configYaml(servers: readonly string[]): string {
  const lines = servers.map((n) => `      - { name: ${n}, address: 198.18.201.${String(11 + 'abcd'.indexOf(n.slice(-1)))}, capacity: 1000 }`);
  return `cluster: c1
uplinkAddress: 198.18.101.2
failMode: bypass
services:
  - name: www
    vip: ${VIP}
    port: 80
    method: capacity
    servers:
${lines.join('\n')}
`;
}

/** `sluice front ARGS` run to completion in `ns`. */
function frontCli(ns: string, args: readonly string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync('ip', ['netns', 'exec', ns, BIN, 'front', ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe('sluice front: hitless stop, restart and reload', () => {
  let front: FrontProcess | undefined;
  let ns = '';
  let client = '';
  let source = '';
  let configFile = '';

  before(() => {
    const st = testbed();
    ns = st.plan.clusters[0]?.front.name ?? '';
    client = st.plan.clients[0]?.name ?? '';
    source = st.plan.clients[0]?.address ?? '';
    configFile = writeConfig(join(st.runDir, 'front.yaml'), configYaml(['s1a', 's1b', 's1c']));
    // Short TIME_WAIT in the front node's conntrack: the SYN probe reuses source ports.
    nsRun(ns, 'sysctl', ['-qw', 'net.netfilter.nf_conntrack_tcp_timeout_time_wait=1']);
  });

  after(async () => {
    await front?.stop();
  });

  it('reinstalling over existing chains is atomic: no SYN misses our mangle or nat rules during 300 reinstalls under a SYN flood; the same flood does meet a non-atomic flush-then-restore', async (t) => {
    const st = testbed();
    const rules = renderRules(loadConfig(frontConfigSchema, configFile));
    installRules(rules, ns);
    const restoreFile = join(st.runDir, 'front-rules.restore');
    writeFileSync(restoreFile, rules.restore);
    // No daemon is bound: the queue rule's bypass accepts the SYN (it leaves
    // mangle PREROUTING there), and the fallback DNATs it (nat PREROUTING
    // ends there). A SYN reaching one of these rules, placed after our
    // jumps, met no rule of ours in that table.
    const probe = ['-d', `${VIP}/32`, '-p', 'tcp', '--dport', '80', '--tcp-flags', 'SYN,ACK,FIN,RST', 'SYN'];
    nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-A', 'PREROUTING', ...probe]);
    nsRun(ns, 'iptables', ['-w', '-t', 'nat', '-A', 'PREROUTING', ...probe]);
    const missed = (table: string): number => ruleCount(ns, table, 'PREROUTING', /dpt:80 flags:0x17\/0x02$/);
    let flood: ChildProcess | undefined;
    try {
      const jumpBefore = jumpCount(ns);
      flood = synFlood(client, source, 2_000_000);
      await until(() => jumpCount(ns) >= jumpBefore + 1000, 'the SYN flood is under way', 30_000);
      // Our chains' counters restart at each install; the jumps' do not.
      const natJump = (): number => ruleCount(ns, 'nat', 'PREROUTING', /SLUICE_DNAT/);
      const mangleBefore = jumpCount(ns);
      const natBefore = natJump();
      // The same iptables-restore --noflush the daemon runs at start, reload
      // and repair (installRules), 300 times in a row, without the jump checks.
      const r = spawnSync('ip', ['netns', 'exec', ns, 'sh', '-c', 'i=0; while [ $i -lt 300 ]; do iptables-restore -w --noflush < "$1" || exit 1; i=$((i+1)); done', 'sh', restoreFile], { encoding: 'utf8', timeout: 120_000 });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(flood.exitCode, null, 'the flood lasted through every reinstall');
      const carried = jumpCount(ns) - mangleBefore;
      const natCarried = natJump() - natBefore;
      t.diagnostic(`during 300 reinstalls: ${String(carried)} packets through the mangle jump, ${String(natCarried)} new flows through the nat jump; missed ${String(missed('mangle'))} / ${String(missed('nat'))}`);
      assert.ok(carried >= 1000 && natCarried >= 1000, `SYNs through our jumps during the reinstalls: mangle ${String(carried)}, nat ${String(natCarried)}`);
      assert.equal(missed('mangle'), 0, `SYNs that met no mangle rule of ours (of ${String(carried)} during the reinstalls)`);
      assert.equal(missed('nat'), 0, `SYNs that met no nat rule of ours (of ${String(natCarried)} new flows during the reinstalls)`);
      // The probe can fail: the same flood against a flush of our queue
      // chain followed by the restore (two commits, a window between them).
      const nonAtomic = spawnSync('ip', ['netns', 'exec', ns, 'sh', '-c', 'i=0; while [ $i -lt 20 ]; do iptables -w -t mangle -F SLUICE_QUEUE && iptables-restore -w --noflush < "$1" || exit 1; i=$((i+1)); done', 'sh', restoreFile], { encoding: 'utf8', timeout: 120_000 });
      assert.equal(nonAtomic.status, 0, nonAtomic.stderr);
      assert.equal(flood.exitCode, null, 'the flood lasted through the non-atomic reinstalls');
      t.diagnostic(`20 non-atomic reinstalls: ${String(missed('mangle'))} SYNs met no queue rule`);
      assert.ok(missed('mangle') > 0, 'a window between flush and refill is seen by the probe');
      flood.kill();
    } finally {
      flood?.kill();
      nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-D', 'PREROUTING', ...probe]);
      nsRun(ns, 'iptables', ['-w', '-t', 'nat', '-D', 'PREROUTING', ...probe]);
      installRules(rules, ns);
    }
  });

  it('under 5 new connections/s and 10 downloads of 50 MiB: SIGTERM + start, reload (add s1d, remove s1b), kill -9 + start: 0 failed, downloads intact, flows adopted, fallback carried SYNs, the jump rule never replaced', async () => {
    const st = testbed();
    front = new FrontProcess(ns, configFile);
    await front.waitFor('front node ready');
    const load = new PacedLoad(client, source);
    const downloads = Array.from({ length: 10 }, () => new Download(client, '1500k'));
    try {
      // Every download under way (established through the first daemon).
      await until(() => downloads.every((d) => d.bytes >= 1 << 20), 'every download has 1 MiB', 30_000);
      await load.read();
      const jump0 = jumpCount(ns);
      const hmark0 = hmarkCount(ns);

      // systemctl restart: SIGTERM, wait for the exit, start again.
      const stopLine = front.lines.length;
      await front.stop();
      assert.equal(front.child.exitCode, 0);
      assert.ok(front.lines.slice(stopLine).some((l) => String(l['msg']).startsWith('front node stopped; its rules stay')));
      assert.match(nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-S', 'SLUICE_QUEUE']), /NFQUEUE --queue-num 0 --queue-bypass/, 'rules left in place');
      // No daemon: new connections meet the fallback spread (kernel counter).
      await until(() => hmarkCount(ns) >= hmark0 + 3, 'the HMARK fallback carries new SYNs while no daemon is bound', 15_000);
      const away = await load.read();
      assert.ok(Object.values(away).reduce((a, b) => a + b, 0) >= 1, 'connections answered while no daemon ran');

      front = new FrontProcess(ns, configFile);
      const ready = await front.waitFor('front node ready');
      assert.ok(Number(ready['rebuilt']) >= 10, `the downloads' flows adopted at start: ${JSON.stringify(ready)}`);
      const hmarkBack = hmarkCount(ns);
      await until(async () => Number(((await front!.status())['counters'] as Record<string, number>)['decided']) >= 3, 'the new daemon decides new connections', 15_000, 500);
      const status = await front.status();
      const records = status['records'] as Record<string, number>;
      assert.ok((records['adopted'] ?? 0) >= 10 && (records['active'] ?? 0) >= 10, `records: ${JSON.stringify(records)}`);
      const rules = status['rules'] as Record<string, number>;
      assert.equal(rules['repaired'], 0, 'adopted rules needed no repair');
      assert.equal(hmarkCount(ns), hmarkBack, 'with the daemon bound, no SYN goes to the fallback');

      // Reload with a changed server list: s1d added, s1b removed.
      writeConfig(configFile, configYaml(['s1a', 's1c', 's1d']));
      const from = front.lines.length;
      front.signal('SIGHUP');
      await front.waitFor('configuration reloaded', 15_000, from);
      await load.read();
      await load.read(); // a request decided before the reload may complete in the first window
      await until(async () => {
        await load.read();
        return (load.tally['s1d'] ?? 0) >= 3;
      }, 'new connections reach s1d', 20_000, 500);
      const afterReload = await load.read();
      assert.equal(afterReload['s1b'] ?? 0, 0, 'no new connection to the removed server');

      // kill -9 and start again (Restart=always after a crash).
      front.signal('SIGKILL');
      await new Promise((r) => front!.child.once('exit', r));
      const hmark1 = hmarkCount(ns);
      await until(() => hmarkCount(ns) >= hmark1 + 2, 'the fallback carries new SYNs after a crash', 15_000);
      front = new FrontProcess(ns, configFile);
      const ready2 = await front.waitFor('front node ready');
      assert.ok(Number(ready2['rebuilt']) >= 1, JSON.stringify(ready2));

      const codes = await Promise.all(downloads.map((d) => d.done));
      await load.read();
      assert.deepEqual(codes, downloads.map(() => 0), 'every download completed');
      for (const d of downloads) {
        assert.equal(d.bytes, 50 << 20);
        assert.equal(d.sha1(), st.blobSha1);
      }
      assert.equal(load.failures, 0, `failed new connections: ${String(load.failures)} (answered: ${JSON.stringify(load.tally)})`);
      // The jump rule was never deleted and added again: its counter only grew.
      assert.ok(jumpCount(ns) > jump0, `jump counter ${String(jumpCount(ns))} after ${String(jump0)}`);
      assert.ok((load.tally['s1d'] ?? 0) >= 3);
    } finally {
      await load.stop();
      for (const d of downloads) d.child.kill();
    }
  });

  it('as an operator: a second start is refused (queue owned); --remove-rules refused while running; SIGTERM twice exits 0, rules stay; --remove-rules removes them, then finds nothing', async () => {
    assert.ok(front);
    const second = frontCli(ns, ['--config', configFile]);
    assert.equal(second.code, 1);
    assert.match(second.stderr, /NFQUEUE 0 is bound by another process .*pid \d+/);
    assert.match(nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-S', 'SLUICE_QUEUE']), /NFQUEUE/, 'the refused start left the rules');

    const refused = frontCli(ns, ['--remove-rules', '--config', configFile]);
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /a front node is running here.*\n.*NFQUEUE 0 .*pid \d+/s);
    assert.match(refused.stderr, /stop it first/);
    assert.match(nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-S', 'SLUICE_QUEUE']), /NFQUEUE/);

    const exited = new Promise<number | null>((r) => front!.child.once('exit', (code) => { r(code); }));
    front.signal('SIGTERM');
    front.signal('SIGTERM');
    assert.equal(await exited, 0);
    assert.match(nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-S', 'SLUICE_QUEUE']), /NFQUEUE/);

    const removed = frontCli(ns, ['--remove-rules']);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /removed mangle chain SLUICE_QUEUE \(\d+ rules\) and 1 jump to it/);
    assert.match(removed.stdout, /removed nat chain SLUICE_DNAT/);
    for (const table of ['mangle', 'nat', 'filter']) assert.doesNotMatch(nsRun(ns, 'iptables-save', ['-t', table]), /SLUICE_/);
    const again = frontCli(ns, ['--remove-rules', '--config', configFile]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /nothing to remove/);
  });

  it('SYNs held by a checkpoint at SIGTERM get their verdict (a server\'s mark) before the queue closes: answered, none left to the fallback', async () => {
    const st = testbed();
    // One connection per source at a time; the next one waits up to 20 s.
    const held = writeConfig(join(st.runDir, 'front-held.yaml'), configYaml(['s1a', 's1b', 's1c']).replace('    method: capacity\n', '    method: capacity\n    checkpoints:\n      - { name: one, kind: concurrency-limit, criterion: source, limit: 1, queue: { maxLength: 10, maxDelayMs: 20000 } }\n'));
    front = new FrontProcess(ns, held);
    await front.waitFor('front node ready');
    nsRun(ns, 'iptables', ['-w', '-t', 'nat', '-I', 'PREROUTING', '1', ...UNMARKED]);
    const dl = new Download(client, '1M');
    try {
      await until(() => dl.bytes >= 1 << 20, 'the first connection holds the source\'s one slot', 30_000);
      const waiting = spawn('ip', ['netns', 'exec', client, 'curl', '-s', '-m', '30', '-o', '/dev/null', '-w', '%{http_code}', `http://${VIP}/`], { stdio: ['ignore', 'pipe', 'ignore'] });
      let code = '';
      waiting.stdout.on('data', (d: Buffer) => (code += d.toString()));
      const answered = new Promise<number>((r) => waiting.on('close', (c) => { r(c ?? -1); }));
      await until(async () => ((await front!.status())['shaping'] as { heldNow: number }).heldNow >= 1, 'the second SYN is held', 15_000, 250);
      const unmarked0 = fallbackSyns(ns);
      const from = front.lines.length;
      await front.stop();
      const stopped = front.lines.slice(from).find((l) => String(l['msg']).startsWith('front node stopped'));
      assert.ok(stopped && Number(stopped['heldReleased']) >= 1, JSON.stringify(stopped));
      assert.equal(await answered, 0);
      assert.equal(code, '200');
      assert.equal(fallbackSyns(ns), unmarked0, 'the held SYN left with a server\'s mark: no retransmit met the fallback');
    } finally {
      dl.child.kill();
      nsRun(ns, 'iptables', ['-w', '-t', 'nat', '-D', 'PREROUTING', ...UNMARKED]);
    }
  });

  it('deploy/install.sh --uninstall (ROOT=/, in a private mount namespace): removes the rules a stopped node left; with a node still running outside systemd, exits 1 and says so', async () => {
    front = new FrontProcess(ns, configFile);
    await front.waitFor('front node ready');
    const uninstall = (): { code: number; out: string } => {
      const scratch = mkdtempSync(join(tmpdir(), 'sluice-uninstall-'));
      try {
        const r = spawnSync('ip', ['netns', 'exec', ns, 'unshare', '--mount', '--propagation', 'private', UNINSTALL, configFile, scratch], { encoding: 'utf8', timeout: 120_000 });
        return { code: r.status ?? -1, out: r.stdout + r.stderr };
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
    };
    let r = uninstall();
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /a front node is running here/);
    assert.match(r.out, /install\.sh: the front node's rules were NOT removed \(see above\); after stopping it: sluice front --remove-rules/);
    assert.match(r.out, /install\.sh: removed/, 'everything else is removed all the same');
    assert.match(nsRun(ns, 'iptables', ['-w', '-t', 'mangle', '-S', 'SLUICE_QUEUE']), /NFQUEUE/);
    await front.stop();
    r = uninstall();
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /sluice front: removed mangle chain SLUICE_QUEUE/);
    assert.match(r.out, /^left: $/m, '/opt/sluice removed');
    for (const table of ['mangle', 'nat', 'filter']) assert.doesNotMatch(nsRun(ns, 'iptables-save', ['-t', table]), /SLUICE_/);
  });
});
