/**
 * Runtime state of one virtual service: its servers as selection-method
 * backends, its selector, and the overflow targets (other clusters).
 *
 * A decision is a target code: 0..0x7fe a server index, OVERFLOW_BASE + j
 * overflow target j, -1 nothing available (forward_request.ts selectTarget).
 */
import { InvalidArgumentError } from '../errors/errors.ts';
import { parseIPv4Address } from '../packet/address.ts';
import { equalAddress6, parseIPv6Address, setIPv4Mapped } from '../packet/address6.ts';
import { IpProtocol } from '../packet/ipv4.ts';
import type { FrontConfig, ServiceConfig } from './config.ts';
import { createSelector, type Backend, type Selector } from './select/index.ts';
import { type HealthSink, ServerHealth } from './health/server-health.ts';
import { smoothPick } from './select/smooth.ts';

/** Above every server index the mark layout allows (marks.ts MAX_SERVERS_MARKED). */
export const OVERFLOW_BASE = 0x800;

/**
 * One server of one service. Capacity has one of two units:
 *  - from the config (no agents): concurrent connections, compared with
 *    `active`;
 *  - estimated from the server's load reports (receive_server_load.ts): new
 *    connections per second, compared with `rate`, the rate being sent to
 *    it now.
 * `load` is whichever of the two the capacity is compared with.
 */
export class ServerRuntime implements Backend {
  readonly id: string;
  /** IPv4 address as u32 (0 for an IPv6 server). */
  readonly address: number;
  /** The address as four words, both families (IPv4 mapped: packet/address6.ts). */
  readonly address6 = new Uint32Array(4);
  readonly port: number;
  weight: number;
  capacity: number;
  active = 0;
  usable: boolean;
  state: 'active' | 'drain' | 'disabled';
  /** Connections decided for this server since start (metrics). */
  decided = 0;
  /**
   * Connections it refused since start: its reset answering a client's SYN,
   * seen on the data path (engine.ts #serverReset; metrics, and the
   * passive check of health.refusedLimit, health/checker.ts).
   */
  refused = 0;
  /**
   * Retransmitted SYNs to it that it had not answered, since start
   * (refusals.ts; metrics, and the passive check of health.unansweredLimit).
   */
  unanswered = 0;
  /** Capacity is a reported-load estimate in connections/s (else config, concurrent). */
  estimated = false;
  /** New connections per second sent to it recently (estimated mode). */
  rate = 0;
  /** Its health from the front's check and its agent (health/server-health.ts). */
  readonly health: ServerHealth;
  /**
   * Slow start (health.slowStartSeconds): the share of its normal traffic
   * it gets now, 0.05..1, refreshed by the daemon's tick from
   * health.rampFrom (never a clock read per packet). The capacity method
   * multiplies its remaining capacity by it, byrequests and leastconn its
   * weight; maglev ignores it (select/backend.ts).
   */
  share = 1;

  constructor(id: string, address: number, port: number, weight: number, capacity: number, state: ServerRuntime['state'], health?: ServerHealth) {
    this.id = id;
    this.address = address;
    setIPv4Mapped(this.address6, address);
    this.port = port;
    this.weight = weight;
    this.capacity = capacity;
    this.state = state;
    this.health = health ?? new ServerHealth(id, 0);
    this.usable = state === 'active' && this.health.state === 'up';
  }

  /** Its agent stopped reporting: no new connections until it reports again. */
  get down(): boolean {
    return this.health.silent;
  }

  get load(): number {
    return this.estimated ? this.rate : this.active;
  }

  /**
   * Re-derives `usable` after a state, report or health change: new
   * connections only while the configured/admin state is active and no
   * health source says down, drain or maint.
   */
  refreshUsable(): void {
    this.usable = this.state === 'active' && this.health.state === 'up';
  }
}

export interface OverflowTarget {
  readonly cluster: string;
  readonly vip: string;
  freeCapacity: number;
  decided: number;
}

function addr(text: string): number {
  const a = parseIPv4Address(text);
  // The schema checked every address: reaching this is a config that was not validated.
  if (a === undefined) throw new InvalidArgumentError(`${text} is not an IPv4 address (the config was not validated)`);
  return a;
}

/**
 * An address of either family: IPv4 as u32 with its mapped words, IPv6 as
 * 0 with its words. (The front config accepts IPv4 VIPs only for now, see
 * config.ts; the runtime and the engine already take either.)
 */
function addrAny(text: string): { v4: number; v6: Uint32Array; family: 4 | 6 } {
  const v4 = parseIPv4Address(text);
  const v6 = new Uint32Array(4);
  if (v4 !== undefined) {
    setIPv4Mapped(v6, v4);
    return { v4, v6, family: 4 };
  }
  if (parseIPv6Address(text, v6) === undefined) throw new InvalidArgumentError(`${text} is not an IP address (the config was not validated)`);
  return { v4: 0, v6, family: 6 };
}

export class ServiceRuntime {
  readonly index: number;
  readonly name: string;
  /** IPv4 VIP as u32 (0 for an IPv6 service). */
  readonly vip: number;
  /** 4 or 6: the VIP's family (its servers are of the same family). */
  readonly family: 4 | 6;
  /** The VIP as four words, both families (IPv4 mapped). */
  readonly vip6: Uint32Array;
  readonly port: number;
  /** IpProtocol.Tcp or IpProtocol.Udp. */
  readonly protocol: number;
  readonly servers: ServerRuntime[];
  readonly selector: Selector;
  readonly overflow: OverflowTarget[];
  readonly #overflowStatus: Float64Array;
  readonly #overflowWeights: Float64Array;
  overflowed = 0;

  /**
   * `health` gives transitions a sink (the daemon logs and counts them) and
   * a clock for their stamps; without it (unit tests) they are only counted.
   */
  constructor(
    index: number,
    svc: ServiceConfig,
    overflow: FrontConfig['overflow'],
    health?: {
      readonly now: number;
      readonly sink: HealthSink;
      /** The health of a server that remains across a reload (same name, address and port), kept with its state and ramp. */
      readonly keep?: (server: string, address: Uint32Array, port: number) => ServerHealth | undefined;
    },
  ) {
    this.index = index;
    this.name = svc.name;
    const vip = addrAny(svc.vip);
    this.vip = vip.v4;
    this.family = vip.family;
    this.vip6 = vip.v6;
    this.port = svc.port;
    this.protocol = svc.protocol === 'udp' ? IpProtocol.Udp : IpProtocol.Tcp;
    // A service with checks starts its new servers in health.startAs (no transition: nothing changed).
    // `health` may be absent from configs built by hand (tools, older tests) rather than parsed.
    const h = svc.health as ServiceConfig['health'] | undefined;
    const initial = h !== undefined && h.kind !== 'none' ? { check: h.startAs, reason: `not checked yet (health.startAs ${h.startAs})` } : undefined;
    this.servers = svc.servers.map((s) => {
      const any = this.family === 6 ? addrAny(s.address) : undefined;
      const a = any === undefined ? addr(s.address) : any.v4;
      const p = s.port ?? svc.port;
      // Kept by the four words of either family: every IPv6 server's u32 address is 0.
      const words = any !== undefined ? any.v6 : new Uint32Array(4);
      if (any === undefined) setIPv4Mapped(words, a);
      const kept = health?.keep?.(s.name, words, p);
      const srv = new ServerRuntime(s.name, a, p, s.weight, s.capacity ?? Infinity, s.state, kept ?? new ServerHealth(s.name, health?.now ?? 0, health?.sink, initial));
      if (any !== undefined) srv.address6.set(any.v6);
      return srv;
    });
    this.selector = createSelector(svc.method);
    this.selector.rebuild(this.servers);
    // An IPv6 service overflows to the other clusters' IPv6 VIPs (config.ts checkFamilies; nft.ts's ip6 targets).
    this.overflow = overflow.map((o) => ({ cluster: o.cluster, vip: this.family === 6 ? (o.vip6 ?? '') : o.vip, freeCapacity: o.freeCapacity, decided: 0 }));
    this.#overflowStatus = new Float64Array(this.overflow.length);
    this.#overflowWeights = new Float64Array(this.overflow.length);
  }

  /**
   * A server for a new connection from `client` by the service's method
   * (its index), or -1 when none is eligible (every server full or
   * unusable). Deterministic.
   */
  pickServer(client: number): number {
    const i = this.selector.pick(this.servers, client);
    if (i >= 0) {
      const s = this.servers[i];
      if (s) s.decided++;
    }
    return i;
  }

  /**
   * Seed 000's overflow: another cluster in proportion to its free capacity
   * (its index in `overflow`), or -1 when none has any. Deterministic.
   */
  pickOverflow(): number {
    const w = this.#overflowWeights;
    for (let k = 0; k < this.overflow.length; k++) w[k] = this.overflow[k]?.freeCapacity ?? 0;
    const j = smoothPick(this.overflow.length, this.#overflowStatus, w);
    const chosen = this.overflow[j];
    if (!chosen) return -1;
    chosen.decided++;
    this.overflowed++;
    return j;
  }

  /** Index of the server with this address (four words, either family) and port, or -1. */
  serverAt6(address: Uint32Array, port: number): number {
    for (let i = 0; i < this.servers.length; i++) {
      const s = this.servers[i];
      if (s !== undefined && s.port === port && equalAddress6(s.address6, address)) return i;
    }
    return -1;
  }

  /** Index of the server with this address and port, or -1. */
  serverAt(address: number, port: number): number {
    for (let i = 0; i < this.servers.length; i++) {
      const s = this.servers[i];
      if (s !== undefined && s.address === address && s.port === port) return i;
    }
    return -1;
  }
}
