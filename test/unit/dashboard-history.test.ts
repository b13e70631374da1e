/**
 * The dashboard's 10-minute history (src/dashboard/history.ts) and its
 * charts (src/dashboard/charts.ts), on an injected clock: rings, counter
 * deltas and resets, gaps, downsampling, the bound on series, health
 * transitions, and SVG that escapes everything that came from a daemon.
 */
import { InvalidArgumentError } from '../../src/errors/errors.ts';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Script } from 'node:vm';
import { bucketize, chartsOf, clusterChartSvg, escapeXml, niceMax, refreshMs, serverSparklineSvg, STATE_COLOURS } from '../../src/dashboard/charts.ts';
import { EVENTS_MAX, GAP_STEPS, History, HISTORY_WINDOW_MS, NAME_MAX, POINTS_MAX, Ring, Series, SERIES_MAX } from '../../src/dashboard/history.ts';
import { CHARTS_EVERY_MS, pageHtml } from '../../src/dashboard/page.ts';
import { Poller } from '../../src/dashboard/poller.ts';
import { DashboardServer } from '../../src/dashboard/server.ts';
import { REASON_MAX, serverState, SiteState, type DashboardState, type ServerState } from '../../src/dashboard/state.ts';
import type { HistoryJson } from '../../src/dashboard/history.ts';
import type { ChartsJson } from '../../src/dashboard/charts.ts';
import { componentLogger } from '../../src/log/logger.ts';

const quiet = componentLogger('test-dashboard-history').child({}, { level: 'silent' });

interface ServerSpec {
  decided: number;
  active?: number;
  capacity?: number;
  state?: string;
  health?: unknown;
}

/** A front node's status as src/front/daemon.ts answers it, with the per-server health newer front nodes add. */
function front(cluster: string, servers: Record<string, ServerSpec>, load?: { load: number; capacity: number }): Record<string, unknown> {
  const decided = Object.values(servers).reduce((a, s) => a + s.decided, 0);
  return {
    cluster,
    counters: { decided, overflowed: 0 },
    records: { active: 0 },
    services: [
      {
        name: 'www',
        overflowed: 0,
        servers: Object.entries(servers).map(([name, s]) => ({ name, state: s.state ?? 'active', active: s.active ?? 0, decided: s.decided, capacity: s.capacity ?? 10, estimated: false, rate: 0, ...(s.health === undefined ? {} : { health: s.health }) })),
        overflow: [],
      },
    ],
    ...(load ? { control: { cluster: { capacity: load.capacity, load: load.load, available: load.capacity - load.load, serversUp: 1, serversTotal: 1 }, servers: [] } } : {}),
  };
}

/** Feeds statuses of one source through SiteState into a History, at the given times. */
class Site {
  readonly state: SiteState;
  readonly history: History;
  constructor(opts: { intervalMs: number; maxSeries?: number; sources?: string[] }) {
    this.state = new SiteState((opts.sources ?? ['f1']).map((name) => ({ name, address: `unix:/${name}` })));
    this.history = new History({ intervalMs: opts.intervalMs, ...(opts.maxSeries === undefined ? {} : { maxSeries: opts.maxSeries }) });
  }
  round(now: number, statuses: Record<string, unknown>): DashboardState {
    for (const [name, s] of Object.entries(statuses)) this.state.record(name, now, s instanceof Error ? { error: s.message } : { status: s });
    const v = this.state.view(now);
    this.history.record(now, v);
    return v;
  }
  json(now: number): HistoryJson {
    return this.history.toJSON(now);
  }
}

function serverJson(h: HistoryJson, cluster: string, name: string): HistoryJson['clusters'][number]['servers'][number] {
  const s = h.clusters.find((c) => c.name === cluster)?.servers.find((x) => x.name === name);
  assert.ok(s, `server ${cluster}/${name} in the history`);
  return s;
}

describe('dashboard history: ring', () => {
  const cases: { name: string; capacity: number; push: number[]; dropBefore?: number; want: number[] }[] = [
    { name: 'under capacity, oldest first', capacity: 4, push: [1, 2, 3], want: [1, 2, 3] },
    { name: 'full', capacity: 3, push: [1, 2, 3], want: [1, 2, 3] },
    { name: 'past capacity the oldest are overwritten', capacity: 3, push: [1, 2, 3, 4, 5], want: [3, 4, 5] },
    { name: 'many times round', capacity: 2, push: [1, 2, 3, 4, 5, 6, 7], want: [6, 7] },
    { name: 'dropBefore removes the old ones', capacity: 5, push: [1, 2, 3, 4, 5, 6], dropBefore: 4, want: [4, 5, 6] },
    { name: 'dropBefore everything', capacity: 3, push: [1, 2], dropBefore: 9, want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = new Ring(c.capacity, 2);
      for (const t of c.push) r.push(t, [t * 10, Number.NaN]);
      if (c.dropBefore !== undefined) r.dropBefore(c.dropBefore);
      const at = Array.from({ length: r.size }, (_, k) => r.at(k));
      assert.deepEqual(at, c.want);
      assert.deepEqual(Array.from({ length: r.size }, (_, k) => r.value(k, 0)), c.want.map((t) => t * 10));
      assert.ok(Array.from({ length: r.size }, (_, k) => r.value(k, 1)).every(Number.isNaN));
      assert.ok(r.size <= c.capacity);
    });
  }
  it('refuses a capacity that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => new Ring(bad, 1), InvalidArgumentError);
  });
});

describe('dashboard history: connections/s from counter deltas', () => {
  // One reading per second (step 1 s); `null` is a counter not reported; the
  // time list allows gaps. Expected: the rate stored at each point.
  const cases: { name: string; at: number[]; counter: (number | null)[]; want: (number | null)[]; resets?: number }[] = [
    { name: 'steady', at: [0, 1000, 2000, 3000], counter: [100, 110, 120, 135], want: [null, 10, 10, 15] },
    { name: 'a restart: the counter counts from 0 again', at: [0, 1000, 2000, 3000], counter: [500, 520, 6, 16], want: [null, 20, 6, 10], resets: 1 },
    { name: 'two restarts', at: [0, 1000, 2000, 3000], counter: [50, 3, 1, 4], want: [null, 3, 1, 3], resets: 2 },
    { name: 'a counter not reported: no rate until two readings again', at: [0, 1000, 2000, 3000, 4000], counter: [10, 20, null, 30, 35], want: [null, 10, null, null, 5] },
    { name: 'a short outage: the rate over it', at: [0, 1000, 3000], counter: [0, 10, 50], want: [null, 10, 20] },
    { name: `a gap of more than ${GAP_STEPS} steps: no rate drawn over it`, at: [0, 1000, 1000 + (GAP_STEPS + 1) * 1000, 2000 + (GAP_STEPS + 1) * 1000], counter: [0, 10, 90, 95], want: [null, 10, null, 5] },
    { name: 'no change is 0, not unknown', at: [0, 1000, 2000], counter: [7, 7, 7], want: [null, 0, 0] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const s = new Series('cluster', 'c1', '', '', 16);
      for (const [i, at] of c.at.entries()) s.observe(at, true, GAP_STEPS * 1000, { counter: c.counter[i] ?? null, utilization: null });
      assert.deepEqual(Array.from({ length: s.points.size }, (_, k) => s.cpsAt(k)), c.want);
      assert.equal(s.resets, c.resets ?? 0);
    });
  }

  it('per cluster and per server, through the view, with utilization (cluster: load/capacity; server: active/capacity)', () => {
    const site = new Site({ intervalMs: 1000 });
    site.round(0, { f1: front('c1', { a: { decided: 0, active: 2 }, b: { decided: 0 } }, { load: 5, capacity: 20 }) });
    site.round(1000, { f1: front('c1', { a: { decided: 30, active: 5 }, b: { decided: 10 } }, { load: 10, capacity: 20 }) });
    const h = site.json(1000);
    const c = h.clusters.find((x) => x.name === 'c1');
    assert.deepEqual(c?.points, { t: [-1, 0], cps: [null, 40], utilization: [0.25, 0.5] });
    assert.deepEqual(serverJson(h, 'c1', 'a').points, { t: [-1, 0], cps: [null, 30], utilization: [0.2, 0.5], state: ['up', 'up'] });
    assert.deepEqual(serverJson(h, 'c1', 'b').points.cps, [null, 10]);
    assert.equal(h.windowSeconds, HISTORY_WINDOW_MS / 1000);
  });

  it('a front node that stops answering leaves a gap; its series go on when it answers again', () => {
    const site = new Site({ intervalMs: 1000 });
    let t = 0;
    for (; t < 3000; t += 1000) site.round(t, { f1: front('c1', { a: { decided: t / 100 } }) });
    for (; t < 10_000; t += 1000) site.round(t, { f1: new Error('connection refused') });
    for (; t < 13_000; t += 1000) site.round(t, { f1: front('c1', { a: { decided: t / 100 } }) });
    const p = site.json(12_000).clusters[0]?.points;
    assert.deepEqual(p?.t, [-12, -11, -10, -2, -1, 0], 'no points while it was down');
    assert.deepEqual(p.cps, [null, 10, 10, null, 10, 10], 'no rate drawn over the outage');
  });
});

describe('dashboard history: bounds', () => {
  it(`polls faster than the window / ${POINTS_MAX}: points are a step apart, at most ${POINTS_MAX + 1} per series, the rate still exact`, () => {
    const site = new Site({ intervalMs: 200 });
    assert.equal(site.history.stepMs, HISTORY_WINDOW_MS / POINTS_MAX);
    let decided = 0;
    const end = 2 * HISTORY_WINDOW_MS;
    for (let t = 0; t <= end; t += 200) {
      decided += 4; // 20 connections/s
      site.round(t, { f1: front('c1', { a: { decided } }) });
    }
    const p = site.json(end).clusters[0]?.points;
    assert.ok(p);
    assert.ok(p.t.length <= POINTS_MAX + 1, `${p.t.length} points`);
    assert.ok(p.t.length >= POINTS_MAX - 1, `${p.t.length} points`);
    assert.ok((p.t[0] ?? -Infinity) >= -HISTORY_WINDOW_MS / 1000, 'nothing older than the window');
    assert.ok(p.cps.every((v) => v !== null && Math.abs(v - 20) < 1e-9), 'every point 20/s');
  });

  it('the default poll (1 s) keeps exactly the last 10 minutes', () => {
    const site = new Site({ intervalMs: 1000 });
    for (let t = 0; t <= 15 * 60_000; t += 1000) site.round(t, { f1: front('c1', { a: { decided: t / 1000 } }) });
    const p = site.json(15 * 60_000).clusters[0]?.points;
    assert.equal(p?.t.length, 601);
    assert.equal(p.t[0], -600);
  });

  it('at most maxSeries series: clusters first, the rest counted as dropped; stale series are forgotten', () => {
    const site = new Site({ intervalMs: 1000, maxSeries: 3, sources: ['f1', 'f2'] });
    const v = site.round(0, { f1: front('c1', { a: { decided: 0 }, b: { decided: 0 } }), f2: front('c2', { x: { decided: 0 }, y: { decided: 0 } }) });
    assert.equal(v.clusters.length, 2);
    assert.equal(site.history.size, 3);
    assert.equal(site.history.dropped, 3, 'c2/x, c2/y and one of c1 ... not charted');
    const h = site.json(0);
    assert.deepEqual(h.clusters.map((c) => [c.name, c.points.t.length, c.servers.map((s) => s.name)]), [['c1', 1, ['a']], ['c2', 1, []]]);
    assert.equal(h.dropped, 3);
    // c2's front node goes away for longer than the window: its series are forgotten, and the room is used again.
    for (let t = 1000; t <= HISTORY_WINDOW_MS + 2000; t += 1000) site.round(t, { f1: front('c1', { a: { decided: 0 }, b: { decided: 0 } }), f2: new Error('gone') });
    assert.deepEqual(site.json(HISTORY_WINDOW_MS + 2000).clusters.map((c) => [c.name, c.servers.map((s) => s.name)]), [['c1', ['a', 'b']]]);
    assert.equal(site.history.dropped, 0);
  });

  it(`names longer than ${NAME_MAX} are not tracked; reasons are cut at ${REASON_MAX}`, () => {
    const site = new Site({ intervalMs: 1000 });
    const long = 'x'.repeat(NAME_MAX + 1);
    const ok = 'y'.repeat(NAME_MAX);
    for (let t = 0; t < 3000; t += 1000) site.round(t, { f1: front('c1', { [long]: { decided: t }, [ok]: { decided: t, health: { state: t ? 'down' : 'up', reason: 'r'.repeat(100_000), since: 0, transitions: t / 1000 } } }) });
    const h = site.json(2000);
    assert.deepEqual(h.clusters[0]?.servers.map((s) => s.name), [ok]);
    assert.equal(h.dropped, 1);
    const reason = h.clusters[0].servers[0]?.events[0]?.reason ?? '';
    assert.equal(reason.length, REASON_MAX);
    assert.ok(reason.endsWith('\u2026'));
  });

  it(`a default history is bounded: ${SERIES_MAX} series of at most ${POINTS_MAX + 1} points, ${EVENTS_MAX} events`, () => {
    const h = new History({ intervalMs: 50 });
    assert.equal(h.maxSeries, SERIES_MAX);
    assert.equal(h.capacity, POINTS_MAX + 1);
    const s = new Series('server', 'c', 'www', 'a', 4);
    for (let i = 0; i < EVENTS_MAX * 3; i++) s.observe(i * 1000, true, 3000, { counter: 0, utilization: null, state: i % 2 ? 'down' : 'up' });
    assert.equal(s.events.length, EVENTS_MAX);
    assert.equal(s.eventsDropped, EVENTS_MAX * 3 - 1 - EVENTS_MAX);
    assert.equal(s.points.size, 4);
  });
});

describe('dashboard history: health', () => {
  const health = (state: string, transitions: number, reason = `check: ${state}`): unknown => ({ state, reason, since: 1, transitions });
  // Each row: the server's health (or null: none reported) and its front state per poll; expected events.
  const cases: { name: string; polls: { health: unknown; state?: string }[]; shown: ServerState[]; events: { from: string; to: string; count: number; reason: string | null }[] }[] = [
    {
      name: 'state changes seen between polls are events, with the reason',
      polls: [{ health: health('up', 0) }, { health: health('down', 1, 'check: connect refused') }, { health: health('down', 1) }, { health: health('up', 2, 'check: 2 passed') }],
      shown: ['up', 'down', 'down', 'up'],
      events: [
        { from: 'up', to: 'down', count: 1, reason: 'check: connect refused' },
        { from: 'down', to: 'up', count: 1, reason: 'check: 2 passed' },
      ],
    },
    {
      name: 'down and up again between two polls: the transitions counter tells',
      polls: [{ health: health('up', 3) }, { health: health('up', 5) }],
      shown: ['up', 'up'],
      events: [{ from: 'up', to: 'up', count: 2, reason: 'check: up' }],
    },
    {
      name: 'more transitions than the state change shows',
      polls: [{ health: health('up', 0) }, { health: health('drain', 3, 'agent: drain') }],
      shown: ['up', 'draining'],
      events: [{ from: 'up', to: 'draining', count: 3, reason: 'agent: drain' }],
    },
    {
      name: 'the front node restarted: its counter counts from 0',
      polls: [{ health: health('down', 7) }, { health: health('maint', 1, 'agent: maint') }],
      shown: ['down', 'maint'],
      events: [{ from: 'down', to: 'maint', count: 1, reason: 'agent: maint' }],
    },
    {
      name: 'no health reported (older front node): the front state, no counter',
      polls: [{ health: undefined }, { health: undefined, state: 'down' }, { health: undefined, state: 'drain' }],
      shown: ['up', 'down', 'draining'],
      events: [
        { from: 'up', to: 'down', count: 1, reason: null },
        { from: 'down', to: 'draining', count: 1, reason: null },
      ],
    },
    {
      name: 'garbage health is no health',
      polls: [{ health: 'down' }, { health: [1] }, { health: { state: 7, transitions: 'x' } }],
      shown: ['up', 'up', 'up'],
      events: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const site = new Site({ intervalMs: 1000 });
      const shown: ServerState[] = [];
      for (const [i, p] of c.polls.entries()) {
        const v = site.round(i * 1000, { f1: front('c1', { a: { decided: i, health: p.health, ...(p.state ? { state: p.state } : {}) } }) });
        shown.push(v.clusters[0]?.servers[0]?.state ?? 'up');
      }
      assert.deepEqual(shown, c.shown);
      const s = serverJson(site.json((c.polls.length - 1) * 1000), 'c1', 'a');
      assert.deepEqual(s.points.state, c.shown);
      assert.deepEqual(s.events.map((e) => ({ from: e.from, to: e.to, count: e.count, reason: e.reason })), c.events);
    });
  }

  it('the state shown prefers the health the front node reports', () => {
    const cases: [state: string | null, agentDown: boolean, health: 'up' | 'down' | 'drain' | 'maint' | null, want: ServerState][] = [
      ['active', false, null, 'up'],
      ['down', false, null, 'down'],
      ['active', true, null, 'down'],
      ['drain', false, null, 'draining'],
      ['disabled', false, null, 'disabled'],
      ['active', false, 'down', 'down'],
      ['active', false, 'maint', 'maint'],
      ['active', false, 'drain', 'draining'],
      ['down', true, 'up', 'up'],
      ['disabled', false, 'up', 'disabled'],
      ['disabled', false, 'down', 'down'],
      ['drain', false, 'up', 'draining'],
    ];
    for (const [state, agentDown, h, want] of cases) assert.equal(serverState(state, agentDown, h), want, `${state} ${agentDown} ${h}`);
  });
});

/** The tags and attributes an SVG chart may contain: anything else (a script, a handler, a link) is an injection. */
const SVG_TAGS = new Set(['svg', 'title', 'path', 'text', 'line', 'rect']);
const SVG_ATTRS = new Set(['xmlns', 'width', 'height', 'viewBox', 'font-family', 'font-size', 'd', 'stroke', 'stroke-width', 'stroke-dasharray', 'fill', 'x', 'y', 'x1', 'x2', 'y1', 'y2', 'text-anchor']);

/** Tokenizes the SVG strictly: every tag and attribute is allowed, every text holds no markup and only numeric entities. */
function assertSafeSvg(svg: string, hostile: readonly string[]): void {
  for (const token of svg.split(/(<[^<>]*>)/)) {
    if (token.startsWith('<')) {
      const m = /^<(\/?)([A-Za-z][\w-]*)((?:\s+[\w:-]+="[^"<>&]*")*)\s*(\/?)>$/.exec(token);
      assert.ok(m, `malformed tag ${token}`);
      assert.ok(SVG_TAGS.has(m[2] ?? ''), `tag <${m[2]}>`);
      for (const a of (m[3] ?? '').matchAll(/([\w:-]+)=/g)) assert.ok(SVG_ATTRS.has(a[1] ?? ''), `attribute ${a[1]} in ${token}`);
    } else {
      assert.doesNotMatch(token, /[<>]/, `markup in text ${token}`);
      assert.doesNotMatch(token.replace(/&#\d+;/g, ''), /&/, `a bare & in text ${token}`);
    }
  }
  for (const h of hostile) assert.ok(!svg.includes(h), `raw ${h}`);
}

describe('dashboard charts', () => {
  it('escapeXml', () => {
    const cases: [string, string][] = [
      ['plain', 'plain'],
      ['<script>', '&#60;script&#62;'],
      ['a & b', 'a &#38; b'],
      [`"'`, '&#34;&#39;'],
    ];
    for (const [input, want] of cases) assert.equal(escapeXml(input), want);
  });

  it('pages fetch the charts less often on a large site', () => {
    const cases: [number, number][] = [[0, 2000], [6, 2000], [100, 2000], [200, 4000], [SERIES_MAX, 10_240], [5000, 15_000]];
    for (const [series, want] of cases) assert.equal(refreshMs(series), want, `${series} series`);
  });

  it('niceMax', () => {
    const cases: [number, number][] = [[0, 1], [-3, 1], [Number.NaN, 1], [0.3, 0.5], [1, 1], [1.2, 2], [3, 5], [7, 10], [42, 50], [120, 200]];
    for (const [x, want] of cases) assert.ok(Math.abs(niceMax(x) - want) < 1e-12, `${x} -> ${niceMax(x)}`);
  });

  it('names and reasons from daemons are escaped; only the chart tags are drawn', () => {
    const hostile = ['</title><script>alert(1)</script>', '"><svg onload="alert(1)">', "x' onmouseover='alert(1)", '&amp;<!--', ']]><foreignObject>'];
    const site = new Site({ intervalMs: 1000 });
    for (const [i, name] of hostile.entries()) {
      const servers = Object.fromEntries(hostile.map((n, j) => [n, { decided: i * 10, health: { state: (i + j) % 2 ? 'down' : 'up', reason: name, since: 0, transitions: i } }]));
      site.round(i * 1000, { f1: front(hostile[0] ?? '', servers) });
    }
    const charts = chartsOf(site.history, hostile.length * 1000);
    assert.equal(charts.clusters.length, 1);
    assert.equal(charts.clusters[0]?.name, hostile[0], 'the JSON carries the name as it is (the page sets it as text)');
    assertSafeSvg(charts.clusters[0]?.svg ?? '', hostile);
    assert.equal(charts.clusters[0]?.servers.length, hostile.length);
    for (const s of charts.clusters[0].servers) {
      assertSafeSvg(s.svg, hostile);
      assert.ok(s.svg.includes(escapeXml(s.name)), 'the name is in the title, escaped');
      assert.ok(s.events.length > 0);
    }
  });

  it('the sparkline draws the state as a strip in the badge colours and a marker at each transition', () => {
    const site = new Site({ intervalMs: 1000 });
    const window = HISTORY_WINDOW_MS;
    // Up for the first half, down for a quarter, maintenance for the rest.
    for (let t = 0; t <= window; t += 1000) {
      const state = t < window / 2 ? 'up' : t < (3 * window) / 4 ? 'down' : 'maint';
      site.round(t, { f1: front('c1', { a: { decided: t / 100, health: { state, reason: state, since: 0, transitions: 0 } } }) });
    }
    const s = [...site.history.series()].find((x) => x.kind === 'server');
    assert.ok(s);
    const svg = serverSparklineSvg('a', s, window, window, site.history.capacity);
    const rects = [...svg.matchAll(/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="4" fill="(#\w+)"\/>/g)].map((m) => [Number(m[1]), Number(m[2]), m[3]]);
    assert.deepEqual(rects.map((r) => r[2]), [STATE_COLOURS.up, STATE_COLOURS.down, STATE_COLOURS.maint]);
    assert.deepEqual(rects.map((r) => Math.round(Number(r[0]))), [0, 60, 90], 'the strip changes colour where the state did');
    const markers = [...svg.matchAll(/<line x1="([\d.]+)" x2="[\d.]+" y1="0" y2="28" stroke="(#\w+)"/g)].map((m) => [Math.round(Number(m[1])), m[2]]);
    assert.deepEqual(markers, [[60, STATE_COLOURS.down], [90, STATE_COLOURS.maint]]);
  });

  it('a gap in the data breaks the line; the cluster chart has both lines and ticks for its servers\' transitions', () => {
    const site = new Site({ intervalMs: 1000 });
    let t = 0;
    for (; t < 100_000; t += 1000) site.round(t, { f1: front('c1', { a: { decided: t / 100, health: { state: t < 50_000 ? 'up' : 'down', reason: '', since: 0, transitions: 0 } } }, { load: 5, capacity: 10 }) });
    for (; t < 200_000; t += 1000) site.round(t, { f1: new Error('down') });
    for (; t < 300_000; t += 1000) site.round(t, { f1: front('c1', { a: { decided: t / 100, health: { state: 'up', reason: '', since: 0, transitions: 0 } } }, { load: 5, capacity: 10 }) });
    const series = [...site.history.series()];
    const cluster = series.find((x) => x.kind === 'cluster');
    const b = bucketize(cluster, t - HISTORY_WINDOW_MS, t, 300);
    assert.ok(b.cps.some((v) => v === null) && b.cps.some((v) => v !== null));
    const events = series.flatMap((x) => x.events);
    assert.equal(events.length, 2, 'down, then up after the outage');
    const svg = clusterChartSvg('c1', cluster, events, t, HISTORY_WINDOW_MS, site.history.capacity);
    const paths = [...svg.matchAll(/<path d="([^"]*)" stroke="(#\w+)"/g)];
    const cps = paths.find((p) => p[2] === '#58a6ff')?.[1] ?? '';
    const util = paths.find((p) => p[2] === '#39c5cf')?.[1] ?? '';
    assert.equal(cps.match(/M/g)?.length, 2, 'connections/s: two runs around the gap');
    assert.equal(util.match(/M/g)?.length, 2, 'utilization: two runs around the gap');
    assert.equal([...svg.matchAll(/<line [^>]*stroke="(#\w+)"/g)].map((m) => m[1]).join(), [STATE_COLOURS.down, STATE_COLOURS.up].join());
    assert.match(svg, />10\/s</, 'the left scale: 10 connections/s');
    assert.match(svg, />100%</, 'the right scale');
  });

  it('an empty history draws empty charts, not errors', () => {
    const h = new History({ intervalMs: 1000 });
    assert.deepEqual(chartsOf(h, 0).clusters, []);
    assertSafeSvg(clusterChartSvg('x', undefined, [], 0, HISTORY_WINDOW_MS, 600), []);
    assertSafeSvg(serverSparklineSvg('x', undefined, 0, HISTORY_WINDOW_MS, 600), []);
  });
});

describe('dashboard history endpoints', () => {
  it('/api/history (and /history.json, ?cluster=) and /api/charts', async () => {
    let t = 0;
    let decided = 0;
    const src = { name: 'f1', address: 'fake:f1', read: () => Promise.resolve(front('c1', { a: { decided: (decided += 5) } })) };
    const src2 = { name: 'f2', address: 'fake:f2', read: () => Promise.resolve(front('c2', { z: { decided: 0 } })) };
    const p = new Poller([src, src2], { intervalMs: 1000, timeoutMs: 100, now: () => t });
    for (; t <= 3000; t += 1000) await p.poll();
    t = 3000;
    const srv = new DashboardServer(p, quiet, 'x');
    const addr = await srv.listen('127.0.0.1', 0);
    const base = `http://127.0.0.1:${addr.port}`;
    try {
      const h = (await (await fetch(`${base}/api/history`)).json()) as HistoryJson;
      assert.deepEqual(h.clusters.map((c) => c.name), ['c1', 'c2']);
      assert.deepEqual(h.clusters[0]?.points.cps, [null, 5, 5, 5]);
      assert.deepEqual(h.clusters[0].servers[0]?.points.t, [-3, -2, -1, 0]);
      const one = (await (await fetch(`${base}/history.json?cluster=c2`)).json()) as HistoryJson;
      assert.deepEqual(one.clusters.map((c) => c.name), ['c2']);
      const none = (await (await fetch(`${base}/history.json?cluster=nope`)).json()) as HistoryJson;
      assert.deepEqual(none.clusters, []);
      const res = await fetch(`${base}/api/charts`);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const c = (await res.json()) as ChartsJson;
      assert.deepEqual(c.clusters.map((x) => [x.name, x.servers.map((s) => s.name)]), [['c1', ['a']], ['c2', ['z']]]);
      assert.match(c.clusters[0]?.svg ?? '', /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    } finally {
      await srv.close();
    }
  });
});

describe('dashboard page with charts', () => {
  it('its script compiles and carries the charts\' hooks', () => {
    const html = pageHtml('t');
    const script = html.split('<script>')[1]?.split('</script>')[0] ?? '';
    assert.doesNotThrow(() => new Script(script), 'the inline script is valid JavaScript');
    for (const id of ['cluster-chart', 'server-spark', 'history-note']) assert.ok(html.includes(`'${id}'`) || html.includes(`"${id}"`), id);
    assert.ok(script.includes(`var wait = ${CHARTS_EVERY_MS};`));
    for (const colour of Object.values(STATE_COLOURS)) assert.ok(html.includes(colour), `badge colour ${colour} as in the charts`);
  });
});
