/**
 * What the DNS server knows about each cluster, from the front nodes'
 * cluster_load reports (seed 000: "cluster sends aggregated load information
 * periodically ... or when load condition changes significantly").
 *
 * A cluster is usable for steering when it is up (a report arrived within
 * downAfterIntervals × reportSeconds, and it has servers up) and has free
 * capacity (available > 0). Before its first report a cluster is down:
 * the DNS server never sends clients to a cluster it has not heard from.
 * The configured clusters are the only ones: a report naming another cluster
 * is counted and ignored (a typo on a front node must not add a target).
 *
 * Times are performance.now() milliseconds, injected for tests.
 */
import type { Body } from '../control/messages.ts';

export interface ClusterConfig {
  readonly name: string;
  readonly vips: readonly string[];
}

export interface ClusterRecord {
  readonly index: number;
  readonly name: string;
  /** The configured VIPs: answers use these (reports may list more; the config is the authority). */
  readonly vips: readonly string[];
  capacity: number;
  load: number;
  available: number;
  serversUp: number;
  serversTotal: number;
  reports: number;
  lastReport: number;
}

export class ClusterTable {
  readonly clusters: readonly ClusterRecord[];
  readonly #byName: Map<string, ClusterRecord>;
  readonly #staleMs: number;
  unknownReports = 0;

  constructor(configs: readonly ClusterConfig[], reportSeconds: number, downAfterIntervals: number) {
    this.clusters = configs.map((c, index) => ({ index, name: c.name, vips: c.vips, capacity: 0, load: 0, available: 0, serversUp: 0, serversTotal: 0, reports: 0, lastReport: -Infinity }));
    this.#byName = new Map(this.clusters.map((c) => [c.name, c]));
    this.#staleMs = reportSeconds * downAfterIntervals * 1000;
  }

  byName(name: string): ClusterRecord | undefined {
    return this.#byName.get(name);
  }

  receive(body: Body<'cluster_load'>, now: number): boolean {
    const c = this.#byName.get(body.cluster);
    if (!c) {
      this.unknownReports++;
      return false;
    }
    c.capacity = body.capacity;
    c.load = body.load;
    c.available = body.available;
    c.serversUp = body.serversUp;
    c.serversTotal = body.serversTotal;
    c.reports++;
    c.lastReport = now;
    return true;
  }

  /** When this cluster goes down unless another report arrives. */
  staleAt(c: ClusterRecord): number {
    return c.lastReport + this.#staleMs;
  }

  isUp(c: ClusterRecord, now: number): boolean {
    return c.reports > 0 && now - c.lastReport <= this.#staleMs && c.serversUp > 0;
  }

  /** Up with free capacity: a steering candidate. */
  isUsable(c: ClusterRecord, now: number): boolean {
    return this.isUp(c, now) && c.available > 0;
  }

  /** Free share of capacity, 0..1 (0 without capacity). */
  static freeFraction(c: ClusterRecord): number {
    return c.capacity > 0 ? Math.min(1, Math.max(0, c.available / c.capacity)) : 0;
  }

  state(c: ClusterRecord, now: number): 'up' | 'full' | 'down' | 'unknown' {
    if (c.reports === 0) return 'unknown';
    if (!this.isUp(c, now)) return 'down';
    return c.available > 0 ? 'up' : 'full';
  }
}
