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
 * A cluster may be served by a pair of front nodes (issue 21): the table
 * keeps each node's last report (ClusterReports, keyed by the sender's
 * name) and derives the record's figures from one of them, the master's
 * while it is fresh (src/control/cluster-reports.ts has the rules). The
 * record's figures are refreshed on every report and whenever isUp() or
 * isUsable() is asked, so a master that falls silent hands the cluster to
 * its backup without waiting for a report.
 *
 * Times are performance.now() milliseconds, injected for tests.
 */
import { isIPv4 } from 'node:net';
import { ClusterReports, type NodeReport } from '../control/cluster-reports.ts';
import type { Body } from '../control/messages.ts';

export interface ClusterConfig {
  readonly name: string;
  readonly vips: readonly string[];
}

export interface ClusterRecord {
  readonly index: number;
  readonly name: string;
  /** The configured VIPs, both families: answers use these (reports may list more; the config is the authority). */
  readonly vips: readonly string[];
  /** The IPv4 VIPs (A answers) and the IPv6 VIPs (AAAA answers), split once here. */
  readonly vips4: readonly string[];
  readonly vips6: readonly string[];
  capacity: number;
  load: number;
  available: number;
  serversUp: number;
  serversTotal: number;
  /** Reports received over every node of the cluster. */
  reports: number;
  /** When the latest report of any node arrived. */
  lastReport: number;
  /** The node the figures come from now (undefined before the first report). */
  source: string | undefined;
  /** When the figures or up/down may next change without a report (a fresh report goes stale). */
  nextStaleAt: number;
}

export class ClusterTable {
  readonly clusters: readonly ClusterRecord[];
  readonly #byName: Map<string, ClusterRecord>;
  /** Every front node's last report, per configured cluster. */
  readonly reports: ClusterReports;
  unknownReports = 0;

  constructor(configs: readonly ClusterConfig[], reportSeconds: number, downAfterIntervals: number) {
    this.clusters = configs.map((c, index) => ({ index, name: c.name, vips: c.vips, vips4: c.vips.filter((a) => isIPv4(a)), vips6: c.vips.filter((a) => !isIPv4(a)), capacity: 0, load: 0, available: 0, serversUp: 0, serversTotal: 0, reports: 0, lastReport: -Infinity, source: undefined, nextStaleAt: -Infinity }));
    this.#byName = new Map(this.clusters.map((c) => [c.name, c]));
    this.reports = new ClusterReports(reportSeconds * downAfterIntervals * 1000);
  }

  byName(name: string): ClusterRecord | undefined {
    return this.#byName.get(name);
  }

  /**
   * Applies one front node's report. `from` is the envelope's sender (the
   * front's `node`); it defaults to the cluster's name, which is what a
   * front node without a `node` key sends.
   */
  receive(body: Body<'cluster_load'>, now: number, from: string = body.cluster): boolean {
    const c = this.#byName.get(body.cluster);
    if (!c) {
      this.unknownReports++;
      return false;
    }
    this.reports.receive(from, body, now);
    c.reports++;
    c.lastReport = now;
    this.#refresh(c, now);
    return true;
  }

  /** The cluster's reporting nodes (status, metrics). */
  nodes(c: ClusterRecord): readonly NodeReport[] {
    return this.reports.nodes(c.name);
  }

  /** When this cluster's view next changes unless another report arrives (a fresh report goes stale). */
  staleAt(c: ClusterRecord): number {
    return c.nextStaleAt;
  }

  isUp(c: ClusterRecord, now: number): boolean {
    this.#refresh(c, now);
    return c.reports > 0 && this.reports.isUp(c.name, now);
  }

  /**
   * Re-derives the record's figures from the report they come from now;
   * with every node silent, the latest report's figures stay on show.
   */
  #refresh(c: ClusterRecord, now: number): void {
    if (c.reports === 0) return;
    const r = this.reports.source(c.name, now) ?? this.reports.latest(c.name);
    if (!r) return;
    c.capacity = r.capacity;
    c.load = r.load;
    c.available = r.available;
    c.serversUp = r.serversUp;
    c.serversTotal = r.serversTotal;
    c.source = r.node;
    c.nextStaleAt = this.reports.nextStaleAt(c.name, now);
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
