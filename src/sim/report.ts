/**
 * The simulator's report: one JSON document, and a self-contained HTML page
 * (inline SVG line charts, inline CSS, no script, no external asset) with
 * the summary table and the charts of issue 24 part 5: utilization per
 * cluster over time, demand-weighted RTT against the oracle, overload and
 * answer changes.
 */
import { escapeXml, niceMax } from '../dashboard/charts.ts';
import type { OracleSample, PolicyRun } from './engine.ts';
import type { QualitySummary } from './metrics.ts';

export interface SimReport {
  readonly scenario: string;
  readonly seed: number;
  readonly world: {
    readonly clusters: number;
    readonly prefixes: number;
    readonly units: number;
    readonly stepSeconds: number;
    readonly steps: number;
    readonly durationSeconds: number;
    readonly ttlSeconds: number;
    readonly reportDelaySeconds: number;
    readonly drawClasses: number;
  };
  readonly oracle: {
    readonly everySeconds: number;
    readonly grouping: string;
    readonly samples: readonly OracleSample[];
    readonly meanSolveMs: number;
    readonly maxSolveMs: number;
  };
  readonly policies: readonly PolicyRun[];
  readonly run: { wallSeconds: number; peakRssMiB: number; setupSeconds: number };
}

const COLOURS = ['#e6194b', '#3cb44b', '#4363d8', '#f58231', '#911eb4', '#42d4f4', '#f032e6', '#9a6324'];
const ORACLE_COLOUR = '#000000';

function num(x: number): string {
  return Number.isFinite(x) ? String(Math.round(x * 10) / 10) : '0';
}

export interface Line {
  readonly name: string;
  readonly colour: string;
  readonly values: readonly (number | null)[];
  /** The line's own times (seconds), when not the chart's. */
  readonly t?: readonly number[];
  readonly width?: number;
  readonly dash?: boolean;
}

/** A line chart: x = time (hours), lines with gaps at null/NaN, a legend when `legend`. */
export function lineChartSvg(title: string, t: readonly number[], lines: readonly Line[], yLabel: string, legend = true, fixedMax?: number): string {
  const W = 760;
  const H = 220;
  const L = 56;
  const Rt = 12;
  const T = 24;
  const B = 32;
  const xMax = Math.max(1, t[t.length - 1] ?? 1);
  let yMax = 0;
  for (const l of lines) for (const v of l.values) if (v !== null && Number.isFinite(v)) yMax = Math.max(yMax, v);
  yMax = fixedMax ?? niceMax(yMax);
  const x = (s: number): number => L + ((W - L - Rt) * s) / xMax;
  const y = (v: number): number => T + (H - T - B) * (1 - Math.min(v, yMax * 1.05) / yMax);
  const parts: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img"><title>${escapeXml(title)}</title>`];
  parts.push(`<text x="${L}" y="16" font-size="13" font-weight="bold">${escapeXml(title)}</text>`);
  for (let k = 0; k <= 4; k++) {
    const v = (yMax * k) / 4;
    parts.push(`<line x1="${L}" x2="${W - Rt}" y1="${num(y(v))}" y2="${num(y(v))}" stroke="#ddd"/><text x="${L - 4}" y="${num(y(v) + 4)}" font-size="10" text-anchor="end">${escapeXml(v >= 100 ? v.toFixed(0) : String(Math.round(v * 1000) / 1000))}</text>`);
  }
  const hours = xMax / 3600;
  const stepH = hours > 48 ? 12 : hours > 12 ? 3 : hours > 4 ? 1 : hours > 1.5 ? 0.5 : 0.25;
  for (let h = 0; h <= hours + 1e-9; h += stepH) parts.push(`<text x="${num(x(h * 3600))}" y="${H - B + 14}" font-size="10" text-anchor="middle">${String(Math.round(h * 100) / 100)}h</text>`);
  parts.push(`<text x="12" y="${num(T + (H - T - B) / 2)}" font-size="10" transform="rotate(-90 12 ${num(T + (H - T - B) / 2)})" text-anchor="middle">${escapeXml(yLabel)}</text>`);
  for (const l of lines) {
    let d = '';
    let pen = false;
    l.values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${num(x((l.t ?? t)[i] ?? 0))},${num(y(v))}`;
      pen = true;
    });
    if (d !== '') parts.push(`<path d="${d}" fill="none" stroke="${l.colour}" stroke-width="${l.width ?? 1.5}"${l.dash === true ? ' stroke-dasharray="5,3"' : ''}/>`);
  }
  if (legend) {
    let lx = L + 4;
    for (const l of lines) {
      parts.push(`<rect x="${lx}" y="${H - 12}" width="10" height="3" fill="${l.colour}"/><text x="${lx + 14}" y="${H - 8}" font-size="10">${escapeXml(l.name)}</text>`);
      lx += 24 + l.name.length * 6;
    }
  }
  parts.push('</svg>');
  return parts.join('');
}

function pct(x: number, digits = 1): string {
  return Number.isFinite(x) ? `${(x * 100).toFixed(digits)}%` : 'n/a';
}

function recovery(s: QualitySummary): string {
  if (s.recoverySeconds.length === 0) return '–';
  return s.recoverySeconds.map((r) => (r.seconds === null ? 'never' : `${r.seconds.toFixed(0)} s`)).join(', ');
}

/** The summary rows (also the Markdown table of docs/steering.md). */
export function summaryRows(r: SimReport): string[][] {
  return r.policies.map((p) => {
    const s = p.summary;
    return [
      p.policy,
      Number.isFinite(s.meanRttAtOracleSamplesMs) ? s.meanRttAtOracleSamplesMs.toFixed(1) : 'n/a',
      Number.isFinite(s.oracleRttMs) ? s.oracleRttMs.toFixed(1) : 'n/a',
      Number.isFinite(s.rttVsOracle) ? `${((s.rttVsOracle - 1) * 100).toFixed(1)}%` : 'n/a',
      s.overloadClusterSeconds.toFixed(0),
      pct(s.steadyChangesPerMinuteShare, 3),
      recovery(s),
      s.utilSpreadMean.toFixed(2),
      s.queriesPerSecond.toFixed(0),
    ];
  });
}

export const SUMMARY_HEADER = ['policy', 'mean RTT ms', 'oracle ms', 'vs oracle', 'overload cluster-s', 'answer changes /min (steady)', 'recovery', 'util spread', 'queries/s'];

export function markdownTable(r: SimReport): string {
  const rows = summaryRows(r);
  return [`| ${SUMMARY_HEADER.join(' | ')} |`, `|${SUMMARY_HEADER.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

export function renderHtml(r: SimReport): string {
  const first = r.policies[0];
  const t = first?.series.t ?? [];
  // The oracle runs every oracleEverySeconds: its line has its own times.
  const oracleT = r.oracle.samples.map((o) => o.t);
  const oracleLine = r.oracle.samples.map((o) => o.rttMs);
  const policyLines = (pick: (p: PolicyRun) => readonly (number | null)[]): Line[] => r.policies.map((p, i) => ({ name: p.policy, colour: COLOURS[i % COLOURS.length] ?? '#333', values: pick(p) }));
  const charts: string[] = [];
  charts.push(lineChartSvg('Demand-weighted mean RTT (ms), oracle dashed', t, [...policyLines((p) => p.series.rttMs), { name: 'oracle', colour: ORACLE_COLOUR, values: oracleLine, t: oracleT, dash: true }], 'ms'));
  charts.push(lineChartSvg('Overloaded clusters (load > capacity)', t, policyLines((p) => p.series.overloaded), 'clusters'));
  charts.push(lineChartSvg('Answer changes: share of prefixes per minute', t, policyLines((p) => p.series.changesShare), 'share/min'));
  charts.push(lineChartSvg('DNS queries per second (resolver re-queries)', t, policyLines((p) => p.series.queriesPerSecond), 'q/s'));
  for (const p of r.policies) {
    const lines = p.series.util.map((u, c) => ({ name: String(c), colour: COLOURS[c % COLOURS.length] ?? '#333', values: u, width: 0.7 }));
    charts.push(lineChartSvg(`Utilization per cluster (load / capacity): ${p.policy}`, t, lines, 'utilization', false, Math.max(1.5, Math.min(5, niceMax(Math.max(0, ...p.series.util.flat().map((v) => v ?? 0)))))));
  }
  const rows = summaryRows(r);
  const w = r.world;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sluice simulate: ${escapeXml(r.scenario)}</title>
<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}svg{display:block;margin:12px 0;background:#fff;border:1px solid #eee}</style>
</head><body>
<h1>Steering simulation: ${escapeXml(r.scenario)}</h1>
<p>${w.clusters} clusters, ${w.prefixes.toLocaleString('en')} prefixes in ${w.units.toLocaleString('en')} map units, ${(w.durationSeconds / 3600).toFixed(1)} h in ${w.steps} steps of ${w.stepSeconds} s; TTL ${w.ttlSeconds} s; report delay ${w.reportDelaySeconds} s; seed ${r.seed}.
Oracle: exact min-cost assignment every ${r.oracle.everySeconds} s (${r.oracle.samples.length} solves, mean ${r.oracle.meanSolveMs.toFixed(0)} ms) over ${escapeXml(r.oracle.grouping)}.
Run: ${r.run.wallSeconds.toFixed(0)} s wall, peak RSS ${r.run.peakRssMiB.toFixed(0)} MiB.</p>
<table><tr>${SUMMARY_HEADER.map((h) => `<th>${escapeXml(h)}</th>`).join('')}</tr>
${rows.map((row) => `<tr>${row.map((c) => `<td>${escapeXml(c)}</td>`).join('')}</tr>`).join('\n')}
</table>
<p>mean RTT: at the oracle's sample instants, over served demand. overload: cluster-seconds above capacity while another live cluster had room. answer changes: share of all prefixes whose re-query got another cluster, per minute, in steady state (warm-up and the settle time after events excluded). recovery: from a cluster's loss until no prefix is answered with it. util spread: time-mean of max − min utilization over live clusters.</p>
${charts.join('\n')}
</body></html>
`;
}
