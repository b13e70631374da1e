/**
 * `sluice ctl` changes on real traffic, kept over the configuration file:
 * an added server gets connections; a drain survives a reload (SIGHUP)
 * and a restart and shows as overriding the file; `ctl revert` returns to
 * the file; a corrupt state file is refused at reload and the daemon goes
 * on serving the file. Judged from the clients' results (which server
 * answered) and the daemon's own status.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const testbed = useTestbed({ clusters: 1, clients: 1 });

async function burst(ns: string, count: number, concurrency: number): Promise<{ tally: Record<string, number>; failures: number }> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', BURST, '--url', 'http://198.19.1.1/', '--count', String(count), '--concurrency', String(concurrency)]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { tally: Record<string, number>; failures: number };
}

describe('sluice ctl changes survive reload and restart', () => {
  const fronts: FrontProcess[] = [];
  after(async () => {
    for (const f of fronts) await f.stop();
  });

  it('add, drain, reload, restart, revert, corrupt state file', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!.name;
    const ns = st.plan.clusters[0]!.front.name;
    const socket = join(st.runDir, 'front-ctl.sock');
    const stateFile = join(st.runDir, 'front-ctl.state.json');
    // s1c is not in the file: ctl adds it.
    const file = writeConfig(
      join(st.runDir, 'front-ctl.yaml'),
      `cluster: c1\nuplinkAddress: 198.18.101.2\nadminSocket: ${socket}\nstateFile: ${stateFile}\nservices:\n  - name: www\n    vip: 198.19.1.1\n    port: 80\n    method: byrequests\n    servers:\n      - { name: s1a, address: 198.18.201.11 }\n      - { name: s1b, address: 198.18.201.12 }\n`,
    );
    const start = async (): Promise<FrontProcess> => {
      const f = new FrontProcess(ns, file);
      fronts.push(f);
      await f.waitFor('front node ready');
      return f;
    };
    const ctl = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => nsRunAsync(ns, BIN, ['ctl', '--socket', socket, ...args]);
    const status = async (): Promise<FrontStatus> => JSON.parse((await ctl('status')).stdout) as FrontStatus;
    const server = (s: FrontStatus, name: string): FrontStatus['services'][number]['servers'][number] | undefined => s.services[0]!.servers.find((x) => x.name === name);

    let front = await start();

    // ctl add: the new server gets its byrequests share (equal weights: a third).
    const add = await ctl('add', 'www', 's1c', '198.18.201.13:80', 'weight=1');
    assert.equal(add.code, 0, add.stderr);
    const bad = await ctl('add', 'www', 's1d', '198.18.201', 'weight=1');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /servers\[3\]\.address: expected an IPv4 address/);
    const r1 = await burst(client, 30, 1);
    assert.equal(r1.failures, 0);
    assert.deepEqual(r1.tally, { s1a: 10, s1b: 10, s1c: 10 });
    const s1 = await status();
    assert.equal(server(s1, 's1c')?.decided, 10, 'the daemon counted what the clients saw');
    assert.deepEqual(server(s1, 's1c')?.override, { kind: 'add' });
    assert.equal(`${server(s1, 's1c')?.address ?? ''}:${String(server(s1, 's1c')?.port)}`, '198.18.201.13:80');
    // The change replaced only the nft table's elements (its chains and hooks stayed); the start alone replaced it whole.
    assert.deepEqual([s1.rules.wholeInstalls, s1.rules.elementUpdates > 0], [1, true], JSON.stringify(s1.rules));

    // Connections/s from the daemon's own counters: seen while a burst runs.
    const running = burst(client, 300, 2);
    await until(async () => {
      const s = await status();
      return s.services[0]!.cps > 0 && (server(s, 's1c')?.cps ?? 0) > 0;
    }, 'connections/s shown for the service and the added server', 20_000);
    assert.equal((await running).failures, 0);

    // drain, then a reload: the drain is kept and shown as overriding the file.
    assert.equal((await ctl('drain', 'www', 's1a')).code, 0);
    const from = front.lines.length;
    front.signal('SIGHUP');
    await front.waitFor('configuration reloaded', 10_000, from);
    const s2 = await status();
    assert.equal(server(s2, 's1a')?.admin, 'drain');
    assert.deepEqual(server(s2, 's1a')?.override, { kind: 'set', file: { state: 'active' } });
    assert.ok(server(s2, 's1c'), 'the added server is still there after the reload');
    assert.equal(s2.overrides.count, 2);
    const human = await nsRunAsync(ns, BIN, ['status', '--socket', socket]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^s1a\*\s+drain\s.*198\.18\.201\.11:80\s.*file: state=active/m);
    assert.match(human.stdout, /^service www {2}TCP 198\.19\.1\.1:80 {2}method byrequests/m);
    const r2 = await burst(client, 20, 2);
    assert.equal(r2.failures, 0);
    assert.equal(r2.tally['s1a'], undefined, JSON.stringify(r2.tally));

    // A restart: the state file brings both changes back.
    await front.stop();
    front = await start();
    const s3 = await status();
    assert.equal(server(s3, 's1a')?.admin, 'drain');
    assert.deepEqual(server(s3, 's1c')?.override, { kind: 'add' });
    const r3 = await burst(client, 20, 1);
    assert.deepEqual(r3.tally, { s1b: 10, s1c: 10 });

    // revert: s1a back to the file (active), s1c gone (not in the file).
    assert.equal((await ctl('revert', 'www', 's1a')).code, 0);
    assert.equal((await ctl('revert', 'www', 's1c')).code, 0);
    const s4 = await status();
    assert.deepEqual(s4.services[0]!.servers.map((s) => `${s.name}:${s.admin}:${s.override === null ? 'file' : 'ctl'}`), ['s1a:active:file', 's1b:active:file']);
    const r4 = await burst(client, 20, 1);
    assert.deepEqual(r4.tally, { s1a: 10, s1b: 10 });
    assert.deepEqual((JSON.parse(readFileSync(stateFile, 'utf8')) as { overrides: unknown[] }).overrides, [], 'the state file holds nothing more');

    // A corrupt state file: refused at reload, naming the file; the file's config serves.
    assert.equal((await ctl('drain', 'www', 's1b')).code, 0);
    writeFileSync(stateFile, '{"version":1,"overrides":[{"kind":');
    const from2 = front.lines.length;
    front.signal('SIGHUP');
    const refused = await front.waitFor('state file refused: running on the configuration file alone, without ctl overrides', 10_000, from2);
    assert.match(String(refused['err']), new RegExp(`state file ${stateFile.replace(/[.]/g, '\\.')}: is not JSON`));
    await front.waitFor('configuration reloaded', 10_000, from2);
    const s5 = await status();
    assert.equal(server(s5, 's1b')?.admin, 'active', 'overrides ignored: the file says active');
    assert.equal(s5.overrides.stateFileErrors, 1);
    assert.match(s5.overrides.error ?? '', /is not JSON/);
    const r5 = await burst(client, 20, 1);
    assert.deepEqual(r5.tally, { s1a: 10, s1b: 10 });
  });
});
