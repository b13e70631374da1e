/**
 * Preflight on the testbed (issue 20, part 8; acceptance 7): the testbed's
 * front namespace passes `sluice check-config --host`, as root and as the
 * unprivileged unit runs (CAP_NET_ADMIN: conntrack over ctnetlink); a
 * start with ip_forward=0 or with a missing lanInterface is refused with
 * the message that names the fix, and installs nothing; a second front node
 * on a bound queue is refused without touching the running one's rules.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const UID = 64123;
const testbed = useTestbed();

function yaml(adminSocket: string, extra = ''): string {
  return `cluster: c1
uplinkAddress: 198.18.101.2
adminSocket: ${adminSocket}
${extra}services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
`;
}

/** Starts a front node that must be refused; its exit code and stderr. */
async function refusedStart(ns: string, configFile: string): Promise<{ code: number | null; text: string }> {
  const front = new FrontProcess(ns, configFile);
  // Started after all (a failing test): stopped, so the test fails rather than hangs.
  const t = setTimeout(() => void front.stop(), 20_000);
  const code = await new Promise<number | null>((resolve) => {
    front.child.once('exit', (c) => {
      resolve(c);
    });
  });
  clearTimeout(t);
  // The readline interface may still hold the last lines: let it drain.
  await new Promise((r) => setImmediate(r));
  return { code, text: front.lines.map((l) => (typeof l['raw'] === 'string' ? l['raw'] : JSON.stringify(l))).join('\n') };
}

const ourChains = (ns: string): string[] => nsRun(ns, 'iptables-save', []).split('\n').filter((l) => l.startsWith(':SLUICE_'));

describe('front preflight on the testbed', () => {
  let ns = '';
  let good = '';
  let front: FrontProcess | undefined;

  before(() => {
    const st = testbed();
    ns = st.plan.clusters[0]?.front.name ?? '';
    good = writeConfig(join(st.runDir, 'front.yaml'), yaml(join(st.runDir, 'front.sock')));
  });

  after(async () => {
    await front?.stop();
  });

  it('check-config --host passes on the testbed front namespace, as root and as the unprivileged unit', async () => {
    let r = await nsRunAsync(ns, BIN, ['check-config', '--host', good]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^ {2}ok {4}ip_forward: net\.ipv4\.ip_forward = 1$/m);
    assert.match(r.stdout, /^ {2}ok {4}lan_interface: lanInterface lan0 exists$/m);
    assert.match(r.stdout, /^ {2}ok {4}rp_filter: effective rp_filter 0 on lan0, wan0$/m);
    assert.match(r.stdout, /^ {2}ok {4}conntrack: the flow table is read over ctnetlink$/m);
    assert.match(r.stdout, /^ {2}ok {4}queue: NFQUEUE 0 is free$/m);
    // SYN cookies (the services' synproxy default): nf_conntrack_tcp_loose=0 and a local route per VIP, which the testbed sets.
    assert.match(r.stdout, /^ {2}ok {4}synproxy: /m);
    assert.equal((r.stdout.match(/^ {2}(ok|skip|FAIL) /gm) ?? []).length, 7);
    // As deploy/systemd/sluice-front.service runs the daemon: its own user, CAP_NET_ADMIN only.
    const caps = '+net_admin';
    r = await nsRunAsync(ns, 'setpriv', [`--reuid=${String(UID)}`, `--regid=${String(UID)}`, '--clear-groups', `--inh-caps=${caps}`, `--ambient-caps=${caps}`, `--bounding-set=-all,${caps}`, '--no-new-privs', BIN, 'check-config', '--host', good]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^ {2}ok {4}conntrack: the flow table is read over ctnetlink$/m);
    assert.match(r.stdout, /^ {2}skip {2}queue: /m);
  });

  it('a running node: its own queue passes check-config --host; a second node on the same queue is refused and the first keeps its rules', async () => {
    const st = testbed();
    front = new FrontProcess(ns, good);
    await front.waitFor('front node ready');
    let r = await nsRunAsync(ns, BIN, ['check-config', '--host', good]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`queue: NFQUEUE 0 is bound by the running front node of this file \\(pid \\d+\\)`));
    const other = writeConfig(join(st.runDir, 'other.yaml'), yaml(join(st.runDir, 'other.sock')));
    r = await nsRunAsync(ns, BIN, ['check-config', '--host', other]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^ {2}FAIL {2}queue: NFQUEUE 0 is bound by another process \(netlink port \d+; pid \d+: .*front --config .*front\.yaml\)/m);
    const chains = ourChains(ns);
    const second = await refusedStart(ns, other);
    assert.equal(second.code, 1, second.text);
    assert.match(second.text, /sluice front: this host is not ready for a front node \(preflight\):\n {2}queue: NFQUEUE 0 is bound by another process/);
    assert.deepEqual(ourChains(ns), chains, 'the running node\'s rules are untouched');
    assert.match(nsRun(st.plan.clients[0]?.name ?? '', 'curl', ['-s', '-m', '5', 'http://198.19.1.1/']), /^server s1[ab] /);
    await front.stop();
    front = undefined;
    // A stop leaves the rules (the fallback serves until the next start); removing them is a step of its own.
    assert.deepEqual(ourChains(ns), chains, 'a stop leaves the rules');
    r = await nsRunAsync(ns, BIN, ['front', '--remove-rules', '--config', good]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(ourChains(ns), []);
  });

  it('ip_forward=0: the start is refused with the fix, nothing installed', async () => {
    nsRun(ns, 'sysctl', ['-q', '-w', 'net.ipv4.ip_forward=0']);
    try {
      const r = await refusedStart(ns, good);
      assert.equal(r.code, 1, r.text);
      assert.match(r.text, /ip_forward: net\.ipv4\.ip_forward is 0: the front node forwards steered packets to the servers; set it with `sysctl -w net\.ipv4\.ip_forward=1` \(and in \/etc\/sysctl\.d\/\)/);
      assert.deepEqual(ourChains(ns), []);
      const c = await nsRunAsync(ns, BIN, ['check-config', '--host', good]);
      assert.equal(c.code, 1);
      assert.match(c.stdout, /^ {2}FAIL {2}ip_forward: /m);
    } finally {
      nsRun(ns, 'sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
    }
  });

  it('a lanInterface that does not exist: the start is refused with the fix, nothing installed', async () => {
    const st = testbed();
    const missing = writeConfig(join(st.runDir, 'missing-lan.yaml'), yaml(join(st.runDir, 'front.sock'), 'lanInterface: lan9\n'));
    const r = await refusedStart(ns, missing);
    assert.equal(r.code, 1, r.text);
    assert.match(r.text, /lan_interface: lanInterface lan9: no such interface in this network namespace \(it has [^)]*lan0[^)]*\): set lanInterface to the interface toward the servers/);
    assert.deepEqual(ourChains(ns), []);
  });
});
