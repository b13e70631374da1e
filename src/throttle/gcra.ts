/**
 * The Generic Cell Rate Algorithm (GCRA, ITU-T I.371 "virtual scheduling"),
 * as the throttling master applies it per (domain, identifier). Pure: every
 * function takes the time; the caller owns the clock (tests inject one).
 *
 * Formulation (all times in ms since the epoch, floats):
 *   T   emission interval   = periodMs / requests   (one request per T)
 *   τ   burst tolerance     = (burst - 1) * T
 *   TAT theoretical arrival time of the next request; an identifier with no
 *       state (fresh, or expired) behaves as TAT = -∞.
 *
 *   A request at time t conforms iff  max(TAT, t) - τ <= t,
 *   i.e. the earliest time it may be served is  allowedAt = max(TAT, t) - τ.
 *   Serving (charging) a request at time s sets  TAT := max(TAT, s) + T.
 *   The next request is allowed now iff  nextAllowed = TAT - τ <= now.
 *
 * Burst semantics, exactly: a fresh identifier gets `burst` requests at the
 * same instant; the (burst+1)-th at that instant is allowed T later, and
 * from then on one per T. After an idle gap g the identifier has regained
 * min(burst, used + floor(g / T)) of its burst (TAT catches up with t at
 * most, it never goes below it). Example (rate 1/s, burst 10): requests 1-10
 * at t=0 pass, TAT=10 s, nextAllowed = 10 - 9 = 1 s: the 11th is delayed to
 * t=1 s.
 *
 * Invariant used by the stores: once TAT <= now the state is equivalent to
 * no state (max(TAT, t) = t for every t >= now), so a state expires at TAT.
 *
 * Where this differs from Smockron's Redis script: Smockron stores
 * TAT - burst*T and publishes a delay only when that exceeds now, so a fresh
 * identifier there gets burst+1 requests at once; here it gets exactly burst.
 */
import { InvalidArgumentError } from '../errors/errors.ts';

export interface GcraRule {
  /** T: ms between requests at the sustained rate. */
  readonly intervalMs: number;
  /** τ: how far TAT may run ahead of now, ms. */
  readonly toleranceMs: number;
}

/** A rule of `requests` per `periodMs` with a burst of `burst` requests at once. */
export function gcraRule(requests: number, periodMs: number, burst: number): GcraRule {
  if (!(Number.isInteger(requests) && requests >= 1)) throw new InvalidArgumentError(`requests must be an integer >= 1, got ${requests}`);
  if (!(periodMs > 0 && Number.isFinite(periodMs))) throw new InvalidArgumentError(`periodMs must be > 0, got ${periodMs}`);
  if (!(Number.isInteger(burst) && burst >= 1)) throw new InvalidArgumentError(`burst must be an integer >= 1, got ${burst}`);
  const intervalMs = periodMs / requests;
  return Object.freeze({ intervalMs, toleranceMs: (burst - 1) * intervalMs });
}

/** The TAT after serving one request at `servedAt`; `tat` undefined = no state. */
export function charge(rule: GcraRule, tat: number | undefined, servedAt: number): number {
  return (tat === undefined || tat < servedAt ? servedAt : tat) + rule.intervalMs;
}

/** The earliest time the next request may be served, given the TAT. */
export function nextAllowed(rule: GcraRule, tat: number): number {
  return tat - rule.toleranceMs;
}

/** The earliest time a request arriving at `t` may be served (t when it conforms). */
export function allowedAt(rule: GcraRule, tat: number | undefined, t: number): number {
  if (tat === undefined) return t;
  const a = tat - rule.toleranceMs;
  return a > t ? a : t;
}
