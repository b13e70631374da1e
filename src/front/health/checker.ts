/**
 * The front node's active health checks: one target per server of every
 * service whose `health.kind` is not `none`, run by the scheduler
 * (scheduler.ts: spread, bounded, never two at once per server), each
 * result debounced by rise/fall (rise-fall.ts) and handed to the server's
 * ServerHealth.setCheck (server-health.ts), which combines it with the
 * agent's word and reports transitions to the daemon's sink.
 *
 * configure() is called at start and at every reload with the new
 * services. A server that remains (same service, name, address, port and
 * check settings) keeps its target: its phase, its rise/fall counters and
 * its running check. One whose check settings changed gets a new target
 * that starts from its current check state. New servers start in
 * `health.startAs`. Servers of services with kind `none` get check 'off'.
 *
 * The passive check (observeRefusals, HAProxy's `observe layer4` with
 * `on-error mark-down`): connections a server refused on the data path
 * (refusals.ts) since its last passed check take it down at once when they
 * reach `health.refusedLimit`, and so do retransmitted SYNs it left
 * unanswered when they reach `health.unansweredLimit` (each limit counts
 * its own kind); its active check alone brings it back.
 *
 * Off the packet path: everything here runs on the scheduler's timer, the
 * daemon's refusal timer and the checks' socket callbacks.
 */
import { InvalidArgumentError } from '../../errors/errors.ts';
import { formatIPv4Address } from '../../packet/address.ts';
import { formatIPv6Address, isIPv4Mapped } from '../../packet/address6.ts';
import type { HealthConfig } from '../config.ts';
import type { ServerRuntime, ServiceRuntime } from '../service.ts';
import { httpCheck, type HttpCheckOptions } from './http-check.ts';
import { CHECK_OUTCOMES, type CheckOutcome, type CheckResult } from './result.ts';
import { RiseFall } from './rise-fall.ts';
import { HealthScheduler, type ScheduledTarget } from './scheduler.ts';
import { parseStatusSet } from './status-set.ts';
import { tcpCheck, type CheckTarget } from './tcp-check.ts';
import type { RefusalLog } from '../refusals.ts';

export interface CheckTargetState extends ScheduledTarget {
  readonly service: string;
  readonly server: ServerRuntime;
  readonly kind: 'tcp' | 'http';
  readonly riseFall: RiseFall;
  lastOutcome: CheckOutcome | null;
  lastReason: string;
  /** Times on the checker's clock (ms); -Infinity: never. */
  lastAt: number;
  lastOkAt: number;
  /** Failed checks in a row when the check last went down (= fall, unless refusals took it down first). */
  failuresAtDown: number;
  passed: number;
  failed: number;
  /** health.refusedLimit (0: off). */
  refusedLimit: number;
  /** The server's refusal count (ServerRuntime.refused) as last read. */
  refusedSeen: number;
  /** Refusals since its last passed check. */
  refusedSinceOk: number;
  /** Times the refusals took it down (the passive check). */
  refusedDowns: number;
  /** The same for unanswered SYNs (health.unansweredLimit, ServerRuntime.unanswered). */
  unansweredLimit: number;
  unansweredSeen: number;
  unansweredSinceOk: number;
  unansweredDowns: number;
  /**
   * Why the passive check took it down ('' when it did not, or once it is
   * up again). Kept at the head of its reason while it is down: the active
   * checks that follow add their progress to it rather than replace it, so
   * `sluice status` still says why a server went down after its next
   * failed check ("1 in a row" of a fall it never reached said nothing).
   */
  passiveReason: string;
}

/** One server's check as `sluice status` shows it. */
export interface ServerCheckStatus {
  readonly kind: 'tcp' | 'http';
  readonly state: 'up' | 'down';
  readonly passesInRow: number;
  readonly failuresInRow: number;
  readonly lastOutcome: CheckOutcome | null;
  readonly lastReason: string;
  /** Seconds since the last check ended / passed; null: none yet. */
  readonly lastAgeSeconds: number | null;
  readonly lastOkAgeSeconds: number | null;
  readonly failuresAtDown: number;
  readonly passed: number;
  readonly failed: number;
  /** Connections it refused since its last passed check, and the limit that takes it down (0: off). */
  readonly refusedSinceOk: number;
  readonly refusedLimit: number;
  /** Times refusals took it down (the passive check). */
  readonly refusedDowns: number;
  /** Retransmitted SYNs it left unanswered since its last passed check, the limit (0: off), and the times they took it down. */
  readonly unansweredSinceOk: number;
  readonly unansweredLimit: number;
  readonly unansweredDowns: number;
}

function httpOptions(h: HealthConfig): HttpCheckOptions {
  const expect = parseStatusSet(h.expectStatus);
  // The schema refused a bad set: reaching this is a config that was not validated.
  if (typeof expect === 'string') throw new InvalidArgumentError(`health.expectStatus: ${expect} (the config was not validated)`);
  const m = h.bodyMatch;
  return { path: h.path, host: h.host, expect, bodyMatch: m === undefined ? undefined : typeof m === 'string' ? m : new RegExp(m.regex) };
}

export class HealthChecker {
  readonly scheduler: HealthScheduler<CheckTargetState>;
  readonly #now: () => number;
  /** Check results by outcome since start (metrics). */
  readonly outcomes: Record<CheckOutcome, number> = Object.fromEntries(CHECK_OUTCOMES.map((o) => [o, 0])) as Record<CheckOutcome, number>;
  /** Servers the passive check took down since start, by refusals and by unanswered SYNs (metrics). */
  refusedDowns = 0;
  unansweredDowns = 0;
  #byServer = new Map<ServerRuntime, CheckTargetState>();

  constructor(opts: { readonly now: () => number; readonly maxInFlight?: number }) {
    this.#now = opts.now;
    this.scheduler = new HealthScheduler<CheckTargetState>({
      now: opts.now,
      ...(opts.maxInFlight !== undefined ? { maxInFlight: opts.maxInFlight } : {}),
      onResult: (t, r, now) => {
        this.#result(t, r, now);
      },
    });
  }

  /** The services' targets (at start and after every reload). */
  configure(services: readonly ServiceRuntime[], healthOf: (service: string) => HealthConfig | undefined): void {
    const now = this.#now();
    const old = new Map([...this.#byServer.values()].map((t) => [t.key, t]));
    const targets: CheckTargetState[] = [];
    const byServer = new Map<ServerRuntime, CheckTargetState>();
    for (const svc of services) {
      const h = healthOf(svc.name);
      for (const srv of svc.servers) {
        if (h === undefined || h.kind === 'none') {
          srv.health.setCheck('off', '', now);
          continue;
        }
        // An IPv6 server's u32 address is 0 ("0.0.0.0": a check of this host): format by family.
        const address = isIPv4Mapped(srv.address6) ? formatIPv4Address(srv.address) : formatIPv6Address(srv.address6);
        const target: CheckTarget = { address, port: h.port ?? srv.port, source: h.source };
        // The limits are read at each refusal: changing them keeps the check's state and counters.
        const settings = JSON.stringify({ ...h, slowStartSeconds: undefined, startAs: undefined, refusedLimit: undefined, unansweredLimit: undefined });
        const key = `${svc.name}/${srv.id}/${address}:${String(srv.port)}/${settings}`;
        const prev = old.get(key);
        // The same check as before: its counters and state carry over (the ServerHealth was kept too).
        const initial = prev?.riseFall.state ?? (srv.health.check === 'off' ? h.startAs : srv.health.check);
        const riseFall = prev?.riseFall ?? new RiseFall(h.rise, h.fall, initial);
        const timeoutMs = h.timeoutSeconds * 1000;
        const http = h.kind === 'http' ? httpOptions(h) : undefined;
        const t: CheckTargetState = {
          key,
          intervalMs: h.intervalSeconds * 1000,
          run: http ? () => httpCheck(target, http, timeoutMs) : () => tcpCheck(target, timeoutMs),
          service: svc.name,
          server: srv,
          kind: h.kind,
          riseFall,
          lastOutcome: prev?.lastOutcome ?? null,
          lastReason: prev?.lastReason ?? '',
          lastAt: prev?.lastAt ?? -Infinity,
          lastOkAt: prev?.lastOkAt ?? -Infinity,
          failuresAtDown: prev?.failuresAtDown ?? 0,
          passed: prev?.passed ?? 0,
          failed: prev?.failed ?? 0,
          refusedLimit: h.refusedLimit,
          // A reload's new runtime carries the count over (daemon): read from here on.
          refusedSeen: srv.refused,
          refusedSinceOk: prev?.refusedSinceOk ?? 0,
          refusedDowns: prev?.refusedDowns ?? 0,
          unansweredLimit: h.unansweredLimit,
          unansweredSeen: srv.unanswered,
          unansweredSinceOk: prev?.unansweredSinceOk ?? 0,
          unansweredDowns: prev?.unansweredDowns ?? 0,
          passiveReason: prev?.passiveReason ?? '',
        };
        if (prev === undefined) {
          const why = initial === 'up' ? 'not checked yet (health.startAs up)' : srv.health.check === 'down' ? srv.health.checkReason : 'not checked yet (health.startAs down)';
          srv.health.setCheck(initial, why, now);
        }
        targets.push(t);
        byServer.set(srv, t);
      }
    }
    this.#byServer = byServer;
    this.scheduler.set(targets);
  }

  #result(t: CheckTargetState, r: CheckResult, now: number): void {
    this.outcomes[r.outcome]++;
    const ok = r.outcome === 'ok';
    t.lastOutcome = r.outcome;
    t.lastReason = r.reason;
    t.lastAt = now;
    if (ok) {
      t.passed++;
      t.lastOkAt = now;
      t.refusedSinceOk = 0;
      t.unansweredSinceOk = 0;
    } else t.failed++;
    const rf = t.riseFall;
    const changed = rf.result(ok);
    if (changed && rf.state === 'down') t.failuresAtDown = rf.failures;
    let reason: string;
    if (rf.state === 'down') {
      reason = ok ? `${r.reason} (${String(rf.passes)} of rise ${String(rf.rise)})` : `${r.reason} (${String(rf.failures)} in a row)`;
      if (t.passiveReason !== '') reason = `${t.passiveReason}; then ${reason}`;
    } else {
      t.passiveReason = '';
      reason = ok ? r.reason : `${r.reason} (${String(rf.failures)} of fall ${String(rf.fall)})`;
    }
    t.server.health.setCheck(rf.state, reason, now);
  }

  /**
   * The passive check (health.refusedLimit, health.unansweredLimit): reads
   * the servers that refused connections or left SYNs unanswered since the
   * last call (the engine's log; every server when the log overflowed) and
   * takes down, at once, an up server with `refusedLimit` refusals or
   * `unansweredLimit` unanswered SYNs since its last passed check. Its
   * active check brings it back after `rise` passes. Called by the
   * daemon's timer.
   */
  observeRefusals(log: RefusalLog<ServerRuntime>, now: number): void {
    const overflowed = log.drain((srv) => {
      const t = this.#byServer.get(srv);
      if (t !== undefined) this.#refusals(t, now);
    });
    if (overflowed) for (const t of this.#byServer.values()) this.#refusals(t, now);
  }

  #refusals(t: CheckTargetState, now: number): void {
    const n = t.server.refused - t.refusedSeen;
    const u = t.server.unanswered - t.unansweredSeen;
    if (n <= 0 && u <= 0) return;
    t.refusedSeen = t.server.refused;
    t.unansweredSeen = t.server.unanswered;
    if (n > 0) t.refusedSinceOk += n;
    if (u > 0) t.unansweredSinceOk += u;
    // Refusals first: a server that both refused and stayed silent is named by its resets, the clearer sign.
    if (t.refusedLimit > 0 && t.refusedSinceOk >= t.refusedLimit) {
      if (!this.#markDown(t)) return;
      t.refusedDowns++;
      this.refusedDowns++;
      t.passiveReason = `refused ${String(t.refusedSinceOk)} connections since the last passed check (health.refusedLimit ${String(t.refusedLimit)})`;
      t.server.health.setCheck('down', t.passiveReason, now);
    } else if (t.unansweredLimit > 0 && t.unansweredSinceOk >= t.unansweredLimit) {
      if (!this.#markDown(t)) return;
      t.unansweredDowns++;
      this.unansweredDowns++;
      t.passiveReason = `left ${String(t.unansweredSinceOk)} retransmitted SYNs unanswered since the last passed check (health.unansweredLimit ${String(t.unansweredLimit)})`;
      t.server.health.setCheck('down', t.passiveReason, now);
    }
  }

  /** The passive check's verdict on `t`: down now (false if it already was). */
  #markDown(t: CheckTargetState): boolean {
    if (!t.riseFall.markDown()) return false;
    t.failuresAtDown = t.riseFall.failures;
    return true;
  }

  /** Starts the timer (the daemon; tests poll the scheduler themselves). */
  start(): void {
    this.scheduler.start();
  }

  stop(): void {
    this.scheduler.stop();
  }

  status(srv: ServerRuntime, now: number = this.#now()): ServerCheckStatus | undefined {
    const t = this.#byServer.get(srv);
    if (!t) return undefined;
    const age = (at: number): number | null => (at === -Infinity ? null : Math.round(now - at) / 1000);
    return {
      kind: t.kind,
      state: t.riseFall.state,
      passesInRow: t.riseFall.passes,
      failuresInRow: t.riseFall.failures,
      lastOutcome: t.lastOutcome,
      lastReason: t.lastReason,
      lastAgeSeconds: age(t.lastAt),
      lastOkAgeSeconds: age(t.lastOkAt),
      failuresAtDown: t.failuresAtDown,
      passed: t.passed,
      failed: t.failed,
      refusedSinceOk: t.refusedSinceOk,
      refusedLimit: t.refusedLimit,
      refusedDowns: t.refusedDowns,
      unansweredSinceOk: t.unansweredSinceOk,
      unansweredLimit: t.unansweredLimit,
      unansweredDowns: t.unansweredDowns,
    };
  }
}
