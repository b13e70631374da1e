/**
 * The front-node pair's metrics (src/front/metrics.ts, registerHaMetrics):
 * the role (1 for the current), transitions by role entered, mismatches,
 * and conntrackd's figures only while they are readable; read at scrape time.
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
import { HaRoleMachine } from '../../src/front/ha/role.ts';
import { SyncStateReader } from '../../src/front/ha/sync-state.ts';
import { registerFrontMetrics, type FrontMetricsSource } from '../../src/front/metrics.ts';
import { parsePromText } from '../helpers/prom_text.ts';

const STATS = `cache internal:
current active connections:\t           4
cache external:
current active connections:\t           3

UDP traffic (active device=sync0):
                 740 Bytes sent                  176 Bytes recv
                  20 Pckts sent                   11 Pckts recv
                   0 Error send                    1 Error recv

message tracking:
                   0 Malformed msgs                    6 Lost msgs
`;

describe('ha metrics', () => {
  it('role, transitions, mismatches and sync figures, read at scrape time', async () => {
    const cfg = parseConfig(frontConfigSchema, 'cluster: c1\nuplinkAddress: 198.18.101.2\nservices:\n  - { name: www, vip: 198.19.1.1, port: 80, method: byrequests, servers: [{ name: a, address: 198.18.201.11 }] }\n', 't');
    const services = buildServices(cfg);
    const table = new ConnectionTable(100, 1000, { released: () => undefined });
    const ha = new HaRoleMachine(true, 900, 0);
    let out: () => Promise<string> = () => Promise.reject(new Error('connect: No such file or directory'));
    const sync = new SyncStateReader('/c', { run: () => out() });
    const src: FrontMetricsSource = {
      config: cfg,
      engine: new FrontEngine(services, table),
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
      ha,
      sync,
    };
    const r = new Registry();
    registerFrontMetrics(r, src);
    await sync.read();
    let p = parsePromText(await r.metrics());
    const rows: [string, Record<string, string>, number][] = [
      ['sluice_front_ha_role', { role: 'backup' }, 1],
      ['sluice_front_ha_role', { role: 'master' }, 0],
      ['sluice_front_ha_role', { role: 'single' }, 0],
      ['sluice_front_ha_transitions_total', { to: 'master' }, 0],
      ['sluice_front_ha_role_mismatch_total', {}, 0],
      ['sluice_front_ha_sync_readable', {}, 0],
    ];
    for (const [name, labels, value] of rows) assert.equal(p.sum(name, labels), value, `${name}${JSON.stringify(labels)}`);
    assert.equal(p.has('sluice_front_ha_sync_flows', { cache: 'internal' }), false, 'no figure while unreadable');

    ha.notify('master', 'keepalived', 1);
    ha.observe(false, 10);
    ha.observe(false, 1000);
    out = () => Promise.resolve(STATS);
    await sync.read();
    p = parsePromText(await r.metrics());
    const after: [string, Record<string, string>, number][] = [
      ['sluice_front_ha_role', { role: 'master' }, 1],
      ['sluice_front_ha_role', { role: 'backup' }, 0],
      ['sluice_front_ha_transitions_total', { to: 'master' }, 1],
      ['sluice_front_ha_role_mismatch_total', {}, 1],
      ['sluice_front_ha_sync_readable', {}, 1],
      ['sluice_front_ha_sync_flows', { cache: 'internal' }, 4],
      ['sluice_front_ha_sync_flows', { cache: 'external' }, 3],
      ['sluice_front_ha_sync_packets', { direction: 'sent' }, 20],
      ['sluice_front_ha_sync_errors', { kind: 'lost' }, 6],
      ['sluice_front_ha_sync_errors', { kind: 'receive' }, 1],
    ];
    for (const [name, labels, value] of after) assert.equal(p.sum(name, labels), value, `${name}${JSON.stringify(labels)}`);
  });
});
