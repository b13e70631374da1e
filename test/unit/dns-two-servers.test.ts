/**
 * Two DNS servers, one view (issue 21): two steering instances fed the same
 * control messages, in different interleavings of their senders and with
 * different query histories, answer every client prefix alike. What they
 * share is only what the front nodes publish (cluster_load of a pair and of
 * single fronts, rtt_results, high_rate_clients); what differs is
 * everything per server: which prefixes asked before (memo, probe requests,
 * the RTT table's expected targets) and the order messages of different
 * senders arrived in. Sticky names keep per-server memory and are the
 * documented exception (docs/operations.md, "Several DNS servers").
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { validateConfig } from '../../src/config/load.ts';
import type { Body } from '../../src/control/messages.ts';
import { prefixOfAddress, type ClientPrefix } from '../../src/dns/client_prefix.ts';
import { ClusterTable } from '../../src/dns/cluster_state.ts';
import { dnsConfigSchema, type DnsConfig } from '../../src/dns/config.ts';
import { HighRateTable } from '../../src/dns/high_rate.ts';
import { ProbeScheduler } from '../../src/dns/probe_scheduler.ts';
import { RttTable } from '../../src/dns/rtt_table.ts';
import { Steering } from '../../src/dns/steer.ts';
import { StickyTable } from '../../src/dns/sticky.ts';

const L = { ipv4: 24, ipv6: 56 };

const cfg: DnsConfig = validateConfig(
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
    steering: {
      names: [
        { name: 'www.example.test', policy: 'rtt' },
        { name: 'api.example.test', policy: 'capacity', answers: 2 },
        { name: 'img.example.test', policy: 'capacity' },
      ],
      reportSeconds: 5,
      downAfterIntervals: 3,
    },
  },
  'test',
);

/** One DNS server's steering state, wired as DnsDaemon wires it. */
class Server {
  readonly clusters = new ClusterTable(cfg.clusters, cfg.steering.reportSeconds, cfg.steering.downAfterIntervals);
  readonly rtt = new RttTable(cfg.clusters.length, 100_000, cfg.steering.rttExpireSeconds, L);
  readonly highRate = new HighRateTable(100_000, cfg.steering.highRateExpireSeconds, L);
  readonly probes = new ProbeScheduler(cfg.probe, 0);
  readonly steering = new Steering(cfg, { clusters: this.clusters, rtt: this.rtt, highRate: this.highRate, sticky: new StickyTable(100_000, cfg.steering.stickySeconds), probes: this.probes, log: pino({ level: 'silent' }) }, 1000);

  /** What DnsControl does with each message. */
  deliver(m: Msg, now: number): void {
    if (m.type === 'cluster_load') this.clusters.receive(m.body, now, m.from);
    else if (m.type === 'high_rate_clients') this.highRate.receive(m.body, now);
    else {
      const c = this.clusters.byName(m.body.cluster);
      if (c) this.rtt.receive(c.index, m.body, now);
    }
    this.steering.changed();
  }

  answer(name: string, p: ClientPrefix, now: number): string {
    const sn = this.steering.names.get(name);
    assert.ok(sn);
    return this.steering.decide(sn, p, now).vips.join(',');
  }
}

type Msg =
  | { from: string; type: 'cluster_load'; body: Body<'cluster_load'> }
  | { from: string; type: 'rtt_results'; body: Body<'rtt_results'> }
  | { from: string; type: 'high_rate_clients'; body: Body<'high_rate_clients'> };

/** A small seeded generator (mulberry32): the test is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Host `h` of client prefix `i` (10.x.y.0/24). */
const address = (i: number, h = 7): string => `10.${i >> 8}.${i & 255}.${h}`;
const PREFIXES = 1024;
const clientOf = (i: number): ClientPrefix => {
  const p = prefixOfAddress(address(i), L);
  assert.ok(p);
  return p;
};

function load(cluster: string, available: number, role?: 'master' | 'backup'): Body<'cluster_load'> {
  return { cluster, vips: [], capacity: 400, load: 400 - available, available, serversUp: 3, serversTotal: 3, ...(role ? { role } : {}) };
}

/** Each sender's messages, in its own order (ZeroMQ keeps one connection's order; senders interleave freely). */
function senders(round: number): Msg[][] {
  const r = rng(100 + round);
  const rtt = (cluster: string): Msg[] => {
    const results: Body<'rtt_results'>['results'] = [];
    for (let i = 0; i < PREFIXES; i += 3) results.push({ target: address(i), sent: 3, received: 3, rttMs: Math.round(5 + r() * 100) });
    return [{ from: `${cluster}-a`, type: 'rtt_results', body: { cluster, results } }];
  };
  return [
    // c1 is a pair: its master and its backup (whose figures must never be used while the master is fresh).
    [{ from: 'c1-a', type: 'cluster_load', body: load('c1', 50 + 10 * round, 'master') }, ...rtt('c1')],
    [{ from: 'c1-b', type: 'cluster_load', body: load('c1', 390, 'backup') }],
    [{ from: 'c2', type: 'cluster_load', body: load('c2', 300 - 20 * round) }, ...rtt('c2'), { from: 'c2', type: 'high_rate_clients', body: { cluster: 'c2', threshold: 10, average: 1, clients: [[address(5, 9), 40], [address(77, 9), 55]], final: true } }],
    [{ from: 'c3', type: 'cluster_load', body: load('c3', 120) }],
  ];
}

/** Merges the senders' lists in an order drawn from `r`, keeping each sender's own order. */
function interleave(lists: Msg[][], r: () => number): Msg[] {
  const queues = lists.map((l) => [...l]);
  const out: Msg[] = [];
  for (;;) {
    const open = queues.filter((q) => q.length > 0);
    if (open.length === 0) return out;
    const q = open[Math.floor(r() * open.length)];
    const m = q?.shift();
    if (m) out.push(m);
  }
}

describe('two DNS servers, one view', () => {
  it('the same messages in different interleavings, different query histories: the same answer for every prefix and name', () => {
    const a = new Server();
    const b = new Server();
    const ra = rng(1);
    const rb = rng(2);
    let now = 0;
    let compared = 0;
    for (let round = 0; round < 4; round++) {
      const lists = senders(round);
      const ma = interleave(lists, ra);
      const mb = interleave(lists, rb);
      // A answers queries between messages (a history B does not have); B answers none.
      for (let i = 0; i < ma.length; i++) {
        const m = ma[i];
        if (m) a.deliver(m, now + i);
        for (let k = 0; k < 50; k++) a.answer(cfg.steering.names[Math.floor(ra() * 3)]?.name ?? '', clientOf(Math.floor(ra() * PREFIXES)), now + i);
      }
      // B hears the same messages a little later, in another order.
      mb.forEach((m, i) => {
        b.deliver(m, now + 3 + i);
      });
      now += 5000; // one report interval: every message of the round has arrived at both
      for (const n of cfg.steering.names) {
        for (let i = 0; i < PREFIXES; i++) {
          const p = clientOf(i);
          assert.equal(b.answer(n.name, p, now), a.answer(n.name, p, now), `round ${round}, ${n.name}, ${p.key}`);
          compared++;
        }
      }
    }
    assert.equal(compared, 4 * 3 * PREFIXES);
    // The RTTs reached B although B asked for none of them (another server's probes).
    assert.ok(b.rtt.shared > 0 && b.rtt.unknownTargets === 0);
    // The pair's backup never supplied figures while its master reported.
    assert.equal(b.clusters.byName('c1')?.source, 'c1-a');
  });

  it('the answers spread over the clusters (the hash is not one answer for all)', () => {
    const s = new Server();
    for (const l of senders(0)) for (const m of l) if (m.type === 'cluster_load') s.deliver(m, 0);
    const seen = new Set<string>();
    for (let i = 0; i < PREFIXES; i++) seen.add(s.answer('img.example.test', clientOf(i), 1));
    assert.deepEqual([...seen].sort(), ['198.19.1.1', '198.19.2.1', '198.19.3.1']);
  });
});
