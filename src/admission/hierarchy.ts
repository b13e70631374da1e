/**
 * The hierarchy of admission buckets on one front node (seed 002): each
 * configured service has a bucket per limit it has, and so has each of its
 * operations. A connection of operation o in service s costs
 * weight(s) x weight(o) tokens and is admitted only when every bucket on
 * its path has room:
 *
 *     o.local   the operation's local limit
 *     s.local   the service's local limit
 *     o.cluster this member's allocation of the operation's cluster rate
 *     s.cluster the sum of its operations' allocations (seed 002: "the rate
 *               limit for the service bucket will be the sum of the rates of
 *               its child operation buckets")
 *
 * and then takes the cost from each of them. A cost of 0 is admitted
 * without touching any bucket. An operation is "tracked" (has a cluster
 * bucket and an allocation) when it or its service has a cluster limit.
 * Allocations are set by the member (member.ts) on the coordinator's
 * word; they start at 0. `share` (the cluster limit divided by the number
 * of members) is the most a member keeps while it cannot reach a
 * coordinator.
 *
 * Hot path: admit() allocates nothing, logs nothing; a shortfall of
 * allocation is reported through `onShort` (the member sends a reservation
 * later, outside the packet path).
 */
import { createHash } from 'node:crypto';
import { SlidingBucket } from './bucket.ts';
import { OTHER, type AdmissionConfig } from './config.ts';
import { SourcePrefixes } from '../packet/source_prefixes.ts';
import { CLIENT6_BASE } from '../front/client6.ts';
import { ADMISSION_NOT_CONFIGURED as NOT_CONFIGURED, AdmissionVerdict as Verdict, type AdmissionLimiter } from '../shaping/limiters.ts';

// The verdicts are the shaping engine's (it declares the limiter the
// hierarchy implements); re-exported under the hierarchy's own names.
export { Verdict, NOT_CONFIGURED };

export interface OperationCounts {
  admitted: number;
  /** Connections of weight 0 (admitted without counting). */
  free: number;
  rejectedLocal: number;
  rejectedCluster: number;
  /** Tokens admitted. */
  tokens: number;
}

export class ServiceNode {
  readonly name: string;
  readonly weight: number;
  readonly localLimit: number;
  readonly clusterLimit: number;
  readonly local: SlidingBucket | undefined;
  readonly cluster: SlidingBucket | undefined;
  readonly operations: Operation[] = [];
  readonly counts = { rejectedLocal: 0, rejectedCluster: 0 };

  constructor(name: string, weight: number, localLimit: number | undefined, clusterLimit: number | undefined, tracked: boolean) {
    this.name = name;
    this.weight = weight;
    this.localLimit = localLimit ?? Infinity;
    this.clusterLimit = clusterLimit ?? Infinity;
    this.local = localLimit === undefined ? undefined : new SlidingBucket(localLimit);
    this.cluster = tracked ? new SlidingBucket(0) : undefined;
  }
}

export class Operation {
  /** Index among all operations of the node (reservations name them "service/operation"). */
  readonly index: number;
  readonly name: string;
  readonly service: ServiceNode;
  readonly weight: number;
  /** Tokens one connection costs: service weight x operation weight. */
  readonly cost: number;
  readonly localLimit: number;
  readonly clusterLimit: number;
  readonly local: SlidingBucket | undefined;
  /** This member's allocation as a bucket (tracked operations only). */
  readonly cluster: SlidingBucket | undefined;
  /** The most this member holds when it cannot reach a coordinator (tracked only). */
  share = 0;
  /** Tokens asked since the member's last tick, admitted or not (tracked only). */
  demand = 0;
  /** Set when a connection found the allocation short; the member clears it when it reserves. */
  short = false;
  readonly counts: OperationCounts = { admitted: 0, free: 0, rejectedLocal: 0, rejectedCluster: 0, tokens: 0 };
  readonly #ports: Int32Array;
  /** The client class (`when.sourceIn`), undefined when not given. */
  readonly #sources: SourcePrefixes | undefined;

  /** `tracked`: the operation or its service has a cluster limit. */
  constructor(index: number, name: string, service: ServiceNode, weight: number, localLimit: number | undefined, clusterLimit: number | undefined, tracked: boolean, ports: readonly number[], prefixes: readonly string[]) {
    this.index = index;
    this.name = `${service.name}/${name}`;
    this.service = service;
    this.weight = weight;
    this.cost = service.weight * weight;
    this.localLimit = localLimit ?? Infinity;
    this.clusterLimit = clusterLimit ?? Infinity;
    this.local = localLimit === undefined ? undefined : new SlidingBucket(localLimit);
    this.cluster = tracked ? new SlidingBucket(0) : undefined;
    this.#ports = Int32Array.from(ports);
    this.#sources = prefixes.length === 0 ? undefined : new SourcePrefixes(prefixes);
  }

  get tracked(): boolean {
    return this.cluster !== undefined;
  }

  /** This member's allocation of the operation's cluster rate (tokens/s). */
  get allocation(): number {
    return this.cluster?.limit ?? Infinity;
  }

  /** The largest rate this member could use: its local limits (tokens/s). */
  get localCap(): number {
    return Math.min(this.localLimit, this.service.localLimit);
  }

  /**
   * Whether a connection belongs to this operation. `src` is the client
   * number (IPv4 u32, or an IPv6 one >= 2^32: front/client6.ts); an IPv6
   * client's address is the four words at src6[at..at+3].
   */
  matches(src: number, src6: Uint32Array, at: number, dstPort: number): boolean {
    const np = this.#ports.length;
    if (np > 0) {
      let hit = false;
      for (let k = 0; k < np && !hit; k++) hit = this.#ports[k] === dstPort;
      if (!hit) return false;
    }
    const sources = this.#sources;
    return sources === undefined || (src >= CLIENT6_BASE ? sources.has6(src6, at) : sources.has4(src));
  }
}

export class Hierarchy implements AdmissionLimiter {
  readonly services: ServiceNode[] = [];
  readonly operations: Operation[] = [];
  /** Admission service per front service index (undefined: not configured). */
  readonly #byFrontService: (ServiceNode | undefined)[];
  readonly #byName = new Map<string, Operation>();
  /** Digest of the limits and the member list: members with different ones must not share allocations. */
  readonly digest: string;
  /** The last operation admit() looked at (for the caller's counts and reservations). */
  last: Operation | undefined;
  /** Called (after op.short is set) when a tracked operation's allocation fell short: must only schedule work. */
  onShort: () => void = () => {};

  /**
   * `frontServices`: the front node's virtual service names in index order.
   * `members`: the cluster's member count (shares), 1 without a cluster.
   */
  constructor(cfg: Readonly<AdmissionConfig>, frontServices: readonly string[], members: number) {
    this.#byFrontService = frontServices.map(() => undefined);
    for (const s of cfg.services) {
      const tracked = s.clusterLimit !== undefined;
      const svc = new ServiceNode(s.service, s.weight, s.localLimit, s.clusterLimit, tracked || s.operations.some((o) => o.clusterLimit !== undefined));
      this.services.push(svc);
      const fi = frontServices.indexOf(s.service);
      if (fi >= 0) this.#byFrontService[fi] = svc;
      const add = (name: string, weight: number, local: number | undefined, cluster: number | undefined, ports: readonly number[], prefixes: readonly string[]): void => {
        // Under a service with a cluster limit every operation is tracked: its rate counts toward the service's.
        const op = new Operation(this.operations.length, name, svc, weight, local, cluster, tracked || cluster !== undefined, ports, prefixes);
        svc.operations.push(op);
        this.operations.push(op);
        this.#byName.set(op.name, op);
      };
      for (const o of s.operations) add(o.name, o.weight, o.localLimit, o.clusterLimit, o.when?.destinationPort ?? [], o.when?.sourceIn ?? []);
      add(OTHER, 1, undefined, undefined, [], []);
    }
    // Shares: each tracked operation's part of its own limit and of its service's, per member.
    for (const svc of this.services) {
      const tracked = svc.operations.filter((o) => o.tracked);
      for (const op of tracked) {
        op.share = Math.min(op.clusterLimit / members, svc.clusterLimit / (members * tracked.length));
        // Nothing until a coordinator grants it (member.ts): a lone hierarchy fails closed on cluster limits.
        this.setAllocation(op, 0);
      }
    }
    this.digest = createHash('sha256')
      .update(JSON.stringify([cfg.services, cfg.cluster?.members.map((m) => m.name) ?? []]))
      .digest('hex')
      .slice(0, 32);
  }

  operation(name: string): Operation | undefined {
    return this.#byName.get(name);
  }

  /** Whether a front service has admission configured. */
  configured(frontService: number): boolean {
    return this.#byFrontService[frontService] !== undefined;
  }

  /** Sets a tracked operation's allocation and its service's sum. */
  setAllocation(op: Operation, tokens: number): void {
    const c = op.cluster;
    if (c === undefined) return;
    c.limit = tokens;
    const svc = op.service;
    if (svc.cluster === undefined) return;
    let sum = 0;
    for (const o of svc.operations) if (o.cluster !== undefined) sum += o.cluster.limit;
    svc.cluster.limit = sum;
  }

  /** The operation a connection belongs to (its service's `other` when none matches). */
  classify(svc: ServiceNode, src: number, src6: Uint32Array, at: number, dstPort: number): Operation {
    const ops = svc.operations;
    const n = ops.length - 1;
    for (let i = 0; i < n; i++) {
      const op = ops[i] as Operation;
      if (op.matches(src, src6, at, dstPort)) return op;
    }
    return ops[n] as Operation;
  }

  /**
   * The admission decision for a new connection of front service
   * `frontService` from client `src` (address words at src6[at..at+3]
   * for an IPv6 one): a Verdict, or NOT_CONFIGURED. Sets `last`.
   */
  admit(frontService: number, src: number, src6: Uint32Array, at: number, dstPort: number, now: number): number {
    const svc = this.#byFrontService[frontService];
    if (svc === undefined) {
      this.last = undefined;
      return NOT_CONFIGURED;
    }
    const op = this.classify(svc, src, src6, at, dstPort);
    this.last = op;
    const cost = op.cost;
    if (cost <= 0) {
      op.counts.admitted++;
      op.counts.free++;
      return Verdict.Admit;
    }
    if (op.cluster !== undefined) op.demand += cost;
    let verdict: number = Verdict.Admit;
    if (op.local !== undefined && !op.local.fits(cost, now)) verdict = Verdict.OperationLocal;
    else if (svc.local !== undefined && !svc.local.fits(cost, now)) verdict = Verdict.ServiceLocal;
    else if (op.cluster !== undefined && !op.cluster.fits(cost, now)) verdict = Verdict.OperationCluster;
    else if (svc.cluster !== undefined && op.cluster !== undefined && !svc.cluster.fits(cost, now)) verdict = Verdict.ServiceCluster;
    if (verdict === Verdict.Admit) {
      op.local?.take(cost, now);
      svc.local?.take(cost, now);
      if (op.cluster !== undefined) {
        op.cluster.take(cost, now);
        svc.cluster?.take(cost, now);
      }
      op.counts.admitted++;
      op.counts.tokens += cost;
      return verdict;
    }
    if (verdict === Verdict.OperationLocal || verdict === Verdict.ServiceLocal) {
      op.counts.rejectedLocal++;
      if (verdict === Verdict.ServiceLocal) svc.counts.rejectedLocal++;
      return verdict;
    }
    op.counts.rejectedCluster++;
    if (verdict === Verdict.ServiceCluster) svc.counts.rejectedCluster++;
    if (!op.short) {
      op.short = true;
      this.onShort();
    }
    return verdict;
  }
}
