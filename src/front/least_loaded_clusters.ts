/**
 * Seed 000's least-loaded-cluster list: the other clusters' free capacity,
 * learnt from their cluster_load messages (front nodes subscribe to each
 * other's publish socket), feeding overflow. A configured overflow target
 * uses the live figure while its reports are fresh, its configured
 * freeCapacity before the first report, and 0 (left out) once its reports
 * have stopped for downAfter intervals.
 *
 * Another cluster may run a pair of front nodes (issue 21), each reporting
 * under its own node name: the reports are kept per node and the cluster's
 * figures are those of one report, its master's while fresh, else its
 * backup's (src/control/cluster-reports.ts, the same rules as the DNS
 * server's), so overflow follows whichever of its fronts is master and the
 * pair's capacity is never counted twice. Reports of our own cluster (our
 * pair partner's, or our own echoed) are ignored.
 */
import { ClusterReports, type NodeReport } from '../control/cluster-reports.ts';
import type { Body } from '../control/messages.ts';
import type { ServiceRuntime } from './service.ts';

/** Other clusters tracked at most. */
const MAX_PEER_CLUSTERS = 256;

export interface PeerCluster {
  readonly cluster: string;
  available: number;
  capacity: number;
  load: number;
  /** When the latest report of any of its nodes arrived. */
  lastReport: number;
  reports: number;
  /** The node its figures come from (see the file comment). */
  source: string;
  /** Every node reporting it. */
  nodes: readonly NodeReport[];
}

export class LeastLoadedClusters {
  readonly #reports: ClusterReports;
  readonly #self: string;
  /** Configured free capacity per cluster name, used until it reports. */
  #configured = new Map<string, number>();

  constructor(self: string, reportSeconds: number, downAfter: number) {
    this.#self = self;
    this.#reports = new ClusterReports(reportSeconds * downAfter * 1000);
  }

  configure(services: readonly ServiceRuntime[]): void {
    this.#configured = new Map();
    for (const s of services) for (const o of s.overflow) if (!this.#configured.has(o.cluster)) this.#configured.set(o.cluster, o.freeCapacity);
  }

  /** One report; `from` is its sender (the front's node name; the cluster's name for a front without one). */
  receive(m: Body<'cluster_load'>, now: number, from: string = m.cluster): void {
    if (m.cluster === this.#self) return;
    if (this.#reports.nodes(m.cluster).length === 0 && this.#reports.size >= MAX_PEER_CLUSTERS) return;
    this.#reports.receive(from, m, now);
  }

  /** Each other cluster as its figures stand at `now` (status, metrics). */
  get peers(): ReadonlyMap<string, PeerCluster> {
    return this.peersAt(performance.now());
  }

  peersAt(now: number): Map<string, PeerCluster> {
    const out = new Map<string, PeerCluster>();
    for (const cluster of this.#reports.clusterNames()) {
      const r = this.#reports.source(cluster, now) ?? this.#reports.latest(cluster);
      const latest = this.#reports.latest(cluster);
      if (!r || !latest) continue;
      out.set(cluster, { cluster, available: r.available, capacity: r.capacity, load: r.load, lastReport: latest.at, reports: this.#reports.reportCount(cluster), source: r.node, nodes: this.#reports.nodes(cluster) });
    }
    return out;
  }

  /** Fresh: some node of the cluster reported within the stale time. */
  isFresh(p: PeerCluster, now: number): boolean {
    return now - p.lastReport <= this.#reports.staleMs;
  }

  /** The free capacity overflow may count on: the source report's while any is fresh, else 0; undefined before any report. */
  #available(cluster: string, now: number): number | undefined {
    if (this.#reports.nodes(cluster).length === 0) return undefined;
    return this.#reports.source(cluster, now)?.available ?? 0;
  }

  /** Writes each overflow target's free capacity (what overflow is proportional to). */
  applyTo(services: readonly ServiceRuntime[], now: number): void {
    for (const s of services) {
      for (const o of s.overflow) {
        o.freeCapacity = this.#available(o.cluster, now) ?? this.#configured.get(o.cluster) ?? 0;
      }
    }
  }

  /** Clusters by free capacity, most first (fresh reports only). */
  list(now: number): PeerCluster[] {
    return [...this.peersAt(now).values()].filter((p) => this.isFresh(p, now)).sort((a, b) => b.available - a.available);
  }
}
