/**
 * A checkpoint's rate limit for IPv6 sources on the dual-stack testbed
 * (issue 23, acceptance 3): an IPv6 source over the limit is held and
 * rejected like an IPv4 one (the IPv4 twin: test/netns/shaping.test.ts).
 * The criterion is `source-prefix`, which keys an IPv6 client by its
 * prefixLength6 (/64 by default): one client sends from two addresses of
 * its /64 and the two share one limit; another client's /64 is a key of its
 * own and is unaffected. Loops are bounded in count and time; the only
 * timing figure asserted is a rate over a window, as the issue states.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const PACED = fileURLToPath(new URL('../fixtures/paced-connect.ts', import.meta.url));
const testbed = useTestbed({ extraClientAddresses: 1 });

interface Paced {
  attempts: number;
  connected: number;
  reset: number;
  timedOut: number;
  other: number;
  results: [number, number, string][];
}

describe('a checkpoint rate limit for IPv6 sources on the testbed', () => {
  let front: FrontProcess | undefined;
  let vip6 = '';

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0]!;
    vip6 = k.vip6;
    const yaml = `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
services:
  - name: www6
    vip: ${k.vip6}
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: ${k.servers[0]!.address6} }
      - { name: s1b, address: ${k.servers[1]!.address6} }
    checkpoints:
      - { name: per-prefix, kind: rate-limit, criterion: source-prefix, limit: 50, queue: { maxLength: 25, maxDelayMs: 1000 } }
`;
    front = new FrontProcess(k.front.name, writeConfig(join(st.runDir, 'front-ipv6-shaping.yaml'), yaml));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  async function paced(ns: string, rate: number, seconds: number, local: readonly string[]): Promise<Paced> {
    const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', PACED, '--host', vip6, '--rate', String(rate), '--seconds', String(seconds), '--timeout-ms', '8000', '--local', local.join(',')]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as Paced;
  }

  it('200/s from two addresses of one /64: 50/s admitted for the prefix (±10%), some held, the rest reset; 10/s from another /64 unaffected', async () => {
    const st = testbed();
    const [c1, c2] = st.plan.clients;
    const same64 = [c1!.address6, c1!.extraAddresses6[0]!];
    assert.equal(same64[1]!.replace(/::\d+$/, '::'), same64[0]!.replace(/::\d+$/, '::'), `two addresses of one /64: ${same64.join(' ')}`);
    const SECONDS = 6;
    const [a, b] = await Promise.all([paced(c1!.name, 200, SECONDS, same64), paced(c2!.name, 10, SECONDS, [c2!.address6])]);
    const inWindow = a.results.filter((r) => r[2] === 'connected' && r[1] >= 1000 && r[1] < 6000).length;
    const rate = inWindow / 5;
    assert.ok(Math.abs(rate - 50) <= 5, `admitted ${rate.toFixed(1)}/s in [1 s, 6 s), expected 50/s ± 10% for the /64 (${JSON.stringify({ ...a, results: undefined })})`);
    assert.ok(a.reset > 0, 'connections beyond the queue are reset');
    assert.equal(a.timedOut + a.other, 0, 'every connection is admitted or reset');
    const waited = a.results.filter((r) => r[2] === 'connected' && r[1] - r[0] >= 100).length;
    assert.ok(waited > 0, 'some admitted connections waited in the queue');
    // Both addresses were admitted: one limit for the prefix, not one address starved.
    for (const [i, addr] of same64.entries()) {
      const admitted = a.results.filter((r, j) => j % 2 === i && r[2] === 'connected').length;
      assert.ok(admitted > 0, `${addr} had connections admitted`);
    }
    assert.deepEqual({ connected: b.connected, reset: b.reset, timedOut: b.timedOut }, { connected: b.attempts, reset: 0, timedOut: 0 });

    // The daemon's view: two keys, the two /64s, shown as prefixes: client
    // 1's two addresses are one key carrying all its attempts.
    const s = (await front!.status()) as unknown as FrontStatus;
    const cp = s.shaping!.checkpoints.find((c) => c.name === 'per-prefix')!;
    assert.equal(cp.top.length, 2, JSON.stringify(cp.top));
    const slash64 = (addr: string): string => `${addr.replace(/::[0-9a-f]+$/, '::')}/64`;
    assert.deepEqual(cp.top.map((t) => t.key), [slash64(same64[0]!), slash64(c2!.address6)], JSON.stringify(cp.top));
    assert.ok((cp.top[0]!.total) >= a.attempts, `one key for both addresses of the /64: ${JSON.stringify(cp.top)}`);
    assert.ok((cp.queue?.enqueued ?? 0) > 0 && (cp.queue?.refused ?? 0) > 0, JSON.stringify(cp.queue));
  });
});
