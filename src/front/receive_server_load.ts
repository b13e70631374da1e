/**
 * Seed 000's receive_server_load: from each server's load report and the
 * connections this front node sent to that server in the report's interval,
 * estimate how many new connections per second the server can take.
 *
 *   rate     = connections sent to it since its previous report / seconds elapsed
 *   raw      = rate * targetUtilization / utilization
 *              (the rate that would bring it to the target, if its
 *              utilization grows in proportion to its connection rate)
 *   bounded  = raw clamped to [previous / maxStep, previous * maxStep]
 *   estimate = previous + smoothing * (bounded - previous), then clamped to
 *              [minCapacity, maxCapacity]
 *
 * A report with no connections sent (rate 0) or a utilization below
 * minUtilization carries no information about capacity: the estimate stays,
 * only the utilization shown is updated. Every report refreshes the server's
 * last-seen time; a server whose agent has been silent for downAfter
 * intervals counts as down (no new connections) until it reports again.
 *
 * A report that carries the agent's health (up, down, drain, maint: its own
 * check and the operator's verb) hands it to every ServerRuntime of that
 * name (a machine may serve several services), at once and on every later
 * applyTo, so a reload's fresh runtimes get it too; one without (an older
 * agent) means 'none'.
 *
 * Estimates are kept by server name, outside the per-service runtime, so a
 * reload or an admin change keeps them. A server that appears in several
 * services gets the same estimate in each (the agent reports the machine,
 * not a service), and its rate is the sum over the services.
 */
import type { Body } from '../control/messages.ts';
import type { AgentHealth } from './health/server-health.ts';
import type { ServiceRuntime } from './service.ts';

export interface EstimateOptions {
  readonly targetUtilization: number;
  /** Weight of a new observation, 0..1. */
  readonly smoothing: number;
  /** Largest factor by which one report may move the estimate. */
  readonly maxStep: number;
  readonly minCapacity: number;
  readonly maxCapacity: number;
  readonly minUtilization: number;
  /** Agents' load interval, seconds, and how many silent ones mean down. */
  readonly loadSeconds: number;
  readonly downAfter: number;
  /** Starting estimate (connections/s) for a server whose config gives no capacity. */
  readonly initialCapacity: number;
}

export interface ServerLoadRecord {
  readonly name: string;
  capacity: number;
  utilization: number;
  cpu: number;
  connections: number;
  /** Last report time (performance.now() ms), -Infinity before the first. */
  lastReport: number;
  /** Connections decided for it (all services) at its previous report. */
  decidedAtReport: number;
  /** When that count was taken. */
  decidedAt: number;
  /** The last interval's measured rate, for status. */
  reportRate: number;
  reports: number;
  /** Reports that changed the estimate. */
  updates: number;
  /** The agent's health from its last report ('none': it sends none), and why. */
  health: AgentHealth | 'none';
  healthReason: string;
}

export class ServerLoadEstimator {
  readonly options: EstimateOptions;
  readonly records = new Map<string, ServerLoadRecord>();
  /** Reports for a server name no service has. */
  unknownServer = 0;
  readonly #start: number;

  constructor(options: EstimateOptions, now: number) {
    this.options = options;
    this.#start = now;
  }

  /** Connections decided for `name` over every service. */
  static decidedFor(services: readonly ServiceRuntime[], name: string): number {
    let n = 0;
    for (const s of services) for (const b of s.servers) if (b.id === name) n += b.decided;
    return n;
  }

  #record(services: readonly ServiceRuntime[], name: string, now: number): ServerLoadRecord | undefined {
    let r = this.records.get(name);
    if (r) return r;
    let initial: number | undefined;
    for (const s of services) for (const b of s.servers) if (b.id === name) initial ??= Number.isFinite(b.capacity) && !b.estimated ? b.capacity : this.options.initialCapacity;
    if (initial === undefined) return undefined;
    r = {
      name,
      capacity: initial,
      utilization: 0,
      cpu: 0,
      connections: 0,
      lastReport: -Infinity,
      decidedAtReport: ServerLoadEstimator.decidedFor(services, name),
      decidedAt: now,
      reportRate: 0,
      reports: 0,
      updates: 0,
      health: 'none',
      healthReason: '',
    };
    this.records.set(name, r);
    return r;
  }

  /** Seed 000 receive_server_load. Returns false for a server we do not have. */
  receiveServerLoad(report: Body<'load_report'>, services: readonly ServiceRuntime[], now: number): boolean {
    const r = this.#record(services, report.server, now);
    if (!r) {
      this.unknownServer++;
      return false;
    }
    const o = this.options;
    const decided = ServerLoadEstimator.decidedFor(services, report.server);
    const seconds = (now - r.decidedAt) / 1000;
    const first = r.reports === 0;
    r.reports++;
    r.lastReport = now;
    r.utilization = report.utilization;
    r.cpu = report.cpu;
    r.connections = report.connections;
    r.health = report.health ?? 'none';
    r.healthReason = report.healthReason ?? '';
    if (seconds > 0 && !first) {
      const rate = Math.max(0, decided - r.decidedAtReport) / seconds;
      r.reportRate = rate;
      if (rate > 0 && report.utilization >= o.minUtilization) {
        const raw = (rate * o.targetUtilization) / report.utilization;
        const bounded = Math.min(r.capacity * o.maxStep, Math.max(r.capacity / o.maxStep, raw));
        const next = r.capacity + o.smoothing * (bounded - r.capacity);
        r.capacity = Math.min(o.maxCapacity, Math.max(o.minCapacity, next));
        r.updates++;
      }
    }
    r.decidedAtReport = decided;
    r.decidedAt = now;
    this.applyTo(services, now);
    return true;
  }

  readonly #rates = new Map<string, { decided: number; rate: number }>();
  #lastTick = -1;

  /**
   * Once a second: each server's recent rate of new connections (EWMA over
   * ~2 s of the per-tick rate), the `load` that estimated capacities are
   * compared with; then applyTo.
   */
  tick(services: readonly ServiceRuntime[], now: number): void {
    const dt = this.#lastTick < 0 ? 0 : (now - this.#lastTick) / 1000;
    this.#lastTick = now;
    // Decided counts summed by name in one pass (a server may be in several services).
    const decidedByName = new Map<string, number>();
    for (const s of services) for (const b of s.servers) decidedByName.set(b.id, (decidedByName.get(b.id) ?? 0) + b.decided);
    const out = new Map<string, number>();
    for (const [name, decided] of decidedByName) {
      const m = this.#rates.get(name);
      if (!m || dt <= 0) {
        this.#rates.set(name, { decided, rate: m?.rate ?? 0 });
        out.set(name, m?.rate ?? 0);
        continue;
      }
      const inst = Math.max(0, decided - m.decided) / dt;
      m.rate += 0.5 * (inst - m.rate);
      m.decided = decided;
      out.set(name, m.rate);
    }
    this.applyTo(services, now, out);
  }

  /** Whether a server's agent counts as silent (down). */
  isDown(r: ServerLoadRecord | undefined, now: number): boolean {
    const limit = this.options.downAfter * this.options.loadSeconds * 1000;
    // Before its first report a server gets the same grace from our start.
    const last = r && r.reports > 0 ? r.lastReport : this.#start;
    return now - last > limit;
  }

  /**
   * Writes estimates, rates and down flags into the services' servers.
   * `rates` maps server name -> new connections/s sent to it recently.
   */
  applyTo(services: readonly ServiceRuntime[], now: number, rates?: ReadonlyMap<string, number>): void {
    for (const s of services) {
      for (const b of s.servers) {
        const r = this.#record(services, b.id, now);
        b.estimated = true;
        if (r) b.capacity = r.capacity;
        if (rates) b.rate = rates.get(b.id) ?? 0;
        if (r) b.health.setAgent(r.health, r.healthReason, now);
        b.health.setSilent(this.isDown(r, now), now);
        b.refreshUsable();
      }
    }
  }
}

/** The cluster's aggregate (seed 000: "update cluster's load information and available capacity"). */
export function clusterLoadOf(services: readonly ServiceRuntime[]): { capacity: number; load: number; available: number; serversUp: number; serversTotal: number } {
  const seen = new Set<string>();
  let capacity = 0;
  let load = 0;
  let up = 0;
  for (const s of services) {
    for (const b of s.servers) {
      if (seen.has(b.id)) continue;
      seen.add(b.id);
      if (!b.usable) continue;
      up++;
      if (Number.isFinite(b.capacity)) capacity += b.capacity;
      load += b.load;
    }
  }
  return { capacity, load, available: Math.max(0, capacity - load), serversUp: up, serversTotal: seen.size };
}
