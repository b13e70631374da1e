/**
 * The dashboard's view of the site, built from the latest status of every
 * source (front nodes and DNS servers) and a short history of their
 * counters.
 *
 * Rates (connections/s, queries/s) are counter deltas over the samples of
 * the last RATE_WINDOW_MS: (newest - oldest) / elapsed. A counter that went
 * down means the daemon restarted: the history before it is dropped and the
 * rate is unknown (null) until a second sample arrives. A source that fails
 * keeps its history (a short outage does not reset rates) but is shown down.
 *
 * Statuses come from other processes and are read defensively: a missing or
 * mistyped field becomes null/empty, never an exception. They are read by
 * the daemons' own status types (FrontStatus, DnsStatus) through
 * untrusted.ts, so a changed status field fails the type check here too.
 */
import type { DnsMappingStatus, DnsStatus } from '../dns/status.ts';
import type { FrontStatus } from '../front/status.ts';
import { arr, num, obj, record, str, strs, untrusted, type Untrusted } from './untrusted.ts';

/** Rates are computed over the samples of this window. */
export const RATE_WINDOW_MS = 5000;
/** Samples kept per source (bounds memory whatever the poll interval). */
export const HISTORY_MAX = 64;
/** Entries of the merged top-clients list and of each DNS list. */
export const TOP_MAX = 10;
export const CHOICES_MAX = 50;
/** Prefixes of each DNS server's mapping list (the server sends its top 20). */
export const MAPPING_TOP_MAX = 20;

export type SourceKind = 'front' | 'dns' | 'unknown';

export interface SourceView {
  name: string;
  address: string;
  kind: SourceKind;
  up: boolean;
  error: string | null;
  lastOkAgeSeconds: number | null;
  polls: number;
  failures: number;
}

/** The state a server is shown in (the page's badge, the charts' colour). */
export type ServerState = 'up' | 'draining' | 'disabled' | 'maint' | 'down';

/** The health states the front node reports (src/front/health/server-health.ts). */
export type HealthStateSeen = 'up' | 'down' | 'drain' | 'maint';
const HEALTH_STATES_SEEN: readonly HealthStateSeen[] = ['up', 'down', 'drain', 'maint'];

/** A server's health as its front node reports it, when it does (newer front nodes). */
export interface ServerHealthView {
  /** null: a state this dashboard does not know (a newer front node); the server's state then falls back. */
  state: HealthStateSeen | null;
  reason: string | null;
  /** As the front node sent it (its own clock). */
  since: number | null;
  /** Health transitions the front node counted for this server since it started. */
  transitions: number | null;
}

export interface ServerView {
  service: string;
  name: string;
  state: ServerState;
  active: number | null;
  decided: number | null;
  connectionsPerSecond: number | null;
  /** Connections (configured) or connections/s (estimated from agent reports). */
  capacity: number | null;
  capacityUnit: 'connections' | 'per-second';
  /** 0..1 (may exceed 1 when over capacity): the agent's utilization, else active/capacity. */
  utilization: number | null;
  /** null: the front node reports no health for its servers. */
  health: ServerHealthView | null;
}

/** One front node of a cluster (two in a pair): its role and, in a pair, its peer and last failover. */
export interface FrontNodeView {
  source: string;
  /** Its node name (the cluster's for a single front node; null: an older front node). */
  node: string | null;
  up: boolean;
  /** single, master, backup, fault; null: an older front node or one not answering. */
  role: string | null;
  peer: string | null;
  lastFailover: { at: string; from: string; to: string; adopted: number } | null;
}

export interface ClusterView {
  name: string;
  /** Every front node source of this cluster, the one shown first (the master of a pair, when it answers). */
  frontNodes: FrontNodeView[];
  /** The front node's source, null when only DNS knows the cluster. */
  source: string | null;
  frontUp: boolean;
  /** The DNS server's opinion of the cluster (up, down, ...), null when no DNS source knows it. */
  dnsState: string | null;
  vips: string[];
  capacity: number | null;
  load: number | null;
  available: number | null;
  serversUp: number | null;
  serversTotal: number | null;
  decided: number | null;
  connectionsPerSecond: number | null;
  active: number | null;
  overflowed: number | null;
  servers: ServerView[];
}

export interface ClientRate {
  client: string;
  rate: number;
  cluster: string;
}

export interface DnsChoice {
  client: string;
  name: string;
  answer: string[];
  clusters: string[];
  reason: string;
  ageSeconds: number | null;
}

/** A DNS server's `mapping` assignment (policy mapping): its size, last recompute, per-cluster totals and top prefixes. */
export interface MappingView {
  prefixes: number | null;
  demandPrefixes: number | null;
  recomputes: number | null;
  movedTotal: number | null;
  /** null before the first recompute. */
  last: { at: string | null; ageSeconds: number | null; eligible: number | null; moved: number | null; unserved: number | null; meanRttMs: number | null; totalMs: number | null } | null;
  clusters: { name: string; prefixes: number | null; demand: number | null; capacity: number | null }[];
  top: { prefix: string; cluster: string; demand: number | null; rttMs: number | null; ttl: number | null; sinceSeconds: number | null }[];
}

export interface DnsView {
  source: string;
  name: string;
  up: boolean;
  queries: number | null;
  queriesPerSecond: number | null;
  steered: number | null;
  steeredPerSecond: number | null;
  decisions: number | null;
  reasons: Record<string, number>;
  choices: DnsChoice[];
  highRate: ClientRate[];
  /** null: the server sends no mapping status (an older server). */
  mapping: MappingView | null;
}

export interface DashboardState {
  generatedAt: string;
  site: { decided: number | null; connectionsPerSecond: number | null; clustersUp: number; clusters: number };
  sources: SourceView[];
  clusters: ClusterView[];
  topClients: ClientRate[];
  dns: DnsView[];
}

interface Sample {
  at: number;
  counters: Map<string, number>;
}

class SourceRecord {
  readonly name: string;
  readonly address: string;
  status: Readonly<Record<string, unknown>> | undefined;
  up = false;
  error: string | null = 'not polled yet';
  lastOkAt: number | undefined;
  polls = 0;
  failures = 0;
  history: Sample[] = [];

  constructor(name: string, address: string) {
    this.name = name;
    this.address = address;
  }

  /** The counter's rate over the window, or null when unknown. */
  rate(key: string): number | null {
    const newest = this.history[this.history.length - 1];
    const oldest = this.history[0];
    if (!newest || !oldest || newest === oldest) return null;
    const a = oldest.counters.get(key);
    const b = newest.counters.get(key);
    const dt = (newest.at - oldest.at) / 1000;
    if (a === undefined || b === undefined || !(dt > 0)) return null;
    return (b - a) / dt;
  }
}

export class SiteState {
  readonly #sources: SourceRecord[];

  constructor(sources: readonly { name: string; address: string }[]) {
    this.#sources = sources.map((s) => new SourceRecord(s.name, s.address));
  }

  /** Records one poll of a source at monotonic time `now` (ms): its status, or the error. */
  record(name: string, now: number, result: { status: unknown } | { error: string }): void {
    const r = this.#sources.find((s) => s.name === name);
    if (!r) return;
    r.polls++;
    if ('error' in result) {
      r.failures++;
      r.up = false;
      r.error = result.error;
      return;
    }
    const status = record(result.status);
    if (!status) {
      r.failures++;
      r.up = false;
      r.error = 'status is not a JSON object';
      return;
    }
    r.status = status;
    r.up = true;
    r.error = null;
    r.lastOkAt = now;
    const counters = countersOf(status);
    const last = r.history[r.history.length - 1];
    if (last && [...counters].some(([k, v]) => v < (last.counters.get(k) ?? -Infinity))) r.history = []; // restarted
    r.history.push({ at: now, counters });
    while (r.history.length > HISTORY_MAX || (r.history.length > 2 && now - (r.history[0]?.at ?? now) > RATE_WINDOW_MS)) r.history.shift();
  }

  view(now: number): DashboardState {
    const clusters = new Map<string, ClusterView>();
    const topClients: ClientRate[] = [];
    const dns: DnsView[] = [];
    const sources: SourceView[] = this.#sources.map((r) => ({
      name: r.name,
      address: r.address,
      kind: kindOf(r.status),
      up: r.up,
      error: r.error,
      lastOkAgeSeconds: r.lastOkAt === undefined ? null : round((now - r.lastOkAt) / 1000),
      polls: r.polls,
      failures: r.failures,
    }));
    for (const r of this.#sources) {
      const kind = kindOf(r.status);
      if (kind === 'front' && r.status) {
        const s = untrusted<FrontStatus>(r.status);
        const c = frontCluster(r, s);
        const known = clusters.get(c.name);
        if (!known) clusters.set(c.name, c);
        else if (r.up && c.frontNodes[0]?.role === 'master' && known.frontNodes[0]?.role !== 'master') {
          // A pair: the master's figures are the cluster's (the backup decides no connection).
          c.frontNodes.push(...known.frontNodes);
          c.frontUp = true;
          clusters.set(c.name, c);
        } else {
          known.frontNodes.push(...c.frontNodes);
          known.frontUp ||= c.frontUp;
        }
        if (r.up) for (const t of arr(obj(s.control)?.topClients)) pushRate(topClients, obj(t)?.client, obj(t)?.rate, c.name);
      } else if (kind === 'dns' && r.status) {
        dns.push(dnsView(r, untrusted<DnsStatus>(r.status)));
      }
      // A source that never answered is only in `sources` (down, with its error):
      // its kind, hence its place on the map, is unknown.
    }
    // DNS's view of each cluster: its state, and the clusters no front source covers.
    for (const d of this.#sources) {
      if (kindOf(d.status) !== 'dns' || !d.status) continue;
      for (const x of arr(untrusted<DnsStatus>(d.status).clusters)) {
        const o = obj(x);
        const name = str(o?.name);
        if (!o || name === null) continue;
        let c = clusters.get(name);
        if (!c) {
          c = emptyCluster(name, null);
          c.capacity = num(o.capacity);
          c.load = num(o.load);
          c.available = num(o.available);
          c.serversUp = num(o.serversUp);
          c.serversTotal = num(o.serversTotal);
          clusters.set(name, c);
        }
        if (c.vips.length === 0) c.vips = strs(o.vips);
        c.dnsState ??= d.up ? str(o.state) : null;
      }
    }
    topClients.sort((a, b) => b.rate - a.rate);
    const list = [...clusters.values()];
    const fronts = list.filter((c) => c.frontUp);
    return {
      generatedAt: new Date().toISOString(),
      site: {
        decided: sumOrNull(fronts.map((c) => c.decided)),
        connectionsPerSecond: sumOrNull(fronts.map((c) => c.connectionsPerSecond)),
        clustersUp: fronts.length,
        clusters: list.length,
      },
      sources,
      clusters: list,
      topClients: topClients.slice(0, TOP_MAX),
      dns,
    };
  }
}

/** The fields that tell a DNS server's status (both) and a front node's from the others. */
const DNS_KEYS = ['zones', 'steering'] as const satisfies readonly (keyof DnsStatus)[];
const FRONT_KEY = 'services' satisfies keyof FrontStatus;
/** The DNS counters whose rates the page shows. */
const DNS_RATES = ['queries', 'steered'] as const satisfies readonly (keyof DnsStatus['counters'])[];

function kindOf(s: Readonly<Record<string, unknown>> | undefined): SourceKind {
  if (!s) return 'unknown';
  if (DNS_KEYS.every((k) => k in s)) return 'dns';
  if (FRONT_KEY in s) return 'front';
  return 'unknown';
}

/** The counters whose rates the page shows, by key. */
function countersOf(status: Readonly<Record<string, unknown>>): Map<string, number> {
  const out = new Map<string, number>();
  if (kindOf(status) === 'dns') {
    const counters = obj(untrusted<DnsStatus>(status).counters);
    for (const k of DNS_RATES) {
      const v = num(counters?.[k]);
      if (v !== null) out.set(k, v);
    }
    return out;
  }
  const s = untrusted<FrontStatus>(status);
  const decided = num(obj(s.counters)?.decided);
  if (decided !== null) out.set('decided', decided);
  for (const svc of arr(s.services)) {
    const so = obj(svc);
    const sn = str(so?.name) ?? '';
    for (const b of arr(so?.servers)) {
      const bo = obj(b);
      const d = num(bo?.decided);
      const n = str(bo?.name);
      if (d !== null && n !== null) out.set(serverKey(sn, n), d);
    }
  }
  return out;
}

const serverKey = (service: string, server: string): string => `server\u0000${service}\u0000${server}`;

function emptyCluster(name: string, source: string | null): ClusterView {
  return { name, frontNodes: [], source, frontUp: false, dnsState: null, vips: [], capacity: null, load: null, available: null, serversUp: null, serversTotal: null, decided: null, connectionsPerSecond: null, active: null, overflowed: null, servers: [] };
}

/** One server of the front node's control section, as received. */
type AgentSeen = Untrusted<NonNullable<FrontStatus['control']>['servers'][number]>;

/**
 * A server of a service as received, with the per-server health that front
 * nodes report from issue 20 on (`health: { state, reason, since,
 * transitions }`); older ones send none, and then nothing is shown for it.
 */
type ServerSeen = Untrusted<FrontStatus['services'][number]['servers'][number] & { readonly health?: { readonly state: string; readonly reason: string; readonly since: number; readonly transitions: number } }>;

/** A health reason longer than this is cut (the history keeps the reasons of its transitions). */
export const REASON_MAX = 256;

function healthOf(bo: ServerSeen): ServerHealthView | null {
  const h = obj(bo.health);
  if (!h) return null;
  const state = str(h.state);
  const reason = str(h.reason);
  return {
    state: HEALTH_STATES_SEEN.find((x) => x === state) ?? null,
    reason: reason !== null && reason.length > REASON_MAX ? `${reason.slice(0, REASON_MAX - 1)}\u2026` : reason,
    since: num(h.since),
    transitions: num(h.transitions),
  };
}

function frontCluster(r: SourceRecord, s: Untrusted<FrontStatus>): ClusterView {
  const c = emptyCluster(str(s.cluster) ?? r.name, r.name);
  c.frontUp = r.up;
  const ha = r.up ? obj(s.ha) : undefined;
  const lf = obj(ha?.lastFailover);
  const lfAt = str(lf?.at);
  c.frontNodes.push({
    source: r.name,
    node: str(ha?.node),
    up: r.up,
    role: str(ha?.role),
    peer: str(obj(ha?.peer)?.name),
    lastFailover: lf && lfAt !== null ? { at: lfAt, from: str(lf.from) ?? '', to: str(lf.to) ?? '', adopted: num(lf.adopted) ?? 0 } : null,
  });
  if (!r.up) return c;
  const control = obj(s.control);
  const load = obj(control?.cluster);
  c.capacity = num(load?.capacity);
  c.load = num(load?.load);
  c.available = num(load?.available);
  c.serversUp = num(load?.serversUp);
  c.serversTotal = num(load?.serversTotal);
  const counters = obj(s.counters);
  c.decided = num(counters?.decided);
  c.overflowed = num(counters?.overflowed);
  c.connectionsPerSecond = r.rate('decided');
  c.active = num(obj(s.records)?.active);
  const agents = new Map<string, AgentSeen>();
  for (const e of arr(control?.servers)) {
    const eo = obj(e);
    const n = str(eo?.name);
    if (eo && n !== null) agents.set(n, eo);
  }
  for (const svc of arr(s.services)) {
    const so = obj(svc);
    const service = str(so?.name) ?? '';
    for (const b of arr<ServerSeen | null>(so?.servers)) {
      const bo = obj(b);
      const name = str(bo?.name);
      if (!bo || name === null) continue;
      const health = healthOf(bo);
      const agent = agents.get(name);
      const active = num(bo.active);
      const capacity = num(bo.capacity);
      const estimated = bo.estimated === true;
      let utilization = num(agent?.utilization);
      if (utilization === null && !estimated && active !== null && capacity !== null && capacity > 0) utilization = active / capacity;
      c.servers.push({
        service,
        name,
        state: serverState(str(bo.state), agent?.down === true, health?.state ?? null),
        active,
        decided: num(bo.decided),
        connectionsPerSecond: r.rate(serverKey(service, name)),
        capacity,
        capacityUnit: estimated ? 'per-second' : 'connections',
        utilization,
        health,
      });
    }
  }
  return c;
}

/**
 * The state shown. The front node's health, when it reports one, decides
 * whether the server is down or in maintenance: it already combines the
 * front's own check, the agent's report and the agent's silence. Without
 * it (older front nodes), the server is down when the front node says so
 * (agent silent) or its control section marks it down. The configured or
 * admin state (disabled, drain) applies to a server that is not down.
 */
export function serverState(state: string | null, agentDown: boolean, health: HealthStateSeen | null): ServerState {
  if (health === 'down') return 'down';
  if (health === 'maint') return 'maint';
  if (health === null && (state === 'down' || agentDown)) return 'down';
  if (state === 'disabled') return 'disabled';
  if (state === 'drain' || health === 'drain') return 'draining';
  return 'up';
}

function dnsView(r: SourceRecord, s: Untrusted<DnsStatus>): DnsView {
  const steering = obj(s.steering);
  const counters = obj(s.counters);
  const reasons: Record<string, number> = {};
  for (const [k, v] of Object.entries(obj(steering?.reasons) ?? {})) {
    const n = num(v);
    if (n !== null) reasons[k] = n;
  }
  const choices: DnsChoice[] = [];
  for (const x of arr(steering?.recent).slice(0, CHOICES_MAX)) {
    const o = obj(x);
    const client = str(o?.client);
    if (!o || client === null) continue;
    choices.push({ client, name: str(o.name) ?? '', answer: strs(o.answer), clusters: strs(o.clusters), reason: str(o.reason) ?? '', ageSeconds: num(o.ageSeconds) });
  }
  const highRate: ClientRate[] = [];
  for (const x of arr(obj(s.highRate)?.clients)) pushRate(highRate, obj(x)?.prefix, obj(x)?.rate, str(obj(x)?.cluster) ?? '');
  highRate.sort((a, b) => b.rate - a.rate);
  return {
    source: r.name,
    name: str(s.name) ?? r.name,
    up: r.up,
    queries: num(counters?.queries),
    queriesPerSecond: r.up ? r.rate('queries') : null,
    steered: num(counters?.steered),
    steeredPerSecond: r.up ? r.rate('steered') : null,
    decisions: num(steering?.decisions),
    reasons,
    choices,
    highRate: highRate.slice(0, TOP_MAX),
    mapping: mappingView(obj(s.mapping)),
  };
}

function mappingView(m: Untrusted<DnsMappingStatus> | undefined): MappingView | null {
  if (!m) return null;
  const l = obj(m.last);
  const clusters: MappingView['clusters'] = [];
  for (const x of arr(m.clusters)) {
    const o = obj(x);
    const name = str(o?.name);
    if (o && name !== null) clusters.push({ name, prefixes: num(o.prefixes), demand: num(o.demand), capacity: num(o.capacity) });
  }
  const top: MappingView['top'] = [];
  for (const x of arr(m.top).slice(0, MAPPING_TOP_MAX)) {
    const o = obj(x);
    const prefix = str(o?.prefix);
    if (o && prefix !== null) top.push({ prefix, cluster: str(o.cluster) ?? '', demand: num(o.demand), rttMs: num(o.rttMs), ttl: num(o.ttl), sinceSeconds: num(o.sinceSeconds) });
  }
  return {
    prefixes: num(m.prefixes),
    demandPrefixes: num(m.demandPrefixes),
    recomputes: num(m.recomputes),
    movedTotal: num(m.movedTotal),
    last: l ? { at: str(l.at), ageSeconds: num(l.ageSeconds), eligible: num(l.eligible), moved: num(l.moved), unserved: num(l.unserved), meanRttMs: num(l.meanRttMs), totalMs: num(l.totalMs) } : null,
    clusters,
    top,
  };
}

function pushRate(out: ClientRate[], clientField: unknown, rateField: unknown, cluster: string): void {
  const client = str(clientField);
  const rate = num(rateField);
  if (client !== null && rate !== null) out.push({ client, rate, cluster });
}

function sumOrNull(xs: readonly (number | null)[]): number | null {
  const known = xs.filter((x): x is number => x !== null);
  return known.length === 0 ? null : known.reduce((a, b) => a + b, 0);
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
