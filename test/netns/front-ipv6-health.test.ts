/**
 * Active health checks of IPv6 servers on the dual-stack testbed (issue 23,
 * acceptance 5, first bullet; the IPv4 twin is front-health.test.ts): an
 * IPv6 service whose servers are IPv6 addresses, checked by `tcp` and by
 * `http` ([addr]:80, GET /health with the body "ok"), with paced IPv6
 * clients. nginx on s1b is killed: the front node takes it out after
 * exactly `fall` failed checks, and for the next QUIET_S seconds no new
 * connection goes to it (its `decided` counter stands still, the clients
 * count none) and none fails. nginx starts again: the server is up after
 * `rise` passed checks and gets connections again.
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

const PACED = fileURLToPath(new URL('../fixtures/http-paced.ts', import.meta.url));
const INTERVAL_S = 1;
const FALL = 2;
const RISE = 2;
const QUIET_S = 10;

const testbed = useTestbed({ clusters: 1 });

function config(kind: 'tcp' | 'http'): string {
  const st = testbed();
  const k = st.plan.clusters[0]!;
  const http = kind === 'http' ? ', path: /health, bodyMatch: ok' : '';
  return `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
services:
  - name: www6
    vip: ${k.vip6}
    port: 80
    method: byrequests
    health: { kind: ${kind}, source: ${k.lanAddress6}, intervalSeconds: ${String(INTERVAL_S)}, timeoutSeconds: 0.5, fall: ${String(FALL)}, rise: ${String(RISE)}${http} }
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address6} }`).join('\n')}
`;
}

interface Tally {
  readonly tally: Record<string, number>;
  readonly failures: number;
  readonly inFlight: number;
}

for (const kind of ['tcp', 'http'] as const) {
  describe(`sluice front: ${kind} health checks of IPv6 servers`, () => {
    let front: FrontProcess | undefined;
    let load: NsProcess | undefined;
    let runDir = '';
    const ns: Record<string, string> = {};

    before(async () => {
      const st = testbed();
      runDir = st.runDir;
      for (const s of st.plan.clusters[0]?.servers ?? []) {
        ns[s.id] = s.name;
        writeFileSync(join(runDir, `www-${s.id}`, 'health'), 'ok\n', { mode: 0o644 });
      }
      const k = st.plan.clusters[0]!;
      front = new FrontProcess(k.front.name, writeConfig(join(runDir, `front-ipv6-health-${kind}.yaml`), config(kind)));
      await front.waitFor('front node ready');
      const client = st.plan.clients[0]!;
      load = new NsProcess(client.name, [PACED, '--url', `http://[${k.vip6}]/`, '--rate', '5', '--sources', client.address6, '--max-seconds', '120']);
    });

    after(async () => {
      await load?.stop();
      await front?.stop();
      for (const id of Object.keys(ns)) if (!nginxAlive(id)) startNginx(id);
    });

    async function status(): Promise<FrontStatus> {
      return (await front!.status()) as unknown as FrontStatus;
    }
    async function server(name: string): Promise<FrontServerStatus> {
      const s = (await status()).services[0]?.servers.find((b) => b.name === name);
      assert.ok(s, `server ${name} in status`);
      return s;
    }
    async function tally(): Promise<Tally> {
      return (await load!.request('tally')) as unknown as Tally;
    }
    async function healthIs(name: string, state: string, deadlineMs = 15_000): Promise<FrontServerStatus> {
      let last: FrontServerStatus | undefined;
      await until(async () => (last = await server(name)).health?.state === state, `${name} health ${state}`, deadlineMs, 100);
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

    it(`a killed IPv6 server's nginx gets no new connection after ${String(FALL)} failed checks, none fails over ${String(QUIET_S)} s; started again it is back after ${String(RISE)} passed checks`, async () => {
      await until(async () => (await status()).services[0]?.servers.every((b) => b.decided > 0) ?? false, 'every server decided connections', 20_000, 200);
      for (const b of (await status()).services[0]?.servers ?? []) assert.equal(b.health?.state, 'up', JSON.stringify(b.health));
      const st0 = await status();
      assert.ok((st0.health?.outcomes['ok'] ?? 0) >= 3, `the checks to [addr]:80 pass: ${JSON.stringify(st0.health)}`);

      process.kill(Number(readFileSync(pidFile('s1b'), 'utf8').trim()), 'SIGTERM');
      await until(() => !nginxAlive('s1b'), 'nginx s1b gone', 10_000, 50);

      const down = await healthIs('s1b', 'down');
      const h = down.health;
      assert.ok(h?.checks, JSON.stringify(h));
      assert.equal(h.checks.failuresAtDown, FALL, `down after exactly fall=${String(FALL)} failed checks`);
      assert.match(h.reason, /^check failed: connect refused \(2 in a row\)$/);
      const decidedAtDown = down.decided;
      const st = await status();
      assert.ok((st.health?.transitions.down ?? 0) >= 1);
      assert.ok((st.health?.outcomes['refused'] ?? 0) >= FALL);

      // Connections that met the dead server before the transition have failed by now; start counting.
      await sleep(500);
      await tally();
      await sleep(QUIET_S * 1000);
      const quiet = await tally();
      assert.equal(quiet.failures, 0, `no connection failed over ${String(QUIET_S)} s: ${JSON.stringify(quiet)}`);
      assert.equal(quiet.tally['s1b'] ?? 0, 0, JSON.stringify(quiet));
      assert.ok((quiet.tally['s1a'] ?? 0) + (quiet.tally['s1c'] ?? 0) >= QUIET_S * 5 * 0.5, `the clients kept going: ${JSON.stringify(quiet)}`);
      assert.equal((await server('s1b')).decided, decidedAtDown, 'the daemon decided no connection for s1b while it was down');

      startNginx('s1b');
      const up = await healthIs('s1b', 'up', 15_000);
      assert.match(up.health?.reason ?? '', /check passed/);
      assert.ok((up.health?.checks?.passesInRow ?? 0) >= RISE, JSON.stringify(up.health));
      await until(async () => (await server('s1b')).decided > decidedAtDown, 's1b decided connections again', 15_000, 200);
      await until(async () => ((await tally()).tally['s1b'] ?? 0) > 0, 'a client reached s1b again', 15_000, 200);
      const back = await tally();
      assert.equal(back.failures, 0, `no connection failed while it came back: ${JSON.stringify(back)}`);
    });
  });
}
