/**
 * Active health checks on the testbed (issue 20, acceptance 1 for the
 * front node's own checks; no agents): real nginx servers, the real front
 * node, paced clients (test/fixtures/http-paced.ts, 5 new connections/s).
 *
 * For `tcp` and for `http` checks at once (one service of each kind on its
 * own VIP over the same servers, each with its own clients; interval 1 s,
 * fall 2, rise 2, slow start 4 s): nginx on s1b is killed, and each
 * service is judged on its own; the front node takes it out (its own
 * stamps: at most 2 intervals after the last passed check, after exactly
 * `fall` failed checks), and over the next 30 s no new connection goes to
 * it (its `decided` counter stands still) and none fails (the clients'
 * count). nginx starts again: the server is up after `rise` passed checks,
 * gets connections again, and fewer than the others while its slow start
 * share ramps to 1. With `http`, a server answering 503, one whose body
 * does not match and one that accepts and never answers (nginx stopped)
 * go down with that reason, and come back.
 *
 * The passive check: a killed nginx (its kernel refuses: RST+ACK to the
 * SYN) is out after `refusedLimit` refused connections; a server cut off
 * (every packet to it dropped: nothing answers) after `unansweredLimit`
 * retransmitted SYNs without a reply; both long before `fall` failed checks.
 *
 * A cluster whose servers all fail their checks publishes, at the
 * transition and not at its next period (60 s here), a cluster_load with
 * serversUp 0 and capacity 0, which the DNS server takes as down on receipt
 * (src/dns/cluster_state.ts isUp; unit-tested in slow-start.test.ts).
 *
 * Judged from the daemon's status (one clock: its own stamps and counters)
 * and the clients' success/failure counts; never by comparing wall clocks
 * of several processes.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, afterEach, before, describe, it } from 'node:test';
import type { FrontServerStatus, FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { NsProcess, nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';
import { BrokenServer, PASSIVE_FALL, PASSIVE_LIMIT, runPassiveScenario, stopScenario, type PassiveKind, type PassiveProcs, type PassiveScenario } from '../helpers/passive-check.ts';

const PACED = fileURLToPath(new URL('../fixtures/http-paced.ts', import.meta.url));
const SUB = fileURLToPath(new URL('../fixtures/control-sub.ts', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const INTERVAL_S = 1;
const FALL = 2;
const RISE = 2;
// Long enough that a status poll on a busy machine (two kinds polled at once) still sees the ramp (4 s: seen at share 1 once in CI).
const SLOW_START_S = 8;
const QUIET_S = 30;

const KINDS = ['tcp', 'http'] as const;
type Kind = (typeof KINDS)[number];
/** Each kind's service has its own VIP (the WAN routes 198.19.1.0/24 to the front node). */
const VIPS: Readonly<Record<Kind, string>> = { tcp: '198.19.1.1', http: '198.19.1.2' };

const testbed = useTestbed({ clusters: 1 });

/** One service checked with `kind`, on its own VIP, over the cluster's three servers. */
function service(kind: Kind): string {
  const http = kind === 'http' ? ', path: /health, bodyMatch: ok' : '';
  return `  - name: www-${kind}
    vip: ${VIPS[kind]}
    port: 80
    method: byrequests
    health: { kind: ${kind}, intervalSeconds: ${String(INTERVAL_S)}, timeoutSeconds: 0.5, fall: ${String(FALL)}, rise: ${String(RISE)}, slowStartSeconds: ${String(SLOW_START_S)}${http} }
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
      - { name: s1c, address: 198.18.201.13 }
`;
}

function config(kinds: readonly Kind[], socket: string): string {
  return `cluster: c1
uplinkAddress: 198.18.101.2
adminSocket: ${socket}
services:
${kinds.map(service).join('')}`;
}

interface Tally {
  readonly tally: Record<string, number>;
  readonly failures: number;
  readonly inFlight: number;
  readonly errors: readonly unknown[];
}

/**
 * Both kinds at once: one front node, a service checked with `tcp` and one
 * with `http` over the same three servers, each with its own VIP and its
 * own paced clients. One kill of nginx on s1b is seen by each service's
 * own checks, and the 30 s without failures is counted for each load; each
 * service is judged by its own status, counters and log lines only.
 */
describe('sluice front: tcp and http health checks', () => {
  let front: FrontProcess | undefined;
  const loads = new Map<Kind, NsProcess>();
  let runDir = '';
  let frontNs = '';
  const ns: Record<string, string> = {};

  before(async () => {
    const st = testbed();
    runDir = st.runDir;
    for (const s of st.plan.clusters[0]?.servers ?? []) {
      ns[s.id] = s.name;
      writeFileSync(join(runDir, `www-${s.id}`, 'health'), 'ok\n', { mode: 0o644 });
    }
    frontNs = st.plan.clusters[0]?.front.name ?? '';
    front = new FrontProcess(frontNs, writeConfig(join(runDir, 'front-health.yaml'), config(KINDS, join(runDir, 'front-health.sock'))));
    await front.waitFor('front node ready');
    const client = st.plan.clients[0];
    assert.ok(client);
    for (const kind of KINDS) loads.set(kind, new NsProcess(client.name, [PACED, '--url', `http://${VIPS[kind]}/`, '--rate', '5', '--sources', client.address, '--max-seconds', '240']));
  });

  after(async () => {
    for (const load of loads.values()) await load.stop();
    await front?.stop();
    // The next block starts from healthy servers.
    for (const id of Object.keys(ns)) if (!nginxAlive(id)) startNginx(id);
  });

  async function status(): Promise<FrontStatus> {
    return (await front!.status()) as unknown as FrontStatus;
  }
  function servers(st: FrontStatus, kind: Kind): readonly FrontServerStatus[] {
    const svc = st.services.find((v) => v.name === `www-${kind}`);
    assert.ok(svc, `service www-${kind} in status`);
    return svc.servers;
  }
  async function server(kind: Kind, name: string): Promise<FrontServerStatus> {
    const s = servers(await status(), kind).find((b) => b.name === name);
    assert.ok(s, `server ${name} of www-${kind} in status`);
    return s;
  }
  async function tally(kind: Kind): Promise<Tally> {
    return (await loads.get(kind)!.request('tally')) as unknown as Tally;
  }
  async function healthIs(kind: Kind, name: string, state: string, deadlineMs = 15_000): Promise<FrontServerStatus> {
    let last: FrontServerStatus | undefined;
    await until(
      async () => {
        last = await server(kind, name);
        return last.health?.state === state;
      },
      `${name} of www-${kind} health ${state}`,
      deadlineMs,
      100,
    );
    return last!;
  }
  const changed = (kind: Kind, to: string): Record<string, unknown>[] =>
    front!.lines.filter((l) => l['msg'] === 'server health changed' && l['service'] === `www-${kind}` && l['server'] === 's1b' && l['to'] === to);

  const pidFile = (id: string): string => join(runDir, `nginx-${id}.pid`);
  const conf = (id: string): string => join(runDir, `nginx-${id}.conf`);
  function nginxAlive(id: string): boolean {
    try {
      process.kill(Number(readFileSync(pidFile(id), 'utf8').trim()), 0);
      return true;
    } catch {
      return false;
    }
  }
  function startNginx(id: string): void {
    nsRun(ns[id]!, 'nginx', ['-c', conf(id)]);
  }

  it(`a killed nginx gets no new connection after ${String(FALL)} failed checks, none fails over ${String(QUIET_S)} s; started again it is back after ${String(RISE)} passed checks and ramps up (tcp and http checks, one service each, at once)`, async (t) => {
    await until(async () => {
      const st = await status();
      return KINDS.every((kind) => servers(st, kind).every((b) => b.decided > 0));
    }, 'every server of both services decided connections', 20_000, 200);
    const st0 = await status();
    for (const kind of KINDS) for (const b of servers(st0, kind)) assert.equal(b.health?.state, 'up', `${kind}: ${JSON.stringify(b.health)}`);

    // Kill nginx on s1b (SIGTERM to the master: fast shutdown, the listener goes).
    const pid = Number(readFileSync(pidFile('s1b'), 'utf8').trim());
    process.kill(pid, 'SIGTERM');
    await until(() => !nginxAlive('s1b'), 'nginx s1b gone', 10_000, 50);

    const decidedAtDown = new Map<Kind, number>();
    await Promise.all(
      KINDS.map(async (kind) => {
        const down = await healthIs(kind, 's1b', 'down');
        const h = down.health;
        assert.ok(h?.checks, JSON.stringify(h));
        const checks = h.checks;
        assert.equal(checks.failuresAtDown, FALL, `${kind}: down after exactly fall=${String(FALL)} failed checks`);
        assert.match(h.reason, /^check failed: connect refused \(2 in a row\)$/);
        // The daemon's own stamps: from the last passed check (the kill came after it) to the transition.
        assert.ok(checks.lastOkAgeSeconds !== null);
        const outFor = checks.lastOkAgeSeconds - h.sinceSeconds;
        assert.ok(outFor <= FALL * INTERVAL_S + 0.25, `${kind}: taken out ${String(outFor)} s after its last passed check: within ${String(FALL)} intervals (+ scheduling slack)`);
        t.diagnostic(`${kind}: s1b out ${outFor.toFixed(3)} s after its last passed check (daemon's clock)`);
        decidedAtDown.set(kind, down.decided);
      }),
    );
    const st = await status();
    assert.ok((st.health?.transitions.down ?? 0) >= KINDS.length, JSON.stringify(st.health?.transitions));
    assert.ok((st.health?.outcomes['refused'] ?? 0) >= FALL * KINDS.length);
    for (const kind of KINDS) {
      const logged = changed(kind, 'down');
      assert.equal(logged.length, 1, `${kind}: the transition is logged once`);
      assert.equal(logged[0]!['from'], 'up');
    }

    // Connections that met the dead server before the transition have failed by now; start counting.
    await sleep(500);
    for (const kind of KINDS) await tally(kind);
    await sleep(QUIET_S * 1000);
    for (const kind of KINDS) {
      const quiet = await tally(kind);
      if (quiet.failures !== 0) t.diagnostic(`${kind}: failures: ${JSON.stringify(quiet)}; front status: ${JSON.stringify(await status())}; front warnings: ${JSON.stringify(front!.lines.filter((l) => Number(l['level']) >= 40).slice(-30))}; conntrack -S: ${nsRun(frontNs, 'conntrack', ['-S'])}`);
      assert.equal(quiet.failures, 0, `${kind}: no connection failed over ${String(QUIET_S)} s: ${JSON.stringify(quiet)}`);
      assert.equal(quiet.tally['s1b'] ?? 0, 0, `${kind}: ${JSON.stringify(quiet)}`);
      assert.ok((quiet.tally['s1a'] ?? 0) + (quiet.tally['s1c'] ?? 0) >= QUIET_S * 5 * 0.5, `${kind}: the clients kept going: ${JSON.stringify(quiet)}`);
    }
    const stQuiet = await status();
    for (const kind of KINDS) assert.equal(servers(stQuiet, kind).find((b) => b.name === 's1b')?.decided, decidedAtDown.get(kind), `${kind}: the daemon decided no connection for s1b while it was down`);

    // Start nginx again: up after rise passed checks, then a slow start.
    startNginx('s1b');
    await Promise.all(
      KINDS.map(async (kind) => {
        const up = await healthIs(kind, 's1b', 'up', 15_000);
        const before = Object.fromEntries(servers(await status(), kind).map((b) => [b.name, b.decided]));
        assert.match(up.health?.reason ?? '', /check passed/);
        assert.ok((up.health?.checks?.passesInRow ?? 0) >= RISE, JSON.stringify(up.health));
        assert.ok((up.health?.share ?? 1) < 1, `${kind}: ramping: share ${String(up.health?.share)}`);
        await until(async () => (await server(kind, 's1b')).health?.share === 1, `s1b of www-${kind} ramped to share 1`, 15_000, 200);
        const afterRamp = Object.fromEntries(servers(await status(), kind).map((b) => [b.name, b.decided]));
        const delta = (n: string): number => (afterRamp[n] ?? 0) - (before[n] ?? 0);
        t.diagnostic(`${kind}: decided during the ${String(SLOW_START_S)} s ramp: s1a ${String(delta('s1a'))}, s1b ${String(delta('s1b'))}, s1c ${String(delta('s1c'))}`);
        assert.ok(delta('s1b') > 0, `${kind}: s1b gets connections again: ${JSON.stringify({ before, afterRamp })}`);
        assert.ok(delta('s1b') < Math.min(delta('s1a'), delta('s1c')), `${kind}: fewer than the others while ramping: ${JSON.stringify({ before, afterRamp })}`);
        const back = await tally(kind);
        assert.equal(back.failures, 0, `${kind}: no connection failed while it came back: ${JSON.stringify(back)}`);
        assert.ok((back.tally['s1b'] ?? 0) > 0, `${kind}: ${JSON.stringify(back)}`);
        assert.equal(changed(kind, 'up').length, 1);
      }),
    );
    // The http-only cases below hang and fail servers that the tcp service's
    // checks still pass: its clients stop here.
    await loads.get('tcp')!.stop();
    loads.delete('tcp');
  });

  it('http: a server answering 503 and one whose body does not match go down with that reason, and come back; no connection fails', async () => {
    await tally('http');
    // s1c: nginx answers /health with 503 (a real nginx, reloaded with one more location).
    const original = readFileSync(conf('s1c'), 'utf8');
    writeFileSync(conf('s1c'), original.replace('    location = /blob.bin', '    location = /health { return 503; }\n    location = /blob.bin'));
    nsRun(ns['s1c']!, 'nginx', ['-c', conf('s1c'), '-s', 'reload']);
    const c503 = await healthIs('http', 's1c', 'down');
    assert.match(c503.health?.reason ?? '', /^check failed: HTTP 503 \(2 in a row\)$/);
    assert.equal(c503.health?.checks?.lastOutcome, 'status');
    writeFileSync(conf('s1c'), original);
    nsRun(ns['s1c']!, 'nginx', ['-c', conf('s1c'), '-s', 'reload']);
    await healthIs('http', 's1c', 'up');

    // s1a: the health page says something else.
    writeFileSync(join(runDir, 'www-s1a', 'health'), 'maintenance\n');
    const body = await healthIs('http', 's1a', 'down');
    assert.match(body.health?.reason ?? '', /^check failed: body did not match \(2 in a row\)$/);
    assert.equal(body.health?.checks?.lastOutcome, 'body');
    const decided = body.decided;
    await sleep(2000);
    assert.equal((await server('http', 's1a')).decided, decided, 'no connection decided for s1a while it is down');
    writeFileSync(join(runDir, 'www-s1a', 'health'), 'ok\n');
    await healthIs('http', 's1a', 'up');
    const t = await tally('http');
    assert.equal(t.failures, 0, JSON.stringify(t));
    const st = await status();
    assert.ok((st.health?.outcomes['status'] ?? 0) >= FALL);
    assert.ok((st.health?.outcomes['body'] ?? 0) >= FALL);
  });

  it('http: a server that accepts and never answers (nginx stopped: the kernel still accepts) goes down on timeouts, and comes back', async () => {
    // Starts from a serving s1b also when the first case failed before it started nginx again.
    if (!nginxAlive('s1b')) startNginx('s1b');
    await healthIs('http', 's1b', 'up');
    // nginx's master and worker: the processes of the server's namespace (listed from outside it).
    const pids = execFileSync('ip', ['netns', 'pids', ns['s1b']!], { encoding: 'utf8' })
      .split('\n')
      .map(Number)
      .filter((p) => p > 0);
    assert.ok(pids.length > 0);
    const signal = (sig: NodeJS.Signals): void => {
      for (const p of pids) {
        try {
          process.kill(p, sig);
        } catch {
          /* gone */
        }
      }
    };
    signal('SIGSTOP');
    try {
      const hung = await healthIs('http', 's1b', 'down');
      assert.match(hung.health?.reason ?? '', /^check failed: timeout after 0\.5 s \(connected, no answer\) \(2 in a row\)$/);
      assert.equal(hung.health?.checks?.lastOutcome, 'timeout');
      const decided = hung.decided;
      await sleep(1500);
      assert.equal((await server('http', 's1b')).decided, decided, 'no connection decided for s1b while it hangs');
    } finally {
      // The connections it accepted meanwhile are answered now (they wait in its backlog).
      signal('SIGCONT');
    }
    await healthIs('http', 's1b', 'up');
    const st = await status();
    assert.ok((st.health?.outcomes['timeout'] ?? 0) >= FALL);
    assert.ok((st.health?.inFlight ?? 0) <= (st.health?.maxInFlight ?? 0));
  });
});

/**
 * The passive check (test/helpers/passive-check.ts): s1b broken two ways,
 * each on its own VIP and front node, taken out by the data path's
 * evidence long before `fall` (20 checks at 1 s) failed active checks.
 */
describe('sluice front: the passive check takes a broken server out before its fall', () => {
  const procs: PassiveProcs = {};
  const s1b = new BrokenServer('ip', false);

  afterEach(async () => {
    await stopScenario(procs, s1b);
  });

  const scenario = (kind: PassiveKind, vip: string, cut: () => void, repair: () => void, metricsPort?: number): PassiveScenario => {
    const st = testbed();
    s1b.runDir = st.runDir;
    const k = st.plan.clusters[0]!;
    s1b.ns = k.servers.find((s) => s.id === 's1b')!.name;
    const client = st.plan.clients[0]!;
    return {
      kind,
      frontNs: k.front.name,
      runDir: st.runDir,
      name: `front-passive-${kind}`,
      head: 'cluster: c1\nuplinkAddress: 198.18.101.2\n',
      vip,
      healthExtra: '',
      serverLines: ['s1a', 's1b', 's1c'].map((id, i) => `      - { name: ${id}, address: 198.18.201.${String(11 + i)} }\n`).join(''),
      clientNs: client.name,
      url: `http://${vip}/`,
      source: client.address,
      cut,
      repair,
      ...(metricsPort !== undefined ? { metricsPort } : {}),
    };
  };

  it(`refused: a killed nginx (its kernel resets each SYN) is out after ${String(PASSIVE_LIMIT)} refused connections, not ${String(PASSIVE_FALL)} failed checks; back after rise passed checks`, async (t) => {
    await runPassiveScenario(t, scenario('refused', '198.19.1.3', s1b.killNginx, s1b.startNginx, 9181), procs);
  });

  it(`unanswered: a server cut off (its packets dropped, nothing answered) is out after ${String(PASSIVE_LIMIT)} unanswered retransmitted SYNs, not ${String(PASSIVE_FALL)} failed checks; back after rise passed checks (both SYN paths)`, async (t) => {
    await runPassiveScenario(t, scenario('unanswered', '198.19.1.4', s1b.cut, s1b.repair, 9181), procs);
    await stopScenario(procs);
    // The kernel SYN schedule: the retransmission is queued there too, past the same copy rule.
    await runPassiveScenario(t, { ...scenario('unanswered', '198.19.1.5', s1b.cut, s1b.repair), name: 'front-passive-unanswered-kernel', serviceExtra: '    synPath: kernel\n' }, procs);
  });
});

describe('sluice front: a cluster with no usable server', () => {
  let front: FrontProcess | undefined;
  let sub: NsProcess | undefined;
  let runDir = '';
  const ns: Record<string, string> = {};

  after(async () => {
    sub?.child.kill();
    await front?.stop();
    for (const id of Object.keys(ns)) {
      const pidFile = join(runDir, `nginx-${id}.pid`);
      let alive = false;
      try {
        process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 0);
        alive = true;
      } catch {
        /* gone */
      }
      if (!alive) nsRun(ns[id]!, 'nginx', ['-c', join(runDir, `nginx-${id}.conf`)]);
    }
  });

  it('publishes cluster_load with serversUp 0 at the transition, not at the next period', async () => {
    const st = testbed();
    runDir = st.runDir;
    const k = st.plan.clusters[0]!;
    for (const s of k.servers) ns[s.id] = s.name;
    const cfg = `${config(['tcp'], join(runDir, 'front-health-dns.sock'))}control:
  keyFile: ${join(st.keysDir, 'fr1.key')}
  publish:
    listen: tcp://${k.uplinkAddress}:7102
    allow: [${join(st.keysDir, 'dns.pub')}]
  clusterLoad: { everySeconds: 60 }
`;
    front = new FrontProcess(k.front.name, writeConfig(join(runDir, 'front-health-dns.yaml'), cfg));
    await front.waitFor('front node ready');
    sub = new NsProcess(st.plan.dns.name, [SUB, '--endpoint', `tcp://${k.uplinkAddress}:7102`, '--key', join(st.keysDir, 'dns.key'), '--server-key', join(st.keysDir, 'fr1.pub'), '--types', 'cluster_load']);
    type Load = { type: string; body: { serversUp: number; serversTotal: number; capacity: number } };
    // A report that says every server is up, so the subscriber is known to
    // be connected. The node sends one at start (1 s in) and then only every
    // 60 s or on a change: a subscriber that joined after the first (a slow
    // start on a busy machine; CI 2026-11-28 waited 20 s for it) is shown
    // one by a change made through `sluice ctl` (a drain, then its revert:
    // each a change of the usable set, sent at once).
    const ctl = async (...args: string[]): Promise<void> => {
      const r = await nsRunAsync(k.front.name, BIN, ['ctl', '--socket', join(runDir, 'front-health-dns.sock'), ...args]);
      assert.equal(r.code, 0, r.stderr);
    };
    let first: Load | undefined;
    for (let attempt = 0; attempt < 5 && first?.body.serversUp !== 3; attempt++) {
      try {
        first = (await sub.next(3000)) as unknown as Load;
      } catch (err) {
        if (!/no output within/.test((err as Error).message)) throw err;
        await ctl('drain', 'www-tcp', 's1a');
        await ctl('revert', 'www-tcp', 's1a');
      }
    }
    assert.equal(first?.body.serversUp, 3, 'a report with every server up reached the subscriber');
    for (const s of k.servers) process.kill(Number(readFileSync(join(runDir, `nginx-${s.id}.pid`), 'utf8').trim()), 'SIGTERM');
    let last = first;
    while (last.body.serversUp !== 0) last = (await sub.next(20_000)) as unknown as Load;
    const status = (await front.status()) as unknown as FrontStatus;
    assert.equal(last.body.capacity, 0);
    assert.equal(last.body.serversTotal, 3);
    assert.ok(status.uptimeSeconds < 60, `uptime ${String(status.uptimeSeconds)} s: the report came at the transition, not with the 60 s period`);
    assert.ok(status.services[0]!.servers.every((b) => b.health?.state === 'down'));
  });
});
