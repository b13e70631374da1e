/**
 * A UDP virtual service through a real `sluice front`: only each flow's
 * first datagram is queued and decided; later datagrams of the flow go to
 * the same server by conntrack alone; after `kill -9` of the daemon the
 * existing flows keep their servers and new flows get the fallback spread.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { NsProcess, nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const ECHO = fileURLToPath(new URL('../fixtures/udp-echo.ts', import.meta.url));
const FLOWS = fileURLToPath(new URL('../fixtures/udp-flows.ts', import.meta.url));
const tb = useTestbed({ clients: 1, clusters: 1, serversPerCluster: 3 });

describe('UDP virtual service', () => {
  let front: FrontProcess;
  let sock = '';
  const echoes: NsProcess[] = [];

  before(async () => {
    const st = tb();
    const k = st.plan.clusters[0]!;
    for (const s of k.servers) {
      const e = new NsProcess(s.name, [ECHO, '--id', s.id, '--port', '53']);
      echoes.push(e);
      await e.next();
    }
    sock = join(st.runDir, 'front.sock');
    const cfg = writeConfig(
      join(st.runDir, 'front-udp.yaml'),
      `cluster: c1
uplinkAddress: ${k.uplinkAddress}
adminSocket: ${sock}
services:
  - name: dns
    vip: ${k.vip}
    port: 53
    protocol: udp
    method: byrequests
    servers:
${k.servers.map((s, i) => `      - { name: ${s.id}, address: ${s.address}, weight: ${i + 1} }`).join('\n')}
`,
    );
    front = new FrontProcess(k.front.name, cfg);
    await front.waitFor('front node ready');
  });
  after(async () => {
    await front.stop();
    for (const e of echoes) await e.stop();
  });

  it('300 flows: split 1:2:3 by weight, every datagram of a flow answered by one server, only first datagrams queued; kill -9 keeps flows on their servers', async () => {
    const st = tb();
    const k = st.plan.clusters[0]!;
    const c = st.plan.clients[0]!;
    const client = new NsProcess(c.name, [FLOWS, '--target', k.vip, '--port', '53', '--flows', '300', '--rounds', '3']);
    try {
      const r = (await client.next(60_000)) as { flows: string[][]; lost: number };
      assert.equal(r.lost, 0);
      const firstServer = r.flows.map((f) => f[0]!);
      assert.ok(r.flows.every((f) => f.length === 3 && f.every((x) => x === f[0])), 'each flow stays on one server');
      const count = (id: string) => firstServer.filter((x) => x === id).length;
      assert.deepEqual(k.servers.map((s) => count(s.id)), [50, 100, 150]);
      const status = JSON.parse((await nsRunAsync(k.front.name, BIN, ['ctl', '--socket', sock, 'status'])).stdout) as { counters: Record<string, number>; queue: { packets: number } };
      assert.equal(status.counters['udpFlows'], 300);
      assert.equal(status.queue.packets, 300, 'later datagrams never reach the daemon');

      front.signal('SIGKILL');
      await new Promise((res) => front.child.once('exit', res));
      const again = (await client.request('round')) as { flows: string[][]; lost: number };
      assert.equal(again.lost, 0);
      assert.deepEqual(
        again.flows.map((f) => f[0]),
        firstServer,
        'established UDP flows keep their servers while the daemon is dead',
      );
      // New flows while it is dead: the fallback spread (failMode bypass, a hash of the
      // client address) answers them; one client address, so one server.
      const fresh = new NsProcess(c.name, [FLOWS, '--target', k.vip, '--port', '53', '--flows', '30', '--rounds', '1']);
      try {
        const f = (await fresh.next(30_000)) as { flows: string[][]; lost: number };
        assert.equal(f.lost, 0);
        assert.equal(new Set(f.flows.map((x) => x[0])).size, 1, 'source-hash fallback: one client address, one server');
      } finally {
        await fresh.stop();
      }
    } finally {
      await client.stop();
    }
  });
});
