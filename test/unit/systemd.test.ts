/**
 * sd_notify and the watchdog: the sender through the real addon to a real
 * AF_UNIX datagram socket (path and abstract), the watchdog interval rules,
 * and the front node's packet-loop liveness judgement (fake queue states;
 * the real queue is checked in test/netns/systemd.test.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { componentLogger } from '../../src/log/logger.ts';
import type { NativeLiveness } from '../../src/nfqueue/native.ts';
import { SystemdNotifier } from '../../src/systemd/notify.ts';
import { parseQueueOwners, QueueLiveness } from '../../src/systemd/queue-liveness.ts';
import { Watchdog, watchdogIntervalMs } from '../../src/systemd/watchdog.ts';
import { NotifyListener } from '../helpers/notify.ts';

const log = componentLogger('test');

describe('SystemdNotifier through the addon', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-notify-'));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  for (const kind of ['path', 'abstract'] as const) {
    it(`sends KEY=VALUE datagrams to a ${kind} socket, from this process`, async () => {
      const address = kind === 'path' ? join(dir, 'notify.sock') : `@sluice-test-${process.pid}`;
      const l = await NotifyListener.start(address);
      try {
        const n = new SystemdNotifier(log, { NOTIFY_SOCKET: address });
        assert.equal(n.enabled, true);
        assert.equal(n.ready('serving\nwell'), true);
        assert.equal(n.reloading(), true);
        assert.equal(n.watchdog(), true);
        const ready = await l.waitFor('READY', '1');
        assert.equal(ready.fields['STATUS'], 'serving well', 'a newline in a value must not start a new assignment');
        assert.equal(ready.pid, process.pid);
        const rel = await l.waitFor('RELOADING', '1');
        assert.match(rel.fields['MONOTONIC_USEC'] ?? '', /^\d+$/);
        await l.waitFor('WATCHDOG', '1');
        assert.equal(n.sent, 3);
      } finally {
        l.stop();
      }
    });
  }

  it('without NOTIFY_SOCKET nothing is sent and nothing fails', () => {
    const n = new SystemdNotifier(log, {});
    assert.equal(n.enabled, false);
    assert.equal(n.ready('x'), false);
    assert.equal(n.failed, 0);
  });

  it('an unusable socket is counted and logged, never thrown', () => {
    for (const bad of [join(dir, 'nobody-listens.sock'), 'relative.sock', `/${'x'.repeat(200)}`]) {
      const n = new SystemdNotifier(log, { NOTIFY_SOCKET: bad });
      assert.equal(n.ready('x'), false, bad);
      assert.equal(n.failed, 1, bad);
    }
  });
});

describe('watchdog interval', () => {
  it('half of WATCHDOG_USEC, only for this process', () => {
    assert.equal(watchdogIntervalMs({ WATCHDOG_USEC: '20000000' }, 42), 10_000);
    assert.equal(watchdogIntervalMs({ WATCHDOG_USEC: '20000000', WATCHDOG_PID: '42' }, 42), 10_000);
    assert.equal(watchdogIntervalMs({ WATCHDOG_USEC: '20000000', WATCHDOG_PID: '43' }, 42), undefined);
    assert.equal(watchdogIntervalMs({}, 42), undefined);
    assert.equal(watchdogIntervalMs({ WATCHDOG_USEC: 'soon' }, 42), undefined);
    assert.equal(watchdogIntervalMs({ WATCHDOG_USEC: '0' }, 42), undefined);
  });

  it('pings while alive, withholds and says why while not', () => {
    const sent: string[] = [];
    const notifier = new SystemdNotifier(log, { NOTIFY_SOCKET: '/run/x' }, { notify: (_s, m) => void sent.push(m) });
    let alive = true;
    const w = new Watchdog(notifier, () => (alive ? { alive: true } : { alive: false, reason: 'queue gone' }), log);
    assert.equal(w.tick(), true);
    alive = false;
    assert.equal(w.tick(), false);
    alive = true;
    assert.equal(w.tick(), true);
    assert.deepEqual(sent, ['WATCHDOG=1', 'STATUS=watchdog withheld: queue gone', 'STATUS=running', 'WATCHDOG=1']);
    assert.equal(w.pings, 2);
    assert.equal(w.withheld, 1);
  });

  it('a throwing check withholds the ping', () => {
    const sent: string[] = [];
    const notifier = new SystemdNotifier(log, { NOTIFY_SOCKET: '/run/x' }, { notify: (_s, m) => void sent.push(m) });
    const w = new Watchdog(notifier, () => {
      throw new Error('boom');
    }, log);
    assert.equal(w.tick(), false);
    assert.deepEqual(sent, ['STATUS=watchdog withheld: liveness check failed: boom']);
  });
});

describe('front packet-loop liveness', () => {
  const PROC = `    0  31337     0 2   128     0     0       12  1\n    7  999     0 2   128     0     0        0  1\n`;
  let state: NativeLiveness | undefined;
  const source = { queue: 0, liveness: () => state };
  const live = (s: Partial<NativeLiveness>): NativeLiveness => ({ polling: true, portid: 31337, wakeups: 5, readable: false, ...s });

  it('parses the owners of bound queues', () => {
    assert.deepEqual([...parseQueueOwners(PROC)], [[0, 31337], [7, 999]]);
  });

  it('alive only while polled, bound to our port, and draining', () => {
    const q = new QueueLiveness(() => source, () => PROC);
    state = live({});
    assert.deepEqual(q.check(), { alive: true });
    state = undefined;
    assert.match(q.check().reason ?? '', /not open/);
    state = live({ polling: false });
    assert.match(q.check().reason ?? '', /no longer polled/);
    state = live({ portid: 4242 });
    assert.match(q.check().reason ?? '', /bound to netlink port 31337, not ours \(4242\)/);
    const unbound = new QueueLiveness(() => ({ queue: 3, liveness: () => live({}) }), () => PROC);
    assert.match(unbound.check().reason ?? '', /queue 3 is not bound/);
  });

  it('data waiting at two checks with no wakeup between is a stall; once is not', () => {
    const q = new QueueLiveness(() => source, () => PROC);
    state = live({ readable: true, wakeups: 10 });
    assert.equal(q.check().alive, true, 'a packet may have just arrived');
    state = live({ readable: true, wakeups: 11 });
    assert.equal(q.check().alive, true, 'drained in between, more arrived');
    state = live({ readable: true, wakeups: 11 });
    assert.match(q.check().reason ?? '', /packets waiting and not read/);
    state = live({ readable: false, wakeups: 12 });
    assert.equal(q.check().alive, true);
  });

  it('a proc file unreadable for lack of privilege leaves the judgement to the socket; any other read error is not alive', () => {
    const fail = (code: string) => () => {
      throw Object.assign(new Error(code), { code });
    };
    state = live({});
    assert.deepEqual(new QueueLiveness(() => source, fail('EACCES')).check(), { alive: true });
    state = live({ polling: false });
    assert.equal(new QueueLiveness(() => source, fail('EACCES')).check().alive, false);
    state = live({});
    assert.match(new QueueLiveness(() => source, fail('EIO')).check().reason ?? '', /cannot read/);
  });
});
