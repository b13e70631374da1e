/**
 * `sluice status`: a running front node's state as tables (like
 * `ipvsadm -Ln`), or the raw JSON with --json. Reads the admin socket.
 */
import type { AdmissionStatus } from '../front/admission.ts';
import { parseArgs } from 'node:util';
import { adminRequest } from '../admin/client.ts';
import type { AgentHealthStatus, AgentStatus } from '../agent/status.ts';
import type { DnsStatus } from '../dns/status.ts';
import type { FrontHaStatus, FrontServerStatus, FrontServiceStatus, FrontStatus } from '../front/status.ts';
import type { Command } from './command.ts';
import { renderDnsStatus } from './dns-status.ts';
import { isMasterStatus, renderMasterStatus } from './master-status.ts';
import { table } from './table.ts';

const USAGE = 'usage: sluice status [--dns | --agent | --master] [--socket PATH] [--json]\n  default socket: /run/sluice/front.sock, with --dns /run/sluice/dns.sock, with --agent /run/sluice/agent.sock, with --master /run/sluice/master.sock';

/** An agent's status: what it reports, to whom, and what it read. */
export function renderAgentStatus(s: AgentStatus): string {
  const l = s.lastLoad;
  const log = Object.entries(s.accessLog)
    .filter(([k]) => k !== 'path')
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ');
  return [
    `agent ${s.name} -> ${s.front}, up ${s.uptimeSeconds} s, reloads ${s.reloads} (refused ${s.reloadsRefused})`,
    table(
      ['LOAD REPORTS', 'RATE REPORTS', 'SAMPLE ERRORS', 'UTIL', 'CPU', 'CONNECTIONS'],
      [[String(s.reports.load), String(s.reports.requestRate), String(s.reports.sampleErrors), l === undefined ? '-' : `${(l.utilization * 100).toFixed(0)}%`, l === undefined ? '-' : `${(l.cpu * 100).toFixed(0)}%`, l === undefined ? '-' : String(l.connections)]],
    ),
    ...(s.fronts && s.fronts.length > 0 ? [table(['FRONT NODE', 'CONNECTED', 'SENT', 'DROPPED', 'CONNECTS', 'DISCONNECTS'], s.fronts.map((f) => [f.endpoint, f.connected ? 'yes' : 'no', String(f.sent), String(f.dropped), String(f.connects), String(f.disconnects)]))] : []),
    `access log ${s.accessLog.path}: ${log || '-'}`,
    ...(s.health ? [renderAgentHealth(s.health)] : []),
  ].join('\n');
}

/** The server's health as its agent reports it, and its inputs (`sluice agent ctl show`, `sluice status --agent`). */
export function renderAgentHealth(h: AgentHealthStatus): string {
  const o = h.operator;
  const c = h.check;
  return [
    `health ${h.state.toUpperCase()}: ${h.reason} (for ${h.sinceSeconds} s, ${h.transitions} changes; reports sent at once: ${h.reportsAtOnce} on a change, ${h.reportsOnConnect} on connecting)`,
    `operator ${o.verb}${o.reason !== '' ? ` (${o.reason})` : ''}, set by ${o.source}, state file ${o.file}: read ${o.applied}, written ${o.written}, rejected ${o.rejected}${o.lastError !== undefined ? ` (last: ${o.lastError})` : ''}`,
    `check ${c.kind} ${c.state}: ${c.reason} (checks ${c.checks}, failed ${c.failures}, changes ${c.transitions})`,
  ].join('\n');
}

const num = (x: number | null | undefined, digits = 1): string => (x === null || x === undefined ? '-' : Number.isFinite(x) ? x.toFixed(digits) : 'inf');
const nonZero = (r: Record<string, number>): string =>
  Object.entries(r)
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ') || '-';

/** What a ctl override changed, as the file had it ('' when the server is as the file says). */
function overrideText(o: FrontServerStatus['override'] | undefined): string {
  if (!o) return '';
  if (o.kind === 'add') return 'added (not in file)';
  return `file: ${Object.entries(o.file).map(([k, v]) => `${k}=${v === null ? 'none' : String(v)}`).join(' ')}`;
}

/** The front-node pair: role, peer, sync state, last failover (nothing for a single node). */
export function renderHaStatus(h: FrontHaStatus): string[] {
  if (h.role === 'single' && h.peer === null) return [];
  const out: string[] = [];
  const vip = h.holdsUplinkVirtualAddress === null ? '' : h.holdsUplinkVirtualAddress ? ', holds the uplink virtual address' : ', does not hold the uplink virtual address';
  out.push(`ha: node ${h.node} is ${h.role.toUpperCase()} since ${h.since} (${h.reason})${vip}${h.mismatch ? '; MISMATCH: role and address disagree' : ''}`);
  if (h.peer) out.push(`  peer ${h.peer.name}: uplink ${h.peer.uplinkAddress}, LAN ${h.peer.lanAddress}, sync ${h.peer.syncAddress}${h.virtual ? `; virtual ${h.virtual.uplink} (uplink), ${h.virtual.lan} (LAN)` : ''}`);
  const sy = h.sync;
  if (sy.state === 'ok') {
    const f = sy.figures;
    out.push(`  sync ok (${sy.at}${f.device !== null ? `, ${f.device}` : ''}): flows internal ${f.internal}, external ${f.external}; packets sent ${f.packetsSent}, received ${f.packetsReceived}; errors send ${f.sendErrors}, receive ${f.receiveErrors}; lost ${f.lost}, malformed ${f.malformed}`);
  } else if (sy.state === 'unknown') out.push(`  sync UNKNOWN${sy.at !== null ? ` (${sy.at})` : ''}: ${sy.reason}`);
  const lf = h.lastFailover;
  out.push(`  last failover: ${lf ? `${lf.at} ${lf.from} -> ${lf.to}, ${lf.adopted} records adopted from the committed flows${lf.corrected > 0 ? ` (${lf.corrected} corrected)` : ''}` : 'none since start'}; role changes to master ${h.transitions.master}, backup ${h.transitions.backup}, fault ${h.transitions.fault}; mismatches ${h.mismatches}`);
  return out;
}

export function renderFrontStatus(s: FrontStatus): string {
  const out: string[] = [];
  // Older daemons send no ha section.
  if (s.ha) out.push(...renderHaStatus(s.ha));
  const c = s.counters;
  out.push(`connections: decided ${c.decided}, active records ${s.records.active}, recycled ${s.records.recycled}, dropped without record ${c.noRecord}, overflowed ${c.overflowed}`);
  // Older daemons send no adoption counts.
  if (typeof s.records.adopted === 'number' && s.records.adopted + s.records.corrected > 0) out.push(`records adopted from the kernel's flows at start: ${s.records.adopted}${s.records.corrected > 0 ? ` (${s.records.corrected} corrected to the kernel's server)` : ''}`);
  const fe = s.flowEnds;
  if (fe !== undefined) {
    const r = fe.resyncs;
    out.push(fe.events === undefined
      ? `flow ends: conntrack events unavailable, resyncs ${r.periodic} (periodic)`
      : `flow ends: ${fe.events.events} conntrack events, ${fe.freed} records freed, overruns ${fe.events.overruns}, resyncs ${r.overrun} overrun / ${r.legacy} legacy (held back for events ${fe.resyncYields} times), legacy records ${fe.legacyRecords}${fe.legacyRecords > 0 ? ` (a legacy resync every ${String(fe.legacyResyncPeriods)} periods)` : ''}`);
  }
  // Older daemons send no rules section.
  const r = s.rules as FrontStatus['rules'] | undefined;
  const o = s.overrides as FrontStatus['overrides'] | undefined;
  if (o) {
    out.push(`ctl overrides: ${o.count} in ${o.stateFile}${o.count > 0 ? ' (servers marked *)' : ''}; stale dropped ${o.staleTotal}; state file errors ${o.stateFileErrors}`);
    if (o.error !== null) out.push(`  STATE FILE REFUSED: ${o.error}`);
    for (const st of o.lastStale) out.push(`  stale at the last load: ${st.service}/${st.server} ${st.kind}${st.field ? ` ${st.field}` : ''}: ${st.reason}`);
  }
  // Older daemons send no lost count.
  const q = s.queue;
  if (q && typeof q.lost === 'number') out.push(`queue: received ${q.packets}, verdicts ${q.verdicts}, lost ${q.lost} (never received: the socket buffer was full; accepted unsteered), overruns ${q.overruns}`);
  if (r) out.push(`rules: checked ${r.checks} (${r.unchanged} unchanged, nothing read), reinstalled ${r.repaired}${r.lastRepair ? ` (last ${r.lastRepair})` : ''}, reinstall failures ${r.repairFailures}, check failures ${r.checkFailures}${r.failingRepairs > 0 ? `, FAILING ${r.failingRepairs} in a row` : ''}`);
  const hs = s.health;
  if (hs) {
    const t = hs.transitions;
    out.push(`health: checks ${Object.entries(hs.outcomes).map(([k, v]) => `${k} ${String(v)}`).join(', ')}; in flight ${String(hs.inFlight)}/${String(hs.maxInFlight)} (peak ${String(hs.peakInFlight)}), skipped ${String(hs.skipped)}; transitions to up ${String(t.up)}, down ${String(t.down)}, drain ${String(t.drain)}, maint ${String(t.maint)}`);
    // Older daemons send no flowExpiry.
    const x = (hs as Partial<typeof hs>).flowExpiry;
    if (x) out.push(`flows of servers gone down expired: ${String(x.deleted)} deleted, ${String(x.gone)} already gone, in ${String(x.runs)} expiries${x.failures > 0 ? `, ${String(x.failures)} FAILED (see the log)` : ''}`);
  }
  const est = new Map((s.control?.servers ?? []).map((x) => [x.name, x]));
  for (const svc of s.services as readonly (Partial<FrontServiceStatus> & Pick<FrontServiceStatus, 'name' | 'overflowed' | 'overflow' | 'servers'>)[]) {
    // Older daemons send no endpoint, method or rates: print what there is.
    // An IPv6 address with a port in brackets (RFC 5952 section 6).
    const where = svc.vip !== undefined && svc.protocol !== undefined ? `  ${svc.protocol.toUpperCase()} ${hostPort(svc.vip, svc.port ?? 0)}  method ${svc.method}` : '';
    const cps = svc.cps !== undefined ? `  ${num(svc.cps, 2)} conn/s (last ${String(s.rateWindowSeconds)} s)` : '';
    out.push('', `service ${svc.name}${where}${cps}  overflowed ${svc.overflowed}`);
    out.push(
      table(
        ['SERVER', 'STATE', 'CAPACITY', 'ADDRESS', 'WEIGHT', 'HEALTH', 'ACTIVE', 'CONN/S', 'DECIDED', 'REFUSED', 'UNANSWERED', 'UTIL', 'REPORT AGE', 'OVERRIDE', 'SINCE', 'CHECK', 'AGENT', 'SHARE'],
        svc.servers.map((full) => {
          const b: Partial<FrontServerStatus> & Pick<FrontServerStatus, 'name' | 'state' | 'capacity' | 'estimated' | 'active' | 'decided'> = full;
          const e = est.get(b.name);
          const h = b.health;
          return [
            // A ctl override marks the name (the file's values in OVERRIDE).
            b.override ? `${b.name}*` : b.name,
            b.state,
            b.estimated ? `${num(b.capacity)}/s` : num(b.capacity, 0),
            b.address !== undefined ? hostPort(b.address, b.port ?? 0) : '-',
            b.weight !== undefined ? String(b.weight) : '-',
            b.health?.state ?? '-',
            String(b.active),
            b.cps !== undefined ? num(b.cps, 2) : '-',
            String(b.decided),
            b.refused !== undefined ? String(b.refused) : '-',
            b.unanswered !== undefined ? String(b.unanswered) : '-',
            e ? num(e.utilization, 2) : '-',
            e !== undefined && e.lastReportAgeSeconds !== null ? `${num(e.lastReportAgeSeconds)}s` : '-',
            overrideText(b.override),
            h ? `${num(h.sinceSeconds)}s` : '-',
            h ? (h.checks ? `${h.check} (${h.checks.kind}${h.checks.lastOutcome !== null ? `, last ${h.checks.lastOutcome}` : ''})` : h.check) : '-',
            h ? (h.silent ? 'silent' : h.agent) : '-',
            h ? num(h.share, 2) : '-',
          ];
        }),
      ),
    );
    const removed = svc.removed ?? [];
    if (removed.length > 0) out.push(`removed with ctl (in the file): ${removed.join(', ')}; \`sluice ctl revert ${svc.name} SERVER\` brings one back`);
    // Why each server that is not up is out (the reason names the source and what it said).
    for (const b of svc.servers as readonly Partial<FrontServerStatus>[]) if (b.health && b.health.state !== 'up') out.push(`  ${String(b.name)}: ${b.health.state}: ${b.health.reason}`);
    if (svc.overflow.length > 0) {
      out.push(table(['OVERFLOW TO', 'FREE', 'DECIDED'], svc.overflow.map((o) => [o.cluster, num(o.freeCapacity), String(o.decided)])));
    }
  }
  const sh = s.shaping;
  if (sh) {
    out.push('', `checkpoints: ${sh.heldNow}/${sh.maxHeld} SYNs held; ${sh.retransmits} retransmits of held SYNs dropped; ${sh.poolFull} rejected at the held bound`);
    out.push(
      table(
        ['CHECKPOINT', 'LEVEL', 'KIND', 'LIMIT', 'KEYS', 'TABLE KiB', 'MATCHED', 'PASSED', 'HELD', 'REJECTED', 'STEERED', 'QUEUE', 'OLDEST WAIT'],
        sh.checkpoints.map((c) => [
          c.name,
          c.level,
          c.kind,
          c.limit === null ? '-' : String(c.limit),
          `${c.table.keys}/${c.table.capacity}`,
          num(c.table.memoryBytes / 1024),
          String(c.counts.matched),
          String(c.counts.passed),
          String(c.counts.held),
          String(c.counts.rejected),
          String(c.counts.steered),
          c.queue ? `${c.queue.length}/${c.queue.maxLength}` : '-',
          c.queue ? `${c.queue.oldestWaitMs} ms` : '-',
        ]),
      ),
    );
    for (const c of sh.checkpoints) {
      if (c.top.length === 0) continue;
      out.push('', `top keys of ${c.name}`, table(['KEY', 'RATE/S', 'CONCURRENT', 'TOTAL', 'WAITING'], c.top.map((t) => [t.key, num(t.ratePerSecond, 2), String(t.concurrent), String(t.total), String(t.queued)])));
    }
  }
  const th = s.throttle;
  if (th) {
    out.push('', `gatekeeper ${th.name}: active master ${th.activeMaster ?? 'none'}; accounting queued ${th.counters.accountingQueued}, dropped ${th.counters.accountingDropped}; control received ${th.counters.controlReceived}; ${th.counters.failovers} failovers, ${th.counters.resyncSessions} resync sessions`);
    out.push(table(['MASTER', 'CONNECTED', 'SENT', 'DROPPED'], th.masters.map((m) => [m.accounting, m.connected ? 'yes' : 'no', String(m.sent), String(m.dropped)])));
    out.push(table(['DOMAIN', 'DELAYS', 'RESYNCED', 'ACCEPTED', 'DELAYED', 'REJECTED', 'REJECTED UNSENT'], th.domains.map((d) => [d.name, String(d.delays), d.resyncDone ? 'yes' : 'no', String(d.accepted), String(d.delayed), String(d.rejected), String(d.rejectedNotSent)])));
  }
  if (s.admission) out.push('', renderAdmission(s.admission));
  const k = s.control;
  if (k) {
    out.push('', `control-plane node ${k.node}, role ${k.role} (reported at once on ${k.roleChanges} role changes)`);
    out.push('', `cluster: capacity ${num(k.cluster.capacity)}/s, load ${num(k.cluster.load)}/s, available ${num(k.cluster.available)}/s, servers up ${k.cluster.serversUp}/${k.cluster.serversTotal}`);
    out.push('', `top clients (requests/s, last pass; ${k.clients.tracked} tracked, ${k.clients.dropped} dropped at the bound)`);
    out.push(k.topClients.length > 0 ? table(['CLIENT', 'RATE'], k.topClients.map((t) => [t.client, num(t.rate, 2)])) : '  (none yet)');
    // A pair's figures come from one node (its master while fresh): FIGURES FROM names it, NODES lists node:role:age.
    if (k.peerClusters.length > 0) out.push('', table(['CLUSTER', 'AVAILABLE', 'CAPACITY', 'AGE', 'FRESH', 'FIGURES FROM', 'NODES'], k.peerClusters.map((p) => [p.cluster, num(p.available), num(p.capacity), `${num(p.ageSeconds)}s`, p.fresh ? 'yes' : 'no', p.source, p.nodes.map((n) => `${n.node}:${n.role}:${num(n.ageSeconds)}s`).join(' ')])));
    out.push('', k.peers.length > 0 ? table(['PEER', 'LAST MESSAGE', 'MESSAGES', 'AGE'], k.peers.map((p) => [p.name, p.lastType, String(p.messages), `${num(p.ageSeconds)}s`])) : 'peers: none yet');
    out.push('', `control: received ${nonZero(k.counters.received)}; rejected ${nonZero(k.counters.rejected)}; send dropped ${k.counters.sendDropped}; handler errors ${k.counters.handlerErrors}`);
    out.push(`handshakes: ${Object.entries(k.zap).map(([d, z]) => `${d} accepted ${z.accepted} refused ${z.refused}`).join('; ') || '-'}`);
    out.push('', renderProbe(k.probe));
  }
  return out.join('\n');
}

/** RTT probing: on or off, then per method what was sent and answered, and the latest targets' methods. */
export function renderProbe(p: NonNullable<FrontStatus['control']>['probe']): string {
  if (!p.enabled) return `RTT probes: off (${p.off ?? 'unknown'})`;
  const out = [`RTT probes: ${p.echoesSent ?? 0} sent, ${p.replies ?? 0} answered, ${p.timeouts ?? 0} lost; ${p.fellBack ?? 0} answered by a later method, ${p.cheaperRetries ?? 0} cheaper retries${p.methodsOff ? `; off: ${p.methodsOff.join('; ')}` : ''}`];
  if (p.methods && p.methods.length > 0) {
    out.push(table(['METHOD', 'SENT', 'ANSWERED', 'TIMEOUTS', 'TARGETS', 'SYN-ACK', 'RST', 'RST SENT'], p.methods.map((m) => [m.method, String(m.sent), String(m.answered), String(m.timeouts), String(m.targets), m.tcp ? String(m.tcp.synAcks) : '-', m.tcp ? String(m.tcp.rsts) : '-', m.tcp ? String(m.tcp.resetsSent) : '-'])));
  }
  if (p.recentTargets && p.recentTargets.length > 0) out.push(table(['TARGET', 'METHOD', 'AGE'], p.recentTargets.slice(0, 10).map((t) => [t.target, t.method, `${num(t.ageSeconds)}s`])));
  return out.join('\n');
}

/** The admission section: buckets per service and operation, then the member's and the coordinator's view. */
export function renderAdmission(a: AdmissionStatus): string {
  const out: string[] = ['admission'];
  const rows: string[][] = [];
  for (const svc of a.services) {
    rows.push([svc.service, String(svc.weight), num(svc.localLimit), num(svc.clusterLimit), num(svc.allocation), '', '', String(svc.rejectedLocal), String(svc.rejectedCluster)]);
    for (const o of svc.operations) rows.push([`  ${o.operation}`, `${o.weight} (cost ${o.cost})`, num(o.localLimit), num(o.clusterLimit), num(o.allocation), String(o.admitted), String(o.tokens), String(o.rejectedLocal), String(o.rejectedCluster)]);
  }
  out.push(table(['SERVICE / OPERATION', 'WEIGHT', 'LOCAL LIMIT', 'CLUSTER LIMIT', 'ALLOCATION', 'ADMITTED', 'TOKENS', 'REJ LOCAL', 'REJ CLUSTER'], rows));
  const c = a.cluster;
  if (c === null) return out.join('\n');
  const role = c.isCoordinator ? 'this member coordinates' : `coordinator ${c.coordinator ?? 'unknown'}`;
  out.push('', `member ${c.member}: ${role} (election ${c.election.kind}, epoch ${c.epoch})${c.isolated ? '; ISOLATED: holding at most its share' : ''}${c.refused ? `; REFUSED: ${c.refused}` : ''}`);
  out.push(table(['OPERATION', 'ALLOCATION', 'SHARE', 'USED/S', 'DEMAND/S', 'SILENCED', 'IN FLIGHT'], c.operations.map((o) => [o.op, num(o.allocation), num(o.share), num(o.used), num(o.demand), o.silenced ? 'yes' : 'no', o.inflight ?? '-'])));
  const age = c.membersAgeMs === null ? 'none yet' : c.isCoordinator ? 'now' : `${num(c.membersAgeMs / 1000)}s ago`;
  out.push('', `members as the coordinator counts them (${age})`);
  const mrows: string[][] = [];
  for (const m of c.members) {
    for (const o of m.ops) mrows.push([m.member, m.heard ? 'yes' : 'no', m.ageMs === null ? '-' : `${num(m.ageMs / 1000)}s`, m.isolated ? 'yes' : 'no', o.op, num(o.allocation), num(o.rate), o.silenced ? 'yes' : 'no']);
  }
  out.push(mrows.length > 0 ? table(['MEMBER', 'HEARD', 'AGE', 'ISOLATED', 'OPERATION', 'ALLOCATION', 'DEMAND/S', 'SILENCED'], mrows) : '  (none yet)');
  const mc = c.counts.member;
  out.push('', `messages: reserves ${mc.reserves} (granted ${mc.granted}, denied ${mc.denied}, timed out ${mc.timeouts}), releases ${mc.releases}, views ${mc.views}, resets ${mc.resets}, isolations ${mc.isolations}`);
  if (c.counts.coordinator) out.push(`coordinator: ${nonZero(c.counts.coordinator as unknown as Record<string, number>)}`);
  return out.join('\n');
}

export const statusCommand: Command = {
  name: 'status',
  summary: 'show a running front node (servers, capacity estimates, checkpoints, top clients, peers), with --dns a DNS server (clusters, steering choices, RTTs), with --agent a server agent, with --master a throttling master',
  usage: USAGE,
  async run(argv) {
    let v: { socket?: string; json: boolean; dns: boolean; agent: boolean; master: boolean };
    try {
      v = parseArgs({ args: [...argv], options: { socket: { type: 'string' }, json: { type: 'boolean', default: false }, dns: { type: 'boolean', default: false }, agent: { type: 'boolean', default: false }, master: { type: 'boolean', default: false } } }).values;
    } catch (err) {
      console.error(`sluice status: ${(err as Error).message}\n${USAGE}`);
      return 2;
    }
    if ([v.dns, v.agent, v.master].filter(Boolean).length > 1) {
      console.error(`sluice status: --dns, --agent and --master exclude each other\n${USAGE}`);
      return 2;
    }
    try {
      const reply = await adminRequest(v.socket ?? (v.dns ? '/run/sluice/dns.sock' : v.agent ? '/run/sluice/agent.sock' : v.master ? '/run/sluice/master.sock' : '/run/sluice/front.sock'), { cmd: 'status' });
      if (reply.ok !== true) {
        console.error(`sluice status: ${reply.error ?? 'refused'}`);
        return 1;
      }
      // Whichever socket was named: a DNS server's status has zones, an
      // agent's says agent, a master's has domains, a front node's has services.
      const st = typeof reply.status === 'object' && reply.status !== null ? reply.status : {};
      const text = isMasterStatus(st) ? renderMasterStatus(st) : 'zones' in st ? renderDnsStatus(st as DnsStatus) : 'agent' in st ? renderAgentStatus(st as AgentStatus) : renderFrontStatus(st as FrontStatus);
      console.log(v.json ? JSON.stringify(reply.status, null, 2) : text);
      return 0;
    } catch (err) {
      console.error(`sluice status: ${(err as Error).message}`);
      return 1;
    }
  },
};

/** `address:port`, the address in brackets when it is IPv6 (RFC 5952 section 6). */
function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${String(port)}` : `${address}:${String(port)}`;
}
