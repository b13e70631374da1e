/**
 * The NFQUEUE addon on real traffic: curl from a client namespace through a
 * front-node namespace whose FORWARD chain queues the HTTP flows to a
 * program on the addon.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, afterEach, before, describe, it } from 'node:test';
import { NsProcess, nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/nfq-program.ts', import.meta.url));
const QUEUE = 5;

const testbed = useTestbed();

describe('NFQUEUE addon in a front-node namespace', () => {
  let front = '';
  let client = '';
  let client2 = '';
  let server = '';
  let serverId = '';
  let program: NsProcess | undefined;

  before(() => {
    const st = testbed();
    const k = st.plan.clusters[0];
    const s = k?.servers[0];
    if (!k || !s) throw new Error('plan has no cluster 1');
    front = k.front.name;
    client = st.plan.clients[0]?.name ?? '';
    client2 = st.plan.clients[1]?.name ?? '';
    server = s.address;
    serverId = s.id;
    // No --queue-bypass: with no program bound, these flows are dropped, so
    // a successful curl proves the packets went through the program.
    nsRun(front, 'iptables', ['-A', 'FORWARD', '-p', 'tcp', '-d', k.lanNetwork, '--dport', '80', '-j', 'NFQUEUE', '--queue-num', String(QUEUE)]);
    nsRun(front, 'iptables', ['-A', 'FORWARD', '-p', 'tcp', '-s', k.lanNetwork, '--sport', '80', '-j', 'NFQUEUE', '--queue-num', String(QUEUE)]);
  });

  afterEach(async () => {
    await program?.stop();
    program = undefined;
  });

  after(() => {
    nsRun(front, 'iptables', ['-F', 'FORWARD']);
  });

  async function startProgram(args: string[] = []): Promise<NsProcess> {
    const p = new NsProcess(front, ['--no-warnings', FIXTURE, '--queue', String(QUEUE), ...args]);
    program = p;
    assert.deepEqual(await p.next(), { ready: true });
    return p;
  }

  it('with no program bound, the queued flow is dropped (the rule is live)', async () => {
    const r = await nsRunAsync(client, 'curl', ['-s', '-m', '2', `http://${server}/`]);
    assert.notEqual(r.code, 0);
  });

  it('accept-all program: curl through it gets the server page', async () => {
    const p = await startProgram();
    const page = nsRun(client, 'curl', ['-s', '-m', '5', `http://${server}/`]);
    assert.match(page, new RegExp(`^server ${serverId} cluster 1 `));
    const stats = await p.request('stats');
    // SYN, SYN-ACK, ACK, request, response, FINs...: well over 5 packets, all accepted.
    assert.ok(Number(stats['packets']) >= 6, JSON.stringify(stats));
    assert.equal(stats['verdicts'], stats['packets']);
    assert.equal(stats['dropped'], 0);
    assert.equal(stats['malformed'], 0);
    assert.equal(stats['kernelErrors'], 0);
  });

  it('drop-one-flow program: the chosen flow fails while another succeeds', async () => {
    const st = testbed();
    const clientAddr = st.plan.clients[0]?.address ?? '';
    const p = await startProgram(['--drop-src', clientAddr, '--drop-sport', '41000']);
    const bad = await nsRunAsync(client, 'curl', ['-s', '-m', '2', '--local-port', '41000', `http://${server}/`]);
    const good = await nsRunAsync(client, 'curl', ['-s', '-m', '5', '--local-port', '41001', `http://${server}/`]);
    const other = await nsRunAsync(client2, 'curl', ['-s', '-m', '5', '--local-port', '41000', `http://${server}/`]);
    assert.notEqual(bad.code, 0, 'the chosen flow must fail');
    assert.equal(good.code, 0, good.stderr);
    assert.match(good.stdout, new RegExp(`server ${serverId}`));
    assert.equal(other.code, 0, 'same port from another client is another flow');
    const stats = await p.request('stats');
    assert.ok(Number(stats['dropped']) >= 1, JSON.stringify(stats));
  });

  it('under load, one callback delivers more than one packet', async () => {
    const p = await startProgram();
    const r = await nsRunAsync(client, 'wrk', ['-t2', '-c64', '-d2s', `http://${server}/`]);
    assert.equal(r.code, 0, r.stderr);
    const stats = await p.request('stats');
    assert.ok(Number(stats['maxBatch']) > 1, `max batch ${String(stats['maxBatch'])}`);
    assert.ok(Number(stats['batches']) < Number(stats['packets']), JSON.stringify(stats));
    assert.equal(stats['verdicts'], stats['packets']);
    assert.equal(stats['sendErrors'], 0);
    assert.equal(stats['kernelErrors'], 0);
  });

  it('a second program on the same queue gets a typed busy error', async () => {
    await startProgram();
    const second = new NsProcess(front, ['--no-warnings', FIXTURE, '--queue', String(QUEUE)]);
    try {
      assert.deepEqual(await second.next(), { error: 'ERR_SLUICE_QUEUE_BUSY', name: 'QueueBusyError' });
    } finally {
      await second.stop();
    }
  });

  it('conntrack info: bound where the kernel has it, a typed unsupported error where not', async () => {
    const p = new NsProcess(front, ['--no-warnings', FIXTURE, '--queue', String(QUEUE + 1), '--conntrack']);
    try {
      const first = await p.next();
      const ok = first['ready'] === true || (first['error'] === 'ERR_SLUICE_QUEUE_UNSUPPORTED' && first['name'] === 'QueueUnsupportedError');
      assert.ok(ok, JSON.stringify(first));
    } finally {
      await p.stop();
    }
  });
});
