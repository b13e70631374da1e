/**
 * Verdict features of the addon on real traffic in a front-node namespace:
 * packet marks, NF_REPEAT, and replacement payloads (in place and copied).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { afterEach, before, describe, it } from 'node:test';
import { NsProcess, nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/nfq-program.ts', import.meta.url));
const QUEUE = 9;
const testbed = useTestbed({ clients: 1, clusters: 1, serversPerCluster: 2, delaysMs: { '1:1': 0 } });

function markCount(front: string, mark: number): number {
  // Packet counter of the POSTROUTING rule that matches `mark`.
  const out = nsRun(front, 'iptables', ['-t', 'mangle', '-L', 'POSTROUTING', '-v', '-x', '-n']);
  const line = out.split('\n').find((l) => l.includes(`mark match 0x${mark.toString(16)}`));
  return Number(line?.trim().split(/\s+/)[0] ?? NaN);
}

/**
 * The program's packet count and the marked-packet counter, once they agree.
 * curl returns with the connection's last packets (FIN, ACK) possibly still
 * in flight, so a first reading can see a packet in one and not yet in the
 * other (seen in CI: 12 marked against 10 counted). Re-read for up to 2 s.
 */
async function settledCounts(p: NsProcess, front: string, mark: number, before0: number): Promise<{ packets: number; marked: number }> {
  let last = { packets: NaN, marked: NaN };
  for (let i = 0; i < 20; i++) {
    const stats = await p.request('stats');
    last = { packets: Number(stats['packets']), marked: markCount(front, mark) - before0 };
    if (last.packets === last.marked) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  return last;
}

describe('verdicts on real traffic', () => {
  let front = '';
  let client = '';
  let s1 = { address: '', id: '' };
  let s2 = { address: '', id: '' };
  let program: NsProcess | undefined;

  before(() => {
    const st = testbed();
    const k = st.plan.clusters[0];
    const a = k?.servers[0];
    const b = k?.servers[1];
    assert.ok(k && a && b);
    front = k.front.name;
    client = st.plan.clients[0]?.name ?? '';
    s1 = a;
    s2 = b;
    // Only unmarked packets are queued: a packet given a mark (and NF_REPEAT) passes the second time.
    nsRun(front, 'iptables', ['-A', 'FORWARD', '-m', 'mark', '--mark', '0', '-j', 'NFQUEUE', '--queue-num', String(QUEUE)]);
    // The forward path continues to POSTROUTING, where these rules count marks.
    // (PREROUTING routing was already decided before FORWARD: rewriting the
    // destination there still forwards out of lan0, which serves both servers.)
    for (const m of [0x2a, 0x2b]) nsRun(front, 'iptables', ['-t', 'mangle', '-A', 'POSTROUTING', '-m', 'mark', '--mark', String(m)]);
  });

  afterEach(async () => {
    await program?.stop();
    program = undefined;
  });

  async function start(args: string[]): Promise<NsProcess> {
    const p = new NsProcess(front, ['--no-warnings', FIXTURE, '--queue', String(QUEUE), ...args]);
    program = p;
    assert.deepEqual(await p.next(), { ready: true });
    return p;
  }

  it('a verdict with a mark: later rules see the mark', async () => {
    const before0 = markCount(front, 0x2a);
    const p = await start(['--mark', String(0x2a)]);
    const page = nsRun(client, 'curl', ['-s', '-m', '5', `http://${s1.address}/`]);
    assert.match(page, new RegExp(`server ${s1.id}`));
    const { packets, marked } = await settledCounts(p, front, 0x2a, before0);
    assert.equal(marked, packets);
  });

  it('NF_REPEAT re-runs the hook: the marked packet passes the queue rule the second time', async () => {
    const before0 = markCount(front, 0x2b);
    const p = await start(['--repeat', '--mark', String(0x2b)]);
    const page = nsRun(client, 'curl', ['-s', '-m', '5', `http://${s1.address}/`]);
    assert.match(page, new RegExp(`server ${s1.id}`));
    const { packets, marked } = await settledCounts(p, front, 0x2b, before0);
    assert.ok(packets >= 6);
    assert.equal(marked, packets);
  });

  for (const mode of ['in place', 'copied'] as const) {
    it(`replacement payload (${mode}): echo requests to one server are answered by the other`, async () => {
      const p = await start(['--rewrite-dst', s2.address, ...(mode === 'copied' ? ['--copy'] : [])]);
      const r = await nsRunAsync(client, 'ping', ['-n', '-c', '3', '-i', '0.2', '-W', '2', s1.address]);
      // Replies come from the address the program wrote: the rewrite (with
      // incrementally updated checksums) reached the wire intact.
      assert.match(r.stdout, new RegExp(`bytes from ${s2.address.replace(/\./g, '\\.')}: icmp_seq=1`), r.stdout);
      const stats = await p.request('stats');
      assert.ok(Number(stats['rewritten']) >= 3, JSON.stringify(stats));
      assert.equal(stats['kernelErrors'], 0);
    });
  }

  it('GSO flag: the queue opens with it and traffic flows', async () => {
    await start(['--gso']);
    const page = nsRun(client, 'curl', ['-s', '-m', '5', `http://${s2.address}/`]);
    assert.match(page, new RegExp(`server ${s2.id}`));
  });
});
