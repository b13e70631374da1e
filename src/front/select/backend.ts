/**
 * What a selection method sees of one server of a virtual service. The
 * front node owns these objects and updates the mutable fields; methods
 * read them on each pick and keep their own state keyed by position.
 */
export interface Backend {
  readonly id: string;
  /** Relative share (byrequests lbfactor; leastconn and maglev weight). > 0. */
  weight: number;
  /** What the server can take, in the unit of `load` (Infinity = no limit). */
  capacity: number;
  /** Connections sent to it and not yet ended. */
  active: number;
  /**
   * The figure capacity is compared with: `active` when capacities come from
   * the config (concurrent connections), the recent rate of new connections
   * when they are estimated from load reports (connections/s).
   */
  readonly load: number;
  /** False when drained, disabled or down: no new connections. */
  usable: boolean;
  /**
   * Slow start (HAProxy `slowstart`): the share of its normal traffic the
   * server gets while it ramps up after coming back, 0 < share <= 1;
   * absent means 1. Dynamic methods apply it (capacity: remaining capacity
   * x share; byrequests: weight x share; leastconn: (active + 1) / (weight
   * x share) while ramping, HAProxy's leastconn key). maglev does not: a
   * consistent hash maps each client to one server, and scaling a server's
   * slots would move other servers' clients; its clients return at once,
   * as HAProxy ignores slowstart for static algorithms.
   */
  readonly share?: number;
}

/** Whether a new connection may go to `b` (usable and below capacity). */
export function eligible(b: Backend): boolean {
  return b.usable && b.load < b.capacity;
}

export interface Selector {
  readonly method: MethodName;
  /**
   * Index of the server for a new connection from `client` (the client
   * number: IPv4 address as u32, IPv6 >= 2^32 from the address's 128 bits,
   * front/client6.ts clientNumber6), or -1 when no server is eligible (the caller overflows or rejects).
   * Deterministic: the same state and inputs give the same answer.
   */
  pick(backends: readonly Backend[], client: number): number;
  /** The set of servers, their weights or their usability changed. */
  rebuild(backends: readonly Backend[]): void;
}

export const METHOD_NAMES = ['capacity', 'byrequests', 'leastconn', 'maglev'] as const;
export type MethodName = (typeof METHOD_NAMES)[number];
