/**
 * Active health checks of IPv6 servers on the dual-stack testbed (issue 23,
 * acceptance 5, first bullet; the IPv4 twin is front-health.test.ts): an
 * IPv6 service whose servers are IPv6 addresses checked by `tcp`, and one
 * checked by `http` ([addr]:80, GET /health with the body "ok"), at once on
 * one front node, each on its own VIP with its own paced IPv6 clients. nginx on s1b is killed: the front node takes it out after
 * exactly `fall` failed checks, and for the next QUIET_S seconds no new
 * connection goes to it (its `decided` counter stands still, the clients
 * count none) and none fails. nginx starts again: the server is up after
 * `rise` passed checks and gets connections again.
 *
 * Two more blocks run the passive check the same way: refused connections
 * (nginx killed) and unanswered SYNs (the server's TCP dropped).
 *
 * Judged from the daemon's status and the clients' counts; never by
 * comparing wall clocks of several processes.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { FrontServerStatus, FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { NsProcess, nsRun, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';
import { ipv6Twin } from '../../scripts/testbed/plan.ts';

const PACED = fileURLToPath(new URL('../fixtures/http-paced.ts', import.meta.url));
const INTERVAL_S = 1;
const FALL = 2;
const RISE = 2;
const QUIET_S = 10;

const testbed = useTestbed({ clusters: 1 });

const KINDS = ['tcp', 'http'] as const;
type Kind = (typeof KINDS)[number];
/** Each kind's service has its own IPv6 VIP (the WAN routes the cluster's VIP /64 to the front node). */
const VIPS: Readonly<Record<Kind, string>> = { tcp: ipv6Twin('198.19.1.1'), http: ipv6Twin('198.19.1.2') };

function config(): string {
  const st = testbed();
  const k = st.plan.clusters[0]!;
  const service = (kind: Kind): string => {
    const http = kind === 'http' ? ', path: /health, bodyMatch: ok' : '';
    return `  - name: www6-${kind}
    vip: ${VIPS[kind]}
    port: 80
    method: byrequests
    health: { kind: ${kind}, source: ${k.lanAddress6}, intervalSeconds: ${String(INTERVAL_S)}, timeoutSeconds: 0.5, fall: ${String(FALL)}, rise: ${String(RISE)}${http} }
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address6} }`).join('\n')}
`;
  };
  return `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
services:
${KINDS.map(service).join('')}`;
}

interface Tally {
  readonly tally: Record<string, number>;
  readonly failures: number;
  readonly inFlight: number;
}

/**
 * Both kinds at once: one front node, an IPv6 service checked with `tcp`
 * and one with `http` over the same servers, each on its own VIP with its
 * own paced clients; one kill of nginx on s1b, each service judged by its
 * own status and its own clients.
 */
describe('sluice front: tcp and http health checks of IPv6 servers', () => {
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
    const k = st.plan.clusters[0]!;
    frontNs = k.front.name;
    front = new FrontProcess(k.front.name, writeConfig(join(runDir, 'front-ipv6-health.yaml'), config()));
    await front.waitFor('front node ready');
    const client = st.plan.clients[0]!;
    for (const kind of KINDS) loads.set(kind, new NsProcess(client.name, [PACED, '--url', `http://[${VIPS[kind]}]/`, '--rate', '5', '--sources', client.address6, '--max-seconds', '120']));
  });

  after(async () => {
    for (const load of loads.values()) await load.stop();
    await front?.stop();
    for (const id of Object.keys(ns)) if (!nginxAlive(id)) startNginx(id);
  });

  async function status(): Promise<FrontStatus> {
    return (await front!.status()) as unknown as FrontStatus;
  }
  function servers(st: FrontStatus, kind: Kind): readonly FrontServerStatus[] {
    const svc = st.services.find((v) => v.name === `www6-${kind}`);
    assert.ok(svc, `service www6-${kind} in status`);
    return svc.servers;
  }
  async function server(kind: Kind, name: string): Promise<FrontServerStatus> {
    const s = servers(await status(), kind).find((b) => b.name === name);
    assert.ok(s, `server ${name} of www6-${kind} in status`);
    return s;
  }
  async function tally(kind: Kind): Promise<Tally> {
    return (await loads.get(kind)!.request('tally')) as unknown as Tally;
  }
  async function healthIs(kind: Kind, name: string, state: string, deadlineMs = 15_000): Promise<FrontServerStatus> {
    let last: FrontServerStatus | undefined;
    await until(async () => (last = await server(kind, name)).health?.state === state, `${name} of www6-${kind} health ${state}`, deadlineMs, 100);
    return last!;
  }

  const pidFile = (id: string): string => join(runDir, `nginx-${id}.pid`);
  function nginxAlive(id: string): boolean {
    try {
      process.kill(Number(readFileSync(pidFile(id), 'utf8').trim()), 0);
      return true;
    } catch {
      return false;
    }
  }
  function startNginx(id: string): void {
    nsRun(ns[id]!, 'nginx', ['-c', join(runDir, `nginx-${id}.conf`)]);
  }

  it(`a killed IPv6 server's nginx gets no new connection after ${String(FALL)} failed checks, none fails over ${String(QUIET_S)} s; started again it is back after ${String(RISE)} passed checks (tcp and http checks, one service each, at once)`, async (t) => {
    await until(async () => {
      const st = await status();
      return KINDS.every((kind) => servers(st, kind).every((b) => b.decided > 0));
    }, 'every server of both services decided connections', 20_000, 200);
    // Every target's first check has passed (the first checks are spread over one interval).
    await until(async () => ((await status()).health?.outcomes['ok'] ?? 0) >= 3 * KINDS.length, 'the checks to [addr]:80 pass', 10_000, 100);
    const st0 = await status();
    for (const kind of KINDS) for (const b of servers(st0, kind)) assert.equal(b.health?.state, 'up', `${kind}: ${JSON.stringify(b.health)}`);

    process.kill(Number(readFileSync(pidFile('s1b'), 'utf8').trim()), 'SIGTERM');
    await until(() => !nginxAlive('s1b'), 'nginx s1b gone', 10_000, 50);

    const decidedAtDown = new Map<Kind, number>();
    await Promise.all(
      KINDS.map(async (kind) => {
        const down = await healthIs(kind, 's1b', 'down');
        const h = down.health;
        assert.ok(h?.checks, JSON.stringify(h));
        assert.equal(h.checks.failuresAtDown, FALL, `${kind}: down after exactly fall=${String(FALL)} failed checks`);
        assert.match(h.reason, /^check failed: connect refused \(2 in a row\)$/);
        decidedAtDown.set(kind, down.decided);
      }),
    );
    const st = await status();
    assert.ok((st.health?.transitions.down ?? 0) >= KINDS.length, JSON.stringify(st.health?.transitions));
    assert.ok((st.health?.outcomes['refused'] ?? 0) >= FALL * KINDS.length);

    // Connections that met the dead server before the transition have failed by now; start counting.
    await sleep(500);
    for (const kind of KINDS) await tally(kind);
    await sleep(QUIET_S * 1000);
    for (const kind of KINDS) {
      const quiet = await tally(kind);
      // What CI's output must show if it fails (it did once: one ECONNREFUSED in the window, cause unknown).
      if (quiet.failures !== 0) t.diagnostic(`${kind}: failures: ${JSON.stringify(quiet)}; front status: ${JSON.stringify(await status())}; front warnings: ${JSON.stringify(front!.lines.filter((l) => Number(l['level']) >= 40).slice(-30))}; conntrack -S: ${nsRun(frontNs, 'conntrack', ['-S'])}`);
      assert.equal(quiet.failures, 0, `${kind}: no connection failed over ${String(QUIET_S)} s: ${JSON.stringify(quiet)}`);
      assert.equal(quiet.tally['s1b'] ?? 0, 0, `${kind}: ${JSON.stringify(quiet)}`);
      assert.ok((quiet.tally['s1a'] ?? 0) + (quiet.tally['s1c'] ?? 0) >= QUIET_S * 5 * 0.5, `${kind}: the clients kept going: ${JSON.stringify(quiet)}`);
    }
    const stQuiet = await status();
    for (const kind of KINDS) assert.equal(servers(stQuiet, kind).find((b) => b.name === 's1b')?.decided, decidedAtDown.get(kind), `${kind}: the daemon decided no connection for s1b while it was down`);

    startNginx('s1b');
    await Promise.all(
      KINDS.map(async (kind) => {
        const up = await healthIs(kind, 's1b', 'up', 15_000);
        assert.match(up.health?.reason ?? '', /check passed/);
        assert.ok((up.health?.checks?.passesInRow ?? 0) >= RISE, JSON.stringify(up.health));
        await until(async () => (await server(kind, 's1b')).decided > decidedAtDown.get(kind)!, `s1b of www6-${kind} decided connections again`, 15_000, 200);
        await until(async () => ((await tally(kind)).tally['s1b'] ?? 0) > 0, `a client of www6-${kind} reached s1b again`, 15_000, 200);
        const back = await tally(kind);
        assert.equal(back.failures, 0, `${kind}: no connection failed while it came back: ${JSON.stringify(back)}`);
      }),
    );
  });
});

/**
 * The passive check with IPv6 servers (the IPv4 twin is front-health.test.ts's
 * passive block): a server that refuses connections answers each SYN with an
 * IPv6 RST+ACK of sequence 0, which the node sees in its copy of the server's
 * packets; `refusedLimit` of them take it out long before `fall` failed
 * active checks would. Judged from the daemon's counters and the clients'
 * own counts.
 */
describe('sluice front: refused IPv6 connections take a server out before its fall (passive check)', () => {
  const VIP = ipv6Twin('198.19.1.3');
  const LIMIT = 3;
  const PASSIVE_FALL = 20;
  const RATE = 30;
  let front: FrontProcess | undefined;
  let load: NsProcess | undefined;
  let runDir = '';
  const ns: Record<string, string> = {};
  const pidFile = (id: string): string => join(runDir, `nginx-${id}.pid`);
  const alive = (id: string): boolean => {
    try {
      process.kill(Number(readFileSync(pidFile(id), 'utf8').trim()), 0);
      return true;
    } catch {
      return false;
    }
  };

  after(async () => {
    await load?.stop();
    await front?.stop();
    for (const id of Object.keys(ns)) if (!alive(id)) nsRun(ns[id]!, 'nginx', ['-c', join(runDir, `nginx-${id}.conf`)]);
  });

  it(`a killed IPv6 server's nginx is out after ${String(LIMIT)} refused connections, not ${String(PASSIVE_FALL)} failed checks; back after rise passed checks`, async (t) => {
    const st = testbed();
    runDir = st.runDir;
    const k = st.plan.clusters[0]!;
    for (const s of k.servers) ns[s.id] = s.name;
    const cfg = `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
adminSocket: ${join(runDir, 'front-ipv6-passive.sock')}
services:
  - name: www6
    vip: ${VIP}
    port: 80
    method: byrequests
    health: { kind: tcp, source: ${k.lanAddress6}, intervalSeconds: 1, timeoutSeconds: 0.5, fall: ${String(PASSIVE_FALL)}, rise: 2, refusedLimit: ${String(LIMIT)} }
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address6} }`).join('\n')}
`;
    front = new FrontProcess(k.front.name, writeConfig(join(runDir, 'front-ipv6-passive.yaml'), cfg));
    await front.waitFor('front node ready');
    const client = st.plan.clients[0]!;
    load = new NsProcess(client.name, [PACED, '--url', `http://[${VIP}]/`, '--rate', String(RATE), '--sources', client.address6, '--max-seconds', '120']);
    const status = async (): Promise<FrontServerStatus> => {
      const s = ((await front!.status()) as unknown as FrontStatus).services[0]?.servers.find((b) => b.name === 's1b');
      assert.ok(s, 's1b in status');
      return s;
    };
    const tally = async (): Promise<Tally> => (await load!.request('tally')) as unknown as Tally;
    await until(async () => ((await front!.status()) as unknown as FrontStatus).services[0]!.servers.every((b) => b.decided > 0), 'every server decided connections', 20_000, 200);
    await tally();

    process.kill(Number(readFileSync(pidFile('s1b'), 'utf8').trim()), 'SIGTERM');
    const s1bIs = async (state: string, pollMs: number): Promise<FrontServerStatus> => {
      let last: FrontServerStatus | undefined;
      await until(
        async () => {
          last = await status();
          return last.health?.state === state;
        },
        `s1b ${state}`,
        15_000,
        pollMs,
      );
      return last!;
    };
    const down = await s1bIs('down', 50);
    const h = down.health!;
    t.diagnostic(`s1b down: ${h.reason}; refused ${String(down.refused)}; checks ${JSON.stringify(h.checks)}`);
    assert.match(h.reason, new RegExp(`^check failed: refused \\d+ connections since the last passed check \\(health.refusedLimit ${String(LIMIT)}\\)$`));
    assert.ok(h.checks !== undefined && h.checks.failuresAtDown < PASSIVE_FALL, `taken out by refusals, before fall: ${JSON.stringify(h.checks)}`);
    assert.equal(h.checks.refusedDowns, 1);
    assert.ok(down.refused >= LIMIT, `the daemon counted the refusals: ${String(down.refused)}`);

    // Connections decided before the next read of the count (every 50 ms) met the dead server too.
    await sleep(500);
    const atDown = await tally();
    t.diagnostic(`clients: ${String(atDown.failures)} failed after the kill`);
    const refused = (await status()).refused;
    assert.ok(atDown.failures <= refused + 2, `failures ${String(atDown.failures)}, refused ${String(refused)}`);
    assert.ok(atDown.failures < (RATE / 3) * PASSIVE_FALL * 0.25, JSON.stringify(atDown));
    const decided = (await status()).decided;
    await sleep(3000);
    const quiet = await tally();
    assert.equal(quiet.failures, 0, JSON.stringify(quiet));
    assert.equal(quiet.tally['s1b'] ?? 0, 0);
    assert.equal((await status()).decided, decided, 'no connection decided for s1b while it is down');

    nsRun(ns['s1b']!, 'nginx', ['-c', join(runDir, 'nginx-s1b.conf')]);
    const up = await s1bIs('up', 100);
    assert.match(up.health!.reason, /check passed/);
    assert.equal(up.health!.checks?.refusedSinceOk, 0);
    await until(async () => ((await tally()).tally['s1b'] ?? 0) > 0, 's1b serves again', 15_000, 200);
  });
});

/**
 * The passive check of a silent IPv6 server (the IPv4 twin is in
 * front-health.test.ts): s1b's namespace drops every TCP packet (neighbour
 * discovery still answers), so nothing answers its clients' SYNs; their
 * retransmissions, copied while the flow has seen no reply, take it out
 * after `unansweredLimit` of them, long before `fall` failed checks.
 */
describe('sluice front: an IPv6 server that stops answering is out after unansweredLimit retransmitted SYNs (passive check)', () => {
  const VIP = ipv6Twin('198.19.1.4');
  const LIMIT = 3;
  const PASSIVE_FALL = 20;
  const RATE = 30;
  const DEAD_TABLE = 'sluice_test_dead6';
  let front: FrontProcess | undefined;
  let load: NsProcess | undefined;
  let s1bNs = '';
  const revive = (): void => {
    if (s1bNs !== '') nsRun(s1bNs, 'nft', ['delete', 'table', 'ip6', DEAD_TABLE]);
  };

  after(async () => {
    await load?.stop();
    await front?.stop();
    if (s1bNs !== '' && nsRun(s1bNs, 'nft', ['list', 'tables']).includes(DEAD_TABLE)) revive();
  });

  it(`an IPv6 server whose TCP is dropped is out after ${String(LIMIT)} unanswered retransmitted SYNs, not ${String(PASSIVE_FALL)} failed checks; back after rise passed checks`, async (t) => {
    const st = testbed();
    const runDir = st.runDir;
    const k = st.plan.clusters[0]!;
    s1bNs = k.servers.find((s) => s.id === 's1b')!.name;
    const cfg = `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
adminSocket: ${join(runDir, 'front-ipv6-unanswered.sock')}
services:
  - name: www6
    vip: ${VIP}
    port: 80
    method: byrequests
    health: { kind: tcp, source: ${k.lanAddress6}, intervalSeconds: 1, timeoutSeconds: 0.5, fall: ${String(PASSIVE_FALL)}, rise: 2, unansweredLimit: ${String(LIMIT)} }
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address6} }`).join('\n')}
`;
    front = new FrontProcess(k.front.name, writeConfig(join(runDir, 'front-ipv6-unanswered.yaml'), cfg));
    await front.waitFor('front node ready');
    const client = st.plan.clients[0]!;
    load = new NsProcess(client.name, [PACED, '--url', `http://[${VIP}]/`, '--rate', String(RATE), '--sources', client.address6, '--max-seconds', '120']);
    const servers = async (): Promise<readonly FrontServerStatus[]> => ((await front!.status()) as unknown as FrontStatus).services[0]!.servers;
    const status = async (): Promise<FrontServerStatus> => {
      const s = (await servers()).find((b) => b.name === 's1b');
      assert.ok(s, 's1b in status');
      return s;
    };
    const tally = async (): Promise<Tally> => (await load!.request('tally')) as unknown as Tally;
    await until(async () => (await servers()).every((b) => b.decided > 0), 'every server decided connections', 20_000, 200);
    await tally();

    const decidedBefore = (await status()).decided;
    nsRun(s1bNs, 'nft', ['-f', '-'], `table ip6 ${DEAD_TABLE} {\n  chain dead {\n    type filter hook prerouting priority raw - 10; policy accept;\n    meta l4proto tcp drop\n  }\n}\n`);
    let down: FrontServerStatus | undefined;
    await until(async () => (down = await status()).health?.state === 'down', 's1b down', 15_000, 50);
    const h = down!.health!;
    t.diagnostic(`s1b down: ${h.reason}; unanswered ${String(down!.unanswered)}; checks ${JSON.stringify(h.checks)}`);
    assert.match(h.reason, new RegExp(`^check failed: left \\d+ retransmitted SYNs unanswered since the last passed check \\(health.unansweredLimit ${String(LIMIT)}\\)$`));
    assert.ok(h.checks !== undefined && h.checks.failuresAtDown < PASSIVE_FALL, `taken out by its silence, before fall: ${JSON.stringify(h.checks)}`);
    assert.equal(h.checks.unansweredDowns, 1);

    // Every connection decided for s1b before the transition fails at the client's 5 s timeout: wait them out.
    const decidedAtDown = (await status()).decided;
    await sleep(6500);
    const atDown = await tally();
    t.diagnostic(`clients: ${String(atDown.failures)} failed; decided for s1b from the cut to the transition: ${String(decidedAtDown - decidedBefore)}`);
    // (+2: a request in flight to s1b at the cut.)
    assert.ok(atDown.failures <= decidedAtDown - decidedBefore + 2, `failures ${String(atDown.failures)}, decided for s1b ${String(decidedAtDown - decidedBefore)}`);
    assert.ok(atDown.failures < (RATE / 3) * PASSIVE_FALL * 0.25, JSON.stringify(atDown));
    assert.equal((await status()).decided, decidedAtDown, 'no connection decided for s1b while it is down');
    await sleep(3000);
    const quiet = await tally();
    assert.equal(quiet.failures, 0, JSON.stringify(quiet));
    assert.equal(quiet.tally['s1b'] ?? 0, 0);
    for (const b of await servers()) if (b.name !== 's1b') assert.equal(b.unanswered, 0, `${b.name}: ${String(b.unanswered)}`);

    revive();
    await until(async () => (await status()).health?.state === 'up', 's1b up', 15_000, 100);
    assert.equal((await status()).health!.checks?.unansweredSinceOk, 0);
    await until(async () => ((await tally()).tally['s1b'] ?? 0) > 0, 's1b serves again', 15_000, 200);
  });
});
