/**
 * A member of the cluster limits (seed 002): holds an allocation of each
 * tracked operation's cluster rate, reserves more from the coordinator when
 * it falls short, releases what its running average says it no longer
 * needs, once a second in chunks, and goes silent for a while after a
 * denial. Pure logic: the node (node.ts) delivers messages and calls
 * tick() every second; time is the caller's.
 *
 * Rules that keep the cluster limit (see coordinator.ts for the other half):
 *  - the allocation rises only on the coordinator's word (a grant answering
 *    our in-flight request, or a view answering our latest message);
 *  - it is lowered here first, then the release is sent;
 *  - one request in flight per operation; its answer is recognised by seq;
 *  - without any answer for isolationMs (measured from the send time of the
 *    last answered message) each allocation is cut to the member's share,
 *    and never raised on that account;
 *  - a fresh member starts with nothing and asks.
 */
import type { Body, MessageType } from '../control/messages.ts';
import type { Hierarchy, Operation } from './hierarchy.ts';

export type SendToCoordinator = <T extends MessageType>(coordinator: string, type: T, body: Body<T>) => void;

export interface MemberOptions {
  readonly name: string;
  readonly reserveChunk: number; // fraction of the cluster limit
  readonly releaseChunk: number; // fraction of the cluster limit
  readonly headroom: number; // fraction
  readonly estimatorMs: number;
  readonly silenceMs: number;
  readonly isolationMs: number;
  readonly requestTimeoutMs: number;
  /** Follow a reset from another member announcing a newer session (elected coordinators). */
  readonly followResets?: boolean;
}

interface OpState {
  /** Running average of the demand, tokens/s. */
  avg: number;
  /** Admitted tokens/s over the last tick (use). */
  used: number;
  lastTokens: number;
  silenceUntil: number;
  inflightSeq: number;
  inflightSentAt: number;
  inflightKind: 0 | 1 | 2; // none, reserve, release
}

export interface MemberCounts {
  reserves: number;
  releases: number;
  granted: number;
  denied: number;
  timeouts: number;
  resets: number;
  views: number;
  refused: number;
  /** Answers of another epoch or to a request no longer in flight. */
  ignored: number;
  isolations: number;
  /** Releases the coordinator asked for (fairness). */
  reclaimed: number;
}

export class Member {
  readonly name: string;
  readonly #h: Hierarchy;
  readonly #o: MemberOptions;
  readonly #send: SendToCoordinator;
  readonly #ops: OpState[];
  readonly #tracked: Operation[];
  /** The coordinator we believe in (static, or the elected leader). */
  coordinator: string | undefined;
  epoch = 0;
  #seq = 0;
  /** Our send time of the last message the coordinator answered. */
  #confirmedAt: number;
  #lastTick: number;
  isolated = false;
  refusedReason: string | undefined;
  /** The coordinator's table of every member, from the last view. */
  lastView: Body<'admission_view'>['members'] = [];
  lastViewAt = -1;
  #wanted = false;
  readonly counts: MemberCounts = { reserves: 0, releases: 0, granted: 0, denied: 0, timeouts: 0, resets: 0, views: 0, refused: 0, ignored: 0, isolations: 0, reclaimed: 0 };

  constructor(hierarchy: Hierarchy, opts: MemberOptions, send: SendToCoordinator, now: number) {
    this.name = opts.name;
    this.#h = hierarchy;
    this.#o = opts;
    this.#send = send;
    this.#confirmedAt = now;
    this.#lastTick = now;
    this.#tracked = hierarchy.operations.filter((op) => op.tracked);
    this.#ops = hierarchy.operations.map(() => ({ avg: 0, used: 0, lastTokens: 0, silenceUntil: 0, inflightSeq: 0, inflightSentAt: 0, inflightKind: 0 }));
    // A fresh member holds nothing until a coordinator grants it rate.
    for (const op of this.#tracked) hierarchy.setAllocation(op, 0);
  }

  /** The coordinator's cluster limit of op, as the unit of chunks (its service's when it has none). */
  #limitOf(op: Operation): number {
    return Number.isFinite(op.clusterLimit) ? op.clusterLimit : op.service.clusterLimit;
  }

  /** Marks that some allocation fell short (from the admission path: no sending here). */
  short(): void {
    this.#wanted = true;
  }

  /** Sends reservations for operations that fell short since the last call (outside the packet path). */
  flush(now: number): void {
    if (!this.#wanted) return;
    this.#wanted = false;
    for (const op of this.#tracked) {
      if (!op.short) continue;
      op.short = false;
      this.#reserve(op, this.#ops[op.index] as OpState, now);
    }
  }

  #desired(op: Operation, st: OpState): number {
    return Math.min(st.avg * (1 + this.#o.headroom), op.localCap);
  }

  #reserve(op: Operation, st: OpState, now: number): void {
    const c = this.coordinator;
    if (c === undefined || this.epoch === 0 || st.inflightKind !== 0 || now < st.silenceUntil) return;
    if (op.allocation >= op.localCap) return; // local limits bind first: more cluster rate would not be used
    const amount = Math.max(this.#o.reserveChunk * this.#limitOf(op), this.#desired(op, st) - op.allocation);
    const seq = ++this.#seq;
    st.inflightKind = 1;
    st.inflightSeq = seq;
    st.inflightSentAt = now;
    this.counts.reserves++;
    this.#send(c, 'admission_reserve', { epoch: this.epoch, seq, op: op.name, amount: round(amount) });
  }

  /** Lowers the allocation, then tells (the coordinator re-grants it only after a window: coordinator.ts). */
  #release(op: Operation, st: OpState, amount: number, now: number): void {
    const c = this.coordinator;
    if (c === undefined || amount <= 0) return;
    this.#h.setAllocation(op, Math.max(0, op.allocation - amount));
    const seq = ++this.#seq;
    st.inflightKind = 2;
    st.inflightSeq = seq;
    st.inflightSentAt = now;
    this.counts.releases++;
    this.#send(c, 'admission_release', { epoch: this.epoch, seq, op: op.name, amount });
  }

  /** Once a second: estimators, isolation, release in chunks, reserve ahead of need, state report. */
  tick(now: number): void {
    const dt = Math.max(1, now - this.#lastTick);
    this.#lastTick = now;
    const alpha = 1 - Math.exp(-dt / this.#o.estimatorMs);
    const isolated = now - this.#confirmedAt > this.#o.isolationMs;
    if (isolated && !this.isolated) this.counts.isolations++;
    this.isolated = isolated;
    for (const op of this.#tracked) {
      const st = this.#ops[op.index] as OpState;
      st.avg += ((op.demand * 1000) / dt - st.avg) * alpha;
      op.demand = 0;
      st.used = ((op.counts.tokens - st.lastTokens) * 1000) / dt;
      st.lastTokens = op.counts.tokens;
      if (st.inflightKind !== 0 && now - st.inflightSentAt >= this.#o.requestTimeoutMs) {
        st.inflightKind = 0;
        this.counts.timeouts++;
      }
      if (isolated && op.allocation > op.share) this.#h.setAllocation(op, op.share);
      if (st.inflightKind !== 0 || this.epoch === 0) continue;
      const desired = this.#desired(op, st);
      const excess = op.allocation - desired;
      const chunk = this.#o.releaseChunk * this.#limitOf(op);
      if (excess > 0 && (excess >= chunk / 2 || st.avg < 0.01)) this.#release(op, st, round(Math.min(chunk, excess)), now);
      else if (desired > op.allocation + 0.5) this.#reserve(op, st, now);
    }
    this.#report(now);
  }

  #report(now: number): void {
    const c = this.coordinator;
    if (c === undefined) return;
    const ops: Body<'admission_state'>['ops'] = [];
    for (const op of this.#tracked) {
      const st = this.#ops[op.index] as OpState;
      ops.push({ op: op.name, allocation: round(op.allocation), rate: round(st.avg), silenced: now < st.silenceUntil });
    }
    this.#send(c, 'admission_state', { epoch: this.epoch, seq: ++this.#seq, limits: this.#h.digest, isolated: this.isolated, ops });
  }

  /** A reset from `from`: taken when it is the coordinator we believe in and a new session. */
  onReset(from: string, body: Body<'admission_reset'>, now: number): void {
    // Elected coordinators (etcd): a newer session than ours announced by its coordinator is
    // followed even if our view of the election has not caught up (or is wrong).
    if (this.#o.followResets === true && from !== this.coordinator && body.coordinator === from && body.epoch > this.epoch) this.setCoordinator(from);
    if (from !== this.coordinator || body.coordinator !== from || body.epoch === this.epoch) {
      this.counts.ignored++;
      return;
    }
    this.counts.resets++;
    this.epoch = body.epoch;
    this.refusedReason = undefined;
    for (const st of this.#ops) st.inflightKind = 0;
    this.#report(now);
  }

  onGrant(from: string, body: Body<'admission_grant'>, now: number): void {
    const op = this.#h.operation(body.op);
    const st = op === undefined ? undefined : this.#ops[op.index];
    if (op === undefined || st === undefined || from !== this.coordinator || body.epoch !== this.epoch || st.inflightKind === 0 || st.inflightSeq !== body.seq) {
      this.counts.ignored++;
      return;
    }
    const kind = st.inflightKind;
    st.inflightKind = 0;
    if (st.inflightSentAt > this.#confirmedAt) this.#confirmedAt = st.inflightSentAt;
    if (this.isolated) this.isolated = false;
    // Absolute: the coordinator's record after our request (a release's answer confirms our lowered value).
    this.#h.setAllocation(op, kind === 2 ? Math.min(op.allocation, body.allocation) : body.allocation);
    if (kind === 1) {
      if (body.granted) this.counts.granted++;
      else {
        this.counts.denied++;
        st.silenceUntil = now + this.#o.silenceMs;
      }
    }
  }

  onView(from: string, body: Body<'admission_view'>, now: number): void {
    if (from !== this.coordinator || body.epoch !== this.epoch) {
      this.counts.ignored++;
      return;
    }
    this.counts.views++;
    this.lastView = body.members;
    this.lastViewAt = now;
    if (body.echo > this.#confirmedAt) this.#confirmedAt = body.echo;
    this.isolated = false;
    // Asked back (a member below its share is starved): give a chunk now, lowering first as always.
    for (const a of body.allocations) {
      if (a.reclaim <= 0) continue;
      const op = this.#h.operation(a.op);
      const st = op === undefined ? undefined : this.#ops[op.index];
      if (op === undefined || st === undefined || !op.tracked || st.inflightKind !== 0) continue;
      const chunk = this.#o.releaseChunk * this.#limitOf(op);
      this.counts.reclaimed++;
      this.#release(op, st, round(Math.min(a.reclaim, chunk, op.allocation)), now);
    }
    // Only when the coordinator had processed everything we sent is its record exact for us.
    if (body.seq !== this.#seq) return;
    for (const a of body.allocations) {
      const op = this.#h.operation(a.op);
      const st = op === undefined ? undefined : this.#ops[op.index];
      if (op === undefined || st === undefined || !op.tracked || st.inflightKind !== 0) continue;
      this.#h.setAllocation(op, a.allocation);
    }
  }

  onRefused(from: string, body: Body<'admission_refused'>): void {
    if (from !== this.coordinator) {
      this.counts.ignored++;
      return;
    }
    this.counts.refused++;
    this.refusedReason = body.reason;
  }

  /** A new coordinator (election): its reset (or our state's answer) starts the session. */
  setCoordinator(name: string | undefined): void {
    if (name === this.coordinator) return;
    this.coordinator = name;
    this.epoch = 0;
    for (const st of this.#ops) st.inflightKind = 0;
  }

  /** Per tracked operation: allocation, use, demand average, silence (status). */
  operations(now: number): { op: string; allocation: number; share: number; used: number; demand: number; silenced: boolean; inflight: string | null }[] {
    return this.#tracked.map((op) => {
      const st = this.#ops[op.index] as OpState;
      return { op: op.name, allocation: round(op.allocation), share: round(op.share), used: round(st.used), demand: round(st.avg), silenced: now < st.silenceUntil, inflight: st.inflightKind === 1 ? 'reserve' : st.inflightKind === 2 ? 'release' : null };
    });
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
