/**
 * `sluice agent`: on every server, reports load (every loadSeconds) and
 * per-client request counts (every requestRateSeconds) to the cluster's
 * front node over the control plane (seed 000: the inputs of
 * receive_server_load and receive_request_rate). With `http.listen`, a
 * read-only ops HTTP server serves its metrics and status(); the agent has
 * no admin socket and no reload (a changed config needs a restart).
 */
import { loadConfig } from '../config/load.ts';
import { ControlNode, type Sender } from '../control/node.ts';
import { MAX_LIST, type Body } from '../control/messages.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { registerAgentMetrics } from '../metrics/agent.ts';
import { newRegistry } from '../metrics/collect.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { AccessLogFollower } from './access-log.ts';
import { agentConfigSchema, type AgentConfig } from './config.ts';
import { LoadSampler } from './load.ts';
import { SluiceError } from '../errors/errors.ts';

/** The configured utilization source cannot be read on this machine. */
export class LoadSourceError extends SluiceError {
  readonly code = 'ERR_SLUICE_LOAD_SOURCE';
}

export class AgentDaemon {
  readonly config: Readonly<AgentConfig>;
  readonly log: Logger = componentLogger('agent');
  readonly follower: AccessLogFollower;
  #control: ControlNode | undefined;
  #sender: Sender | undefined;
  #sampler: LoadSampler | undefined;
  readonly #timers: NodeJS.Timeout[] = [];
  #lastLoad: Body<'load_report'> | undefined;
  #rateStart = performance.now();
  #ops: OpsServer | undefined;
  readonly startedAt = Date.now();
  /** load_report messages handed to the control plane. */
  reportsSent = 0;
  /** request_rate messages handed to the control plane. */
  requestReportsSent = 0;
  /** Load samples that failed (no report that interval). */
  sampleErrors = 0;

  constructor(configFile: string) {
    this.config = loadConfig(agentConfigSchema, configFile);
    this.follower = new AccessLogFollower(this.config.accessLog.path, { format: this.config.accessLog.format, maxClients: this.config.accessLog.maxClients });
  }

  async start(): Promise<void> {
    const c = this.config;
    try {
      this.#sampler = new LoadSampler({ source: c.utilization.source, ports: c.ports, maxConnections: c.utilization.maxConnections, cgroup: c.utilization.cgroup });
    } catch (err) {
      throw new LoadSourceError(`cannot read the load figures for utilization source ${c.utilization.source}${c.utilization.cgroup !== undefined ? ` (cgroup ${c.utilization.cgroup})` : ''}: ${(err as Error).message}; check utilization.source and utilization.cgroup`, { cause: err });
    }
    this.#control = await ControlNode.create(c.name, c.control, this.log);
    this.#sender = this.#control.connectPush(c.front.endpoint, c.front.publicKey);
    if (c.http) {
      const registry = newRegistry();
      registerAgentMetrics(registry, { daemon: this, control: () => this.#control, ops: () => this.ops() });
      this.#ops = new OpsServer({ listen: c.http.listen, registry, status: () => this.status(), log: this.log });
      await this.#ops.start();
    }
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
    this.log.info({ name: c.name, front: c.front.endpoint, utilization: c.utilization.source, accessLog: c.accessLog.path }, 'agent ready');
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
  status(): Record<string, unknown> {
    return {
      name: this.config.name,
      front: this.config.front.endpoint,
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      reports: { load: this.reportsSent, requestRate: this.requestReportsSent, sampleErrors: this.sampleErrors },
      lastLoad: this.#lastLoad,
      accessLog: { path: this.follower.path, ...this.follower.counters },
      control: this.#control?.counters,
    };
  }

  async stop(): Promise<void> {
    this.#ops?.close();
    for (const t of this.#timers) clearInterval(t);
    await this.#sender?.drain();
    this.#control?.close();
    this.follower.close();
  }
}
