/**
 * `sluice agent`: on every server, reports load (every loadSeconds) and
 * per-client request counts (every requestRateSeconds) to the cluster's
 * front node over the control plane (seed 000: the inputs of
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
 * Under systemd (Type=notify, src/systemd/): READY=1 once the control
 * socket is connecting to the front node, RELOADING=1 / READY=1 around a
 * reload, STOPPING=1 at stop, WATCHDOG=1 while the event loop turns.
 */
import { AdminSocket, statusAndReload } from '../admin/socket.ts';
import { keepRestartKeys, loadConfig } from '../config/load.ts';
import { ControlNode, type Sender } from '../control/node.ts';
import { MAX_LIST, type Body } from '../control/messages.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { newRegistry } from '../metrics/collect.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { AccessLogFollower } from './access-log.ts';
import { agentConfigSchema, type AgentConfig } from './config.ts';
import { LoadSampler } from './load.ts';
import { registerAgentMetrics } from './metrics.ts';
import type { AgentStatus } from './status.ts';
import { SluiceError } from '../errors/errors.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { Watchdog } from '../systemd/watchdog.ts';

/** Keys a reload cannot apply: the agent's identity and its control socket. */
const RESTART_KEYS = ['name', 'address', 'front', 'control', 'http', 'adminSocket'] as const;

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
  #sender: Sender | undefined;
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
  /** sd_notify; a no-op unless started by systemd with Type=notify. */
  readonly systemd: SystemdNotifier;
  readonly watchdog: Watchdog;

  constructor(configFile: string) {
    this.configFile = configFile;
    this.config = loadConfig(agentConfigSchema, configFile);
    this.follower = newFollower(this.config);
    this.systemd = new SystemdNotifier(this.log);
    // The timer running proves the loop that runs every report timer turns.
    this.watchdog = new Watchdog(this.systemd, () => ({ alive: true }), this.log);
  }

  async start(): Promise<void> {
    const c = this.config;
    this.#sampler = newSampler(c);
    this.#control = await ControlNode.create(c.name, c.control, this.log);
    this.#sender = this.#control.connectPush(c.front.endpoint, c.front.publicKey);
    if (c.http) {
      const registry = newRegistry();
      registerAgentMetrics(registry, { daemon: this, control: () => this.#control, ops: () => this.ops() });
      this.#ops = new OpsServer({ listen: c.http.listen, registry, status: () => this.status(), log: this.log });
      await this.#ops.start();
    }
    this.#admin = new AdminSocket(c.adminSocket, this.log, statusAndReload(this));
    await this.#admin.listen();
    this.#startTimers();
    this.log.info({ name: c.name, front: c.front.endpoint, utilization: c.utilization.source, accessLog: c.accessLog.path }, 'agent ready');
    this.systemd.ready(this.#statusLine());
    this.watchdog.start();
  }

  #statusLine(): string {
    return `server ${this.config.name} reporting to ${this.config.front.endpoint} (utilization: ${this.config.utilization.source})`;
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
    this.config = applied;
    this.#sampler = sampler;
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
    );
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
    const body: Body<'load_report'> = { server: this.config.name, address: this.config.address, interval: this.config.loadSeconds, ...f };
    this.#lastLoad = body;
    this.#sender.send('load_report', body);
    this.reportsSent++;
  }

  #reportRequests(): void {
    if (!this.#sender) return;
    this.follower.poll();
    const now = performance.now();
    const interval = Math.max(0.001, (now - this.#rateStart) / 1000);
    this.#rateStart = now;
    const counts = this.follower.take();
    const clients: [string, number][] = [];
    for (const [addr, n] of counts) clients.push([formatIPv4Address(addr), n]);
    const fc = this.follower.counters;
    const rejectedLines = fc.garbage + fc.partial;
    // Seed 000 sends the whole table each interval; split so each message stays bounded.
    for (let i = 0; i === 0 || i < clients.length; i += MAX_LIST) {
      this.#sender.send('request_rate', { server: this.config.name, interval, clients: clients.slice(i, i + MAX_LIST), rejectedLines });
      this.requestReportsSent++;
    }
  }

  /** The ops HTTP server while it runs (http.listen set): addRoute() adds GET pages to it. */
  ops(): OpsServer | undefined {
    return this.#ops;
  }

  /** The last load report sent (metrics, status). */
  get lastLoad(): Body<'load_report'> | undefined {
    return this.#lastLoad;
  }

  /** What `GET /status` returns (the agent has no admin socket; SIGUSR2 logs the same). */
  status(): AgentStatus {
    return {
      agent: true,
      name: this.config.name,
      front: this.config.front.endpoint,
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      reports: { load: this.reportsSent, requestRate: this.requestReportsSent, sampleErrors: this.sampleErrors },
      lastLoad: this.#lastLoad,
      accessLog: { path: this.follower.path, ...this.follower.counters },
      control: this.#control?.counters,
      reloads: this.reloads,
      reloadsRefused: this.reloadsRefused,
    };
  }


  async stop(): Promise<void> {
    this.#admin?.close();
    this.#ops?.close();
    this.systemd.stopping();
    this.watchdog.stop();
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
