/**
 * The coordinator of the cluster limits (seed 002): one member, elected
 * (election.ts), keeps every member's reservation of every tracked
 * operation and grants or denies reservations against the operation's and
 * its service's cluster limits. Pure logic: messages come in as calls, go
 * out through `send`, time is the caller's.
 *
 * Invariant (the safety property): for every operation and service, the
 * sum over members of what each member may be using is at most the
 * cluster limit. A member raises its allocation only on the coordinator's
 * word, and lowers it on its own before telling. So it suffices that the
 * coordinator counts each member at no less than what that member may
 * hold:
 *
 *   heard in this epoch     its record (grants raise it, releases lower it)
 *   not heard, settling     nothing is granted to anyone: states rebuild
 *   not heard, settled      its share (limit / members): a member that has
 *                           heard no coordinator for isolationMs holds at
 *                           most that (member.ts), and settling lasts
 *                           until every member was heard or isolationMs
 *                           passed since the reset
 *   heard, then silent for  min(record, share), for the same reason
 *   isolationMs
 *
 * Fairness (beyond the seed, which grants first come first served): a
 * member below its share that is denied is remembered as wanting for
 * WANT_MS with what it went without; meanwhile members at or above their
 * share only get rate beyond that, and those above their share are asked
 * in their next view to give that much back (`reclaim`, down to their
 * share at most, released by the member in chunks). So a light member is not
 * starved by a heavy one that reserved first.
 *
 * Cooling: rate a saturated member gives back on a reclaim (or loses when
 * cut to its share) has already been spent in its current one-second
 * window; granted to another at once, the two together could pass the
 * limit within that second. So that rate is counted as taken for one
 * window (COOL_MS) before it is granted again. Releases by the running
 * average are not cooled: they give back rate the member stopped using
 * (cooling them too was measured to cost ~6% of the limit in use).
 *
 * A state report never lowers a record within an epoch: the member may be
 * about to receive a grant it asked for before it sent the report. After
 * a reset the first state of each member is taken as its record (what the
 * previous coordinator had granted it), bounded by what is left so that a
 * garbled report cannot break the limit.
 */
import type { Body, MessageType } from '../control/messages.ts';
import type { Hierarchy, Operation } from './hierarchy.ts';

/** How long a member denied below its share keeps others from growing past theirs (ms). */
const WANT_MS = 3000;

/** Released rate is re-granted after this long: the buckets' window (bucket.ts). */
const COOL_MS = 1000;

export type Send = <T extends MessageType>(member: string, type: T, body: Body<T>) => void;

interface MemberRecord {
  readonly name: string;
  heard: boolean;
  /** Coordinator's clock when last heard; -1 never. */
  lastHeard: number;
  /** Reported by the member (status). */
  isolated: boolean;
  /** Set when silent for isolationMs: its records were cut to its share. */
  expired: boolean;
  /** Per operation index (tracked only; others stay 0). */
  readonly alloc: Float64Array;
  /** When it was last denied (in part) while below its share, per operation (-Infinity: never)... */
  readonly wanting: Float64Array;
  /** ...and how much it went without then. */
  readonly wanted: Float64Array;
  readonly rate: Float64Array;
  readonly silenced: Uint8Array;
}

export interface CoordinatorCounts {
  states: number;
  reserves: number;
  releases: number;
  granted: number;
  denied: number;
  deniedSettling: number;
  /** Messages of another epoch, answered with a reset. */
  staleEpoch: number;
  /** Members refused: unknown name or different limits. */
  refused: number;
  /** Members cut to their share after silence. */
  expired: number;
  /** Reservations of an operation this coordinator does not track. */
  unknownOperation: number;
}

export class Coordinator {
  readonly epoch: number;
  readonly name: string;
  readonly #h: Hierarchy;
  readonly #members = new Map<string, MemberRecord>();
  readonly #send: Send;
  readonly #isolationMs: number;
  readonly #settleUntil: number;
  #settled = false;
  /** Per operation index: released amounts and when they may be granted again. */
  readonly #cooling: { amount: number; until: number }[][];
  readonly counts: CoordinatorCounts = { states: 0, reserves: 0, releases: 0, granted: 0, denied: 0, deniedSettling: 0, staleEpoch: 0, refused: 0, expired: 0, unknownOperation: 0 };

  constructor(name: string, hierarchy: Hierarchy, members: readonly string[], epoch: number, now: number, isolationMs: number, send: Send) {
    this.name = name;
    this.#h = hierarchy;
    this.epoch = epoch;
    this.#send = send;
    this.#isolationMs = isolationMs;
    this.#settleUntil = now + isolationMs;
    const n = hierarchy.operations.length;
    this.#cooling = hierarchy.operations.map(() => []);
    for (const m of members) this.#members.set(m, { name: m, heard: false, lastHeard: -1, isolated: false, expired: false, alloc: new Float64Array(n), wanting: new Float64Array(n).fill(-Infinity), wanted: new Float64Array(n), rate: new Float64Array(n), silenced: new Uint8Array(n) });
  }

  /** Tells every member about this session (seed 002: the reset after failover). */
  announce(): void {
    for (const m of this.#members.keys()) this.#send(m, 'admission_reset', { epoch: this.epoch, coordinator: this.name });
  }

  get settled(): boolean {
    return this.#settled;
  }

  #settle(now: number): boolean {
    if (this.#settled) return true;
    let all = true;
    for (const m of this.#members.values()) all &&= m.heard;
    if (all || now >= this.#settleUntil) this.#settled = true;
    return this.#settled;
  }

  /** What member m is counted at for operation op (see the invariant above). */
  #counted(m: MemberRecord, op: Operation): number {
    if (m.heard) return m.alloc[op.index] ?? 0;
    return this.#settled ? op.share : 0;
  }

  /** Released rate of op still cooling at `now` (pruned as it goes). */
  #cool(op: Operation, now: number): number {
    const list = this.#cooling[op.index];
    if (list === undefined || list.length === 0) return 0;
    let sum = 0;
    let keep = 0;
    for (const c of list) {
      if (c.until <= now) continue;
      sum += c.amount;
      list[keep++] = c;
    }
    list.length = keep;
    return sum;
  }

  #coolAdd(op: Operation, amount: number, now: number): void {
    if (amount > 0) this.#cooling[op.index]?.push({ amount, until: now + COOL_MS });
  }

  /** Rate of op (and of its service) not counted to anyone (cooling rate counts as taken); `except` is left out of the sums. */
  #free(op: Operation, except: MemberRecord | undefined, now: number): number {
    let opSum = this.#cool(op, now);
    let svcSum = 0;
    for (const o of op.service.operations) if (o.tracked) svcSum += this.#cool(o, now);
    for (const m of this.#members.values()) {
      if (m === except) continue;
      opSum += this.#counted(m, op);
      for (const o of op.service.operations) if (o.tracked) svcSum += this.#counted(m, o);
    }
    if (except !== undefined) for (const o of op.service.operations) if (o.tracked && o !== op) svcSum += this.#counted(except, o);
    return Math.max(0, Math.min(op.clusterLimit - opSum, op.service.clusterLimit - svcSum));
  }

  #member(from: string, now: number): MemberRecord | undefined {
    const m = this.#members.get(from);
    if (m === undefined) {
      this.counts.refused++;
      this.#send(from, 'admission_refused', { epoch: this.epoch, reason: `${from} is not a member of this coordinator's cluster` });
      return undefined;
    }
    m.lastHeard = now;
    if (m.expired) m.expired = false;
    return m;
  }

  #epochOk(from: string, epoch: number): boolean {
    if (epoch === this.epoch) return true;
    this.counts.staleEpoch++;
    this.#send(from, 'admission_reset', { epoch: this.epoch, coordinator: this.name });
    return false;
  }

  onState(from: string, body: Body<'admission_state'>, sentAt: number, now: number): void {
    this.counts.states++;
    if (!this.#epochOk(from, body.epoch)) return;
    if (body.limits !== this.#h.digest) {
      this.counts.refused++;
      this.#send(from, 'admission_refused', { epoch: this.epoch, reason: 'limits or member list differ from the coordinator\'s: every member must carry the same admission services and members' });
      return;
    }
    const m = this.#member(from, now);
    if (m === undefined) return;
    m.isolated = body.isolated;
    const rebuild = !m.heard;
    for (const s of body.ops) {
      const op = this.#h.operation(s.op);
      if (op === undefined || !op.tracked) continue;
      m.rate[op.index] = s.rate;
      m.silenced[op.index] = s.silenced ? 1 : 0;
      if (rebuild) m.alloc[op.index] = Math.min(s.allocation, this.#free(op, m, now));
    }
    m.heard = true;
    this.#settle(now);
    const allocations: { op: string; allocation: number; reclaim: number }[] = [];
    for (const op of this.#h.operations) {
      if (!op.tracked) continue;
      const a = m.alloc[op.index] ?? 0;
      const want = a > op.share ? this.#othersWant(op, m, now) : 0;
      allocations.push({ op: op.name, allocation: a, reclaim: want > 0 ? Math.min(a - op.share, want) : 0 });
    }
    this.#send(from, 'admission_view', { epoch: this.epoch, seq: body.seq, echo: sentAt, allocations, members: this.membersView(now) });
  }

  /** The answer to a reserve or release: the member's allocation after it. */
  #answer(to: string, req: { seq: number; op: string }, allocation: number, granted: boolean, reason: Body<'admission_grant'>['reason']): void {
    this.#send(to, 'admission_grant', { epoch: this.epoch, seq: req.seq, op: req.op, allocation, granted, reason });
  }

  onReserve(from: string, body: Body<'admission_reserve'>, now: number): void {
    this.counts.reserves++;
    if (!this.#epochOk(from, body.epoch)) return;
    const m = this.#member(from, now);
    if (m === undefined) return;
    if (!m.heard) {
      // Its state first (what it holds), then reservations.
      this.counts.staleEpoch++;
      this.#send(from, 'admission_reset', { epoch: this.epoch, coordinator: this.name });
      return;
    }
    const op = this.#h.operation(body.op);
    if (op === undefined || !op.tracked) {
      this.counts.unknownOperation++;
      this.#answer(from, body, 0, false, 'unknown');
      return;
    }
    const have = m.alloc[op.index] ?? 0;
    if (!this.#settle(now)) {
      this.counts.deniedSettling++;
      this.#answer(from, body, have, false, 'settling');
      return;
    }
    const below = have < op.share;
    // At or above its share, a member only gets what members below theirs do not want.
    const free = this.#free(op, undefined, now) - (below ? 0 : this.#othersWant(op, m, now));
    const g = Math.max(0, Math.min(body.amount, free));
    if (below && g < body.amount) {
      m.wanting[op.index] = now;
      m.wanted[op.index] = Math.min(body.amount - g, op.share - have);
    }
    // Less than a token (or than asked, if less) is not worth a grant: deny, so the member goes silent.
    if (g <= 0 || g < Math.min(body.amount, 1)) {
      this.counts.denied++;
      this.#answer(from, body, have, false, 'limit');
      return;
    }
    m.alloc[op.index] = have + g;
    this.counts.granted++;
    this.#answer(from, body, have + g, true, 'ok');
  }

  onRelease(from: string, body: Body<'admission_release'>, now: number): void {
    this.counts.releases++;
    if (!this.#epochOk(from, body.epoch)) return;
    const m = this.#member(from, now);
    if (m === undefined) return;
    const op = this.#h.operation(body.op);
    if (op === undefined || !op.tracked) {
      this.counts.unknownOperation++;
      this.#answer(from, body, 0, false, 'unknown');
      return;
    }
    const had = m.alloc[op.index] ?? 0;
    const left = Math.max(0, had - body.amount);
    if (m.heard) {
      m.alloc[op.index] = left;
      // Only a reclaim (above its share while others want) gives back rate that is likely spent: a
      // release by the running average gives back rate the member stopped using.
      if (had > op.share && this.#othersWant(op, m, now) > 0) this.#coolAdd(op, had - left, now);
    }
    this.#answer(from, body, m.heard ? left : 0, true, 'ok');
  }

  /** What members other than `m`, below their share of op and denied recently, went without (tokens/s). */
  #othersWant(op: Operation, m: MemberRecord, now: number): number {
    let want = 0;
    for (const o of this.#members.values()) {
      const have = o.alloc[op.index] ?? 0;
      if (o !== m && now - (o.wanting[op.index] ?? -Infinity) < WANT_MS && have < op.share) want += Math.min(o.wanted[op.index] ?? 0, op.share - have);
    }
    return want;
  }

  /** Every second or so: settles on time, and cuts members silent for isolationMs to their share. */
  tick(now: number): void {
    this.#settle(now);
    for (const m of this.#members.values()) {
      if (!m.heard || m.expired || now - m.lastHeard < this.#isolationMs) continue;
      m.expired = true;
      this.counts.expired++;
      for (const op of this.#h.operations) {
        if (!op.tracked) continue;
        const had = m.alloc[op.index] ?? 0;
        m.alloc[op.index] = Math.min(had, op.share);
        this.#coolAdd(op, had - (m.alloc[op.index] ?? 0), now);
      }
    }
  }

  /** Each member's allocations, use and silence (status; sent to members in views). */
  membersView(now: number): Body<'admission_view'>['members'] {
    const out: Body<'admission_view'>['members'] = [];
    for (const m of this.#members.values()) {
      const ops: { op: string; allocation: number; rate: number; silenced: boolean }[] = [];
      for (const op of this.#h.operations) {
        if (!op.tracked) continue;
        ops.push({ op: op.name, allocation: round(this.#counted(m, op)), rate: round(m.rate[op.index] ?? 0), silenced: (m.silenced[op.index] ?? 0) === 1 });
      }
      out.push({ member: m.name, heard: m.heard, ageMs: m.lastHeard < 0 ? null : Math.max(0, now - m.lastHeard), isolated: m.isolated || m.expired, ops });
    }
    return out;
  }

  /** Sum of counted allocations of an operation (tests, status). */
  allocated(opName: string): number {
    const op = this.#h.operation(opName);
    if (op === undefined) return 0;
    let s = 0;
    for (const m of this.#members.values()) s += this.#counted(m, op);
    return s;
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
