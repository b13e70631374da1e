/**
 * `sluice agent`: on every server, reports load (every loadSeconds) and
 * per-client request counts (every requestRateSeconds) to every front node
 * of its cluster (`fronts`, or the one `front`; one socket each, fronts.ts)
 * over the control plane (seed 000: the inputs of
 * receive_server_load and receive_request_rate). With `http.listen`, a
 * read-only ops HTTP server serves its metrics and status().
 *
 * SIGHUP reloads the configuration like the other daemons: a refused file
 * (or an unreadable utilization source) is logged and the running
 * configuration stays; an accepted one applies the intervals, ports,
 * utilization source and access log at once. name, address, front and
 * control are the agent's identity and sockets: changes to them are named
 * in the log and need a restart.
 *
 * Health (health.ts): the agent checks its own service (health-check.ts)
 * and reads the operator's drain/maint verb from its state file
 * (operator-state.ts, also set with `sluice agent ctl`); every load report
 * carries the resulting state, and a change is reported at once (at most
 * one report per MIN_HEALTH_REPORT_GAP_MS), not at the next interval.
 *
 * Under systemd (Type=notify, src/systemd/): READY=1 once the control
 * socket is connecting to the front node, RELOADING=1 / READY=1 around a
 * reload, STOPPING=1 at stop, WATCHDOG=1 while the event loop turns.
 */
import { AdminSocket, type CommandHandler } from '../admin/socket.ts';
import { keepRestartKeys, loadConfig } from '../config/load.ts';
import { ControlNode } from '../control/node.ts';
import { MAX_LIST, type Body } from '../control/messages.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { newRegistry } from '../metrics/collect.ts';
import { AccessLogFollower } from './access-log.ts';
import { agentConfigSchema, agentFronts, type AgentConfig } from './config.ts';
import { FrontFanout, type FrontLinkStatus } from './fronts.ts';
import { LoadSampler } from './load.ts';
import { registerAgentMetrics } from './metrics.ts';
import type { AgentHealthStatus, AgentStatus } from './status.ts';
import { HealthChecker, type HealthCheckConfig } from './health-check.ts';
import { reportedHealth, ReportPacer, type ReportedHealth } from './health.ts';
import { checkReason, OperatorState, parseVerb } from './operator-state.ts';
import { SluiceError } from '../errors/errors.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { Watchdog } from '../systemd/watchdog.ts';

/** Keys a reload cannot apply: the agent's identity and its control socket. */
const RESTART_KEYS = ['name', 'address', 'front', 'fronts', 'control', 'http', 'adminSocket'] as const;

/** Reports sent at once on a health change: at most one per this many ms (4 a second). */
export const MIN_HEALTH_REPORT_GAP_MS = 250;

/** The configured utilization source cannot be read on this machine. */
export class LoadSourceError extends SluiceError {
  readonly code = 'ERR_SLUICE_LOAD_SOURCE';
}

export class AgentDaemon {
  readonly configFile: string;
  config: Readonly<AgentConfig>;
  readonly log: Logger = componentLogger('agent');
  follower: AccessLogFollower;
  #control: ControlNode | undefined;
  /** One socket per front node; every report goes to each (fronts.ts). */
  #sender: FrontFanout | undefined;
  #sampler: LoadSampler | undefined;
  #timers: NodeJS.Timeout[] = [];
  #lastLoad: Body<'load_report'> | undefined;
  #rateStart = performance.now();
  #ops: OpsServer | undefined;
  #admin: AdminSocket | undefined;
  readonly startedAt = Date.now();
  /** load_report messages handed to the control plane. */
  reportsSent = 0;
  /** request_rate messages handed to the control plane. */
  requestReportsSent = 0;
  /** Load samples that failed (no report that interval). */
  sampleErrors = 0;
  reloads = 0;
  reloadsRefused = 0;
  /** load_report messages sent at once on a health change (also in reportsSent). */
  healthReports = 0;
  /** load_report messages sent at once when the front node (re)connected (also in reportsSent). */
  connectReports = 0;
  /** The health the reports carry (health.ts) and since when (Date.now()). */
  health: { state: ReportedHealth; reason: string; since: number; transitions: number } = { state: 'up', reason: 'starting', since: Date.now(), transitions: 0 };
  operator: OperatorState;
  checker: HealthChecker;
  readonly #pacer = new ReportPacer(MIN_HEALTH_REPORT_GAP_MS);
  /** sd_notify; a no-op unless started by systemd with Type=notify. */
  readonly systemd: SystemdNotifier;
  readonly watchdog: Watchdog;

  constructor(configFile: string) {
    this.configFile = configFile;
    this.config = loadConfig(agentConfigSchema, configFile);
    this.follower = newFollower(this.config);
    this.operator = new OperatorState(this.config.stateFile.path, this.log);
    this.checker = this.#newChecker(this.config);
    this.systemd = new SystemdNotifier(this.log);
    // The timer running proves the loop that runs every report timer turns.
    this.watchdog = new Watchdog(this.systemd, () => ({ alive: true }), this.log);
  }

  async start(): Promise<void> {
    const c = this.config;
    this.#sampler = newSampler(c);
    // The operator's verb and the first check before the control socket, so the first report says what is true.
    this.operator.read();
    await this.checker.start();
    this.#healthChanged(false);
    this.#control = await ControlNode.create(c.name, c.control, this.log);
    // A (re)connected front node (e.g. just restarted) hears our health at
    // once, not a load interval later. The report goes to every front (the
    // others just hear it early); the pacer bounds it to 4 a second.
    this.#sender = new FrontFanout(this.#control, agentFronts(c), () => {
      this.#pacer.request(performance.now(), () => {
        this.connectReports++;
        this.#reportLoad();
      });
    });
    if (c.http) {
      const registry = newRegistry();
      registerAgentMetrics(registry, { daemon: this, control: () => this.#control, ops: () => this.ops() });
      this.#ops = new OpsServer({ listen: c.http.listen, registry, status: () => this.status(), log: this.log });
      await this.#ops.start();
    }
    this.#admin = new AdminSocket(c.adminSocket, this.log, this.#adminHandler());
    await this.#admin.listen();
    this.#startTimers();
    this.log.info({ name: c.name, fronts: agentFronts(c).map((f) => f.endpoint), utilization: c.utilization.source, accessLog: c.accessLog.path, health: this.health.state, reason: this.health.reason, check: c.health.kind, stateFile: c.stateFile.path }, 'agent ready');
    this.systemd.ready(this.#statusLine());
    this.watchdog.start();
  }

  #statusLine(): string {
    return `server ${this.config.name} reporting to ${agentFronts(this.config)
      .map((f) => f.endpoint)
      .join(', ')} (utilization: ${this.config.utilization.source})`;
  }

  /** Re-reads the config file; false (and the running configuration kept) when refused. */
  reload(): boolean {
    this.systemd.reloading();
    let next: Readonly<AgentConfig>;
    let sampler: LoadSampler;
    try {
      next = loadConfig(agentConfigSchema, this.configFile);
      sampler = newSampler(next);
    } catch (err) {
      this.reloadsRefused++;
      this.log.error({ err: err instanceof SluiceError ? err.message : err }, 'reload refused: the running configuration stays');
      this.systemd.ready(`${this.#statusLine()}; last reload refused (see the log)`);
      return false;
    }
    const { applied, changed } = keepRestartKeys(this.config, next, RESTART_KEYS);
    if (changed.length > 0) this.log.warn({ keys: changed }, 'these changes need a restart and were not applied');
    if (JSON.stringify(applied.accessLog) !== JSON.stringify(this.config.accessLog)) {
      // Counts since the last report are sent first, so none are lost.
      this.#reportRequests();
      this.follower.close();
      this.follower = newFollower(applied);
    }
    if (JSON.stringify(applied.health) !== JSON.stringify(this.config.health) || applied.ports[0] !== this.config.ports[0]) {
      this.checker.stop();
      this.checker = this.#newChecker(applied, this.checker);
      void this.checker.start();
    }
    if (applied.stateFile.path !== this.config.stateFile.path) this.operator = new OperatorState(applied.stateFile.path, this.log);
    this.config = applied;
    this.#sampler = sampler;
    this.operator.read();
    this.#healthChanged();
    this.#startTimers();
    this.reloads++;
    this.log.info({ loadSeconds: applied.loadSeconds, requestRateSeconds: applied.requestRateSeconds, utilization: applied.utilization.source, accessLog: applied.accessLog.path }, 'configuration reloaded');
    this.systemd.ready(this.#statusLine());
    return true;
  }

  /** (Re)starts the report timers from the running configuration. */
  #startTimers(): void {
    const c = this.config;
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    this.#timers.push(
      setInterval(() => {
        this.#reportLoad();
      }, c.loadSeconds * 1000),
      setInterval(() => {
        this.follower.poll();
      }, c.accessLog.pollSeconds * 1000),
      setInterval(() => {
        this.#reportRequests();
      }, c.requestRateSeconds * 1000),
      setInterval(() => {
        if (this.operator.read()) this.#healthChanged();
      }, c.stateFile.pollSeconds * 1000),
    );
  }

  #newChecker(c: Readonly<AgentConfig>, previous?: HealthChecker): HealthChecker {
    const h = c.health;
    const cfg: HealthCheckConfig = { ...h, port: h.port ?? c.ports[0] ?? 80 };
    return new HealthChecker(
      cfg,
      () => {
        this.#healthChanged();
      },
      previous,
    );
  }

  /**
   * Re-derives the reported health from the operator's verb and the check;
   * on a change logs it, counts it and (when `report`) sends a load report
   * at once, paced.
   */
  #healthChanged(report = true): void {
    const next = reportedHealth({ verb: this.operator.verb, verbReason: this.operator.reason, check: this.checker.state, checkReason: this.checker.reason });
    const h = this.health;
    const changed = next.state !== h.state;
    if (!changed && next.reason === h.reason) return;
    if (changed) {
      this.log.warn({ from: h.state, to: next.state, reason: next.reason }, 'server health changed');
      this.health = { state: next.state, reason: next.reason, since: Date.now(), transitions: h.transitions + 1 };
    } else {
      h.reason = next.reason;
    }
    // A new reason alone (e.g. a drain's reason edited) is sent at the next interval.
    if (changed && report && this.#sender) {
      this.#pacer.request(performance.now(), () => {
        this.healthReports++;
        this.#reportLoad();
      });
    }
  }

  /** The admin socket's commands: status, reload, and the operator's verbs (set, show). */
  #adminHandler(): CommandHandler {
    return (r, reject) => {
      switch (r['cmd']) {
        case 'status':
          return { ok: true, status: this.status() };
        case 'reload':
          return this.reload() ? { ok: true } : { ok: false, error: 'configuration refused; see the log' };
        case 'show':
          return { ok: true, health: this.healthStatus() };
        case 'set': {
          const verb = typeof r['verb'] === 'string' ? parseVerb(r['verb']) : undefined;
          if (verb === undefined) return reject(`unknown verb ${JSON.stringify(r['verb'])}: drain, maint, ready (or up)`);
          const reason = r['reason'] ?? '';
          if (typeof reason !== 'string') return reject('reason must be a string');
          const bad = checkReason(reason);
          if (bad !== undefined) return reject(bad);
          try {
            this.operator.write(verb, reason);
          } catch (err) {
            // Not applied: a verb that would not survive a restart would mislead.
            return reject(`cannot write the state file ${this.operator.path}: ${(err as Error).message}; not applied`);
          }
          this.#healthChanged();
          return { ok: true, health: this.healthStatus() };
        }
        default:
          return reject(`unknown cmd ${JSON.stringify(r['cmd'])}: status, reload, show, set`);
      }
    };
  }

  #reportLoad(): void {
    const s = this.#sampler;
    if (!s || !this.#sender) return;
    let f;
    try {
      f = s.sample();
    } catch (err) {
      this.sampleErrors++;
      this.log.error({ err }, 'load sample failed; no report this interval');
      return;
    }
    const body: Body<'load_report'> = { server: this.config.name, address: this.config.address, interval: this.config.loadSeconds, ...f, health: this.health.state, healthReason: this.health.reason };
    this.#lastLoad = body;
    this.#sender.send('load_report', body);
    this.#pacer.sent(performance.now());
    this.reportsSent++;
  }

  #reportRequests(): void {
    if (!this.#sender) return;
    this.follower.poll();
    const now = performance.now();
    const interval = Math.max(0.001, (now - this.#rateStart) / 1000);
    this.#rateStart = now;
    const counts = this.follower.take();
    // IPv4 and IPv6 clients go in separate messages: an IPv4-only message
    // is sent at protocol version 1 (src/control/messages.ts), so a front
    // node not yet upgraded still takes every IPv4 client and rejects (and
    // counts) only the IPv6 messages.
    const v4: [string, number][] = [];
    const v6: [string, number][] = [];
    for (const [addr, n] of counts) (addr.includes(':') ? v6 : v4).push([addr, n]);
    const fc = this.follower.counters;
    const rejectedLines = fc.garbage + fc.badAddress + fc.zoneId + fc.partial;
    // Seed 000 sends the whole table each interval; split so each message stays bounded.
    // At least one message per interval (the IPv4 one, possibly empty): the front sees the agent report.
    for (let i = 0; i === 0 || i < v4.length; i += MAX_LIST) {
      this.#sender.send('request_rate', { server: this.config.name, interval, clients: v4.slice(i, i + MAX_LIST), rejectedLines });
      this.requestReportsSent++;
    }
    for (let i = 0; i < v6.length; i += MAX_LIST) {
      this.#sender.send('request_rate', { server: this.config.name, interval, clients: v6.slice(i, i + MAX_LIST), rejectedLines });
      this.requestReportsSent++;
    }
  }

  /** The ops HTTP server while it runs (http.listen set): addRoute() adds GET pages to it. */
  ops(): OpsServer | undefined {
    return this.#ops;
  }

  /** Each front node's link: connected, sent, dropped (metrics, status). */
  fronts(): FrontLinkStatus[] {
    return this.#sender?.status() ?? [];
  }

  /** The last load report sent (metrics, status). */
  get lastLoad(): Body<'load_report'> | undefined {
    return this.#lastLoad;
  }

  /** What `GET /status` and the admin socket's `status` return (SIGUSR2 logs the same). */
  status(): AgentStatus {
    return {
      agent: true,
      name: this.config.name,
      front: agentFronts(this.config)
        .map((f) => f.endpoint)
        .join(','),
      fronts: this.fronts(),
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      reports: { load: this.reportsSent, requestRate: this.requestReportsSent, sampleErrors: this.sampleErrors },
      lastLoad: this.#lastLoad,
      accessLog: { path: this.follower.path, ...this.follower.counters },
      control: this.#control?.counters,
      reloads: this.reloads,
      reloadsRefused: this.reloadsRefused,
      health: this.healthStatus(),
    };
  }

  /** The health part of the status, and what `sluice agent ctl show` prints. */
  healthStatus(): AgentHealthStatus {
    const o = this.operator;
    const c = this.checker;
    return {
      state: this.health.state,
      reason: this.health.reason,
      sinceSeconds: Math.round((Date.now() - this.health.since) / 1000),
      transitions: this.health.transitions,
      reportsAtOnce: this.healthReports,
      reportsOnConnect: this.connectReports,
      operator: { verb: o.verb, reason: o.reason, source: o.source, file: o.path, ...o.counters, ...(o.lastError !== undefined ? { lastError: o.lastError } : {}) },
      check: { kind: c.config.kind, state: c.state, reason: c.reason, ...c.counters },
    };
  }


  async stop(): Promise<void> {
    this.#admin?.close();
    this.#ops?.close();
    this.systemd.stopping();
    this.watchdog.stop();
    this.checker.stop();
    this.#pacer.stop();
    for (const t of this.#timers) clearInterval(t);
    await this.#sender?.drain();
    this.#control?.close();
    this.follower.close();
  }
}

function newFollower(c: Readonly<AgentConfig>): AccessLogFollower {
  return new AccessLogFollower(c.accessLog.path, { format: c.accessLog.format, maxClients: c.accessLog.maxClients });
}

/** The configured utilization source, or LoadSourceError naming the keys to fix. */
function newSampler(c: Readonly<AgentConfig>): LoadSampler {
  try {
    return new LoadSampler({ source: c.utilization.source, ports: c.ports, maxConnections: c.utilization.maxConnections, cgroup: c.utilization.cgroup });
  } catch (err) {
    throw new LoadSourceError(`cannot read the load figures for utilization source ${c.utilization.source}${c.utilization.cgroup !== undefined ? ` (cgroup ${c.utilization.cgroup})` : ''}: ${(err as Error).message}; check utilization.source and utilization.cgroup`, { cause: err });
  }
}
