/**
 * The health metrics of the front node (src/front/metrics.ts), read at
 * scrape time: per-server health state and slow start share, transitions
 * by the state entered, check results by outcome, checks in flight.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable } from '../../src/front/connections.ts';
import { buildServices } from '../../src/front/daemon.ts';
import { EngineCounters, FrontEngine } from '../../src/front/engine.ts';
import { shedCounts } from '../../src/front/shed.ts';
import { HealthChecker } from '../../src/front/health/checker.ts';
import { pino } from 'pino';
import { registerFrontMetrics, type FrontMetricsSource } from '../../src/front/metrics.ts';
import { FlowExpiry } from '../../src/front/flow-expiry.ts';
import { parsePromText } from '../helpers/prom_text.ts';

describe('front metrics: health', () => {
  it('state gauge per server, share, transitions by to, check outcomes, in flight', async () => {
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
    health: { kind: tcp }
    servers:
      - { name: a, address: 198.18.201.11 }
      - { name: b, address: 198.18.201.12 }
`,
      't',
    );
    const services = buildServices(cfg);
    const table = new ConnectionTable(100, 1000, { released: () => undefined });
    const engine = new FrontEngine(services, table);
    const health = new HealthChecker({ now: () => 0 });
    health.outcomes.ok = 7;
    health.outcomes.refused = 2;
    const transitions = { up: 1, down: 2, drain: 0, maint: 0 };
    const expiry = new FlowExpiry(() => Promise.resolve({ matched: 0, deleted: 0, gone: 0 }), pino({ level: 'silent' }));
    Object.assign(expiry, { runs: 2, failures: 1, deleted: 7, gone: 1 });
    const src: FrontMetricsSource = {
      config: cfg,
      engine,
      table,
      queueStats: () => undefined,
      logStats: () => undefined,
      kernelQueue: () => undefined,
      adminCounts: () => ({ handled: 0, rejected: 0 }),
      rulesHealth: () => ({ checks: 0, repaired: 0, repairFailures: 0, checkFailures: 0, failingRepairs: 0, lastRepair: null, unchanged: 0, nftDumpMs: 0, wholeInstalls: 0, elementUpdates: 0 }),
      control: () => undefined,
      ops: () => undefined,
      gatekeeper: () => undefined,
      overrides: { status: () => ({ stateFile: '/x', count: 0, staleTotal: 0, lastStale: [], stateFileErrors: 0, error: null }) },
      vipGuardCount: () => ({ packets: 0, bytes: 0 }), vipGuardCount6: () => ({ packets: 0, bytes: 0 }), tableCounts: () => ({ fallbackFlows: { ipv4: 0, ipv6: 0 }, strayReplies: { ipv4: 0, ipv6: 0 } }),
      fallbackStatus: () => ({ writes: 0, writeFailures: 0, usableServers: 0, elements: 0 }), scheduleStatus: () => ({ services: 0, writes: 0, writeFailures: 0, rewrites: 0, elements: 0, queued: 0 }), shed: () => shedCounts(new EngineCounters(), 0, 0),
      health,
      healthTransitions: transitions,
      flowExpiry: expiry,
    };
    const r = new Registry();
    registerFrontMetrics(r, src);
    const b = services[0]!.servers[1]!;
    b.health.setCheck('down', 'connect refused (3 in a row)', 1);
    b.refreshUsable();
    services[0]!.servers[0]!.share = 0.4;
    const p = parsePromText(await r.metrics());
    const rows: [string, Record<string, string>, number][] = [
      ['sluice_front_server_health', { server: 'a', state: 'up' }, 1],
      ['sluice_front_server_health', { server: 'a', state: 'down' }, 0],
      ['sluice_front_server_health', { server: 'b', state: 'down' }, 1],
      ['sluice_front_server_health', { server: 'b', state: 'up' }, 0],
      ['sluice_front_server_state', { server: 'b', state: 'down' }, 1],
      ['sluice_front_server_slow_start_share', { server: 'a' }, 0.4],
      ['sluice_front_server_slow_start_share', { server: 'b' }, 1],
      ['sluice_front_health_transitions_total', { to: 'down' }, 2],
      ['sluice_front_health_transitions_total', { to: 'maint' }, 0],
      ['sluice_front_health_checks_total', { outcome: 'ok' }, 7],
      ['sluice_front_health_checks_total', { outcome: 'refused' }, 2],
      ['sluice_front_health_checks_total', { outcome: 'timeout' }, 0],
      ['sluice_front_health_checks_in_flight', {}, 0],
      ['sluice_front_cluster_servers', { usable: 'false' }, 1],
      ['sluice_front_flow_expiries_total', { result: 'ok' }, 2],
      ['sluice_front_flow_expiries_total', { result: 'failed' }, 1],
      ['sluice_front_flows_expired_total', { outcome: 'deleted' }, 7],
      ['sluice_front_flows_expired_total', { outcome: 'gone' }, 1],
    ];
    for (const [name, labels, value] of rows) {
      assert.ok(p.has(name, labels), `${name}${JSON.stringify(labels)} missing`);
      assert.equal(p.sum(name, labels), value, `${name}${JSON.stringify(labels)}`);
    }
    transitions.down = 3;
    assert.equal(parsePromText(await r.metrics()).sum('sluice_front_health_transitions_total', { to: 'down' }), 3, 'read at scrape time');
  });
});
