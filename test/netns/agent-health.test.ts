/**
 * Server health through the agent, on the testbed (issue 20, acceptance 1
 * "the agent's own check alone" and acceptance 2): real nginx servers, a
 * real `sluice agent` next to each with its own http check, a real `sluice
 * front` with no check of its own, paced client traffic (5 new
 * connections/s) and curl downloads.
 *   - nginx killed, its agent alive: the agent reports down, the front
 *     applies it, and from then on no new connection goes to that server
 *     and none fails for 30 s; nginx started again: it gets connections again.
 *   - drain with `sluice agent ctl`, drain with the state file, maint with
 *     the state file: no new connection is decided for the server (the
 *     front's own per-server counter) while downloads it was serving, held
 *     open across the change, finish intact (SHA-1); maint shows as maint
 *     in the front's status. An agent restarted while drained stays drained.
 * Every verdict comes from one clock that sees the truth: the front node's
 * status (health and decided counters in one snapshot), the client's
 * success and failure counts, and the downloads' SHA-1.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { AgentHealthStatus } from '../../src/agent/status.ts';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { NsProcess, nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const PACED = fileURLToPath(new URL('../fixtures/http-paced.ts', import.meta.url));
const LOAD_S = 1;
const DOWN_AFTER = 3;
/** The agents' own check: http every second, down after 2 failures, up after 2 passes. */
const CHECK = { intervalSeconds: 1, timeoutSeconds: 0.8, rise: 2, fall: 2 };

const tb = useTestbed({ clients: 1, clusters: 1, serversPerCluster: 3, blobMiB: 24, delaysMs: { '1:1': 0 } });

type ControlServer = NonNullable<FrontStatus['control']>['servers'][number];

describe('server health through the agent', () => {
  let front: FrontProcess;
  const agents = new Map<string, FrontProcess>();
  let load: NsProcess | undefined;
  let sock = '';
  let frNs = '';
  const agentConfig: Record<string, string> = {};

  const stateFile = (id: string): string => join(tb().runDir, `agent-state-${id}`);
  const agentSock = (id: string): string => join(tb().runDir, `agent-${id}.sock`);

  async function status(): Promise<FrontStatus> {
    const r = await nsRunAsync(frNs, BIN, ['ctl', '--socket', sock, 'status']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as FrontStatus;
  }
  /** One snapshot of the front node: what it holds about `id` (agent health, decided, open records). */
  async function server(id: string): Promise<{ health: ControlServer['health']; reason: string; decided: number; active: number; all: FrontStatus }> {
    const s = await status();
    const c = s.control?.servers.find((x) => x.name === id);
    const b = s.services[0]!.servers.find((x) => x.name === id)!;
    return { health: c?.health ?? 'none', reason: c?.healthReason ?? '', decided: b.decided, active: b.active, all: s };
  }
  function startAgent(id: string): FrontProcess {
    const s = tb().plan.clusters[0]!.servers.find((x) => x.id === id)!;
    const a = new FrontProcess(s.name, agentConfig[id]!, 'agent');
    agents.set(id, a);
    return a;
  }
  async function tally(): Promise<{ tally: Record<string, number>; failures: number }> {
    return (await load!.request('tally')) as { tally: Record<string, number>; failures: number };
  }
  /** `sluice agent ctl` against a server's agent (its admin socket is a file: no namespace needed). */
  function agentCtl(id: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(BIN, ['agent', 'ctl', '--socket', agentSock(id), ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });
  }
  async function untilHealth(id: string, want: string, what: string, ms = 20_000): Promise<Awaited<ReturnType<typeof server>>> {
    let last: Awaited<ReturnType<typeof server>> | undefined;
    await until(async () => (last = await server(id)).health === want, `${what} (front shows ${id} ${want})`, ms, 100).catch((e: unknown) => {
      throw new Error(`${String(e)}; last: ${last?.health} ${last?.reason}`);
    });
    return last!;
  }

  before(async () => {
    const st = tb();
    const k = st.plan.clusters[0]!;
    frNs = k.front.name;
    sock = join(st.runDir, 'front.sock');
    const keys = st.keysDir;
    // No check of the front's own: health comes from the agents alone.
    const cfg = writeConfig(
      join(st.runDir, 'front.yaml'),
      `cluster: c1
uplinkAddress: ${k.uplinkAddress}
adminSocket: ${sock}
http: { listen: '127.0.0.1:9100' }
services:
  - name: www
    vip: ${k.vip}
    port: 80
    method: byrequests
    servers:
${k.servers.map((s) => `      - { name: ${s.id}, address: ${s.address} }`).join('\n')}
control:
  keyFile: ${join(keys, 'fr1.key')}
  agents:
    listen: tcp://${k.lanAddress}:7101
    allow: [${k.servers.map((s) => join(keys, `${s.id}.pub`)).join(', ')}]
  loadSeconds: ${LOAD_S}
  downAfterIntervals: ${DOWN_AFTER}
`,
    );
    front = new FrontProcess(frNs, cfg);
    await front.waitFor('front node ready', 30_000);
    await front.waitFor('control plane up', 30_000);
    for (const s of k.servers) {
      agentConfig[s.id] = writeConfig(
        join(st.runDir, `agent-${s.id}.yaml`),
        `name: ${s.id}
address: ${s.address}
front: { endpoint: 'tcp://${k.lanAddress}:7101', publicKey: ${join(keys, 'fr1.pub')} }
control: { keyFile: ${join(keys, `${s.id}.key`)} }
loadSeconds: ${LOAD_S}
utilization: { source: connections, maxConnections: 100 }
accessLog: { path: ${join(st.runDir, `nginx-${s.id}.access.log`)}, pollSeconds: 1 }
adminSocket: ${agentSock(s.id)}
health: { kind: http, url: 'http://127.0.0.1/', intervalSeconds: ${CHECK.intervalSeconds}, timeoutSeconds: ${CHECK.timeoutSeconds}, rise: ${CHECK.rise}, fall: ${CHECK.fall} }
stateFile: { path: ${stateFile(s.id)}, pollSeconds: 0.5 }
http: { listen: '127.0.0.1:9102' }
`,
      );
      await startAgent(s.id).waitFor('agent ready', 30_000);
    }
    for (const s of k.servers) await untilHealth(s.id, 'up', 'every agent reports up', 30_000);
    const c = st.plan.clients[0]!;
    // 5 new connections/s, bounded to 10 minutes.
    load = new NsProcess(c.name, [PACED, '--url', `http://${k.vip}/`, '--rate', '5', '--sources', c.address, '--max-seconds', '600']);
  });

  after(async () => {
    await load?.stop();
    for (const a of agents.values()) await a.stop();
    await front.stop();
  });

  it('nginx killed, agent alive: reported down, no new connection to it and 0 failures for 30 s; started again, it gets connections again', { timeout: 180_000 }, async () => {
    const st = tb();
    const victim = st.plan.clusters[0]!.servers[2]!;
    const others = st.plan.clusters[0]!.servers.filter((s) => s.id !== victim.id).map((s) => s.id);
    const d0 = (await server(victim.id)).decided;
    await until(async () => (await server(victim.id)).decided > d0 + 2, 'the victim gets connections before', 20_000, 200);

    // Stop nginx (master and worker; its listening socket closes). The agent keeps running.
    process.kill(st.nginxPids[victim.id]!, 'SIGTERM');
    await until(() => !nsRun(victim.name, 'ss', ['-Hltn', 'sport = :80']).includes(':80'), 'nginx stopped', 10_000, 100);
    // One snapshot: the front has applied down, and the victim's count then.
    const applied = await untilHealth(victim.id, 'down', 'the agent reports its check failing', 30_000);
    assert.match(applied.reason, /check failed: http http:\/\/127\.0\.0\.1\/: ECONNREFUSED/);
    // Connections decided before the front applied it fail at once (refused): let them.
    await sleep(1000);
    await tally();
    await sleep(30_000);
    const t = await tally();
    const after30 = await server(victim.id);
    assert.equal(after30.health, 'down');
    assert.equal(after30.decided, applied.decided, 'no new connection decided for the dead server after the front applied down');
    assert.equal(t.failures, 0, `0 failed connections over 30 s: ${JSON.stringify(t)}`);
    assert.equal(t.tally[victim.id] ?? 0, 0, JSON.stringify(t));
    const served = others.reduce((n, id) => n + (t.tally[id] ?? 0), 0);
    assert.ok(served >= 60, `traffic kept flowing to the other servers (${served} in 30 s at 5/s)`);

    // Start nginx again: after `rise` passes the agent reports up, and new connections reach it.
    nsRun(victim.name, 'nginx', ['-c', join(st.runDir, `nginx-${victim.id}.conf`)]);
    const back = await untilHealth(victim.id, 'up', 'the agent reports its check passing again', 30_000);
    await until(async () => (await server(victim.id)).decided > back.decided, 'new connections reach it again', 20_000, 200);
    // The clients' side: answered by it again (tallies since the last one, summed until one is in).
    let answered = 0;
    await until(async () => {
      answered += (await tally()).tally[victim.id] ?? 0;
      return answered > 0;
    }, 'answered by it again', 10_000, 250);
  });

  /**
   * A download the test holds open (its output unread, so curl blocks and
   * the connection stays established however slow the machine is) until
   * release(); then read at a bounded rate (curl --limit-rate), so it runs
   * on for seconds after the drain.
   */
  function heldDownload(ns: string, url: string): { done: Promise<{ code: number; sha1: string; bytes: number }>; release: () => void } {
    const dl = spawn('ip', ['netns', 'exec', ns, 'curl', '-s', '-m', '150', '--limit-rate', '8M', url], { stdio: ['ignore', 'pipe', 'ignore'] });
    const hash = createHash('sha1');
    let bytes = 0;
    const done = new Promise<{ code: number; sha1: string; bytes: number }>((resolve) =>
      dl.on('close', (code) => {
        resolve({ code: code ?? -1, sha1: hash.digest('hex'), bytes });
      }),
    );
    return {
      done,
      release: () => {
        dl.stdout.on('data', (d: Buffer) => {
          bytes += d.length;
          hash.update(d);
        });
      },
    };
  }

  /**
   * Downloads running through the VIP; `set` takes the server that serves
   * the most of them out with the verb; then no new connection is decided
   * for it, its downloads finish intact, and `clear` brings it back.
   */
  async function takeOut(verb: 'drain' | 'maint', set: (id: string) => Promise<void>, clear: (id: string) => Promise<void>): Promise<void> {
    const st = tb();
    const k = st.plan.clusters[0]!;
    const client = st.plan.clients[0]!.name;
    const dls = Array.from({ length: 6 }, () => heldDownload(client, `http://${k.vip}/blob.bin`));
    let released = false;
    try {
      // The front's records hold the six downloads (the paced connections come and go).
      let snap: FrontStatus | undefined;
      await until(async () => (snap = await status()).services[0]!.servers.reduce((n, s) => n + s.active, 0) >= 6, 'six downloads established', 30_000, 100);
      // Six over three servers: the busiest holds two or more, so at least one download (the paced connections last milliseconds).
      const target = [...snap!.services[0]!.servers].sort((a, b) => b.active - a.active)[0]!;
      assert.ok(target.active >= 2, JSON.stringify(snap!.services[0]));
      const id = target.name;
      await set(id);
      const applied = await untilHealth(id, verb, `${verb} applied`);
      assert.ok(applied.active >= 1, `${id} still holds its downloads when ${verb} is applied`);
      await tally();
      const othersAt = applied.all.services[0]!.servers.filter((s) => s.name !== id).reduce((n, s) => n + s.decided, 0);
      // 3 s at 5 new connections/s: ~15 decided for the others, none for it.
      await sleep(3000);
      const later = await server(id);
      assert.equal(later.health, verb);
      assert.equal(later.decided, applied.decided, `no new connection decided for ${id} while it is ${verb}`);
      const othersLater = later.all.services[0]!.servers.filter((s) => s.name !== id).reduce((n, s) => n + s.decided, 0);
      assert.ok(othersLater > othersAt + 5, `new connections went to the other servers (${othersAt} -> ${othersLater})`);
      const t = await tally();
      assert.equal(t.failures, 0, JSON.stringify(t));
      assert.equal(t.tally[id] ?? 0, 0, JSON.stringify(t));
      // Its established downloads run to the end, intact.
      for (const d of dls) d.release();
      released = true;
      for (const d of dls) {
        const r = await d.done;
        assert.deepEqual([r.code, r.sha1], [0, st.blobSha1], `download intact (${r.bytes} bytes)`);
      }
      await until(async () => (await server(id)).active === 0, `${id}'s records close`, 20_000, 200);
      assert.equal((await server(id)).decided, applied.decided, `still nothing new for ${id}`);
      await clear(id);
      const back = await untilHealth(id, 'up', 'back in service');
      await until(async () => (await server(id)).decided > back.decided, 'new connections reach it again', 20_000, 200);
    } finally {
      if (!released) for (const d of dls) d.release();
      await Promise.all(dls.map((d) => d.done));
    }
  }

  it('drain with sluice agent ctl: no new connections, downloads finish intact; a restarted agent stays drained; ready brings it back', { timeout: 240_000 }, async () => {
    await takeOut(
      'drain',
      async (id) => {
        const r = await agentCtl(id, 'drain', 'kernel', 'upgrade');
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /^health DRAIN: operator set drain: kernel upgrade/m);
        // An operator's typo: a clear error, exit 2, nothing changes.
        const bad = await agentCtl(id, 'drian');
        assert.equal(bad.code, 2);
        assert.match(bad.stderr, /unknown verb "drian": drain, maint, ready \(or up\), show/);
        // Restarted while drained: it comes back drained (the verb is in its state file).
        await untilHealth(id, 'drain', 'drain applied before the restart');
        const reportsBefore = (await server(id)).all.control!.servers.find((x) => x.name === id)!.reports;
        await agents.get(id)!.stop();
        await startAgent(id).waitFor('agent ready', 30_000);
        const show = await agentCtl(id, 'show', '--json');
        assert.equal(show.code, 0, show.stderr);
        const h = JSON.parse(show.stdout) as AgentHealthStatus;
        assert.deepEqual([h.state, h.operator.verb, h.operator.reason], ['drain', 'drain', 'kernel upgrade']);
        await until(async () => (await server(id)).all.control!.servers.find((x) => x.name === id)!.reports > reportsBefore, 'the restarted agent reports', 20_000, 100);
      },
      async (id) => {
        const r = await agentCtl(id, 'ready');
        assert.equal(r.code, 0, r.stderr);
      },
    );
  });

  it('drain with the state file: the same; garbage in the file is counted and the drain stays', { timeout: 240_000 }, async () => {
    await takeOut(
      'drain',
      async (id) => {
        writeFileSync(stateFile(id), 'drain written by hand\n');
        await untilHealth(id, 'drain', 'the file drain applied');
        writeFileSync(stateFile(id), 'dran\n');
        await until(async () => (JSON.parse((await agentCtl(id, 'show', '--json')).stdout) as AgentHealthStatus).operator.rejected >= 1, 'garbage rejected', 10_000, 100);
        const h = JSON.parse((await agentCtl(id, 'show', '--json')).stdout) as AgentHealthStatus;
        assert.deepEqual([h.state, h.operator.lastError], ['drain', 'unknown verb "dran"; expected drain, maint, up or ready']);
      },
      (id) => {
        writeFileSync(stateFile(id), 'up\n');
        return Promise.resolve();
      },
    );
  });

  it('maint with the state file: the same, shown as maint in the front node\'s status', { timeout: 240_000 }, async () => {
    await takeOut(
      'maint',
      async (id) => {
        writeFileSync(stateFile(id), 'maint bios update\n');
        const s = await untilHealth(id, 'maint', 'maint applied');
        assert.equal(s.reason, 'operator set maint: bios update');
        const human = await nsRunAsync(frNs, BIN, ['status', '--socket', sock, '--json']);
        const j = JSON.parse(human.stdout) as FrontStatus;
        assert.equal(j.control!.servers.find((x) => x.name === id)!.health, 'maint');
        // And in both daemons' /metrics (each on its own namespace's loopback).
        const fm = await nsRunAsync(frNs, 'curl', ['-s', '-m', '10', 'http://127.0.0.1:9100/metrics']);
        assert.match(fm.stdout, new RegExp(`^sluice_front_agent_health\\{server="${id}",state="maint"\\} 1$`, 'm'));
        assert.match(fm.stdout, new RegExp(`^sluice_front_agent_health\\{server="${id}",state="up"\\} 0$`, 'm'));
        const ns = tb().plan.clusters[0]!.servers.find((x) => x.id === id)!.name;
        const am = await nsRunAsync(ns, 'curl', ['-s', '-m', '10', 'http://127.0.0.1:9102/metrics']);
        assert.match(am.stdout, new RegExp(`^sluice_agent_health\\{server="${id}",state="maint"\\} 1$`, 'm'));
        assert.match(am.stdout, /^sluice_agent_state_file_events_total\{event="read"\} [1-9]/m);
      },
      async (id) => {
        const r = await agentCtl(id, 'ready');
        assert.equal(r.code, 0, r.stderr);
      },
    );
  });
});
