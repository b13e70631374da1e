/**
 * The ops HTTP server (src/http/ops_server.ts) over real loopback sockets:
 * routes, 404/405, added routes, handler failures, request counting, bind
 * failures naming http.listen, close; and the http.listen config key in
 * all three daemons' schemas.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { agentConfigSchema } from '../../src/agent/config.ts';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { dnsConfigSchema } from '../../src/dns/config.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { parseHttpListen } from '../../src/http/config.ts';
import { HttpListenError, OpsServer } from '../../src/http/ops_server.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { counterOf } from '../../src/metrics/collect.ts';
import { registerHttpMetrics } from '../../src/metrics/http.ts';
import { masterConfigSchema } from '../../src/throttle/config.ts';
import { parsePromText } from '../helpers/prom_text.ts';

const log = componentLogger('test-ops').child({}, { level: 'silent' });

/** A port free on loopback right now (bound and released). */
async function freePort(host = '127.0.0.1'): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, host, r));
  const a = s.address();
  await new Promise<void>((r) => {
    s.close(() => {
      r();
    });
  });
  if (a === null || typeof a !== 'object') throw new Error('no port');
  return a.port;
}

async function get(base: string, path: string, method = 'GET'): Promise<{ status: number; type: string; body: string; allow: string | null }> {
  const r = await fetch(`${base}${path}`, { method });
  return { status: r.status, type: r.headers.get('content-type') ?? '', body: await r.text(), allow: r.headers.get('allow') };
}

describe('http.listen in every daemon config', () => {
  const examples = {
    front: [frontConfigSchema, 'front-cluster1.yaml'],
    dns: [dnsConfigSchema, 'dns.yaml'],
    agent: [agentConfigSchema, 'agent-s1a.yaml'],
    master: [masterConfigSchema, 'master.yaml'],
  } as const;
  const good = ['127.0.0.1:9100', '0.0.0.0:1', '198.18.2.2:65535', '[::1]:9100', '[::]:80', '[fd00::2]:9101'];
  const bad = ['localhost:9100', '127.0.0.1', '127.0.0.1:0', '127.0.0.1:65536', '300.1.1.1:80', '1.2.3:80', '::1:9100', '[zz::1]:80', '[::1]', ' 127.0.0.1:80', '9100'];
  for (const [daemon, [schema, file]] of Object.entries(examples)) {
    const text = readFileSync(new URL(`../../deploy/examples/${file}`, import.meta.url), 'utf8').replace(/^http:.*\n( {2}.*\n)*/m, '');
    it(`${daemon}: accepted addresses parse, absent means no server`, () => {
      assert.equal(parseConfig(schema, text, file).http, undefined);
      for (const listen of good) assert.equal(parseConfig(schema, `${text}\nhttp: { listen: '${listen}' }\n`, file).http?.listen, listen);
    });
    it(`${daemon}: a bad http.listen is refused naming the key and the fix`, () => {
      for (const listen of [...bad.map((b) => `'${b}'`), '9100', '{}']) {
        assert.throws(
          () => parseConfig(schema, `${text}\nhttp: { listen: ${listen} }\n`, file),
          (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === 'http.listen' && /ADDRESS:PORT like 127\.0\.0\.1:9100/.test(p.message)),
          listen,
        );
      }
      assert.throws(() => parseConfig(schema, `${text}\nhttp: { listen: '127.0.0.1:9100', extra: 1 }\n`, file), (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path.startsWith('http')));
    });
  }
  it('parseHttpListen splits address, port and family', () => {
    assert.deepEqual(parseHttpListen('127.0.0.1:9100'), { host: '127.0.0.1', port: 9100, family: 4 });
    assert.deepEqual(parseHttpListen('[::1]:80'), { host: '::1', port: 80, family: 6 });
    for (const b of bad) assert.equal(parseHttpListen(b), undefined, b);
  });
});

describe('ops HTTP server', async () => {
  const registry = new Registry();
  let scrapes = 0;
  counterOf(registry, 'sluice_test_things_total', 'Things.', () => ++scrapes);
  const status = { name: 'x', counters: { a: 1 }, nested: [1, 2] };
  const port = await freePort();
  const server = new OpsServer({ listen: `127.0.0.1:${port}`, registry, status: () => status, log });
  registerHttpMetrics(registry, 'sluice_test', () => server);
  const base = `http://127.0.0.1:${port}`;
  after(() => {
    server.close();
  });

  it('serves GET /metrics in the registry content type, valid exposition, read at scrape', async () => {
    await server.start();
    const r = await get(base, '/metrics');
    assert.equal(r.status, 200);
    assert.equal(r.type, registry.contentType);
    const p = parsePromText(r.body);
    assert.equal(p.sum('sluice_test_things_total'), 1);
    const again = parsePromText((await get(base, '/metrics?x=1')).body);
    assert.equal(again.sum('sluice_test_things_total'), 2);
  });

  it('serves GET /status: exactly the status object, as JSON', async () => {
    const r = await get(base, '/status');
    assert.equal(r.status, 200);
    assert.match(r.type, /^application\/json/);
    assert.deepEqual(JSON.parse(r.body), status);
  });

  it('unknown paths are 404, other methods 405 with Allow: GET', async () => {
    assert.equal((await get(base, '/')).status, 404);
    assert.equal((await get(base, '/metrics/x')).status, 404);
    for (const m of ['POST', 'PUT', 'DELETE', 'HEAD']) {
      const r = await get(base, '/metrics', m);
      assert.equal(r.status, 405, m);
      assert.equal(r.allow, 'GET');
    }
  });

  it('addRoute serves extra GET pages; bad, duplicate and built-in paths are refused', async () => {
    server.addRoute('/', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<h1>dash</h1>');
    });
    const r = await get(base, '/');
    assert.equal(r.status, 200);
    assert.equal(r.body, '<h1>dash</h1>');
    for (const p of ['/', '/metrics', '/status', 'x', '/a b', '/?q']) {
      assert.throws(
        () => {
          server.addRoute(p, () => undefined);
        },
        { code: 'ERR_SLUICE_INVALID_ARGUMENT' },
        p,
      );
    }
  });

  it('a failing route answers 500 and the server goes on', async () => {
    server.addRoute('/boom', () => {
      throw new Error('boom');
    });
    server.addRoute('/boom-async', async () => {
      await Promise.resolve();
      throw new Error('boom');
    });
    assert.equal((await get(base, '/boom')).status, 500);
    assert.equal((await get(base, '/boom-async')).status, 500);
    assert.equal((await get(base, '/status')).status, 200);
  });

  it('counts every request by route and code, exposed as <prefix>_http_requests_total', async () => {
    const p = parsePromText((await get(base, '/metrics')).body);
    const n = (route: string, code: string): number => p.sum('sluice_test_http_requests_total', { route, code });
    assert.equal(n('/metrics', '200'), 2); // the two earlier scrapes (this one is counted after it is rendered)
    assert.equal(n('/status', '200'), 2);
    assert.equal(n('unmatched', '404'), 2);
    assert.equal(n('/metrics', '405'), 4);
    assert.equal(n('/', '200'), 1);
    assert.equal(n('/boom', '500'), 1);
    assert.equal(n('/boom-async', '500'), 1);
  });

  it('a second server on the same address fails with HttpListenError naming http.listen', async () => {
    const other = new OpsServer({ listen: `127.0.0.1:${port}`, registry: new Registry(), status: () => ({}), log });
    await assert.rejects(other.start(), { code: 'ERR_SLUICE_HTTP_LISTEN' });
    await assert.rejects(other.start(), (e: unknown) => e instanceof HttpListenError && /http\.listen 127\.0\.0\.1:\d+: EADDRINUSE/.test(e.message) && /choose another port/.test(e.message));
    other.close();
  });

  it('an address this host does not have fails with HttpListenError', async () => {
    const other = new OpsServer({ listen: '192.0.2.77:9100', registry: new Registry(), status: () => ({}), log });
    await assert.rejects(other.start(), (e: unknown) => e instanceof HttpListenError && /http\.listen 192\.0\.2\.77:9100: EADDRNOTAVAIL/.test(e.message));
    other.close();
  });

  it('close() stops serving (connections refused) and is idempotent', async () => {
    server.close();
    server.close();
    await assert.rejects(fetch(`${base}/metrics`));
  });
});

describe('ops HTTP server on IPv6 loopback', () => {
  it('binds [::1]:port and serves /status', async (t) => {
    let port: number;
    try {
      port = await freePort('::1');
    } catch {
      t.skip('no IPv6 loopback here');
      return;
    }
    const s = new OpsServer({ listen: `[::1]:${port}`, registry: new Registry(), status: () => ({ v6: true }), log });
    await s.start();
    try {
      assert.deepEqual(JSON.parse((await get(`http://[::1]:${port}`, '/status')).body), { v6: true });
    } finally {
      s.close();
    }
  });
});
