/**
 * Throttling state in a real Redis (a private redis-server on loopback):
 * the Lua script's GCRA matches the memory store, survives SCRIPT FLUSH
 * (NOSCRIPT), expires keys at their TAT and is atomic across clients; and
 * two `sluice master` processes sharing it: one is killed (SIGKILL), the
 * gatekeeper fails over to the other, and no identifier forgets its delay;
 * a restarted master serves the delays again by resync. IPv6 identifiers
 * (issue 23) are keyed apart from IPv4 ones and throttle an IPv6 /64.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { componentLogger } from '../../src/log/logger.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { parseIPv6Address } from '../../src/packet/address6.ts';
import { clientNumber6 } from '../../src/front/client6.ts';
import { Master } from '../../src/throttle/master.ts';
import { gcraRule, nextAllowed } from '../../src/throttle/gcra.ts';
import { ACCEPTED, DELAYED, Gatekeeper } from '../../src/throttle/gatekeeper.ts';
import { MemoryStore } from '../../src/throttle/store_memory.ts';
import { RedisStore } from '../../src/throttle/store_redis.ts';
import { RedisServer } from '../../scripts/testbed/redis.ts';
import { ends, freePort, gatekeeperConfig, masterConfig, writeMasterConfig, type Ends, NO_WORDS } from '../helpers/throttle.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const log = componentLogger('throttle-redis-test');
const ADDR = parseIPv4Address('198.51.100.9')!;
let redis: RedisServer;
const cleanups: (() => unknown)[] = [];

before(async () => {
  redis = await RedisServer.start(freePort());
});
after(async () => {
  for (const c of cleanups.reverse()) await c();
  redis.stop();
});

const storeOpts = () => ({ host: '127.0.0.1', port: redis.port, db: 0, keyPrefix: 'test:throttle:', commandTimeoutMs: 1000 });

class MasterChild {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  constructor(file: string) {
    this.child = spawn(BIN, ['master', '--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
    createInterface({ input: this.child.stderr! }).on('line', (l) => this.lines.push(l));
    cleanups.push(() => {
      this.kill('SIGKILL');
    });
  }
  ready(): Promise<void> {
    return until(() => this.lines.some((l) => l.includes('throttling master ready')) || this.child.exitCode !== null, 'master ready', 20_000).then(() => {
      if (this.child.exitCode !== null) throw new Error(`sluice master exited ${this.child.exitCode}: ${this.lines.join('\n')}`);
    });
  }
  kill(sig: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(sig);
  }
}

describe('Redis store', () => {
  it('the Lua script computes the same TATs as the memory store (rate 1/s, burst 10)', async () => {
    const s = await RedisStore.open(storeOpts());
    cleanups.push(() => s.close());
    const mem = new MemoryStore(100);
    const rule = gcraRule(1, 1000, 10);
    const t0 = 1_800_000_000_000.25;
    const times = [...Array.from({ length: 11 }, () => t0), t0 + 5000, t0 + 5000, t0 + 30_000];
    for (const at of times) {
      const r = await s.charge('www', 'a', at, rule);
      assert.equal(r, mem.charge('www', 'a', at, rule));
    }
    // after 10 at t0 the next was allowed at t0+1 s; checked on the 10th charge
    const tat10 = await (async () => {
      const x = await RedisStore.open({ ...storeOpts(), keyPrefix: 'test:ten:' });
      let t = 0;
      for (let i = 0; i < 10; i++) t = await x.charge('www', 'b', t0, rule);
      await x.close();
      return t;
    })();
    assert.equal(nextAllowed(rule, tat10), t0 + 1000);
  });

  it('keys expire at their TAT; NOSCRIPT (SCRIPT FLUSH) is recovered; charges from two clients are atomic', async () => {
    const a = await RedisStore.open(storeOpts());
    const b = await RedisStore.open(storeOpts());
    cleanups.push(() => a.close(), () => b.close());
    const rule = gcraRule(100, 1000, 1); // T = 10 ms
    // A state a minute ahead: nothing expires while the test reads it, however slow the machine.
    const later = Date.now() + 60_000;
    const tat = await a.charge('www', 'later', later, rule);
    assert.equal(tat, later + 10);
    assert.equal(await a.redis.pexpiretime(a.key('www', 'later')), Math.ceil(tat));
    await a.redis.script('FLUSH');
    assert.equal(await a.charge('www', 'later', later, rule), tat + 10, 'the script reloaded after NOSCRIPT, the state kept');
    // A state of now: its TAT passes 10 ms later.
    await a.charge('www', 'exp', Date.now(), rule);
    const n = 2000;
    const start = Date.now() + 60_000;
    await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 === 0 ? a : b).charge('www', 'race', start, rule)));
    assert.equal(Number(await a.redis.get(a.key('www', 'race'))), start + n * 10);
    // The expiry is Redis's own: the short-lived key is gone once its TAT has passed.
    await until(async () => (await a.redis.exists(a.key('www', 'exp'))) === 0, 'the passed state expired');
    const seen: string[] = [];
    await a.scan('www', Date.now(), (id) => seen.push(id));
    assert.ok(seen.includes('race') && !seen.includes('exp'), seen.join(','));
  });
});

describe('Redis store, IPv6 identifiers (issue 23)', () => {
  it('keys IPv6 prefixes apart from IPv4 ones in one domain, scans them back as sent, and a master with it throttles an IPv6 /64', async () => {
    const s = await RedisStore.open({ ...storeOpts(), keyPrefix: 'test:v6:' });
    cleanups.push(() => s.close());
    const rule = gcraRule(1, 1000, 1);
    const at = Date.now() + 60_000;
    const ids = ['198.51.100.0/24', '2001:db8:1:2::/64', '2001:db8:1:3::/64', '2001:db8::c', '198.51.100.12'];
    for (const id of ids) assert.equal(await s.charge('www', id, at, rule), at + 1000, id);
    // A second charge moves only its own identifier on.
    assert.equal(await s.charge('www', '2001:db8:1:2::/64', at, rule), at + 2000);
    const keys = (await s.redis.keys('test:v6:*')).sort();
    assert.deepEqual(keys, ids.map((id) => `test:v6:www|${id}`).sort());
    const seen = new Map<string, number>();
    assert.equal(await s.scan('www', Date.now(), (id, tat) => seen.set(id, tat)), ids.length);
    assert.deepEqual([...seen.keys()].sort(), [...ids].sort());
    assert.equal(seen.get('2001:db8:1:2::/64'), at + 2000);
    assert.equal(seen.get('2001:db8:1:3::/64'), at + 1000);

    // End to end: a master on this Redis, a gatekeeper, an IPv6 client over its burst.
    const e: Ends = ends();
    const m = await Master.start(masterConfig('m-redis-v6', e, [{ name: 'www', requests: 1, periodSeconds: 1, burst: 2 }], { kind: 'redis', host: '127.0.0.1', port: redis.port, keyPrefix: 'test:v6e2e:' }), log);
    cleanups.push(() => m.stop());
    const g = await Gatekeeper.start(gatekeeperConfig('gk1', [e], [{ name: 'www', maxDelaySeconds: 30 }]), log);
    cleanups.push(() => {
      g.stop();
    });
    await until(() => g.resynced, 'gatekeeper resynced');
    const d = g.domain('www')!;
    const w = parseIPv6Address('2001:db8:7:8::1')!;
    const key = g.keyOf(d, clientNumber6(w), w, 0);
    const now = Date.now();
    for (let i = 0; i < 3; i++) g.account(ACCEPTED, d, key, w, 0, now);
    await until(() => g.delayFor(d, key, Date.now()) > 0, 'the IPv6 /64 learned its delay from a Redis-backed master');
    assert.equal(await m.store.tracked('www'), 1);
    assert.ok((await s.redis.exists('test:v6e2e:www|2001:db8:7:8::/64')) === 1);
    // A new gatekeeper gets it back by resync (SCAN of Redis, the identifier parsed to the same /64).
    const g3 = await Gatekeeper.start(gatekeeperConfig('gk3', [e], [{ name: 'www', maxDelaySeconds: 30 }]), log);
    cleanups.push(() => {
      g3.stop();
    });
    await until(() => g3.resynced, 'gk3 resynced');
    const d3 = g3.domain('www')!;
    const other = parseIPv6Address('2001:db8:7:8:ffff::2')!;
    assert.equal(d3.delays.get(g3.keyOf(d3, clientNumber6(other), other, 0)), d.delays.get(key));
  });
});

describe('two masters sharing Redis', () => {
  it('one master is killed: the gatekeeper fails over, no identifier forgets its delay; a restarted master resyncs the delays', async () => {
    const store = { kind: 'redis', host: '127.0.0.1', port: redis.port, keyPrefix: 'test:shared:' };
    const rules = [{ name: 'www', requests: 2, periodSeconds: 1, burst: 2 }]; // T = 500 ms
    const e1: Ends = ends();
    const e2: Ends = ends();
    const f1 = writeMasterConfig('shared1', e1, rules, store);
    const f2 = writeMasterConfig('shared2', e2, rules, store);
    const masters = [
      { e: e1, file: f1, child: new MasterChild(f1) },
      { e: e2, file: f2, child: new MasterChild(f2) },
    ];
    await Promise.all(masters.map((m) => m.child.ready()));

    const g = await Gatekeeper.start(gatekeeperConfig('gk1', [e1, e2], [{ name: 'www', maxDelaySeconds: 30 }]), log);
    cleanups.push(() => {
      g.stop();
    });
    await until(() => g.resynced, 'gatekeeper resynced');
    // Accounting goes to one master: the first that completed its handshake.
    const first = masters.find((m) => m.e.accounting === g.activeMaster)!;
    const second = masters.find((m) => m !== first)!;
    const d = g.domain('www')!;
    const key = g.keyOf(d, ADDR, NO_WORDS, 0);
    const now = Date.now();
    for (let i = 0; i < 20; i++) g.account(ACCEPTED, d, key, NO_WORDS, 0, now);
    // 20 charges of 500 ms: TAT about now+10 s, next allowed about now+9.5 s.
    await until(() => (d.delays.get(key) ?? 0) >= now + 9500, 'all 20 charges applied and their delay learned');
    const u1 = d.delays.get(key)!;

    first.child.kill('SIGKILL');
    await until(() => g.activeMaster === second.e.accounting && g.resynced, 'failed over to the other master and resynced');
    assert.ok(g.counters.failovers >= 1);

    // The surviving master never saw this identifier's accounting, yet knows its delay (from Redis).
    const g3 = await Gatekeeper.start(gatekeeperConfig('gk3', [second.e], [{ name: 'www', maxDelaySeconds: 30 }]), log);
    cleanups.push(() => {
      g3.stop();
    });
    await until(() => g3.resynced, 'a new gatekeeper resynced with the surviving master');
    const d3 = g3.domain('www')!;
    assert.equal(d3.delays.get(g3.keyOf(d3, ADDR, NO_WORDS, 0)), u1);

    // The next request, delayed to u1, is charged on the stored TAT: the delay moves on by one interval.
    g.account(DELAYED, d, key, NO_WORDS, 0, Date.now(), u1);
    await until(() => (d.delays.get(key) ?? 0) === u1 + 500, 'the surviving master continued the TAT');

    // The killed master restarts; the other dies; the gatekeeper, having forgotten everything, learns it back by resync.
    first.child = new MasterChild(first.file);
    await first.child.ready();
    d.delays.clear();
    second.child.kill('SIGKILL');
    await until(() => g.activeMaster === first.e.accounting && g.resynced, 'failed over to the restarted master and resynced');
    assert.equal(d.delays.get(key), u1 + 500);
    first.child.kill('SIGTERM');
  });
});
