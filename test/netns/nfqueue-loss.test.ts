/**
 * Packets the daemon never receives (issue 22): a burst of UDP datagrams is
 * queued while the program's event loop is stalled and its socket's receive
 * buffer is tiny, so the kernel cannot deliver most of their messages.
 * Asserted from the kernel's own /proc/net/netfilter/nfnetlink_queue
 * (net/netfilter/nfnetlink_queue.c seq_show: queue_num peer_portid
 * queue_total copy_mode copy_range queue_dropped queue_user_dropped
 * id_sequence 1):
 *  - within 1 s of the burst (and of the stall's end) no packet waits in the
 *    kernel's queue (queue_total 0): before the fix, the overrun's EPOLLERR
 *    made libuv stop polling the socket for good, and whatever still fitted
 *    its buffer waited forever;
 *  - every id the kernel assigned (id_sequence) was received or counted
 *    lost (stats.lost), and without FAIL_OPEN the kernel's own drop count
 *    (queue_user_dropped) is exactly our lost count;
 *  - the queue still reads afterwards.
 * One namespace with a veth pair inside it: the datagrams leave through v0
 * to a static neighbour that does not exist, so nothing leaves the namespace.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { NFQUEUE_PROC, parseKernelQueue, type KernelQueueStats } from '../../src/metrics/kernel_queue.ts';
import { NsProcess, nsRun, nsRunAsync, testPrefix } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/nfq-program.ts', import.meta.url));
const QUEUE = 7;
const TARGET = '198.18.0.2';
const BURST = 4000;
/** Sends argv[2] UDP datagrams of 64 bytes to TARGET:9, back to back (bounded count). */
const SENDER_PY = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[1])):
    try:
        s.sendto(b'x' * 64, ('${TARGET}', 9))
    except OSError:
        pass
`;

type ProcLine = KernelQueueStats;

function procLine(ns: string): ProcLine | undefined {
  return parseKernelQueue(nsRun(ns, 'cat', [NFQUEUE_PROC]), QUEUE);
}

/** Polls /proc until the queue holds no packet, for up to `ms`: the last reading. */
async function settled(ns: string, ms: number): Promise<ProcLine | undefined> {
  const until = Date.now() + ms;
  let line = procLine(ns);
  while (line !== undefined && line.waiting > 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 20));
    line = procLine(ns);
  }
  return line;
}

function makeNamespace(ns: string): void {
  const ip = (...args: string[]): void => {
    const r = spawnSync('ip', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  };
  ip('netns', 'add', ns);
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  ip('-n', ns, 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1');
  ip('-n', ns, 'link', 'set', 'v0', 'up');
  ip('-n', ns, 'link', 'set', 'v1', 'up');
  ip('-n', ns, 'addr', 'add', '198.18.0.1/24', 'dev', 'v0');
  ip('-n', ns, 'neigh', 'add', TARGET, 'lladdr', '02:00:00:00:00:02', 'dev', 'v0');
  nsRun(ns, 'iptables', ['-A', 'OUTPUT', '-p', 'udp', '-d', TARGET, '--dport', '9', '-j', 'NFQUEUE', '--queue-num', String(QUEUE)]);
}

async function send(ns: string, count: number): Promise<void> {
  const r = await nsRunAsync(ns, 'python3', ['-c', SENDER_PY, String(count)]);
  assert.equal(r.code, 0, r.stderr);
}

describe('NFQUEUE packets lost before the program reads them', () => {
  for (const failOpen of [true, false]) {
    it(`${failOpen ? 'fail-open' : 'fail-closed'}: after an overrun the queue empties and every id is received or counted lost`, async (t) => {
      const ns = `${testPrefix()}-nql`;
      t.after(() => {
        spawnSync('ip', ['netns', 'del', ns]);
      });
      makeNamespace(ns);
      // 16 KiB (the kernel doubles it): a few dozen messages fit.
      const p = new NsProcess(ns, ['--no-warnings', FIXTURE, '--queue', String(QUEUE), '--rcvbuf', '16384', ...(failOpen ? [] : ['--fail-closed'])]);
      t.after(() => p.stop());
      assert.deepEqual(await p.next(), { ready: true });

      assert.deepEqual(await p.request('stall 600'), { stalling: true });
      await send(ns, BURST);
      assert.deepEqual(await p.next(), { stalled: 600 });

      const line = await settled(ns, 1000);
      assert.ok(line, 'queue not listed');
      assert.equal(line.waiting, 0, `packets still waiting in the kernel's queue: ${JSON.stringify(line)}`);
      const s = await p.request('stats');
      const packets = Number(s['packets']);
      const lost = Number(s['lost']);
      const detail = JSON.stringify({ line, stats: s });
      // The test provoked loss (else it would prove nothing) and received some.
      assert.ok(lost > 0 && packets > 0, detail);
      assert.equal(line.idSequence, BURST, detail);
      assert.equal(packets + lost, line.idSequence, detail);
      assert.equal(s['verdicts'], packets, detail);
      assert.ok(Number(s['idGaps']) <= lost, detail);
      assert.equal(line.queueDropped, 0, detail); // queue_maxlen never reached
      // FAIL_OPEN accepts what it cannot deliver, uncounted by the kernel; otherwise the kernel drops and counts it.
      assert.equal(line.userDropped, failOpen ? 0 : lost, detail);

      // The socket is still read: a later, small send arrives.
      await send(ns, 20);
      const after = await settled(ns, 1000);
      const s2 = await p.request('stats');
      const detail2 = JSON.stringify({ after, stats: s2 });
      assert.ok(after && after.waiting === 0, detail2);
      assert.equal(after.idSequence, BURST + 20, detail2);
      assert.ok(Number(s2['packets']) > packets, detail2);
      assert.equal(Number(s2['packets']) + Number(s2['lost']), after.idSequence, detail2);
    });
  }
});
