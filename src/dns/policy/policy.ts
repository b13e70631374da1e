/**
 * A steering policy ranks the usable clusters (up, with free capacity) for
 * one client. The pipeline around it (src/dns/steer.ts) has already handled
 * fallback, high-rate clients and stickiness; a policy only orders
 * candidates. One policy per file, chosen per steered name by `policy:`.
 */
export interface Candidate {
  readonly index: number;
  readonly name: string;
  /** Free share of capacity, 0 < free <= 1 for a candidate. */
  readonly free: number;
  /** Absolute free capacity (new connections/s). */
  readonly available: number;
}

export interface PolicyInput {
  readonly candidates: readonly Candidate[];
  /** RTT (ms) per cluster index for this client's prefix: NaN unknown, Infinity no reply. */
  readonly rtt: Float64Array;
  /** How many clusters have a current RTT for this prefix. */
  readonly measured: number;
  /** The client prefix's key (client_prefix.ts form): the `mapping` policy looks its assignment up by it. */
  readonly prefixKey?: string;
  /**
   * A uniform number in (0, 1) for one candidate, fixed for this client
   * prefix, steered name and cluster (a hash, steer.ts): a policy that
   * needs chance draws from it, so every DNS server answers a prefix alike.
   */
  draw(c: Candidate): number;
}

export interface Ranking {
  /** Candidates in order of preference; the answer takes the first `answers`. */
  readonly order: readonly Candidate[];
  readonly reason: string;
  /** The answer's TTL (seconds) when the policy sets one (`mapping`: per prefix); else the name's `ttl`. */
  readonly ttl?: number;
}

export interface Policy {
  readonly name: string;
  rank(input: PolicyInput): Ranking;
}
