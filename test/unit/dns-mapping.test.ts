/**
 * Policy `mapping` through the real steering pipeline (injected clock): the
 * service counts queries, scales them into demand, recomputes the table
 * from the RTT and cluster tables; answers come from the table with its TTL,
 * and prefixes it has not mapped get the `rtt` policy's answer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { validateConfig } from '../../src/config/load.ts';
import { renderDnsStatus } from '../../src/cli/dns-status.ts';
import { prefixOfAddress } from '../../src/dns/client_prefix.ts';
import { ClusterTable } from '../../src/dns/cluster_state.ts';
import { dnsConfigSchema, type DnsConfig } from '../../src/dns/config.ts';
import { HighRateTable } from '../../src/dns/high_rate.ts';
import { DemandMeter } from '../../src/dns/mapping/demand.ts';
import type { DnsMappingStatus, DnsStatus } from '../../src/dns/status.ts';
import { MappingService } from '../../src/dns/mapping/service.ts';
import { ProbeScheduler } from '../../src/dns/probe_scheduler.ts';
import { RttTable } from '../../src/dns/rtt_table.ts';
import { Steering, type SteeringParts } from '../../src/dns/steer.ts';
import { StickyTable } from '../../src/dns/sticky.ts';

const L = { ipv4: 24, ipv6: 56 };

/** A DNS status with nothing in it but `mapping` (the renderer's input). */
function withMapping(mapping: DnsMappingStatus): DnsStatus {
  return {
    name: 'dns1',
    uptimeSeconds: 1,
    zones: [],
    counters: {} as never,
    rejects: {},
    clusters: [],
    steering: { decisions: 0, reasons: {}, recent: [] },
    rtt: { prefixes: 0, evicted: 0, results: 0, unknownTargets: 0, shared: 0, recent: [] },
    highRate: { tracked: 0, evicted: 0, clients: [] },
    probes: { pending: 0, requested: 0, dropped: 0, sent: 0 },
    sticky: { clients: 0, evicted: 0 },
    cache: { entries: 0 },
    admin: { handled: 0, rejected: 0 },
    mapping,
  };
}

function config(mapping: Record<string, unknown> = {}): DnsConfig {
  return validateConfig(
    dnsConfigSchema,
    {
      name: 'dns1',
      listen: ['198.18.2.2:53'],
      zones: [{ file: '/dev/null' }],
      clusters: [
        { name: 'c1', vips: ['198.19.1.1', '2001:2:1::1'] },
        { name: 'c2', vips: ['198.19.2.1', '2001:2:2::1'] },
      ],
      steering: { names: [{ name: 'www.example.test', policy: 'mapping', ttl: 7 }], reportSeconds: 1, downAfterIntervals: 100, mapping: { headroom: 1, movePenaltyMs: 5, rttQuantumMs: 1, freshRttSeconds: 0, ...mapping } },
    },
    'test',
  );
}

function setup(cfg: DnsConfig) {
  const clusters = new ClusterTable(cfg.clusters, cfg.steering.reportSeconds, cfg.steering.downAfterIntervals);
  const rtt = new RttTable(cfg.clusters.length, 1000, cfg.steering.rttExpireSeconds);
  const highRate = new HighRateTable(1000, cfg.steering.highRateExpireSeconds, L);
  const mapping = new MappingService(cfg, { clusters, rtt, highRate }, 0);
  const parts: SteeringParts = { clusters, rtt, highRate, sticky: new StickyTable(1000, cfg.steering.stickySeconds), probes: new ProbeScheduler(cfg.probe, 0), log: pino({ level: 'silent' }), mapping };
  const s = new Steering(cfg, parts, 0);
  const report = (cluster: string, capacity: number, load: number, now: number) =>
    clusters.receive({ cluster, vips: [], capacity, load, available: Math.max(0, capacity - load), serversUp: 1, serversTotal: 1 }, now);
  return { s, clusters, rtt, mapping, report };
}

const client = (a: string) => {
  const p = prefixOfAddress(a, L);
  assert.ok(p);
  return p;
};

describe('policy mapping in the steering pipeline', () => {
  it('4 prefixes, 2 clusters, c1 nearest to 3 with room for 2: the one with the smallest RTT penalty goes to c2 and stays', () => {
    const { s, rtt, mapping, report } = setup(config());
    const sn = s.names.get('www.example.test');
    assert.ok(sn);
    // Prefixes (IPv4 and IPv6) and their RTTs to c1, c2.
    const clients: [string, number, number][] = [
      ['198.18.11.2', 10, 50],
      ['198.18.12.2', 10, 20], // smallest penalty (10 ms): moves to c2
      ['2001:2:0:100::2', 10, 35],
      ['198.18.14.2', 40, 12], // nearest to c2 anyway
    ];
    let now = 1000;
    for (const [a, r1, r2] of clients) {
      rtt.set(client(a).key, 0, r1, 3, 3, now);
      rtt.set(client(a).key, 1, r2, 3, 3, now);
    }
    const answers: Record<string, string>[] = [];
    for (let round = 0; round < 12; round++) {
      // Equal query rates; the clusters' load is the 4 prefixes' (1 each): c1 has room for 2 (2.5).
      for (const [a] of clients) for (let q = 0; q < 10; q++) s.decide(sn, client(a), now);
      report('c1', 2.5, round === 0 ? 0 : 2, now);
      report('c2', 10, round === 0 ? 0 : 2, now);
      now += 5000;
      mapping.recompute(now);
      s.changed();
      answers.push(Object.fromEntries(clients.map(([a]) => [a, s.decide(sn, client(a), now).clusters.join(',')])));
    }
    const want = { '198.18.11.2': 'c1', '198.18.12.2': 'c2', '2001:2:0:100::2': 'c1', '198.18.14.2': 'c2' };
    // From the second recompute on (load reported), the same answer every time: no flapping.
    for (const [i, a] of answers.entries()) if (i >= 1) assert.deepEqual(a, want, `round ${i}`);
    const d = s.decide(sn, client('198.18.12.2'), now);
    assert.equal(d.reason, 'mapping:c2');
    assert.equal(d.a.vips[0], '198.19.2.1');
    assert.ok(d.ttl !== undefined && d.ttl >= 5 && d.ttl <= 60, `ttl ${d.ttl}`);
  });

  it('a prefix without RTT gets the rtt policy\'s answer and the name\'s TTL', () => {
    const { s, mapping, report } = setup(config());
    const sn = s.names.get('www.example.test');
    assert.ok(sn);
    report('c1', 10, 9, 0);
    report('c2', 10, 0, 0);
    s.decide(sn, client('198.18.20.2'), 0);
    mapping.recompute(1000);
    const d = s.decide(sn, client('198.18.20.2'), 1000);
    assert.match(d.reason, /^mapping-fallback:no-rtt/);
    assert.equal(d.ttl, undefined);
    assert.equal(mapping.table.size, 0);
  });

  it('a mapped cluster that went down since the recompute: the rtt answer', () => {
    const { s, rtt, mapping, report, clusters } = setup(config());
    const sn = s.names.get('www.example.test');
    assert.ok(sn);
    const k = client('198.18.30.2').key;
    rtt.set(k, 0, 5, 3, 3, 0);
    rtt.set(k, 1, 50, 3, 3, 0);
    report('c1', 10, 0, 0);
    report('c2', 10, 0, 0);
    s.decide(sn, client('198.18.30.2'), 0);
    mapping.recompute(1000);
    assert.equal(mapping.lookup(k)?.cluster, 0);
    report('c1', 10, 10, 1000); // full: no longer a candidate
    assert.equal(clusters.state(clusters.clusters[0]!, 1000), 'full');
    const d = s.decide(sn, client('198.18.30.2'), 1000);
    assert.match(d.reason, /^mapping-fallback:unusable:rtt:c2/);
  });

  it('maxPrefixes: only the busiest prefixes are mapped, the rest answered as rtt', () => {
    const { s, rtt, mapping, report } = setup(config({ maxPrefixes: 2 }));
    const sn = s.names.get('www.example.test');
    assert.ok(sn);
    report('c1', 100, 0, 0);
    report('c2', 100, 0, 0);
    const rows: [string, number][] = [['198.18.41.2', 5], ['198.18.42.2', 1], ['198.18.43.2', 9], ['2001:2:0:4400::2', 3]];
    for (const [a, n] of rows) {
      rtt.set(client(a).key, 0, 10, 3, 3, 0);
      rtt.set(client(a).key, 1, 20, 3, 3, 0);
      for (let q = 0; q < n; q++) s.decide(sn, client(a), 0);
    }
    mapping.recompute(1000);
    assert.equal(mapping.leftOut, 2);
    assert.deepEqual([...mapping.table.entries()].map(([k]) => k).sort(), [client('198.18.41.2').key, client('198.18.43.2').key].sort());
    assert.match(s.decide(sn, client('198.18.42.2'), 1000).reason, /^mapping-fallback:rtt:c1/);
  });

  it('the load the shares are scaled to rises at once and falls with the demand half-life', () => {
    const { s, rtt, mapping, report } = setup(config({ demandHalfLifeSeconds: 10 }));
    const sn = s.names.get('www.example.test');
    assert.ok(sn);
    const k = client('198.18.51.2');
    // (What the estimate does to a placement: the next case.) [reported total load (c1 + c2), expected estimate]: one recompute a second.
    const rows: [number, number][] = [
      [20, 20],
      [20, 20],
      [14, 20 * 2 ** -0.1],
      [14, 20 * 2 ** -0.2],
      [14, 20 * 2 ** -0.3],
      [30, 30],
      [0, 30 * 2 ** -0.1],
      [29, 29],
    ];
    for (const [i, [load, want]] of rows.entries()) {
      const now = (i + 1) * 1000;
      rtt.set(k.key, 0, 10, 3, 3, now);
      rtt.set(k.key, 1, 20, 3, 3, now);
      for (let q = 0; q < 10; q++) s.decide(sn, k, now - 500);
      report('c1', 100, load / 2, now);
      report('c2', 100, load / 2, now);
      mapping.recompute(now);
      assert.ok(Math.abs(mapping.loadEstimate - want) < 1e-9, `row ${i}: estimate ${mapping.loadEstimate}, expected ${want}`);
    }
  });

  it('a prefix moved off a full cluster stays off through a 3 s dip of the reported load (CI 2026-11-26)', () => {
    const { s, rtt, mapping, report } = setup(config({ demandHalfLifeSeconds: 10 }));
    const sn = s.names.get('www.example.test');
    assert.ok(sn);
    // A, B, C nearest to c1, which has room for two of them (15 of the shares 5, 5, 10 at a load of 25); D nearest to c2.
    const clients: [string, number, number, number][] = [
      ['198.18.61.2', 10, 390, 10],
      ['198.18.62.2', 10, 190, 10],
      ['198.18.63.2', 10, 70, 20], // C: twice the queries, the smallest penalty: goes to c2
      ['198.18.64.2', 160, 10, 10],
    ];
    const loads = [...Array<number>(15).fill(25), 18, 18, 18, ...Array<number>(10).fill(25)];
    const seen: string[] = [];
    for (const [i, load] of loads.entries()) {
      const now = (i + 1) * 1000;
      for (const [a, r1, r2, q] of clients) {
        rtt.set(client(a).key, 0, r1, 3, 3, now);
        rtt.set(client(a).key, 1, r2, 3, 3, now);
        for (let n = 0; n < q; n++) s.decide(sn, client(a), now - 500);
      }
      report('c1', 15, load * 0.4, now);
      report('c2', 100, load * 0.6, now);
      mapping.recompute(now);
      seen.push(clients.map(([a]) => mapping.lookup(client(a).key)?.cluster ?? '-').join(''));
    }
    // From the second recompute on: A, B on c1 (0), C, D on c2 (1), through the dip (18 × 0.8 = 14.4 would fit C at c1).
    for (const [i, x] of seen.entries()) if (i >= 1) assert.equal(x, '0011', `recompute ${i} (load ${loads[i]}): ${seen.join(' ')}`);
  });

  it('status renders the assignment and the last recompute', () => {
    const text = renderDnsStatus(
      withMapping({
        prefixes: 4,
        demandPrefixes: 5,
        leftOut: 0,
        loadEstimate: 9.5,
        recomputes: 3,
        movedTotal: 1,
        clusters: [
          { name: 'c1', prefixes: 3, demand: 7.5, capacity: 9 },
          { name: 'c2', prefixes: 1, demand: 2, capacity: 45 },
        ],
        top: [
          { prefix: '198.18.11.0/24', cluster: 'c1', demand: 4, rttMs: 20, ttl: 30, sinceSeconds: 12 },
          { prefix: '2001:2:0:12::/64', cluster: 'c2', demand: 2, rttMs: 80, ttl: 2, sinceSeconds: 1.5 },
        ],
        last: { at: '2026-11-26T09:00:00.000Z', ageSeconds: 2, eligible: 4, units: 3, moved: 1, unserved: 0, meanRttMs: 12.5, solveMs: 0.25, totalMs: 0.5 },
      }),
    );
    assert.match(text, /mapping: 4 prefixes assigned \(5 with demand, scaled to a load of 9\.5\); 3 recomputes, 1 moves in all/);
    assert.match(text, /last recompute at 2026-11-26T09:00:00\.000Z \(2\.0s ago\): 4 prefixes in 3 units, moved 1, unserved 0\.0, mean RTT 12\.5 ms, solve 0\.25 ms/);
    // Per cluster: prefixes, demand and the solve's capacity.
    assert.match(text, /^CLUSTER\s+PREFIXES\s+DEMAND\s+CAPACITY$/m);
    assert.match(text, /^c1\s+3\s+7\.5\s+9\.0$/m);
    assert.match(text, /^c2\s+1\s+2\.0\s+45\.0$/m);
    // The top prefixes, IPv6 ones too; the list says it is partial (2 of 4).
    assert.match(text, /^198\.18\.11\.0\/24\s+c1\s+4\.0\s+20\.0\s+30\s+12\.0s$/m);
    assert.match(text, /^2001:2:0:12::\/64\s+c2\s+2\.0\s+80\.0\s+2\s+1\.5s$/m);
    assert.match(text, /\(the 2 prefixes with the most demand of 4\)/);
  });

  it('status before the first recompute: no table, "not recomputed yet"', () => {
    const text = renderDnsStatus(withMapping({ prefixes: 0, demandPrefixes: 0, leftOut: 0, loadEstimate: 0, recomputes: 0, movedTotal: 0, clusters: [{ name: 'c1', prefixes: 0, demand: 0, capacity: null }], top: [], last: null }));
    assert.match(text, /mapping: 0 prefixes assigned/);
    assert.match(text, /\(not recomputed yet\)/);
    assert.doesNotMatch(text, /PREFIXES|PREFIX\s+CLUSTER/);
  });

  it('config: ttlMin above ttlMax is refused naming the key', () => {
    assert.throws(() => config({ ttlMin: 100, ttlMax: 10 }), /steering\.mapping\.ttlMin/);
  });
});

describe('DemandMeter', () => {
  it('first interval: count / seconds; then halfway to a new rate after one half-life', () => {
    const m = new DemandMeter(100, 10, 0);
    for (let i = 0; i < 50; i++) m.note('a');
    assert.equal(m.update(5000).get('a'), 10); // 50 queries in 5 s
    for (let i = 0; i < 300; i++) m.note('a'); // 30/s over the next 10 s (one half-life)
    const r = m.update(15_000).get('a') ?? 0;
    assert.ok(Math.abs(r - 20) < 1e-9, `rate ${r}, expected halfway from 10 to 30`);
  });

  it('a silent prefix decays and is forgotten below the minimum rate', () => {
    const m = new DemandMeter(100, 1, 0);
    m.note('a');
    assert.equal(m.update(1000).get('a'), 1);
    assert.equal(m.update(21_000, 1e-3).has('a'), false); // 20 half-lives: ~1e-6/s
    assert.equal(m.size, 0);
  });

  it('bounded: a new prefix beyond maxPrefixes evicts the oldest, counted', () => {
    const m = new DemandMeter(2, 10, 0);
    m.note('a');
    m.note('b');
    m.note('c');
    assert.equal(m.size, 2);
    assert.equal(m.evicted, 1);
    assert.deepEqual([...m.update(1000).keys()].sort(), ['b', 'c']);
  });
});
