/**
 * The dashboard's view of the `mapping` policy: SiteState reads each DNS
 * server's mapping status defensively, and the page (in Debian's Chromium,
 * driven by playwright-core, as test/netns/dashboard.test.ts does) renders
 * the per-server summary, the per-cluster totals and the top prefixes.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { pageHtml } from '../../src/dashboard/page.ts';
import { SiteState, type DashboardState } from '../../src/dashboard/state.ts';
import type { DnsMappingStatus } from '../../src/dns/status.ts';

const CHROMIUM = '/usr/bin/chromium';

const MAPPING: DnsMappingStatus = {
  prefixes: 3,
  demandPrefixes: 4,
  leftOut: 0,
  loadEstimate: 9.5,
  recomputes: 57,
  movedTotal: 2,
  clusters: [
    { name: 'c1', prefixes: 2, demand: 10.5, capacity: 13 },
    { name: 'c2', prefixes: 1, demand: 5.25, capacity: 100 },
  ],
  top: [
    { prefix: '198.18.11.0/24', cluster: 'c1', demand: 5.5, rttMs: 20, ttl: 30, sinceSeconds: 40 },
    { prefix: '198.18.12.0/24', cluster: 'c1', demand: 5, rttMs: 22, ttl: 30, sinceSeconds: 40 },
    { prefix: '2001:2:0:13::/64', cluster: 'c2', demand: 5.25, rttMs: 80, ttl: 2, sinceSeconds: 3 },
  ],
  last: { at: '2026-11-26T09:00:00.000Z', ageSeconds: 0.4, eligible: 3, units: 3, moved: 0, unserved: 0, meanRttMs: 40.7, solveMs: 0.1, totalMs: 0.3 },
};

function dns(name: string, mapping: unknown): Record<string, unknown> {
  return { name, zones: [], counters: { queries: 1, steered: 1 }, clusters: [], steering: { decisions: 1, reasons: {}, recent: [] }, highRate: { clients: [] }, ...(mapping !== undefined ? { mapping } : {}) };
}

function viewOf(status: Record<string, unknown>): DashboardState {
  const st = new SiteState([{ name: 'd', address: 'unix:/d' }]);
  st.record('d', 0, { status });
  return st.view(0);
}

describe('dashboard state: the mapping assignment', () => {
  it('a DNS server with the mapping policy: its summary, per-cluster totals and top prefixes', () => {
    const m = viewOf(dns('dns1', MAPPING)).dns[0]?.mapping;
    assert.deepEqual(m, {
      prefixes: 3,
      demandPrefixes: 4,
      recomputes: 57,
      movedTotal: 2,
      last: { at: '2026-11-26T09:00:00.000Z', ageSeconds: 0.4, eligible: 3, moved: 0, unserved: 0, meanRttMs: 40.7, totalMs: 0.3 },
      clusters: MAPPING.clusters,
      top: MAPPING.top,
    });
  });

  it('an older server (no mapping) gives null; a malformed one gives nulls and drops what has no name', () => {
    assert.equal(viewOf(dns('old', undefined)).dns[0]?.mapping, null);
    const m = viewOf(dns('bad', { prefixes: 'x', recomputes: Infinity, clusters: [{ prefixes: 1 }, { name: 'c1', demand: '3' }, null], top: { prefix: 'p' }, last: 7 })).dns[0]?.mapping;
    assert.deepEqual(m, {
      prefixes: null,
      demandPrefixes: null,
      recomputes: null,
      movedTotal: null,
      last: null,
      clusters: [{ name: 'c1', prefixes: null, demand: null, capacity: null }],
      top: [],
    });
  });

  it('at most 20 prefixes per server are kept, whatever a server sends', () => {
    const top = Array.from({ length: 50 }, (_, i) => ({ prefix: `198.18.${String(i)}.0/24`, cluster: 'c1', demand: 1, rttMs: 1, ttl: 5, sinceSeconds: 1 }));
    assert.equal(viewOf(dns('big', { ...MAPPING, top })).dns[0]?.mapping?.top.length, 20);
  });
});

describe('dashboard page: the mapping view in a browser', () => {
  let profile = '';
  let context: BrowserContext | undefined;
  let page: Page;

  before(async () => {
    profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = context.pages()[0] ?? (await context.newPage());
    // The page alone: its own requests (api/events, api/charts) fail and it waits; render() is called below.
    await page.route('**/*', (r) => r.abort());
    await page.setContent(pageHtml('test'));
  });
  after(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  const render = async (state: DashboardState): Promise<void> => {
    await page.evaluate((s) => {
      (globalThis as unknown as { render: (x: unknown) => void }).render(s);
    }, state);
  };
  const rows = async (testid: string): Promise<string[][]> => {
    const out: string[][] = [];
    for (const r of await page.locator(`[data-testid="${testid}"]`).all()) out.push(await r.locator('td').allTextContents());
    return out;
  };

  it('shows each server\'s last recompute, the per-cluster totals and the prefixes, from two servers', async () => {
    const st = new SiteState([
      { name: 'd1', address: 'unix:/1' },
      { name: 'd2', address: 'unix:/2' },
    ]);
    st.record('d1', 0, { status: dns('dns1', MAPPING) });
    st.record('d2', 0, { status: dns('dns2', { ...MAPPING, top: MAPPING.top.slice(0, 1) }) });
    await render(st.view(0));
    const servers = await page.locator('[data-testid="dns-mapping-server"]').allTextContents();
    assert.equal(servers.length, 2);
    assert.match(servers[0] ?? '', /^dns1: 3 prefixes assigned, 57 recomputes, 2 moves in all; last recompute .+ \(0\.4 s ago\): moved 0, unserved 0\.0, mean RTT 40\.7 ms, took 0\.30 ms$/);
    assert.deepEqual(await rows('dns-mapping-cluster'), [
      ['c1', '2', '10.5', '13.0', 'dns1'],
      ['c2', '1', '5.3', '100.0', 'dns1'],
      ['c1', '2', '10.5', '13.0', 'dns2'],
      ['c2', '1', '5.3', '100.0', 'dns2'],
    ]);
    assert.deepEqual(await rows('dns-mapping-prefix'), [
      ['198.18.11.0/24', 'c1', '5.5', '20.0', '30 s', '40 s', 'dns1'],
      ['198.18.12.0/24', 'c1', '5.0', '22.0', '30 s', '40 s', 'dns1'],
      ['2001:2:0:13::/64', 'c2', '5.3', '80.0', '2 s', '3 s', 'dns1'],
      ['198.18.11.0/24', 'c1', '5.5', '20.0', '30 s', '40 s', 'dns2'],
    ]);
  });

  it('says so when no DNS server uses the policy (no recompute, nothing assigned)', async () => {
    await render(viewOf(dns('dns1', { ...MAPPING, prefixes: 0, recomputes: 0, clusters: [], top: [], last: null })));
    assert.equal(await page.locator('[data-testid="dns-mapping-server"]').count(), 0);
    assert.match((await page.locator('[data-testid="dns-mapping-summary"]').textContent()) ?? '', /no DNS server uses the mapping policy/);
    assert.equal(await page.locator('[data-testid="dns-mapping-prefix"]').count(), 0);
  });
});
