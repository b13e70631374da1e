/**
 * The daemon-down fallback's writer (src/front/fallback.ts): writes only
 * when the usable servers changed, at most one write per interval and one
 * at a time, always ending with the latest state; elements over usable
 * servers only.
 */
import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { FallbackWriter, spreadOf } from '../../src/front/fallback.ts';
import { FALLBACK_SLOTS, fallbackHeldOf } from '../../src/front/nft.ts';
import { pino } from 'pino';
import { ServiceRuntime } from '../../src/front/service.ts';

const silent = pino({ level: 'silent' });
const buildServices = (c: typeof cfg): ServiceRuntime[] => c.services.map((s, i) => new ServiceRuntime(i, s, c.overflow));

const cfg = parseConfig(
  frontConfigSchema,
  `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
      - { name: s1c, address: 198.18.201.13 }
`,
  'x',
);

function setup(): { writer: FallbackWriter; writes: string[]; finish: () => void; clock: { now: number } } {
  const writes: string[] = [];
  const clock = { now: 1000 };
  let pending: (() => void) | undefined;
  const writer = new FallbackWriter({
    log: silent,
    config: () => cfg,
    write: (script) => {
      writes.push(script);
      return new Promise<void>((r) => (pending = r));
    },
    minIntervalMs: 100,
    now: () => clock.now,
  });
  return {
    writer,
    writes,
    clock,
    finish: () => {
      const p = pending;
      pending = undefined;
      p?.();
    },
  };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * The map's contents after `scripts` ran in order (flush, delete element
 * by key, add element), as key -> element.
 */
function mapAfter(scripts: readonly string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (const script of scripts) {
    for (const line of script.split('\n')) {
      if (line.startsWith('flush map ')) map.clear();
      const m = /^(add|delete) element ip sluice fallback \{ (.*) \}$/.exec(line);
      if (!m) continue;
      for (const e of (m[2] ?? '').split(', ')) {
        const key = e.split(' : ')[0] ?? '';
        if (m[1] === 'delete') assert.ok(map.delete(key), `deleted ${key}, which the map does not hold`);
        else {
          assert.ok(!map.has(key), `added ${key}, which the map holds`);
          map.set(key, e);
        }
      }
    }
  }
  return map;
}

/** The servers a fallback script spreads over, with their slot counts. */
function targets(script: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of script.matchAll(/ : (\S+) \. 80/g)) out[m[1] ?? ''] = (out[m[1] ?? ''] ?? 0) + 1;
  return out;
}

describe('FallbackWriter', () => {
  it('writes only on a change of the usable servers, over the usable ones, evenly', async () => {
    const { writer, writes, finish } = setup();
    const services = buildServices(cfg);
    writer.installed(services);
    writer.update(services);
    assert.equal(writes.length, 0, 'nothing changed since the install');
    const b = services[0]?.servers[1];
    assert.ok(b);
    b.health.setSilent(true, 0);
    b.refreshUsable();
    writer.update(services);
    assert.equal(writes.length, 1);
    assert.deepEqual(targets(writes[0] ?? ''), { '198.18.201.11': FALLBACK_SLOTS / 2, '198.18.201.13': FALLBACK_SLOTS / 2 });
    assert.ok(writes[0]?.startsWith('flush map ip sluice fallback\n'));
    finish();
    await flush();
    assert.equal(writer.status().writes, 1);
    assert.equal(writer.state().elements, FALLBACK_SLOTS);
    assert.equal(writer.status().usableServers, 2);
  });

  it('coalesces a burst: one write in flight, then one with the latest state, not before the interval', async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const { writer, writes, finish, clock } = setup();
      const services = buildServices(cfg);
      writer.installed(services);
      const [a, b, c] = services[0]?.servers ?? [];
      assert.ok(a && b && c);
      const flip = (srv: typeof a, down: boolean): void => {
        srv.health.setSilent(down, 0);
        srv.refreshUsable();
        writer.update(services);
      };
      flip(a, true); // write 1 starts
      flip(b, true); // during write 1: pending
      flip(b, false);
      flip(c, true); // the latest: a and c down, only b usable
      assert.equal(writes.length, 1, 'one write at a time');
      assert.equal(writer.state().writing, true);
      clock.now += 10;
      finish();
      await flush();
      assert.equal(writes.length, 1, 'not within 100 ms of the last write');
      clock.now += 100;
      mock.timers.tick(100);
      await flush();
      assert.equal(writes.length, 2);
      // Only what changed since write 1: the slots of the server gone (a deletes and adds of those slots).
      assert.ok(!(writes[1] ?? '').startsWith('flush'), 'a diff against what write 1 wrote');
      assert.ok((writes[1] ?? '').length < (writes[0] ?? '').length);
      assert.deepEqual(targets([...mapAfter(writes.slice(0, 2)).values()].join(', ')), { '198.18.201.12': FALLBACK_SLOTS }, 'the latest state');
      finish();
      await flush();
      assert.equal(writer.state().writing, false);
      // No usable server: the map is emptied (the guard drops what the fallback cannot place).
      clock.now += 1000;
      flip(b, true);
      assert.equal(writes.length, 3);
      assert.equal(writes[2], 'flush map ip sluice fallback\n');
      finish();
      await flush();
      assert.equal(writer.state().elements, 0);
    } finally {
      mock.timers.reset();
    }
  });

  it('after an install: nothing written when the table holds the spread; the deferred fill of a whole install written in the background', async () => {
    const { writer, writes, finish } = setup();
    const services = buildServices(cfg);
    writer.installed(services);
    // A whole install that filled the map (small): the same spread, nothing to write.
    writer.afterInstall(true, fallbackHeldOf(cfg, spreadOf(services)));
    await flush();
    assert.equal(writes.length, 0, 'the map holds the spread');
    // A whole install that deferred the map (large): the writer fills it.
    writer.afterInstall(true, new Map());
    await flush();
    assert.equal(writes.length, 1);
    assert.ok(!(writes[0] ?? '').startsWith('flush'), 'adds into the empty map the install declared');
    assert.deepEqual(targets(writes[0] ?? ''), { '198.18.201.11': 86, '198.18.201.12': 85, '198.18.201.13': 85 });
    finish();
    await flush();
    // An element-only install (a reload) leaves the map as it is: nothing to write.
    writer.afterInstall(false, new Map());
    await flush();
    assert.equal(writes.length, 1);
  });

  it('a failed write is counted and retried after retryMs (doubling while it fails), flushed and refilled', async () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const services = buildServices(cfg);
      let fail = true;
      const writes: string[] = [];
      const clock = { now: 1000 };
      const writer = new FallbackWriter({
        log: silent,
        config: () => cfg,
        write: (s) => {
          writes.push(s);
          return fail ? Promise.reject(new Error('nft: killed after 10000 ms')) : Promise.resolve();
        },
        minIntervalMs: 0,
        retryMs: 1000,
        now: () => clock.now,
      });
      writer.installed(services);
      const a = services[0]?.servers[0];
      assert.ok(a);
      a.health.setSilent(true, 0);
      a.refreshUsable();
      writer.update(services);
      await flush();
      assert.equal(writer.status().writeFailures, 1);
      assert.equal(writer.status().pending, true, 'a retry is due');
      // Not before retryMs; then again, failing: the next wait doubles.
      clock.now += 999;
      mock.timers.tick(999);
      await flush();
      assert.equal(writes.length, 1);
      clock.now += 1;
      mock.timers.tick(1);
      await flush();
      assert.equal(writes.length, 2);
      assert.equal(writer.status().writeFailures, 2);
      fail = false;
      clock.now += 1999;
      mock.timers.tick(1999);
      await flush();
      assert.equal(writes.length, 2, 'the second retry waits 2000 ms');
      clock.now += 1;
      mock.timers.tick(1);
      await flush();
      assert.equal(writer.status().writes, 1);
      assert.equal(writes.length, 3);
      assert.ok(writes[2]?.startsWith('flush map ip sluice fallback\n'), 'after a failed write the map\'s contents are unknown: flushed and refilled');
      assert.equal(writer.status().pending, false);
    } finally {
      mock.timers.reset();
    }
  });

});
