/**
 * Policy `mapping` with two DNS workers (issue 25, "What to build" 1): one
 * table, the primary's, computed from the demand both workers saw and
 * answered from by both (src/dns/mapping/share.ts, workers.ts).
 *
 * `sluice dns` (workers: 2, RRL off, so the kernel spreads datagrams over
 * the two sockets by a hash of addresses and ports) is fed cluster_load and
 * rtt_results by a stand-in for the front nodes
 * (test/fixtures/cluster-load-pub.ts): two clusters, two client prefixes,
 *   A 198.18.253.0/24: 10 ms to c1, 60 ms to c2
 *   B 198.18.254.0/24: 60 ms to c1, 10 ms to c2
 * Answers from the table carry the mapping TTL (ttlMin = ttlMax = 7); the
 * fallback (no table entry) carries the name's TTL, 1. So a worker with no
 * table, or a table of its own without that prefix's demand, answers
 * differently from one holding the primary's.
 *
 * Each prefix asks from SOURCE_PORTS fixed source ports: the reuseport
 * hash sends some of them to each worker (all 16 to one worker has
 * probability 2 x 2^-16), so both workers see each prefix's queries and
 * both answer it. Checked:
 * - every answer, from every port of both prefixes, is the mapped cluster
 *   with the mapping TTL;
 * - status (the primary, which binds no DNS socket: any demand it has came
 *   from the workers) shows one table of both prefixes, with demand;
 * - a worker killed (SIGKILL) is replaced, and the replacement answers from
 *   the table at once: the table does not change after the kill (same
 *   RTTs and loads), so no delta is sent, and the only way it can hold the
 *   entries is the whole table the primary sends a new worker.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { writeKeyPair } from '../../src/control/keys.ts';
import type { DnsStatus } from '../../src/dns/status.ts';
import { DnsProcess } from '../helpers/dns.ts';
import { NsProcess, nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const PUB = fileURLToPath(new URL('../fixtures/cluster-load-pub.ts', import.meta.url));
const SERVER = '198.18.251.6';
const A = '198.18.253.10';
const B = '198.18.254.10';
const VIPS = { c1: '198.19.1.1', c2: '198.19.2.1' } as const;
const WANT: Record<string, { cluster: keyof typeof VIPS; prefix: string }> = { [A]: { cluster: 'c1', prefix: '198.18.253.0/24' }, [B]: { cluster: 'c2', prefix: '198.18.254.0/24' } };
const MAPPING_TTL = 7;
const SOURCE_PORTS = Array.from({ length: 16 }, (_, i) => 40_000 + 7 * i);

interface Answer {
  ttl: number;
  data: string;
}

describe('sluice dns: policy mapping with two workers answers from the primary\'s one table', () => {
  const prefix = testPrefix();
  const ns = `${prefix}-dwm`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dnswm-'));
  const teardown = (): void => {
    down(prefix);
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  let pub: NsProcess | undefined;

  const dig = async (source: string, port: number): Promise<Answer[]> => {
    const r = await nsRunAsync(ns, 'dig', ['+time=2', '+tries=2', '+noall', '+answer', `@${SERVER}`, '-b', `${source}#${port}`, 'www.example.test', 'A']);
    assert.equal(r.code, 0, `dig from ${source}#${port}: ${r.stderr}`);
    return r.stdout
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const f = l.trim().split(/\s+/);
        return { ttl: Number(f[1]), data: f[4] ?? '' };
      });
  };
  /** Every port of both prefixes: [source, port, answers]. */
  const askAll = async (): Promise<[string, number, Answer[]][]> => {
    const out: [string, number, Answer[]][] = [];
    for (const source of [A, B]) for (const port of SOURCE_PORTS) out.push([source, port, await dig(source, port)]);
    return out;
  };
  /** One answer: the prefix's mapped cluster, with the mapping TTL. */
  const fromTable = (source: string, ans: readonly Answer[]): boolean => {
    const a = ans[0];
    return ans.length === 1 && a !== undefined && a.data === VIPS[WANT[source]!.cluster] && a.ttl === MAPPING_TTL;
  };
  const mapped = (all: [string, number, Answer[]][]): boolean => all.every(([source, , ans]) => fromTable(source, ans));
  const status = async (): Promise<DnsStatus> => {
    assert.ok(daemon);
    return (await daemon.status()) as unknown as DnsStatus;
  };

  before(async () => {
    run('ip', ['netns', 'add', ns]);
    ipBatch(ns, ['link set lo up', 'link add dm0 type veth peer name dm1', `addr add ${SERVER}/24 dev dm0`, `addr add ${A}/24 dev dm1`, `addr add ${B}/24 dev dm1`, 'link set dm0 up', 'link set dm1 up']);
    const dns = writeKeyPair(dir, 'dns');
    const fronts = writeKeyPair(dir, 'fronts');
    writeFileSync(
      join(dir, 'example.test.zone'),
      `$ORIGIN example.test.
$TTL 300
@    IN SOA ns1 hostmaster ( 2026112601 3600 600 86400 60 )
     IN NS   ns1
ns1  IN A    ${SERVER}
`,
    );
    const endpoint = `tcp://${SERVER}:7310`;
    writeFileSync(
      join(dir, 'dns.yaml'),
      `name: dnswm
listen: ["${SERVER}:53"]
zones: [{ file: ${join(dir, 'example.test.zone')} }]
clusters:
  - { name: c1, vips: [${VIPS.c1}] }
  - { name: c2, vips: [${VIPS.c2}] }
steering:
  names: [{ name: www.example.test, policy: mapping, ttl: 1 }]
  reportSeconds: 1
  downAfterIntervals: 3
  mapping: { recomputeSeconds: 1, ttlMin: ${MAPPING_TTL}, ttlMax: ${MAPPING_TTL} }
workers: 2
rrl: { enabled: false }
adminSocket: ${join(dir, 'dns.sock')}
control:
  keyFile: ${dns.keyFile}
  subscribe: [{ endpoint: '${endpoint}', publicKey: ${fronts.pubFile} }]
`,
    );
    const rtt = { c1: { [A]: 10, [B]: 60 }, c2: { [A]: 60, [B]: 10 } };
    pub = new NsProcess(ns, [PUB, '--endpoint', endpoint, '--key', fronts.keyFile, '--allow', dns.pubFile, '--clusters', 'c1,c2', '--every-ms', '300', '--rtt', JSON.stringify(rtt)]);
    assert.deepEqual(await pub.next(15_000), { ready: true });
    // Some load on each cluster: the queries' shares are scaled to the load reported (service.ts), so each prefix's demand is ~40 (with none it would be a millionth of the capacity).
    assert.deepEqual(await pub.request(JSON.stringify({ available: { c1: 60, c2: 60 } })), { ok: true });
    daemon = new DnsProcess(ns, join(dir, 'dns.yaml'), join(dir, 'dns.sock'));
    await daemon.ready();
    await until(async () => (await status()).clusters.every((c) => c.state === 'up'), 'both clusters up (cluster_load over the control plane)', 15_000, 200);
  });

  after(async () => {
    try {
      await pub?.stop();
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  it('both workers answer each prefix from the primary\'s table, built from the demand both saw; a replacement answers from it at once', async (t) => {
    // The first round of queries is the demand (answered by the fallback until the table has it).
    let last: [string, number, Answer[]][] = [];
    await until(
      async () => {
        last = await askAll();
        return mapped(last);
      },
      'every answer from the mapping table',
      30_000,
      200,
    );
    const s = await status();
    const m = s.mapping;
    assert.ok(m !== undefined, 'status has the mapping section');
    t.diagnostic(`mapping status: ${JSON.stringify(m)}`);
    const w = s.workers;
    assert.ok(w !== undefined, 'status has workers');
    assert.equal(w.count, 2);
    assert.equal(m.prefixes, 2, 'one table of both prefixes');
    assert.equal(m.demandPrefixes, 2, 'the primary\'s demand: both prefixes, from the workers (it binds no DNS socket)');
    for (const w of Object.values(WANT)) {
      const e: (typeof m.top)[number] | undefined = m.top.find((p) => p.prefix === w.prefix);
      assert.ok(e !== undefined, `${w.prefix} in the table: ${JSON.stringify(m.top)}`);
      assert.equal(e.cluster, w.cluster);
      assert.ok(e.demand > 0, `${w.prefix} has demand`);
    }

    const victim = w.pids[0]!;
    process.kill(victim, 'SIGKILL');
    await until(async () => {
      const x = (await status()).workers;
      return x !== undefined && x.alive === 2 && x.replaced === 1 && !x.pids.includes(victim);
    }, 'the worker replaced', 10_000, 50);
    last = await askAll();
    const wrong = last.filter(([source, , ans]) => !fromTable(source, ans));
    assert.deepEqual(wrong, [], 'after the replacement every answer is still from the table');
    const after = (await status()).mapping;
    assert.equal(after?.movedTotal, 0, 'the table never changed (so no delta carried it to the replacement)');
  });
});
