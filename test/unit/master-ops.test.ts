/**
 * `sluice master`'s ops HTTP server (http.listen): GET /metrics with the
 * sluice_master_* set read from the master's own counters at scrape time,
 * checked with the strict exposition checker, GET /status (the admin
 * socket's status), a bind failure that names http.listen and leaves no
 * socket of the master behind, and a reload that keeps http for a restart.
 * On loopback with real CURVE sockets and a real gatekeeper.
 */
import type { MasterStatus } from '../../src/throttle/status.ts';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { HttpListenError } from '../../src/http/ops_server.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { MasterDaemon } from '../../src/throttle/daemon.ts';
import { ACCEPTED, Gatekeeper, REJECTED } from '../../src/throttle/gatekeeper.ts';
import { Master } from '../../src/throttle/master.ts';
import { parsePromText, type PromText } from '../helpers/prom_text.ts';
import { ends, freePort, gatekeeperConfig, keyDir, masterConfig, NO_WORDS } from '../helpers/throttle.ts';
import { until } from '../helpers/wait.ts';

const log = componentLogger('master-ops-test');
const CLIENT = '198.51.100.7';
const stops: (() => unknown)[] = [];
after(async () => {
  for (const s of stops.reverse()) await s();
});

async function get(port: number, path: string): Promise<{ status: number; type: string; body: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, type: r.headers.get('content-type') ?? '', body: await r.text() };
}

async function scrape(port: number): Promise<PromText> {
  const r = await get(port, '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.type, /^text\/plain/);
  return parsePromText(r.body);
}

/** Writes a master config file with http.listen on `httpPort` and starts the daemon. */
async function startDaemon(name: string, e: ReturnType<typeof ends>, httpPort: number, domains: unknown[]): Promise<{ daemon: MasterDaemon; file: string; base: ReturnType<typeof masterConfig> }> {
  const file = join(keyDir, `${name}.yaml`);
  const base = masterConfig(name, e, domains, { kind: 'memory' }, { http: { listen: `127.0.0.1:${httpPort}` } });
  writeFileSync(file, JSON.stringify(base));
  const daemon = new MasterDaemon(file);
  await daemon.start();
  stops.push(() => daemon.stop());
  return { daemon, file, base };
}

describe('sluice master: /metrics and /status over HTTP', () => {
  it('serves its counters as sluice_master_*, read at scrape time, with bounded labels', async () => {
    const e = ends();
    const port = freePort();
    const { daemon } = await startDaemon('m-ops', e, port, [{ name: 'www', requests: 1, periodSeconds: 1, burst: 2 }, { name: 'api', requests: 100 }]);
    // Before any traffic: the series exist at zero.
    let p = await scrape(port);
    assert.equal(p.sum('sluice_master_info', { name: 'm-ops', store: 'memory' }), 1);
    assert.equal(p.sum('sluice_master_requests_total', { domain: 'www', outcome: 'accepted' }), 0);
    assert.equal(p.sum('sluice_master_accounting_received_total'), 0);
    assert.ok(p.has('process_cpu_seconds_total'), 'default process metrics');

    const g = await Gatekeeper.start(gatekeeperConfig('gk1', [e], [{ name: 'www' }, { name: 'api' }]), log);
    stops.push(() => {
      g.stop();
    });
    await until(() => g.resynced, 'the gatekeeper resynced with the master');
    const d = g.domain('www')!;
    const key = g.keyOf(d, parseIPv4Address(CLIENT)!, NO_WORDS, 0);
    const now = Date.now();
    for (let i = 0; i < 3; i++) g.account(ACCEPTED, d, key, NO_WORDS, 0, now);
    g.account(REJECTED, d, key, NO_WORDS, 0, now);
    const m = daemon.master!;
    await until(() => m.domains.get('www')!.counters.rejected === 1 && m.counters.charged === 3, 'the master charged 3 and counted the rejection');
    await until(() => g.delayFor(d, key, Date.now()) > 0, 'the delay came back');
    // A malformed message (no topic terminator), counted by reason.
    m.handle([Buffer.from('www'), Buffer.from('ACCEPTED'), Buffer.from(CLIENT), Buffer.from(String(Date.now()))]);

    p = await scrape(port);
    const rows: [string, Record<string, string>, number][] = [
      ['sluice_master_requests_total', { domain: 'www', outcome: 'accepted' }, 3],
      ['sluice_master_requests_total', { domain: 'www', outcome: 'delayed' }, 0],
      ['sluice_master_requests_total', { domain: 'www', outcome: 'rejected' }, 1],
      ['sluice_master_requests_total', { domain: 'api', outcome: 'accepted' }, 0],
      ['sluice_master_charges_total', {}, 3],
      ['sluice_master_identifiers', { domain: 'www' }, 1],
      ['sluice_master_identifiers', { domain: 'api' }, 0],
      ['sluice_master_accounting_refused_total', { reason: 'topic' }, 1],
      ['sluice_master_accounting_received_total', {}, m.counters.received],
      ['sluice_master_resyncs_total', { domain: 'www' }, m.domains.get('www')!.counters.resyncs],
      ['sluice_master_delays_total', { domain: 'www', source: 'charge' }, m.domains.get('www')!.counters.published],
      ['sluice_master_store_errors_total', {}, 0],
      ['sluice_master_publish_total', { result: 'dropped' }, 0],
      ['sluice_master_zap_handshakes_total', { socket: 'accounting', result: 'refused' }, 0],
      // The first scrape (a request is counted once answered, so not this one).
      ['sluice_master_http_requests_total', { route: '/metrics', code: '200' }, 1],
    ];
    for (const [name, labels, value] of rows) {
      assert.ok(p.has(name, labels), `${name}${JSON.stringify(labels)} missing`);
      assert.equal(p.sum(name, labels), value, `${name}${JSON.stringify(labels)}`);
    }
    assert.ok(p.sum('sluice_master_delays_total', { domain: 'www', source: 'charge' }) >= 1, 'the third request of a burst of 2 set a delay');
    assert.ok(p.sum('sluice_master_publish_total', { result: 'sent' }) >= 1);
    assert.ok(p.sum('sluice_master_zap_handshakes_total', { socket: 'accounting', result: 'accepted' }) >= 1);
    assert.ok(p.sum('sluice_master_resyncs_total', { domain: 'www' }) >= 1);
    // No identifier (client address) in any label.
    for (const s of p.samples) for (const v of Object.values(s.labels)) assert.ok(!v.includes(CLIENT), `${s.name} carries the client address`);
  });

  it('GET /status is the admin socket\'s status as JSON; other paths 404', async () => {
    const port = freePort();
    const { daemon } = await startDaemon('m-status', ends(), port, [{ name: 'www', requests: 5 }]);
    const r = await get(port, '/status');
    assert.equal(r.status, 200);
    assert.match(r.type, /^application\/json/);
    const s = JSON.parse(r.body) as MasterStatus;
    const direct = daemon.status() as MasterStatus;
    assert.equal(s.name, 'm-status');
    assert.equal(s.store, 'memory');
    assert.deepEqual(s.domains, direct.domains);
    assert.equal(s.reloads, 0);
    assert.equal((await get(port, '/nope')).status, 404);
  });

  it('a taken http.listen fails the start naming the key, and the master\'s sockets are closed again', async () => {
    const port = freePort();
    await startDaemon('m-first', ends(), port, [{ name: 'www', requests: 5 }]);
    const e = ends();
    const file = join(keyDir, 'm-second.yaml');
    writeFileSync(file, JSON.stringify(masterConfig('m-second', e, [{ name: 'www', requests: 5 }], { kind: 'memory' }, { http: { listen: `127.0.0.1:${port}` } })));
    const second = new MasterDaemon(file);
    await assert.rejects(second.start(), (err: unknown) => err instanceof HttpListenError && /http\.listen 127\.0\.0\.1:\d+: EADDRINUSE/.test(err.message));
    // The failed daemon's accounting and publish endpoints are free again.
    // ZeroMQ closes a socket's listener in its I/O thread after close()
    // returns, so the port comes free shortly after, not at once (CI saw
    // EADDRINUSE on an immediate bind): bind again until it works, bounded;
    // a socket left open would keep failing.
    let m: Master | undefined;
    await until(async () => {
      try {
        m = await Master.start(masterConfig('m-again', e, [{ name: 'www', requests: 5 }]), log);
        return true;
      } catch (err) {
        if ((err as { code?: string }).code !== 'EADDRINUSE') throw err;
        return false;
      }
    }, 'the failed master\'s endpoints are free again', 5000, 50);
    await m?.stop();
  });

  it('a reload that changes http.listen is applied otherwise, and keeps serving where it was', async () => {
    const port = freePort();
    const { daemon, file, base } = await startDaemon('m-reload', ends(), port, [{ name: 'www', requests: 5 }]);
    writeFileSync(file, JSON.stringify({ ...base, http: { listen: `127.0.0.1:${freePort()}` }, domains: [...base.domains, { name: 'api', requests: 2 }] }));
    assert.equal(daemon.reload(), true);
    assert.equal(daemon.master!.config.http?.listen, `127.0.0.1:${port}`, 'http keeps its running value');
    const p = await scrape(port);
    assert.equal(p.sum('sluice_master_reloads_total', { result: 'applied' }), 1);
    assert.ok(p.has('sluice_master_requests_total', { domain: 'api', outcome: 'accepted' }), 'the added domain is exposed');
  });
});
