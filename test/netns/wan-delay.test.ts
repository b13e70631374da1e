/**
 * The WAN delay (NFQUEUE program in the WAN namespace, standing in for
 * netem): configured one-way delays show in ping RTTs, over IPv4 and IPv6.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SLACK_MS } from '../../scripts/testbed/delay-line.ts';
import { median, nsRunAsync, pingRtts, useTestbed } from '../helpers/testbed.ts';

// Client 1: 10 ms to cluster 1, 40 ms to cluster 2. Client 2: the reverse,
// set explicitly. Client 3 (IPv6 only): 40 ms to cluster 1, 10 to cluster 2.
const testbed = useTestbed({ ipv6OnlyClients: 1, delaysMs: { '1:1': 10, '1:2': 40, '2:1': 40, '2:2': 10, '3:1': 40, '3:2': 10 } });

async function rttsTo(ns: string, target: string, family: '-4' | '-6' = '-4'): Promise<number[]> {
  const r = await nsRunAsync(ns, 'ping', [family, '-n', '-c', '10', '-i', '0.1', '-W', '2', target]);
  const rtts = pingRtts(r.stdout);
  assert.ok(rtts.length >= 8, `too few replies from ${target}: ${r.stdout}`);
  return rtts;
}

async function medianRtt(ns: string, target: string): Promise<number> {
  return median(await rttsTo(ns, target));
}

/**
 * Each RTT is ping's own (one clock). The delay line may release a packet
 * up to SLACK_MS early per direction, hence the floor; the ceiling is only
 * a sanity bound (a busy machine adds latency, never removes it).
 */
function assertDelayed(rtts: readonly number[], expected: number, what: string): void {
  const floor = expected - 2 * SLACK_MS;
  for (const r of rtts) assert.ok(r >= floor, `${what}: RTT ${r} ms below ${floor} (configured round trip ${expected} ms)`);
  assert.ok(median(rtts) < expected + 50, `${what}: median RTT ${median(rtts)} ms, configured ${expected} ms`);
}

// The paths are independent, and each case reads only its own pings' RTTs
// (a few dozen packets a second through the delay line in all): the cases
// run at once, ~2 s in all instead of ~2 s each.
describe('WAN per-path delay', { concurrency: true }, () => {
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
      await Promise.all(
        [k.uplinkAddress, k.servers[0]?.address ?? ''].map(async (target) => {
          const rtt = await medianRtt(c.name, target);
          assert.ok(Math.abs(rtt - expected) <= 5, `RTT ${rtt} ms to ${target}, expected ${expected} ± 5`);
        }),
      );
    });
  }

  for (const [client, cluster, expected] of [...cases, [3, 1, 80], [3, 2, 20]] as const) {
    it(`IPv6: client ${client}${client === 3 ? ' (IPv6 only)' : ''} -> cluster ${cluster}: every ping -6 RTT at least ${expected} ms`, async () => {
      const st = testbed();
      const c = [...st.plan.clients, ...st.plan.ipv6OnlyClients].find((x) => x.index === client);
      const k = st.plan.clusters[cluster - 1];
      assert.ok(c && k);
      await Promise.all(
        [k.uplinkAddress6, k.servers[0]?.address6 ?? ''].map(async (target) => {
          assertDelayed(await rttsTo(c.name, target, '-6'), expected, `${c.name} -> ${target}`);
        }),
      );
    });
  }

  it('paths without a configured delay are not delayed (client -> DNS)', async () => {
    const st = testbed();
    const rtt = await medianRtt(st.plan.clients[0]?.name ?? '', st.plan.dns.address);
    assert.ok(rtt < 5, `RTT ${rtt} ms`);
  });
});
