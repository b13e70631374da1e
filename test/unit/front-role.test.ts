/**
 * A front node of a pair on the control plane (issue 21): its messages are
 * sent under its `node` name (default: its cluster), every cluster_load
 * carries its HA role from the daemon's haRole(), and roleChanged() sends
 * one at once. Real ZeroMQ sockets on loopback, plaintext.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { HaRole } from '../../src/control/cluster-reports.ts';
import { controlBaseSchema } from '../../src/control/config.ts';
import type { Envelope } from '../../src/control/messages.ts';
import { ControlNode } from '../../src/control/node.ts';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema, frontNodeName } from '../../src/front/config.ts';
import { FrontControl } from '../../src/front/control.ts';
import { nextPort } from '../helpers/ports.ts';
import { until } from '../helpers/wait.ts';

const silent = pino({ level: 'silent' });

function config(node: string, port: number): ReturnType<typeof parseConfig<typeof frontConfigSchema>> {
  return parseConfig(
    frontConfigSchema,
    `cluster: c1
${node !== '' ? `node: ${node}\n` : ''}uplinkAddress: 198.18.101.2
services:
  - { name: www, vip: 198.19.1.1, port: 80, servers: [{ name: s1a, address: 198.18.201.11, capacity: 10 }] }
control:
  plaintext: true
  publish: { listen: 'tcp://127.0.0.1:${port}', allow: [] }
`,
    'front.yaml',
  );
}

describe('front node name and HA role', () => {
  it('node defaults to the cluster; a bad node name is refused with its key', () => {
    assert.equal(frontNodeName(config('', 1)), 'c1');
    assert.equal(frontNodeName(config('c1-b', 1)), 'c1-b');
    assert.throws(() => config('"has space"', 1), /node/);
  });

  it('cluster_load is sent under the node name with the current role; roleChanged() reports at once', async () => {
    // This file's own block of ports (test/helpers/ports.ts says why).
    const port = nextPort();
    const cfg = config('c1-b', port);
    const control = cfg.control;
    assert.ok(control);
    let role: HaRole = 'backup';
    const fc = await FrontControl.start({ config: cfg, services: [], haRole: () => role }, control, silent);
    let sub: ControlNode | undefined;
    const got: Envelope<'cluster_load'>[] = [];
    try {
      sub = await ControlNode.create('dns1', controlBaseSchema.parse({ plaintext: true }), silent);
      sub.connectSub(`tcp://127.0.0.1:${port}`, undefined, { cluster_load: (m) => got.push(m) });
      // PUB/SUB: messages before the subscription is up are lost; ask again until one arrives.
      await until(() => {
        fc.roleChanged();
        return got.length > 0;
      }, 'a cluster_load from the backup', 10_000, 20);
      const first = got[0];
      assert.ok(first);
      assert.deepEqual([first.from, first.body.cluster, first.body.role], ['c1-b', 'c1', 'backup']);
      role = 'master';
      const before = fc.roleChanges;
      fc.roleChanged();
      await until(() => got.some((m) => m.body.role === 'master'), 'the new role at once', 10_000, 20);
      assert.equal(fc.roleChanges, before + 1);
      assert.equal(fc.status().role, 'master');
      assert.equal(fc.status().node, 'c1-b');
    } finally {
      sub?.close();
      fc.close();
    }
  });

  it('a backup ignores rtt_probe_request (counted as not-master); the master takes them', async () => {
    const port = nextPort();
    const publishPort = nextPort();
    const dns = await ControlNode.create('dns1', controlBaseSchema.parse({ plaintext: true }), silent);
    // Everything is closed whatever fails below (a taken port included): an
    // open ZeroMQ socket keeps this file's process alive, and the test
    // runner would wait for it for ever (seen in CI).
    let fc: FrontControl | undefined;
    try {
      const pub = await dns.bindPub(`tcp://127.0.0.1:${port}`, 'subscribers', []);
      const cfg = parseConfig(
        frontConfigSchema,
        `cluster: c1
node: c1-b
uplinkAddress: 198.18.101.2
services:
  - { name: www, vip: 198.19.1.1, port: 80, servers: [{ name: s1a, address: 198.18.201.11, capacity: 10 }] }
control:
  plaintext: true
  publish: { listen: 'tcp://127.0.0.1:${publishPort}', allow: [] }
  subscribe: [{ endpoint: 'tcp://127.0.0.1:${port}' }]
`,
        'front.yaml',
      );
      const control = cfg.control;
      assert.ok(control);
      let role: HaRole = 'backup';
      fc = await FrontControl.start({ config: cfg, services: [], haRole: () => role }, control, silent);
      const front = fc;
      await until(() => {
        pub.send('rtt_probe_request', { targets: ['198.18.11.2'], count: 1 });
        return front.probeCounts.notMaster > 0;
      }, 'a probe request ignored by the backup', 10_000, 20);
      const taken = (): number => (front.prober?.counters.requests ?? 0) + front.probeCounts.ignoredRequests;
      assert.equal(taken(), 0, 'the backup neither probed nor counted it as probing off');
      role = 'master';
      await until(() => {
        pub.send('rtt_probe_request', { targets: ['198.18.11.2'], count: 1 });
        return taken() > 0;
      }, 'the master takes a probe request', 10_000, 20);
      assert.equal(front.status().probe.notMaster, front.probeCounts.notMaster);
    } finally {
      fc?.close();
      dns.close();
    }
  });
});
