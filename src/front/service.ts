/**
 * Runtime state of one virtual service: its servers as selection-method
 * backends, its selector, and the overflow targets (other clusters).
 *
 * A decision is a target code: 0..0x3e a server index, 0x80 + j overflow
 * target j, -1 nothing available.
 */
import { parseIPv4Address } from '../packet/address.ts';
import type { FrontConfig, ServiceConfig } from './config.ts';
import { createSelector, type Backend, type Selector } from './select/index.ts';

export const OVERFLOW_BASE = 0x80;

export interface ServerRuntime extends Backend {
  readonly address: number;
  readonly port: number;
  state: 'active' | 'drain' | 'disabled';
  /** Connections decided for this server since start (metrics). */
  decided: number;
}

export interface OverflowTarget {
  readonly cluster: string;
  readonly vip: string;
  freeCapacity: number;
  /** Smooth weighting state. */
  current: number;
  decided: number;
}

function addr(text: string): number {
  const a = parseIPv4Address(text);
  if (a === undefined) throw new Error(`config validated ${text} as IPv4`); // unreachable: schema checked
  return a;
}

export class ServiceRuntime {
  readonly index: number;
  readonly name: string;
  readonly vip: number;
  readonly port: number;
  readonly servers: ServerRuntime[];
  readonly selector: Selector;
  readonly overflow: OverflowTarget[];
  overflowed = 0;

  constructor(index: number, svc: ServiceConfig, overflow: FrontConfig['overflow']) {
    this.index = index;
    this.name = svc.name;
    this.vip = addr(svc.vip);
    this.port = svc.port;
    this.servers = svc.servers.map((s) => ({
      id: s.name,
      address: addr(s.address),
      port: s.port ?? svc.port,
      weight: s.weight,
      capacity: s.capacity ?? Infinity,
      active: 0,
      usable: s.state === 'active',
      state: s.state,
      decided: 0,
    }));
    this.selector = createSelector(svc.method);
    this.selector.rebuild(this.servers);
    this.overflow = overflow.map((o) => ({ cluster: o.cluster, vip: o.vip, freeCapacity: o.freeCapacity, current: 0, decided: 0 }));
  }

  /** Server index, OVERFLOW_BASE + j, or -1. Deterministic. */
  choose(client: number): number {
    const i = this.selector.pick(this.servers, client);
    if (i >= 0) {
      const s = this.servers[i];
      if (s) s.decided++;
      return i;
    }
    // Seed 000: every server full -> other clusters in proportion to their free capacity.
    let best = -1;
    let total = 0;
    for (let j = 0; j < this.overflow.length; j++) {
      const o = this.overflow[j];
      if (o === undefined || !(o.freeCapacity > 0)) continue;
      o.current += o.freeCapacity;
      total += o.freeCapacity;
      if (best < 0 || o.current > (this.overflow[best]?.current ?? 0)) best = j;
    }
    const chosen = this.overflow[best];
    if (!chosen) return -1;
    chosen.current -= total;
    chosen.decided++;
    this.overflowed++;
    return OVERFLOW_BASE + best;
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
