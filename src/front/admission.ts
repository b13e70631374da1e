/**
 * The front node's admission control (issue 9): the `admission:` section's
 * hierarchy of buckets (src/admission/hierarchy.ts), applied by the
 * checkpoints of kind `admission`, and, with cluster limits, this front
 * node's membership of the cluster (src/admission/node.ts: member,
 * coordinator when elected, sockets).
 *
 * Invariant: at most one hierarchy and one member run. A reload that
 * leaves the section (and the service order it is keyed by) unchanged
 * keeps both: buckets, allocations and the coordinator session go on. A
 * changed section stops the member, then starts a new hierarchy and
 * member (they begin with no cluster allocation and ask the coordinator
 * again; the coordinator still counts what the previous member held, so
 * the limit holds). A member that cannot start (key unreadable, address
 * taken) leaves the cluster allocations at 0: connections under cluster
 * limits are rejected, local-only limits keep working.
 */
import type { Logger } from '../log/logger.ts';
import { Hierarchy } from '../admission/hierarchy.ts';
import { AdmissionNode, type AdmissionNodeStatus } from '../admission/node.ts';
import type { Shaper } from '../shaping/shaper.ts';
import type { FrontConfig } from './config.ts';

export interface AdmissionStatus {
  services: {
    service: string;
    weight: number;
    localLimit: number | null;
    clusterLimit: number | null;
    allocation: number | null;
    rejectedLocal: number;
    rejectedCluster: number;
    operations: { operation: string; weight: number; cost: number; localLimit: number | null; clusterLimit: number | null; allocation: number | null; admitted: number; free: number; rejectedLocal: number; rejectedCluster: number; tokens: number }[];
  }[];
  cluster: AdmissionNodeStatus | null;
}

export class FrontAdmission {
  readonly #log: Logger;
  #hierarchy: Hierarchy | undefined;
  #node: AdmissionNode | undefined;
  #key = 'null';
  #generation = 0;
  #stopped = false;

  constructor(log: Logger) {
    this.#log = log;
  }

  get hierarchy(): Hierarchy | undefined {
    return this.#hierarchy;
  }

  get node(): AdmissionNode | undefined {
    return this.#node;
  }

  /**
   * Makes admission match `cfg` (start, keep, replace or stop) and attaches
   * the admission checkpoints.
   */
  async apply(cfg: Readonly<FrontConfig>, shaper: () => Shaper | undefined): Promise<void> {
    const a = cfg.admission;
    const services = cfg.services.map((s) => s.name);
    const key = JSON.stringify(a === undefined ? null : [a, services]);
    const generation = ++this.#generation;
    if (key !== this.#key) {
      // The listen address is the old member's until it stops: stop it first.
      const old = this.#node;
      this.#node = undefined;
      if (old) await old.stop();
      const h = a === undefined ? undefined : new Hierarchy(a, services, a.cluster?.members.length ?? 1);
      this.#hierarchy = h;
      this.#key = key;
      if (h !== undefined && a?.cluster !== undefined) {
        try {
          const node = await AdmissionNode.start(a.cluster, h, this.#log.child({ part: 'admission' }));
          if (generation !== this.#generation || this.#stopped) {
            await node.stop();
            return;
          }
          this.#node = node;
        } catch (err) {
          // Without a member the cluster allocations stay 0: connections under cluster limits are rejected (fail closed).
          this.#log.error({ err: err instanceof Error ? err.message : err }, 'admission member not started: connections under cluster limits are rejected until it can start (reload to retry)');
          this.#key = 'failed';
        }
      }
      if (h) this.#log.info({ services: h.services.map((s) => s.name), member: a?.cluster?.member ?? null }, 'admission control started');
    }
    this.attach(shaper());
  }

  attach(shaper: Shaper | undefined): void {
    shaper?.attachAdmission(this.#hierarchy);
  }

  status(): AdmissionStatus | undefined {
    const h = this.#hierarchy;
    if (h === undefined) return undefined;
    const n = (x: number): number | null => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null);
    return {
      services: h.services.map((s) => ({
        service: s.name,
        weight: s.weight,
        localLimit: n(s.localLimit),
        clusterLimit: n(s.clusterLimit),
        allocation: s.cluster ? n(s.cluster.limit) : null,
        ...s.counts,
        operations: s.operations.map((o) => ({
          operation: o.name.slice(s.name.length + 1),
          weight: o.weight,
          cost: o.cost,
          localLimit: n(o.localLimit),
          clusterLimit: n(o.clusterLimit),
          allocation: o.cluster ? n(o.cluster.limit) : null,
          ...o.counts,
        })),
      })),
      cluster: this.#node?.status(Date.now()) ?? null,
    };
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const node = this.#node;
    this.#node = undefined;
    await node?.stop();
  }
}
