/**
 * The passive health check's netns scenario, shared by the IPv4 and IPv6
 * suites (front-health.test.ts, front-ipv6-health.test.ts): one front node
 * with one service over the cluster's three servers, paced clients
 * (test/fixtures/http-paced.ts: Connection: close, a 5 s timeout), then s1b
 * is broken (`cut`) and must be taken out by the passive check, long before
 * `fall` failed active checks, and brought back by its active check after
 * `rise` passes once repaired (`repair`).
 *
 * Two ways to break it:
 *  - refused: nginx killed, the server's kernel answers each SYN with a
 *    reset (health.refusedLimit);
 *  - unanswered: the server's packets dropped, nothing answers; clients
 *    retransmit their SYNs (health.unansweredLimit).
 *
 * Judged from the daemon's status (its counters and its transition) and
 * the clients' own counts; never by comparing wall clocks of processes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import type { FrontServerStatus, FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from './front.ts';
import { NsProcess, nsRun, nsRunAsync } from './testbed.ts';
import { sleep, until } from './wait.ts';

const PACED = fileURLToPath(new URL('../fixtures/http-paced.ts', import.meta.url));
/** The passive limit and the active check's fall (at 1 s) it must beat. */
export const PASSIVE_LIMIT = 3;
export const PASSIVE_FALL = 20;
/** New connections/s from the client: ~RATE/3 to s1b. */
const RATE = 30;
/** The clients' own timeout (http-paced.ts): a connection to a silent server fails after it. */
const CLIENT_TIMEOUT_MS = 5000;

export type PassiveKind = 'refused' | 'unanswered';

export interface PassiveScenario {
  readonly kind: PassiveKind;
  /** The front node's namespace, run directory and a name for its files. */
  readonly frontNs: string;
  readonly runDir: string;
  readonly name: string;
  /** Config lines above `services:` (cluster, uplink addresses), each ending in a newline. */
  readonly head: string;
  /** The service: VIP, health check extras (e.g. `source: ...`), servers' YAML lines. */
  readonly vip: string;
  readonly healthExtra: string;
  /** Extra lines of the service (e.g. `    synPath: kernel\n`). */
  readonly serviceExtra?: string;
  readonly serverLines: string;
  /** The client's namespace, the URL (VIP in it) and its source address. */
  readonly clientNs: string;
  readonly url: string;
  readonly source: string;
  /** Breaks s1b, and repairs it. */
  readonly cut: () => void;
  readonly repair: () => void;
  /** A port for /metrics on the front node's loopback (checked when given). */
  readonly metricsPort?: number;
}

interface Tally {
  readonly tally: Record<string, number>;
  readonly failures: number;
}

/** The scenario's processes, for the caller's after() to stop (also when the scenario failed half-way). */
export interface PassiveProcs {
  front?: FrontProcess | undefined;
  load?: NsProcess | undefined;
}

/** Stops the scenario's processes (each test's afterEach, or between two scenarios of one test) and repairs the server when given. */
export async function stopScenario(procs: PassiveProcs, server?: BrokenServer): Promise<void> {
  await procs.load?.stop();
  await procs.front?.stop();
  procs.load = undefined;
  procs.front = undefined;
  server?.cleanup();
}

/** Runs the scenario; `procs` is filled as processes start. */
export async function runPassiveScenario(t: TestContext, sc: PassiveScenario, procs: PassiveProcs): Promise<void> {
  const limitKey = sc.kind === 'refused' ? 'refusedLimit' : 'unansweredLimit';
  const http = sc.metricsPort !== undefined ? `http: { listen: 127.0.0.1:${String(sc.metricsPort)} }\n` : '';
  const cfg = `${sc.head}adminSocket: ${join(sc.runDir, `${sc.name}.sock`)}
${http}services:
  - name: www
    vip: ${sc.vip}
    port: 80
    method: byrequests
${sc.serviceExtra ?? ''}    health: { kind: tcp, ${sc.healthExtra}intervalSeconds: 1, timeoutSeconds: 0.5, fall: ${String(PASSIVE_FALL)}, rise: 2, ${limitKey}: ${String(PASSIVE_LIMIT)} }
    servers:
${sc.serverLines}`;
  const front = new FrontProcess(sc.frontNs, writeConfig(join(sc.runDir, `${sc.name}.yaml`), cfg));
  procs.front = front;
  await front.waitFor('front node ready');
  const load = new NsProcess(sc.clientNs, [PACED, '--url', sc.url, '--rate', String(RATE), '--sources', sc.source, '--max-seconds', '120']);
  procs.load = load;
  const servers = async (): Promise<readonly FrontServerStatus[]> => ((await front.status()) as unknown as FrontStatus).services[0]!.servers;
  const s1b = async (): Promise<FrontServerStatus> => {
    const s = (await servers()).find((b) => b.name === 's1b');
    assert.ok(s, 's1b in status');
    return s;
  };
  const tally = async (): Promise<Tally> => (await load.request('tally')) as unknown as Tally;
  await until(async () => (await servers()).every((b) => b.decided > 0), 'every server decided connections', 20_000, 200);
  await tally();

  const decidedBefore = (await s1b()).decided;
  sc.cut();
  let down: FrontServerStatus | undefined;
  await until(async () => (down = await s1b()).health?.state === 'down', 's1b down', 15_000, 50);
  const h = down!.health!;
  t.diagnostic(`s1b down: ${h.reason}; refused ${String(down!.refused)}, unanswered ${String(down!.unanswered)}; checks ${JSON.stringify(h.checks)}`);
  const reason = sc.kind === 'refused' ? 'refused \\d+ connections' : 'left \\d+ retransmitted SYNs unanswered';
  const cause = `check failed: ${reason} since the last passed check \\(health.${limitKey} ${String(PASSIVE_LIMIT)}\\)`;
  // The status keeps the cause while s1b is down; a check that failed since (its packets are gone) adds its progress.
  assert.match(h.reason, new RegExp(`^${cause}(; then .+ \\(\\d+ in a row\\))?$`));
  assert.ok(h.checks !== undefined && h.checks.failuresAtDown < PASSIVE_FALL, `taken out by the passive check, before fall: ${JSON.stringify(h.checks)}`);
  assert.equal(sc.kind === 'refused' ? h.checks.refusedDowns : h.checks.unansweredDowns, 1);
  const counted = sc.kind === 'refused' ? down!.refused : down!.unanswered;
  assert.ok(counted >= PASSIVE_LIMIT, `the daemon counted them: ${String(counted)}`);
  const logged = front.lines.filter((l) => l['msg'] === 'server health changed' && l['server'] === 's1b' && l['to'] === 'down');
  assert.equal(logged.length, 1, 'one transition logged');
  assert.match(String(logged[0]?.['reason']), new RegExp(`^${cause}$`), 'the logged transition names the passive cause');
  if (sc.metricsPort !== undefined) {
    const metrics = await fetchMetrics(sc.frontNs, sc.metricsPort);
    assert.match(metrics, new RegExp(`^sluice_front_health_${sc.kind}_downs_total 1$`, 'm'));
    assert.match(metrics, new RegExp(`^sluice_front_server_${sc.kind}_total\\{service="www",server="s1b"\\} [1-9]\\d*$`, 'm'));
  }

  // The connections that met the broken server before the transition have
  // failed by now: a refused one at once, a silent one at the client's
  // timeout. Each failure was a decision for s1b made after the cut (+2: a
  // request in flight to it at the cut); with the active check alone
  // ~RATE/3 a second would have gone there for PASSIVE_FALL seconds.
  const decidedAtDown = (await s1b()).decided;
  await sleep(sc.kind === 'refused' ? 500 : CLIENT_TIMEOUT_MS + 1500);
  const atDown = await tally();
  t.diagnostic(`clients: ${String(atDown.failures)} failed; decided for s1b from the cut to the transition: ${String(decidedAtDown - decidedBefore)}`);
  const bound = sc.kind === 'refused' ? (await s1b()).refused : decidedAtDown - decidedBefore;
  assert.ok(atDown.failures <= bound + 2, `failures ${String(atDown.failures)}, bound ${String(bound)}`);
  assert.ok(atDown.failures < (RATE / 3) * PASSIVE_FALL * 0.25, JSON.stringify(atDown));
  assert.equal((await s1b()).decided, decidedAtDown, 'no connection decided for s1b while it is down');
  await sleep(3000);
  const quiet = await tally();
  assert.equal(quiet.failures, 0, JSON.stringify(quiet));
  assert.equal(quiet.tally['s1b'] ?? 0, 0);
  // The servers that answered were never blamed.
  for (const b of await servers()) if (b.name !== 's1b') assert.deepEqual([b.refused, b.unanswered], [0, 0], b.name);

  sc.repair();
  await until(async () => (await s1b()).health?.state === 'up', 's1b up', 15_000, 100);
  const up = await s1b();
  assert.match(up.health!.reason, /check passed/);
  assert.equal(sc.kind === 'refused' ? up.health!.checks?.refusedSinceOk : up.health!.checks?.unansweredSinceOk, 0);
  await until(async () => ((await tally()).tally['s1b'] ?? 0) > 0, 's1b serves again', 15_000, 200);
}

/**
 * Breaking and repairing the server s1b of a testbed: its nginx killed and
 * started again (`refused`), or every packet of `family` to its namespace
 * dropped before anything sees it (`unanswered`: ARP and, for IPv6 with
 * `tcpOnly`, neighbour discovery still answer, as a hung host's NIC may).
 * `cleanup` (after each test) puts it back whatever the test did.
 */
export class BrokenServer {
  ns = '';
  runDir = '';
  readonly #table: string;
  readonly #family: 'ip' | 'ip6';
  readonly #match: string;

  constructor(family: 'ip' | 'ip6', tcpOnly: boolean) {
    this.#family = family;
    this.#table = family === 'ip' ? 'sluice_test_dead' : 'sluice_test_dead6';
    this.#match = tcpOnly ? 'policy accept;\n    meta l4proto tcp drop' : 'policy drop;';
  }

  #pid(): number {
    return Number(readFileSync(join(this.runDir, 'nginx-s1b.pid'), 'utf8').trim());
  }

  readonly killNginx = (): void => {
    process.kill(this.#pid(), 'SIGTERM');
  };

  readonly startNginx = (): void => {
    nsRun(this.ns, 'nginx', ['-c', join(this.runDir, 'nginx-s1b.conf')]);
  };

  readonly cut = (): void => {
    nsRun(this.ns, 'nft', ['-f', '-'], `table ${this.#family} ${this.#table} {\n  chain dead {\n    type filter hook prerouting priority raw - 10; ${this.#match}\n  }\n}\n`);
  };

  readonly repair = (): void => {
    nsRun(this.ns, 'nft', ['delete', 'table', this.#family, this.#table]);
  };

  cleanup(): void {
    if (this.ns === '') return;
    let alive = true;
    try {
      process.kill(this.#pid(), 0);
    } catch {
      alive = false;
    }
    if (!alive) this.startNginx();
    if (nsRun(this.ns, 'nft', ['list', 'tables']).includes(this.#table)) this.repair();
  }
}

async function fetchMetrics(ns: string, port: number): Promise<string> {
  const r = await nsRunAsync(ns, 'curl', ['-s', '-m', '5', `http://127.0.0.1:${String(port)}/metrics`]);
  assert.equal(r.code, 0, `GET /metrics in ${ns}: ${r.stderr}`);
  return r.stdout;
}
