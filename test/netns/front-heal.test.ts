/**
 * Rules that heal (src/front/rules-health.ts) on the testbed: a running
 * front node whose rules someone flushes (`iptables -t mangle -F`, `nft
 * flush ruleset`) reinstalls them within its check period, counts the
 * repair in its status and logs it once at warn; a foreign rule in the
 * same namespace is neither damage nor touched. A rule changed while no
 * daemon ran is repaired by the next one's first check (its start keeps a
 * table of its own structure and writes only the elements).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const testbed = useTestbed();
const REINSTALLED = 'rules were removed or changed by someone else: reinstalled';
// A foreign rule in a built-in chain of a table we use (filter: the reject chains).
const FOREIGN = ['-A', 'FORWARD', '-p', 'udp', '--dport', '9', '-j', 'ACCEPT'];

const CONFIG = `cluster: c1
uplinkAddress: 198.18.101.2
rules: { checkSeconds: 1 }
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    checkpoints: [{ name: r, kind: rate-limit, criterion: source, limit: 100000 }]
    servers:
      - { name: s1a, address: 198.18.201.11, capacity: 1000 }
      - { name: s1b, address: 198.18.201.12, capacity: 1000 }
`;

describe('sluice front: rules that heal', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';
  let client = '';

  before(async () => {
    const st = testbed();
    frontNs = st.plan.clusters[0]?.front.name ?? '';
    client = st.plan.clients[0]?.name ?? '';
    nsRun(frontNs, 'iptables', ['-t', 'filter', ...FOREIGN]);
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-heal.yaml'), CONFIG));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  async function rules(): Promise<Record<string, number>> {
    return (await front!.status())['rules'] as Record<string, number>;
  }

  async function decided(): Promise<number> {
    return ((await front!.status())['counters'] as Record<string, number>)['decided'] ?? 0;
  }

  /** A curl to the VIP that the daemon decided (the queue rule is in place): not the kernel's fallback spread. */
  async function steeredCurl(): Promise<boolean> {
    const before = await decided();
    const r = await nsRunAsync(client, 'curl', ['-s', '-m', '2', 'http://198.19.1.1/']);
    return r.code === 0 && /^server s1[ab] /.test(r.stdout) && (await decided()) > before;
  }

  /** Waits for `n` repairs in all, then for a steered curl; returns the warn lines logged. */
  async function healed(n: number): Promise<Record<string, unknown>[]> {
    await until(async () => ((await rules())['repaired'] ?? 0) >= n, `repair number ${String(n)} counted`, 20_000, 200);
    await until(steeredCurl, 'a curl to the VIP decided by the daemon', 20_000, 200);
    return front!.lines.filter((l) => l['msg'] === REINSTALLED);
  }

  it('intact rules are checked and left alone; with nothing committed since an intact check, a check reads nothing', async () => {
    await until(async () => ((await rules())['checks'] ?? 0) >= 2, 'two checks', 20_000, 200);
    // The nf_tables generation stays put while the node idles (no writer of
    // ours commits, nothing else runs in this namespace): the checks after
    // the first intact one fork no iptables-save or nft.
    await until(async () => ((await rules())['unchanged'] ?? 0) >= 2, 'two checks that found nothing committed', 20_000, 200).catch(() => undefined);
    const r = await rules();
    assert.ok((r['unchanged'] ?? 0) >= 2, JSON.stringify(r));
    assert.equal(r['repaired'], 0, JSON.stringify(r));
    assert.equal(r['checkFailures'], 0, JSON.stringify(r));
    assert.ok(await steeredCurl());
  });

  it('iptables -t mangle -F: steering is back, the repair counted and logged once; the foreign rule stays as it was', async () => {
    const foreignBefore = nsRun(frontNs, 'iptables', ['-t', 'filter', '-S', 'FORWARD']);
    nsRun(frontNs, 'iptables', ['-t', 'mangle', '-F']);
    const warns = await healed(1);
    assert.equal(warns.length, 1, JSON.stringify(warns));
    const [w] = warns;
    assert.ok(w);
    assert.equal(w['level'], 40);
    assert.deepEqual(w['tables'], ['mangle']);
    assert.equal(w['missingJumps'], 1);
    assert.ok(Number(w['missingRules']) > 0);
    assert.equal(nsRun(frontNs, 'iptables', ['-t', 'filter', '-S', 'FORWARD']), foreignBefore);
    assert.match(nsRun(frontNs, 'iptables', ['-t', 'mangle', '-S', 'PREROUTING']), /^-A PREROUTING -m mark --mark 0x51fff000 -j SLUICE_QUEUE$/m);
    const r = await rules();
    assert.equal(r['repaired'], 1, JSON.stringify(r));
    assert.equal(r['repairFailures'], 0, JSON.stringify(r));
  });

  it('nft flush ruleset: every table of ours is reinstalled', async () => {
    nsRun(frontNs, 'nft', ['flush', 'ruleset']);
    const warns = await healed(2);
    assert.equal(warns.length, 2, JSON.stringify(warns));
    assert.deepEqual(warns[1]?.['tables'], ['nft', 'mangle', 'filter']);
    for (const [table, chain, mark] of [['mangle', 'SLUICE_QUEUE', '0x51fff000'], ['filter', 'SLUICE_REJECT', '0x51ffffff']] as const) {
      assert.match(nsRun(frontNs, 'iptables', ['-t', table, '-S']), new RegExp(`^-A \\w+ -m mark --mark ${mark} -j ${chain}$`, 'm'), `${table} jump to ${chain}`);
    }
    assert.match(nsRun(frontNs, 'nft', ['list', 'table', 'ip', 'sluice']), /chain vip_guard/);
    const r = await rules();
    assert.equal(r['repaired'], 2, JSON.stringify(r));
  });

  it('a set or map of our nft table emptied (the DNAT map, the fallback map): reinstalled', async () => {
    nsRun(frontNs, 'nft', ['flush', 'map', 'ip', 'sluice', 'targets']);
    let warns = await healed(3);
    assert.deepEqual(warns[2]?.['tables'], ['nft']);
    assert.match(nsRun(frontNs, 'nft', ['list', 'map', 'ip', 'sluice', 'targets']), /0x51000002 : 198\.18\.201\.12 \. 80/);
    nsRun(frontNs, 'nft', ['flush', 'map', 'ip', 'sluice', 'fallback']);
    warns = await healed(4);
    assert.deepEqual(warns[3]?.['tables'], ['nft']);
    assert.match(nsRun(frontNs, 'nft', ['list', 'map', 'ip', 'sluice', 'fallback']), / : 198\.18\.201\.1[12] \. 80/);
  });

  it('a rule of ours changed while no daemon ran: the next start keeps the table (same structure by its comment), and its first check repairs the rule', async () => {
    const st = testbed();
    await front!.stop();
    // The guard's drop rule gone, the table's comment untouched.
    nsRun(frontNs, 'nft', ['flush', 'chain', 'ip', 'sluice', 'vip_guard']);
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-heal.yaml'), CONFIG));
    await front.waitFor('front node ready');
    const installed = front.lines.find((l) => l['msg'] === 'nft table installed');
    assert.match(String(installed?.['table']), /^kept/, JSON.stringify(installed));
    const warns = await healed(1);
    assert.deepEqual(warns[0]?.['tables'], ['nft'], JSON.stringify(warns));
    assert.match(nsRun(frontNs, 'nft', ['list', 'chain', 'ip', 'sluice', 'vip_guard']), /ip daddr @vips counter name "?vip_guard_drops"? drop/);
  });

  it('a set of ours deleted while no daemon ran: keeping the table fails (logged) and the start replaces it', async () => {
    const st = testbed();
    await front!.stop();
    // The comment still names this structure, but overflow_marks is gone (the rule that names it first).
    nsRun(frontNs, 'nft', ['-f', '-'], 'flush chain ip sluice nat_post\ndelete set ip sluice overflow_marks\n');
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-heal.yaml'), CONFIG));
    await front.waitFor('front node ready');
    const refused = front.lines.find((l) => String(l['msg']).startsWith('the nft table of the same structure could not be kept'));
    assert.ok(refused !== undefined && refused['level'] === 40, `the refusal is logged at warn: ${JSON.stringify(front.lines.slice(0, 40))}`);
    assert.match(String(front.lines.find((l) => l['msg'] === 'nft table installed')?.['table']), /^replaced/);
    assert.match(nsRun(frontNs, 'nft', ['list', 'set', 'ip', 'sluice', 'overflow_marks']), /set overflow_marks/);
    assert.ok(await steeredCurl());
    await until(async () => ((await rules())['checks'] ?? 0) >= 1, 'a rule check', 20_000, 200);
    assert.equal((await rules())['repaired'], 0, 'the start\'s own install left nothing to repair');
  });
});
