/**
 * `sluice dns`: wires the configuration, the zone data, the steering state,
 * the sockets and the control plane together, and owns the slow paths.
 *
 * Lifecycle:
 *   start   load and validate the config and every zone file (refused ->
 *           exit 1, nothing bound); bind UDP+TCP on every listen address;
 *           start the control plane; open the admin socket
 *   SIGHUP  reload: config and zone files are read again; a refused config
 *           or zone is logged with its reason and the running data stays;
 *           accepted zones and steered names apply at once (encoded answers
 *           dropped). Changes to listen, clusters, control, rrl, tcp or
 *           udpPayload need a restart: they are named in the log and not
 *           applied (http too). `transfer` applies at once; a zone whose
 *           SOA serial changed is NOTIFYed to `transfer.notify`.
 *   SIGTERM close sockets and the ops HTTP server, exit 0
 *
 * With `workers` > 1 (workers.ts) this process is the primary: it binds no
 * DNS socket but forks the workers (each a DnsDaemon in serveAsWorker()),
 * forwards control-plane state to them, passes SIGHUP on (each worker
 * re-reads config and zones itself, after the primary accepted them) and
 * shows their summed counters in status and metrics (at most STATS_MS old).
 *
 * Under systemd (Type=notify, src/systemd/): READY=1 once UDP and TCP
 * listen on every address and the control plane and admin socket are up;
 * RELOADING=1 then READY=1 around a reload; STOPPING=1 at stop; WATCHDOG=1
 * while the event loop turns (every socket is served by it).
 */
import { availableParallelism, hostname } from 'node:os';
import { ConfigError, keepRestartKeys, loadConfig, type ConfigProblem } from '../config/load.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { newRegistry } from '../metrics/collect.ts';
import { Answerer } from './answerer.ts';
import { ClusterTable } from './cluster_state.ts';
import { dnsConfigSchema, type DnsConfig } from './config.ts';
import { DnsControl } from './control.ts';
import { HighRateTable } from './high_rate.ts';
import { MappingService } from './mapping/service.ts';
import { summarizeMapping } from './mapping/summary.ts';
import { encodeDemand, mergeDemand } from './mapping/share.ts';
import { registerDnsMetrics } from './metrics.ts';
import { ProbeScheduler } from './probe_scheduler.ts';
import { ResponseRateLimiter, RRL_KIND_NAMES } from './rrl.ts';
import { ZoneTransfers } from './transfer/axfr.ts';
import { Notifier } from './transfer/notify.ts';
import { SourcePrefixes } from '../packet/source_prefixes.ts';
import { RttTable } from './rtt_table.ts';
import { DnsServer, parseListen } from './server.ts';
import { Steering, type SteeringParts } from './steer.ts';
import { MAPPING_STATUS_TOP, type DnsStatus } from './status.ts';
import { StickyTable } from './sticky.ts';
import { AdminSocket, statusAndReload } from '../admin/socket.ts';
import { checkZoneFile } from './zone/parse.ts';
import { Identity } from './identity.ts';
import { packageVersion } from '../util/version.ts';
import { Zone, ZoneSet } from './zone/zone.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { Watchdog } from '../systemd/watchdog.ts';
import { WorkerPool, type FromWorker, type StateType, type ToWorker, type WorkerStats } from './workers.ts';
import type { Body } from '../control/messages.ts';

/** The CH identity answers of a config; counts carry over from `previous` (a reload). */
function identityOf(cfg: Readonly<DnsConfig>, previous?: Identity): Identity {
  const id = new Identity(cfg.identity, { host: hostname(), version: `sluice ${packageVersion()}` });
  if (previous !== undefined) id.inherit(previous);
  return id;
}

/** Reads every zone file of the config; throws ConfigError naming the key and the zone's own error. */
export interface LoadedZones {
  readonly set: ZoneSet;
  readonly list: readonly Zone[];
}

export function loadZones(cfg: Readonly<DnsConfig>, file: string): LoadedZones {
  const zones: Zone[] = [];
  const problems: ConfigProblem[] = [];
  cfg.zones.forEach((z, i) => {
    // Every error of the file (and its $INCLUDEs) is named, one problem each.
    const report = checkZoneFile(z.file, z.origin !== undefined ? { origin: z.origin } : {});
    for (const err of report.errors) problems.push({ path: `zones[${i}].file`, message: err.message });
    if (report.zone !== undefined) zones.push(new Zone(report.zone));
  });
  let set: ZoneSet | undefined;
  if (problems.length === 0) {
    try {
      set = new ZoneSet(zones);
    } catch (err) {
      problems.push({ path: 'zones', message: (err as Error).message });
    }
  }
  if (set !== undefined) {
    cfg.steering.names.forEach((n, i) => {
      if (set.find(n.name) === undefined) problems.push({ path: `steering.names[${i}].name`, message: `"${n.name}" is in none of the zones served (${zones.map((z) => z.origin).join(', ')}); steer a name inside one of them` });
    });
  }
  if (problems.length > 0 || set === undefined) throw new ConfigError(file, problems);
  return { set, list: zones };
}

/** How often a worker reports its counters to the primary (status and metrics lag by this much at most). */
const STATS_MS = 50;

/** How long the primary waits for the workers' mapping demand before it recomputes without the late ones (they count in the next). */
const DEMAND_WAIT_MS = 250;

const RESTART_KEYS = ['workers', 'listen', 'clusters', 'control', 'rrl', 'tcp', 'udpPayload', 'udpIo', 'adminSocket', 'name', 'http'] as const;

export class DnsDaemon {
  readonly log: Logger = componentLogger('dns');
  readonly configFile: string;
  config: Readonly<DnsConfig>;
  readonly clusters: ClusterTable;
  readonly rtt: RttTable;
  readonly highRate: HighRateTable;
  readonly sticky: StickyTable;
  readonly probes: ProbeScheduler;
  /** Policy `mapping`'s assignment; recomputed on a timer while some steered name uses it. */
  readonly mapping: MappingService;
  #mappingTimer: NodeJS.Timeout | undefined;
  readonly answerer: Answerer;
  /** Absent when rrl.enabled is false. */
  readonly rrl: ResponseRateLimiter | undefined;
  readonly server: DnsServer;
  /** Zone transfers (AXFR/IXFR over TCP) and NOTIFY; replaced on reload with the new `transfer` settings. */
  transfers: ZoneTransfers;
  notifier: Notifier;
  #control: DnsControl | undefined;
  #zones: readonly Zone[];
  #admin: AdminSocket | undefined;
  #pool: WorkerPool | undefined;
  /** This process serves as one of a primary's workers (serveAsWorker): the primary sends NOTIFYs. */
  #isWorker = false;
  #ops: OpsServer | undefined;
  reloads = 0;
  reloadsRefused = 0;
  readonly startedAt = Date.now();
  /** sd_notify; a no-op unless started by systemd with Type=notify. */
  readonly systemd: SystemdNotifier;
  readonly watchdog: Watchdog;

  constructor(configFile: string) {
    this.configFile = configFile;
    this.config = loadConfig(dnsConfigSchema, configFile);
    this.systemd = new SystemdNotifier(this.log);
    // The timer running proves the loop that serves every socket turns.
    this.watchdog = new Watchdog(this.systemd, () => ({ alive: true }), this.log);
    const cfg = this.config;
    const zones = loadZones(cfg, configFile);
    this.#zones = zones.list;
    const lengths = { ipv4: cfg.steering.ipv4Prefix, ipv6: cfg.steering.ipv6Prefix };
    const now = performance.now();
    this.clusters = new ClusterTable(cfg.clusters, cfg.steering.reportSeconds, cfg.steering.downAfterIntervals);
    this.rtt = new RttTable(cfg.clusters.length, cfg.steering.maxPrefixes, cfg.steering.rttExpireSeconds, lengths);
    this.highRate = new HighRateTable(cfg.steering.maxPrefixes, cfg.steering.highRateExpireSeconds, lengths);
    this.sticky = new StickyTable(cfg.steering.maxPrefixes, cfg.steering.stickySeconds);
    this.probes = new ProbeScheduler(cfg.probe, now);
    this.mapping = new MappingService(cfg, { clusters: this.clusters, rtt: this.rtt, highRate: this.highRate }, now);
    const r = cfg.rrl;
    // BIND's rule: the NXDOMAIN and error rates default to the responses rate.
    const rrl = r.enabled
      ? {
          limiter: new ResponseRateLimiter({ ...r, nxdomainsPerSecond: r.nxdomainsPerSecond ?? r.responsesPerSecond, errorsPerSecond: r.errorsPerSecond ?? r.responsesPerSecond }),
          lengths: { ipv4: r.ipv4PrefixLength, ipv6: r.ipv6PrefixLength },
          exempt: new SourcePrefixes(r.exempt),
        }
      : undefined;
    this.rrl = rrl?.limiter;
    this.answerer = new Answerer(zones.set, new Steering(cfg, this.#parts()), { rrl, lengths, udpPayload: cfg.udpPayload, clusters: cfg.clusters.length, identity: identityOf(cfg) });
    this.server = new DnsServer(this.answerer, { ...cfg.tcp, udpIo: cfg.udpIo }, this.log.child({ part: 'server' }));
    this.transfers = new ZoneTransfers(cfg);
    this.notifier = new Notifier(cfg.transfer, this.log.child({ part: 'notify' }));
    this.server.transfer = (msg, source) => this.transfers.respond(msg, source, this.answerer.zones, Date.now() / 1000);
  }

  #parts(): SteeringParts {
    return { clusters: this.clusters, rtt: this.rtt, highRate: this.highRate, sticky: this.sticky, probes: this.probes, log: this.log.child({ part: 'steering' }), mapping: this.mapping };
  }

  /** Server processes configured: `workers`, 0 meaning one per CPU. */
  get workerCount(): number {
    return this.config.workers === 0 ? availableParallelism() : this.config.workers;
  }

  /** The worker pool when workers > 1 (undefined in a single process and in a worker). */
  get pool(): WorkerPool | undefined {
    return this.#pool;
  }

  async start(): Promise<void> {
    const cfg = this.config;
    const workers = this.workerCount;
    if (workers > 1) {
      const pool = new WorkerPool({
        count: workers,
        configFile: this.configFile,
        log: this.log.child({ part: 'workers' }),
        onProbes: (due) => {
          // The primary's scheduler sends them (and rate-limits the union).
          const now = performance.now();
          for (const [target, key] of due) if (this.probes.request(key, target, now)) this.rtt.expect(target, key);
        },
        onStats: () => {
          this.#sumStats(pool.stats());
        },
        onDemand: (counts) => {
          mergeDemand(this.mapping.demand, counts);
        },
      });
      this.#pool = pool;
      await pool.start();
      this.log.info({ workers, pids: pool.pids() }, 'dns workers serving');
    } else await this.server.listen(cfg.listen.map(parseListen));
    if (cfg.control) {
      if (cfg.control.plaintext) this.log.error('control.plaintext is true: control messages are neither encrypted nor authenticated');
      const pool = this.#pool;
      this.#control = await DnsControl.start(cfg.name, cfg.control, cfg.probe, { clusters: this.clusters, rtt: this.rtt, highRate: this.highRate, probes: this.probes, changed: () => {
          this.answerer.steering.changed();
        },
        ...(pool !== undefined ? { applied: (type, body, from) => { pool.forward(type, body, from); } } : {}),
      }, this.log.child({ part: 'control' }));
    }
    const pool = this.#pool;
    let collecting = false;
    this.#mappingTimer = setInterval(() => {
      if (pool === undefined) {
        this.recomputeMapping(performance.now());
        return;
      }
      // Workers: the primary's table from every worker's demand (workers.ts). A round still
      // under way (a recompute longer than the interval) is not overlapped.
      if (collecting || !this.#usesMapping()) return;
      collecting = true;
      void pool
        .collectDemand(Math.min(DEMAND_WAIT_MS, this.mapping.recomputeSeconds * 250))
        .then(() => {
          this.recomputeMapping(performance.now());
          const sent = pool.publishMapping(this.mapping.table.entries());
          this.log.debug(sent, 'mapping table sent to the workers');
        })
        .finally(() => {
          collecting = false;
        });
    }, this.mapping.recomputeSeconds * 1000);
    this.#mappingTimer.unref();
    this.#admin = new AdminSocket(cfg.adminSocket, this.log, statusAndReload(this));
    await this.#admin.listen();
    if (cfg.http) {
      const registry = newRegistry();
      registerDnsMetrics(registry, { daemon: this, control: () => this.#control, admin: () => this.#admin, ops: () => this.ops() });
      this.#ops = new OpsServer({ listen: cfg.http.listen, registry, status: () => this.status(), log: this.log });
      await this.#ops.start();
    }
    this.log.info({ zones: this.#zones.map((z) => z.origin), steered: cfg.steering.names.map((n) => n.name), clusters: cfg.clusters.map((c) => c.name) }, 'dns ready');
    this.systemd.ready(this.#statusLine());
    this.watchdog.start();
  }

  /** Primary: the counters shown are the sums of the workers' last reports (every STATS_MS). */
  #sumStats(all: readonly WorkerStats[]): void {
    const targets: Record<string, number>[] = [this.answerer.counters as unknown as Record<string, number>, this.server.counters as unknown as Record<string, number>];
    for (const t of targets) for (const k of Object.keys(t)) t[k] = all.reduce((sum, w) => sum + (w[k] ?? 0), 0);
    this.answerer.steering.decisions = all.reduce((sum, w) => sum + (w['steeringDecisions'] ?? 0), 0);
    const rejects = this.answerer.rejects as Map<string, number>;
    const reasons = this.answerer.steering.reasons;
    rejects.clear();
    reasons.clear();
    for (const w of all) {
      for (const [k, n] of Object.entries(w)) {
        if (k.startsWith('reject:')) rejects.set(k.slice(7), (rejects.get(k.slice(7)) ?? 0) + n);
        else if (k.startsWith('reason:')) reasons.set(k.slice(7), (reasons.get(k.slice(7)) ?? 0) + n);
      }
    }
  }

  /**
   * Runs this process as worker `index` of `count` (worker_main.ts): binds
   * every address with SO_REUSEPORT (steered by client prefix when RRL is
   * on, so one prefix's buckets live in one worker), applies the state the
   * primary forwards, reports due probes and counters. Exits when the
   * primary goes away.
   */
  async serveAsWorker(index: number, count: number): Promise<void> {
    this.#isWorker = true;
    const cfg = this.config;
    const send = (m: FromWorker): void => {
      if (process.connected) process.send?.(m);
    };
    process.on('disconnect', () => {
      this.server.close();
      process.exit(0);
    });
    // A report sent as the primary died fails with EPIPE (on `process`, unhandled it would end this worker with a stack trace): the primary is gone, so this worker goes as on 'disconnect'.
    process.on('error', (err: Error) => {
      this.log.warn({ err: err.message }, 'message to the primary not delivered; exiting');
      this.server.close();
      process.exit(0);
    });
    process.on('message', (m: ToWorker) => {
      if (m.t === 'state') this.#applyState(m.type, m.body, m.from, performance.now() - m.ageMs);
      else if (m.t === 'reload') this.reload();
      else if (m.t === 'demand?') send({ t: 'demand', counts: encodeDemand(this.mapping.demand.drain(), this.mapping.maxPrefixes) });
      else if (m.t === 'mapping') {
        // The primary's table replaces a recompute of our own (a worker runs no mapping timer).
        this.mapping.table.applyShared(m.full, m.set, m.del, performance.now());
        this.answerer.steering.changed();
      } else {
        this.server.close();
        process.exit(0);
      }
    });
    // The RRL's own prefix lengths: one prefix's responses are counted by one worker.
    const steer = cfg.rrl.enabled ? { groupSize: count, ipv4Bits: cfg.rrl.ipv4PrefixLength, ipv6Bits: cfg.rrl.ipv6PrefixLength } : undefined;
    try {
      await this.server.listen(cfg.listen.map(parseListen), steer !== undefined ? { steer } : {});
    } catch (err) {
      send({ t: 'failed', error: (err as Error).message });
      process.exit(1);
    }
    setInterval(() => {
      const due = this.probes.flush(performance.now());
      if (due.length > 0) send({ t: 'probes', due });
    }, cfg.probe.intervalSeconds * 1000);
    let last = '';
    setInterval(() => {
      const stats: Record<string, number> = { ...this.answerer.counters, ...this.server.counters, steeringDecisions: this.answerer.steering.decisions };
      for (const [reason, n] of this.answerer.rejects) stats[`reject:${reason}`] = n;
      for (const [reason, n] of this.answerer.steering.reasons) stats[`reason:${reason}`] = n;
      // Sent when something changed: an idle worker costs no IPC.
      const key = Object.values(stats).join(',');
      if (key === last) return;
      last = key;
      const now = performance.now();
      const recent = this.answerer.steering.recent(this.config.steering.recentClients).map((d) => ({ name: d.name, prefix: d.prefix, vips: d.vips, clusters: d.clusters, reason: d.reason, ageMs: now - d.at }));
      send({ t: 'stats', stats, recent });
    }, STATS_MS);
    this.log.info({ worker: index, of: count, pid: process.pid, steeredByPrefix: steer !== undefined }, 'dns worker listening');
    send({ t: 'ready' });
  }

  /** The same as DnsControl's handlers, for state the primary forwarded. */
  #applyState(type: StateType, body: unknown, from: string, at: number): void {
    if (type === 'cluster_load') this.clusters.receive(body as Body<'cluster_load'>, at, from);
    else if (type === 'high_rate_clients') this.highRate.receive(body as Body<'high_rate_clients'>, at);
    else {
      const b = body as Body<'rtt_results'>;
      const c = this.clusters.byName(b.cluster);
      if (c === undefined) return;
      this.rtt.receive(c.index, b, at);
    }
    this.answerer.steering.changed();
  }

  #statusLine(): string {
    return `${this.#zones.length} zone(s), ${this.config.steering.names.length} steered name(s) on ${this.config.listen.join(' ')}`;
  }

  /** The ops HTTP server while it runs (http.listen set): addRoute() adds GET pages to it. */
  ops(): OpsServer | undefined {
    return this.#ops;
  }


  /**
   * One recompute of the mapping assignment (the timer's tick), while some
   * steered name uses the policy; memoised decisions are dropped after it
   * (the epoch), so answers follow the new table at once.
   */
  recomputeMapping(now: number): void {
    if (!this.#usesMapping()) return;
    const s = this.mapping.recompute(now);
    this.answerer.steering.changed();
    const fields = { prefixes: s.prefixes, units: s.units, moved: s.moved, unserved: round(s.unserved), solveMs: round(s.solveMs), totalMs: round(s.totalMs) };
    if (s.moved > 0) this.log.info(fields, 'mapping recomputed');
    else this.log.debug(fields, 'mapping recomputed');
  }

  #usesMapping(): boolean {
    return this.config.steering.names.some((n) => n.policy === 'mapping');
  }

  /** Re-reads config and zones; false (and the running data kept) when refused. */
  reload(): boolean {
    this.systemd.reloading();
    let next: Readonly<DnsConfig>;
    let zones: LoadedZones;
    try {
      next = loadConfig(dnsConfigSchema, this.configFile);
      zones = loadZones(next, this.configFile);
    } catch (err) {
      this.reloadsRefused++;
      this.log.error({ err: err instanceof ConfigError ? err.message : err }, 'reload refused; the running configuration and zones stay');
      this.systemd.ready(`${this.#statusLine()}; last reload refused (see the log)`);
      return false;
    }
    const { applied, changed } = keepRestartKeys(this.config, next, RESTART_KEYS);
    if (changed.length > 0) this.log.warn({ keys: changed }, 'these changes need a restart and were not applied');
    const transferChanged = JSON.stringify(applied.transfer) !== JSON.stringify(this.config.transfer);
    this.config = applied;
    const steering = new Steering(applied, this.#parts());
    steering.inheritCounts(this.answerer.steering);
    const serials = new Map(this.#zones.map((z) => [z.origin, z.soa.serial]));
    this.answerer.replace(zones.set, steering);
    const before = this.transfers.counters;
    this.transfers = new ZoneTransfers(applied);
    Object.assign(this.transfers.counters, before);
    if (transferChanged) {
      const sent = this.notifier.counters;
      this.notifier.close();
      this.notifier = new Notifier(applied.transfer, this.log.child({ part: 'notify' }));
      Object.assign(this.notifier.counters, sent);
    }
    this.answerer.identity = identityOf(applied, this.answerer.identity);
    this.#zones = zones.list;
    // RFC 1996: the secondaries hear of a new serial at once rather than at their next refresh
    // (from the primary or a single process only: the workers reload the same zones after it).
    if (!this.#isWorker) {
      for (const z of zones.list) {
        const was = serials.get(z.origin);
        if (was !== undefined && was !== z.soa.serial) this.notifier.notify(z.origin, z.soa.serial);
      }
    }
    this.#pool?.broadcast({ t: 'reload' });
    this.reloads++;
    this.log.info({ zones: zones.list.map((z) => z.origin), steered: applied.steering.names.map((n) => n.name) }, 'reloaded');
    this.systemd.ready(this.#statusLine());
    return true;
  }

  status(): DnsStatus {
    const now = performance.now();
    const st = this.answerer.steering;
    return {
      name: this.config.name,
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      zones: this.#zones.map((z) => ({ origin: z.origin, serial: z.soa.serial, records: z.recordCount })),
      counters: { ...this.answerer.counters, ...this.server.counters, tcpConnections: this.server.tcpConnections, reloads: this.reloads, reloadsRefused: this.reloadsRefused },
      ...(this.#pool !== undefined ? { workers: { count: this.#pool.count, alive: this.#pool.alive, died: this.#pool.died, replaced: this.#pool.replaced, sendFailed: this.#pool.sendFailed, pids: this.#pool.pids() } } : {}),
      rejects: Object.fromEntries(this.answerer.rejects),
      clusters: this.clusters.clusters.map((c) => ({
        name: c.name,
        state: this.clusters.state(c, now),
        vips: c.vips,
        capacity: round(c.capacity),
        load: round(c.load),
        available: round(c.available),
        serversUp: c.serversUp,
        serversTotal: c.serversTotal,
        reports: c.reports,
        lastReportAgeSeconds: c.reports > 0 ? round((now - c.lastReport) / 1000) : null,
        source: c.source ?? null,
        nodes: this.clusters.nodes(c).map((r) => ({ node: r.node, role: r.role, ageSeconds: round((now - r.at) / 1000), fresh: this.clusters.reports.isFresh(r, now), reports: r.reports })),
      })),
      steering: {
        decisions: st.decisions,
        reasons: Object.fromEntries(st.reasons),
        recent:
          this.#pool !== undefined
            ? this.#pool.recent(this.config.steering.recentClients).map((d) => ({ name: d.name, client: d.prefix, answer: d.vips, clusters: d.clusters, reason: d.reason, ageSeconds: round(d.ageMs / 1000) }))
            : st.recent(this.config.steering.recentClients).map((d) => ({ name: d.name, client: d.prefix, answer: d.vips, clusters: d.clusters, reason: d.reason, ageSeconds: round((now - d.at) / 1000) })),
      },
      rtt: {
        prefixes: this.rtt.size,
        evicted: this.rtt.evicted,
        results: this.rtt.results,
        unknownTargets: this.rtt.unknownTargets,
        shared: this.rtt.shared,
        recent: this.rtt.recent(20).map(([k, e]) => ({ client: k.slice(2), rttMs: Object.fromEntries(this.clusters.clusters.map((c) => [c.name, fmtRtt(e.rtt[c.index] ?? NaN)])) })),
      },
      highRate: { tracked: this.highRate.size, evicted: this.highRate.evicted, clients: this.highRate.list(now, 20) },
      probes: { pending: this.probes.pending, requested: this.probes.requested, dropped: this.probes.dropped, sent: this.probes.sent },
      sticky: { clients: this.sticky.size, evicted: this.sticky.evicted },
      mapping: this.#mappingStatus(now),
      cache: { entries: this.answerer.cacheSize },
      transfer: { ...this.transfers.counters, notifySent: this.notifier.counters.sent, notifyAnswered: this.notifier.counters.answered, notifyFailed: this.notifier.counters.failed, notifyPending: this.notifier.pending },
      rrl: this.rrl === undefined ? undefined : { entries: this.rrl.size, slots: this.rrl.capacity, evicted: this.rrl.evicted, dropped: byKind(this.rrl.dropped), slipped: byKind(this.rrl.slipped), wouldLimit: byKind(this.rrl.wouldLimit) },
      control: this.#control?.status(),
      admin: { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 },
    };
  }

  #mappingStatus(now: number): DnsStatus['mapping'] {
    const t = this.mapping.table;
    const l = t.last;
    const sum = summarizeMapping(t.entries(), this.clusters.clusters.map((c) => c.name), l, MAPPING_STATUS_TOP, now);
    return {
      prefixes: t.size,
      demandPrefixes: this.mapping.demand.size,
      leftOut: this.mapping.leftOut,
      loadEstimate: round(this.mapping.loadEstimate),
      recomputes: t.recomputes,
      movedTotal: t.movedTotal,
      clusters: sum.clusters.map((c) => ({ name: c.name, prefixes: c.prefixes, demand: round(c.demand), capacity: c.capacity === null ? null : round(c.capacity) })),
      top: sum.top.map((p) => ({ prefix: p.prefix, cluster: p.cluster, demand: round(p.demand), rttMs: round(p.rttMs), ttl: p.ttl, sinceSeconds: round(p.sinceSeconds) })),
      last: l === undefined ? null : { at: new Date(Date.now() - (now - l.at)).toISOString(), ageSeconds: round((now - l.at) / 1000), eligible: l.eligible, units: l.units, moved: l.moved, unserved: round(l.unserved), meanRttMs: round(l.meanRttMs), solveMs: round(l.solveMs), totalMs: round(l.totalMs) },
    };
  }

  stop(): void {
    clearInterval(this.#mappingTimer);
    this.#ops?.close();
    this.systemd.stopping();
    this.watchdog.stop();
    this.server.close();
    this.notifier.close();
    this.#pool?.stop();
    this.#control?.close();
    this.#admin?.close();
    this.log.info('stopped');
  }
}

function byKind(a: Float64Array): Record<string, number> {
  return Object.fromEntries(RRL_KIND_NAMES.map((k, i) => [k, a[i] ?? 0]));
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function fmtRtt(x: number): number | string | null {
  return Number.isNaN(x) ? null : Number.isFinite(x) ? round(x) : 'no-reply';
}
