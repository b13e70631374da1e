/**
 * The dashboard page: one self-contained HTML document (inline CSS and
 * script, nothing fetched but the dashboard's own /api/*), no build step.
 *
 * The script takes the state from /api/events (Server-Sent Events), falling
 * back to polling /api/state each second when the stream is refused or
 * unsupported, and rebuilds the view on each state. Every string from a
 * source is put in the page with textContent/setAttribute, never as HTML.
 *
 * The charts (the last 10 minutes, charts.ts) come from /api/charts every
 * few seconds (as often as the answer's refreshMs says) as SVG documents and are shown as <img> elements with
 * data: URLs: an SVG image runs no script and loads nothing.
 *
 * Stable hooks for tests and scripts (data-testid): site-cps, site-decided,
 * dns-qps, dns-steered, live, site-map, cluster (data-name, data-front),
 * cluster-name, cluster-cps, cluster-decided, cluster-chart, server
 * (data-name, data-state), server-bar, server-spark, history-note,
 * top-client, dns-choice, dns-mapping-summary, dns-mapping-server,
 * dns-mapping-cluster, dns-mapping-prefix, source (data-name, data-up).
 */
import { STATE_COLOURS } from './charts.ts';

/** How often the page fetches the charts until the server says (ChartsJson.refreshMs), and after a failure. */
export const CHARTS_EVERY_MS = 2000;

const STYLE = `
:root { --bg:#0f1419; --panel:#182028; --line:#2a3540; --text:#dde4ea; --dim:#8b98a5; --up:${STATE_COLOURS.up}; --warn:${STATE_COLOURS.draining}; --down:${STATE_COLOURS.down}; --maint:${STATE_COLOURS.maint}; --accent:#58a6ff; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--text); }
header.top { display:flex; align-items:baseline; gap:16px; padding:12px 20px; border-bottom:1px solid var(--line); }
header.top h1 { font-size:18px; margin:0; }
#live { font-size:12px; padding:2px 8px; border-radius:10px; background:var(--line); }
#live.ok { background:#1f3d2a; color:var(--up); }
#live.stale { background:#3d2f12; color:var(--warn); }
#updated { color:var(--dim); font-size:12px; }
main { padding:16px 20px; display:grid; gap:16px; }
section { background:var(--panel); border:1px solid var(--line); border-radius:8px; padding:12px 16px; }
h2 { font-size:14px; margin:0 0 10px; color:var(--dim); text-transform:uppercase; letter-spacing:.05em; }
.stats { display:flex; flex-wrap:wrap; gap:28px; }
.stat .v { font-size:26px; font-variant-numeric:tabular-nums; }
.stat .l { color:var(--dim); font-size:12px; }
#map { display:flex; flex-wrap:wrap; gap:16px; }
.cluster { flex:1 1 360px; border:1px solid var(--line); border-radius:8px; padding:12px; background:#121a21; }
.cluster.down { border-color:var(--down); }
.cluster header { display:flex; flex-wrap:wrap; gap:8px; align-items:baseline; }
.cluster h3 { margin:0; font-size:17px; }
.badge { font-size:11px; padding:1px 7px; border-radius:9px; background:var(--line); color:var(--dim); }
.badge.up { background:#1f3d2a; color:var(--up); }
.badge.draining, .badge.disabled { background:#3d2f12; color:var(--warn); }
.badge.down { background:#3d1a1a; color:var(--down); }
.badge.maint { background:#2d2240; color:var(--maint); }
img.chart { display:block; max-width:100%; height:auto; }
img.spark { display:block; }
.vips { color:var(--dim); font-size:12px; }
.metrics { display:flex; flex-wrap:wrap; gap:18px; margin:10px 0; }
.metrics .v { font-size:18px; font-variant-numeric:tabular-nums; }
.metrics .l { color:var(--dim); font-size:11px; }
.fronts { display:flex; flex-wrap:wrap; gap:4px; }
.front { border:1px solid var(--accent); border-radius:6px; padding:4px 10px; display:inline-block; font-size:12px; color:var(--accent); }
.servers { list-style:none; margin:8px 0 0 14px; padding:0 0 0 14px; border-left:2px solid var(--line); }
.servers li { display:grid; grid-template-columns: 64px 76px minmax(80px, 1fr) 120px auto; gap:8px; align-items:center; padding:4px 0; position:relative; }
.servers li::before { content:""; position:absolute; left:-16px; top:50%; width:12px; border-top:2px solid var(--line); }
.bar { height:10px; background:var(--line); border-radius:5px; overflow:hidden; }
.bar .fill { height:100%; background:var(--up); }
.bar .fill.hot { background:var(--warn); }
.bar .fill.full { background:var(--down); }
.num { font-variant-numeric:tabular-nums; color:var(--dim); font-size:12px; white-space:nowrap; }
.error { color:var(--down); font-size:12px; }
.cols { display:grid; grid-template-columns: 1fr 2fr; gap:16px; }
section h3 { margin:4px 0 6px; font-size:13px; font-weight:600; color:var(--dim); }
table { border-collapse:collapse; width:100%; font-size:13px; }
th { text-align:left; color:var(--dim); font-weight:normal; border-bottom:1px solid var(--line); padding:3px 6px; }
td { padding:3px 6px; border-bottom:1px solid #1f2830; font-variant-numeric:tabular-nums; }
.empty { color:var(--dim); font-style:italic; }
`;

const SCRIPT = `
'use strict';
var lastUpdate = 0;
function el(tag, attrs, children) {
  var e = document.createElement(tag);
  if (attrs) for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, String(attrs[k]));
  (children || []).forEach(function (c) { e.append(typeof c === 'string' ? document.createTextNode(c) : c); });
  return e;
}
function fmt(x, d) { return x === null || x === undefined ? '\\u2013' : Number(x).toFixed(d === undefined ? 1 : d); }
function count(x) { return x === null || x === undefined ? '\\u2013' : String(Math.round(x)); }
function metric(label, value, testid) { return el('div', {}, [el('div', { class: 'v', 'data-testid': testid }, [value]), el('div', { class: 'l' }, [label])]); }
function setText(id, text) { var e = document.getElementById(id); if (e) e.textContent = text; }
function cell(row) { return el('tr', {}, row.map(function (c) { return el('td', {}, [c]); })); }
function table(id, header, rows, rowAttrs, emptyText) {
  var t = document.getElementById(id);
  var head = el('tr', {}, header.map(function (h) { return el('th', {}, [h]); }));
  var body = rows.map(function (r, i) { var tr = cell(r); var a = rowAttrs(i); for (var k in a) tr.setAttribute(k, a[k]); return tr; });
  if (body.length === 0) body = [el('tr', {}, [el('td', { class: 'empty', colspan: header.length }, [emptyText])])];
  t.replaceChildren.apply(t, [head].concat(body));
}
var charts = Object.create(null);
function clusterKey(c) { return JSON.stringify(['cluster', c]); }
function serverKey(c, svc, name) { return JSON.stringify(['server', c, svc, name]); }
function chartImg(key, testid, cls, alt, w, h) {
  var img = el('img', { 'data-testid': testid, 'data-chart': key, class: cls, alt: alt, width: w, height: h });
  var c = charts[key];
  if (c) { img.setAttribute('src', c.src); img.setAttribute('title', c.title); }
  return img;
}
function svgUrl(svg) { return 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(svg); }
function eventText(e) { return fmt(e.ageSeconds, 0) + ' s ago: ' + e.from + ' \\u2192 ' + e.to + (e.count > 1 ? ' (' + e.count + ' transitions)' : '') + (e.reason ? ': ' + e.reason : ''); }
function loadCharts() {
  var wait = ${CHARTS_EVERY_MS};
  fetch('api/charts', { cache: 'no-store' }).then(function (r) { return r.json(); }).then(function (h) {
    if (h.refreshMs > 0 && h.refreshMs <= 60000) wait = h.refreshMs;
    var next = Object.create(null);
    var minutes = fmt(h.windowSeconds / 60, 0);
    h.clusters.forEach(function (c) {
      next[clusterKey(c.name)] = { src: svgUrl(c.svg), title: c.name + ': connections/s (solid) and utilization (dashed), last ' + minutes + ' min' };
      c.servers.forEach(function (s) {
        var ev = s.events.slice().reverse().map(eventText);
        next[serverKey(c.name, s.service, s.name)] = { src: svgUrl(s.svg), title: s.name + ': connections/s, utilization and state, last ' + minutes + ' min' + (ev.length ? '\\n' + ev.join('\\n') : '') };
      });
    });
    charts = next;
    document.querySelectorAll('img[data-chart]').forEach(function (img) {
      var c = charts[img.getAttribute('data-chart')];
      if (c) { img.setAttribute('src', c.src); img.setAttribute('title', c.title); }
    });
    setText('history-note', 'charts: last ' + minutes + ' min' + (h.dropped > 0 ? '; ' + h.dropped + ' clusters/servers not charted (at most ' + h.maxSeries + ' series)' : ''));
  }).catch(function () {}).then(function () { setTimeout(loadCharts, wait); });
}
function serverItem(c, s) {
  var pct = s.utilization === null ? null : s.utilization * 100;
  var width = pct === null ? 0 : Math.max(0, Math.min(100, pct));
  var fill = el('div', { class: 'fill' + (pct !== null && pct >= 100 ? ' full' : pct !== null && pct >= 80 ? ' hot' : ''), style: 'width:' + width.toFixed(1) + '%' });
  var cap = s.capacity === null ? 'no limit' : s.capacityUnit === 'per-second' ? fmt(s.capacity) + '/s' : count(s.capacity) + ' conns';
  return el('li', { 'data-testid': 'server', 'data-name': s.name, 'data-state': s.state }, [
    el('span', {}, [s.name]),
    el('span', { class: 'badge ' + s.state, title: s.health && s.health.reason !== null ? 'health ' + (s.health.state || 'unknown') + ': ' + s.health.reason : undefined }, [s.state]),
    el('div', { class: 'bar', 'data-testid': 'server-bar', title: 'utilization ' + (pct === null ? 'unknown' : pct.toFixed(0) + '%') }, [fill]),
    chartImg(serverKey(c.name, s.service, s.name), 'server-spark', 'spark', 'last minutes of ' + s.name, 120, 28),
    el('span', { class: 'num' }, [(pct === null ? '\\u2013' : pct.toFixed(0) + '%') + ' of ' + cap + ' \\u00b7 ' + count(s.active) + ' active \\u00b7 ' + fmt(s.connectionsPerSecond) + '/s']),
  ]);
}
function frontNodeItem(n) {
  var text = 'front node \\u00b7 ' + n.source;
  if (n.node !== null && n.node !== n.source) text += ' (' + n.node + ')';
  if (n.role !== null && n.role !== 'single') text += ' \\u00b7 ' + n.role.toUpperCase();
  if (n.peer !== null) text += ' \\u00b7 peer ' + n.peer;
  if (n.lastFailover !== null) text += ' \\u00b7 last failover ' + new Date(n.lastFailover.at).toLocaleTimeString() + ' (' + n.lastFailover.from + ' \\u2192 ' + n.lastFailover.to + ', ' + n.lastFailover.adopted + ' flows adopted)';
  if (!n.up) text += ' \\u00b7 not answering';
  return el('div', { class: 'front', 'data-testid': 'front-node', 'data-name': n.source, 'data-role': n.role === null ? '' : n.role }, [text]);
}
function clusterCard(c) {
  var frontState = c.frontUp ? 'up' : 'down';
  var head = el('header', {}, [
    el('h3', { 'data-testid': 'cluster-name' }, [c.name]),
    el('span', { class: 'badge ' + frontState }, ['front ' + frontState]),
    c.dnsState === null ? '' : el('span', { class: 'badge ' + (c.dnsState === 'up' ? 'up' : 'down') }, ['DNS: ' + c.dnsState]),
    el('span', { class: 'vips' }, [c.vips.length ? 'VIP ' + c.vips.join(', ') : '']),
  ]);
  var metrics = el('div', { class: 'metrics' }, [
    metric('connections/s', fmt(c.connectionsPerSecond), 'cluster-cps'),
    metric('decided', count(c.decided), 'cluster-decided'),
    metric('tracked now', count(c.active), 'cluster-active'),
    metric('capacity/s', fmt(c.capacity), 'cluster-capacity'),
    metric('load/s', fmt(c.load), 'cluster-load'),
    metric('servers up', c.serversUp === null ? '\\u2013' : count(c.serversUp) + '/' + count(c.serversTotal), 'cluster-servers-up'),
  ]);
  var front = el('div', { class: 'fronts' }, c.source === null ? [el('div', { class: 'front' }, ['front node: no source'])] : c.frontNodes.map(frontNodeItem));
  var chart = chartImg(clusterKey(c.name), 'cluster-chart', 'chart', 'connections/s and utilization of ' + c.name, 480, 120);
  var servers = el('ul', { class: 'servers' }, c.servers.map(function (s) { return serverItem(c, s); }));
  return el('article', { class: 'cluster' + (c.frontUp ? '' : ' down'), 'data-testid': 'cluster', 'data-name': c.name, 'data-front': frontState }, [head, metrics, chart, front, servers]);
}
// Policy mapping: per DNS server its assignment's size and last recompute, the totals per cluster, the top prefixes.
function renderMapping(dns) {
  var lines = [], clusters = [], prefixes = [];
  dns.forEach(function (d) {
    var m = d.mapping;
    if (!m || (!m.recomputes && !m.prefixes)) return;
    var l = m.last;
    lines.push(d.name + ': ' + count(m.prefixes) + ' prefixes assigned, ' + count(m.recomputes) + ' recomputes, ' + count(m.movedTotal) + ' moves in all' +
      (l ? '; last recompute ' + (l.at ? new Date(l.at).toLocaleTimeString() : '\\u2013') + ' (' + fmt(l.ageSeconds) + ' s ago): moved ' + count(l.moved) + ', unserved ' + fmt(l.unserved) + ', mean RTT ' + fmt(l.meanRttMs) + ' ms, took ' + fmt(l.totalMs, 2) + ' ms' : '; not recomputed yet'));
    m.clusters.forEach(function (c) { clusters.push([c.name, count(c.prefixes), fmt(c.demand), fmt(c.capacity), d.name]); });
    m.top.forEach(function (p) { prefixes.push([p.prefix, p.cluster, fmt(p.demand), fmt(p.rttMs), count(p.ttl) + ' s', fmt(p.sinceSeconds, 0) + ' s', d.name]); });
  });
  var box = document.getElementById('dns-mapping-summary');
  box.replaceChildren.apply(box, lines.length ? lines.map(function (t) { return el('div', { 'data-testid': 'dns-mapping-server' }, [t]); }) : [el('div', { class: 'empty' }, ['no DNS server uses the mapping policy'])]);
  table('dns-mapping-clusters', ['cluster', 'prefixes', 'demand', 'capacity', 'dns'], clusters, function () { return { 'data-testid': 'dns-mapping-cluster' }; }, 'no assignment');
  table('dns-mapping', ['client prefix', 'cluster', 'demand', 'RTT (ms)', 'TTL', 'since', 'dns'], prefixes, function () { return { 'data-testid': 'dns-mapping-prefix' }; }, 'no assignment');
}
function render(s) {
  lastUpdate = Date.now();
  var live = document.getElementById('live');
  live.textContent = 'live'; live.className = 'ok';
  setText('updated', 'updated ' + new Date(s.generatedAt).toLocaleTimeString());
  setText('site-cps', fmt(s.site.connectionsPerSecond));
  setText('site-decided', count(s.site.decided));
  setText('site-clusters', s.site.clustersUp + '/' + s.site.clusters);
  var q = null, st = null;
  s.dns.forEach(function (d) { if (d.queriesPerSecond !== null) q = (q || 0) + d.queriesPerSecond; if (d.steered !== null) st = (st || 0) + d.steered; });
  setText('dns-qps', fmt(q));
  setText('dns-steered', count(st));
  var map = document.getElementById('map');
  map.replaceChildren.apply(map, s.clusters.length ? s.clusters.map(clusterCard) : [el('div', { class: 'empty' }, ['no cluster known yet'])]);
  table('top-clients', ['client', 'requests/s', 'cluster'], s.topClients.map(function (t) { return [t.client, fmt(t.rate, 2), t.cluster]; }), function () { return { 'data-testid': 'top-client' }; }, 'no per-client rates reported yet');
  var choices = [];
  s.dns.forEach(function (d) { d.choices.forEach(function (c) { choices.push([c.client, c.name, c.clusters.join(', ') || '\\u2013', c.answer.join(', '), c.reason, fmt(c.ageSeconds) + ' s', d.name]); }); });
  table('dns-choices', ['client prefix', 'name', 'cluster', 'answer', 'reason', 'age', 'dns'], choices, function () { return { 'data-testid': 'dns-choice' }; }, 'no steered answers yet');
  var reasons = [];
  s.dns.forEach(function (d) { Object.keys(d.reasons).forEach(function (k) { reasons.push(k + ' ' + d.reasons[k]); }); });
  setText('dns-reasons', reasons.length ? 'decisions by reason: ' + reasons.join(', ') : '');
  var highRate = [];
  s.dns.forEach(function (d) { d.highRate.forEach(function (h) { highRate.push([h.client, fmt(h.rate, 2), h.cluster]); }); });
  table('dns-high-rate', ['prefix', 'requests/s', 'reported by'], highRate, function () { return {}; }, 'none');
  renderMapping(s.dns);
  table('sources', ['source', 'kind', 'address', 'state', 'last answer', 'polls', 'failures'], s.sources.map(function (x) {
    return [x.name, x.kind, x.address, x.up ? 'up' : 'down' + (x.error ? ': ' + x.error : ''), x.lastOkAgeSeconds === null ? 'never' : fmt(x.lastOkAgeSeconds) + ' s ago', String(x.polls), String(x.failures)];
  }), function (i) { return { 'data-testid': 'source', 'data-name': s.sources[i].name, 'data-up': String(s.sources[i].up) }; }, 'no sources');
}
function poll() {
  fetch('api/state', { cache: 'no-store' }).then(function (r) { return r.json(); }).then(render).catch(function () {});
}
function start() {
  if (!window.EventSource) { setInterval(poll, 1000); poll(); return; }
  var es = new EventSource('api/events');
  es.onmessage = function (e) { try { render(JSON.parse(e.data)); } catch (err) { /* a bad frame waits for the next */ } };
  es.onerror = function () { if (es.readyState === 2) { setInterval(poll, 1000); poll(); } };
}
setInterval(function () {
  if (lastUpdate && Date.now() - lastUpdate > 5000) { var l = document.getElementById('live'); l.textContent = 'stale: no update for ' + Math.round((Date.now() - lastUpdate) / 1000) + ' s'; l.className = 'stale'; }
}, 1000);
start();
loadCharts();
`;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function pageHtml(title: string): string {
  const t = escapeHtml(title);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${t}</title>
<style>${STYLE}</style>
</head>
<body>
<header class="top"><h1 id="title">${t}</h1><span id="live" data-testid="live">connecting</span><span id="updated"></span></header>
<main>
<section><h2>Site</h2><div class="stats">
<div class="stat"><div class="v" id="site-cps" data-testid="site-cps">&ndash;</div><div class="l">connections/s (all front nodes)</div></div>
<div class="stat"><div class="v" id="site-decided" data-testid="site-decided">&ndash;</div><div class="l">connections decided</div></div>
<div class="stat"><div class="v" id="site-clusters" data-testid="site-clusters">&ndash;</div><div class="l">front nodes answering</div></div>
<div class="stat"><div class="v" id="dns-qps" data-testid="dns-qps">&ndash;</div><div class="l">DNS queries/s</div></div>
<div class="stat"><div class="v" id="dns-steered" data-testid="dns-steered">&ndash;</div><div class="l">DNS steered answers</div></div>
</div></section>
<section><h2>Site map</h2><div id="map" data-testid="site-map"></div><div class="num" id="history-note" data-testid="history-note"></div></section>
<div class="cols">
<section><h2>Top clients</h2><table id="top-clients"></table><h2 style="margin-top:14px">High-rate prefixes (DNS)</h2><table id="dns-high-rate"></table></section>
<section><h2>DNS choices per client prefix</h2><table id="dns-choices"></table><div class="num" id="dns-reasons"></div></section>
</div>
<section><h2>DNS mapping assignment</h2><div class="num" id="dns-mapping-summary" data-testid="dns-mapping-summary"></div>
<div class="cols"><div><h3>Per cluster (demand against the capacity the solve had)</h3><table id="dns-mapping-clusters"></table></div><div><h3>Prefixes with the most demand</h3><table id="dns-mapping"></table></div></div></section>
<section><h2>Sources</h2><table id="sources"></table></section>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}
