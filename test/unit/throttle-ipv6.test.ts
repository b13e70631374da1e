/**
 * Distributed throttling of IPv6 clients (issue 23): protocol vectors of
 * both identifier formats (the IPv4 one decoded exactly as before), the
 * gatekeeper's IPv6 keys (per-domain prefixLength6, IPv4-mapped as IPv4)
 * and identifiers, a master and a gatekeeper over loopback CURVE (memory
 * store) throttling an IPv6 /64 apart from an IPv4 client, and the gatekeeper
 * checkpoint holding a real IPv6 SYN (no longer `untracked`).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { parseConfig } from '../../src/config/load.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { clientNumber6 } from '../../src/front/client6.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable } from '../../src/front/connections.ts';
import { FrontEngine, HELD } from '../../src/front/engine.ts';
import { REJECT_MARK, serverMark } from '../../src/front/marks.ts';
import { OVERFLOW_BASE, ServiceRuntime } from '../../src/front/service.ts';
import { gatekeeperConfigOf } from '../../src/front/throttle.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { parseIPv6Address } from '../../src/packet/address6.ts';
import { TcpFlag } from '../../src/packet/ipv4.ts';
import { Shaper } from '../../src/shaping/shaper.ts';
import { ACCEPTED, Gatekeeper } from '../../src/throttle/gatekeeper.ts';
import { Master } from '../../src/throttle/master.ts';
import { decodeAccounting, decodeControl, encodeAccounting, encodeControl, isCanonicalIdentifier6, newAccounting, newControl } from '../../src/throttle/protocol.ts';
import { MemoryStore } from '../../src/throttle/store_memory.ts';
import { tcp6 } from '../helpers/packets6.ts';
import { ends, gatekeeperConfig, masterConfig, NO_WORDS } from '../helpers/throttle.ts';
import { until } from '../helpers/wait.ts';

const log = componentLogger('throttle-ipv6-test');
const limits = { maxAgeMs: 30_000, maxFutureMs: 5000, maxDelayMs: 3_600_000 };
const B = (frames: string[]): Buffer[] => frames.map((f) => Buffer.from(f, 'latin1'));
const w6 = (t: string): Uint32Array => parseIPv6Address(t)!;
const stops: (() => unknown)[] = [];
after(async () => {
  for (const s of stops.reverse()) await s();
});

describe('throttling protocol, identifiers of both families', () => {
  const now = 1_800_000_000_000;

  it('vectors: the exact frames of IPv4 (unchanged) and IPv6 identifiers, round-tripped', () => {
    const vectors: [string, string[]][] = [
      ['198.51.100.7', ['www\0', 'ACCEPTED', '198.51.100.7', String(now)]],
      ['198.51.100.0/24', ['www\0', 'ACCEPTED', '198.51.100.0/24', String(now)]],
      ['2001:db8:1:2::/64', ['www\0', 'ACCEPTED', '2001:db8:1:2::/64', String(now)]],
      ['2001:db8::/48', ['www\0', 'ACCEPTED', '2001:db8::/48', String(now)]],
      ['2001:db8::c', ['www\0', 'ACCEPTED', '2001:db8::c', String(now)]],
    ];
    for (const [id, frames] of vectors) {
      assert.deepEqual(encodeAccounting('www', 'ACCEPTED', id, now), frames);
      const a = newAccounting();
      assert.equal(decodeAccounting(B(frames), now, limits, a), undefined, id);
      assert.equal(a.identifier, id);
      const c = newControl();
      assert.deepEqual(encodeControl('www', 'DELAY_UNTIL', id, now + 500), ['www\0', 'DELAY_UNTIL', id, String(now + 500)]);
      assert.equal(decodeControl(B(encodeControl('www', 'DELAY_UNTIL', id, now + 500)), now, 86_400_000, c), undefined, id);
      assert.equal(c.identifier, id);
    }
  });

  it('an identifier with ":" is taken only in canonical RFC 5952 form; IPv4-format identifiers are opaque as before', () => {
    const rows: [string, boolean][] = [
      ['2001:db8:1:2::/64', true],
      ['2001:db8::c', true],
      ['::/1', true],
      ['2001:db8:0:0:1::/80', true],
      ['2001:DB8:1:2::/64', false], // upper case
      ['2001:0db8:1:2::/64', false], // leading zero
      ['2001:db8:1:2:0:0:0:0/64', false], // zeros not compressed
      ['2001:db8:0:0:1::/80', true],
      ['2001:db8::1:0:0:1/128', false], // length 128 is written bare
      ['2001:db8:1:2::1/64', false], // host bits set
      ['2001:db8:1:2::/064', false],
      ['2001:db8:1:2::/0', false],
      ['::ffff:198.51.100.7', false], // an IPv4 client is sent as IPv4
      ['fe80::1%eth0', false],
      ['2001:db8::/64/64', false],
    ];
    for (const [id, ok] of rows) {
      assert.equal(isCanonicalIdentifier6(id), ok, id);
      assert.equal(decodeAccounting(B(['www\0', 'ACCEPTED', id, String(now)]), now, limits, newAccounting()), ok ? undefined : 'identifier', id);
      assert.equal(decodeControl(B(['www\0', 'DELAY_UNTIL', id, String(now + 1)]), now, 86_400_000, newControl()), ok ? undefined : 'identifier', id);
    }
    // The old format's decoding is unchanged: any printable identifier without ':' (session ids, IPv4).
    for (const id of ['gk1.42.1', '198.51.100.7', '198.51.100.0/24', 'anything-else']) assert.equal(decodeAccounting(B(['www\0', 'RESYNC', id, String(now)]), now, limits, newAccounting()), undefined, id);
  });
});

describe('gatekeeper IPv6 keys', () => {
  async function gatekeeper(domains: unknown[]): Promise<Gatekeeper> {
    // Masters not reachable (a closed port): keys and delays only.
    const g = await Gatekeeper.start(gatekeeperConfig('gk1', [{ accounting: 'tcp://127.0.0.1:9', control: 'tcp://127.0.0.1:9' }], domains), log);
    stops.push(() => {
      g.stop();
    });
    return g;
  }

  it('keys by the domain\'s prefixLength6 (default /64), apart from IPv4 keys; IPv4-mapped is the IPv4 client', async () => {
    const g = await gatekeeper([{ name: 'www' }, { name: 'p56', prefixLength: 24, prefixLength6: 56 }, { name: 'one', prefixLength6: 128 }]);
    const [www, p56, one] = [g.domain('www')!, g.domain('p56')!, g.domain('one')!];
    assert.equal(www.prefixLength6, 64);
    const key = (d: typeof www, t: string): number => {
      if (!t.includes(':')) return g.keyOf(d, parseIPv4Address(t)!, NO_WORDS, 0);
      const w = w6(t);
      return g.keyOf(d, clientNumber6(w), w, 0);
    };
    const rows: [typeof www, string, string, boolean][] = [
      [www, '2001:db8:1:2::1', '2001:db8:1:2:ffff::9', true],
      [www, '2001:db8:1:2::1', '2001:db8:1:3::1', false],
      [p56, '2001:db8:1:2::1', '2001:db8:1:ff::1', true],
      [p56, '2001:db8:1:2::1', '2001:db8:1:100::1', false],
      [one, '2001:db8::1', '2001:db8::1', true],
      [one, '2001:db8::1', '2001:db8::2', false],
      [www, '::ffff:198.51.100.7', '198.51.100.7', true],
      [p56, '::ffff:198.51.100.7', '198.51.100.9', true],
    ];
    for (const [d, a, b, same] of rows) assert.equal(key(d, a) === key(d, b), same, `${d.name}: ${a} vs ${b}`);
    const k = key(www, '2001:db8:1:2::1');
    assert.ok(k >= 2 ** 32 && Number.isSafeInteger(k), String(k));
    assert.equal(key(www, '198.51.100.7'), parseIPv4Address('198.51.100.7'));
    assert.equal(key(p56, '198.51.100.7'), parseIPv4Address('198.51.100.0'));
    // Identifiers: the masked address's RFC 5952 text.
    const w = w6('2001:db8:1:2:3:4:5:6');
    const words = new Uint32Array(4);
    for (let i = 0; i < 4; i++) words[i] = (w[i] ?? 0) & www.mask6[i]!;
    assert.equal(g.identifier(www, k, words, 0), '2001:db8:1:2::/64');
    assert.equal(g.identifier(one, key(one, '2001:db8::1'), w6('2001:db8::1'), 0), '2001:db8::1');
    assert.equal(g.identifier(p56, key(p56, '198.51.100.7')), '198.51.100.0/24');
  });

  it('a DELAY_UNTIL for an IPv6 prefix delays every address of it, and only it; a wrong length is a bad identifier', async () => {
    const g = await gatekeeper([{ name: 'www' }, { name: 'p48', prefixLength6: 48 }]);
    const d = g.domain('www')!;
    const now = Date.now();
    g.deliver(B(encodeControl('www', 'DELAY_UNTIL', '2001:db8:1:2::/64', now + 60_000)));
    const at = (t: string) => {
      const w = w6(t);
      return g.delayFor(d, g.keyOf(d, clientNumber6(w), w, 0), Date.now());
    };
    assert.ok(at('2001:db8:1:2::1') > 50_000);
    assert.ok(at('2001:db8:1:2:abcd::7') > 50_000);
    assert.equal(at('2001:db8:1:3::1'), 0);
    const bad = g.counters.badIdentifier;
    g.deliver(B(encodeControl('www', 'DELAY_UNTIL', '2001:db8:1::/48', now + 60_000))); // www keys /64
    g.deliver(B(encodeControl('p48', 'DELAY_UNTIL', '2001:db8:1:2::/64', now + 60_000))); // p48 keys /48
    g.deliver(B(encodeControl('www', 'DELAY_UNTIL', '2001:db8:1:2::1', now + 60_000))); // a /128 in a /64 domain
    assert.equal(g.counters.badIdentifier, bad + 3);
    g.deliver(B(encodeControl('p48', 'DELAY_UNTIL', '2001:db8:1::/48', now + 60_000)));
    assert.equal(g.domain('p48')!.delays.size, 1);
    assert.equal(g.counters.badIdentifier, bad + 3);
  });
});

describe('master and gatekeeper over CURVE, an IPv6 client (memory store)', () => {
  it('charges the /64 under its RFC 5952 identifier, apart from an IPv4 client; the delay comes back for the whole /64', async () => {
    const e = ends();
    const store = new MemoryStore(1000);
    const m = await Master.start(masterConfig('m-v6', e, [{ name: 'www', requests: 1, periodSeconds: 1, burst: 3 }]), log, { store });
    stops.push(() => m.stop());
    const g = await Gatekeeper.start(gatekeeperConfig('gk1', [e], [{ name: 'www' }]), log);
    stops.push(() => {
      g.stop();
    });
    await until(() => g.resynced, 'gatekeeper resynced');
    const d = g.domain('www')!;
    const a = w6('2001:db8:5:6::1');
    const ka = g.keyOf(d, clientNumber6(a), a, 0);
    const now = Date.now();
    // Four requests from two addresses of one /64: over the burst of 3, the next waits.
    for (const t of ['2001:db8:5:6::1', '2001:db8:5:6::2', '2001:db8:5:6::1', '2001:db8:5:6:ffff::9']) {
      const w = w6(t);
      assert.equal(g.keyOf(d, clientNumber6(w), w, 0), ka);
      g.account(ACCEPTED, d, ka, w, 0, now);
    }
    const v4 = parseIPv4Address('198.51.100.7')!;
    g.account(ACCEPTED, d, g.keyOf(d, v4, NO_WORDS, 0), NO_WORDS, 0, now);
    await until(() => m.domains.get('www')!.counters.accepted === 5, 'master counted 5');
    const ids: string[] = [];
    await store.scan('www', 0, (id) => ids.push(id));
    assert.deepEqual(ids.sort(), ['198.51.100.7', '2001:db8:5:6::/64']);
    await until(() => g.delayFor(d, ka, Date.now()) > 0, 'the /64 learned its delay');
    assert.equal(g.delayFor(d, g.keyOf(d, v4, NO_WORDS, 0), Date.now()), 0, 'the IPv4 client (1 request) is not delayed');
    const other = w6('2001:db8:5:7::1');
    assert.equal(g.delayFor(d, g.keyOf(d, clientNumber6(other), other, 0), Date.now()), 0, 'another /64 is not delayed');
    // A gatekeeper that starts now learns the IPv6 delay by resync (the identifier parsed back to the same key).
    const g2 = await Gatekeeper.start(gatekeeperConfig('gk2', [e], [{ name: 'www' }]), log);
    stops.push(() => {
      g2.stop();
    });
    await until(() => g2.resynced, 'gk2 resynced');
    const d2 = g2.domain('www')!;
    assert.equal(d2.delays.get(g2.keyOf(d2, clientNumber6(a), a, 0)), d.delays.get(ka));
  });
});

describe('gatekeeper checkpoint, a real IPv6 SYN', () => {
  it('is held until the masters\' time for its /64 and rejected past maxDelayMs, not passed untracked', async () => {
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
      - { name: s0, address: 198.18.201.11 }
    checkpoints:
      - { name: gk, kind: gatekeeper, queue: { maxLength: 4, maxDelayMs: 2000 } }
throttle:
  name: fr1
  control: { plaintext: true }
  masters: [{ accounting: tcp://127.0.0.1:9, control: tcp://127.0.0.1:9 }]
`,
      't',
    );
    const VIP6 = '2001:2:0:1::1';
    const v6svc = { ...cfg.services[0]!, vip: VIP6, servers: cfg.services[0]!.servers.map((s) => ({ ...s, address: '2001:2:0:2::b' })) };
    const armed = new Map<number, number>();
    const shaper = new Shaper({ cluster: [], services: [v6svc], overflow: [] }, { maxHeld: 16, connections: 100, overflowBase: OVERFLOW_BASE, scheduler: (i) => ({ arm: (at) => armed.set(i, at) }) });
    const gcfg = gatekeeperConfigOf(cfg, shaper)!;
    assert.deepEqual(gcfg.domains, [{ name: 'www', prefixLength: 32, prefixLength6: 64, maxDelaySeconds: 2 }]);
    const gk = await Gatekeeper.start(gcfg, pino({ level: 'silent' }));
    stops.push(() => {
      gk.stop();
    });
    shaper.attachGatekeeper(gk);
    const e = new FrontEngine([new ServiceRuntime(0, v6svc, cfg.overflow)], new ConnectionTable(100, 1000, { released: () => undefined }), shaper);
    const settled: number[] = [];
    e.onSettled = (id) => settled.push(id);
    const syn = (src: string, port: number) => tcp6({ src, dst: VIP6 }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });
    const d = gk.domain('www')!;
    const cp = shaper.all[0]!;
    // What a DELAY_UNTIL for 2001:2:0:9::/64 does.
    const now = Date.now();
    gk.deliver(B(encodeControl('www', 'DELAY_UNTIL', '2001:2:0:9::/64', now + 500)));
    let p = syn('2001:2:0:9::1', 1);
    assert.equal(e.decide(p, 0, p.length, 0, 1), HELD);
    p = syn('2001:2:0:a::1', 2);
    assert.equal(e.decide(p, 0, p.length, 0, 2), Verdict.Accept, 'another /64 passes');
    assert.equal(e.mark, serverMark(0, 0));
    gk.deliver(B(encodeControl('www', 'DELAY_UNTIL', '2001:2:0:b::/64', now + 60_000)));
    p = syn('2001:2:0:b::5', 3);
    assert.equal(e.decide(p, 0, p.length, 0, 3), Verdict.Accept);
    assert.equal(e.mark, REJECT_MARK, 'past maxDelayMs: rejected');
    assert.deepEqual({ ...cp.counts, matched: 0 }, { matched: 0, passed: 1, held: 1, rejected: 1, steered: 0, untracked: 0 });
    assert.deepEqual([d.counters.accepted, d.counters.delayed, d.counters.rejected], [1, 1, 1]);
    cp.fire(armed.get(0)!);
    assert.deepEqual(settled, [1]);
  });
});
