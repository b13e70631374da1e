/**
 * Metrics rendered through a real prom-client Registry from the daemons'
 * own counters (set directly, or driven through the real answerer), checked
 * with the strict exposition checker (test/helpers/prom_text.ts): names,
 * labels and values, counters that follow their sources at each scrape,
 * histograms from Buckets, and the kernel queue line parser.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { AgentDaemon } from '../../src/agent/agent.ts';
import { parseConfig } from '../../src/config/load.ts';
import { DnsDaemon } from '../../src/dns/daemon.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable, connectionKey } from '../../src/front/connections.ts';
import { buildServices } from '../../src/front/daemon.ts';
import { EngineCounters, FrontEngine } from '../../src/front/engine.ts';
import { shedCounts } from '../../src/front/shed.ts';
import { OVERFLOW_BASE } from '../../src/front/service.ts';
import { registerAgentMetrics } from '../../src/agent/metrics.ts';
import { Buckets } from '../../src/metrics/buckets.ts';
import { counterFrom, gaugeFrom, newRegistry, renderMetrics } from '../../src/metrics/collect.ts';
import { registerDnsMetrics } from '../../src/dns/metrics.ts';
import { registerFrontMetrics, type FrontMetricsSource } from '../../src/front/metrics.ts';
import { BucketHistogram } from '../../src/metrics/histogram.ts';
import { parseKernelQueue } from '../../src/metrics/kernel_queue.ts';
import type { LogStats } from '../../src/nflog/log.ts';
import type { QueueStats } from '../../src/nfqueue/queue.ts';
import { ParseStatus, TcpFlag } from '../../src/packet/ipv4.ts';
import { Shaper } from '../../src/shaping/shaper.ts';
import { tcp } from '../helpers/packets.ts';
import { parsePromText, type PromText } from '../helpers/prom_text.ts';

async function scrape(r: Registry): Promise<PromText> {
  return parsePromText(await r.metrics());
}

type Row = readonly [name: string, labels: Record<string, string>, value: number];

function expectRows(p: PromText, rows: readonly Row[]): void {
  for (const [name, labels, value] of rows) {
    assert.ok(p.has(name, labels), `${name}${JSON.stringify(labels)} missing`);
    assert.equal(p.sum(name, labels), value, `${name}${JSON.stringify(labels)}`);
  }
}

describe('metric helpers', () => {
  it('counters and gauges follow their sources at each scrape; vanished labels vanish; bad values are skipped', async () => {
    const r = new Registry();
    let src: Record<string, number> = { a: 1, b: 2 };
    counterFrom(r, 'sluice_t_events_total', 'Events.', ['kind'], () => Object.entries(src).map(([k, v]) => [{ kind: k }, v] as const));
    gaugeFrom(r, 'sluice_t_level', 'Level.', ['kind'], () => Object.entries(src).map(([k, v]) => [{ kind: k }, v] as const));
    let p = await scrape(r);
    expectRows(p, [['sluice_t_events_total', { kind: 'a' }, 1], ['sluice_t_events_total', { kind: 'b' }, 2], ['sluice_t_level', { kind: 'b' }, 2]]);
    src = { a: 5, c: NaN, d: -1, e: Infinity };
    p = await scrape(r);
    expectRows(p, [['sluice_t_events_total', { kind: 'a' }, 5], ['sluice_t_level', { kind: 'a' }, 5], ['sluice_t_level', { kind: 'd' }, -1]]);
    for (const k of ['b', 'c', 'e']) assert.equal(p.has('sluice_t_events_total', { kind: k }), false, k);
    assert.equal(p.has('sluice_t_events_total', { kind: 'd' }), false, 'a negative count is not a counter value');
    assert.throws(() => counterFrom(r, 'sluice_t_events', 'x', [], () => []), /_total/);
  });

  it('a BucketHistogram renders cumulative buckets, +Inf = _count, and _sum, per label set', async () => {
    const r = new Registry();
    const a = new Buckets([0.01, 0.1, 1]);
    const b = new Buckets([0.01, 0.1, 1]);
    for (const x of [0.005, 0.01, 0.05, 0.5, 2, 3]) a.observe(x);
    for (const x of [NaN, -1, Infinity]) a.observe(x);
    b.observe(0.2);
    new BucketHistogram(r, 'sluice_t_rtt_seconds', 'RTT.', ['cluster'], () => [
      [{ cluster: 'c1' }, a],
      [{ cluster: 'c2' }, b],
    ]);
    const p = await scrape(r);
    assert.equal(p.families.get('sluice_t_rtt_seconds')?.type, 'histogram');
    expectRows(p, [
      ['sluice_t_rtt_seconds_bucket', { cluster: 'c1', le: '0.01' }, 2],
      ['sluice_t_rtt_seconds_bucket', { cluster: 'c1', le: '0.1' }, 3],
      ['sluice_t_rtt_seconds_bucket', { cluster: 'c1', le: '1' }, 4],
      ['sluice_t_rtt_seconds_bucket', { cluster: 'c1', le: '+Inf' }, 6],
      ['sluice_t_rtt_seconds_count', { cluster: 'c1' }, 6],
      ['sluice_t_rtt_seconds_bucket', { cluster: 'c2', le: '0.1' }, 0],
      ['sluice_t_rtt_seconds_bucket', { cluster: 'c2', le: '1' }, 1],
      ['sluice_t_rtt_seconds_count', { cluster: 'c2' }, 1],
    ]);
    assert.ok(Math.abs(p.sum('sluice_t_rtt_seconds_sum', { cluster: 'c1' }) - 5.565) < 1e-9);
    assert.equal(a.invalid, 3);
    assert.throws(() => new Buckets([1, 1]), /increasing/);
  });

  it('renderMetrics: the same text as registry.metrics(), one metric per event-loop turn (other callbacks run between two metrics)', async () => {
    const r = new Registry();
    const order: string[] = [];
    const src: Record<string, number> = { a: 1, b: 2 };
    counterFrom(r, 'sluice_t_a_total', 'A.', ['kind'], () => (order.push('a'), Object.entries(src).map(([k, v]) => [{ kind: k }, v] as const)));
    gaugeFrom(r, 'sluice_t_b', 'B.', [], () => (order.push('b'), [[{}, 7]] as const));
    new BucketHistogram(r, 'sluice_t_c_seconds', 'C.', ['cluster'], () => (order.push('c'), [[{ cluster: 'c1' }, new Buckets([0.1, 1])]]));
    const reference = await r.metrics();
    order.length = 0;
    setImmediate(() => order.push('tick'));
    const text = await renderMetrics(r);
    assert.equal(text, reference);
    assert.deepEqual(order, ['a', 'tick', 'b', 'c'], 'a callback queued before the scrape runs after its first metric');
    order.length = 0;
    setImmediate(() => order.push('tick'));
    await r.metrics();
    assert.deepEqual(order, ['a', 'b', 'c'], 'prom-client renders every metric in one turn');
    assert.equal(await renderMetrics(new Registry()), '\n', 'an empty registry renders as prom-client does');
    assert.equal(await new Registry().metrics(), '\n');
  });

  it('a new registry carries the default process metrics', async () => {
    const p = await scrape(newRegistry());
    assert.ok(p.has('process_cpu_user_seconds_total'));
    assert.ok(p.has('nodejs_heap_size_used_bytes'));
  });

  it('the kernel queue line parser reads queue length and drops of our queue only', () => {
    const text = '    0  12345     3 2   128     7     2     9001  1\n    5  999   0 2 65535 0 0 1 1\n';
    assert.deepEqual(parseKernelQueue(text, 0), { waiting: 3, queueDropped: 7, userDropped: 2, idSequence: 9001 });
    assert.deepEqual(parseKernelQueue(text, 5), { waiting: 0, queueDropped: 0, userDropped: 0, idSequence: 1 });
    assert.equal(parseKernelQueue(text, 1), undefined);
    assert.equal(parseKernelQueue('garbage\n', 0), undefined);
  });
});

describe('front metrics from the engine and table counters', () => {
  const text = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');
  const config = parseConfig(frontConfigSchema, text, 'front-cluster1.yaml');
  const services = buildServices(config);
  const table = new ConnectionTable(64, 1000, { released: () => undefined });
  const engine = new FrontEngine(services, table);
  const svc = services[0]!;
  const [s1a, s1b, s1c] = svc.servers;
  s1a!.decided = 7;
  s1b!.decided = 3;
  s1a!.active = 4;
  s1b!.state = 'drain';
  s1c!.health.setSilent(true, 0);
  for (const b of svc.servers) b.refreshUsable();
  svc.overflow[0]!.decided = 2;
  Object.assign(engine.counters, { packets: 50, syn: 12, synRetransmits: 1, decided: 12, noTarget: 1, noRecord: 5, teardownNoRecord: 2, unexpected: 3, unexpectedDropped: 2, finishes: 6, serverResets: 1, logged: 8, loggedMalformed: 1 });
  engine.counters.malformed[ParseStatus.IpOptions] = 2;
  for (let i = 0; i < 3; i++) table.create(connectionKey(0x0a000001, 1000 + i), 0, 0, 0);
  table.finish(0, connectionKey(0x0a000001, 1000), 1);
  const queue: QueueStats = { packets: 50, lost: 5, idGaps: 4, batches: 9, maxBatch: 8, verdicts: 50, sendErrors: 0, kernelErrors: 1, overruns: 2, badMessages: 0, recvErrors: 0, lastErrno: 0, truncatedReads: 0, callbackErrors: 0 };
  const log: LogStats = { records: 8, batches: 2, maxBatch: 5, datagrams: 3, overruns: 1, lost: 64, badMessages: 0, recvErrors: 0, lastErrno: 0, truncatedReads: 0, callbackErrors: 0 };
  const guard = { packets: 7, bytes: 420 };
  const guard6 = { packets: 5, bytes: 360 };
  const src: FrontMetricsSource = {
    config,
    engine,
    table,
    queueStats: () => queue,
    logStats: () => log,
    kernelQueue: () => ({ waiting: 4, queueDropped: 0, userDropped: 3, idSequence: 60 }),
    adminCounts: () => ({ handled: 2, rejected: 1 }),
    rulesHealth: () => ({ checks: 40, repaired: 2, repairFailures: 1, checkFailures: 3, failingRepairs: 0, lastRepair: null, unchanged: 31, nftDumpMs: 0, wholeInstalls: 0, elementUpdates: 0 }),
    vipGuardCount: () => guard,
    vipGuardCount6: () => guard6,
    tableCounts: () => ({ fallbackFlows: { ipv4: 9, ipv6: 2 }, strayReplies: { ipv4: 4, ipv6: 19 } }),
    fallbackStatus: () => ({ writes: 4, writeFailures: 1, usableServers: 2, elements: 256 }),
    scheduleStatus: () => ({ services: 1, writes: 3, writeFailures: 0, rewrites: 1, elements: 256, queued: 0 }),
    shed: () => ({ ...shedCounts(new EngineCounters(), 0, 0), no_target: 7, queue_lost: 2 }),
    control: () => undefined,
    ops: () => undefined,
        gatekeeper: () => undefined,
    overrides: { status: () => ({ stateFile: '/x', count: 2, staleTotal: 1, lastStale: [], stateFileErrors: 3, error: null }) },
  };
  const r = new Registry();
  registerFrontMetrics(r, src);

  it('renders decisions per server and method, drops by reason, sizes, capacity and utilization', async () => {
    const p = await scrape(r);
    expectRows(p, [
      ['sluice_front_info', { cluster: 'c1' }, 1],
      ['sluice_front_packets_total', {}, 50],
      ['sluice_front_syn_packets_total', {}, 12],
      ['sluice_front_connections_decided_total', { service: 'www', server: 's1a', method: 'capacity' }, 7],
      ['sluice_front_connections_decided_total', { service: 'www', server: 's1b', method: 'capacity' }, 3],
      ['sluice_front_connections_decided_total', { service: 'www', server: 's1c', method: 'capacity' }, 0],
      ['sluice_front_connections_overflowed_total', { service: 'www', cluster: 'c2' }, 2],
      ['sluice_front_connections_finished_total', { by: 'client' }, 6],
      ['sluice_front_connections_finished_total', { by: 'server_reset' }, 1],
      ['sluice_front_packets_dropped_total', { reason: 'malformed' }, 2],
      ['sluice_front_packets_dropped_total', { reason: 'no_target' }, 1],
      ['sluice_front_packets_dropped_total', { reason: 'no_record' }, 5],
      ['sluice_front_packets_dropped_total', { reason: 'unexpected' }, 2],
      ['sluice_front_malformed_packets_total', { status: 'ip_options' }, 2],
      ['sluice_front_shed_total', { reason: 'no_target' }, 7],
      ['sluice_front_shed_total', { reason: 'queue_lost' }, 2],
      ['sluice_front_shed_total', { reason: 'table_full' }, 0],
      ['sluice_front_schedule_writes_total', {}, 3],
      ['sluice_front_schedule_whole_rewrites_total', {}, 1],
      ['sluice_front_unexpected_packets_total', {}, 3],
      ['sluice_front_server_active_connections', { service: 'www', server: 's1a' }, 4],
      ['sluice_front_server_capacity', { service: 'www', server: 's1a', unit: 'connections' }, 100],
      ['sluice_front_server_capacity', { service: 'www', server: 's1c', unit: 'connections' }, 300],
      ['sluice_front_server_utilization', { service: 'www', server: 's1a' }, 0.04],
      ['sluice_front_server_state', { service: 'www', server: 's1a', state: 'active' }, 1],
      ['sluice_front_server_state', { service: 'www', server: 's1b', state: 'drain' }, 1],
      ['sluice_front_server_state', { service: 'www', server: 's1b', state: 'active' }, 0],
      ['sluice_front_server_state', { service: 'www', server: 's1c', state: 'down' }, 1],
      ['sluice_front_overflow_free_capacity', { service: 'www', cluster: 'c2' }, 600],
      ['sluice_front_connection_records', { state: 'active' }, 2],
      ['sluice_front_connection_records', { state: 'recycled' }, 1],
      ['sluice_front_connection_records_max', {}, 64],
      ['sluice_front_connection_record_events_total', { event: 'created' }, 3],
      ['sluice_front_connection_record_events_total', { event: 'recycled_early' }, 0],
      ['sluice_front_queue_packets_total', {}, 50],
      ['sluice_front_log_records_total', {}, 8],
      ['sluice_front_log_malformed_total', {}, 1],
      ['sluice_front_log_batches_total', {}, 2],
      ['sluice_front_log_datagrams_total', {}, 3],
      ['sluice_front_log_lost_records_total', {}, 64],
      ['sluice_front_log_errors_total', { kind: 'overrun' }, 1],
      ['sluice_front_queue_batches_total', {}, 9],
      ['sluice_front_queue_lost_packets_total', {}, 5],
      ['sluice_front_queue_errors_total', { kind: 'overrun' }, 2],
      ['sluice_front_queue_errors_total', { kind: 'kernel' }, 1],
      ['sluice_front_kernel_queue_length', { queue: '0' }, 4],
      ['sluice_front_kernel_queue_dropped_total', { queue: '0', reason: 'user' }, 3],
      ['sluice_front_admin_requests_total', { result: 'rejected' }, 1],
      ['sluice_front_rules_checks_total', {}, 40],
      ['sluice_front_rules_checks_unchanged_total', {}, 31],
      ['sluice_front_rules_repaired_total', {}, 2],
      ['sluice_front_rules_repair_failures_total', {}, 1],
      ['sluice_front_rules_check_failures_total', {}, 3],
      ['sluice_front_ctl_overrides', {}, 2],
      ['sluice_front_ctl_overrides_stale_total', {}, 1],
      ['sluice_front_state_file_errors_total', {}, 3],
      ['sluice_front_vip_guard_dropped_packets_total', { family: 'ipv4' }, 7],
      ['sluice_front_vip_guard_dropped_bytes_total', { family: 'ipv4' }, 420],
      ['sluice_front_vip_guard_dropped_packets_total', { family: 'ipv6' }, 5],
      ['sluice_front_vip_guard_dropped_bytes_total', { family: 'ipv6' }, 360],
      ['sluice_front_fallback_flows_total', { family: 'ipv4' }, 9],
      ['sluice_front_fallback_flows_total', { family: 'ipv6' }, 2],
      ['sluice_front_stray_lan_packets_dropped_total', { family: 'ipv4' }, 4],
      ['sluice_front_stray_lan_packets_dropped_total', { family: 'ipv6' }, 19],
      ['sluice_front_fallback_writes_total', {}, 4],
      ['sluice_front_fallback_write_failures_total', {}, 1],
      ['sluice_front_fallback_usable_servers', {}, 2],
      ['sluice_front_packets_dropped_total', { reason: 'teardown_no_record' }, 2],
    ]);
    // s1a only is usable (s1b drains, s1c is down).
    expectRows(p, [
      ['sluice_front_cluster_capacity', {}, 100],
      ['sluice_front_cluster_servers', { usable: 'true' }, 1],
      ['sluice_front_cluster_servers', { usable: 'false' }, 2],
    ]);
    // Without a control section: no per-agent or probe series, control counters absent or zero.
    assert.equal(p.has('sluice_front_agent_reports_total'), false);
    assert.equal(p.has('sluice_front_probe_rtt_seconds_count'), false);
    assert.equal(p.sum('sluice_control_messages_received_total'), 0);
    for (const s of p.samples) assert.ok(!Object.values(s.labels).some((v) => /^\d+\.\d+\.\d+\.\d+$/.test(v)), `no address labels: ${s.name}`);
  });

  it('counters move with the engine between scrapes', async () => {
    s1a!.decided += 5;
    engine.counters.noRecord += 1;
    guard.packets += 3;
    const p = await scrape(r);
    expectRows(p, [
      ['sluice_front_vip_guard_dropped_packets_total', { family: 'ipv4' }, 10],
      ['sluice_front_vip_guard_dropped_packets_total', { family: 'ipv6' }, 5],
      ['sluice_front_connections_decided_total', { service: 'www', server: 's1a', method: 'capacity' }, 12],
      ['sluice_front_packets_dropped_total', { reason: 'no_record' }, 6],
    ]);
  });
});

// --- Checkpoints: a real Shaper in the engine, real SYNs, fake queue timers -----

describe('front metrics of checkpoints', () => {
  const cfg = parseConfig(
    frontConfigSchema,
    `
cluster: c1
uplinkAddress: 198.18.101.2
overflow: [{ cluster: c2, vip: 198.19.2.1, freeCapacity: 10 }]
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11 }
    checkpoints:
      - { name: rate, kind: counter, criterion: source }
      - { name: heavy, kind: counter, when: { counter: { name: rate, above: 5 } }, action: { steer: c2 } }
      - { name: lim, kind: rate-limit, limit: 2, queue: { maxLength: 2, maxDelayMs: 1500 }, table: { size: 8 } }
`,
    't',
  );
  const services = buildServices(cfg);
  const armed = new Map<number, number>();
  const makeShaper = (): Shaper =>
    new Shaper(
      { cluster: cfg.checkpoints, services: cfg.services, overflow: cfg.overflow.map((o) => o.cluster) },
      { maxHeld: cfg.shaping.maxHeld, connections: 100, overflowBase: OVERFLOW_BASE, scheduler: (i) => ({ arm: (at) => armed.set(i, at) }) },
    );
  const table = new ConnectionTable(100, 1000, { released: () => undefined });
  const engine = new FrontEngine(services, table, makeShaper());
  engine.onSettled = () => undefined;
  const src: FrontMetricsSource = { config: cfg, engine, table, queueStats: () => undefined, logStats: () => undefined, kernelQueue: () => undefined, adminCounts: () => ({ handled: 0, rejected: 0 }), rulesHealth: () => ({ checks: 0, repaired: 0, repairFailures: 0, checkFailures: 0, failingRepairs: 0, lastRepair: null, unchanged: 0, nftDumpMs: 0, wholeInstalls: 0, elementUpdates: 0 }), vipGuardCount: () => ({ packets: 0, bytes: 0 }), vipGuardCount6: () => ({ packets: 0, bytes: 0 }), tableCounts: () => ({ fallbackFlows: { ipv4: 0, ipv6: 0 }, strayReplies: { ipv4: 0, ipv6: 0 } }), fallbackStatus: () => ({ writes: 0, writeFailures: 0, usableServers: 0, elements: 0 }), scheduleStatus: () => ({ services: 0, writes: 0, writeFailures: 0, rewrites: 0, elements: 0, queued: 0 }), shed: () => shedCounts(new EngineCounters(), 0, 0), control: () => undefined, ops: () => undefined, gatekeeper: () => undefined, overrides: { status: () => ({ stateFile: '/x', count: 0, staleTotal: 0, lastStale: [], stateFileErrors: 0, error: null }) } };
  const r = new Registry();
  registerFrontMetrics(r, src);
  // Times relative to the clock the metrics read (oldest wait).
  const t0 = performance.now();
  let port = 1000;
  const syns = (from: string, n: number, at: number): void => {
    for (let i = 0; i < n; i++) {
      const p = tcp({ src: from, dst: '198.19.1.1' }, { srcPort: ++port, dstPort: 80, flags: TcpFlag.Syn });
      engine.decide(p, 0, p.length, at, port);
    }
  };
  const runTimers = (until: number): void => {
    for (let g = 0; g < 1000; g++) {
      let idx = -1;
      let at = Infinity;
      for (const [i, a] of armed) if (a < at) [idx, at] = [i, a];
      if (idx < 0 || at > until) break;
      armed.delete(idx);
      engine.shaper!.all[idx]!.queue!.fire(at);
    }
  };
  const cp = (checkpoint: string, level = 'service'): Record<string, string> => ({ checkpoint, level });

  it('counts matched, admitted (at once, after the queue), held, rejected by reason and steered per checkpoint; queue and table gauges', async () => {
    // 8 SYNs from one client: the 6th to 8th are over rate 5 and steered to
    // c2; of the first 5, lim admits 2, holds 2 (maxLength 2), rejects 1.
    syns('198.18.11.2', 8, t0);
    let p = await scrape(r);
    expectRows(p, [
      ['sluice_front_checkpoint_matched_total', cp('rate'), 8],
      ['sluice_front_checkpoint_admitted_total', { ...cp('rate'), queued: 'false' }, 8],
      ['sluice_front_checkpoint_matched_total', cp('heavy'), 3],
      ['sluice_front_checkpoint_steered_total', { ...cp('heavy'), cluster: 'c2' }, 3],
      ['sluice_front_checkpoint_matched_total', cp('lim'), 5],
      ['sluice_front_checkpoint_admitted_total', { ...cp('lim'), queued: 'false' }, 2],
      ['sluice_front_checkpoint_admitted_total', { ...cp('lim'), queued: 'true' }, 0],
      ['sluice_front_checkpoint_held_total', cp('lim'), 2],
      ['sluice_front_checkpoint_rejected_total', { ...cp('lim'), reason: 'queue_full' }, 1],
      ['sluice_front_checkpoint_rejected_total', { ...cp('lim'), reason: 'max_delay' }, 0],
      ['sluice_front_checkpoint_rejected_total', { ...cp('lim'), reason: 'held_pool_full' }, 0],
      ['sluice_front_checkpoint_queue_length', cp('lim'), 2],
      ['sluice_front_checkpoint_queue_max_length', cp('lim'), 2],
      ['sluice_front_checkpoint_table_entries', cp('lim'), 1],
      ['sluice_front_checkpoint_table_capacity', cp('lim'), 8],
      ['sluice_front_checkpoint_table_events_total', { ...cp('lim'), event: 'created' }, 1],
      ['sluice_front_shaping_held', {}, 2],
      ['sluice_front_shaping_held_max', {}, cfg.shaping.maxHeld],
      ['sluice_front_shaping_events_total', { event: 'evaluated' }, 8],
      ['sluice_front_shaping_events_total', { event: 'steered' }, 3],
    ]);
    const wait = p.sum('sluice_front_checkpoint_queue_oldest_wait_seconds', cp('lim'));
    assert.ok(wait >= 0 && wait < 60, `oldest wait ${wait}`);
    assert.ok(p.sum('sluice_front_checkpoint_table_memory_bytes', cp('lim')) > 0);
    // Counter rules have no queue: no queue series; only steering rules have a steered series.
    assert.equal(p.has('sluice_front_checkpoint_queue_length', cp('rate')), false);
    assert.equal(p.has('sluice_front_checkpoint_steered_total', cp('rate')), false);
    for (const s of p.samples) assert.ok(!Object.values(s.labels).some((v) => /^\d+\.\d+\.\d+\.\d+$/.test(v)), `no address labels: ${s.name}`);

    // The queue's timer: the first held SYN is admitted once the rate
    // allows (about 1 s), the second reaches its 1.5 s deadline first.
    runTimers(t0 + 5000);
    p = await scrape(r);
    expectRows(p, [
      ['sluice_front_checkpoint_admitted_total', { ...cp('lim'), queued: 'true' }, 1],
      ['sluice_front_checkpoint_rejected_total', { ...cp('lim'), reason: 'max_delay' }, 1],
      ['sluice_front_checkpoint_queue_length', cp('lim'), 0],
      ['sluice_front_checkpoint_queue_oldest_wait_seconds', cp('lim'), 0],
      ['sluice_front_shaping_held', {}, 0],
    ]);

    // Idle keys past table.expireSeconds are swept (expired), and a full
    // table evicts its least recently used idle key to admit a new one.
    engine.shaper!.sweep(t0 + 120_000, 100);
    for (let k = 0; k < 9; k++) syns(`198.18.12.${k + 1}`, 1, t0 + 121_000);
    p = await scrape(r);
    expectRows(p, [
      ['sluice_front_checkpoint_table_events_total', { ...cp('lim'), event: 'expired' }, 1],
      ['sluice_front_checkpoint_table_events_total', { ...cp('lim'), event: 'evicted' }, 1],
      ['sluice_front_checkpoint_table_entries', cp('lim'), 8],
    ]);
  });

  it('a reload that rebuilds the checkpoints keeps their counts (counters stay monotonic)', async () => {
    const before = await scrape(r);
    const next = makeShaper();
    next.inheritCounts(engine.shaper!);
    engine.setShaper(next);
    const after = await scrape(r);
    for (const name of ['sluice_front_checkpoint_matched_total', 'sluice_front_checkpoint_steered_total', 'sluice_front_checkpoint_rejected_total', 'sluice_front_checkpoint_table_events_total', 'sluice_front_shaping_events_total']) {
      assert.equal(after.sum(name), before.sum(name), name);
      assert.ok(after.sum(name) > 0, name);
    }
    // Tables start afresh: no keys.
    assert.equal(after.sum('sluice_front_checkpoint_table_entries'), 0);
  });
});

// --- DNS: a real DnsDaemon (not listening) answering queries built here ---------

const u16 = (v: number): number[] => [(v >> 8) & 0xff, v & 0xff];
function dnsQuery(name: string, qtype = 1, id = 1): Buffer {
  const labels = name.split('.').flatMap((l) => [l.length, ...Buffer.from(l, 'latin1')]);
  return Buffer.from([...u16(id), ...u16(0x0100), ...u16(1), 0, 0, 0, 0, 0, 0, ...labels, 0, ...u16(qtype), ...u16(1)]);
}

describe('dns metrics from the answerer, steering and tables', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-metrics-'));
  writeFileSync(join(dir, 'z.zone'), '$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 h 1 3600 600 86400 60\n IN NS ns1\nns1 IN A 198.18.2.2\n');
  writeFileSync(
    join(dir, 'dns.yaml'),
    `name: dns1
listen: ["127.0.0.1:53"]
zones: [{ file: ${join(dir, 'z.zone')} }]
clusters: [{ name: c1, vips: [198.19.1.1] }, { name: c2, vips: [198.19.2.1] }]
steering: { names: [{ name: www.example.test, policy: capacity, answers: 2 }] }
rrl: { enabled: false }
adminSocket: ${join(dir, 'dns.sock')}
`,
  );
  const d = new DnsDaemon(join(dir, 'dns.yaml'));
  const r = new Registry();
  registerDnsMetrics(r, { daemon: d, control: () => undefined, admin: () => ({ handled: 3, rejected: 0 }), ops: () => undefined });
  const ask = (name: string, qtype = 1, source = '198.18.11.2'): number => d.answerer.respond(...((q) => [q, q.length] as const)(dnsQuery(name, qtype)), source, false, performance.now());

  it('counts answers by rcode, steered answers by chosen cluster and the fallback', async () => {
    // No cluster has reported: steered answers come from the fallback (all VIPs).
    for (let i = 0; i < 2; i++) assert.ok(ask('www.example.test') > 0);
    const now = performance.now();
    d.clusters.receive({ cluster: 'c1', vips: [], capacity: 100, load: 10, available: 90, serversUp: 3, serversTotal: 3 }, now);
    d.clusters.receive({ cluster: 'c2', vips: [], capacity: 100, load: 10, available: 90, serversUp: 3, serversTotal: 3, role: 'master' }, now, 'c2-a');
    d.clusters.receive({ cluster: 'c2', vips: [], capacity: 100, load: 10, available: 95, serversUp: 3, serversTotal: 3, role: 'backup' }, now, 'c2-b');
    d.answerer.steering.changed();
    for (let i = 0; i < 3; i++) assert.ok(ask('www.example.test', 1, `198.18.${20 + i}.2`) > 0);
    ask('ns1.example.test');
    ask('nope.example.test');
    ask('ns1.example.test', 28); // NODATA
    ask('www.other.test'); // REFUSED
    ask('x'); // REFUSED
    d.answerer.respond(Buffer.from([1, 2, 3]), 3, '198.18.11.2', false, performance.now()); // too short: ignored
    const p = await scrape(r);
    expectRows(p, [
      ['sluice_dns_info', { name: 'dns1' }, 1],
      ['sluice_dns_cluster_node_source', { cluster: 'c2', node: 'c2-a' }, 1],
      ['sluice_dns_cluster_available', { cluster: 'c2' }, 90],
      ['sluice_dns_cluster_nodes_replaced_total', {}, 0],
      ['sluice_dns_queries_total', { transport: 'udp' }, 11],
      ['sluice_dns_responses_total', { rcode: 'NOERROR' }, 7],
      ['sluice_dns_responses_total', { rcode: 'NXDOMAIN' }, 1],
      ['sluice_dns_responses_total', { rcode: 'REFUSED' }, 2],
      ['sluice_dns_noerror_responses_total', { kind: 'nodata' }, 1],
      ['sluice_dns_queries_dropped_total', { reason: 'ignored' }, 1],
      ['sluice_dns_malformed_queries_total', { reason: 'short' }, 1],
      ['sluice_dns_steered_responses_total', {}, 5],
      ['sluice_dns_steered_fallback_total', {}, 2],
      // answers: 2 -> each steered answer holds both clusters.
      ['sluice_dns_steered_answers_total', { cluster: 'c1' }, 3],
      ['sluice_dns_steered_answers_total', { cluster: 'c2' }, 3],
      ['sluice_dns_cluster_capacity', { cluster: 'c1' }, 100],
      ['sluice_dns_cluster_utilization', { cluster: 'c2' }, 0.1],
      ['sluice_dns_cluster_state', { cluster: 'c1', state: 'up' }, 1],
      ['sluice_dns_cluster_reports_total', { cluster: 'c2' }, 2], // one report from each node of its pair
      ['sluice_dns_admin_requests_total', { result: 'handled' }, 3],
      ['sluice_dns_table_entries', { table: 'rtt' }, 0],
    ]);
    assert.equal(p.sum('sluice_dns_steering_decisions_total'), d.answerer.steering.decisions);
    assert.ok(p.sum('sluice_dns_steering_decisions_total', { reason: 'fallback' }) >= 1);
    assert.ok(p.sum('sluice_dns_steering_decisions_total', { reason: 'capacity-weighted' }) >= 1);
  });

  it('worker processes: no samples in a single process; with workers, the pool\'s counts', async () => {
    assert.equal((await scrape(r)).has('sluice_dns_workers', { of: 'alive' }), false, 'no pool, no sample');
    const pool = { count: 3, alive: 2, died: 4, replaced: 3, sendFailed: 1 };
    // The same daemon, seen with a pool (the primary of `workers: 3`).
    const primary = new Proxy(d, { get: (t, k) => (k === 'pool' ? pool : (Reflect.get(t, k, t) as unknown)) });
    const r2 = new Registry();
    registerDnsMetrics(r2, { daemon: primary, control: () => undefined, admin: () => undefined, ops: () => undefined });
    expectRows(await scrape(r2), [
      ['sluice_dns_workers', { of: 'configured' }, 3],
      ['sluice_dns_workers', { of: 'alive' }, 2],
      ['sluice_dns_workers_died_total', {}, 4],
      ['sluice_dns_workers_replaced_total', {}, 3],
      ['sluice_dns_worker_messages_lost_total', {}, 1],
    ]);
  });

  it('RTT results land in the per-cluster histogram and no-reply counter', async () => {
    const now = performance.now();
    d.rtt.expect('198.18.30.1', '4:198.18.30.0/24');
    d.rtt.expect('198.18.31.1', '4:198.18.31.0/24');
    d.rtt.receive(0, { cluster: 'c1', results: [{ target: '198.18.30.1', sent: 3, received: 3, rttMs: 20 }, { target: '198.18.31.1', sent: 3, received: 0, rttMs: null }, { target: '203.0.113.9', sent: 3, received: 3, rttMs: 5 }] }, now);
    const p = await scrape(r);
    // 203.0.113.9 was asked for by another DNS server: filed under its own prefix (shared), not dropped.
    expectRows(p, [
      ['sluice_dns_rtt_seconds_count', { cluster: 'c1' }, 2],
      ['sluice_dns_rtt_seconds_bucket', { cluster: 'c1', le: '0.025' }, 2],
      ['sluice_dns_rtt_seconds_bucket', { cluster: 'c1', le: '0.01' }, 1],
      ['sluice_dns_rtt_seconds_count', { cluster: 'c2' }, 0],
      ['sluice_dns_rtt_no_reply_total', { cluster: 'c1' }, 1],
      ['sluice_dns_rtt_results_total', { outcome: 'applied' }, 2],
      ['sluice_dns_rtt_results_total', { outcome: 'shared' }, 1],
      ['sluice_dns_rtt_results_total', { outcome: 'unknown_target' }, 0],
      ['sluice_dns_table_entries', { table: 'rtt' }, 3],
    ]);
  });

  it('steering counts survive a reload (counters stay monotonic)', async () => {
    const before = (await scrape(r)).sum('sluice_dns_steering_decisions_total');
    assert.ok(before > 0);
    assert.equal(d.reload(), true);
    const p = await scrape(r);
    assert.equal(p.sum('sluice_dns_steering_decisions_total'), before);
    assert.equal(p.sum('sluice_dns_reloads_total', { result: 'applied' }), 1);
  });

  it('CH identity queries by name and result, in the responses by rcode too; counts survive a reload', async () => {
    const ch = (name: string, qtype = 16): number => {
      const q = dnsQuery(name, qtype);
      q.writeUInt16BE(3, q.length - 2); // class CH
      return d.answerer.respond(q, q.length, '198.18.11.2', false, performance.now());
    };
    const before = await scrape(r);
    assert.ok(ch('id.server') > 0);
    assert.ok(ch('version.bind') > 0);
    ch('id.server', 1); // a type other than TXT: REFUSED
    ch('authors.bind'); // not an identity name: REFUSED
    assert.equal(d.reload(), true);
    ch('hostname.bind');
    const p = await scrape(r);
    expectRows(p, [
      ['sluice_dns_identity_queries_total', { name: 'id.server', result: 'answered' }, 1],
      ['sluice_dns_identity_queries_total', { name: 'id.server', result: 'refused' }, 1],
      ['sluice_dns_identity_queries_total', { name: 'version.bind', result: 'answered' }, 1],
      ['sluice_dns_identity_queries_total', { name: 'hostname.bind', result: 'answered' }, 1],
      ['sluice_dns_identity_queries_total', { name: 'version.server', result: 'answered' }, 0],
      ['sluice_dns_identity_queries_total', { name: 'other', result: 'refused' }, 1],
    ]);
    assert.equal(p.sum('sluice_dns_responses_total', { rcode: 'REFUSED' }) - before.sum('sluice_dns_responses_total', { rcode: 'REFUSED' }), 2);
    assert.equal(p.sum('sluice_dns_responses_total', { rcode: 'NOERROR' }) - before.sum('sluice_dns_responses_total', { rcode: 'NOERROR' }), 3);
  });
});

describe('agent metrics', () => {
  it('renders reports, last load figures and access-log counters', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-metrics-agent-'));
    writeFileSync(join(dir, 'agent.yaml'), `name: s1a\naddress: 198.18.201.11\nfront: { endpoint: 'tcp://198.18.201.1:7101' }\ncontrol: { plaintext: true }\naccessLog: { path: ${join(dir, 'access.log')} }\n`);
    const a = new AgentDaemon(join(dir, 'agent.yaml'));
    try {
      const r = new Registry();
      registerAgentMetrics(r, { daemon: a, control: () => undefined, ops: () => undefined });
      let p = await scrape(r);
      assert.equal(p.has('sluice_agent_utilization'), false, 'no load report yet: no figure');
      a.reportsSent = 4;
      a.requestReportsSent = 2;
      a.sampleErrors = 1;
      Object.assign(a.follower.counters, { lines: 10, requests: 8, requestsIpv6: 3, garbage: 1, badAddress: 2, zoneId: 1, partial: 1, rotations: 1 });
      p = await scrape(r);
      expectRows(p, [
        ['sluice_agent_info', { server: 's1a', source: 'cpu' }, 1],
        ['sluice_agent_reports_total', { type: 'load_report' }, 4],
        ['sluice_agent_reports_total', { type: 'request_rate' }, 2],
        ['sluice_agent_load_sample_errors_total', {}, 1],
        ['sluice_agent_access_log_lines_total', {}, 10],
        ['sluice_agent_access_log_requests_total', {}, 8],
        ['sluice_agent_access_log_requests_ipv6_total', {}, 3],
        ['sluice_agent_access_log_rejected_lines_total', { reason: 'garbage' }, 1],
        ['sluice_agent_access_log_rejected_lines_total', { reason: 'bad_address' }, 2],
        ['sluice_agent_access_log_rejected_lines_total', { reason: 'zone_id' }, 1],
        ['sluice_agent_access_log_events_total', { event: 'rotation' }, 1],
        ['sluice_agent_health', { server: 's1a', state: 'up' }, 1],
        ['sluice_agent_health', { server: 's1a', state: 'drain' }, 0],
        ['sluice_agent_health_transitions_total', {}, 0],
        ['sluice_agent_state_file_events_total', { event: 'rejected' }, 0],
      ]);
      a.health = { state: 'maint', reason: 'operator set maint', since: 0, transitions: 1 };
      a.healthReports = 1;
      a.operator.counters.rejected = 2;
      a.checker.counters.checks = 5;
      a.checker.counters.failures = 2;
      expectRows(await scrape(r), [
        ['sluice_agent_health', { server: 's1a', state: 'up' }, 0],
        ['sluice_agent_health', { server: 's1a', state: 'maint' }, 1],
        ['sluice_agent_health_transitions_total', {}, 1],
        ['sluice_agent_reports_at_once_total', { why: 'health' }, 1],
        ['sluice_agent_reports_at_once_total', { why: 'connect' }, 0],
        ['sluice_agent_health_checks_total', { result: 'passed' }, 3],
        ['sluice_agent_health_checks_total', { result: 'failed' }, 2],
        ['sluice_agent_state_file_events_total', { event: 'rejected' }, 2],
      ]);
      assert.deepEqual(a.status()['reports'], { load: 4, requestRate: 2, sampleErrors: 1 });
    } finally {
      await a.stop();
    }
  });
});
