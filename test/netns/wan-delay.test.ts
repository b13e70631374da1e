/**
 * The WAN delay (NFQUEUE program in the WAN namespace, standing in for
 * netem): configured one-way delays show in ping RTTs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { median, nsRunAsync, pingRtts, useTestbed } from '../helpers/testbed.ts';

// Client 1: 10 ms to cluster 1, 40 ms to cluster 2. Client 2: the reverse, set explicitly.
const testbed = useTestbed({ delaysMs: { '1:1': 10, '1:2': 40, '2:1': 40, '2:2': 10 } });

async function medianRtt(ns: string, target: string): Promise<number> {
  const r = await nsRunAsync(ns, 'ping', ['-n', '-c', '10', '-i', '0.1', '-W', '2', target]);
  const rtts = pingRtts(r.stdout);
  assert.ok(rtts.length >= 8, `too few replies from ${target}: ${r.stdout}`);
  return median(rtts);
}

describe('WAN per-path delay', () => {
  const cases: [number, number, number][] = [
    [1, 1, 20],
    [1, 2, 80],
    [2, 1, 80],
    [2, 2, 20],
  ];
  for (const [client, cluster, expected] of cases) {
    it(`client ${client} -> cluster ${cluster}: RTT about ${expected} ms (±5)`, async () => {
      const st = testbed();
      const c = st.plan.clients[client - 1];
      const k = st.plan.clusters[cluster - 1];
      assert.ok(c && k);
      // Both the front node itself and a server behind it are on the delayed path.
      for (const target of [k.uplinkAddress, k.servers[0]?.address ?? '']) {
        const rtt = await medianRtt(c.name, target);
        assert.ok(Math.abs(rtt - expected) <= 5, `RTT ${rtt} ms to ${target}, expected ${expected} ± 5`);
      }
    });
  }

  it('paths without a configured delay are not delayed (client -> DNS)', async () => {
    const st = testbed();
    const rtt = await medianRtt(st.plan.clients[0]?.name ?? '', st.plan.dns.address);
    assert.ok(rtt < 5, `RTT ${rtt} ms`);
  });
});
