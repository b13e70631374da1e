/**
 * The agent's own check of its server's service, on the local host: `tcp`
 * (a connect to address:port) or `http` (a GET of a URL whose status must
 * be in the expected set), every `intervalSeconds`, each bounded by
 * `timeoutSeconds`; `none` runs nothing.
 *
 * The result is 'up' or 'down' with a reason, after `rise` passes or `fall`
 * failures in a row (keepalived's and HAProxy's vocabulary), except the
 * very first result, which sets the state at once: an agent started next
 * to a dead service says down after one check, not after `fall`.
 *
 * Invariants: at most one check runs at a time (the next is armed when the
 * previous has settled, so a slow service cannot pile checks up); a check
 * never throws (every failure is a result with a reason).
 */
import { connect } from 'node:net';
import { request } from 'node:http';

export type CheckKind = 'none' | 'tcp' | 'http';
export type CheckResultState = 'up' | 'down';

export interface HealthCheckConfig {
  readonly kind: CheckKind;
  readonly address: string;
  readonly port: number;
  /** kind http: the URL to GET. */
  readonly url?: string | undefined;
  /** kind http: accepted statuses; absent: any 2xx or 3xx. */
  readonly expectStatus?: readonly number[] | undefined;
  readonly intervalSeconds: number;
  readonly timeoutSeconds: number;
  readonly rise: number;
  readonly fall: number;
}

export interface CheckOutcome {
  readonly ok: boolean;
  readonly reason: string;
}

/**
 * rise/fall: the state changes after `rise` passes (or `fall` failures) in a
 * row; the first result sets it directly. Pure: the table-driven unit test
 * drives it.
 */
export class RiseFall {
  state: CheckResultState | undefined;
  reason = 'no check yet';
  /** Results in a row that disagree with the current state. */
  streak = 0;
  readonly rise: number;
  readonly fall: number;

  /** `from`: a state carried over (a reloaded check goes on from it through rise/fall). */
  constructor(rise: number, fall: number, from?: { readonly state: CheckResultState; readonly reason: string }) {
    this.rise = rise;
    this.fall = fall;
    if (from) {
      this.state = from.state;
      this.reason = from.reason;
    }
  }

  /** Takes one result; returns whether the state changed. */
  observe(ok: boolean, reason: string): boolean {
    const want: CheckResultState = ok ? 'up' : 'down';
    if (this.state === undefined) {
      this.state = want;
      this.reason = reason;
      this.streak = 0;
      return true;
    }
    if (want === this.state) {
      this.streak = 0;
      this.reason = reason;
      return false;
    }
    this.streak++;
    if (this.streak < (ok ? this.rise : this.fall)) return false;
    this.state = want;
    this.streak = 0;
    this.reason = `${reason} (${ok ? this.rise : this.fall} in a row)`;
    return true;
  }
}

/** One tcp check: connect and close. */
export function checkTcp(address: string, port: number, timeoutMs: number): Promise<CheckOutcome> {
  return new Promise((resolve) => {
    const sock = connect({ host: address, port });
    let settled = false;
    // Errors after the verdict (the destroy) are ignored: the listener stays attached.
    const done = (o: CheckOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => {
      done({ ok: false, reason: `tcp ${address}:${port}: no connection within ${timeoutMs} ms` });
    }, timeoutMs);
    sock.once('connect', () => {
      done({ ok: true, reason: `tcp ${address}:${port} accepts connections` });
    });
    sock.on('error', (err: NodeJS.ErrnoException) => {
      done({ ok: false, reason: `tcp ${address}:${port}: ${err.code ?? err.message}` });
    });
  });
}

/** One http check: GET, compare the status, discard the body. */
export function checkHttp(url: string, expectStatus: readonly number[] | undefined, timeoutMs: number): Promise<CheckOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (o: CheckOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(o);
    };
    const req = request(url, { method: 'GET', agent: false, headers: { connection: 'close', 'user-agent': 'sluice-agent health check' } }, (res) => {
      const status = res.statusCode ?? 0;
      const ok = expectStatus ? expectStatus.includes(status) : status >= 200 && status < 400;
      // The status is the verdict; the body is not read.
      done({ ok, reason: `http ${url}: status ${status}${ok ? '' : ` (expected ${expectStatus ? expectStatus.join(', ') : '2xx or 3xx'})`}` });
    });
    const timer = setTimeout(() => {
      done({ ok: false, reason: `http ${url}: no answer within ${timeoutMs} ms` });
    }, timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      done({ ok: false, reason: `http ${url}: ${err.code ?? err.message}` });
    });
    req.end();
  });
}

/** One check of the configured kind (kind none: always passes). */
export function runCheck(c: HealthCheckConfig): Promise<CheckOutcome> {
  const timeoutMs = c.timeoutSeconds * 1000;
  switch (c.kind) {
    case 'tcp':
      return checkTcp(c.address, c.port, timeoutMs);
    case 'http':
      return checkHttp(c.url ?? `http://${c.address}:${c.port}/`, c.expectStatus, timeoutMs);
    case 'none':
      return Promise.resolve({ ok: true, reason: 'no check configured' });
  }
}

export interface CheckCounters {
  checks: number;
  failures: number;
  transitions: number;
}

/**
 * Runs the checks on a setTimeout chain and tells `onChange` when the
 * rise/fall state changes. `state` is 'up' for kind none (nothing checked,
 * nothing says down).
 */
export class HealthChecker {
  readonly config: HealthCheckConfig;
  readonly counters: CheckCounters = { checks: 0, failures: 0, transitions: 0 };
  readonly #rf: RiseFall;
  readonly #onChange: () => void;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The last single result, for status. */
  last: CheckOutcome | undefined;

  /**
   * `previous`: the checker this one replaces (a reload): its up or down
   * state carries over, so a changed check does not report a dead service
   * up while its first result is pending.
   */
  constructor(config: HealthCheckConfig, onChange: () => void, previous?: HealthChecker) {
    this.config = config;
    const from = previous?.state;
    this.#rf = new RiseFall(config.rise, config.fall, from === 'up' || from === 'down' ? { state: from, reason: previous?.reason ?? '' } : undefined);
    this.#onChange = onChange;
  }

  get state(): CheckResultState | 'off' | 'pending' {
    if (this.config.kind === 'none') return 'off';
    return this.#rf.state ?? 'pending';
  }

  get reason(): string {
    return this.config.kind === 'none' ? 'no check configured' : this.#rf.reason;
  }

  /** Runs the first check now (bounded by the timeout), then one every interval. */
  async start(): Promise<void> {
    if (this.config.kind === 'none') return;
    await this.#once();
    this.#arm();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #arm(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      void this.#once().then(() => {
        this.#arm();
      });
    }, this.config.intervalSeconds * 1000);
  }

  async #once(): Promise<void> {
    const o = await runCheck(this.config);
    if (this.#stopped) return;
    this.last = o;
    this.counters.checks++;
    if (!o.ok) this.counters.failures++;
    if (this.#rf.observe(o.ok, o.reason)) {
      this.counters.transitions++;
      this.#onChange();
    }
  }
}
