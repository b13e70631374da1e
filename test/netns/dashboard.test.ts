/**
 * The live dashboard in a real browser: the whole testbed site (two
 * clusters with their front nodes and agents, the steering DNS server, all
 * on the CURVE control plane) is read by `sluice dashboard` through the
 * daemons' admin sockets, and Debian's Chromium (driven by playwright-core)
 * opens the page. The page must show both clusters, and its numbers must
 * move once clients resolve and fetch through the VIPs. That view is saved
 * to test/artifacts/dashboard.png (git-ignored; docs/dashboard.png is one such screenshot).
 * The history endpoint has both clusters and every server, with the
 * connections/s of the traffic, and the page draws a chart per cluster and
 * a sparkline per server. Then a server's agent is killed: its front node
 * says the server is down, the page shows it down and the history has its
 * transition. The site runs with the demo's health checks: nginx is killed
 * on another server whose agent lives, and the front node's check takes it
 * out; the page shows it down within seconds. Last a front node stops: the page shows its cluster down and
 * goes on; started again, its counters' reset is seen in the history.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { adminRequest } from '../../src/admin/client.ts';
import type { HistoryJson } from '../../src/dashboard/history.ts';
import type { FrontStatus } from '../../src/front/status.ts';
import { frontConfig, startDaemon, startSite, stopDaemons, type Daemon } from '../../scripts/testbed/site.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const SCREENSHOT = fileURLToPath(new URL('../artifacts/dashboard.png', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';

const tb = useTestbed({ clients: 2, clusters: 2, serversPerCluster: 2 });

/** The page's number in a [data-testid] element (null while it shows a dash). */
async function numberOf(page: Page, selector: string): Promise<number | null> {
  const text = (await page.locator(selector).first().textContent({ timeout: 5000 }))?.trim() ?? '';
  const n = Number(text);
  return text === '' || !Number.isFinite(n) ? null : n;
}

const clusterSel = (name: string, testid: string): string => `[data-testid="cluster"][data-name="${name}"] [data-testid="${testid}"]`;

/** The demo's site: health checks on (a killed nginx is taken out by the front node's check). */
const SITE = { healthChecks: true } as const;

/** Whether a process still exists (signal 0 tests without sending anything). */
function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('sluice dashboard in Chromium', () => {
  let daemons: Daemon[] = [];
  let dashboard: ChildProcessWithoutNullStreams | undefined;
  let context: BrowserContext | undefined;
  let profile = '';
  let url = '';

  before(async () => {
    const st = tb();
    daemons = startSite(st, SITE);
    const sockets = [...st.plan.clusters.map((k) => join(st.runDir, `front${k.index}.sock`)), join(st.runDir, 'dns.sock')];
    for (const s of sockets) {
      await until(async () => (await adminRequest(s, { cmd: 'status' }, 1000).catch(() => ({ ok: false }))).ok === true, `${s} answers status`, 30_000, 200);
    }
    dashboard = spawn(BIN, ['dashboard', '--listen', '127.0.0.1:0', '--title', 'Sluice testbed', ...st.plan.clusters.flatMap((k) => ['--source', `front${k.index}=unix:${join(st.runDir, `front${k.index}.sock`)}`]), '--source', `dns=unix:${join(st.runDir, 'dns.sock')}`], { stdio: ['pipe', 'pipe', 'pipe'] });
    dashboard.stderr.resume();
    const lines = createInterface({ input: dashboard.stdout });
    url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => {
        reject(new Error('sluice dashboard printed no URL within 15 s'));
      }, 15_000);
      lines.once('line', (l) => {
        clearTimeout(t);
        const m = /(http:\/\/\S+)/.exec(l);
        if (m?.[1]) resolve(m[1]);
        else reject(new Error(`unexpected first line: ${l}`));
      });
    });
    // A fresh profile, nothing fetched from outside: the machine has no network beyond loopback.
    profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 1000 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    if (dashboard && dashboard.exitCode === null) {
      const exited = new Promise((r) => dashboard?.once('exit', r));
      dashboard.kill('SIGTERM');
      await exited;
    }
    await stopDaemons(daemons);
  });

  it('shows both clusters, its numbers move when traffic starts, charts of the history, a killed agent\'s server down, a stopped front node down, and its restart\'s counter reset', async () => {
    const st = tb();
    assert.ok(context);
    const page = await context.newPage();
    const consoleErrors: string[] = [];
    page.on('pageerror', (e) => consoleErrors.push(e.message));
    const res = await page.goto(url, { timeout: 15_000 });
    assert.equal(res?.status(), 200);
    assert.equal(await page.title(), 'Sluice testbed');

    // Both clusters, by the names in their front nodes' configs, with their servers; every source up.
    const names = st.plan.clusters.map((k) => `c${k.index}`);
    for (const [i, name] of names.entries()) {
      await page.locator(`[data-testid="cluster"][data-name="${name}"][data-front="up"]`).waitFor({ timeout: 15_000 });
      assert.equal(await page.locator(clusterSel(name, 'cluster-name')).textContent(), name);
      const rows = page.locator(`[data-testid="cluster"][data-name="${name}"] [data-testid="server"]`);
      const servers: (string | null)[] = [];
      for (let j = 0; j < (await rows.count()); j++) servers.push(await rows.nth(j).getAttribute('data-name'));
      assert.deepEqual(servers, st.plan.clusters[i]!.servers.map((s) => s.id));
    }
    await until(async () => (await page.locator('[data-testid="source"][data-up="true"]').count()) === 3, 'the three sources are up on the page', 15_000, 250);
    assert.equal(await page.locator('[data-testid="live"]').textContent(), 'live');

    const before = {
      decided: Object.fromEntries(await Promise.all(names.map(async (n) => [n, (await numberOf(page, clusterSel(n, 'cluster-decided'))) ?? 0] as const))),
      steered: (await numberOf(page, '[data-testid="dns-steered"]')) ?? 0,
    };

    // Traffic: every client resolves www at the Sluice DNS server and fetches from both VIPs,
    // round after round (bounded), until the page shows what it did. Top clients take longest:
    // agents report per-client rates from their access logs every 5 s.
    const seen = { cps: 0, clusterCps: new Set<string>(), decided: new Set<string>(), steered: false, choices: 0, topClients: 0 };
    const done = (): boolean => seen.cps > 0 && seen.clusterCps.size === names.length && seen.decided.size === names.length && seen.steered && seen.choices > 0 && seen.topClients > 0;
    let fetched = 0;
    for (let round = 0; round < 400 && !done(); round++) {
      await Promise.all(
        st.plan.clients.map(async (c) => {
          await nsRunAsync(c.name, 'dig', ['+short', '+time=1', '+tries=1', `@${st.plan.dns.address}`, 'www.example.test', 'A']);
          for (const k of st.plan.clusters) {
            const r = await nsRunAsync(c.name, 'curl', ['-s', '-m', '3', '-o', '/dev/null', '-w', '%{http_code}', `http://${k.vip}/`]);
            if (r.stdout === '200') fetched++;
          }
        }),
      );
      const cps = await numberOf(page, '[data-testid="site-cps"]');
      if (cps !== null && cps > 0) seen.cps = cps;
      for (const n of names) {
        if (((await numberOf(page, clusterSel(n, 'cluster-cps'))) ?? 0) > 0) seen.clusterCps.add(n);
        if (((await numberOf(page, clusterSel(n, 'cluster-decided'))) ?? 0) > (before.decided[n] ?? 0)) seen.decided.add(n);
      }
      seen.steered = ((await numberOf(page, '[data-testid="dns-steered"]')) ?? 0) > before.steered;
      seen.choices = await page.locator('[data-testid="dns-choice"]').count();
      seen.topClients = await page.locator('[data-testid="top-client"]').count();
    }
    assert.ok(fetched > 0, 'clients fetched through the VIPs');
    assert.deepEqual({ cps: seen.cps > 0, clusterCps: [...seen.clusterCps].sort(), decided: [...seen.decided].sort(), steered: seen.steered, choices: seen.choices > 0, topClients: seen.topClients > 0 }, { cps: true, clusterCps: names, decided: names, steered: true, choices: true, topClients: true });

    // The DNS choice rows name the clients' prefixes and a reason.
    const choice = await page.locator('[data-testid="dns-choice"]').first().locator('td').allTextContents();
    assert.match(choice[0] ?? '', /^\d+\.\d+\.\d+\.\d+\/\d+$/);
    assert.ok((choice[4] ?? '') !== '', 'a reason');
    // Top clients are the testbed's client addresses.
    const clientAddresses = new Set(st.plan.clients.map((c) => c.address));
    const top = await page.locator('[data-testid="top-client"]').first().locator('td').allTextContents();
    assert.ok(clientAddresses.has(top[0] ?? ''), `top client ${top[0] ?? ''} is one of ${[...clientAddresses].join(', ')}`);
    // Capacity bars are drawn for every server.
    assert.equal(await page.locator('[data-testid="server-bar"]').count(), st.plan.clusters.reduce((a, k) => a + k.servers.length, 0));

    // The history: both clusters and every server, with the traffic's connections/s.
    const history = async (): Promise<HistoryJson> => (await (await fetch(new URL('history.json', url))).json()) as HistoryJson;
    const h = await history();
    assert.deepEqual(
      h.clusters.map((c) => [c.name, c.servers.map((s) => s.name)]).sort(),
      st.plan.clusters.map((k) => [`c${k.index}`, k.servers.map((s) => s.id)]),
    );
    for (const c of h.clusters) {
      assert.ok(c.points.t.length > 1 && c.points.t.length === c.points.cps.length, `${c.name}: points`);
      assert.ok(c.points.cps.some((v) => v !== null && v > 0), `${c.name}: connections/s above 0 in the history`);
      assert.ok(c.servers.some((s) => s.points.cps.some((v) => v !== null && v > 0)), `${c.name}: a server with connections/s above 0`);
    }
    // The charts: one per cluster, a sparkline per server, each an SVG image that the browser drew.
    const total = st.plan.clusters.reduce((a, k) => a + k.servers.length, 0);
    await until(async () => (await page.locator('[data-testid="server-spark"][src^="data:image/svg+xml"]').count()) === total, 'a sparkline per server', 15_000, 250);
    assert.equal(await page.locator('[data-testid="cluster-chart"][src^="data:image/svg+xml"]').count(), names.length);
    for (const n of names) assert.equal(await page.locator(`[data-testid="cluster"][data-name="${n}"] [data-testid="cluster-chart"]`).count(), 1);
    // No DOM types here (tsconfig has no "dom" lib): the image is read by its two fields.
    const drawn = await page.locator('img[data-chart]').evaluateAll((imgs) => imgs.map((i) => {
      const img = i as unknown as { complete: boolean; naturalWidth: number };
      return img.complete && img.naturalWidth > 0;
    }));
    assert.deepEqual(drawn, drawn.map(() => true), 'every chart image decoded');
    assert.match((await page.locator('[data-testid="history-note"]').textContent()) ?? '', /last 10 min/);

    // A server's agent is killed: its front node takes it down (agent silent), and the page and the history say so.
    const k1 = st.plan.clusters[0]!;
    const victim = k1.servers[k1.servers.length - 1]!;
    const agent = daemons.find((d) => d.name === `agent-${victim.id}`);
    assert.ok(agent);
    await new Promise<void>((resolve) => {
      agent.child.once('exit', () => {
        resolve();
      });
      agent.child.kill('SIGKILL');
    });
    const frontSays = async (): Promise<string | undefined> => {
      const r = await adminRequest(join(st.runDir, `front${k1.index}.sock`), { cmd: 'status' }, 1000).catch(() => undefined);
      return (r?.status as FrontStatus | undefined)?.services[0]?.servers.find((s) => s.name === victim.id)?.state;
    };
    await until(async () => (await frontSays()) === 'down', `front${k1.index} says ${victim.id} is down`, 30_000, 250);
    await page.locator(`[data-testid="cluster"][data-name="c${k1.index}"] [data-testid="server"][data-name="${victim.id}"][data-state="down"]`).waitFor({ timeout: 15_000 });
    await until(async () => ((await history()).clusters.find((c) => c.name === `c${k1.index}`)?.servers.find((s) => s.name === victim.id)?.events ?? []).some((e) => e.from === 'up' && e.to === 'down'), `the history has ${victim.id}'s transition to down`, 15_000, 250);
    const victimSpark = page.locator(`[data-testid="cluster"][data-name="c${k1.index}"] [data-testid="server"][data-name="${victim.id}"] [data-testid="server-spark"]`);
    await until(async () => ((await victimSpark.getAttribute('title')) ?? '').includes('up \u2192 down'), `${victim.id}'s sparkline lists the transition`, 15_000, 250);
    assert.match(decodeURIComponent((await victimSpark.getAttribute('src')) ?? ''), /<line [^>]*stroke="#f85149"/, 'a down marker on the sparkline');
    assert.deepEqual(consoleErrors, []);

    // nginx is killed on another server while its agent runs: the front node's health check takes it out (fall 2 at 1 s) and the page shows it down within seconds.
    const dead = k1.servers[0]!;
    const nginxPid = st.nginxPids[dead.id];
    assert.ok(nginxPid !== undefined);
    process.kill(nginxPid, 'SIGTERM');
    await until(() => !pidAlive(nginxPid), `nginx of ${dead.id} exits`, 15_000, 100);
    const deadHealth = async (): Promise<string | undefined> => {
      const r = await adminRequest(join(st.runDir, `front${k1.index}.sock`), { cmd: 'status' }, 1000).catch(() => undefined);
      return (r?.status as FrontStatus | undefined)?.services[0]?.servers.find((s) => s.name === dead.id)?.health?.state;
    };
    await until(async () => (await deadHealth()) === 'down', `front${k1.index}'s health check says ${dead.id} is down`, 30_000, 250);
    await page.locator(`[data-testid="cluster"][data-name="c${k1.index}"] [data-testid="server"][data-name="${dead.id}"][data-state="down"]`).waitFor({ timeout: 15_000 });
    await until(async () => ((await history()).clusters.find((c) => c.name === `c${k1.index}`)?.servers.find((s) => s.name === dead.id)?.events ?? []).some((e) => e.to === 'down'), `the history has ${dead.id}'s transition to down`, 15_000, 250);

    mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    // A front node that stops is shown down; the dashboard and the rest of the page go on.
    const last = st.plan.clusters[st.plan.clusters.length - 1]!;
    await stopDaemons(daemons.filter((d) => d.name === `front${last.index}`));
    await page.locator(`[data-testid="cluster"][data-name="c${last.index}"][data-front="down"]`).waitFor({ timeout: 15_000 });
    await page.locator(`[data-testid="source"][data-name="front${last.index}"][data-up="false"]`).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('[data-testid="cluster"][data-front="up"]').count(), names.length - 1);
    assert.equal(dashboard?.exitCode, null, 'the dashboard is still running');

    // It starts again: its counters start from 0, which the history counts as a reset (not a negative rate).
    const stopped = (await history()).clusters.find((c) => c.name === `c${last.index}`);
    assert.ok(stopped, 'the stopped cluster keeps its history');
    daemons.push(startDaemon(st, last.front.name, 'front', `front${last.index}`, frontConfig(st, last, SITE)));
    await page.locator(`[data-testid="cluster"][data-name="c${last.index}"][data-front="up"]`).waitFor({ timeout: 30_000 });
    await until(async () => ((await history()).clusters.find((c) => c.name === `c${last.index}`)?.resets ?? 0) > stopped.resets, `c${last.index}'s counter reset is seen`, 15_000, 250);
    const restarted = (await history()).clusters.find((c) => c.name === `c${last.index}`);
    assert.ok(restarted?.points.cps.every((v) => v === null || v >= 0), 'no negative rate');
  });
});
