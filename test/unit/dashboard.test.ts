import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { AdminSocket } from '../../src/admin/socket.ts';
import { parseDashboardArgs } from '../../src/cli/dashboard.ts';
import { pageHtml } from '../../src/dashboard/page.ts';
import { Poller } from '../../src/dashboard/poller.ts';
import { DashboardServer } from '../../src/dashboard/server.ts';
import { MAX_STATUS_BYTES, parseSource, type StatusSource } from '../../src/dashboard/source.ts';
import { RATE_WINDOW_MS, SiteState, type ClusterView, type DashboardState } from '../../src/dashboard/state.ts';
import { InvalidArgumentError } from '../../src/errors/errors.ts';
import { componentLogger } from '../../src/log/logger.ts';

const quiet = componentLogger('test-dashboard').child({}, { level: 'silent' });

/** A front node's status, shaped as src/front/daemon.ts status() answers it. */
function front(cluster: string, decided: Record<string, number>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const total = Object.values(decided).reduce((a, b) => a + b, 0);
  return {
    cluster,
    counters: { decided: total, overflowed: 0 },
    records: { active: 2 },
    services: [{ name: 'www', overflowed: 0, servers: Object.entries(decided).map(([name, d]) => ({ name, state: 'active', active: 1, decided: d, capacity: 10, estimated: false, rate: 0 })), overflow: [] }],
    ...extra,
  };
}

function dns(queries: number, recent: unknown[] = []): Record<string, unknown> {
  return {
    name: 'dns',
    zones: [],
    counters: { queries, steered: queries },
    clusters: [
      { name: 'c1', state: 'up', vips: ['198.19.1.1'], capacity: 300, load: 10, available: 290, serversUp: 3, serversTotal: 3 },
      { name: 'c2', state: 'down', vips: ['198.19.2.1'], capacity: 0, load: 0, available: 0, serversUp: 0, serversTotal: 3 },
    ],
    steering: { decisions: queries, reasons: { rtt: queries }, recent },
    highRate: { tracked: 1, clients: [{ prefix: '198.18.11.0/24', rate: 9, cluster: 'c1', ageSeconds: 1 }] },
  };
}

function cluster(s: DashboardState, name: string): ClusterView {
  const c = s.clusters.find((x) => x.name === name);
  assert.ok(c, `cluster ${name} on the map`);
  return c;
}

describe('dashboard state', () => {
  it('a front-node pair: one cluster, both nodes listed with role, peer and last failover; the master\'s figures shown', () => {
    const st = new SiteState([
      { name: 'fr1b', address: 'unix:/b' },
      { name: 'fr1a', address: 'unix:/a' },
    ]);
    const ha = (node: string, role: string, peer: string, lastFailover: unknown = null): Record<string, unknown> => ({ ha: { node, role, peer: { name: peer }, lastFailover } });
    st.record('fr1b', 0, { status: front('c1', { a: 0 }, ha('fr1b', 'backup', 'fr1a')) });
    st.record('fr1a', 0, { status: front('c1', { a: 42 }, ha('fr1a', 'master', 'fr1b', { at: '2026-01-01T00:00:00.000Z', from: 'backup', to: 'master', adopted: 7, corrected: 0 })) });
    const v = st.view(0);
    assert.equal(v.clusters.length, 1);
    const c1 = cluster(v, 'c1');
    assert.equal(c1.decided, 42, 'the master\'s figures');
    assert.equal(c1.source, 'fr1a');
    assert.deepEqual(
      c1.frontNodes.map((n) => [n.source, n.role, n.peer, n.lastFailover?.adopted ?? null]),
      [
        ['fr1a', 'master', 'fr1b', 7],
        ['fr1b', 'backup', 'fr1a', null],
      ],
    );
    assert.match(pageHtml('site'), /'data-testid': 'front-node', 'data-name': n\.source, 'data-role'/);
  });

  it('connections per second come from counter deltas over the window, per cluster and per server', () => {
    const st = new SiteState([{ name: 'f1', address: 'unix:/x' }]);
    st.record('f1', 0, { status: front('c1', { a: 10, b: 0 }) });
    let v = st.view(0);
    assert.equal(cluster(v, 'c1').connectionsPerSecond, null, 'one sample: rate unknown');
    assert.equal(cluster(v, 'c1').decided, 10);
    st.record('f1', 1000, { status: front('c1', { a: 20, b: 5 }) });
    st.record('f1', 2000, { status: front('c1', { a: 40, b: 10 }) });
    v = st.view(2000);
    const c1 = cluster(v, 'c1');
    assert.equal(c1.connectionsPerSecond, (50 - 10) / 2);
    assert.equal(c1.servers.find((s) => s.name === 'a')?.connectionsPerSecond, 15);
    assert.equal(c1.servers.find((s) => s.name === 'b')?.connectionsPerSecond, 5);
    assert.equal(c1.servers.find((s) => s.name === 'a')?.utilization, 0.1, 'active/capacity without an agent report');
    assert.equal(v.site.connectionsPerSecond, 20);
    assert.equal(v.site.decided, 50);
  });

  it('old samples leave the window; a counter that goes down (restart) resets the rate', () => {
    const st = new SiteState([{ name: 'f1', address: 'unix:/x' }]);
    for (let t = 0; t <= 10_000; t += 1000) st.record('f1', t, { status: front('c1', { a: t < 6000 ? 0 : (t - 5000) / 10 }) });
    // The window keeps the samples of 5000..10000 ms: 0 -> 500 connections in 5 s.
    assert.equal(RATE_WINDOW_MS, 5000);
    assert.equal(cluster(st.view(10_000), 'c1').connectionsPerSecond, 100);
    st.record('f1', 11_000, { status: front('c1', { a: 3 }) });
    assert.equal(cluster(st.view(11_000), 'c1').connectionsPerSecond, null, 'restarted: no rate from before the restart');
    st.record('f1', 12_000, { status: front('c1', { a: 7 }) });
    assert.equal(cluster(st.view(12_000), 'c1').connectionsPerSecond, 4);
  });

  it('a failing source is shown down; the other clusters and the DNS view go on', () => {
    const st = new SiteState([
      { name: 'f1', address: 'unix:/a' },
      { name: 'f2', address: 'unix:/b' },
      { name: 'd', address: 'http://127.0.0.1:1' },
      { name: 'never', address: 'unix:/c' },
    ]);
    st.record('f1', 0, { status: front('c1', { a: 1 }) });
    st.record('f2', 0, { status: front('c2', { x: 4 }) });
    st.record('d', 0, { status: dns(5) });
    st.record('never', 0, { error: 'cannot reach /c: ENOENT' });
    st.record('f2', 1000, { error: 'no reply within 800 ms' });
    st.record('f1', 1000, { status: front('c1', { a: 3 }) });
    st.record('d', 1000, { status: dns(15) });
    const v = st.view(1000);
    assert.deepEqual(v.clusters.map((c) => [c.name, c.frontUp, c.dnsState]), [['c1', true, 'up'], ['c2', false, 'down']]);
    assert.equal(cluster(v, 'c2').decided, null, 'no numbers from a front that is down');
    assert.deepEqual(cluster(v, 'c2').vips, ['198.19.2.1'], "DNS's VIPs fill in");
    assert.equal(v.site.decided, 3);
    assert.equal(v.site.clustersUp, 1);
    const src = new Map(v.sources.map((s) => [s.name, s]));
    assert.equal(src.get('f2')?.up, false);
    assert.equal(src.get('f2')?.error, 'no reply within 800 ms');
    assert.equal(src.get('f2')?.kind, 'front');
    assert.equal(src.get('never')?.kind, 'unknown');
    assert.equal(src.get('never')?.lastOkAgeSeconds, null);
    assert.equal(src.get('f1')?.failures, 0);
    assert.equal(v.dns[0]!.queriesPerSecond, 10);
    assert.equal(v.dns[0]!.highRate[0]?.client, '198.18.11.0/24');
  });

  it('DNS choices per client prefix and the merged top clients', () => {
    const st = new SiteState([
      { name: 'f1', address: 'unix:/a' },
      { name: 'f2', address: 'unix:/b' },
      { name: 'd', address: 'unix:/d' },
    ]);
    st.record('f1', 0, { status: front('c1', { a: 1 }, { control: { servers: [{ name: 'a', utilization: 0.7, down: false }], cluster: { capacity: 100, load: 70, available: 30, serversUp: 1, serversTotal: 1 }, topClients: [{ client: '198.18.11.2', rate: 3 }] } }) });
    st.record('f2', 0, { status: front('c2', { x: 1 }, { control: { servers: [{ name: 'x', utilization: 0.2, down: true }], cluster: {}, topClients: [{ client: '198.18.12.2', rate: 8 }, { client: 'bad' }] } }) });
    st.record('d', 0, { status: dns(1, [{ name: 'www.example.test', client: '198.18.11.0/24', answer: ['198.19.1.1'], clusters: ['c1'], reason: 'rtt', ageSeconds: 0.5 }, { nonsense: true }]) });
    const v = st.view(0);
    assert.deepEqual(v.topClients, [{ client: '198.18.12.2', rate: 8, cluster: 'c2' }, { client: '198.18.11.2', rate: 3, cluster: 'c1' }]);
    assert.deepEqual(v.dns[0]!.choices, [{ client: '198.18.11.0/24', name: 'www.example.test', answer: ['198.19.1.1'], clusters: ['c1'], reason: 'rtt', ageSeconds: 0.5 }]);
    assert.deepEqual(v.dns[0]!.reasons, { rtt: 1 });
    assert.equal(cluster(v, 'c1').servers[0]?.utilization, 0.7, "the agent's utilization wins");
    assert.equal(cluster(v, 'c1').capacity, 100);
    assert.equal(cluster(v, 'c2').servers[0]?.state, 'down', 'an agent the front counts down');
  });

  it('garbage from a source is read as missing fields, never thrown', () => {
    const st = new SiteState([{ name: 'f', address: 'unix:/a' }]);
    const bad: unknown[] = [null, 'text', [1, 2], 42, { services: 'no' }, { services: [null, { servers: [{ name: 7 }, null, { name: 'ok', decided: 'x' }] }], counters: [], control: 5 }, { zones: 1, steering: { recent: 'x', reasons: [] }, clusters: [null, { name: 1 }], highRate: 'x' }];
    for (const [i, s] of bad.entries()) {
      st.record('f', i * 1000, { status: s });
      const v = st.view(i * 1000);
      assert.ok(Array.isArray(v.clusters));
    }
    const v = st.view(10_000);
    assert.equal(v.sources[0]?.kind, 'dns');
    assert.equal(v.sources[0].failures, 4, 'non-objects count as failures');
  });
});

/** A source the test controls: a queue of answers (status object, Error, or 'hang'). */
class FakeSource implements StatusSource {
  readonly name: string;
  readonly address: string;
  readonly answers: (unknown)[];
  constructor(name: string, answers: unknown[]) {
    this.name = name;
    this.address = `fake:${name}`;
    this.answers = answers;
  }
  read(): Promise<unknown> {
    const a = this.answers.length > 1 ? this.answers.shift() : this.answers[0];
    if (a === 'hang') return new Promise(() => undefined);
    if (a instanceof Error) return Promise.reject(a);
    return Promise.resolve(a);
  }
}

describe('dashboard poller', () => {
  it('records every source each round, bounds a source that never answers, and never throws', async () => {
    let t = 0;
    const f1 = new FakeSource('f1', [front('c1', { a: 0 }), front('c1', { a: 10 })]);
    const f2 = new FakeSource('f2', [new Error('connection refused')]);
    const f3 = new FakeSource('f3', ['hang']);
    const p = new Poller([f1, f2, f3], { intervalMs: 1000, timeoutMs: 50, now: () => t });
    const seen: DashboardState[] = [];
    p.subscribe((s) => seen.push(s));
    await p.poll();
    t = 1000;
    const s = await p.poll();
    assert.equal(seen.length, 2);
    assert.equal(cluster(s, 'c1').connectionsPerSecond, 10);
    const src = new Map(s.sources.map((x) => [x.name, x]));
    assert.equal(src.get('f2')?.error, 'connection refused');
    assert.match(src.get('f3')?.error ?? '', /no status within 50 ms/);
    assert.equal(src.get('f3')?.polls, 2);
  });
});

describe('dashboard sources', () => {
  const servers: Server[] = [];
  const dirs: string[] = [];
  after(() => {
    for (const s of servers) s.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  async function http(handler: Parameters<typeof createServer>[1]): Promise<string> {
    const s = createServer(handler);
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  }

  it('parses NAME=unix:PATH and NAME=http://..., refuses anything else with the reason', () => {
    assert.equal(parseSource('front1=unix:/run/sluice/front.sock').address, 'unix:/run/sluice/front.sock');
    assert.equal(parseSource('dns=http://10.0.0.1:9100').name, 'dns');
    for (const bad of ['front1', '=unix:/x', 'a=unix:', 'a=ftp://x', 'a b=unix:/x', 'a=http://[bad']) assert.throws(() => parseSource(bad), InvalidArgumentError, bad);
  });

  it('HTTP: GET /status as JSON; HTTP errors, non-JSON, oversize and slowness are errors', async () => {
    const base = await http((req, res) => {
      if (req.url === '/status') res.end(JSON.stringify({ services: [] }));
      else if (req.url === '/p/status') res.end(JSON.stringify({ prefixed: true }));
      else res.writeHead(500).end('boom');
    });
    assert.deepEqual(await parseSource(`a=${base}`).read(1000), { services: [] });
    assert.deepEqual(await parseSource(`a=${base}/p`).read(1000), { prefixed: true });
    await assert.rejects(parseSource(`a=${base}/nope`).read(1000), { code: 'ERR_SLUICE_STATUS_REFUSED', message: /HTTP 500/ });
    const text = await http((_req, res) => res.end('<html>'));
    await assert.rejects(parseSource(`a=${text}`).read(1000), { code: 'ERR_SLUICE_STATUS_UNREADABLE', message: /not JSON/ });
    const big = await http((_req, res) => {
      res.end(Buffer.alloc(MAX_STATUS_BYTES + 10, 0x20));
    });
    await assert.rejects(parseSource(`a=${big}`).read(5000), { code: 'ERR_SLUICE_STATUS_TOO_LARGE', message: /larger than/ });
    const slow = await http(() => {
      /* never answers */
    });
    await assert.rejects(parseSource(`a=${slow}`).read(100), { code: 'ERR_SLUICE_STATUS_TIMEOUT', message: /within 100 ms/ });
    await assert.rejects(parseSource('a=http://127.0.0.1:1').read(1000), { code: 'ERR_SLUICE_STATUS_UNREACHABLE', message: /cannot reach/ });
  });

  it("unix: the admin socket's status command; a refusal and a missing socket are errors", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-dash-'));
    dirs.push(dir);
    const path = join(dir, 'a.sock');
    const sock = new AdminSocket(path, quiet, (r, reject) => (r['cmd'] === 'status' ? { ok: true, status: { cluster: 'c9', services: [] } } : reject('no')));
    const refusing = new AdminSocket(join(dir, 'b.sock'), quiet, (_r, reject) => reject('not now'));
    await sock.listen();
    await refusing.listen();
    try {
      assert.deepEqual(await parseSource(`x=unix:${path}`).read(1000), { cluster: 'c9', services: [] });
      await assert.rejects(parseSource(`x=unix:${join(dir, 'b.sock')}`).read(1000), { code: 'ERR_SLUICE_STATUS_REFUSED', message: /status refused: not now/ });
      await assert.rejects(parseSource(`x=unix:${join(dir, 'missing.sock')}`).read(1000), { code: 'ERR_SLUICE_ADMIN_UNREACHABLE', message: /cannot reach/ });
    } finally {
      sock.close();
      refusing.close();
    }
  });
});

describe('dashboard server and command line', () => {
  it('serves the page, the state and an event stream; 404 and 405 otherwise', async () => {
    const p = new Poller([new FakeSource('f1', [front('c1', { a: 1 })])], { intervalMs: 1000, timeoutMs: 100 });
    await p.poll();
    const srv = new DashboardServer(p, quiet, 'Site <x>');
    const addr = await srv.listen('127.0.0.1', 0);
    const base = `http://127.0.0.1:${addr.port}`;
    try {
      const page = await fetch(`${base}/`);
      assert.equal(page.status, 200);
      const html = await page.text();
      assert.match(html, /<title>Site &#60;x&#62;<\/title>/, 'the title is escaped');
      assert.doesNotMatch(html, /<script src|<link /, 'self-contained');
      const state = (await (await fetch(`${base}/api/state`)).json()) as DashboardState;
      assert.equal(state.clusters[0]?.name, 'c1');
      assert.equal((await fetch(`${base}/nope`)).status, 404);
      assert.equal((await fetch(`${base}/`, { method: 'POST' })).status, 405);
      const ac = new AbortController();
      const ev = await fetch(`${base}/api/events`, { signal: ac.signal });
      assert.equal(ev.headers.get('content-type'), 'text/event-stream');
      const reader = ev.body!.getReader();
      let text = '';
      for (let i = 0; i < 10 && !text.includes('"c1"'); i++) {
        const chunk = (await reader.read()) as { value?: Uint8Array };
        text += new TextDecoder().decode(chunk.value);
      }
      assert.match(text, /^retry: 2000\n\ndata: \{/);
      assert.equal(srv.streams, 1);
      ac.abort();
    } finally {
      await srv.close();
    }
  });

  it('page markup carries the stable test hooks', () => {
    const html = pageHtml('t');
    for (const id of ['site-cps', 'site-decided', 'dns-qps', 'dns-steered', 'site-map', 'live']) assert.ok(html.includes(`data-testid="${id}"`), id);
  });

  it('parses the command line and refuses bad values', () => {
    const a = parseDashboardArgs(['--listen', '127.0.0.1:0', '--source', 'f=unix:/x', '--source', 'd=http://127.0.0.1:9']);
    assert.equal(a.port, 0);
    assert.equal(a.sources.length, 2);
    assert.equal(a.intervalMs, 1000);
    assert.equal(parseDashboardArgs(['--listen', '[::1]:80', '--source', 'f=unix:/x']).host, '::1');
    for (const bad of [[], ['--source', 'f=unix:/x', '--source', 'f=unix:/y'], ['--listen', 'nope', '--source', 'f=unix:/x'], ['--listen', '1.2.3.4:70000', '--source', 'f=unix:/x'], ['--interval', '0', '--source', 'f=unix:/x']]) {
      assert.throws(() => parseDashboardArgs(bad), InvalidArgumentError, bad.join(' '));
    }
  });
});

describe('dashboard state: server health from the front node', () => {
  it('a server whose health is down shows as down, maint as maint, drain as draining, even while its configured state is active', () => {
    const st = new SiteState([{ name: 'f1', address: 'unix:/x' }]);
    const status = front('c1', { a: 1, b: 1, c: 1, d: 1 });
    const servers = (status['services'] as { servers: Record<string, unknown>[] }[])[0]!.servers;
    const health = ['up', 'down', 'maint', 'drain'];
    servers.forEach((s, i) => (s['health'] = { state: health[i], reason: 'check failed: connect refused (2 in a row)' }));
    st.record('f1', 0, { status });
    assert.deepEqual(
      cluster(st.view(0), 'c1').servers.map((s) => [s.name, s.state]),
      [
        ['a', 'up'],
        ['b', 'down'],
        ['c', 'maint'],
        ['d', 'draining'],
      ],
    );
  });
});
