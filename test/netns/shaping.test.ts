/**
 * Checkpoints on the testbed (issue 7): real clients, NFQUEUE, kernel NAT
 * and REJECT, nginx servers.
 *  - a client opening 200 connections/s against a 50/s per-source limit
 *    gets 50/s (±10%) admitted, some after waiting in the queue, the rest
 *    reset once the queue is full; a second client at 10/s is unaffected;
 *  - a concurrency limit of 5 per source holds with 20 parallel long
 *    downloads: the others wait, then proceed as downloads finish.
 * Loops are bounded in count and time; the only timing figures asserted are
 * rates over a window, as the issue states.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const PACED = fileURLToPath(new URL('../fixtures/paced-connect.ts', import.meta.url));
const testbed = useTestbed({ blobMiB: 8 });

function configYaml(checkpoints: string): string {
  return `cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
    checkpoints:
${checkpoints}
`;
}

interface Paced {
  attempts: number;
  connected: number;
  reset: number;
  timedOut: number;
  other: number;
  results: [number, number, string][];
}

async function paced(ns: string, rate: number, seconds: number): Promise<Paced> {
  const r = await nsRunAsync(ns, process.execPath, ['--no-warnings', PACED, '--host', '198.19.1.1', '--rate', String(rate), '--seconds', String(seconds), '--timeout-ms', '8000']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Paced;
}

describe('checkpoints on the testbed', () => {
  let front: FrontProcess | undefined;

  const start = async (name: string, checkpoints: string): Promise<void> => {
    const st = testbed();
    const ns = st.plan.clusters[0]?.front.name ?? '';
    front = new FrontProcess(ns, writeConfig(join(st.runDir, `front-${name}.yaml`), configYaml(checkpoints)));
    await front.waitFor('front node ready');
  };

  after(async () => {
    await front?.stop();
  });

  describe('rate limit 50/s per source', () => {
    before(() => start('rate', `      - { name: per-source, kind: rate-limit, criterion: source, limit: 50, queue: { maxLength: 25, maxDelayMs: 1000 } }`));
    after(async () => {
      await front?.stop();
      front = undefined;
    });

    it('200/s from one client: 50/s admitted (±10%), delays, resets beyond the queue; 10/s from another unaffected', async () => {
      const st = testbed();
      const SECONDS = 6;
      const [a, b] = await Promise.all([paced(st.plan.clients[0]?.name ?? '', 200, SECONDS), paced(st.plan.clients[1]?.name ?? '', 10, SECONDS)]);
      // Window [1 s, 6 s): after the first period's burst, steady state.
      const inWindow = a.results.filter((r) => r[2] === 'connected' && r[1] >= 1000 && r[1] < 6000).length;
      const rate = inWindow / 5;
      assert.ok(Math.abs(rate - 50) <= 5, `admitted ${rate.toFixed(1)}/s in [1 s, 6 s), expected 50/s ± 10% (${JSON.stringify({ ...a, results: undefined })})`);
      assert.ok(a.reset > 0, 'connections beyond the queue are reset');
      assert.equal(a.timedOut + a.other, 0, 'every connection is admitted or reset');
      const waited = a.results.filter((r) => r[2] === 'connected' && r[1] - r[0] >= 100).length;
      assert.ok(waited > 0, 'some admitted connections waited in the queue');
      assert.deepEqual({ connected: b.connected, reset: b.reset, timedOut: b.timedOut }, { connected: b.attempts, reset: 0, timedOut: 0 });
    });
  });

  describe('concurrency limit 5 per source', () => {
    before(() => start('conc', `      - { name: conc, kind: concurrency-limit, criterion: source, limit: 5, queue: { maxLength: 100, maxDelayMs: 20000 } }`));

    it('20 parallel long downloads: at most 5 at once, all complete', async () => {
      const st = testbed();
      const client = st.plan.clients[0]?.name ?? '';
      // 8 MiB at up to 8 MiB/s: most of a second each; 20 at 5 at a time.
      // Each download prints its own start time (wall clock, just before
      // curl starts) so intervals from different processes line up.
      const runs = await Promise.all(
        Array.from({ length: 20 }, () =>
          nsRunAsync(client, 'sh', ['-c', 'date +%s.%N; exec curl -s -o /dev/null --limit-rate 8M -m 40 -w "%{time_connect} %{time_total} %{http_code}" http://198.19.1.1/blob.bin']),
        ),
      );
      const spans: [number, number][] = [];
      let t0 = Infinity;
      for (const r of runs) {
        assert.equal(r.code, 0, r.stderr);
        const [startLine = '', result = ''] = r.stdout.trim().split('\n');
        const [connect = '', total = '', code = ''] = result.split(' ');
        assert.equal(code, '200');
        const startAt = Number(startLine);
        t0 = Math.min(t0, startAt);
        spans.push([startAt + Number(connect), startAt + Number(total)]);
      }
      for (const sp of spans) {
        sp[0] -= t0;
        sp[1] -= t0;
      }
      // Connection k is open over [connect, end]; 50 ms off each end absorbs
      // the gap between a FIN leaving curl and the front node seeing it.
      const events = spans.flatMap(([c, t]) => [[c + 0.05, 1] as const, [t - 0.05, -1] as const]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
      let open = 0;
      let most = 0;
      for (const [, d] of events) most = Math.max(most, (open += d));
      assert.ok(most <= 5, `at most 5 open at once, saw ${most}: ${JSON.stringify(spans)}`);
      assert.ok(spans.filter(([c]) => c >= 0.5).length >= 10, 'most downloads waited for a free slot');
    });
  });
});
