/**
 * Seed 000's least-loaded-cluster list over the real control plane: two
 * front nodes publish their cluster load and subscribe to each other; the
 * overflow proportions follow the other cluster's live free capacity, and a
 * cluster whose reports stop is left out.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const tb = useTestbed({ clients: 1, clusters: 2, serversPerCluster: 2 });

interface Status {
  services: { overflow: { cluster: string; freeCapacity: number }[] }[];
  control: { peerClusters: { cluster: string; available: number; fresh: boolean }[]; zap: Record<string, { accepted: number; refused: number }> };
}

describe('front nodes learn each other’s free capacity', () => {
  const fronts: FrontProcess[] = [];
  const socks: string[] = [];

  before(async () => {
    const st = tb();
    const keys = st.keysDir;
    for (const k of st.plan.clusters) {
      const other = st.plan.clusters.find((x) => x.index !== k.index)!;
      const sock = join(st.runDir, `front${k.index}.sock`);
      socks.push(sock);
      const caps = k.index === 1 ? [100, 100] : [300, 500];
      const cfg = writeConfig(
        join(st.runDir, `front${k.index}.yaml`),
        `cluster: c${k.index}
uplinkAddress: ${k.uplinkAddress}
adminSocket: ${sock}
services:
  - name: www
    vip: ${k.vip}
    port: 80
    servers:
${k.servers.map((s, i) => `      - { name: ${s.id}, address: ${s.address}, capacity: ${caps[i]} }`).join('\n')}
overflow:
  - { cluster: c${other.index}, vip: ${other.vip}, freeCapacity: 5 }
control:
  keyFile: ${join(keys, `fr${k.index}.key`)}
  publish:
    listen: tcp://${k.uplinkAddress}:7102
    allow: [${join(keys, `fr${other.index}.pub`)}]
  subscribe:
    - { endpoint: 'tcp://${other.uplinkAddress}:7102', publicKey: ${join(keys, `fr${other.index}.pub`)} }
  downAfterIntervals: 2
  clusterLoad: { everySeconds: 1 }
`,
      );
      const f = new FrontProcess(k.front.name, cfg);
      fronts.push(f);
      await f.waitFor('control plane up');
    }
  });
  after(async () => {
    for (const f of fronts) await f.stop();
  });

  async function status(i: number): Promise<Status> {
    const st = tb();
    const r = await nsRunAsync(st.plan.clusters[i]!.front.name, BIN, ['ctl', '--socket', socks[i]!, 'status']);
    return JSON.parse(r.stdout) as Status;
  }

  it('overflow follows the live figure, and drops a cluster whose reports stop', async () => {
    // Before: configured 5. Live: cluster 2 has 800 free (nothing active), cluster 1 has 200.
    await until(async () => (await status(0)).services[0]!.overflow[0]!.freeCapacity === 800, 'c1 sees c2 free capacity 800');
    await until(async () => (await status(1)).services[0]!.overflow[0]!.freeCapacity === 200, 'c2 sees c1 free capacity 200');
    const s = await status(0);
    assert.deepEqual(s.control.peerClusters.map((p) => [p.cluster, p.available, p.fresh]), [['c2', 800, true]]);
    assert.equal(s.control.zap['c1/subscribers']?.accepted, 1);
    await fronts[1]!.stop();
    await until(async () => (await status(0)).services[0]!.overflow[0]!.freeCapacity === 0, 'a silent cluster is left out', 15_000);
  });
});
