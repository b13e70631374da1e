/**
 * FlowExpiry (src/front/flow-expiry.ts): the expiries of servers gone down
 * run one at a time in the order asked, a mark already waiting is not
 * queued twice, and a failure is counted and logged without stopping the
 * ones after it. The kernel side (ctExpire) is the netns suite's
 * (test/netns/front-flow-expiry.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { Logger } from '../../src/log/logger.ts';
import { FlowExpiry, type ExpiredServer, type ExpiryResult } from '../../src/front/flow-expiry.ts';

function logged(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log: Logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

/** A server gone down at 198.18.201.(10 + mark & 0xff) (IPv4 mapped), port 80. */
function down(service: string, server: string, mark: number): ExpiredServer {
  return { service, server, mark, address: Uint32Array.of(0, 0, 0xffff, (0xc612_c90a + (mark & 0xff)) >>> 0), port: 80 };
}

describe('FlowExpiry', () => {
  it('runs one expiry at a time, in order; a mark already waiting is not queued again', async () => {
    const calls: number[] = [];
    const targets: string[] = [];
    let running = 0;
    let most = 0;
    const release: (() => void)[] = [];
    const expire = async (mark: number, address: Uint32Array, port: number): Promise<ExpiryResult> => {
      calls.push(mark);
      targets.push(`${[...address].map((w) => w.toString(16)).join(':')} ${String(port)}`);
      most = Math.max(most, ++running);
      await new Promise<void>((r) => release.push(r));
      running--;
      return { matched: 2, deleted: 2, gone: 0 };
    };
    const { log } = logged();
    const x = new FlowExpiry(expire, log);
    x.serverDown(down('www', 's1a', 0x5100_0001));
    x.serverDown(down('www', 's1b', 0x5100_0002));
    x.serverDown(down('www', 's1b', 0x5100_0002)); // still waiting: not queued twice
    const later = down('www6', 's1b', 0x5100_1002);
    x.serverDown(later);
    later.address.fill(0); // a reload rewrote the runtime's words: the queued expiry keeps its own
    while (calls.length < 3 || release.length > 0) {
      await new Promise((r) => setImmediate(r));
      release.shift()?.();
    }
    await x.idle();
    assert.deepEqual(calls, [0x5100_0001, 0x5100_0002, 0x5100_1002]);
    assert.deepEqual(targets, ['0:0:ffff:c612c90b 80', '0:0:ffff:c612c90c 80', '0:0:ffff:c612c90c 80'], 'each server\'s address and port');
    assert.equal(most, 1);
    assert.deepEqual([x.runs, x.failures, x.deleted, x.gone], [3, 0, 6, 0]);
  });

  it('counts and logs a failure, and goes on with the next', async () => {
    const expire = (mark: number): Promise<ExpiryResult> =>
      mark === 1 ? Promise.reject(Object.assign(new Error('cannot expire: Operation not permitted'), { code: 'ERR_SLUICE_CT_EXPIRE', errno: 1 })) : Promise.resolve({ matched: 3, deleted: 2, gone: 1 });
    const { log, lines } = logged();
    const x = new FlowExpiry(expire, log);
    x.serverDown(down('www', 's1a', 1));
    x.serverDown(down('www', 's1b', 2));
    await x.idle();
    assert.deepEqual([x.runs, x.failures, x.deleted, x.gone], [1, 1, 2, 1]);
    const failed = lines.find((l) => l['msg'] === 'flow expiry failed');
    assert.ok(failed);
    assert.equal(failed['code'], 'ERR_SLUICE_FLOW_EXPIRY');
    assert.equal(failed['server'], 's1a');
    assert.match(String((failed['err'] as { message?: string } | undefined)?.message), /s1a .*Operation not permitted/);
    const done = lines.find((l) => String(l['msg']).startsWith('flows the server cannot answer expired'));
    assert.deepEqual([done?.['server'], done?.['deleted'], done?.['gone']], ['s1b', 2, 1]);
  });

  it('logs nothing for a server that had no such flow; a later down runs again', async () => {
    const { log, lines } = logged();
    let n = 0;
    const x = new FlowExpiry(() => {
      n++;
      return Promise.resolve({ matched: 0, deleted: 0, gone: 0 });
    }, log);
    x.serverDown(down('www', 's1a', 1));
    await x.idle();
    x.serverDown(down('www', 's1a', 1));
    await x.idle();
    assert.equal(n, 2);
    assert.equal(x.runs, 2);
    assert.deepEqual(lines, []);
  });
});
