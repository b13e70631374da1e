/**
 * The daemons as deploy/systemd/ runs them: as an unprivileged user with
 * only the unit's capabilities (setpriv, as systemd's User= and
 * AmbientCapabilities= do), talking sd_notify to a real AF_UNIX datagram
 * socket (test/fixtures/notify-listener.py, standing in for systemd).
 *
 *  front  CAP_NET_ADMIN + CAP_NET_RAW: installs its rules, binds the queue,
 *         READY=1, WATCHDOG=1 from the real packet-loop check, serves curl
 *         through the VIP, reloads on SIGHUP (RELOADING=1 / READY=1), and
 *         after a kill and restart rebuilds its records from the kernel's
 *         flows over ctnetlink (/proc/net/nf_conntrack is root-only);
 *         STOPPING=1 at SIGTERM with its rules left in place (the fallback
 *         serves until the next start), then removed by --remove-rules.
 *  dns    CAP_NET_BIND_SERVICE: port 53, READY=1, WATCHDOG=1, dig answered,
 *         SIGHUP with a good and a refused file.
 *  agent  no capability: READY=1, SIGHUP reload applied, then refused.
 *  master no capability: READY=1, WATCHDOG=1, SIGHUP applied and refused,
 *         STOPPING=1.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { zoneText } from '../../scripts/testbed/site.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { NotifyListener } from '../helpers/notify.ts';
import { nsRun, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

/** The download's client port (a fixed one: its flow is told from the others in conntrack). */
const DOWNLOAD_PORT = 45321;

/** A uid/gid with no passwd entry and no supplementary groups: nothing but what setpriv grants. */
const UID = 64123;
const testbed = useTestbed({ blobMiB: 20 });

function unprivileged(caps: readonly string[]): string[] {
  const c = caps.map((x) => `+${x}`).join(',');
  return [
    'setpriv', `--reuid=${UID}`, `--regid=${UID}`, '--clear-groups',
    ...(caps.length > 0 ? [`--inh-caps=${c}`, `--ambient-caps=${c}`, `--bounding-set=-all,${c}`] : ['--inh-caps=-all', '--bounding-set=-all']),
    '--no-new-privs',
  ];
}

/** A directory the unprivileged daemon may write (its admin socket), like systemd's RuntimeDirectory=. */
function runtimeDir(base: string, name: string): string {
  const d = join(base, name);
  mkdirSync(d, { recursive: true });
  chownSync(d, UID, UID);
  chmodSync(d, 0o755);
  return d;
}

const capsOf = (pid: number): string => (/^CapEff:\s+(\S+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8')) ?? [])[1] ?? '';
const uidOf = (pid: number): string => (/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8')) ?? [])[1] ?? '';

function frontYaml(adminSocket: string, servers: string): string {
  return `cluster: c1
uplinkAddress: 198.18.101.2
adminSocket: ${adminSocket}
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: capacity
    servers:
${servers}
`;
}
const THREE = ['s1a', 's1b', 's1c'].map((n, i) => `      - { name: ${n}, address: 198.18.201.${11 + i}, capacity: 100 }`).join('\n');

describe('front node as user sluice would run it (CAP_NET_ADMIN, CAP_NET_RAW), with sd_notify', () => {
  let notify: NotifyListener;
  let front: FrontProcess | undefined;
  let env: NodeJS.ProcessEnv;
  let configFile = '';
  let ns = '';

  before(async () => {
    const st = testbed();
    ns = st.plan.clusters[0]?.front.name ?? '';
    notify = await NotifyListener.start(join(st.runDir, 'notify-front.sock'));
    chmodSync(join(st.runDir, 'notify-front.sock'), 0o666); // systemd's socket accepts any sender; it checks the pid
    configFile = writeConfig(join(st.runDir, 'front.yaml'), frontYaml(join(runtimeDir(st.runDir, 'run-front'), 'front.sock'), THREE));
    env = { ...process.env, NOTIFY_SOCKET: notify.address, WATCHDOG_USEC: '2000000' };
  });

  after(async () => {
    await front?.stop();
    notify.stop();
  });

  it('starts unprivileged: READY=1 after rules and queue, WATCHDOG=1 from its main pid, serves the VIP', async () => {
    const st = testbed();
    front = new FrontProcess(ns, configFile, 'front', { env, wrap: unprivileged(['net_admin', 'net_raw']) });
    const ready = await notify.waitFor('READY', '1');
    assert.match(ready.fields['STATUS'] ?? '', /cluster c1: 1 service\(s\) on queue 0/);
    assert.equal(ready.pid, front.child.pid, 'sent by the main process (NotifyAccess=main)');
    assert.equal(uidOf(front.child.pid ?? 0), String(UID));
    assert.equal(capsOf(front.child.pid ?? 0), '0000000000003000', 'CAP_NET_ADMIN and CAP_NET_RAW only');
    // Rules are in place before READY=1.
    assert.match(nsRun(ns, 'iptables', ['-t', 'mangle', '-S', 'SLUICE_QUEUE']), /NFQUEUE/);
    const from = notify.messages.length;
    const page = nsRun(st.plan.clients[0]?.name ?? '', 'curl', ['-s', '-m', '5', 'http://198.19.1.1/']);
    assert.match(page, /^server s1[abc] /);
    // The liveness check ran on a queue that has just carried packets.
    const wd = await notify.waitFor('WATCHDOG', '1', from);
    assert.equal(wd.pid, front.child.pid);
    assert.equal(front.lines.some((l) => l['msg'] === 'watchdog: not alive, WATCHDOG=1 withheld (systemd restarts the service when the interval runs out)'), false);
    // The admin socket works for root (sluice status) and is the daemon's.
    const status = JSON.parse(nsRun(ns, process.execPath, ['--no-warnings', 'src/cli/main.ts', 'status', '--json', '--socket', join(st.runDir, 'run-front', 'front.sock')])) as { counters: Record<string, number> };
    assert.ok((status.counters['decided'] ?? 0) >= 1);
  });

  it('SIGHUP: RELOADING=1 then READY=1; the new rules are installed unprivileged; a refused file keeps serving', async () => {
    const st = testbed();
    assert.ok(front);
    let from = notify.messages.length;
    writeFileSync(configFile, frontYaml(join(st.runDir, 'run-front', 'front.sock'), THREE.split('\n').slice(0, 2).join('\n')));
    front.signal('SIGHUP');
    await notify.waitFor('RELOADING', '1', from);
    const ready = await notify.waitFor('READY', '1', from);
    assert.ok(notify.indexOf('RELOADING', from) < notify.messages.indexOf(ready));
    await front.waitFor('configuration reloaded', 10_000);
    // The reloaded DNAT map (sluice's nft table, loaded by the unprivileged daemon): s1c is gone.
    const targets = nsRun(ns, 'nft', ['list', 'map', 'ip', 'sluice', 'targets']);
    assert.doesNotMatch(targets, /198\.18\.201\.13/);
    assert.match(targets, /198\.18\.201\.12 \. 80/);
    from = notify.messages.length;
    writeFileSync(configFile, 'cluster: c1\nservices: []\n');
    front.signal('SIGHUP');
    const again = await notify.waitFor('READY', '1', from);
    assert.match(again.fields['STATUS'] ?? '', /last reload refused/);
    assert.match(nsRun(st.plan.clients[0]?.name ?? '', 'curl', ['-s', '-m', '5', 'http://198.19.1.1/']), /^server s1[ab] /);
  });

  it('killed during a download and started again unprivileged (Restart=always): records rebuilt from the flow table over ctnetlink, download intact; SIGTERM: STOPPING=1, rules stay; --remove-rules removes them', async () => {
    const st = testbed();
    assert.ok(front);
    writeFileSync(configFile, frontYaml(join(st.runDir, 'run-front', 'front.sock'), THREE));
    const client = st.plan.clients[0]?.name ?? '';
    // From a port of its own: the wait below must see this download's flow,
    // not an earlier test's connection still ESTABLISHED in conntrack
    // (that made the kill come before the download's SYN: failed in CI with
    // 0 rebuilt and no download flow in the table 0.8 s later).
    const dl = spawn('ip', ['netns', 'exec', client, 'curl', '-s', '-o', '/dev/null', '-w', '%{size_download}', '--local-port', String(DOWNLOAD_PORT), '--limit-rate', '2M', '-m', '60', 'http://198.19.1.1/blob.bin'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let size = '';
    dl.stdout.on('data', (d: Buffer) => (size += d.toString()));
    const done = new Promise<number>((r) => dl.on('close', (c) => { r(c ?? -1); }));
    await until(() => new RegExp(`ESTABLISHED .*sport=${String(DOWNLOAD_PORT)} dport=80 .*sport=80 dport=${String(DOWNLOAD_PORT)} `).test(nsRun(ns, 'cat', ['/proc/net/nf_conntrack'])), 'the download is established');
    const started = performance.now();
    front.signal('SIGKILL');
    await new Promise((r) => front?.child.once('exit', r));
    front = new FrontProcess(ns, configFile, 'front', { env, wrap: unprivileged(['net_admin', 'net_raw']) });
    const ready = await front.waitFor('front node ready');
    // /proc/net/nf_conntrack is root-only: these records came over ctnetlink.
    // The download (20 MiB at 2 MiB/s: 10 s) must still run when the new
    // daemon lists the flows: at 4 MiB/s it lasted 5 s, and a start that
    // slow on a busy machine finds the flow closed and rebuilds nothing
    // (failed once in CI with 0; the message carries the second pass's
    // counts and the flows the test saw, to tell that from a real miss).
    assert.ok(Number(ready['rebuilt']) >= 1, `records rebuilt from the kernel's flows as non-root: ${String(ready['rebuilt'])}; after the bind: ${String(ready['adoptedAfterBind'])} adopted, ${String(ready['corrected'])} corrected; port 80 flows: ${nsRun(ns, 'cat', ['/proc/net/nf_conntrack']).split('\n').filter((l) => l.includes('dport=80 ')).join(' | ')}; kill to ready took ${Math.round(performance.now() - started)} ms`);
    assert.equal(await done, 0, 'the download completed across the restart');
    assert.equal(Number(size), 20 << 20);
    const from = notify.messages.length;
    await front.stop();
    await notify.waitFor('STOPPING', '1', from);
    assert.match(nsRun(ns, 'iptables', ['-t', 'mangle', '-S']), /-j SLUICE_QUEUE/, 'a stop leaves the rules');
    nsRun(ns, process.execPath, ['--no-warnings', 'src/cli/main.ts', 'front', '--remove-rules', '--config', configFile]);
    assert.doesNotMatch(nsRun(ns, 'iptables', ['-t', 'mangle', '-S']), /SLUICE_QUEUE/);
    assert.doesNotMatch(nsRun(ns, 'nft', ['list', 'tables']), /sluice/);
  });
});

describe('dns as user sluice would run it (CAP_NET_BIND_SERVICE), with sd_notify', () => {
  let notify: NotifyListener;
  let dns: FrontProcess | undefined;
  let configFile = '';

  before(async () => {
    const st = testbed();
    // A path, as systemd's own /run/systemd/notify: an abstract name would
    // not be reachable from the DNS namespace (abstract names are per network namespace).
    notify = await NotifyListener.start(join(st.runDir, 'notify-dns.sock'));
    chmodSync(notify.address, 0o666);
    const zone = join(st.runDir, 'example.test.zone');
    writeFileSync(zone, zoneText(st));
    const yaml = `name: dns\nlisten: ["${st.plan.dns.address}:53"]\nzones: [{ file: ${zone} }]\nadminSocket: ${join(runtimeDir(st.runDir, 'run-dns'), 'dns.sock')}\n`;
    configFile = writeConfig(join(st.runDir, 'dns.yaml'), yaml);
    dns = new FrontProcess(st.plan.dns.name, configFile, 'dns', { env: { ...process.env, NOTIFY_SOCKET: notify.address, WATCHDOG_USEC: '2000000' }, wrap: unprivileged(['net_bind_service']) });
  });

  after(async () => {
    await dns?.stop();
    notify.stop();
  });

  it('READY=1 once listening on port 53, WATCHDOG=1, answers; SIGHUP good then refused', async () => {
    const st = testbed();
    assert.ok(dns);
    const ready = await notify.waitFor('READY', '1');
    assert.equal(ready.pid, dns.child.pid);
    assert.equal(capsOf(dns.child.pid ?? 0), '0000000000000400', 'CAP_NET_BIND_SERVICE only');
    assert.match(nsRun(st.plan.clients[0]?.name ?? '', 'dig', ['+short', '+time=2', '+tries=2', `@${st.plan.dns.address}`, 'ns1.example.test', 'A']), new RegExp(st.plan.dns.address.replace(/\./g, '\\.')));
    await notify.waitFor('WATCHDOG', '1');
    let from = notify.messages.length;
    dns.signal('SIGHUP');
    await notify.waitFor('RELOADING', '1', from);
    const ok = await notify.waitFor('READY', '1', from);
    assert.doesNotMatch(ok.fields['STATUS'] ?? '', /refused/);
    from = notify.messages.length;
    writeFileSync(configFile, readFileSync(configFile, 'utf8').replace('zones:', 'zone:'));
    dns.signal('SIGHUP');
    await notify.waitFor('RELOADING', '1', from);
    const refused = await notify.waitFor('READY', '1', from);
    assert.match(refused.fields['STATUS'] ?? '', /last reload refused/);
    from = notify.messages.length;
    await dns.stop();
    await notify.waitFor('STOPPING', '1', from);
  });
});

describe('agent without any capability, with sd_notify and SIGHUP reload', () => {
  it('READY=1, a reload applied, a refused one logged while the agent runs on', async () => {
    const st = testbed();
    const k = st.plan.clusters[0];
    const s = k?.servers[0];
    assert.ok(k && s);
    const notify = await NotifyListener.start(join(st.runDir, 'notify-agent.sock'));
    chmodSync(notify.address, 0o666);
    const yaml = (loadSeconds: number): string => `name: ${s.id}\naddress: ${s.address}\nfront: { endpoint: 'tcp://198.18.201.1:7101' }\ncontrol: { plaintext: true }\nloadSeconds: ${loadSeconds}\nutilization: { source: connections }\naccessLog: { path: ${join(st.runDir, 'agent-access.log')} }\nadminSocket: ${join(runtimeDir(st.runDir, 'run-agent'), 'agent.sock')}\n`;
    const configFile = writeConfig(join(st.runDir, 'agent.yaml'), yaml(5));
    const agent = new FrontProcess(s.name, configFile, 'agent', { env: { ...process.env, NOTIFY_SOCKET: notify.address }, wrap: unprivileged([]) });
    try {
      const ready = await notify.waitFor('READY', '1');
      assert.equal(ready.pid, agent.child.pid);
      assert.equal(capsOf(agent.child.pid ?? 0), '0000000000000000');
      let from = notify.messages.length;
      writeFileSync(configFile, yaml(1));
      agent.signal('SIGHUP');
      await notify.waitFor('RELOADING', '1', from);
      await notify.waitFor('READY', '1', from);
      const reloaded = await agent.waitFor('configuration reloaded');
      assert.equal(reloaded['loadSeconds'], 1);
      from = notify.messages.length;
      writeFileSync(configFile, yaml(1).replace('loadSeconds: 1', 'loadSeconds: -1'));
      agent.signal('SIGHUP');
      const refused = await notify.waitFor('READY', '1', from);
      assert.match(refused.fields['STATUS'] ?? '', /last reload refused/);
      await agent.waitFor('reload refused: the running configuration stays');
      assert.equal(agent.child.exitCode, null, 'still running');
    } finally {
      await agent.stop();
      notify.stop();
    }
  });
});

describe('master without any capability, with sd_notify, watchdog and SIGHUP reload', () => {
  it('READY=1 once its sockets are bound, WATCHDOG=1, a reload applied and a refused one; STOPPING=1', async () => {
    const st = testbed();
    const notify = await NotifyListener.start(join(st.runDir, 'notify-master.sock'));
    chmodSync(notify.address, 0o666);
    const a = st.plan.dns.address;
    const yaml = (requests: number): string =>
      `name: master1\nadminSocket: ${join(runtimeDir(st.runDir, 'run-master'), 'master.sock')}\ncontrol: { plaintext: true }\naccounting: { listen: 'tcp://${a}:7201' }\npublish: { listen: 'tcp://${a}:7202' }\ndomains: [{ name: www, requests: ${requests} }]\n`;
    const configFile = writeConfig(join(st.runDir, 'master-systemd.yaml'), yaml(20));
    const master = new FrontProcess(st.plan.dns.name, configFile, 'master', { env: { ...process.env, NOTIFY_SOCKET: notify.address, WATCHDOG_USEC: '2000000' }, wrap: unprivileged([]) });
    try {
      const ready = await notify.waitFor('READY', '1');
      assert.equal(ready.pid, master.child.pid);
      assert.match(ready.fields['STATUS'] ?? '', /master master1: 1 domain/);
      assert.equal(capsOf(master.child.pid ?? 0), '0000000000000000');
      assert.equal(uidOf(master.child.pid ?? 0), String(UID));
      await notify.waitFor('WATCHDOG', '1');
      let from = notify.messages.length;
      writeFileSync(configFile, yaml(30));
      master.signal('SIGHUP');
      await notify.waitFor('RELOADING', '1', from);
      const ok = await notify.waitFor('READY', '1', from);
      assert.doesNotMatch(ok.fields['STATUS'] ?? '', /refused/);
      await master.waitFor('reloaded');
      from = notify.messages.length;
      writeFileSync(configFile, yaml(30).replace('domains:', 'domain:'));
      master.signal('SIGHUP');
      await notify.waitFor('RELOADING', '1', from);
      const refused = await notify.waitFor('READY', '1', from);
      assert.match(refused.fields['STATUS'] ?? '', /last reload refused/);
      assert.equal(master.child.exitCode, null, 'still running');
      from = notify.messages.length;
      await master.stop();
      await notify.waitFor('STOPPING', '1', from);
      assert.equal(master.child.exitCode, 0);
    } finally {
      await master.stop();
      notify.stop();
    }
  });
});
