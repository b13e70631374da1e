/**
 * A server that goes down takes its unanswerable flows with it
 * (src/front/flow-expiry.ts, native/src/ct_expire.c; IPVS's
 * expire_nodest_conn). Without it, a client that reuses the source port of
 * a flow left unreplied to the dead server is sent there again: conntrack
 * takes the new SYN for a retransmission of the old flow (SYN_SENT lasts
 * 120 s), so it is never queued or decided.
 *
 * One front node, an IPv4 and an IPv6 service over s1a and s1b
 * (byrequests 1:1), active TCP checks from the front node's own address.
 *  1. a few connections through s1b complete (their entries, replied, must stay);
 *  2. s1b stops answering the client only (its checks still pass): each
 *     family's connections from fixed source ports, half of them decided
 *     for s1b, leave unreplied SYN_SENT entries NATed to it;
 *  3. s1b stops answering everything: its checks fail, it goes down; its
 *     unreplied entries are deleted (both families), the replied ones stay;
 *  4. new connections from exactly the ports that met s1b are decided
 *     again and answered by s1a.
 * Judged by the kernel's table (conntrack -L in the front node's
 * namespace), the daemon's status and the clients' exit codes.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const testbed = useTestbed({ clients: 1, clusters: 1, serversPerCluster: 2 });
const TABLE = 'sluice_test_expiry';
/** Connections per family while s1b ignores the client: byrequests 1:1 sends every second one to s1b. */
const CONNECTIONS = 10;

type Family = 4 | 6;
interface Entry {
  readonly state: string;
  readonly sport: number;
}

describe('sluice front: a server gone down takes its unreplied flows with it', () => {
  let front: FrontProcess | undefined;

  after(async () => {
    await front?.stop();
  });

  it('a client reusing the port of a flow left to the dead server is decided again (IPv4 and IPv6); replied flows stay', async (t) => {
    const st = testbed();
    const k = st.plan.clusters[0]!;
    const client = st.plan.clients[0]!;
    const [s1a, s1b] = k.servers;
    assert.ok(s1a && s1b);
    const vip: Record<Family, string> = { 4: k.vip, 6: k.vip6 };
    const url = (f: Family): string => (f === 4 ? `http://${vip[4]}/` : `http://[${vip[6]}]/`);
    const s1bAddress: Record<Family, string> = { 4: s1b.address, 6: s1b.address6 };
    const sock = join(st.runDir, 'expiry.sock');
    const service = (name: string, f: Family): string => `  - name: ${name}
    vip: ${vip[f]}
    port: 80
    method: byrequests
    health: { kind: tcp, ${f === 6 ? `source: ${k.lanAddress6}, ` : ''}intervalSeconds: 0.5, timeoutSeconds: 0.4, fall: 2, rise: 2 }
    servers:
${[s1a, s1b].map((s) => `      - { name: ${s.id}, address: ${f === 4 ? s.address : s.address6} }`).join('\n')}
`;
    front = new FrontProcess(
      k.front.name,
      writeConfig(join(st.runDir, 'expiry.yaml'), `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
adminSocket: ${sock}
services:
${service('www', 4)}${service('www6', 6)}`),
    );
    await front.waitFor('front node ready');
    const status = async (): Promise<FrontStatus> => (await front!.status()) as unknown as FrontStatus;
    const s1bHealth = async (): Promise<string[]> => (await status()).services.map((s) => s.servers.find((b) => b.name === s1b.id)?.health?.state ?? '?');
    await until(async () => (await status()).services.every((s) => s.servers.every((b) => b.health?.state === 'up')), 'every server up', 10_000, 100);

    /** The front node's conntrack entries of the client's flows NATed to s1b (reply source), TCP; not the checks' own flows to it. */
    const entries = (f: Family): Entry[] =>
      nsRun(k.front.name, 'conntrack', ['-L', '-f', f === 4 ? 'ipv4' : 'ipv6', '-p', 'tcp', '-s', f === 4 ? client.address : client.address6, '--reply-src', s1bAddress[f]])
        .split('\n')
        .filter((l) => l.startsWith('tcp'))
        .map((l) => ({ state: l.split(/\s+/)[3] ?? '?', sport: Number(/sport=(\d+)/.exec(l)?.[1]) }));
    /** Fetches from each given source port at once (curl --local-port); the ports that failed, and the servers that answered the rest. */
    const fetchFrom = async (f: Family, ports: readonly number[], timeoutS: number): Promise<{ failed: number[]; answered: Record<string, number> }> => {
      const script = ports.map((p) => `(out=$(curl -${String(f)} -s -m ${String(timeoutS)} --local-port ${String(p)} ${url(f)}); echo "${String(p)} $? $out") &`).join('\n') + '\nwait\n';
      const r = await nsRunAsync(client.name, 'sh', ['-c', script]);
      const failed: number[] = [];
      const answered: Record<string, number> = {};
      for (const line of r.stdout.split('\n').filter((l) => l !== '')) {
        const [port, code, , name] = line.split(' ');
        if (code === '0') answered[name ?? '?'] = (answered[name ?? '?'] ?? 0) + 1;
        else failed.push(Number(port));
      }
      assert.equal(failed.length + Object.values(answered).reduce((a, b) => a + b, 0), ports.length, r.stdout + r.stderr);
      return { failed: failed.sort((a, b) => a - b), answered };
    };
    const ports = (f: Family, base: number, n: number): number[] => Array.from({ length: n }, (_, i) => base + (f === 4 ? 0 : 1000) + i);

    // 1. Completed connections through s1b: replied entries (TIME_WAIT) NATed to it.
    const replied: Record<Family, number> = { 4: 0, 6: 0 };
    for (const f of [4, 6] as const) {
      const warm = await fetchFrom(f, ports(f, 20_100, 4), 3);
      assert.deepEqual(warm.failed, [], `IPv${String(f)}: every warm-up fetch answered`);
      assert.ok((warm.answered[s1b.id] ?? 0) > 0, JSON.stringify(warm.answered));
      replied[f] = entries(f).filter((e) => e.state !== 'SYN_SENT').length;
      assert.ok(replied[f] > 0, `IPv${String(f)}: replied entries to s1b`);
    }

    // 2. s1b ignores the client (not the front node's checks): flows decided for it stay unreplied.
    nsRun(s1b.name, 'nft', ['-f', '-'], `table inet ${TABLE} {\n  chain c {\n    type filter hook prerouting priority raw - 10; policy accept;\n    ip saddr ${client.address} meta l4proto tcp drop\n    ip6 saddr ${client.address6} meta l4proto tcp drop\n  }\n}\n`);
    const stale: Record<Family, number[]> = { 4: [], 6: [] };
    for (const f of [4, 6] as const) {
      const r = await fetchFrom(f, ports(f, 20_000, CONNECTIONS), 2);
      stale[f] = r.failed;
      t.diagnostic(`IPv${String(f)}: ports left to s1b ${JSON.stringify(r.failed)}; answered ${JSON.stringify(r.answered)}`);
      assert.ok(r.failed.length >= CONNECTIONS / 2 - 1 && (r.answered[s1b.id] ?? 0) === 0, `IPv${String(f)}: about half went to the silent s1b: ${JSON.stringify(r)}`);
      const unreplied = entries(f).filter((e) => e.state === 'SYN_SENT').map((e) => e.sport);
      for (const p of r.failed) assert.ok(unreplied.includes(p), `IPv${String(f)}: port ${String(p)} has an unreplied entry to s1b: ${JSON.stringify(unreplied)}`);
    }
    assert.deepEqual(await s1bHealth(), ['up', 'up'], 's1b still passes its checks');

    // 3. s1b answers nothing: down by its checks; its unreplied flows expired, its replied ones kept.
    nsRun(s1b.name, 'nft', ['add', 'rule', 'inet', TABLE, 'c', 'meta', 'l4proto', 'tcp', 'drop']);
    await until(async () => (await s1bHealth()).every((h) => h === 'down'), 's1b down in both services', 10_000, 50);
    await until(() => entries(4).concat(entries(6)).every((e) => e.state !== 'SYN_SENT'), 'no unreplied entry to s1b left', 5_000, 100).catch(async (err: unknown) => {
      const why = front!.lines.filter((l) => /expir/.test(String(l['msg'])));
      throw new Error(`${(err as Error).message}; left ${JSON.stringify(entries(4).concat(entries(6)))}; expiry ${JSON.stringify((await status()).health?.flowExpiry)}; log ${JSON.stringify(why)}`);
    });
    for (const f of [4, 6] as const) assert.equal(entries(f).length, replied[f], `IPv${String(f)}: the replied entries to s1b stay`);
    let x: NonNullable<FrontStatus['health']>['flowExpiry'] | undefined;
    await until(async () => (x = (await status()).health?.flowExpiry)?.runs === 2, 'one expiry per service', 5_000, 100);
    assert.equal(x!.failures, 0);
    assert.ok(x!.deleted + x!.gone >= stale[4].length + stale[6].length, JSON.stringify(x));
    const logged = front.lines.filter((l) => String(l['msg']).startsWith('flows the server cannot answer expired'));
    assert.deepEqual(logged.map((l) => l['service']).sort(), ['www', 'www6']);

    // 4. The same source ports again: decided anew, answered by the live server.
    for (const f of [4, 6] as const) {
      const again = await fetchFrom(f, stale[f], 3);
      assert.deepEqual(again.failed, [], `IPv${String(f)}: every reused port answered: ${JSON.stringify(again)}`);
      assert.deepEqual(Object.keys(again.answered), [s1a.id]);
    }
  });
});
