/**
 * `sluice status`: a running front node's state as tables (like
 * `ipvsadm -Ln`), or the raw JSON with --json. Reads the admin socket.
 */
import { parseArgs } from 'node:util';
import { adminRequest } from './admin-client.ts';
import type { Command } from './command.ts';
import { renderDnsStatus, type DnsStatus } from './dns-status.ts';
import { isMasterStatus, renderMasterStatus } from './master-status.ts';

const USAGE = 'usage: sluice status [--dns | --master] [--socket PATH] [--json]\n  default socket: /run/sluice/front.sock, with --dns /run/sluice/dns.sock, with --master /run/sluice/master.sock';

interface FrontStatus {
  counters?: Record<string, number>;
  records?: Record<string, number>;
  services?: {
    name: string;
    overflowed: number;
    servers: { name: string; state: string; active: number; decided: number; capacity: number | null; estimated?: boolean; rate?: number }[];
    overflow: { cluster: string; decided: number; freeCapacity?: number }[];
  }[];
  control?: {
    servers: { name: string; capacity: number; utilization: number; reports: number; lastReportAgeSeconds: number | null; down: boolean }[];
    cluster: { capacity: number; load: number; available: number; serversUp: number; serversTotal: number };
    topClients: { client: string; rate: number }[];
    clients: { tracked: number; dropped: number };
    peerClusters: { cluster: string; available: number; capacity: number; ageSeconds: number; fresh: boolean }[];
    peers: { name: string; lastType: string; messages: number; ageSeconds: number }[];
    counters: { received: Record<string, number>; rejected: Record<string, number>; sendDropped: number; handlerErrors: number };
    zap: Record<string, { accepted: number; refused: number }>;
  };
}

/** Left-aligned columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string => r.map((c, i) => c.padEnd(w[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

const num = (x: number | null | undefined, digits = 1): string => (x === null || x === undefined ? '-' : Number.isFinite(x) ? x.toFixed(digits) : 'inf');
const nonZero = (r: Record<string, number>): string =>
  Object.entries(r)
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ') || '-';

export function renderFrontStatus(s: FrontStatus): string {
  const out: string[] = [];
  const c = s.counters ?? {};
  out.push(`connections: decided ${c['decided'] ?? 0}, active records ${s.records?.['active'] ?? 0}, recycled ${s.records?.['recycled'] ?? 0}, dropped without record ${c['noRecord'] ?? 0}, overflowed ${c['overflowed'] ?? 0}`);
  const est = new Map((s.control?.servers ?? []).map((x) => [x.name, x]));
  for (const svc of s.services ?? []) {
    out.push('', `service ${svc.name}`);
    out.push(
      table(
        ['SERVER', 'STATE', 'CAPACITY', 'LOAD', 'UTIL', 'ACTIVE', 'DECIDED', 'REPORT AGE'],
        svc.servers.map((b) => {
          const e = est.get(b.name);
          const estimated = b.estimated === true;
          return [
            b.name,
            b.state,
            estimated ? `${num(b.capacity)}/s` : num(b.capacity, 0),
            estimated ? `${num(b.rate)}/s` : String(b.active),
            e ? num(e.utilization, 2) : '-',
            String(b.active),
            String(b.decided),
            e?.lastReportAgeSeconds !== undefined && e.lastReportAgeSeconds !== null ? `${num(e.lastReportAgeSeconds)}s` : '-',
          ];
        }),
      ),
    );
    if (svc.overflow.length > 0) {
      out.push(table(['OVERFLOW TO', 'FREE', 'DECIDED'], svc.overflow.map((o) => [o.cluster, num(o.freeCapacity), String(o.decided)])));
    }
  }
  const k = s.control;
  if (k) {
    out.push('', `cluster: capacity ${num(k.cluster.capacity)}/s, load ${num(k.cluster.load)}/s, available ${num(k.cluster.available)}/s, servers up ${k.cluster.serversUp}/${k.cluster.serversTotal}`);
    out.push('', `top clients (requests/s, last pass; ${k.clients.tracked} tracked, ${k.clients.dropped} dropped at the bound)`);
    out.push(k.topClients.length > 0 ? table(['CLIENT', 'RATE'], k.topClients.map((t) => [t.client, num(t.rate, 2)])) : '  (none yet)');
    if (k.peerClusters.length > 0) out.push('', table(['CLUSTER', 'AVAILABLE', 'CAPACITY', 'AGE', 'FRESH'], k.peerClusters.map((p) => [p.cluster, num(p.available), num(p.capacity), `${num(p.ageSeconds)}s`, p.fresh ? 'yes' : 'no'])));
    out.push('', k.peers.length > 0 ? table(['PEER', 'LAST MESSAGE', 'MESSAGES', 'AGE'], k.peers.map((p) => [p.name, p.lastType, String(p.messages), `${num(p.ageSeconds)}s`])) : 'peers: none yet');
    out.push('', `control: received ${nonZero(k.counters.received)}; rejected ${nonZero(k.counters.rejected)}; send dropped ${k.counters.sendDropped}; handler errors ${k.counters.handlerErrors}`);
    out.push(`handshakes: ${Object.entries(k.zap).map(([d, z]) => `${d} accepted ${z.accepted} refused ${z.refused}`).join('; ') || '-'}`);
  }
  return out.join('\n');
}

export const statusCommand: Command = {
  name: 'status',
  summary: 'show a running front node (servers, capacity estimates, top clients, peers), with --dns a DNS server (clusters, steering choices, RTTs), with --master a throttling master',
  usage: USAGE,
  async run(argv) {
    let v: { socket?: string; json: boolean; dns: boolean; master: boolean };
    try {
      v = parseArgs({ args: [...argv], options: { socket: { type: 'string' }, json: { type: 'boolean', default: false }, dns: { type: 'boolean', default: false }, master: { type: 'boolean', default: false } } }).values;
    } catch (err) {
      console.error(`sluice status: ${(err as Error).message}\n${USAGE}`);
      return 2;
    }
    try {
      const reply = await adminRequest(v.socket ?? (v.dns ? '/run/sluice/dns.sock' : v.master ? '/run/sluice/master.sock' : '/run/sluice/front.sock'), { cmd: 'status' });
      if (reply.ok !== true) {
        console.error(`sluice status: ${reply.error ?? 'refused'}`);
        return 1;
      }
      // A DNS server's status has zones; a front node's has services.
      const isDns = typeof reply.status === 'object' && reply.status !== null && 'zones' in reply.status;
      console.log(v.json ? JSON.stringify(reply.status, null, 2) : isMasterStatus(reply.status) ? renderMasterStatus(reply.status) : isDns ? renderDnsStatus(reply.status as DnsStatus) : renderFrontStatus(reply.status as FrontStatus));
      return 0;
    } catch (err) {
      console.error(`sluice status: ${(err as Error).message}`);
      return 1;
    }
  },
};
