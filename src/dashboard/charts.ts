/**
 * The dashboard's charts, drawn on the server as SVG documents from the
 * History: per cluster, connections/s and utilization over the window; per
 * server, a sparkline of both with its state as a strip and a marker at
 * each health transition.
 *
 * The page shows each as an <img> (a data: URL). An SVG shown as an image
 * runs no script and loads nothing, so even a name that slipped past the
 * escaping could not act in the page; and nothing that came from a daemon
 * is written into a document unescaped (escapeXml): names go into <title>
 * text only, every number is one this file formatted, every colour one of
 * its constants. The transitions' reasons are not drawn (an image shows no
 * tooltip): the page lists the latest EVENTS_LISTED with each sparkline.
 *
 * Points are averaged into one bucket per drawn pixel column (at most), so
 * a chart's size does not depend on the poll interval; a bucket with no
 * point (the front node was not answering) breaks the line.
 */
import type { History, Series } from './history.ts';
import type { ServerState } from './state.ts';

/** The badges' colours (page.ts uses the same), by state shown. */
export const STATE_COLOURS: Readonly<Record<ServerState, string>> = {
  up: '#3fb950',
  draining: '#d29922',
  disabled: '#d29922',
  maint: '#a371f7',
  down: '#f85149',
};
const CPS_COLOUR = '#58a6ff';
const UTIL_COLOUR = '#39c5cf';
const TEXT_COLOUR = '#8b98a5';
const GRID_COLOUR = '#2a3540';

/** Worst first: the state a bucket is drawn in when several were seen in it. */
const SEVERITY: readonly ServerState[] = ['down', 'maint', 'disabled', 'draining', 'up'];

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A number as SVG writes it (finite, short). */
function n(x: number): string {
  return Number.isFinite(x) ? String(Math.round(x * 10) / 10) : '0';
}

interface Buckets {
  cps: (number | null)[];
  utilization: (number | null)[];
  state: (ServerState | null)[];
}

/** The series' points over [from, to) averaged into `count` buckets. */
export function bucketize(s: Series | undefined, from: number, to: number, count: number): Buckets {
  const sum = { cps: new Float64Array(count), util: new Float64Array(count) };
  const seen = { cps: new Uint32Array(count), util: new Uint32Array(count) };
  const state: (ServerState | null)[] = Array.from({ length: count }, () => null);
  const span = to - from;
  for (let k = 0; s && k < s.points.size; k++) {
    const at = s.points.at(k);
    if (at < from || at > to) continue;
    const b = Math.min(count - 1, Math.floor(((at - from) / span) * count));
    const cps = s.cpsAt(k);
    if (cps !== null) {
      sum.cps[b] = (sum.cps[b] ?? 0) + cps;
      seen.cps[b] = (seen.cps[b] ?? 0) + 1;
    }
    const u = s.utilizationAt(k);
    if (u !== null) {
      sum.util[b] = (sum.util[b] ?? 0) + u;
      seen.util[b] = (seen.util[b] ?? 0) + 1;
    }
    const st = s.stateAt(k);
    const prev = state[b] ?? null;
    if (st !== null && (prev === null || SEVERITY.indexOf(st) < SEVERITY.indexOf(prev))) state[b] = st;
  }
  const avg = (total: Float64Array, c: Uint32Array): (number | null)[] => Array.from(total, (v, i) => ((c[i] ?? 0) > 0 ? v / (c[i] ?? 1) : null));
  return { cps: avg(sum.cps, seen.cps), utilization: avg(sum.util, seen.util), state };
}

/** A path through the known values, broken at the unknown ones (a lone point is a dot). */
function path(values: readonly (number | null)[], x: (i: number) => number, y: (v: number) => number): string {
  const parts: string[] = [];
  let open = false;
  for (const [i, v] of values.entries()) {
    if (v === null) {
      open = false;
      continue;
    }
    const next = values[i + 1] ?? null;
    if (!open && next === null) {
      // A lone bucket: a short dash, so it is seen.
      parts.push(`M${n(x(i) - 1)} ${n(y(v))}h2`);
      continue;
    }
    parts.push(`${open ? 'L' : 'M'}${n(x(i))} ${n(y(v))}`);
    open = true;
  }
  return parts.join('');
}

/** A round upper bound for a scale: 1, 2, 5 times a power of ten. */
export function niceMax(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (x <= m * p) return m * p;
  return 10 * p;
}

function fmtRate(x: number): string {
  return x >= 100 ? String(Math.round(x)) : String(Math.round(x * 10) / 10);
}

export interface ChartEvent {
  readonly at: number;
  readonly to: ServerState;
}

/** The cluster's chart: connections/s (left scale) and utilization (right scale) over the window, transitions of its servers as ticks. */
export function clusterChartSvg(title: string, s: Series | undefined, events: readonly ChartEvent[], now: number, windowMs: number, buckets: number): string {
  const W = 480;
  const H = 120;
  const L = 40;
  const R = 440;
  const T = 10;
  const B = 94;
  const count = Math.max(1, Math.min(buckets, R - L));
  const from = now - windowMs;
  const b = bucketize(s, from, now, count);
  const cpsMax = niceMax(Math.max(0, ...b.cps.filter((v): v is number => v !== null)));
  const utilMax = Math.max(1, niceMax(Math.max(0, ...b.utilization.filter((v): v is number => v !== null))));
  const x = (i: number): number => L + ((i + 0.5) / count) * (R - L);
  const yc = (v: number): number => B - (Math.min(v, cpsMax) / cpsMax) * (B - T);
  const yu = (v: number): number => B - (Math.min(v, utilMax) / utilMax) * (B - T);
  const xt = (at: number): number => L + ((at - from) / windowMs) * (R - L);
  const minutes = windowMs / 60_000;
  // One tick per pixel column and state, however many servers changed there.
  const ticks = new Map<string, string>();
  for (const e of events) {
    if (e.at < from || e.at > now) continue;
    const tx = n(xt(e.at));
    ticks.set(`${tx}/${e.to}`, `<line x1="${tx}" x2="${tx}" y1="${B + 1}" y2="${B + 7}" stroke="${STATE_COLOURS[e.to]}" stroke-width="2"/>`);
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="10">`,
    `<title>${escapeXml(title)}</title>`,
    `<path d="M${L} ${T}H${R}M${L} ${(T + B) / 2}H${R}M${L} ${B}H${R}" stroke="${GRID_COLOUR}" fill="none"/>`,
    `<text x="${L - 4}" y="${T + 4}" text-anchor="end" fill="${CPS_COLOUR}">${fmtRate(cpsMax)}/s</text>`,
    `<text x="${L - 4}" y="${B}" text-anchor="end" fill="${TEXT_COLOUR}">0</text>`,
    `<text x="${R + 4}" y="${T + 4}" fill="${UTIL_COLOUR}">${Math.round(utilMax * 100)}%</text>`,
    `<text x="${R + 4}" y="${B}" fill="${TEXT_COLOUR}">0%</text>`,
    `<path d="${path(b.utilization, x, yu)}" stroke="${UTIL_COLOUR}" stroke-width="1.5" stroke-dasharray="4 2" fill="none"/>`,
    `<path d="${path(b.cps, x, yc)}" stroke="${CPS_COLOUR}" stroke-width="1.5" fill="none"/>`,
    [...ticks.values()].join(''),
    `<text x="${L}" y="${H - 4}" fill="${TEXT_COLOUR}">-${n(minutes)} min</text>`,
    `<text x="${(L + R) / 2}" y="${H - 4}" text-anchor="middle" fill="${TEXT_COLOUR}">-${n(minutes / 2)} min</text>`,
    `<text x="${R}" y="${H - 4}" text-anchor="end" fill="${TEXT_COLOUR}">now</text>`,
    `<text x="${L + 4}" y="${T + 10}" fill="${CPS_COLOUR}">connections/s</text>`,
    `<text x="${R - 4}" y="${T + 10}" text-anchor="end" fill="${UTIL_COLOUR}">utilization</text>`,
    '</svg>',
  ].join('');
}

/** A server's sparkline: connections/s and utilization, its state as a strip below, a marker at each transition. */
export function serverSparklineSvg(title: string, s: Series | undefined, now: number, windowMs: number, buckets: number): string {
  const W = 120;
  const H = 28;
  const T = 2;
  const B = 21;
  const count = Math.max(1, Math.min(buckets, W));
  const from = now - windowMs;
  const b = bucketize(s, from, now, count);
  const cpsMax = niceMax(Math.max(0, ...b.cps.filter((v): v is number => v !== null)));
  const utilMax = Math.max(1, ...b.utilization.filter((v): v is number => v !== null));
  const bw = W / count;
  const x = (i: number): number => (i + 0.5) * bw;
  const yc = (v: number): number => B - (Math.min(v, cpsMax) / cpsMax) * (B - T);
  const yu = (v: number): number => B - (Math.min(v, utilMax) / utilMax) * (B - T);
  const strip: string[] = [];
  for (const [i, st] of b.state.entries()) {
    if (st === null) continue;
    // Runs of one state are one rectangle.
    if (i > 0 && b.state[i - 1] === st) continue;
    let j = i;
    while (j + 1 < count && b.state[j + 1] === st) j++;
    strip.push(`<rect x="${n(i * bw)}" y="${B + 3}" width="${n((j - i + 1) * bw)}" height="4" fill="${STATE_COLOURS[st]}"/>`);
  }
  // One marker per pixel column and state: a flapping server does not grow the drawing.
  const markers = new Map<string, string>();
  for (const e of s?.events ?? []) {
    if (e.at < from || e.at > now) continue;
    const mx = n(((e.at - from) / windowMs) * W);
    markers.set(`${mx}/${e.to}`, `<line x1="${mx}" x2="${mx}" y1="0" y2="${H}" stroke="${STATE_COLOURS[e.to]}" stroke-width="1.5"/>`);
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`,
    `<title>${escapeXml(title)}</title>`,
    `<path d="M0 ${B}H${W}" stroke="${GRID_COLOUR}" fill="none"/>`,
    `<path d="${path(b.utilization, x, yu)}" stroke="${UTIL_COLOUR}" stroke-width="1" fill="none"/>`,
    `<path d="${path(b.cps, x, yc)}" stroke="${CPS_COLOUR}" stroke-width="1.5" fill="none"/>`,
    strip.join(''),
    [...markers.values()].join(''),
    '</svg>',
  ].join('');
}

/** Transitions per server sent with the charts (the page lists them in the sparkline's tooltip). */
export const EVENTS_LISTED = 5;

/**
 * How often a page should fetch the charts again: every 2 s on a small
 * site, less often on a large one (20 ms per series, at most 15 s), so
 * the charts of a site at the series bound (a few MB) do not flow
 * continuously to every open page.
 */
export function refreshMs(series: number): number {
  return Math.min(15_000, Math.max(2000, series * 20));
}

export interface ChartsJson {
  generatedAt: string;
  /** When the page should fetch the charts again (refreshMs). */
  refreshMs: number;
  windowSeconds: number;
  maxSeries: number;
  dropped: number;
  clusters: {
    name: string;
    svg: string;
    servers: { service: string; name: string; svg: string; events: { ageSeconds: number; from: ServerState; to: ServerState; count: number; reason: string | null }[] }[];
  }[];
}

/** Every chart of the history at monotonic time `now`. */
export function chartsOf(h: History, now: number): ChartsJson {
  const clusters = new Map<string, { cluster?: Series; servers: Series[] }>();
  for (const s of h.series()) {
    let c = clusters.get(s.cluster);
    if (!c) {
      c = { servers: [] };
      clusters.set(s.cluster, c);
    }
    if (s.kind === 'cluster') c.cluster = s;
    else c.servers.push(s);
  }
  const buckets = Math.ceil(h.windowMs / h.stepMs);
  const minutes = h.windowMs / 60_000;
  return {
    generatedAt: new Date().toISOString(),
    refreshMs: refreshMs(h.size),
    windowSeconds: h.windowMs / 1000,
    maxSeries: h.maxSeries,
    dropped: h.dropped,
    clusters: [...clusters].map(([name, c]) => ({
      name,
      svg: clusterChartSvg(`${name}: connections/s and utilization, last ${minutes} min`, c.cluster, c.servers.flatMap((s) => s.events), now, h.windowMs, buckets),
      servers: c.servers.map((s) => ({
        service: s.service,
        name: s.server,
        svg: serverSparklineSvg(`${s.server} (${s.service}): connections/s, utilization and state, last ${minutes} min`, s, now, h.windowMs, buckets),
        events: s.events.slice(-EVENTS_LISTED).map((e) => ({ ageSeconds: Math.round((now - e.at) / 100) / 10, from: e.from, to: e.to, count: e.count, reason: e.reason })),
      })),
    })),
  };
}
