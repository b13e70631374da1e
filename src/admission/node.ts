/**
 * One member of the cluster limits at run time: its sockets, its member
 * logic, its coordinator role when elected, and the one-second clock.
 *
 * Sockets (the control plane's ControlNode: CURVE, ZAP allowlist of the
 * members' keys, checked decoding, counters): one PULL bound at
 * `cluster.listen` receives everything addressed to this member, in either
 * role; one PUSH per member (this one included: the coordinator's own
 * member talks to it like the others) sends. PUSH sockets are `immediate`:
 * a message for a member that is not connected is dropped and counted;
 * the protocol repairs losses (state reports every second, absolute
 * allocations, request timeouts).
 *
 * The sender's name in a message is what the envelope says; the ZAP
 * allowlist only admits members' keys, so members are trusted not to
 * impersonate each other.
 */
import { ControlNode, type Sender } from '../control/node.ts';
import type { Body, Envelope, MessageType } from '../control/messages.ts';
import type { Logger } from '../log/logger.ts';
import type { AdmissionClusterConfig } from './config.ts';
import { Coordinator } from './coordinator.ts';
import { electionOf, type Election } from './election.ts';
import type { Hierarchy } from './hierarchy.ts';
import { Member } from './member.ts';

const ZAP_DOMAIN = 'admission';
const TICK_MS = 1000;

export interface AdmissionNodeStatus {
  member: string;
  coordinator: string | null;
  isCoordinator: boolean;
  epoch: number;
  isolated: boolean;
  refused: string | null;
  election: ReturnType<Election['status']>;
  operations: ReturnType<Member['operations']>;
  /** The coordinator's table (ours if we coordinate, else the last view). */
  members: Body<'admission_view'>['members'];
  membersAgeMs: number | null;
  counts: { member: Member['counts']; coordinator: Coordinator['counts'] | null; coordinatorSessions: number; notCoordinator: number };
  /** The member's sockets: admission messages sent and received (both roles), dropped, rejected by reason. */
  control: { sent: number; received: number; sendDropped: number; rejected: number; handlerErrors: number };
}

export class AdmissionNode {
  readonly cfg: AdmissionClusterConfig;
  readonly hierarchy: Hierarchy;
  readonly member: Member;
  readonly control: ControlNode;
  readonly election: Election;
  coordinator: Coordinator | undefined;
  readonly #senders = new Map<string, Sender>();
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #flushScheduled = false;
  #lastEpoch = 0;
  #sessions = 0;
  /** Coordinator-role messages that reached us while we do not coordinate. */
  notCoordinator = 0;
  #stopped = false;

  private constructor(cfg: AdmissionClusterConfig, hierarchy: Hierarchy, control: ControlNode, log: Logger) {
    this.cfg = cfg;
    this.hierarchy = hierarchy;
    this.control = control;
    this.#log = log;
    const now = Date.now();
    this.member = new Member(
      hierarchy,
      {
        name: cfg.member,
        reserveChunk: cfg.reserveChunkPercent / 100,
        releaseChunk: cfg.releaseChunkPercent / 100,
        headroom: cfg.headroomPercent / 100,
        estimatorMs: cfg.estimatorSeconds * 1000,
        silenceMs: cfg.silenceSeconds * 1000,
        isolationMs: cfg.isolationSeconds * 1000,
        requestTimeoutMs: cfg.requestTimeoutMs,
        followResets: 'etcd' in cfg.coordinator,
      },
      (to, type, body) => { this.#sendTo(to, type, body); },
      now,
    );
    this.election = electionOf(cfg, log);
    hierarchy.onShort = () => {
      this.member.short();
      if (this.#flushScheduled) return;
      this.#flushScheduled = true;
      setImmediate(() => {
        this.#flushScheduled = false;
        this.member.flush(Date.now());
      });
    };
  }

  /** Binds, connects, starts the election and the clock. KeyFileError or a bind error rejects (nothing left open). */
  static async start(cfg: AdmissionClusterConfig, hierarchy: Hierarchy, log: Logger): Promise<AdmissionNode> {
    const control = await ControlNode.create(cfg.member, cfg.control, log);
    let node: AdmissionNode;
    try {
      node = new AdmissionNode(cfg, hierarchy, control, log);
      const h = node.#handlers();
      await control.bindPull(cfg.listen, ZAP_DOMAIN, cfg.members.map((m) => m.publicKey ?? '').filter((k) => k !== ''), h);
      for (const m of cfg.members) node.#senders.set(m.name, control.connectPush(m.endpoint, m.publicKey));
    } catch (err) {
      control.close();
      throw err;
    }
    node.election.start((leader, self) => { node.#leader(leader, self); });
    node.#timer = setInterval(() => { node.tick(Date.now()); }, TICK_MS);
    node.#timer.unref();
    node.tick(Date.now());
    return node;
  }

  #handlers(): { [T in MessageType]?: (msg: Envelope<T>) => void } {
    const coord = <T extends 'admission_state' | 'admission_reserve' | 'admission_release'>(fn: (c: Coordinator, m: Envelope<T>) => void) => (m: Envelope<T>) => {
      const c = this.coordinator;
      if (c === undefined) this.notCoordinator++;
      else fn(c, m);
    };
    return {
      admission_state: coord<'admission_state'>((c, m) => { c.onState(m.from, m.body, m.sentAt, Date.now()); }),
      admission_reserve: coord<'admission_reserve'>((c, m) => { c.onReserve(m.from, m.body, Date.now()); }),
      admission_release: coord<'admission_release'>((c, m) => { c.onRelease(m.from, m.body, Date.now()); }),
      admission_grant: (m) => { this.member.onGrant(m.from, m.body, Date.now()); },
      admission_view: (m) => { this.member.onView(m.from, m.body, Date.now()); },
      admission_reset: (m) => { this.member.onReset(m.from, m.body, Date.now()); },
      admission_refused: (m) => {
        this.member.onRefused(m.from, m.body);
        this.#log.warn({ coordinator: m.from, reason: m.body.reason }, 'admission coordinator refuses this member');
      },
    };
  }

  #sendTo<T extends MessageType>(to: string, type: T, body: Body<T>): void {
    const s = this.#senders.get(to);
    if (s === undefined) {
      this.control.counters.sendDropped++;
      return;
    }
    s.send(type, body);
  }

  #leader(leader: string | undefined, self: boolean): void {
    if (this.#stopped) return;
    this.#log.info({ coordinator: leader ?? null, self }, 'admission coordinator');
    if (self && this.coordinator === undefined) {
      // A new session: its epoch must differ from any before it on this node (wall clock, bumped if needed).
      const now = Date.now();
      const epoch = Math.max(now, this.#lastEpoch + 1);
      this.#lastEpoch = epoch;
      this.#sessions++;
      this.coordinator = new Coordinator(this.cfg.member, this.hierarchy, this.cfg.members.map((m) => m.name), epoch, now, this.cfg.isolationSeconds * 1000, (to, type, body) => { this.#sendTo(to, type, body); });
      this.coordinator.announce();
    } else if (!self) this.coordinator = undefined;
    this.member.setCoordinator(leader);
    this.member.tick(Date.now());
  }

  tick(now: number): void {
    if (this.#stopped) return;
    this.coordinator?.tick(now);
    this.member.tick(now);
  }

  status(now: number): AdmissionNodeStatus {
    const c = this.coordinator;
    const k = this.control.counters;
    return {
      member: this.cfg.member,
      coordinator: this.member.coordinator ?? null,
      isCoordinator: c !== undefined,
      epoch: this.member.epoch,
      isolated: this.member.isolated,
      refused: this.member.refusedReason ?? null,
      election: this.election.status(),
      operations: this.member.operations(now),
      members: c ? c.membersView(now) : this.member.lastView,
      membersAgeMs: c ? 0 : this.member.lastViewAt < 0 ? null : now - this.member.lastViewAt,
      counts: { member: { ...this.member.counts }, coordinator: c ? { ...c.counts } : null, coordinatorSessions: this.#sessions, notCoordinator: this.notCoordinator },
      control: { sent: sum(k.sent), received: sum(k.received), sendDropped: k.sendDropped, rejected: sum(k.rejected), handlerErrors: k.handlerErrors },
    };
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.hierarchy.onShort = () => {};
    await this.election.stop();
    await Promise.allSettled([...this.#senders.values()].map((s) => s.drain()));
    this.control.close();
  }
}

function sum(r: Readonly<Record<string, number>>): number {
  let n = 0;
  for (const v of Object.values(r)) n += v;
  return n;
}
