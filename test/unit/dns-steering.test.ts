/**
 * The steering pipeline and its parts with an injected clock (chance
 * draws are a hash of name, prefix and cluster): cluster state (reports, staleness, full), the rtt and capacity
 * policies (table-driven costs), high-rate clients, stickiness, fallback,
 * probe requests (rate limit, retry, bound), RTT expiry and bounds,
 * client prefixes (source and ECS).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { prefixOfAddress, prefixOfEcs, ipv6Groups } from '../../src/dns/client_prefix.ts';
import { ClusterTable } from '../../src/dns/cluster_state.ts';
import { dnsConfigSchema, type DnsConfig } from '../../src/dns/config.ts';
import { HighRateTable } from '../../src/dns/high_rate.ts';
import type { Body } from '../../src/control/messages.ts';
import { weightedOrder } from '../../src/dns/policy/capacity.ts';
import { prefixDraw } from '../../src/dns/policy/draw.ts';
import type { Candidate } from '../../src/dns/policy/policy.ts';
import { rttPolicy } from '../../src/dns/policy/rtt.ts';
import { ProbeScheduler } from '../../src/dns/probe_scheduler.ts';
import { RttTable } from '../../src/dns/rtt_table.ts';
import { Steering, type SteeringParts } from '../../src/dns/steer.ts';
import { StickyTable } from '../../src/dns/sticky.ts';
import { readFileSync } from 'node:fs';
import { parseConfig, validateConfig } from '../../src/config/load.ts';
import { Zone } from '../../src/dns/zone/zone.ts';

const L = { ipv4: 24, ipv6: 56 };

function config(over: Record<string, unknown> = {}, name: Record<string, unknown> = {}): DnsConfig {
  return validateConfig(
    dnsConfigSchema,
    {
      name: 'dns1',
      listen: ['198.18.2.2:53'],
      zones: [{ file: '/dev/null' }],
      clusters: [
        { name: 'c1', vips: ['198.19.1.1'] },
        { name: 'c2', vips: ['198.19.2.1'] },
        { name: 'c3', vips: ['198.19.3.1'] },
      ],
      steering: { names: [{ name: 'www.example.test', ...name }], reportSeconds: 1, downAfterIntervals: 2 },
      ...over,
    },
    'test',
  );
}

function load(cluster: string, capacity: number, load_: number, serversUp = 3): { cluster: string; vips: string[]; capacity: number; load: number; available: number; serversUp: number; serversTotal: number } {
  return { cluster, vips: [], capacity, load: load_, available: Math.max(0, capacity - load_), serversUp, serversTotal: 3 };
}

function setup(cfg: DnsConfig, memoMs = 0): { s: Steering; parts: SteeringParts; clusters: ClusterTable; rtt: RttTable; hr: HighRateTable; probes: ProbeScheduler } {
  const clusters = new ClusterTable(cfg.clusters, cfg.steering.reportSeconds, cfg.steering.downAfterIntervals);
  const rtt = new RttTable(cfg.clusters.length, 1000, cfg.steering.rttExpireSeconds);
  const hr = new HighRateTable(1000, cfg.steering.highRateExpireSeconds, L);
  const probes = new ProbeScheduler(cfg.probe, 0);
  const parts: SteeringParts = { clusters, rtt, highRate: hr, sticky: new StickyTable(1000, cfg.steering.stickySeconds), probes, log: pino({ level: 'silent' }) };
  return { s: new Steering(cfg, parts, memoMs), parts, clusters, rtt, hr, probes };
}

const client = (a: string) => {
  const p = prefixOfAddress(a, L);
  assert.ok(p);
  return p;
};

describe('client prefixes', () => {
  const rows: [string, string | undefined, string | undefined][] = [
    ['198.18.11.2', '4:198.18.11.0/24', '198.18.11.2'],
    ['198.18.11.250', '4:198.18.11.0/24', '198.18.11.250'],
    ['::ffff:198.18.12.7', '4:198.18.12.0/24', '198.18.12.7'],
    // IPv6 sources are probed at their own address, in RFC 5952 text (what the front node reports under).
    ['2001:2::1', '6:2001:2::/56', '2001:2::1'],
    ['2001:2:0:1FF:0:0:0:1', '6:2001:2:0:100::/56', '2001:2:0:1ff::1'],
    ['fe80::7%eth0', '6:fe80::/56', 'fe80::7'],
    ['2001:2::1::2', undefined, undefined],
    ['198.18.11', undefined, undefined],
    ['not an address', undefined, undefined],
  ];
  for (const [addr, key, probe] of rows) {
    it(`${addr} -> ${String(key)}`, () => {
      const p = prefixOfAddress(addr, L);
      assert.equal(p?.key, key);
      assert.equal(p?.probeTarget, probe);
    });
  }
  it('IPv6 keys are one RFC 5952 text per prefix (what status shows), from any spelling of the address', () => {
    // The testbed's IPv6-only client at /64: status once showed "2001:2:0:12:0:0:0:0/64".
    const L64 = { ipv4: 24, ipv6: 64 };
    for (const a of ['2001:2:0:12::2', '2001:0002:0000:0012:0000:0000:0000:0002', '2001:2:0:12:0:0:0:ffff']) assert.equal(prefixOfAddress(a, L64)?.key, '6:2001:2:0:12::/64', a);
    assert.equal(prefixOfAddress('2001:2:3:4:5:6:7:8', { ipv4: 24, ipv6: 128 })?.key, '6:2001:2:3:4:5:6:7:8/128');
    assert.equal(prefixOfAddress('2001:2:3:4:5:6:7:8', { ipv4: 24, ipv6: 16 })?.key, '6:2001::/16');
    assert.equal(prefixOfEcs(2, 64, Uint8Array.of(0x20, 0x01, 0, 2, 0, 0, 0, 0x12), L64).key, '6:2001:2:0:12::/64');
    // The same key from the source address and from ECS: one decision, one RTT entry.
    assert.equal(prefixOfEcs(2, 64, Uint8Array.of(0x20, 0x01, 0, 2, 0, 0, 0, 0x12), L64).key, prefixOfAddress('2001:2:0:12::2', L64)?.key);
  });
  it('ECS prefixes: the shorter of theirs and ours; a probe target inside', () => {
    assert.deepEqual(prefixOfEcs(1, 24, Uint8Array.of(198, 18, 11), L), { key: '4:198.18.11.0/24', family: 4, length: 24, probeTarget: '198.18.11.1' });
    assert.equal(prefixOfEcs(1, 32, Uint8Array.of(198, 18, 11, 9), L).key, '4:198.18.11.0/24');
    assert.equal(prefixOfEcs(1, 20, Uint8Array.of(198, 18, 16), L).key, '4:198.18.16.0/20');
    assert.deepEqual(prefixOfEcs(2, 48, Uint8Array.of(0x20, 0x01, 0, 2, 0, 0), L), { key: '6:2001:2::/48', family: 6, length: 48, probeTarget: '2001:2::1' });
    assert.equal(prefixOfEcs(2, 64, Uint8Array.of(0x20, 0x01, 0, 2, 0, 0x12, 0x34, 0x56, 0xff), L).probeTarget, '2001:2:12:3400::1'); // 2001:2:12:3456:ff00::/64 cut at our /56
    assert.equal(prefixOfEcs(2, 128, Uint8Array.from([0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]), { ipv4: 24, ipv6: 128 }).probeTarget, '2001:2::9');
  });
  it('IPv6 expansion', () => {
    assert.deepEqual(ipv6Groups('::1'), [0, 0, 0, 0, 0, 0, 0, 1]);
    assert.deepEqual(ipv6Groups('2001:db8::'), [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]);
    assert.deepEqual(ipv6Groups('::ffff:1.2.3.4'), [0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
  });
});

describe('cluster state', () => {
  const cfg = config();
  it('unknown before any report, up after one, down after downAfterIntervals × reportSeconds of silence, full at 0 available', () => {
    const t = new ClusterTable(cfg.clusters, 1, 2);
    const c1 = t.byName('c1');
    assert.ok(c1);
    assert.equal(t.state(c1, 0), 'unknown');
    assert.equal(t.isUsable(c1, 0), false);
    assert.ok(t.receive(load('c1', 100, 40), 1000));
    const rows: [number, string][] = [
      [1000, 'up'],
      [2999, 'up'],
      [3000, 'up'],
      [3001, 'down'],
    ];
    for (const [now, state] of rows) assert.equal(t.state(c1, now), state, `at ${now}`);
    t.receive(load('c1', 100, 100), 4000);
    assert.equal(t.state(c1, 4000), 'full');
    t.receive(load('c1', 100, 10, 0), 5000);
    assert.equal(t.state(c1, 5000), 'down', 'no servers up');
  });
  it('reports for clusters not configured are counted and ignored', () => {
    const t = new ClusterTable(cfg.clusters, 1, 2);
    assert.equal(t.receive(load('c9', 100, 0), 0), false);
    assert.equal(t.unknownReports, 1);
  });
});

describe('rtt policy: cost = rtt × (1 + w × (1 − free))', () => {
  const cand = (index: number, free: number): Candidate => ({ index, name: `c${index + 1}`, free, available: free * 100 });
  // [w, [rtt1, free1], [rtt2, free2], winner]
  const rows: [number, [number, number], [number, number], string][] = [
    [1, [20, 0.5], [80, 1], 'c1'], // 30 vs 80
    [1, [20, 0.05], [80, 1], 'c1'], // 39 vs 80
    [5, [20, 0.05], [80, 1], 'c2'], // 115 vs 80
    [0, [20, 0.01], [21, 1], 'c1'], // pure RTT
    [1, [40, 0.1], [50, 1], 'c2'], // 76 vs 50
    [1, [Infinity, 1], [300, 0.2], 'c2'], // no reply ranks last
    [1, [NaN, 1], [300, 0.2], 'c2'], // unmeasured after measured
  ];
  for (const [w, [r1, f1], [r2, f2], winner] of rows) {
    it(`w=${w}: c1 ${r1} ms free ${f1}, c2 ${r2} ms free ${f2} -> ${winner}`, () => {
      const rank = rttPolicy(w).rank({ candidates: [cand(0, f1), cand(1, f2)], rtt: Float64Array.of(r1, r2), measured: [r1, r2].filter((x) => !Number.isNaN(x)).length, draw: () => 0.5 });
      assert.equal(rank.order[0]?.name, winner);
    });
  }
  it('no measurement at all: capacity-weighted, said so', () => {
    const rank = rttPolicy(1).rank({ candidates: [cand(0, 0.25), cand(1, 0.75)], rtt: Float64Array.of(NaN, NaN), measured: 0, draw: () => 0.3 });
    assert.equal(rank.reason, 'no-rtt:capacity-weighted');
    assert.equal(rank.order[0]?.name, 'c2'); // one draw for both: the key −ln(u)/available is smallest for the larger
  });
});

describe('capacity-weighted order', () => {
  const cs: Candidate[] = [
    { index: 0, name: 'c1', free: 1, available: 100 },
    { index: 1, name: 'c2', free: 1, available: 300 },
  ];
  const prefixes = Array.from({ length: 4000 }, (_, i) => `4:10.${i >> 8}.${i & 255}.0/24`);
  const firstOf = (list: readonly Candidate[], p: string): string => weightedOrder(list, (c) => prefixDraw('www.example.test', p, c.name))[0]?.name ?? '';
  it('draws in proportion to free capacity over many prefixes (hash of name, prefix, cluster)', () => {
    const c2 = prefixes.filter((p) => firstOf(cs, p) === 'c2').length / prefixes.length;
    assert.ok(c2 > 0.72 && c2 < 0.78, `c2 first for ${c2} of the prefixes, expected about 0.75`);
  });
  it('exact over a uniform grid of draws (one u for both: c2 first; u for c1 alone decides)', () => {
    // P(c1 first) = P(−ln u1 / 100 < −ln u2 / 300): with u2 fixed at e^-1, c1 wins when u1 > e^-(1/3).
    let wins = 0;
    for (let i = 0; i < 1000; i++) if (weightedOrder(cs, (c) => (c.name === 'c1' ? (i + 0.5) / 1000 : Math.exp(-1)))[0]?.name === 'c1') wins++;
    assert.equal(wins, 1000 - Math.ceil(1000 * Math.exp(-1 / 3) - 0.5));
  });
  it('without replacement', () => {
    assert.deepEqual(weightedOrder(cs, (c) => (c.name === 'c1' ? 0.999 : 0.001)).map((c) => c.name), ['c1', 'c2']);
    assert.deepEqual(weightedOrder(cs, (c) => (c.name === 'c1' ? 0.001 : 0.999)).map((c) => c.name), ['c2', 'c1']);
  });
  it('stable: 10% more free capacity on c1 moves few prefixes, and only toward c1', () => {
    const more: Candidate[] = [{ ...cs[0]!, available: 110 }, cs[1]!];
    let moved = 0;
    for (const p of prefixes) {
      const a = firstOf(cs, p);
      const b = firstOf(more, p);
      if (a !== b) {
        moved++;
        assert.equal(b, 'c1');
      }
    }
    // c1's share goes from 100/400 to 110/410: about 2% of the prefixes move.
    assert.ok(moved > 0 && moved < prefixes.length * 0.04, `${moved} moved`);
  });
});

describe('steering pipeline', () => {
  it('all clusters unknown -> fallback all VIPs; sorry; servfail', () => {
    for (const [mode, addresses, vips, servfail] of [
      ['all', [], ['198.19.1.1', '198.19.2.1', '198.19.3.1'], false],
      ['sorry', ['198.18.2.99'], ['198.18.2.99'], false],
      ['servfail', [], [], true],
    ] as const) {
      const { s } = setup(config({}, { fallback: { mode, addresses } }));
      const sn = s.names.get('www.example.test');
      assert.ok(sn);
      const d = s.decide(sn, client('198.18.11.2'), 0);
      assert.deepEqual(d.vips, vips, mode);
      assert.equal(d.servfail, servfail);
      assert.match(d.reason, /^fallback:/);
      assert.equal(d.scoped, false);
    }
  });

  it('a client without RTT gets a capacity-weighted answer and a probe request; with RTTs, the nearest usable cluster', () => {
    const { s, clusters, rtt, probes } = setup(config());
    const sn = s.names.get('www.example.test')!;
    clusters.receive(load('c1', 100, 50), 0);
    clusters.receive(load('c2', 100, 50), 0);
    const a = client('198.18.11.2');
    let d = s.decide(sn, a, 10);
    assert.equal(d.reason, 'no-rtt:capacity-weighted');
    assert.equal(probes.pending, 1);
    assert.deepEqual(probes.flush(1000), [['198.18.11.2', '4:198.18.11.0/24']]);
    rtt.receive(0, { cluster: 'c1', results: [{ target: '198.18.11.2', sent: 3, received: 3, rttMs: 80 }] }, 20);
    rtt.receive(1, { cluster: 'c2', results: [{ target: '198.18.11.2', sent: 3, received: 3, rttMs: 20 }] }, 20);
    s.changed();
    d = s.decide(sn, a, 30);
    assert.deepEqual(d.vips, ['198.19.2.1']);
    assert.match(d.reason, /^rtt:c2=20\.0ms/);
    assert.equal(d.scoped, true);
    // c2 fills up: it is no candidate at all.
    clusters.receive(load('c2', 100, 100), 40);
    s.changed();
    d = s.decide(sn, a, 50);
    assert.deepEqual(d.vips, ['198.19.1.1']);
    // c2's reports stop: down after 2 intervals; c1 keeps reporting.
    clusters.receive(load('c2', 100, 10), 60);
    clusters.receive(load('c1', 100, 50), 2000);
    s.changed();
    assert.deepEqual(s.decide(sn, a, 2000).vips, ['198.19.2.1']);
    assert.deepEqual(s.decide(sn, a, 2061).vips, ['198.19.1.1'], 'c2 silent for > 2 s');
  });

  it('without ECS the resolver (the source) is probed; with ECS the subnet (+1), then the resolver when the subnet answered no probe', () => {
    const { s, clusters, rtt, probes } = setup(config());
    const sn = s.names.get('www.example.test')!;
    clusters.receive(load('c1', 100, 50), 0);
    clusters.receive(load('c2', 100, 50), 0);
    const resolver = client('198.18.5.53');
    // No ECS: the query's source, the resolver itself, is the target.
    s.decide(sn, resolver, 10);
    assert.deepEqual(probes.flush(1000), [['198.18.5.53', '4:198.18.5.0/24']]);
    // ECS: the subnet's network address + 1, with the resolver's prefix beside it.
    const ecs = prefixOfEcs(1, 24, Uint8Array.of(198, 18, 11), L, resolver);
    assert.equal(ecs.resolver?.key, '4:198.18.5.0/24');
    s.decide(sn, ecs, 1000);
    assert.deepEqual(probes.flush(2000), [['198.18.11.1', '4:198.18.11.0/24']]);
    // The subnet's probes go unanswered by both clusters.
    for (const ci of [0, 1]) rtt.receive(ci, { cluster: `c${ci + 1}`, results: [{ target: '198.18.11.1', sent: 3, received: 0, rttMs: null }] }, 1100);
    s.changed();
    let d = s.decide(sn, ecs, 1200);
    // The resolver was probed already (its results are not in yet): nothing new is asked (retrySeconds), and the answer is capacity-based.
    assert.match(d.reason, /^no-rtt:.*;via-resolver:198\.18\.5\.0\/24$/);
    // The resolver's RTTs arrive: the subnet is steered by them.
    rtt.receive(0, { cluster: 'c1', results: [{ target: '198.18.5.53', sent: 3, received: 3, rttMs: 70 }] }, 1300);
    rtt.receive(1, { cluster: 'c2', results: [{ target: '198.18.5.53', sent: 3, received: 3, rttMs: 15 }] }, 1300);
    s.changed();
    d = s.decide(sn, ecs, 1400);
    assert.deepEqual(d.vips, ['198.19.2.1']);
    assert.match(d.reason, /^rtt:c2=15\.0ms.*;via-resolver:198\.18\.5\.0\/24$/);
    // A subnet that answers for one cluster keeps its own RTTs (no-reply elsewhere ranks last).
    rtt.receive(0, { cluster: 'c1', results: [{ target: '198.18.11.1', sent: 3, received: 3, rttMs: 30 }] }, 1500);
    s.changed();
    d = s.decide(sn, ecs, 1600);
    assert.deepEqual(d.vips, ['198.19.1.1']);
    assert.doesNotMatch(d.reason, /via-resolver/);
    // A resolver with no RTT yet when the subnet went silent: the resolver is asked for.
    const other = client('198.18.6.53');
    const ecs2 = prefixOfEcs(1, 24, Uint8Array.of(198, 18, 12), L, other);
    for (const ci of [0, 1]) rtt.set(ecs2.key, ci, Infinity, 0, 3, 1600);
    s.decide(sn, ecs2, 1700);
    assert.deepEqual(probes.flush(9000), [['198.18.6.53', '4:198.18.6.0/24']]);
  });

  it('high-rate clients go to the cluster with most free capacity, even when another is nearer', () => {
    const { s, clusters, rtt, hr } = setup(config());
    const sn = s.names.get('www.example.test')!;
    clusters.receive(load('c1', 100, 90), 0); // 10 free, nearest
    clusters.receive(load('c2', 500, 100), 0); // 400 free
    clusters.receive(load('c3', 200, 100), 0); // 100 free
    const a = client('198.18.11.2');
    rtt.set(a.key, 0, 5, 3, 3, 0);
    rtt.set(a.key, 1, 90, 3, 3, 0);
    rtt.set(a.key, 2, 90, 3, 3, 0);
    assert.deepEqual(s.decide(sn, a, 1).clusters, ['c1']);
    hr.receive({ cluster: 'c1', threshold: 10, average: 2, clients: [['198.18.11.77', 50]], final: true }, 2);
    s.changed();
    const d = s.decide(sn, a, 3);
    assert.deepEqual(d.clusters, ['c2']);
    assert.equal(d.reason, 'high-rate:most-free:c2');
    // Expired after highRateExpireSeconds (default 180).
    const later = 2 + 180_001;
    clusters.receive(load('c1', 100, 90), later);
    clusters.receive(load('c2', 500, 100), later);
    rtt.set(a.key, 0, 5, 3, 3, later);
    rtt.set(a.key, 1, 90, 3, 3, later);
    s.changed();
    assert.deepEqual(s.decide(sn, a, later).clusters, ['c1']);
  });

  it('high-rate IPv6 clients: a reported /64 marks the DNS /56 holding it; a shorter reported prefix marks every /56 inside it', () => {
    const { s, clusters, rtt, hr } = setup(config());
    const sn = s.names.get('www.example.test')!;
    clusters.receive(load('c1', 100, 90), 0); // 10 free, nearest
    clusters.receive(load('c2', 500, 100), 0); // 400 free
    clusters.receive(load('c3', 200, 100), 0);
    const near = (c: ReturnType<typeof client>): void => {
      rtt.set(c.key, 0, 5, 3, 3, 0);
      rtt.set(c.key, 1, 90, 3, 3, 0);
      rtt.set(c.key, 2, 90, 3, 3, 0);
    };
    // [client, reported entries, high-rate?]
    const rows: [string, Body<'high_rate_clients'>['clients'], boolean][] = [
      ['2001:2:0:11::abcd', [['2001:2:0:11::', 50, 64]], true],
      ['2001:2:0:22::1', [['2001:2:0:11::', 50, 64]], true], // same /56 (2001:2:0::/56)
      ['2001:2:0:100::1', [['2001:2:0:11::', 50, 64]], false], // next /56
      ['2001:2:0:100::1', [['2001:2::', 50, 48]], true], // inside the reported /48
      ['2001:2:1::1', [['2001:2::', 50, 48]], false], // outside it
      ['2001:2:0:11::1', [['2001:2:0:11::1', 50]], true], // one address (no length)
      ['198.18.11.2', [['2001:2:0:11::', 50, 64]], false], // other family
      ['198.18.11.2', [['198.18.0.0', 50, 16]], true], // an IPv4 /16 marks the /24s inside it
      ['198.19.11.2', [['198.18.0.0', 50, 16]], false],
      ['::ffff:198.18.11.2', [['198.18.11.7', 50]], true], // IPv4-mapped client, IPv4 report
    ];
    for (const [addr, entries, want] of rows) {
      const t = setup(config());
      t.clusters.receive(load('c1', 100, 90), 0);
      t.clusters.receive(load('c2', 500, 100), 0);
      t.clusters.receive(load('c3', 200, 100), 0);
      const c = client(addr);
      t.rtt.set(c.key, 0, 5, 3, 3, 0);
      t.rtt.set(c.key, 1, 90, 3, 3, 0);
      t.rtt.set(c.key, 2, 90, 3, 3, 0);
      t.hr.receive({ cluster: 'c1', threshold: 10, average: 2, clients: entries, final: true }, 1);
      t.s.changed();
      const d = t.s.decide(t.s.names.get('www.example.test')!, c, 2);
      assert.deepEqual([addr, JSON.stringify(entries), d.clusters], [addr, JSON.stringify(entries), [want ? 'c2' : 'c1']]);
      assert.equal(t.hr.isHighRate(c.key, 2 + 180_001), false, 'expired after highRateExpireSeconds');
    }
    // The same through the shared table: the DNS status lists the reported prefix.
    const a = client('2001:2:0:11::1');
    near(a);
    hr.receive({ cluster: 'c1', threshold: 10, average: 2, clients: [['2001:2:0:11::', 50, 64]], final: true }, 1);
    s.changed();
    assert.deepEqual(s.decide(sn, a, 2).clusters, ['c2']);
    assert.deepEqual(hr.list(2, 10).map((e) => e.prefix), ['2001:2::/56']);
  });

  it('sticky: a client keeps its cluster while it stays usable, then moves', () => {
    const { s, clusters, rtt } = setup(config({}, { sticky: true }));
    const sn = s.names.get('www.example.test')!;
    clusters.receive(load('c1', 100, 0), 0);
    clusters.receive(load('c2', 100, 0), 0);
    const a = client('198.18.11.2');
    rtt.set(a.key, 0, 10, 3, 3, 0);
    rtt.set(a.key, 1, 50, 3, 3, 0);
    assert.deepEqual(s.decide(sn, a, 1).clusters, ['c1']);
    rtt.set(a.key, 1, 5, 3, 3, 2); // c2 is now nearer
    s.changed();
    const d = s.decide(sn, a, 3);
    assert.deepEqual(d.clusters, ['c1']);
    assert.equal(d.reason, 'sticky:c1');
    clusters.receive(load('c1', 100, 100), 4); // c1 full
    s.changed();
    assert.deepEqual(s.decide(sn, a, 5).clusters, ['c2']);
  });

  it('answers: several clusters in order of preference', () => {
    const { s, clusters, rtt } = setup(config({}, { answers: 2 }));
    const sn = s.names.get('www.example.test')!;
    for (const c of ['c1', 'c2', 'c3']) clusters.receive(load(c, 100, 0), 0);
    const a = client('198.18.11.2');
    [30, 10, 20].forEach((r, i) => {
      rtt.set(a.key, i, r, 3, 3, 0);
    });
    assert.deepEqual(s.decide(sn, a, 1).vips, ['198.19.2.1', '198.19.3.1']);
  });

  it('decisions are memoised until the state changes', () => {
    const { s, clusters } = setup(config(), 1000);
    const sn = s.names.get('www.example.test')!;
    clusters.receive(load('c1', 100, 0), 0);
    clusters.receive(load('c2', 100, 0), 0);
    const a = client('198.18.11.2');
    const d1 = s.decide(sn, a, 1);
    assert.equal(s.decide(sn, a, 500), d1, 'same decision while the epoch holds and the memo is fresh');
    assert.notEqual(s.decide(sn, a, 1001), d1, 'recomputed after memoMs');
    const d2 = s.decide(sn, a, 1001);
    s.changed();
    assert.notEqual(s.decide(sn, a, 1002), d2, 'recomputed after a state change');
    // Clusters reported at 0 go stale at 2000 (2 intervals of 1 s): a decision
    // made at 1900 is not served from the memo past that moment.
    assert.deepEqual(s.decide(sn, a, 1900).vips.length, 1);
    assert.match(s.decide(sn, a, 2001).reason, /^fallback:/);
  });
});

describe('probe scheduler', () => {
  it('rate-limited to maxTargetsPerSecond, retried no sooner than retrySeconds, bounded', () => {
    const p = new ProbeScheduler({ maxPending: 5, maxTargetsPerSecond: 2, retrySeconds: 60 }, 0);
    for (let i = 1; i <= 7; i++) p.request(`4:198.18.${i}.0/24`, `198.18.${i}.2`, 0);
    assert.equal(p.pending, 5);
    assert.equal(p.dropped, 2);
    assert.equal(p.flush(0).length, 2, 'a second worth of tokens at start');
    assert.equal(p.flush(0).length, 0);
    assert.equal(p.flush(500).length, 1);
    assert.equal(p.flush(1500).length, 2);
    assert.equal(p.request('4:198.18.1.0/24', '198.18.1.2', 30_000), false, 'asked 30 s ago');
    assert.equal(p.request('4:198.18.1.0/24', '198.18.1.2', 60_000), true);
  });
});

describe('rtt table', () => {
  it('expires measurements, maps targets to prefixes, bounded with eviction', () => {
    const t = new RttTable(2, 2, 10);
    const out = new Float64Array(2);
    t.expect('198.18.11.2', 'A');
    t.receive(0, { cluster: 'c1', results: [{ target: '198.18.11.2', sent: 3, received: 0, rttMs: null }, { target: '198.18.99.9', sent: 3, received: 3, rttMs: 5 }] }, 0);
    assert.equal(t.unknownTargets, 1);
    assert.equal(t.current('A', 5000, out), 1);
    assert.equal(out[0], Infinity, 'no reply');
    assert.equal(t.current('A', 10_001, out), 0, 'expired');
    t.set('B', 1, 30, 3, 3, 0);
    t.set('C', 1, 30, 3, 3, 0);
    assert.equal(t.size, 2);
    assert.equal(t.evicted, 1);
    assert.equal(t.get('A'), undefined, 'least recently updated evicted');
  });
});

describe('config', () => {
  it('the shipped example (deploy/examples/dns.yaml) is valid and its zone parses', () => {
    const text = readFileSync(new URL('../../deploy/examples/dns.yaml', import.meta.url), 'utf8');
    const cfg = parseConfig(dnsConfigSchema, text, 'dns.yaml');
    assert.deepEqual(cfg.steering.names.map((n) => n.name), ['www.example.test']);
    const zone = Zone.fromText(readFileSync(new URL('../../deploy/examples/example.test.zone', import.meta.url), 'utf8'), { file: 'example.test.zone' });
    assert.equal(zone.origin, cfg.steering.names[0]?.name.split('.').slice(1).join('.'));
  });

  it('refuses steered names without clusters, sorry without addresses, duplicates', () => {
    const bad = [
      [{ clusters: [] }, 'steering.names[0]'],
      [{ clusters: [{ name: 'c1', vips: ['198.19.1.1'] }, { name: 'c1', vips: ['198.19.1.2'] }] }, 'clusters[1].name'],
      [{ steering: { names: [{ name: 'www.example.test', fallback: { mode: 'sorry' } }] } }, 'steering.names[0].fallback.addresses'],
      [{ listen: ['198.18.2.2'] }, 'listen[0]'],
      [{ control: { subscribe: [{ endpoint: 'tcp://198.18.101.2:7200' }] } }, 'control.keyFile'],
    ] as const;
    for (const [over, path] of bad) {
      assert.throws(
        () => config(over),
        (e: Error & { problems?: { path: string }[] }) => e.problems?.some((p) => p.path === path) === true,
        path,
      );
    }
  });
});
