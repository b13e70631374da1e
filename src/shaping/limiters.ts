/**
 * The limiters outside the shaping engine that a checkpoint asks, as the
 * engine sees them: a gatekeeper rule asks a throttle limiter (distributed
 * throttling, src/throttle/gatekeeper.ts implements it), an admission rule
 * an admission limiter (the hierarchy of token buckets,
 * src/admission/hierarchy.ts implements it). The engine declares what it
 * calls and the codes it reads back, so shaping/ imports neither throttle/
 * nor admission/; they import these interfaces to implement them.
 *
 * Every call here is on the packet path: implementations allocate nothing,
 * log nothing and never await.
 */

/** How a gatekeeper rule decided a request, reported back to the throttle limiter (account). */
export const ACCEPTED = 0;
export const DELAYED = 1;
export const REJECTED = 2;
export type AccountKind = typeof ACCEPTED | typeof DELAYED | typeof REJECTED;

/** A throttling domain as the limiter hands it out: the engine only passes it back. */
export interface ThrottleDomain {
  readonly name: string;
}

/**
 * A throttle limiter (the front node's gatekeeper). Times are wall-clock
 * ms since the epoch (shared with the masters). The domain given to
 * keyOf, delayFor and account is always one this limiter's domain() returned.
 */
export interface ThrottleLimiter {
  /** The domain of that name, undefined when the limiter does not know it (slow path). */
  domain(name: string): ThrottleDomain | undefined;
  /**
   * The request's identifier key in domain `d` (the source address masked
   * to the domain's prefix of its family). `src` is the client number
   * (IPv4 u32, IPv6 >= 2^32); the address is the four words at src6[at..at+3].
   */
  keyOf(d: ThrottleDomain, src: number, src6: Uint32Array, at: number): number;
  /** How long (ms) `key` must wait before it may pass; 0: pass now. */
  delayFor(d: ThrottleDomain, key: number, now: number): number;
  /** Reports the decision for the client keyOf was asked about (same words; DELAYED with the time the request was held until). */
  account(kind: AccountKind, d: ThrottleDomain, key: number, src6: Uint32Array, at: number, ts: number, delayedTo?: number): boolean;
}

/** What an admission limiter decides for a new connection: admitted, or the bucket that refused it. */
export const AdmissionVerdict = { Admit: 0, OperationLocal: 1, ServiceLocal: 2, OperationCluster: 3, ServiceCluster: 4 } as const;
/** admit() for a service with no admission configured. */
export const ADMISSION_NOT_CONFIGURED = -1;

/** An admission limiter (the front node's admission hierarchy). */
export interface AdmissionLimiter {
  /**
   * An AdmissionVerdict for a new connection of front service `service`, or
   * ADMISSION_NOT_CONFIGURED. `src` is the client number (IPv4 u32, IPv6 >=
   * 2^32); the client's address is the four words at src6[at..at+3] (IPv4
   * mapped), which client classes of IPv6 prefixes match against.
   */
  admit(service: number, src: number, src6: Uint32Array, at: number, dstPort: number, now: number): number;
}
