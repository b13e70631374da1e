/**
 * The front node's role in a pair (issue 21): what keepalived says, as its
 * notify hook tells us (`sluice ha notify`, the admin command
 * {"cmd":"ha","state":...}), checked against what the host shows.
 *
 *   single   no `ha` section: the only front node of its cluster
 *   backup   the start state with `ha` (until keepalived says otherwise)
 *   master   holds the virtual addresses; the notify hook committed the
 *            replicated flows before it told us
 *   fault    keepalived's FAULT (an interface down) or STOP: not master
 *
 * Invariants: every change of role is one transition, logged once by the
 * caller with (from, to, reason) and counted by the role entered; a notify
 * that repeats the current role is no transition. The machine has no side
 * effects and no clock of its own (`now` is passed in): the daemon acts on
 * the transitions (records rebuilt on becoming master, cluster_load sent).
 *
 * The cross-check (observe()): every second the daemon says whether this
 * host holds the uplink virtual address. A master must, a backup must not.
 * A disagreement that lasts longer than the grace is a mismatch: reported
 * once per episode and counted; it ends when they agree again. The grace
 * is 3 advert intervals (keepalived's own detection time) plus
 * HOOK_ALLOWANCE_MS: keepalived adds the address first and runs the hook
 * after, and the hook commits conntrackd's caches and starts the CLI
 * before we hear of it (2.6 s from kill to notify, measured in namespaces
 * on a busy 2-core machine, 1.7 s of it the hook). A shorter disagreement
 * is a takeover in progress. It changes no role: keepalived
 * decides, and a mismatch means a hook went missing or failed (its journal
 * lines say why).
 */

/** What the notify hook may take after keepalived moved the address (conntrackd's commit, the CLI's start). */
export const HOOK_ALLOWANCE_MS = 5000;

/** The states keepalived's hook reports (sluice ha notify). */
export const HA_STATES = ['master', 'backup', 'fault'] as const;
export type HaState = (typeof HA_STATES)[number];
export type HaRole = 'single' | HaState;
export const HA_ROLES: readonly HaRole[] = ['single', ...HA_STATES];

export interface RoleTransition {
  readonly from: HaRole;
  readonly to: HaRole;
  readonly reason: string;
  /** Wall-clock ms (Date.now()) of the change. */
  readonly at: number;
}

export interface Failover {
  /** ISO time of the change. */
  readonly at: string;
  readonly from: HaRole;
  readonly to: HaRole;
  /** Connection records built from the kernel's (committed) flows. */
  readonly adopted: number;
  /** Records moved to the server the kernel NATs their flow to. */
  readonly corrected: number;
}

export interface MismatchEvent {
  readonly kind: 'began' | 'ended';
  readonly role: HaRole;
  readonly holdsVip: boolean;
  /** ms the disagreement lasted (so far, at 'began'). */
  readonly forMs: number;
}

export class HaRoleMachine {
  #role: HaRole;
  #since: number;
  #reason: string;
  readonly transitions: Record<HaRole, number> = { single: 0, master: 0, backup: 0, fault: 0 };
  /** Disagreements between the role and the virtual address lasting > the grace (episodes). */
  mismatches = 0;
  lastFailover: Failover | undefined;
  /** Notify commands received (including repeats of the current role). */
  notifies = 0;
  readonly #graceMs: number;
  #disagreeSince: number | undefined;
  #reported = false;
  #holdsVip: boolean | undefined;

  /**
   * `enabled`: the config has an `ha` section (else the role is `single`
   * for good). `graceMs`: how long role and address may disagree before it
   * is a mismatch (3 × ha.advertSeconds + HOOK_ALLOWANCE_MS).
   */
  constructor(enabled: boolean, graceMs: number, now: number) {
    this.#role = enabled ? 'backup' : 'single';
    this.#reason = enabled ? 'start: backup until keepalived says otherwise' : 'no ha section';
    this.#since = now;
    this.#graceMs = graceMs;
  }

  get role(): HaRole {
    return this.#role;
  }
  get reason(): string {
    return this.#reason;
  }
  /** Wall-clock ms since the current role. */
  get since(): number {
    return this.#since;
  }
  /** The last observation of the uplink virtual address (undefined before the first). */
  get holdsVip(): boolean | undefined {
    return this.#holdsVip;
  }
  /** A disagreement is being reported now. */
  get mismatched(): boolean {
    return this.#reported;
  }

  /**
   * keepalived's state for this node. Returns the transition, or undefined
   * when the role does not change (a repeat) or there is no pair.
   */
  notify(state: HaState, reason: string, now: number): RoleTransition | undefined {
    if (this.#role === 'single') return undefined;
    this.notifies++;
    return this.#enter(state, reason, now);
  }

  /**
   * At start: this host already holds the uplink virtual address, so
   * keepalived made it master before this process started (a restart of
   * the front node alone: keepalived will not notify again). The records
   * come from the kernel's flows at start, as after any restart.
   */
  adoptRunningMaster(now: number): RoleTransition | undefined {
    if (this.#role !== 'backup') return undefined;
    return this.#enter('master', 'start: this host holds the uplink virtual address (keepalived is master)', now);
  }

  #enter(to: HaState, reason: string, now: number): RoleTransition | undefined {
    if (to === this.#role) return undefined;
    const t: RoleTransition = { from: this.#role, to, reason, at: now };
    this.#role = to;
    this.#reason = reason;
    this.#since = now;
    this.transitions[to]++;
    // The disagreement clock restarts with the role: keepalived moves the address around the hook.
    this.#disagreeSince = undefined;
    return t;
  }

  recordFailover(f: Failover): void {
    this.lastFailover = f;
  }

  /**
   * One observation of whether this host holds the uplink virtual address
   * (monotonic `now`, ms). Returns an event when a mismatch episode begins
   * (reported once) or ends.
   */
  observe(holdsVip: boolean, now: number): MismatchEvent | undefined {
    this.#holdsVip = holdsVip;
    if (this.#role === 'single') return undefined;
    const agree = holdsVip === (this.#role === 'master');
    if (agree) {
      const was = this.#reported;
      const forMs = this.#disagreeSince === undefined ? 0 : now - this.#disagreeSince;
      this.#disagreeSince = undefined;
      this.#reported = false;
      return was ? { kind: 'ended', role: this.#role, holdsVip, forMs } : undefined;
    }
    this.#disagreeSince ??= now;
    const forMs = now - this.#disagreeSince;
    if (this.#reported || forMs <= this.#graceMs) return undefined;
    this.#reported = true;
    this.mismatches++;
    return { kind: 'began', role: this.#role, holdsVip, forMs };
  }
}

/** The role as the cluster_load message carries it ('single' | 'master' | 'backup'): a node in fault is not master. */
export function messageRole(role: HaRole): 'single' | 'master' | 'backup' {
  return role === 'fault' ? 'backup' : role;
}
