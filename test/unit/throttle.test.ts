/**
 * Distributed throttling on real ZeroMQ sockets over loopback, CURVE on
 * every link: the wire protocol's checked decoders (table and fuzz), the
 * master with the memory store and gatekeepers (accounting -> DELAY_UNTIL,
 * resync of a new gatekeeper, resync after a master restart, refusal of an
 * unknown key), two gatekeepers holding one client to the global rate, and
 * sharding by domain over two masters behind the master proxy.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { adminRequest } from '../../src/admin/client.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { masterConfigSchema } from '../../src/throttle/config.ts';
import { ACCEPTED, DELAYED, Gatekeeper, REJECTED } from '../../src/throttle/gatekeeper.ts';
import { Master } from '../../src/throttle/master.ts';
import { decodeAccounting, decodeControl, encodeAccounting, encodeControl, newAccounting, newControl, topicOf, type DecodeReject } from '../../src/throttle/protocol.ts';
import { MasterDaemon } from '../../src/throttle/daemon.ts';
import { MasterProxy } from '../../src/throttle/proxy.ts';
import { prng } from '../helpers/packets.ts';
import { ends, freePort, gatekeeperConfig, keyDir, keys, masterConfig, proxyConfig, simulateClient, NO_WORDS } from '../helpers/throttle.ts';
import { until } from '../helpers/wait.ts';

const log = componentLogger('throttle-test');
const limits = { maxAgeMs: 30_000, maxFutureMs: 5000, maxDelayMs: 3_600_000 };
const B = (frames: string[]): Buffer[] => frames.map((f) => Buffer.from(f, 'latin1'));
const ADDR = parseIPv4Address('198.51.100.7')!;

const stops: (() => unknown)[] = [];
after(async () => {
  for (const s of stops.reverse()) await s();
});
async function startMaster(...args: Parameters<typeof masterConfig>): Promise<Master> {
  const m = await Master.start(masterConfig(...args), log);
  stops.push(() => m.stop());
  return m;
}
async function startGatekeeper(...args: Parameters<typeof gatekeeperConfig>): Promise<Gatekeeper> {
  const g = await Gatekeeper.start(gatekeeperConfig(...args), log);
  stops.push(() => {
    g.stop();
  });
  return g;
}

describe('throttling protocol', () => {
  const now = 1_800_000_000_000;

  it('round-trips every message kind', () => {
    const a = newAccounting();
    assert.equal(decodeAccounting(B(encodeAccounting('www', 'ACCEPTED', '198.51.100.7', now)), now, limits, a), undefined);
    assert.deepEqual({ ...a }, { domain: 'www', kind: 'ACCEPTED', identifier: '198.51.100.7', ts: now, delayedTo: NaN, debug: '' });
    assert.equal(decodeAccounting(B(encodeAccounting('www', 'DELAYED', '198.51.100.0/24', now + 0.5, now + 1000.25, 'ua=curl/8')), now, limits, a), undefined);
    assert.deepEqual({ ...a }, { domain: 'www', kind: 'DELAYED', identifier: '198.51.100.0/24', ts: now + 0.5, delayedTo: now + 1000.25, debug: 'ua=curl/8' });
    assert.equal(decodeAccounting(B(encodeAccounting('api', 'REJECTED', '198.51.100.7', now)), now, limits, a), undefined);
    assert.equal(a.kind, 'REJECTED');
    assert.equal(decodeAccounting(B(encodeAccounting('api', 'RESYNC', 'gk1.42.1', now)), now, limits, a), undefined);
    assert.equal(a.identifier, 'gk1.42.1');
    const c = newControl();
    assert.equal(decodeControl(B(encodeControl('www', 'DELAY_UNTIL', '198.51.100.7', now + 1000)), now, 86_400_000, c), undefined);
    assert.deepEqual({ ...c }, { domain: 'www', kind: 'DELAY_UNTIL', identifier: '198.51.100.7', value: now + 1000 });
    assert.equal(decodeControl(B(encodeControl('www', 'RESYNC_DONE', 'gk1.42.1', 17)), now, 86_400_000, c), undefined);
    assert.equal(c.value, 17);
    // The exact frames on the wire.
    assert.deepEqual(encodeAccounting('www', 'DELAYED', '198.51.100.7', 1000, 1500.5), ['www\0', 'DELAYED', '198.51.100.7', '1000', '1500.500']);
    assert.deepEqual(encodeControl('www', 'DELAY_UNTIL', '198.51.100.7', 2000), ['www\0', 'DELAY_UNTIL', '198.51.100.7', '2000']);
  });

  it('the topic terminator makes prefix filters exact', () => {
    assert.equal(topicOf('www2').startsWith(topicOf('www')), false);
  });

  it('refuses each malformed accounting message with its reason', () => {
    const t = String(now);
    const rows: [string[], DecodeReject][] = [
      [['www\0', 'ACCEPTED', '1.2.3.4'], 'frames'],
      [['www\0', 'ACCEPTED', '1.2.3.4', t, '', '', 'x'], 'frames'],
      [['www\0', 'ACCEPTED', 'x'.repeat(600), t], 'oversized'],
      [['www', 'ACCEPTED', '1.2.3.4', t], 'topic'],
      [['w w\0', 'ACCEPTED', '1.2.3.4', t], 'topic'],
      [['\0', 'ACCEPTED', '1.2.3.4', t], 'topic'],
      [['www\0', 'accepted', '1.2.3.4', t], 'kind'],
      [['www\0', 'ACCEPTED', '', t], 'identifier'],
      [['www\0', 'ACCEPTED', '1.2.3.4 x', t], 'identifier'],
      [['www\0', 'ACCEPTED', '1.2.3.4', '-5'], 'timestamp'],
      [['www\0', 'ACCEPTED', '1.2.3.4', '1e12'], 'timestamp'],
      [['www\0', 'ACCEPTED', '1.2.3.4', String(now - 60_000)], 'stale'],
      [['www\0', 'ACCEPTED', '1.2.3.4', String(now + 60_000)], 'future'],
      [['www\0', 'DELAYED', '1.2.3.4', t], 'delay'],
      [['www\0', 'DELAYED', '1.2.3.4', t, String(now - 1)], 'delay'],
      [['www\0', 'DELAYED', '1.2.3.4', t, String(now + 4_000_000)], 'delay'],
      [['www\0', 'ACCEPTED', '1.2.3.4', t, String(now + 1)], 'delay'],
      [['www\0', 'ACCEPTED', '1.2.3.4', t, '', 'tab\there'], 'debug'],
    ];
    for (const [frames, reason] of rows) assert.equal(decodeAccounting(B(frames), now, limits, newAccounting()), reason, JSON.stringify(frames));
    const c = newControl();
    assert.equal(decodeControl(B(['www\0', 'DELAY_UNTIL', '1.2.3.4']), now, 1000, c), 'frames');
    assert.equal(decodeControl(B(['www\0', 'DELAY', '1.2.3.4', t]), now, 1000, c), 'kind');
    assert.equal(decodeControl(B(['www\0', 'DELAY_UNTIL', '1.2.3.4', String(now + 5000)]), now, 1000, c), 'future');
  });

  it('fuzz: 100k random and mutated messages never throw, each is counted once', async () => {
    const e = ends();
    const m = await startMaster('fuzz-master', e, [{ name: 'www', requests: 10, burst: 5 }]);
    const g = await startGatekeeper('gk1', [e], [{ name: 'www' }]);
    const rnd = prng(8);
    const nowMs = Date.now();
    const valid = [
      encodeAccounting('www', 'ACCEPTED', '198.51.100.7', nowMs),
      encodeAccounting('www', 'DELAYED', '198.51.100.7', nowMs, nowMs + 100, 'dbg'),
      encodeControl('www', 'DELAY_UNTIL', '198.51.100.7', nowMs + 100),
    ];
    const n = 100_000;
    const receivedBefore = m.counters.received;
    for (let i = 0; i < n; i++) {
      let frames: Buffer[];
      if (i % 2 === 0) {
        frames = Array.from({ length: Math.floor(rnd() * 8) }, () => Buffer.from(Array.from({ length: Math.floor(rnd() * 24) }, () => Math.floor(rnd() * 256))));
      } else {
        frames = B(valid[i % valid.length]!).map((f) => Buffer.from(f));
        const f = frames[Math.floor(rnd() * frames.length)]!;
        if (f.length > 0) f[Math.floor(rnd() * f.length)] = Math.floor(rnd() * 256);
      }
      m.handle(frames);
      g.deliver(frames);
    }
    const mRejected = Object.values(m.counters.rejected).reduce((a, b) => a + b, 0);
    assert.equal(m.counters.received - receivedBefore + mRejected, n);
    const gRejected = Object.values(g.counters.controlRejected).reduce((a, b) => a + b, 0);
    assert.equal(g.counters.controlReceived + gRejected, n);
    assert.ok(mRejected > n / 2 && gRejected > n / 2);
  });

  it('the shipped example config is valid', () => {
    const c = parseConfig(masterConfigSchema, readFileSync(new URL('../../deploy/examples/master.yaml', import.meta.url), 'utf8'), 'master.yaml');
    assert.equal(c.store.kind, 'redis');
    assert.ok(c.domains.length >= 1);
  });
});

describe('master and gatekeepers over CURVE (memory store)', () => {
  it('publishes DELAY_UNTIL exactly when the next request is not allowed now; a new gatekeeper resyncs it; an unknown key is refused', async () => {
    const e = ends();
    const m = await startMaster('m-basic', e, [{ name: 'www', requests: 1, periodSeconds: 1, burst: 10 }, { name: 'api', requests: 100 }]);
    const g1 = await startGatekeeper('gk1', [e], [{ name: 'www' }, { name: 'api' }]);
    await until(() => g1.resynced, 'gk1 resynced with the master');
    const d = g1.domain('www')!;
    const key = g1.keyOf(d, ADDR, NO_WORDS, 0);
    const www = () => m.domains.get('www')!.counters;
    const t0 = Date.now();
    for (let i = 0; i < 9; i++) g1.account(ACCEPTED, d, key, NO_WORDS, 0, t0);
    await until(() => www().accepted === 9, 'master counted 9 accepted');
    assert.equal(www().published, 0, 'requests 1-9 of a burst of 10 leave the next one allowed');
    assert.equal(g1.delayFor(d, key, t0), 0);
    g1.account(ACCEPTED, d, key, NO_WORDS, 0, t0);
    await until(() => g1.delayFor(d, key, Date.now()) > 0, 'gk1 learned the delay');
    assert.equal(www().published, 1);
    const until1 = d.delays.get(key)!;
    assert.ok(until1 >= t0 + 1000, `the 11th waits a full interval: ${until1 - t0} ms`);
    // A delayed request pushes the delay one interval further.
    g1.account(DELAYED, d, key, NO_WORDS, 0, Date.now(), until1);
    await until(() => (d.delays.get(key) ?? 0) >= until1 + 1000, 'the delayed request moved the delay on');
    // REJECTED is counted, never charged.
    const before = d.delays.get(key);
    g1.account(REJECTED, d, key, NO_WORDS, 0, Date.now());
    await until(() => www().rejected === 1, 'master counted the rejection');
    assert.equal(www().published, 2);
    assert.equal(d.delays.get(key), before);

    // A gatekeeper that starts now learns the current delay by resync.
    const g2 = await startGatekeeper('gk2', [e], [{ name: 'www' }]);
    await until(() => g2.resynced, 'gk2 resynced');
    const d2 = g2.domain('www')!;
    assert.equal(d2.delays.get(key), d.delays.get(key));
    assert.ok(m.domains.get('www')!.counters.replayed >= 1);

    // A key not in the allowlist never gets a message through.
    const received = m.counters.received;
    const intruder = await startGatekeeper('intruder', [e], [{ name: 'www' }]);
    await until(() => m.status().zap.accounting.refused > 0, 'the intruder was refused at the handshake');
    assert.equal(intruder.resynced, false);
    assert.equal(m.counters.received, received);
  });

  it('plaintext mode (debugging only) works the same, handshake events included', async () => {
    const e = ends();
    const cfg = masterConfig('m-plain', e, [{ name: 'www', requests: 1, burst: 1 }]);
    const m = await Master.start({ ...cfg, control: { ...cfg.control, plaintext: true } }, log);
    stops.push(() => m.stop());
    const gc = gatekeeperConfig('gk1', [e], [{ name: 'www' }]);
    const g = await Gatekeeper.start({ ...gc, control: { ...gc.control, plaintext: true } }, log);
    stops.push(() => {
      g.stop();
    });
    await until(() => g.resynced, 'resynced in plaintext');
    const d = g.domain('www')!;
    g.account(ACCEPTED, d, g.keyOf(d, ADDR, NO_WORDS, 0), NO_WORDS, 0, Date.now());
    await until(() => g.delayFor(d, ADDR, Date.now()) > 0, 'delay learned in plaintext');
  });

  it('a restarted master is resynced by the gatekeepers that were connected', async () => {
    const e = ends();
    const rules = [{ name: 'www', requests: 1, burst: 1 }];
    const m1 = await startMaster('m-restart', e, rules);
    const g = await startGatekeeper('gk1', [e], [{ name: 'www' }]);
    await until(() => g.resynced, 'resynced with the first master');
    const sessions = g.counters.resyncSessions;
    await m1.stop();
    await until(() => !g.resynced, 'the gatekeeper noticed the master went away');
    const m2 = await startMaster('m-restart', e, rules);
    await until(() => g.resynced && g.counters.resyncSessions > sessions, 'resynced with the restarted master');
    assert.ok(m2.domains.get('www')!.counters.resyncs >= 1);
  });

  it('two gatekeepers (two front nodes) hold one client to the domain global rate (±10%)', async () => {
    const e = ends();
    const rate = 40;
    await startMaster('m-rate', e, [{ name: 'www', requests: rate, periodSeconds: 1, burst: 4 }]);
    const g1 = await startGatekeeper('gk1', [e], [{ name: 'www', maxDelaySeconds: 2 }]);
    const g2 = await startGatekeeper('gk2', [e], [{ name: 'www', maxDelaySeconds: 2 }]);
    await until(() => g1.resynced && g2.resynced, 'both resynced');
    const seconds = 4;
    // 160 connections/s, 80/s through each front node: each alone is twice the global rate.
    const { served, offered } = await simulateClient([{ gk: g1, d: g1.domain('www')! }, { gk: g2, d: g2.domain('www')! }], ADDR, rate * 4, seconds);
    const t0 = Math.min(...served.map((s) => s.at));
    // Skip the first second (the burst) and count what was served over the next three.
    const window = served.filter((s) => s.at >= t0 + 1000 && s.at < t0 + 1000 + (seconds - 1) * 1000);
    const got = window.length / (seconds - 1);
    console.log(`# rate: ${got} per node ${[0, 1].map((w) => window.filter((s) => s.gatekeeper === w).length / (seconds - 1)).join(" ")}`);
    assert.ok(Math.abs(got - rate) <= rate * 0.1, `served ${got.toFixed(1)}/s over the two front nodes, domain rate ${rate}/s`);
    for (const which of [0, 1]) {
      const perNode = window.filter((s) => s.gatekeeper === which).length / (seconds - 1);
      assert.ok(offered[which]! / seconds > rate * 1.5, 'each front node alone is offered more than the global rate');
      assert.ok(perNode < rate, `front node ${which + 1} served ${perNode.toFixed(1)}/s`);
    }
  });
});

describe('sharding by domain behind the master proxy', () => {
  it('each master receives only its domains; the gatekeeper hears both masters through the proxy', async () => {
    const acc = { frontend: `tcp://127.0.0.1:${freePort()}`, backend: `tcp://127.0.0.1:${freePort()}` };
    const pub = { frontend: `tcp://127.0.0.1:${freePort()}`, backend: `tcp://127.0.0.1:${freePort()}` };
    const proxy = await MasterProxy.start(proxyConfig(acc, pub), log);
    stops.push(() => {
      proxy.stop();
    });
    const viaProxy = { accounting: { connect: acc.backend, publicKey: keys.proxy.pubFile }, publish: { connect: pub.frontend, publicKey: keys.proxy.pubFile } };
    const ma = await startMaster('m-a', ends(), [{ name: 'alpha', requests: 1, burst: 1 }], { kind: 'memory' }, viaProxy);
    const mb = await startMaster('m-b', ends(), [{ name: 'beta', requests: 1, burst: 1 }], { kind: 'memory' }, viaProxy);
    const g = await startGatekeeper('gk1', [{ accounting: acc.frontend, control: pub.backend, publicKey: keys.proxy.pubFile }], [{ name: 'alpha' }, { name: 'beta' }]);
    await until(() => g.resynced, 'both domains resynced through the proxy');
    const a = g.domain('alpha')!;
    const b = g.domain('beta')!;
    const now = Date.now();
    for (let i = 0; i < 3; i++) g.account(ACCEPTED, a, g.keyOf(a, ADDR, NO_WORDS, 0), NO_WORDS, 0, now);
    for (let i = 0; i < 5; i++) g.account(ACCEPTED, b, g.keyOf(b, ADDR, NO_WORDS, 0), NO_WORDS, 0, now);
    await until(() => g.delayFor(a, ADDR, Date.now()) > 0 && g.delayFor(b, ADDR, Date.now()) > 0, 'delays of both domains came back');
    await until(() => ma.domains.get('alpha')!.counters.accepted === 3 && mb.domains.get('beta')!.counters.accepted === 5, 'each master charged its domain');
    // The other domain's traffic never reached a master: filtered by subscription, not dropped on arrival.
    assert.equal(ma.counters.unknownDomain, 0);
    assert.equal(mb.counters.unknownDomain, 0);
    assert.equal(ma.counters.received, ma.domains.get('alpha')!.counters.accepted + ma.domains.get('alpha')!.counters.resyncs);
    assert.equal(mb.counters.received, mb.domains.get('beta')!.counters.accepted + mb.domains.get('beta')!.counters.resyncs);
  });
});

describe('sluice master daemon', () => {
  it('serves status and reload on its admin socket; a reload adds a domain, a refused config keeps the running one', async () => {
    const e = ends();
    const file = join(keyDir, 'daemon.yaml');
    const base = masterConfig('m-daemon', e, [{ name: 'www', requests: 5 }]);
    writeFileSync(file, JSON.stringify(base));
    const daemon = new MasterDaemon(file);
    await daemon.start();
    stops.push(() => daemon.stop());
    const status = await adminRequest(base.adminSocket, { cmd: 'status' });
    assert.equal(status.ok, true);
    assert.deepEqual((status.status as { domains: { name: string }[] }).domains.map((d) => d.name), ['www']);
    writeFileSync(file, JSON.stringify({ ...base, domains: [...base.domains, { name: 'api', requests: 2, periodSeconds: 60, burst: 3 }] }));
    assert.equal((await adminRequest(base.adminSocket, { cmd: 'reload' })).ok, true);
    const g = await startGatekeeper('gk1', [e], [{ name: 'api' }]);
    await until(() => g.resynced, 'the added domain answers resync');
    writeFileSync(file, JSON.stringify({ ...base, domains: [{ name: 'www', requests: 0 }] }));
    const refused = await adminRequest(base.adminSocket, { cmd: 'reload' });
    assert.equal(refused.ok, false);
    const after = await adminRequest(base.adminSocket, { cmd: 'status' });
    const s = after.status as { domains: { name: string; burst: number }[]; reloads: number; reloadsRefused: number };
    assert.deepEqual(s.domains.map((d) => [d.name, d.burst]), [['www', 1], ['api', 3]]);
    assert.equal(s.reloads, 1);
    assert.equal(s.reloadsRefused, 1);
    assert.equal((await adminRequest(base.adminSocket, { cmd: 'nope' })).ok, false);
  });

  it('a bad config names the key and the fix', () => {
    assert.throws(
      () => parseConfig(masterConfigSchema, 'name: m\ncontrol: { plaintext: true }\naccounting: { connect: tcp://127.0.0.1:1 }\npublish: { listen: tcp://127.0.0.1:2, connect: tcp://127.0.0.1:3 }\ndomains: [{ name: "w w", requests: 1 }]\n', 'bad.yaml'),
      (err: Error & { problems?: { path: string; message: string }[] }) => {
        const paths = (err.problems ?? []).map((p) => p.path);
        assert.ok(paths.includes('publish'), paths.join(','));
        assert.ok(paths.includes('domains[0].name'), paths.join(','));
        return true;
      },
    );
  });
});
