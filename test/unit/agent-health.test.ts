/**
 * The agent's server health: rise/fall, the state file's grammar and its
 * garbage handling, the reported state's precedence, real tcp and http
 * checks on loopback, the pacing of reports sent at once, the report's
 * compatibility on the wire, the front node applying it to every runtime
 * of the server, and the agent's admin verbs (set, show, a bad verb, a
 * restart that keeps the verb).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { adminRequest } from '../../src/admin/client.ts';
import { AgentDaemon } from '../../src/agent/agent.ts';
import { agentConfigSchema } from '../../src/agent/config.ts';
import { checkHttp, checkTcp, RiseFall } from '../../src/agent/health-check.ts';
import { reportedHealth, ReportPacer, type HealthInputs } from '../../src/agent/health.ts';
import { OperatorState, parseStateText } from '../../src/agent/operator-state.ts';
import type { AgentHealthStatus } from '../../src/agent/status.ts';
import { buildAgentRequest } from '../../src/cli/agent-ctl.ts';
import { decodeMessage, encodeMessage } from '../../src/control/codec.ts';
import { MESSAGE_TYPES, type Body, type MessageType } from '../../src/control/messages.ts';
import { ControlNode } from '../../src/control/node.ts';
import { ConfigError, validateConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ServerLoadEstimator, type EstimateOptions } from '../../src/front/receive_server_load.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import { parseConfig } from '../../src/config/load.ts';
import { nextPort } from '../helpers/ports.ts';
import { sleep, until } from '../helpers/wait.ts';

const silent = pino({ level: 'silent' });

describe('rise/fall', () => {
  // Each row: rise, fall, results (1 pass, 0 fail), the state after each.
  const rows: [string, number, number, string, string][] = [
    ['the first result sets the state at once (up)', 2, 3, '1', 'up'],
    ['the first result sets the state at once (down)', 2, 3, '0', 'down'],
    ['fall 3: down after three failures in a row', 2, 3, '1000', 'up up up down'],
    ['a pass resets the failure streak', 2, 3, '100100', 'up up up up up up'],
    ['rise 2: up after two passes in a row', 2, 3, '0101 1', 'down down down down up'],
    ['rise 1 fall 1: every change at once', 1, 1, '1010', 'up down up down'],
  ];
  for (const [name, rise, fall, results, want] of rows) {
    it(name, () => {
      const rf = new RiseFall(rise, fall);
      const got = results.replace(/ /g, '').split('').map((r) => {
        rf.observe(r === '1', r === '1' ? 'ok' : 'refused');
        return rf.state;
      });
      assert.equal(got.join(' '), want);
    });
  }
  it('a state carried over (a reloaded check) changes through rise/fall, not at the first result', () => {
    const rf = new RiseFall(2, 2, { state: 'down', reason: 'refused' });
    assert.equal(rf.observe(true, 'ok'), false);
    assert.equal(rf.state, 'down');
    assert.equal(rf.observe(true, 'ok'), true);
  });
  it('names the streak in the reason of a change', () => {
    const rf = new RiseFall(2, 2);
    rf.observe(true, 'ok');
    rf.observe(false, 'tcp 127.0.0.1:80: ECONNREFUSED');
    assert.equal(rf.observe(false, 'tcp 127.0.0.1:80: ECONNREFUSED'), true);
    assert.equal(rf.reason, 'tcp 127.0.0.1:80: ECONNREFUSED (2 in a row)');
  });
});

describe('the state file', () => {
  const rows: [string, string, string][] = [
    ['no content: up', '', 'up'],
    ['drain', 'drain\n', 'drain'],
    ['maint with a reason', 'maint kernel upgrade\n', 'maint: kernel upgrade'],
    ['ready is up', 'ready', 'up'],
    ['case and spaces', '  DRAIN   disk swap  \n', 'drain: disk swap'],
    ['comments and blank lines ignored', '# set by ops\n\nmaint\n', 'maint'],
    ['an unknown verb', 'drian\n', 'error: unknown verb "drian"; expected drain, maint, up or ready'],
    ['two verbs on two lines', 'drain\nmaint\n', 'error: 2 lines; expected one: drain|maint|up|ready [reason]'],
    ['binary garbage', '\u0000\u0001\u00ff', 'error: unknown verb'],
    ['a control character in the reason', 'drain a\u0007b', 'error: reason contains control characters'],
    ['a reason over 200 characters', `drain ${'x'.repeat(201)}`, 'error: reason longer than 200 characters'],
    ['a file over 4 KiB', 'x'.repeat(5000), 'error: longer than 4096 bytes'],
  ];
  for (const [name, text, want] of rows) {
    it(name, () => {
      const p = parseStateText(text);
      const got = p.ok ? `${p.verb}${p.reason !== '' ? `: ${p.reason}` : ''}` : `error: ${p.error}`;
      assert.ok(got === want || (want.startsWith('error:') && got.startsWith(want)), `${got} vs ${want}`);
    });
  }

  it('garbage keeps the previous verb and is counted once per distinct content; a missing file is up', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-state-'));
    const path = join(dir, 'agent-state');
    const o = new OperatorState(path, silent);
    assert.equal(o.read(), false, 'missing file: up, no change');
    assert.equal(o.verb, 'up');
    writeFileSync(path, 'drain rack move\n');
    assert.equal(o.read(), true);
    assert.deepEqual([o.verb, o.reason, o.source], ['drain', 'rack move', 'file']);
    writeFileSync(path, 'garbage!\n');
    assert.equal(o.read(), false);
    assert.equal(o.read(), false, 'the same garbage again');
    assert.deepEqual([o.verb, o.counters.rejected], ['drain', 1]);
    assert.match(o.lastError ?? '', /unknown verb/);
    writeFileSync(path, 'more garbage\n');
    o.read();
    assert.deepEqual([o.verb, o.counters.rejected], ['drain', 2]);
    rmSync(path);
    assert.equal(o.read(), true, 'file removed: up');
    assert.deepEqual([o.verb, o.lastError], ['up', undefined]);
  });

  it('an unreadable file (here a directory) is rejected and keeps the verb', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-state-'));
    const path = join(dir, 'agent-state');
    writeFileSync(path, 'maint\n');
    const o = new OperatorState(path, silent);
    o.read();
    rmSync(path);
    mkdirSync(path);
    o.read();
    o.read();
    assert.deepEqual([o.verb, o.counters.rejected, o.lastError], ['maint', 1, 'cannot read: EISDIR']);
  });

  it('ctl writes the file atomically, and a new reader (a restarted agent) reads the same verb', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-state-'));
    const path = join(dir, 'sub', 'agent-state');
    const o = new OperatorState(path, silent);
    assert.equal(o.write('maint', 'bios update'), true);
    assert.equal(readFileSync(path, 'utf8'), 'maint bios update\n');
    assert.equal(o.read(), false, 'our own write is not news');
    const again = new OperatorState(path, silent);
    again.read();
    assert.deepEqual([again.verb, again.reason], ['maint', 'bios update']);
    assert.throws(() => o.write('drain', 'a\nb'), { code: 'ERR_SLUICE_OPERATOR_REASON', message: /control characters/ });
    assert.equal(readFileSync(path, 'utf8'), 'maint bios update\n', 'a refused write changes nothing');
  });
});

describe('the reported health', () => {
  const rows: [string, HealthInputs, string][] = [
    ['nothing configured', { verb: 'up', verbReason: '', check: 'off', checkReason: '' }, 'up: no check configured'],
    ['check passes', { verb: 'up', verbReason: '', check: 'up', checkReason: 'tcp ok' }, 'up: check passed: tcp ok'],
    ['first check pending', { verb: 'up', verbReason: '', check: 'pending', checkReason: '' }, 'up: first check pending'],
    ['check fails', { verb: 'up', verbReason: '', check: 'down', checkReason: 'ECONNREFUSED' }, 'down: check failed: ECONNREFUSED'],
    ['drain, check passes', { verb: 'drain', verbReason: 'swap disk', check: 'up', checkReason: 'ok' }, 'drain: operator set drain: swap disk'],
    ['drain, check fails: down wins', { verb: 'drain', verbReason: '', check: 'down', checkReason: 'timeout' }, 'down: check failed: timeout'],
    ['maint, check fails: maint wins', { verb: 'maint', verbReason: 'bios', check: 'down', checkReason: 'timeout' }, 'maint: operator set maint: bios'],
    ['maint without a reason', { verb: 'maint', verbReason: '', check: 'off', checkReason: '' }, 'maint: operator set maint'],
  ];
  for (const [name, inputs, want] of rows) {
    it(name, () => {
      const r = reportedHealth(inputs);
      assert.equal(`${r.state}: ${r.reason}`, want);
    });
  }
  it('bounds the reason to the message limit', () => {
    assert.equal(reportedHealth({ verb: 'up', verbReason: '', check: 'down', checkReason: 'x'.repeat(500) }).reason.length, 200);
  });
});

describe('checks on loopback', () => {
  const closers: (() => void)[] = [];
  after(() => {
    for (const c of closers) c();
  });

  it('tcp: a listening port passes, a closed one fails with the reason', async () => {
    const srv = createServer((s) => s.destroy());
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    assert.deepEqual(await checkTcp('127.0.0.1', port, 1000), { ok: true, reason: `tcp 127.0.0.1:${port} accepts connections` });
    await new Promise<void>((r) => {
      srv.close(() => {
        r();
      });
    });
    const closed = await checkTcp('127.0.0.1', port, 1000);
    assert.deepEqual(closed, { ok: false, reason: `tcp 127.0.0.1:${port}: ECONNREFUSED` });
  });

  it('http: the status decides; a silent server times out', async () => {
    let status = 200;
    const srv = createHttpServer((req, res) => {
      if (req.url === '/silent') return; // never answers
      res.writeHead(status).end('body');
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    closers.push(() => {
      srv.closeAllConnections();
    });
    closers.push(() => {
      srv.close();
    });
    const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    assert.equal((await checkHttp(`${url}/`, undefined, 1000)).ok, true);
    status = 503;
    assert.deepEqual(await checkHttp(`${url}/`, undefined, 1000), { ok: false, reason: `http ${url}/: status 503 (expected 2xx or 3xx)` });
    assert.equal((await checkHttp(`${url}/`, [503], 1000)).ok, true, 'an expected status set');
    assert.deepEqual(await checkHttp(`${url}/silent`, undefined, 200), { ok: false, reason: `http ${url}/silent: no answer within 200 ms` });
  });
});

describe('reports sent at once are paced', () => {
  it('one at once, a second within the gap waits for its end, more meanwhile are one', async () => {
    const p = new ReportPacer(150);
    let sent = 0;
    const send = (): void => {
      sent++;
      p.sent(performance.now());
    };
    p.request(performance.now(), send);
    assert.equal(sent, 1, 'the first goes at once');
    p.request(performance.now(), send);
    p.request(performance.now(), send);
    assert.equal(sent, 1, 'inside the gap: pending');
    await until(() => sent === 2, 'the pending one sent when the gap ends', 2000, 10);
    await sleep(400);
    assert.equal(sent, 2, 'the requests inside the gap were one');
    p.stop();
  });
});

describe('load_report carries health, compatibly', () => {
  const now = 1_800_000_000_000;
  const all = new Set<MessageType>(MESSAGE_TYPES);
  const limits = { maxBytes: 4096, maxAgeMs: 30_000, maxFutureMs: 5000 };
  const old: Body<'load_report'> = { server: 's1a', address: '198.18.201.11', interval: 1, cpu: 0.1, load1: 0, load5: 0, load15: 0, connections: 3, memoryUsed: 0.2, utilization: 0.1 };
  const frames = (body: unknown): Buffer[] => {
    const [t, j] = encodeMessage('load_report', 's1a', body as Body<'load_report'>, now);
    return [Buffer.from(t), Buffer.from(j)];
  };
  it('an older agent\'s report (no health) still decodes', () => {
    const d = decodeMessage(frames(old), limits, all, now);
    assert.ok(d.ok && d.message.type === 'load_report' && !('health' in d.message.body));
  });
  it('a report with health and a reason decodes', () => {
    const d = decodeMessage(frames({ ...old, health: 'maint', healthReason: 'bios update' }), limits, all, now);
    assert.deepEqual(d.ok ? d.message.body : d, { ...old, health: 'maint', healthReason: 'bios update' });
  });
  for (const [name, extra] of [
    ['an unknown health value', { health: 'sick' }],
    ['a health that is not a string', { health: 1 }],
    ['a reason over 200 characters', { health: 'down', healthReason: 'x'.repeat(201) }],
  ] as const) {
    it(`rejects ${name} as schema`, () => {
      const d = decodeMessage(frames({ ...old, ...extra }), limits, all, now);
      assert.deepEqual(d.ok ? 'ok' : d.reason, 'schema');
    });
  }
});

describe('the front node applies the agent\'s health', () => {
  const opts: EstimateOptions = { targetUtilization: 0.8, smoothing: 0.5, maxStep: 2, minCapacity: 1, maxCapacity: 1e6, minUtilization: 0.02, loadSeconds: 1, downAfter: 3, initialCapacity: 100 };
  // s1a serves two services: the agent reports the machine.
  const runtimes = (): ServiceRuntime[] => {
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
      - { name: s1b, address: 198.18.201.12 }
  - name: api
    vip: 198.19.1.2
    port: 8080
    servers:
      - { name: s1a, address: 198.18.201.11 }
control:
  keyFile: /x.key
  agents: { listen: 'tcp://198.18.201.1:7101' }
`,
      'test',
    );
    return cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
  };
  const report = (server: string, health?: Body<'load_report'>['health'], reason?: string): Body<'load_report'> => ({
    server,
    address: '198.18.201.11',
    interval: 1,
    cpu: 0.1,
    load1: 0,
    load5: 0,
    load15: 0,
    connections: 0,
    memoryUsed: 0,
    utilization: 0.1,
    ...(health !== undefined ? { health } : {}),
    ...(reason !== undefined ? { healthReason: reason } : {}),
  });
  const s1aEverywhere = (svc: ServiceRuntime[]) => svc.flatMap((s) => s.servers.filter((b) => b.id === 's1a'));

  // Each row: the report's health -> s1a's combined state and usable, in both services.
  const rows: [string, Body<'load_report'>['health'] | undefined, string][] = [
    ['no health (an older agent): none, usable', undefined, 'up true none'],
    ['up', 'up', 'up true up'],
    ['down', 'down', 'down false down'],
    ['drain', 'drain', 'drain false drain'],
    ['maint', 'maint', 'maint false maint'],
  ];
  for (const [name, health, want] of rows) {
    it(name, () => {
      const svc = runtimes();
      const est = new ServerLoadEstimator(opts, 0);
      est.receiveServerLoad(report('s1a', health, 'why'), svc, 100);
      for (const b of s1aEverywhere(svc)) assert.equal(`${b.health.state} ${b.usable} ${b.health.agent}`, want);
      assert.equal(svc[0]!.servers[1]!.usable, true, 's1b is not touched');
    });
  }

  it('a reload\'s fresh runtimes get the last health at once; a later report clears it', () => {
    const est = new ServerLoadEstimator(opts, 0);
    const first = runtimes();
    est.receiveServerLoad(report('s1a', 'drain', 'swap'), first, 100);
    const reloaded = runtimes();
    est.applyTo(reloaded, 200);
    for (const b of s1aEverywhere(reloaded)) assert.deepEqual([b.health.state, b.health.reason, b.usable], ['drain', 'agent says drain: swap', false]);
    est.receiveServerLoad(report('s1a', 'up'), reloaded, 300);
    for (const b of s1aEverywhere(reloaded)) assert.deepEqual([b.health.state, b.usable], ['up', true]);
    assert.deepEqual([est.records.get('s1a')?.health, est.records.get('s1a')?.healthReason], ['up', '']);
  });
});

describe('agent configuration: health', () => {
  const ok = { name: 's1a', address: '198.18.201.11', front: { endpoint: 'tcp://198.18.201.1:7101' }, control: { plaintext: true } };
  it('defaults: no check, the state file in /var/lib/sluice', () => {
    const c = validateConfig(agentConfigSchema, ok, 'agent.yaml');
    assert.deepEqual([c.health.kind, c.health.rise, c.health.fall, c.stateFile.path], ['none', 2, 3, '/var/lib/sluice/agent-state']);
  });
  const bad: [string, unknown, string][] = [
    ['an unknown kind', { ...ok, health: { kind: 'icmp' } }, 'health.kind'],
    ['a timeout over the interval', { ...ok, health: { kind: 'tcp', intervalSeconds: 1, timeoutSeconds: 2 } }, 'health.timeoutSeconds'],
    ['a url for kind tcp', { ...ok, health: { kind: 'tcp', url: 'http://127.0.0.1/' } }, 'health.kind'],
    ['an https url', { ...ok, health: { kind: 'http', url: 'https://127.0.0.1/' } }, 'health.url'],
    ['rise 0', { ...ok, health: { kind: 'tcp', rise: 0 } }, 'health.rise'],
    ['a relative state file', { ...ok, stateFile: { path: 'agent-state' } }, 'stateFile.path'],
  ];
  for (const [name, cfg, path] of bad) {
    it(`refuses ${name}, naming ${path}`, () => {
      assert.throws(
        () => validateConfig(agentConfigSchema, cfg, 'agent.yaml'),
        (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === path),
      );
    });
  }
});

describe('sluice agent ctl', () => {
  const rows: [string[], unknown][] = [
    [['drain'], { cmd: 'set', verb: 'drain', reason: '' }],
    [['maint', 'bios', 'update'], { cmd: 'set', verb: 'maint', reason: 'bios update' }],
    [['ready'], { cmd: 'set', verb: 'ready', reason: '' }],
    [['up'], { cmd: 'set', verb: 'up', reason: '' }],
    [['show'], { cmd: 'show' }],
    [['ready', 'now'], 'ready takes no arguments'],
    [['drian'], 'unknown verb "drian": drain, maint, ready (or up), show'],
    [[], 'unknown verb "": drain, maint, ready (or up), show'],
  ];
  for (const [args, want] of rows) {
    it(args.join(' ') || '(nothing)', () => {
      assert.deepEqual(buildAgentRequest(args), want);
    });
  }
});

describe('the agent\'s admin verbs on a running agent', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-agent-admin-'));
  const sock = join(dir, 'agent.sock');
  const stateFile = join(dir, 'state', 'agent-state');
  const logPath = join(dir, 'access.log');
  writeFileSync(logPath, '');
  // A front endpoint nobody binds: reports are dropped, the agent runs on.
  writeFileSync(
    join(dir, 'agent.yaml'),
    `name: s1a\naddress: 198.18.201.11\nfront: { endpoint: 'tcp://127.0.0.1:1' }\ncontrol: { plaintext: true }\nloadSeconds: 60\nutilization: { source: memory }\naccessLog: { path: ${logPath} }\nadminSocket: ${sock}\nstateFile: { path: ${stateFile}, pollSeconds: 0.1 }\n`,
  );
  let agent: AgentDaemon | undefined;
  after(async () => {
    await agent?.stop();
  });
  const show = async (): Promise<AgentHealthStatus> => ((await adminRequest(sock, { cmd: 'show' })) as { health: AgentHealthStatus }).health;

  it('set drain, show it, refuse a bad verb, keep drain across a restart, take a hand-written maint, refuse garbage', async () => {
    agent = new AgentDaemon(join(dir, 'agent.yaml'));
    await agent.start();
    assert.equal((await show()).state, 'up');
    const r = await adminRequest(sock, { cmd: 'set', verb: 'drain', reason: 'disk swap' });
    assert.equal(r.ok, true);
    assert.deepEqual([(await show()).state, (await show()).reason], ['drain', 'operator set drain: disk swap']);
    assert.equal(agent.healthReports, 1, 'a report sent at once');
    assert.equal(agent.lastLoad?.health, 'drain');
    const bad = await adminRequest(sock, { cmd: 'set', verb: 'drian' });
    assert.deepEqual(bad, { ok: false, error: 'unknown verb "drian": drain, maint, ready (or up)' });
    assert.equal((await show()).state, 'drain', 'a bad verb changes nothing');

    await agent.stop();
    agent = new AgentDaemon(join(dir, 'agent.yaml'));
    await agent.start();
    assert.deepEqual([(await show()).state, agent.lastLoad], ['drain', undefined], 'restarted: still drained, before its first report');

    writeFileSync(stateFile, 'maint by hand\n');
    await until(async () => (await show()).state === 'maint', 'the hand-written maint taken', 5000);
    writeFileSync(stateFile, 'garbage\n');
    await until(async () => (await show()).operator.rejected === 1, 'garbage rejected', 5000);
    const h = await show();
    assert.deepEqual([h.state, h.operator.verb, h.operator.lastError], ['maint', 'maint', 'unknown verb "garbage"; expected drain, maint, up or ready']);
    assert.equal((await adminRequest(sock, { cmd: 'set', verb: 'ready' })).ok, true);
    assert.equal((await show()).state, 'up');
  });

  it('refuses a verb it cannot write to the state file (not applied)', async () => {
    // A state file whose directory is a file: not writable, even by root.
    const notDir = join(dir, 'not-a-dir');
    writeFileSync(notDir, '');
    agent!.operator.path = join(notDir, 'agent-state');
    const r = await adminRequest(sock, { cmd: 'set', verb: 'maint' });
    assert.equal(r.ok, false);
    assert.match(r.error ?? '', /cannot write the state file .*not applied/);
    assert.equal((await show()).state, 'up');
  });
});

describe('the agent\'s own check across a reload', () => {
  it('a dead service stays reported down while the reloaded check\'s first result is pending', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-agent-reload-'));
    const file = join(dir, 'agent.yaml');
    writeFileSync(join(dir, 'access.log'), '');
    // Port 1 on loopback: nothing listens, the check fails at once (ECONNREFUSED).
    const yaml = (interval: number): string =>
      `name: s1a\naddress: 198.18.201.11\nfront: { endpoint: 'tcp://127.0.0.1:1' }\ncontrol: { plaintext: true }\nloadSeconds: 60\nutilization: { source: memory }\naccessLog: { path: ${join(dir, 'access.log')} }\nadminSocket: ${join(dir, 'agent.sock')}\nstateFile: { path: ${join(dir, 'agent-state')} }\nhealth: { kind: tcp, port: 1, intervalSeconds: ${interval}, timeoutSeconds: 0.5, fall: 1 }\n`;
    writeFileSync(file, yaml(60));
    const a = new AgentDaemon(file);
    try {
      await a.start();
      assert.deepEqual([a.health.state, a.health.reason], ['down', 'check failed: tcp 127.0.0.1:1: ECONNREFUSED']);
      writeFileSync(file, yaml(30));
      assert.equal(a.reload(), true);
      assert.equal(a.health.state, 'down', 'not up while the new check is pending');
      assert.equal(a.checker.config.intervalSeconds, 30);
    } finally {
      await a.stop();
    }
  });
});

describe('a front node that (re)connects hears the health at once', () => {
  it('with a 60 s load interval, a drained agent\'s report reaches a front node at start and after the front restarts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-agent-connect-'));
    const file = join(dir, 'agent.yaml');
    writeFileSync(join(dir, 'access.log'), '');
    writeFileSync(join(dir, 'agent-state'), 'drain rack move\n');
    // This file's own block of ports (test/helpers/ports.ts says why).
    const port = nextPort();
    const ep = `tcp://127.0.0.1:${port}`;
    writeFileSync(
      file,
      `name: s1a\naddress: 198.18.201.11\nfront: { endpoint: '${ep}' }\ncontrol: { plaintext: true }\nloadSeconds: 60\nutilization: { source: memory }\naccessLog: { path: ${join(dir, 'access.log')} }\nadminSocket: ${join(dir, 'agent.sock')}\nstateFile: { path: ${join(dir, 'agent-state')} }\n`,
    );
    const plain = agentConfigSchema.shape.control.parse({ plaintext: true });
    const a = new AgentDaemon(file);
    const fronts: Awaited<ReturnType<typeof ControlNode.create>>[] = [];
    try {
      await a.start();
      for (let round = 0; round < 2; round++) {
        const front = await ControlNode.create('fr1', plain, silent);
        fronts.push(front);
        const got: Body<'load_report'>[] = [];
        // ZeroMQ frees a closed socket's port in its I/O thread after
        // close() returns: the restarted front binds again until it works,
        // bounded (a socket left open would keep failing).
        await until(async () => {
          try {
            await front.bindPull(ep, 'agents', [], {
              load_report: (m) => {
                got.push(m.body);
              },
            });
            return true;
          } catch (err) {
            if ((err as { code?: string }).code !== 'EADDRINUSE') throw err;
            return false;
          }
        }, `the front binds ${ep}, round ${round}`, 5000, 50);
        // Bounded well below the 60 s interval: only the report sent on connecting can arrive.
        await until(() => got.length > 0, `a report on connecting, round ${round}`, 15_000, 20);
        assert.deepEqual([got[0]!.health, got[0]!.healthReason], ['drain', 'operator set drain: rack move']);
        front.close(); // the front node's restart
      }
      assert.equal(a.connectReports, 2);
    } finally {
      for (const f of fronts) f.close();
      await a.stop();
    }
  });
});
