/**
 * One view of a cluster from several front nodes (issue 21): a cluster may
 * run a pair of front nodes (keepalived master and backup), each of which
 * publishes its own cluster_load. Both the DNS server's cluster table
 * (src/dns/cluster_state.ts) and a front node's overflow table
 * (src/front/least_loaded_clusters.ts) read them through this module, so
 * the two ends agree on what a cluster is:
 *
 *   - per cluster, the last report of each reporting node, keyed by the
 *     envelope's sender (`from`, the front's `node`); at most MAX_NODES
 *     nodes per cluster: a new node beyond that replaces the stalest,
 *     counted in `replaced` (a misconfigured third front must not grow the
 *     table without bound, nor push out the nodes that are talking);
 *   - the cluster is up while ANY node's report is fresh (received within
 *     staleMs) and says serversUp > 0: down only when all are silent;
 *   - its figures come from ONE report, never a sum (both fronts of a pair
 *     see the same servers through the same agents, so adding them would
 *     double the capacity): the freshest fresh report whose role is master
 *     or single; when there is none, the freshest fresh report of any role
 *     (the master fell silent: the backup carries the cluster). A backup's
 *     figures are not used while a master's are fresh, even when they look
 *     better: the master is the node that takes the traffic.
 *
 * Pure: no sockets, no clock of its own (`now` is injected, ms on one
 * monotonic clock). Base folder: imports no daemon.
 */
import type { Body } from './messages.ts';

export type HaRole = 'single' | 'master' | 'backup';
export const HA_ROLES: readonly HaRole[] = ['single', 'master', 'backup'];

/** Reporting nodes kept per cluster at most (a pair, with room for a misconfiguration to be seen). */
export const MAX_NODES = 8;

export interface NodeReport {
  readonly node: string;
  role: HaRole;
  capacity: number;
  load: number;
  available: number;
  serversUp: number;
  serversTotal: number;
  /** When the last report arrived (receiver's clock). */
  at: number;
  reports: number;
}

export class ClusterReports {
  readonly staleMs: number;
  readonly maxNodes: number;
  readonly #clusters = new Map<string, Map<string, NodeReport>>();
  /** Nodes pushed out because a cluster already had maxNodes reporting. */
  replaced = 0;

  constructor(staleMs: number, maxNodes: number = MAX_NODES) {
    this.staleMs = staleMs;
    this.maxNodes = maxNodes;
  }

  /** Records `from`'s report of its cluster (an absent role is 'single': a front older than issue 21). */
  receive(from: string, body: Body<'cluster_load'>, now: number): NodeReport {
    let nodes = this.#clusters.get(body.cluster);
    if (!nodes) {
      nodes = new Map();
      this.#clusters.set(body.cluster, nodes);
    }
    let r = nodes.get(from);
    if (!r) {
      if (nodes.size >= this.maxNodes) {
        let stalest: NodeReport | undefined;
        for (const n of nodes.values()) if (!stalest || n.at < stalest.at) stalest = n;
        if (stalest) nodes.delete(stalest.node);
        this.replaced++;
      }
      r = { node: from, role: 'single', capacity: 0, load: 0, available: 0, serversUp: 0, serversTotal: 0, at: now, reports: 0 };
      nodes.set(from, r);
    }
    r.role = body.role ?? 'single';
    r.capacity = body.capacity;
    r.load = body.load;
    r.available = body.available;
    r.serversUp = body.serversUp;
    r.serversTotal = body.serversTotal;
    r.at = now;
    r.reports++;
    return r;
  }

  /** The reporting nodes of a cluster, in first-heard order. */
  nodes(cluster: string): readonly NodeReport[] {
    const nodes = this.#clusters.get(cluster);
    return nodes ? [...nodes.values()] : [];
  }

  /** Clusters heard from (in first-heard order). */
  clusterNames(): string[] {
    return [...this.#clusters.keys()];
  }

  isFresh(r: NodeReport, now: number): boolean {
    return now - r.at <= this.staleMs;
  }

  /** Up: some node's report is fresh and has servers up. */
  isUp(cluster: string, now: number): boolean {
    for (const r of this.nodes(cluster)) if (this.isFresh(r, now) && r.serversUp > 0) return true;
    return false;
  }

  /**
   * The one report the cluster's figures come from: the freshest fresh
   * master or single; else the freshest fresh of any role; undefined when
   * every node is silent.
   */
  source(cluster: string, now: number): NodeReport | undefined {
    let best: NodeReport | undefined;
    let any: NodeReport | undefined;
    for (const r of this.nodes(cluster)) {
      if (!this.isFresh(r, now)) continue;
      if (!any || r.at > any.at) any = r;
      if (r.role !== 'backup' && (!best || r.at > best.at)) best = r;
    }
    return best ?? any;
  }

  /** The most recent report of any node, fresh or not (figures to show once a cluster is down). */
  latest(cluster: string): NodeReport | undefined {
    let out: NodeReport | undefined;
    for (const r of this.nodes(cluster)) if (!out || r.at > out.at) out = r;
    return out;
  }

  /**
   * When source() or isUp() may next change without a new report: the
   * earliest moment a fresh report goes stale (Infinity when none is fresh).
   */
  nextStaleAt(cluster: string, now: number): number {
    let t = Infinity;
    for (const r of this.nodes(cluster)) if (this.isFresh(r, now)) t = Math.min(t, r.at + this.staleMs);
    return t;
  }

  /** Reports received for the cluster, over all its nodes (those still kept). */
  reportCount(cluster: string): number {
    let n = 0;
    for (const r of this.nodes(cluster)) n += r.reports;
    return n;
  }

  /** Clusters kept (callers bound them: the DNS by its config, overflow by its 256 peers). */
  get size(): number {
    return this.#clusters.size;
  }
}
