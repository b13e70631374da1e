/**
 * A server's health as the front node sees it, combined from its sources:
 *
 *   check   the front node's own active check (src/front/health/): 'up' or
 *           'down' after `rise`/`fall` results in a row; 'off' when the
 *           service has no check (kind `none`).
 *   agent   what the server's agent last reported about its own service:
 *           'up', 'down', 'drain' or 'maint' (HAProxy's agent-check verbs);
 *           'none' before any report that carries health (older agents).
 *   silent  the agent stopped reporting (receive_server_load.ts isDown).
 *
 * The combined state, by precedence (the first that holds):
 *   maint   the agent says maint: an operator took the server out
 *   down    the check says down, the agent says down, or the agent is silent
 *   drain   the agent says drain
 *   up      otherwise
 * Invariant: a server is usable for new connections only in state 'up' (and
 * only while its configured/admin state is 'active', which ServerRuntime
 * keeps separately): no source that says down, drain or maint is
 * overridden by another that says up. Established connections are never
 * touched by health: they stay in the kernel's conntrack table.
 *
 * Every change of the combined state is a transition: counted, stamped and
 * handed to the sink (the daemon logs it with its reason). A server that
 * comes back up after having been out starts a slow start ramp
 * (slowStartShare) so it is not flooded with the backlog of new
 * connections; one that is up from the start does not ramp.
 */
export type CheckState = 'up' | 'down' | 'off';
export type AgentHealth = 'up' | 'down' | 'drain' | 'maint';
export type HealthState = 'up' | 'down' | 'drain' | 'maint';

export const AGENT_HEALTH: readonly AgentHealth[] = ['up', 'down', 'drain', 'maint'];
export const HEALTH_STATES: readonly HealthState[] = ['up', 'down', 'drain', 'maint'];

export interface HealthTransition {
  readonly server: string;
  readonly from: HealthState;
  readonly to: HealthState;
  /** Which source decided the new state, and what it said. */
  readonly reason: string;
}

export type HealthSink = (h: ServerHealth, t: HealthTransition) => void;

export class ServerHealth {
  readonly server: string;
  check: CheckState = 'off';
  checkReason = '';
  agent: AgentHealth | 'none' = 'none';
  agentReason = '';
  silent = false;
  state: HealthState = 'up';
  reason = 'no source says otherwise';
  /** When the combined state last changed (clock of the caller, ms). */
  since: number;
  transitions = 0;
  /** Start of the current slow start ramp (ms), or -Infinity: no ramp. */
  rampFrom = -Infinity;
  readonly #sink: HealthSink | undefined;

  /**
   * `initialCheck`: the check's state before its first result (the
   * service's `health.startAs`); the combined state starts from it with no
   * transition (nothing changed: the server was never in another state).
   */
  constructor(server: string, now: number, sink?: HealthSink, initialCheck?: { readonly check: CheckState; readonly reason: string }) {
    this.server = server;
    this.since = now;
    this.#sink = sink;
    if (initialCheck) {
      this.check = initialCheck.check;
      this.checkReason = initialCheck.reason;
      const c = ServerHealth.combine(this.check, this.agent, this.silent, this.checkReason, this.agentReason);
      this.state = c.state;
      this.reason = c.reason;
    }
  }

  /** The front node's check result (after rise/fall). Returns whether the combined state changed. */
  setCheck(state: CheckState, reason: string, now: number): boolean {
    this.check = state;
    this.checkReason = reason;
    return this.#combine(now);
  }

  /** The agent's own report. Returns whether the combined state changed. */
  setAgent(state: AgentHealth | 'none', reason: string, now: number): boolean {
    this.agent = state;
    this.agentReason = reason;
    return this.#combine(now);
  }

  /** The agent fell silent (true) or reported again (false). */
  setSilent(silent: boolean, now: number): boolean {
    if (this.silent === silent) return false;
    this.silent = silent;
    return this.#combine(now);
  }

  /** The combined state and why, from the current sources (see the header). */
  static combine(check: CheckState, agent: AgentHealth | 'none', silent: boolean, checkReason = '', agentReason = ''): { state: HealthState; reason: string } {
    const says = (what: string, why: string): string => (why === '' ? what : `${what}: ${why}`);
    if (agent === 'maint') return { state: 'maint', reason: says('agent says maint', agentReason) };
    if (check === 'down') return { state: 'down', reason: says('check failed', checkReason) };
    if (agent === 'down') return { state: 'down', reason: says('agent says down', agentReason) };
    if (silent) return { state: 'down', reason: 'agent silent' };
    if (agent === 'drain') return { state: 'drain', reason: says('agent says drain', agentReason) };
    const sources = [check === 'up' ? 'check passed' : '', agent === 'up' ? 'agent says up' : ''].filter((s) => s !== '');
    return { state: 'up', reason: sources.length > 0 ? sources.join(', ') : 'no source says otherwise' };
  }

  #combine(now: number): boolean {
    const { state, reason } = ServerHealth.combine(this.check, this.agent, this.silent, this.checkReason, this.agentReason);
    const from = this.state;
    this.reason = reason;
    if (state === from) return false;
    this.state = state;
    this.since = now;
    this.transitions++;
    // Back in service after having been out: ramp up (slowStartShare).
    this.rampFrom = state === 'up' ? now : -Infinity;
    this.#sink?.(this, { server: this.server, from, to: state, reason });
    return true;
  }
}

/**
 * The share of its normal traffic a server gets `now` during slow start:
 * rises linearly from `floor` to 1 over `slowStartMs` from `rampFrom`
 * (HAProxy's `slowstart`: the weight grows over the period). 1 when there
 * is no ramp or the period is 0. The floor keeps a just-recovered server
 * from getting nothing at all, which would never prove it works.
 */
export function slowStartShare(now: number, rampFrom: number, slowStartMs: number, floor = 0.05): number {
  if (!(slowStartMs > 0) || rampFrom === -Infinity) return 1;
  const f = (now - rampFrom) / slowStartMs;
  if (f >= 1) return 1;
  return f <= floor ? floor : f;
}
