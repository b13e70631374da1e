/**
 * Seed 000's least-loaded-cluster list: the other clusters' free capacity,
 * learnt from their cluster_load messages (front nodes subscribe to each
 * other's publish socket), feeding overflow. A configured overflow target
 * uses the live figure while its reports are fresh, its configured
 * freeCapacity before the first report, and 0 (left out) once its reports
 * have stopped for downAfter intervals.
 */
import type { Body } from '../control/messages.ts';
import type { ServiceRuntime } from './service.ts';

export interface PeerCluster {
  readonly cluster: string;
  available: number;
  capacity: number;
  load: number;
  lastReport: number;
  reports: number;
}

export class LeastLoadedClusters {
  readonly peers = new Map<string, PeerCluster>();
  readonly #staleMs: number;
  readonly #self: string;
  /** Configured free capacity per cluster name, used until it reports. */
  #configured = new Map<string, number>();

  constructor(self: string, reportSeconds: number, downAfter: number) {
    this.#self = self;
    this.#staleMs = reportSeconds * downAfter * 1000;
  }

  configure(services: readonly ServiceRuntime[]): void {
    this.#configured = new Map();
    for (const s of services) for (const o of s.overflow) if (!this.#configured.has(o.cluster)) this.#configured.set(o.cluster, o.freeCapacity);
  }

  receive(m: Body<'cluster_load'>, now: number): void {
    if (m.cluster === this.#self) return;
    const p = this.peers.get(m.cluster);
    if (p) {
      p.available = m.available;
      p.capacity = m.capacity;
      p.load = m.load;
      p.lastReport = now;
      p.reports++;
    } else if (this.peers.size < 256) {
      this.peers.set(m.cluster, { cluster: m.cluster, available: m.available, capacity: m.capacity, load: m.load, lastReport: now, reports: 1 });
    }
  }

  isFresh(p: PeerCluster, now: number): boolean {
    return now - p.lastReport <= this.#staleMs;
  }

  /** Writes each overflow target's free capacity (what overflow is proportional to). */
  applyTo(services: readonly ServiceRuntime[], now: number): void {
    for (const s of services) {
      for (const o of s.overflow) {
        const p = this.peers.get(o.cluster);
        o.freeCapacity = p ? (this.isFresh(p, now) ? p.available : 0) : (this.#configured.get(o.cluster) ?? 0);
      }
    }
  }

  /** Clusters by free capacity, most first (fresh reports only). */
  list(now: number): PeerCluster[] {
    return [...this.peers.values()].filter((p) => this.isFresh(p, now)).sort((a, b) => b.available - a.available);
  }
}
