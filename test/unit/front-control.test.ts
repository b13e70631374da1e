/**
 * Seed 000's front-node procedures on an injected clock: capacity
 * estimation, down detection, request-rate aggregation and the high-rate
 * pass, cluster-load timing, and the least-loaded-cluster list.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { messageVersion, type Body } from '../../src/control/messages.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { LeastLoadedClusters } from '../../src/front/least_loaded_clusters.ts';
import { receiveRequestRate } from '../../src/front/receive_request_rate.ts';
import { clusterLoadOf, ServerLoadEstimator, type EstimateOptions } from '../../src/front/receive_server_load.ts';
import { ClusterLoadReporter } from '../../src/front/send_cluster_load.ts';
import { sendRequestRate } from '../../src/front/send_request_rate.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import { ClientRateTable } from '../../src/front/update_request_rate.ts';
import { parseConfig } from '../../src/config/load.ts';

const opts: EstimateOptions = { targetUtilization: 0.8, smoothing: 0.5, maxStep: 2, minCapacity: 1, maxCapacity: 1e6, minUtilization: 0.02, loadSeconds: 5, downAfter: 3, initialCapacity: 100 };

function services(): ServiceRuntime[] {
  const cfg = parseConfig(
    frontConfigSchema,
    `cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12, capacity: 40 }
overflow:
  - { cluster: c2, vip: 198.19.2.1, freeCapacity: 7 }
control:
  keyFile: /x.key
  agents: { listen: 'tcp://198.18.201.1:7101' }
`,
    'test',
  );
  return cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
}

function report(server: string, utilization: number): Body<'load_report'> {
  return { server, address: '198.18.201.11', interval: 5, cpu: utilization, load1: 0, load5: 0, load15: 0, connections: 0, memoryUsed: 0, utilization };
}

describe('receive_server_load: capacity estimation', () => {
  // Each row: connections sent in the 5 s interval, reported utilization -> estimate after the report.
  // Start 100 (initialCapacity). raw = rate*0.8/u, bounded to [prev/2, prev*2], then prev + 0.5*(bounded-prev).
  const rows: [string, number, number, number][] = [
    ['first report starts the interval, no estimate', 0, 0.5, 100],
    ['rate 10/s at 0.08 -> raw 100: unchanged', 50, 0.08, 100],
    ['rate 10/s at 0.16 -> raw 50: halfway to 50', 50, 0.16, 75],
    ['rate 20/s at 0.04 -> raw 400, bounded to 150', 100, 0.04, 112.5],
    ['no connections sent: no information', 0, 0.9, 112.5],
    ['utilization below minUtilization: no information', 50, 0.01, 112.5],
    ['rate 40/s at 1.6 (overload) -> raw 20, bounded to 56.25', 200, 1.6, 84.375],
  ];
  it('follows the table', () => {
    const svc = services();
    const est = new ServerLoadEstimator(opts, 0);
    let now = 0;
    const s1a = svc[0]!.servers[0]!;
    for (const [what, sent, util, want] of rows) {
      now += 5000;
      s1a.decided += sent;
      est.receiveServerLoad(report('s1a', util), svc, now);
      assert.equal(est.records.get('s1a')?.capacity, want, what);
      assert.equal(s1a.capacity, want, `${what}: written into the service's server`);
    }
  });

  it('starts from the configured capacity when there is one', () => {
    const svc = services();
    const est = new ServerLoadEstimator(opts, 0);
    est.applyTo(svc, 0);
    assert.deepEqual(svc[0]!.servers.map((b) => b.capacity), [100, 40]);
    assert.ok(svc[0]!.servers.every((b) => b.estimated));
  });

  it('a server silent for downAfter intervals is down; a report brings it back', () => {
    const svc = services();
    const est = new ServerLoadEstimator(opts, 0);
    const [a, b] = svc[0]!.servers as [ServiceRuntime['servers'][number], ServiceRuntime['servers'][number]];
    est.applyTo(svc, 14_000); // grace from start: 3 x 5 s
    assert.deepEqual([a.usable, b.usable], [true, true]);
    est.receiveServerLoad(report('s1a', 0.5), svc, 14_500);
    est.applyTo(svc, 16_000);
    assert.deepEqual([a.usable, b.usable, b.down], [true, false, true]);
    est.applyTo(svc, 14_500 + 15_001);
    assert.equal(a.usable, false);
    est.receiveServerLoad(report('s1a', 0.5), svc, 30_000);
    assert.equal(a.usable, true);
    b.state = 'drain';
    est.receiveServerLoad(report('s1b', 0.5), svc, 30_000);
    assert.equal(b.usable, false, 'a drained server stays unusable whatever its agent says');
  });

  it('counts reports for servers it does not have', () => {
    const svc = services();
    const est = new ServerLoadEstimator(opts, 0);
    assert.equal(est.receiveServerLoad(report('nope', 0.5), svc, 1), false);
    assert.equal(est.unknownServer, 1);
  });

  it('rates: load is the recent rate of new connections, and the cluster aggregate sums usable servers', () => {
    const svc = services();
    const est = new ServerLoadEstimator(opts, 0);
    const [a, b] = svc[0]!.servers as [ServiceRuntime['servers'][number], ServiceRuntime['servers'][number]];
    est.tick(svc, 0);
    for (let t = 1; t <= 20; t++) {
      a.decided += 30;
      b.decided += 10;
      if (t % 5 === 0) for (const n of ['s1a', 's1b']) est.receiveServerLoad(report(n, 0.01), svc, t * 1000); // alive, no estimate change
      est.tick(svc, t * 1000);
    }
    assert.ok(Math.abs(a.load - 30) < 0.01 && Math.abs(b.load - 10) < 0.01);
    const c = clusterLoadOf(svc);
    assert.equal(c.capacity, 140);
    assert.ok(Math.abs(c.load - 40) < 0.02 && Math.abs(c.available - 100) < 0.02);
    assert.deepEqual([c.serversUp, c.serversTotal], [2, 2]);
  });
});

describe('receive_request_rate / update_request_rate / send_request_rate', () => {
  const rr = (server: string, clients: [string, number][]): Body<'request_rate'> => ({ server, interval: 10, clients, rejectedLines: 0 });
  const HOSTS = { ipv4: 32, ipv6: 128 };
  const DEFAULTS = { ipv4: 32, ipv6: 64 };

  it('aggregates per client over servers; reports clients above factor x average', () => {
    const t = new ClientRateTable(100, 600, 0);
    // 4 ordinary clients at 10 req/s, one at 100 (10x), split over two servers.
    receiveRequestRate(t, rr('s1a', [['198.18.11.2', 50], ['198.18.12.2', 50], ['198.18.13.2', 50], ['198.18.14.2', 50], ['198.18.15.2', 500]]), 1000, HOSTS);
    receiveRequestRate(t, rr('s1b', [['198.18.11.2', 50], ['198.18.12.2', 50], ['198.18.13.2', 50], ['198.18.14.2', 50], ['198.18.15.2', 500]]), 2000, HOSTS);
    const sent: Body<'high_rate_clients'>[] = [];
    const r = sendRequestRate(t, { cluster: 'c1', factor: 3, queueSize: 100 }, 10_000, (b) => sent.push(b));
    // window 10 s: rates 10,10,10,10,100 -> average 28, threshold 84
    assert.equal(r.average, 28);
    assert.equal(r.threshold, 84);
    assert.deepEqual(sent, [{ cluster: 'c1', threshold: 84, average: 28, clients: [['198.18.15.2', 100]], final: true }]);
  });

  it('sends when the queue is full and at the end of the pass', () => {
    const t = new ClientRateTable(100, 600, 0);
    const clients: [string, number][] = [];
    for (let i = 0; i < 20; i++) clients.push([`198.18.20.${i + 1}`, 1]);
    for (let i = 0; i < 5; i++) clients.push([`198.18.21.${i + 1}`, 1000]);
    receiveRequestRate(t, rr('s1a', clients), 500, HOSTS);
    const sent: Body<'high_rate_clients'>[] = [];
    sendRequestRate(t, { cluster: 'c1', factor: 2, queueSize: 2 }, 1000, (b) => sent.push(b));
    assert.deepEqual(sent.map((m) => [m.clients.length, m.final]), [[2, false], [2, false], [1, true]]);
    assert.deepEqual(sent.flatMap((m) => m.clients.map((c) => c[0])).sort(), ['198.18.21.1', '198.18.21.2', '198.18.21.3', '198.18.21.4', '198.18.21.5']);
  });

  it('averages over the clients with requests in the window: remembered idle clients do not sink the threshold', () => {
    // [steady clients' requests in the second window, idle clients remembered from the first, factor, reported]
    const cases: [number[], number, number, string[]][] = [
      // Three steady clients and twenty one-off visitors of the first window:
      // the second window's average is 20 (not 60/23 = 2.6), nobody is 3x it.
      [[100, 100, 400], 20, 3, []],
      // The demo's case: one steady client beside two remembered ones.
      [[600], 2, 3, []],
      // A real heavy hitter among active clients is still reported.
      [[100, 100, 100, 1200], 20, 3, ['198.18.30.4']],
    ];
    for (const [steady, idle, factor, want] of cases) {
      const t = new ClientRateTable(1000, 600, 0);
      for (let i = 0; i < idle; i++) t.updateRequestRate(`198.18.40.${String(i + 1)}`, 32, 1, 0);
      for (const [i, n] of steady.entries()) t.updateRequestRate(`198.18.30.${String(i + 1)}`, 32, n, 0);
      sendRequestRate(t, { cluster: 'c1', factor, queueSize: 100 }, 10_000, () => undefined);
      for (const [i, n] of steady.entries()) t.updateRequestRate(`198.18.30.${String(i + 1)}`, 32, n, 15_000);
      const sent: Body<'high_rate_clients'>[] = [];
      const r = sendRequestRate(t, { cluster: 'c1', factor, queueSize: 100 }, 20_000, (b) => sent.push(b));
      const rates = steady.map((n) => n / 10);
      assert.ok(Math.abs(r.average - rates.reduce((x, y) => x + y, 0) / rates.length) < 1e-9, `average over the ${String(steady.length)} active clients`);
      assert.deepEqual(sent.flatMap((b) => b.clients.map((c) => c[0])), want);
    }
  });

  it('an empty pass still sends one final message', () => {
    const t = new ClientRateTable(100, 600, 0);
    const sent: Body<'high_rate_clients'>[] = [];
    sendRequestRate(t, { cluster: 'c1', factor: 3, queueSize: 10 }, 1000, (b) => sent.push(b));
    assert.deepEqual(sent, [{ cluster: 'c1', threshold: 0, average: 0, clients: [], final: true }]);
  });

  it('is bounded and expires silent clients', () => {
    const t = new ClientRateTable(2, 60, 0);
    t.updateRequestRate('198.18.11.2', 32, 5, 0);
    t.updateRequestRate('2001:2:0:11::', 64, 5, 0);
    t.updateRequestRate('198.18.11.4', 32, 5, 0);
    assert.equal(t.dropped, 1);
    t.updateRequestRate('198.18.11.2', 32, 5, 50_000);
    t.closeWindow(61_000);
    assert.deepEqual([...t.clients.keys()], ['198.18.11.2']);
    assert.equal(t.expired, 1);
  });

  it('aggregates IPv6 clients per /64 by default, IPv4 per address, and reports the prefix length', () => {
    const t = new ClientRateTable(100, 600, 0);
    // One /64 with four addresses (privacy addresses of one host) at 30 req/s together, spread over two servers;
    // three ordinary IPv4 clients and one ordinary /64 at 1 req/s each.
    receiveRequestRate(t, rr('s1a', [['2001:2:0:11::a', 100], ['2001:2:0:11:1:2:3:4', 50], ['198.18.11.2', 10], ['198.18.11.3', 10], ['2001:2:0:12::1', 10]]), 1000, DEFAULTS);
    receiveRequestRate(t, rr('s1b', [['2001:2:0:11::a', 100], ['2001:2:0:11:ffff:ffff:ffff:ffff', 50], ['198.18.11.4', 10]]), 2000, DEFAULTS);
    assert.deepEqual([...t.clients.keys()].sort(), ['198.18.11.2', '198.18.11.3', '198.18.11.4', '2001:2:0:11::', '2001:2:0:12::']);
    const sent: Body<'high_rate_clients'>[] = [];
    const r = sendRequestRate(t, { cluster: 'c1', factor: 2, queueSize: 10 }, 10_000, (b) => sent.push(b));
    // window 10 s: rates 30, 1, 1, 1, 1 -> average 6.8, threshold 13.6
    assert.ok(Math.abs(r.average - 6.8) < 1e-9);
    assert.equal(r.reported, 1);
    // The IPv6 message first (version 2 only), then the final IPv4 one (version 1: a DNS of version 1 still hears the pass end).
    assert.deepEqual(sent, [
      { cluster: 'c1', threshold: r.threshold, average: r.average, clients: [['2001:2:0:11::', 30, 64]], final: false },
      { cluster: 'c1', threshold: r.threshold, average: r.average, clients: [], final: true },
    ]);
    assert.deepEqual(sent.map((b) => messageVersion('high_rate_clients', b)), [2, 1]);
  });

  it('counts IPv4 clients per configured prefix, IPv4-mapped ones as IPv4, IPv6 per /128 when so configured', () => {
    const t = new ClientRateTable(100, 600, 0);
    receiveRequestRate(t, rr('s1a', [['198.18.11.2', 1], ['198.18.11.200', 1], ['::ffff:198.18.11.3', 1], ['198.18.12.2', 1], ['2001:2::1', 1], ['2001:2::2', 1]]), 0, { ipv4: 24, ipv6: 128 });
    assert.deepEqual(
      [...t.clients].map(([k, r]) => [k, r.length, r.requests]),
      [['198.18.11.0', 24, 3], ['198.18.12.0', 24, 1], ['2001:2::1', 128, 1], ['2001:2::2', 128, 1]],
    );
    const sent: Body<'high_rate_clients'>[] = [];
    receiveRequestRate(t, rr('s1a', [['198.18.11.9', 100]]), 500, { ipv4: 24, ipv6: 128 });
    sendRequestRate(t, { cluster: 'c1', factor: 2, queueSize: 10 }, 1000, (b) => sent.push(b));
    assert.deepEqual(sent.map((b) => b.clients), [[['198.18.11.0', 103, 24]]]);
    assert.equal(messageVersion('high_rate_clients', sent[0]!), 2, 'a prefix length needs version 2');
  });
});

describe('cluster load reporting and the least-loaded-cluster list', () => {
  it('sends periodically and on a change larger than the fraction', () => {
    const r = new ClusterLoadReporter(5, 0.1);
    const f = (available: number) => ({ capacity: 100, load: 100 - available, available, serversUp: 2, serversTotal: 2 });
    const seq: [number, number, string | undefined][] = [
      [0, 50, 'periodic'],
      [1000, 45, undefined],
      [2000, 39, 'change'],
      [3000, 35, undefined],
      [7000, 35, 'periodic'],
    ];
    for (const [now, avail, want] of seq) {
      const why = r.due(f(avail), now);
      assert.equal(why, want, `t=${now}`);
      if (why) r.sent(f(avail), why, now);
    }
  });

  it('overflow uses configured figures until reports, live ones while fresh, and leaves silent clusters out', () => {
    const svc = services();
    const l = new LeastLoadedClusters('c1', 5, 3);
    l.configure(svc);
    l.applyTo(svc, 0);
    assert.equal(svc[0]!.overflow[0]!.freeCapacity, 7);
    const load = (cluster: string, available: number): Body<'cluster_load'> => ({ cluster, vips: ['198.19.2.1'], capacity: 100, load: 100 - available, available, serversUp: 1, serversTotal: 1 });
    l.receive(load('c2', 60), 1000);
    l.receive(load('c1', 999), 1000); // our own, echoed: ignored
    l.applyTo(svc, 2000);
    assert.equal(svc[0]!.overflow[0]!.freeCapacity, 60);
    assert.deepEqual(l.list(2000).map((p) => p.cluster), ['c2']);
    l.applyTo(svc, 1000 + 15_001);
    assert.equal(svc[0]!.overflow[0]!.freeCapacity, 0);
    assert.deepEqual(l.list(1000 + 15_001), []);
  });
});
