/**
 * Active health checks (src/front/health/): rise/fall and the scheduler's
 * spreading and concurrency bound driven by an injected clock (tables), the
 * status set parser, the tcp and http checks against real servers on
 * loopback, and the checker feeding ServerHealth end to end.
 */
import { strict as assert } from 'node:assert';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { frontConfigSchema } from '../../src/front/config.ts';
import { buildServices } from '../../src/front/daemon.ts';
import { HealthChecker } from '../../src/front/health/checker.ts';
import { healthKeeper } from '../../src/front/health/keep.ts';
import { hostHeader, httpCheck, MAX_BODY_BYTES, type HttpCheckOptions } from '../../src/front/health/http-check.ts';
import type { CheckResult } from '../../src/front/health/result.ts';
import { RiseFall, type RiseFallState } from '../../src/front/health/rise-fall.ts';
import { HealthScheduler, type ScheduledTarget } from '../../src/front/health/scheduler.ts';
import type { HealthTransition } from '../../src/front/health/server-health.ts';
import { parseStatusSet, statusIn } from '../../src/front/health/status-set.ts';
import { tcpCheck } from '../../src/front/health/tcp-check.ts';
import { REFUSAL_RING, RefusalLog } from '../../src/front/refusals.ts';
import { until } from '../helpers/wait.ts';

describe('rise/fall', () => {
  // results as a string: + passed, - failed; `changes` the indexes where the state flipped.
  const cases: { name: string; rise: number; fall: number; from: RiseFallState; results: string; end: RiseFallState; changes: number[] }[] = [
    { name: 'fall 3: two failures keep it up', rise: 2, fall: 3, from: 'up', results: '--+--+', end: 'up', changes: [] },
    { name: 'fall 3: three in a row take it down', rise: 2, fall: 3, from: 'up', results: '+---', end: 'down', changes: [3] },
    { name: 'rise 2: one pass does not bring it back', rise: 2, fall: 3, from: 'down', results: '+-+-+-', end: 'down', changes: [] },
    { name: 'rise 2: two in a row do', rise: 2, fall: 3, from: 'down', results: '-++', end: 'up', changes: [2] },
    { name: 'down, up, down again', rise: 2, fall: 2, from: 'up', results: '--++--', end: 'down', changes: [1, 3, 5] },
    { name: 'fall 1, rise 1: every result decides', rise: 1, fall: 1, from: 'up', results: '-+-', end: 'down', changes: [0, 1, 2] },
    { name: 'failures beyond fall change nothing more', rise: 2, fall: 2, from: 'up', results: '-----', end: 'down', changes: [1] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const rf = new RiseFall(c.rise, c.fall, c.from);
      const changes: number[] = [];
      c.results.split('').forEach((r, i) => {
        if (rf.result(r === '+')) changes.push(i);
      });
      assert.equal(rf.state, c.end);
      assert.deepEqual(changes, c.changes);
    });
  }
});

describe('expectStatus', () => {
  const cases: [string, number[], number[]][] = [
    ['200-399', [200, 204, 301, 399], [199, 400, 503]],
    ['200', [200], [201, 204]],
    ['200,204, 301-302', [200, 204, 301, 302], [201, 303]],
  ];
  for (const [text, yes, no] of cases) {
    it(text, () => {
      const s = parseStatusSet(text);
      assert.ok(typeof s !== 'string', String(s));
      for (const c of yes) assert.ok(statusIn(s, c), `${String(c)} in ${text}`);
      for (const c of no) assert.ok(!statusIn(s, c), `${String(c)} not in ${text}`);
    });
  }
  for (const bad of ['', '2xx', '99', '200-100', '600', '200;300']) {
    it(`refuses "${bad}"`, () => {
      assert.equal(typeof parseStatusSet(bad), 'string');
    });
  }
});

/** A target whose checks the test ends by hand. */
class Manual implements ScheduledTarget {
  readonly key: string;
  readonly intervalMs: number;
  readonly pending: ((r: CheckResult) => void)[] = [];
  runs = 0;
  constructor(key: string, intervalMs: number) {
    this.key = key;
    this.intervalMs = intervalMs;
  }
  run(): Promise<CheckResult> {
    this.runs++;
    return new Promise((resolve) => this.pending.push(resolve));
  }
  finish(): void {
    this.pending.shift()?.({ outcome: 'ok', reason: 'passed' });
  }
}

function clock(): { now: () => number; set: (t: number) => void } {
  let t = 0;
  return { now: () => t, set: (x) => (t = x) };
}

describe('scheduler', () => {
  it('spreads 1,000 servers evenly over the interval: first checks 1 ms apart, each once per interval', async () => {
    const c = clock();
    const starts: number[] = [];
    const sched = new HealthScheduler<ScheduledTarget>({
      maxInFlight: 1000,
      now: c.now,
      onResult: () => undefined,
    });
    const targets: ScheduledTarget[] = Array.from({ length: 1000 }, (_, i) => ({
      key: `s${String(i)}`,
      intervalMs: 1000,
      run: () => {
        starts.push(c.now());
        return Promise.resolve({ outcome: 'ok', reason: 'passed' });
      },
    }));
    sched.set(targets);
    const firstDue = targets.map((t) => sched.nextAt(t.key) ?? NaN);
    assert.deepEqual(firstDue.slice(0, 3), [0, 1, 2]);
    assert.equal(firstDue[999], 999);
    // Poll every 10 ms (the timer's least step) over two intervals.
    const perPoll: number[] = [];
    for (let t = 0; t < 2000; t += 10) {
      c.set(t);
      const before = starts.length;
      sched.poll();
      perPoll.push(starts.length - before);
      await Promise.resolve();
    }
    c.set(1999.5);
    sched.poll();
    assert.equal(starts.length, 2000, 'each of 1,000 servers checked once per interval');
    assert.ok(Math.max(...perPoll) <= 10, `at most 10 checks start per 10 ms poll (saw ${String(Math.max(...perPoll))})`);
    assert.equal(sched.skipped, 0);
  });

  const spreads: { n: number; intervalMs: number }[] = [
    { n: 1, intervalMs: 1000 },
    { n: 3, intervalMs: 1000 },
    { n: 64, intervalMs: 2000 },
    { n: 250, intervalMs: 500 },
    { n: 1000, intervalMs: 100 },
  ];
  for (const c of spreads) {
    it(`spreads ${String(c.n)} servers at ${String(c.intervalMs)} ms: first checks interval/n apart, each once per interval`, async () => {
      const clk = clock();
      const runs = new Map<string, number>();
      const sched = new HealthScheduler<ScheduledTarget>({ maxInFlight: 100_000, now: clk.now, onResult: () => undefined });
      const targets: ScheduledTarget[] = Array.from({ length: c.n }, (_, i) => ({
        key: `s${String(i)}`,
        intervalMs: c.intervalMs,
        run: () => {
          runs.set(`s${String(i)}`, (runs.get(`s${String(i)}`) ?? 0) + 1);
          return Promise.resolve({ outcome: 'ok', reason: 'passed' });
        },
      }));
      clk.set(50);
      sched.set(targets);
      targets.forEach((t, i) => {
        assert.equal(sched.nextAt(t.key), 50 + (c.intervalMs * i) / c.n);
      });
      let most = 0;
      const step = 10;
      // Polls every 10 ms (the timer's least step), and one just before the end of the third interval.
      const times: number[] = [];
      for (let t = 50; t < 50 + 3 * c.intervalMs; t += step) times.push(t);
      times.push(50 + 3 * c.intervalMs - c.intervalMs / c.n / 2);
      for (const t of times) {
        clk.set(t);
        const before = [...runs.values()].reduce((a, b) => a + b, 0);
        sched.poll();
        most = Math.max(most, [...runs.values()].reduce((a, b) => a + b, 0) - before);
        await Promise.resolve();
      }
      assert.ok(targets.every((t) => runs.get(t.key) === 3), 'three checks each in three intervals');
      assert.ok(most <= Math.ceil((c.n * step) / c.intervalMs), `at most n x step / interval start per poll (saw ${String(most)})`);
    });
  }

  it('bounds checks in flight; the rest wait in order and start as checks end; a server never has two checks at once', () => {
    const c = clock();
    const ended: string[] = [];
    const sched = new HealthScheduler<Manual>({ maxInFlight: 64, now: c.now, onResult: (t) => ended.push(t.key) });
    const targets = Array.from({ length: 1000 }, (_, i) => new Manual(`s${String(i)}`, 1000));
    sched.set(targets);
    c.set(999);
    sched.poll();
    assert.equal(sched.inFlight, 64, 'every target is due; 64 run');
    assert.equal(targets.filter((t) => t.runs > 0).length, 64);
    // End 10: 10 of the waiting start, in the order they became due.
    for (const t of targets.slice(0, 10)) t.finish();
    return Promise.resolve().then(async () => {
      await new Promise((r) => setImmediate(r));
      assert.equal(sched.inFlight, 64);
      assert.equal(sched.peakInFlight, 64);
      assert.deepEqual(
        targets.slice(64, 74).map((t) => t.runs),
        Array<number>(10).fill(1),
      );
      assert.equal(targets[74]?.runs, 0);
      assert.equal(ended.length, 10);
      // A full interval later every target is due again: the running and waiting ones skip.
      c.set(1999);
      sched.poll();
      assert.equal(sched.skipped, 1000 - 10, 'those still running or waiting skip their turn');
      assert.ok(targets.every((t) => t.runs <= 2));
      assert.ok(targets.every((t) => t.pending.length <= 1), 'never two checks of one server at once');
      sched.stop();
    });
  });

  it('set() keeps the phase of remaining targets, drops removed ones (their results too), spreads new ones', async () => {
    const c = clock();
    const results: string[] = [];
    const sched = new HealthScheduler<Manual>({ now: c.now, onResult: (t) => results.push(t.key) });
    const a = new Manual('a', 1000);
    const b = new Manual('b', 1000);
    sched.set([a, b]);
    assert.equal(sched.nextAt('b'), 500);
    c.set(600);
    sched.poll();
    assert.equal(a.runs, 1);
    assert.equal(b.runs, 1);
    const d = new Manual('d', 1000);
    c.set(700);
    sched.set([a, d]);
    assert.equal(sched.nextAt('a'), 1000, 'a keeps its phase');
    assert.equal(sched.nextAt('b'), undefined);
    assert.equal(sched.nextAt('d'), 700, 'd starts now');
    b.finish();
    a.finish();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(results, ['a'], 'the kept target\'s result counts, the removed one\'s is dropped');
    assert.equal(sched.inFlight, 0);
  });
});

/** A TCP server on loopback with a per-connection behaviour. */
async function listen(onConn: (s: Socket) => void): Promise<Server> {
  // The checks reset their connections: a reset seen by the server side is expected here.
  const srv = createServer((s) => {
    s.on('error', () => undefined);
    onConn(s);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return srv;
}
const portOf = (s: Server | HttpServer): number => (s.address() as AddressInfo).port;

describe('tcp and http checks against loopback servers', () => {
  let http: HttpServer;
  let hang: Server;
  let rst: Server;
  let garbage: Server;
  let closedPort = 0;
  const hung: Socket[] = [];

  before(async () => {
    http = createHttpServer((req, res) => {
      if (req.url === '/ok') res.end('all good\n');
      else if (req.url === '/503') {
        res.statusCode = 503;
        res.end('maintenance\n');
      } else if (req.url === '/big') {
        res.write('x'.repeat(MAX_BODY_BYTES));
        res.end('needle');
      } else if (req.url === '/slowbody') {
        res.write('start ');
        // never ends: the timeout must bound the check
      } else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    hang = await listen((s) => hung.push(s));
    rst = await listen((s) => {
      s.resetAndDestroy();
    });
    garbage = await listen((s) => {
      s.end('SSH-2.0-OpenSSH\r\n\r\n');
    });
    const tmp = await listen(() => undefined);
    closedPort = portOf(tmp);
    await new Promise((r) => tmp.close(r));
  });

  after(() => {
    for (const s of hung) s.destroy();
    http.closeAllConnections();
    http.close();
    hang.close();
    rst.close();
    garbage.close();
  });

  const local = (port: number, source?: string): { address: string; port: number; source?: string } => ({ address: '127.0.0.1', port, ...(source !== undefined ? { source } : {}) });
  const opts = (path: string, extra: Partial<HttpCheckOptions> = {}): HttpCheckOptions => {
    const expect = parseStatusSet('200-399');
    assert.ok(typeof expect !== 'string');
    return { path, expect, ...extra };
  };

  it('tcp: a listener passes, a closed port is refused, a missing source address is an error naming health.source', async () => {
    assert.deepEqual(await tcpCheck(local(portOf(http)), 1000), { outcome: 'ok', reason: 'passed' });
    assert.deepEqual(await tcpCheck(local(closedPort), 1000), { outcome: 'refused', reason: 'connect refused' });
    const r = await tcpCheck(local(portOf(http), '198.18.250.250'), 1000);
    assert.equal(r.outcome, 'error');
    assert.match(r.reason, /health\.source/);
  });

  const httpCases: { name: string; port: () => number; path: string; extra?: Partial<HttpCheckOptions>; outcome: string; reason: RegExp }[] = [
    { name: '200 passes', port: () => portOf(http), path: '/ok', outcome: 'ok', reason: /passed/ },
    { name: '503 fails as status', port: () => portOf(http), path: '/503', outcome: 'status', reason: /^HTTP 503$/ },
    { name: '404 fails as status', port: () => portOf(http), path: '/nope', outcome: 'status', reason: /^HTTP 404$/ },
    { name: 'substring found passes', port: () => portOf(http), path: '/ok', extra: { bodyMatch: 'good' }, outcome: 'ok', reason: /passed/ },
    { name: 'substring missing fails as body', port: () => portOf(http), path: '/ok', extra: { bodyMatch: 'healthy' }, outcome: 'body', reason: /^body did not match$/ },
    { name: 'regex matches', port: () => portOf(http), path: '/ok', extra: { bodyMatch: /^all \w+$/m }, outcome: 'ok', reason: /passed/ },
    { name: 'a match past the body bound is not seen', port: () => portOf(http), path: '/big', extra: { bodyMatch: 'needle' }, outcome: 'body', reason: /did not match/ },
    { name: '503 accepted when expectStatus says so', port: () => portOf(http), path: '/503', extra: { expect: parseStatusSet('503') as Uint8Array }, outcome: 'ok', reason: /passed/ },
    { name: 'accept then hang: timeout', port: () => portOf(hang), path: '/', outcome: 'timeout', reason: /^timeout after 0\.3 s \(connected, no answer\)$/ },
    { name: 'a body that never ends: timeout', port: () => portOf(http), path: '/slowbody', extra: { bodyMatch: 'never' }, outcome: 'timeout', reason: /timeout/ },
    { name: 'RST at accept: refused (reset)', port: () => portOf(rst), path: '/', outcome: 'refused', reason: /reset|closed/ },
    { name: 'not HTTP: error', port: () => portOf(garbage), path: '/', outcome: 'error', reason: /not an HTTP response/ },
    { name: 'closed port: refused', port: () => closedPort, path: '/', outcome: 'refused', reason: /connect refused/ },
  ];
  for (const c of httpCases) {
    it(`http: ${c.name}`, async () => {
      const r = await httpCheck(local(c.port()), opts(c.path, c.extra), 300);
      assert.equal(r.outcome, c.outcome, JSON.stringify(r));
      assert.match(r.reason, c.reason);
    });
  }
});

describe('tcp and http checks of an IPv6 server', () => {
  it('tcp and http to [::1]:port pass; the Host header carries the IPv6 literal in brackets', async () => {
    const hosts: string[] = [];
    const http6 = createHttpServer((req, res) => {
      hosts.push(req.headers.host ?? '');
      res.end('ok\n');
    });
    await new Promise<void>((r) => http6.listen(0, '::1', r));
    try {
      const target = { address: '::1', port: portOf(http6) };
      assert.deepEqual(await tcpCheck(target, 1000), { outcome: 'ok', reason: 'passed' });
      const expect = parseStatusSet('200-399');
      assert.ok(typeof expect !== 'string');
      assert.deepEqual(await httpCheck(target, { path: '/', expect, bodyMatch: 'ok' }, 1000), { outcome: 'ok', reason: 'passed' });
      assert.deepEqual(hosts, ['[::1]']);
    } finally {
      http6.closeAllConnections();
      http6.close();
    }
    assert.equal(hostHeader('198.18.201.11'), '198.18.201.11');
    assert.equal(hostHeader('2001:2:0:201::11'), '[2001:2:0:201::11]');
  });
});

describe('checker: results reach ServerHealth through rise/fall', () => {
  it('a server whose port closes goes down after fall checks and comes back after rise, with the reasons', async () => {
    let server = await listen((s) => {
      s.destroy();
    });
    const port = portOf(server);
    const cfg = frontConfigSchema.parse({
      cluster: 'c1',
      uplinkAddress: '198.18.101.2',
      services: [
        {
          name: 'www',
          vip: '198.19.1.1',
          port,
          method: 'byrequests',
          health: { kind: 'tcp', intervalSeconds: 0.1, timeoutSeconds: 0.05, fall: 2, rise: 2, slowStartSeconds: 1 },
          servers: [{ name: 'a', address: '127.0.0.1' }],
        },
      ],
    });
    const seen: HealthTransition[] = [];
    const services = buildServices(cfg, () => ({ now: performance.now(), sink: (_h, t) => seen.push(t) }));
    const checker = new HealthChecker({ now: () => performance.now() });
    checker.configure(services, () => cfg.services[0]?.health);
    checker.start();
    try {
      const srv = services[0]?.servers[0];
      assert.ok(srv);
      await until(() => (checker.status(srv)?.passed ?? 0) >= 2, 'two checks passed', 5000);
      assert.equal(srv.health.state, 'up');
      assert.equal(seen.length, 0, 'started up (startAs up): no transition');
      await new Promise((r) => server.close(r));
      await until(() => srv.health.state === 'down', 'down after the port closed', 5000);
      const st = checker.status(srv);
      assert.equal(st?.failuresAtDown, 2, 'fall = 2 failed checks in a row');
      assert.deepEqual(
        seen.map((t) => [t.from, t.to]),
        [['up', 'down']],
      );
      assert.equal(seen[0]?.reason, 'check failed: connect refused (2 in a row)');
      server = createServer((s) => s.destroy());
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
      await until(() => srv.health.state === 'up', 'up again after the port reopened', 5000);
      assert.deepEqual(
        seen.map((t) => [t.from, t.to]),
        [
          ['up', 'down'],
          ['down', 'up'],
        ],
      );
      assert.ok(srv.health.rampFrom > -Infinity, 'coming back starts a slow start ramp');
      assert.ok((checker.status(srv)?.passed ?? 0) >= 4);
      assert.equal(checker.outcomes.refused >= 2, true);
    } finally {
      checker.stop();
      server.close();
    }
  });

  it('an IPv6 server is checked at its own address ([::1]:port), not at the u32 address 0 of IPv6 servers', async () => {
    // The port is open on ::1 only: a check of 0.0.0.0 (this host's IPv4) would be refused.
    const server = createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, '::1', r));
    const cfg = frontConfigSchema.parse({
      cluster: 'c1',
      uplinkAddress: '198.18.101.2',
      services: [{ name: 'www6', vip: '2001:2:0:1001::1', port: portOf(server), method: 'byrequests', health: { kind: 'tcp', intervalSeconds: 0.1, timeoutSeconds: 0.08, fall: 1, rise: 1 }, servers: [{ name: 'a', address: '::1' }] }],
    });
    const services = buildServices(cfg, () => ({ now: performance.now(), sink: () => undefined }));
    const checker = new HealthChecker({ now: () => performance.now() });
    checker.configure(services, () => cfg.services[0]?.health);
    checker.start();
    try {
      const srv = services[0]!.servers[0]!;
      await until(() => (checker.status(srv)?.passed ?? 0) + (checker.status(srv)?.failed ?? 0) >= 2, 'two checks', 5000);
      assert.equal(checker.status(srv)?.failed, 0, JSON.stringify(checker.status(srv)));
      assert.equal(srv.health.state, 'up');
    } finally {
      checker.stop();
      server.close();
    }
  });

  it('startAs down: new servers wait for rise passes; kind none sets the check off', () => {
    const cfg = frontConfigSchema.parse({
      cluster: 'c1',
      uplinkAddress: '198.18.101.2',
      services: [
        { name: 'a', vip: '198.19.1.1', port: 80, method: 'byrequests', health: { kind: 'http', startAs: 'down' }, servers: [{ name: 'x', address: '198.18.201.11' }] },
        { name: 'b', vip: '198.19.1.2', port: 80, method: 'byrequests', servers: [{ name: 'y', address: '198.18.201.12' }] },
      ],
    });
    const services = buildServices(cfg, () => ({ now: 0, sink: () => assert.fail('no transition at start') }));
    const checker = new HealthChecker({ now: () => 0 });
    checker.configure(services, (n) => cfg.services.find((s) => s.name === n)?.health);
    const x = services[0]?.servers[0];
    const y = services[1]?.servers[0];
    assert.ok(x && y);
    assert.equal(x.health.state, 'down');
    assert.equal(x.usable, false);
    assert.match(x.health.reason, /not checked yet/);
    assert.equal(y.health.check, 'off');
    assert.equal(y.usable, true);
    assert.equal(checker.scheduler.size, 1);
    checker.stop();
  });
});

/** One server on a loopback listener (its checks pass), the checker on a clock the test moves; one check per poll() at each interval. */
async function setupPassive(refusedLimit: number, unansweredLimit = 10) {
  const server = await listen((c) => c.destroy());
  const cfg = frontConfigSchema.parse({
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    services: [{ name: 'www', vip: '198.19.1.1', port: portOf(server), method: 'byrequests', health: { kind: 'tcp', intervalSeconds: 10, timeoutSeconds: 5, fall: 3, rise: 2, refusedLimit, unansweredLimit }, servers: [{ name: 'a', address: '127.0.0.1' }] }],
  });
  const seen: HealthTransition[] = [];
  let clock = 0;
  const services = buildServices(cfg, () => ({ now: clock, sink: (_h, t) => seen.push(t) }));
  const checker = new HealthChecker({ now: () => clock });
  checker.configure(services, () => cfg.services[0]?.health);
  const srv = services[0]!.servers[0]!;
  const log = new RefusalLog<typeof srv>();
  /** The next check, run to its end (it passes: the listener accepts). */
  const check = async (): Promise<void> => {
    const before = checker.status(srv)?.passed ?? 0;
    checker.scheduler.poll();
    await until(() => (checker.status(srv)?.passed ?? 0) > before, 'a check passed', 5000);
    clock += 10_000;
  };
  const refuse = (n: number): void => {
    for (let i = 0; i < n; i++) log.note(srv);
    checker.observeRefusals(log, clock);
  };
  const unanswered = (n: number): void => {
    for (let i = 0; i < n; i++) log.noteUnanswered(srv);
    checker.observeRefusals(log, clock);
  };
  /** A reload with other limits (the rest of the check as it was). */
  const reconfigure = (refused: number, unans: number): void => {
    const h = cfg.services[0]!.health;
    checker.configure(services, () => ({ ...h, refusedLimit: refused, unansweredLimit: unans }));
  };
  return { server, checker, srv, seen, check, refuse, unanswered, reconfigure, close: () => server.close() };
}

describe('passive check: refused connections take a server down (health.refusedLimit)', () => {

  it('limit 3: two refusals keep it up, the third takes it down at once (no failed check), rise passes bring it back; a passed check starts the count again', async () => {
    const t = await setupPassive(3);
    try {
      await t.check();
      t.refuse(2);
      assert.equal(t.srv.health.state, 'up');
      assert.equal(t.checker.status(t.srv)?.refusedSinceOk, 2);
      t.refuse(1);
      assert.equal(t.srv.health.state, 'down');
      assert.equal(t.srv.health.reason, 'check failed: refused 3 connections since the last passed check (health.refusedLimit 3)');
      const st = t.checker.status(t.srv);
      assert.equal(st?.state, 'down');
      assert.equal(st.failuresAtDown, 0, 'down without a failed check');
      assert.equal(st.refusedDowns, 1);
      assert.equal(t.checker.refusedDowns, 1);
      t.refuse(5); // more while down: no second transition
      assert.deepEqual(t.seen.map((x) => [x.from, x.to]), [['up', 'down']]);
      await t.check();
      assert.equal(t.srv.health.state, 'down', 'one pass of rise 2');
      // The passive cause stays at the head of the reason while it is down; the check adds its progress.
      assert.equal(t.srv.health.reason, 'check failed: refused 3 connections since the last passed check (health.refusedLimit 3); then passed (1 of rise 2)');
      await t.check();
      assert.equal(t.srv.health.state, 'up');
      assert.equal(t.srv.health.reason, 'check passed');
      assert.equal(t.checker.status(t.srv)?.refusedSinceOk, 0, 'a passed check starts the count again');
      // Two, a passed check, two: never three since a pass.
      t.refuse(2);
      await t.check();
      t.refuse(2);
      assert.equal(t.srv.health.state, 'up');
      t.refuse(1);
      assert.equal(t.srv.health.state, 'down');
      assert.equal(t.srv.health.reason, 'check failed: refused 3 connections since the last passed check (health.refusedLimit 3)', 'the new cause alone');
      assert.equal(t.checker.refusedDowns, 2);
      assert.equal(t.srv.refused, 13);
      // A failed active check while it is down (the listener gone) does not replace the cause either.
      t.close();
      const failed = t.checker.status(t.srv)?.failed ?? 0;
      t.checker.scheduler.poll();
      await until(() => (t.checker.status(t.srv)?.failed ?? 0) > failed, 'a check failed', 5000);
      assert.match(t.srv.health.reason, /^check failed: refused 3 connections since the last passed check \(health\.refusedLimit 3\); then .+ \(1 in a row\)$/);
    } finally {
      t.checker.stop();
      t.close();
    }
  });

  it('limit 0: off; more refusals in one period than the log keeps are still all counted (the walk of every server)', async () => {
    const off = await setupPassive(0);
    try {
      await off.check();
      off.refuse(1000);
      assert.equal(off.srv.health.state, 'up');
      assert.equal(off.checker.refusedDowns, 0);
    } finally {
      off.checker.stop();
      off.close();
    }
    const big = await setupPassive(REFUSAL_RING + 10);
    try {
      await big.check();
      big.refuse(REFUSAL_RING + 9);
      assert.equal(big.srv.health.state, 'up');
      big.refuse(1);
      assert.equal(big.srv.health.state, 'down');
      assert.equal(big.checker.status(big.srv)?.refusedSinceOk, REFUSAL_RING + 10);
    } finally {
      big.checker.stop();
      big.close();
    }
  });
});

describe('passive check: unanswered retransmitted SYNs take a server down (health.unansweredLimit)', () => {
  it('each limit counts its own kind; the limit-th unanswered SYN takes it down, rise passes bring it back, a pass starts the count again; 0: off', async () => {
    const t = await setupPassive(10, 3);
    try {
      await t.check();
      // Nine refusals and two unanswered: neither limit reached (they are not added together).
      t.refuse(9);
      t.unanswered(2);
      assert.equal(t.srv.health.state, 'up');
      const st0 = t.checker.status(t.srv);
      assert.equal(st0?.refusedSinceOk, 9);
      assert.equal(st0.unansweredSinceOk, 2);
      t.unanswered(1);
      assert.equal(t.srv.health.state, 'down');
      assert.equal(t.srv.health.reason, 'check failed: left 3 retransmitted SYNs unanswered since the last passed check (health.unansweredLimit 3)');
      const st = t.checker.status(t.srv);
      assert.equal(st?.failuresAtDown, 0, 'down without a failed check');
      assert.equal(st.unansweredDowns, 1);
      assert.equal(st.refusedDowns, 0);
      assert.equal(t.checker.unansweredDowns, 1);
      t.refuse(5); // the refusal limit reached while down: no second transition
      assert.deepEqual(t.seen.map((x) => [x.from, x.to]), [['up', 'down']]);
      await t.check();
      await t.check();
      assert.equal(t.srv.health.state, 'up');
      assert.equal(t.checker.status(t.srv)?.unansweredSinceOk, 0, 'a passed check starts the count again');
      assert.equal(t.checker.status(t.srv)?.refusedSinceOk, 0);
      t.unanswered(2);
      await t.check();
      t.unanswered(2);
      assert.equal(t.srv.health.state, 'up', 'never three since a pass');
      assert.equal(t.srv.unanswered, 7);
    } finally {
      t.checker.stop();
      t.close();
    }
    // A reload that changes a limit keeps the check, its state and its counts; the new limit applies from the next read.
    const r = await setupPassive(10, 5);
    try {
      await r.check();
      r.unanswered(3);
      r.refuse(3);
      const target = r.checker.status(r.srv);
      r.reconfigure(4, 4);
      const kept = r.checker.status(r.srv);
      assert.ok(kept !== undefined);
      assert.equal(kept.passed, target?.passed, 'the same check');
      assert.equal(kept.unansweredSinceOk, 3);
      assert.equal(kept.refusedSinceOk, 3);
      assert.equal(kept.unansweredLimit, 4);
      assert.equal(r.srv.health.state, 'up');
      r.unanswered(1);
      assert.equal(r.srv.health.state, 'down');
      assert.match(r.srv.health.reason, /left 4 retransmitted SYNs unanswered .*\(health.unansweredLimit 4\)$/);
    } finally {
      r.checker.stop();
      r.close();
    }
    const off = await setupPassive(10, 0);
    try {
      await off.check();
      off.unanswered(1000);
      assert.equal(off.srv.health.state, 'up');
      assert.equal(off.checker.unansweredDowns, 0);
    } finally {
      off.checker.stop();
      off.close();
    }
  });
});

describe('reload: health of remaining servers is kept', () => {
  it('same name, address and port keep their health and check; a moved server and a new one start in startAs; a removed one stops', () => {
    const svc = (servers: { name: string; address: string; port?: number }[]): ReturnType<typeof frontConfigSchema.parse> =>
      frontConfigSchema.parse({
        cluster: 'c1',
        uplinkAddress: '198.18.101.2',
        services: [{ name: 'www', vip: '198.19.1.1', port: 80, method: 'maglev', health: { kind: 'tcp', fall: 1 }, servers }],
      });
    const first = svc([
      { name: 'a', address: '198.18.201.11' },
      { name: 'b', address: '198.18.201.12' },
      { name: 'c', address: '198.18.201.13' },
    ]);
    const seen: HealthTransition[] = [];
    const sink = (_h: unknown, t: HealthTransition): void => {
      seen.push(t);
    };
    const old = buildServices(first, () => ({ now: 0, sink }));
    const checker = new HealthChecker({ now: () => 0 });
    checker.configure(old, () => first.services[0]?.health);
    const [a, b] = old[0]!.servers;
    a!.health.setCheck('down', 'connect refused (1 in a row)', 5);
    b!.health.setCheck('down', 'timeout after 1 s (1 in a row)', 5);
    const second = svc([
      { name: 'a', address: '198.18.201.11' },
      { name: 'b', address: '198.18.201.22' },
      { name: 'd', address: '198.18.201.14' },
    ]);
    const keep = healthKeeper(old);
    const next = buildServices(second, (name) => ({ now: 10, sink, keep: keep(name) }));
    checker.configure(next, () => second.services[0]?.health);
    const [na, nb, nd] = next[0]!.servers;
    assert.equal(na!.health, a!.health, 'a kept its health object');
    assert.equal(na!.health.state, 'down');
    assert.equal(na!.usable, false);
    assert.notEqual(nb!.health, b!.health, 'b moved: another server');
    assert.equal(nb!.health.state, 'up');
    assert.equal(nd!.health.state, 'up');
    assert.equal(checker.scheduler.size, 3, 'c stopped; d started');
    assert.ok(checker.status(na!), 'a is still checked');
    assert.equal(checker.status(old[0]!.servers[2]!), undefined);
    checker.stop();
  });

  it('IPv6 servers: kept by their own address (every IPv6 server\'s u32 address is 0), a moved one starts afresh', () => {
    const svc = (servers: { name: string; address: string }[]) =>
      frontConfigSchema.parse({ cluster: 'c1', uplinkAddress: '198.18.101.2', services: [{ name: 'www6', vip: '2001:2:0:1001::1', port: 80, method: 'maglev', health: { kind: 'tcp', fall: 1 }, servers }] });
    const first = svc([
      { name: 'a', address: '2001:2:0:201::11' },
      { name: 'b', address: '2001:2:0:201::12' },
    ]);
    const old = buildServices(first, () => ({ now: 0, sink: () => undefined }));
    const [a, b] = old[0]!.servers;
    a!.health.setCheck('down', 'connect refused (1 in a row)', 5);
    b!.health.setCheck('down', 'connect refused (1 in a row)', 5);
    const second = svc([
      { name: 'a', address: '2001:2:0:201::11' },
      { name: 'b', address: '2001:2:0:201::22' },
    ]);
    const keep = healthKeeper(old);
    const [na, nb] = buildServices(second, (name) => ({ now: 10, sink: () => undefined, keep: keep(name) }))[0]!.servers;
    assert.equal(na!.health, a!.health, 'a kept its health object');
    assert.notEqual(nb!.health, b!.health, 'b moved: another server');
    assert.equal(nb!.health.state, 'up');
  });
});
