/**
 * A connecting control socket (an agent's PUSH to a front node, a DNS
 * server's SUB) is heard again soon after its peer's host becomes reachable
 * after an outage that dropped packets silently (a host that died, a link
 * pulled): no TCP reset tells the connecting side, so without a connect
 * timeout its dial sits in the kernel's SYN retransmissions (1, 3, 7, 15, 31 s
 * after it began) and the peer is heard only at the next one. Agents heard
 * a front node that came back up to 15 s late (seen in front-pair's failover).
 *
 * The outage is an nft drop of the endpoint's port in a bare namespace; the
 * delay is read on the fixture's clock from the moment the drop is lifted
 * to the next handshake.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { NsProcess, nsRun, useNamespace } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/control-reconnect.ts', import.meta.url));
const PORT = 7410;
/**
 * The outage lasts this long after the link is seen down: long enough that
 * the dial's retransmissions are 16 s apart. Without a connect timeout the
 * peer was heard 10.8 s after the drop was lifted (3.7 s after an 8 s outage).
 */
const OUTAGE_MS = 25_000;
/** A dial is given up after the connect timeout (2 s) and redialled within the reconnect interval (at most 1 s). */
const HEARD_WITHIN_MS = 5000;

const ns = useNamespace('ctl');

describe('control plane: reconnect after a silent outage', () => {
  let fx: NsProcess | undefined;
  after(async () => {
    await fx?.stop();
  });

  it(`a dropped endpoint: the connecting side is heard again within ${String(HEARD_WITHIN_MS / 1000)} s of the drop being lifted`, async () => {
    fx = new NsProcess(ns(), [FIXTURE, '--port', String(PORT)]);
    const first = await fx.next(15_000);
    assert.equal(first['event'], 'handshake');
    nsRun(ns(), 'nft', ['-f', '-'], `table ip outage {\n  chain in {\n    type filter hook input priority 0; policy accept;\n    tcp dport ${String(PORT)} drop\n    tcp sport ${String(PORT)} drop\n  }\n}\n`);
    // Heartbeats (1 s, timeout 3 s) notice the silent peer and the dial begins.
    await until(async () => (await fx!.request('state'))['connected'] === false, 'the link seen down', 15_000, 200);
    await sleep(OUTAGE_MS);
    nsRun(ns(), 'nft', ['delete', 'table', 'ip', 'outage']);
    fx.child.stdin.write('mark\n');
    // The handshake may come before the fixture reads "mark": take both lines in either order.
    const lines = [await fx.next(30_000), await fx.next(30_000)];
    const mark = lines.find((l) => l['event'] === 'mark');
    const next = lines.find((l) => l['event'] === 'handshake');
    assert.ok(mark && next, `a mark and a handshake: ${JSON.stringify(lines)}`);
    const delay = (next['t'] as number) - (mark['t'] as number);
    console.log(`# heard again ${delay.toFixed(0)} ms after the drop was lifted`);
    assert.ok(delay < HEARD_WITHIN_MS, `heard again ${delay.toFixed(0)} ms after the drop was lifted (at most ${String(HEARD_WITHIN_MS)})`);
    const st = await fx.request('state');
    assert.deepEqual([st['connected'], st['connects']], [true, 2]);
  });
});
