/** `sluice status --dns`: a running DNS server's clusters, recent steering choices and counters. */
import type { DnsStatus } from '../dns/status.ts';
import { table } from './table.ts';

const n1 = (x: number | null): string => (x === null ? '-' : x.toFixed(1));
/** A record of counts (every status counter record is one) as k=v of the non-zero ones. */
const kv = (r: object): string =>
  (Object.entries(r) as [string, number][])
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ') || '-';

export function renderDnsStatus(s: DnsStatus): string {
  const out: string[] = [];
  out.push(`dns ${s.name}: zones ${s.zones.map((z) => `${z.origin} (serial ${z.serial}, ${z.records} records)`).join(', ')}`);
  out.push(`queries: ${kv(s.counters)}`);
  out.push(`rejected queries: ${kv(s.rejects)}`);
  out.push('', table(['CLUSTER', 'STATE', 'VIPS', 'CAPACITY', 'LOAD', 'AVAILABLE', 'SERVERS', 'REPORT AGE'], s.clusters.map((c) => [c.name, c.state, c.vips.join(','), n1(c.capacity), n1(c.load), n1(c.available), `${c.serversUp}/${c.serversTotal}`, c.lastReportAgeSeconds === null ? '-' : `${n1(c.lastReportAgeSeconds)}s`])));
  // A pair (or more) of front nodes per cluster: who reports, in which role, and whose figures are shown.
  const nodes = s.clusters.flatMap((c) => c.nodes.map((n) => [c.name, n.node, n.role, n.node === c.source ? 'yes' : '', `${n1(n.ageSeconds)}s`, n.fresh ? 'yes' : 'no', String(n.reports)]));
  if (nodes.length > 0) out.push('', table(['CLUSTER', 'FRONT NODE', 'ROLE', 'FIGURES', 'AGE', 'FRESH', 'REPORTS'], nodes));
  out.push('', `steering: ${s.steering.decisions} decisions; by reason ${kv(s.steering.reasons)}`);
  out.push(s.steering.recent.length > 0 ? table(['CLIENT', 'NAME', 'ANSWER', 'CLUSTERS', 'REASON', 'AGE'], s.steering.recent.map((d) => [d.client, d.name, d.answer.join(','), d.clusters.join(',') || '-', d.reason, `${n1(d.ageSeconds)}s`])) : '  (no steered answers yet)');
  const names = s.clusters.map((c) => c.name);
  out.push('', `RTTs (ms) of the latest measured clients (${s.rtt.prefixes} prefixes); probes: pending ${s.probes.pending}, requested ${s.probes.requested}, sent ${s.probes.sent}, dropped ${s.probes.dropped}`);
  out.push(s.rtt.recent.length > 0 ? table(['CLIENT', ...names.map((x) => x.toUpperCase())], s.rtt.recent.map((r) => [r.client, ...names.map((x) => String(r.rttMs[x] ?? '-'))])) : '  (none yet)');
  if (s.mapping !== undefined) {
    const m = s.mapping;
    const l = m.last;
    out.push('', `mapping: ${m.prefixes} prefixes assigned (${m.demandPrefixes} with demand${m.leftOut > 0 ? `, ${m.leftOut} left out by maxPrefixes` : ''}, scaled to a load of ${n1(m.loadEstimate)}); ${m.recomputes} recomputes, ${m.movedTotal} moves in all`);
    out.push(l === null ? '  (not recomputed yet)' : `  last recompute at ${l.at} (${n1(l.ageSeconds)}s ago): ${l.eligible} prefixes in ${l.units} units, moved ${l.moved}, unserved ${n1(l.unserved)}, mean RTT ${n1(l.meanRttMs)} ms, solve ${l.solveMs.toFixed(2)} ms (recompute ${l.totalMs.toFixed(2)} ms)`);
    if (m.prefixes > 0) {
      // Per cluster: what the assignment put there against the capacity the solve had (headroom × capacity less other load).
      out.push(table(['CLUSTER', 'PREFIXES', 'DEMAND', 'CAPACITY'], m.clusters.map((c) => [c.name, String(c.prefixes), n1(c.demand), n1(c.capacity)])));
      out.push(table(['PREFIX', 'CLUSTER', 'DEMAND', 'RTT (ms)', 'TTL', 'SINCE'], m.top.map((p) => [p.prefix, p.cluster, n1(p.demand), n1(p.rttMs), String(p.ttl), `${n1(p.sinceSeconds)}s`])));
      if (m.top.length < m.prefixes) out.push(`  (the ${m.top.length} prefixes with the most demand of ${m.prefixes})`);
    }
  }
  out.push('', `high-rate clients: ${s.highRate.tracked}`);
  if (s.highRate.clients.length > 0) out.push(table(['CLIENT', 'RATE', 'REPORTED BY', 'AGE'], s.highRate.clients.map((h) => [h.prefix, h.rate.toFixed(1), h.cluster, `${n1(h.ageSeconds)}s`])));
  if (s.control) {
    out.push('', s.control.peers.length > 0 ? table(['PEER', 'LAST MESSAGE', 'MESSAGES', 'AGE'], s.control.peers.map((p) => [p.name, p.lastType, String(p.messages), `${n1(p.ageSeconds)}s`])) : 'peers: none yet');
    out.push(`control rejected: ${kv(s.control.counters.rejected)}`);
  }
  return out.join('\n');
}
