/**
 * SYN cookies only while a service is under a SYN flood (`synproxy: auto`,
 * the default). Cookies cost every connection one client round trip before
 * its first byte (the cookie SYN-ACK carries window 0 until the server's
 * handshake is done), so, like the kernel's own tcp_syncookies, they engage
 * only when needed.
 *
 * The kernel counts every client SYN to a cookie-capable service (auto or
 * on) in set `syn_seen` (one counter per VIP . port, nft.ts; the ip table
 * for IPv4 services, the ip6 table for IPv6 ones), engaged or not. Once a second this reads the set off the event loop, turns the
 * counts into each service's SYN rate, and steps each auto service's gate
 * (stepGate): engaged at the first reading above `above`, disengaged once
 * the rate stayed below above/2 for `calmSeconds`. A change is written as
 * one nft transaction that sets `synproxied` and `synproxied_N` to the
 * engaged state (nft.ts synproxiedUpdateScript); every install (start,
 * reload, repair) renders `engaged()`, so a reload under a flood keeps
 * cookies on.
 *
 * Invariants: one reading and one write at a time; a write always carries
 * the latest state (a change during a write is written after it; a failed
 * write is retried at the next reading); a reading that started before an
 * install is discarded (the install reset the counters).
 */
import type { Logger } from 'pino';
import type { FrontConfig } from './config.ts';
import { synproxyGroups, synproxiedUpdateScript } from './nft.ts';

/** Thresholds of one auto service's gate. */
export interface GatePolicy {
  /** SYNs per second that engage cookies at one reading. */
  readonly above: number;
  /** How long the rate must stay below above/2 to disengage (ms). */
  readonly calmMs: number;
}

/** One service's gate between readings (stepGate mutates it). */
export interface GateState {
  engaged: boolean;
  /** The previous reading: counter value and time (ms); undefined before the first or after a reset. */
  lastPackets: number | undefined;
  lastAtMs: number;
  /** When the rate went below above/2 while engaged (ms); undefined while it is not calm. */
  calmSinceMs: number | undefined;
  /** SYNs per second at the last reading (0 before two readings). */
  rate: number;
}

export function newGate(engaged = false): GateState {
  return { engaged, lastPackets: undefined, lastAtMs: 0, calmSinceMs: undefined, rate: 0 };
}

/**
 * Steps a gate with a reading of its service's SYN counter (`packets` at
 * `atMs`): returns 'engage' or 'disengage' on a transition, else undefined.
 * A counter that went back (the table or set was replaced) is a new
 * baseline, as is the first reading: no rate, no transition.
 */
export function stepGate(g: GateState, packets: number, atMs: number, p: GatePolicy): 'engage' | 'disengage' | undefined {
  const last = g.lastPackets;
  const dt = atMs - g.lastAtMs;
  g.lastPackets = packets;
  g.lastAtMs = atMs;
  if (last === undefined || packets < last || dt <= 0) return undefined;
  g.rate = ((packets - last) * 1000) / dt;
  if (!g.engaged) {
    if (g.rate <= p.above) return undefined;
    g.engaged = true;
    g.calmSinceMs = undefined;
    return 'engage';
  }
  if (g.rate >= p.above / 2) {
    g.calmSinceMs = undefined;
    return undefined;
  }
  // Calm since the previous reading: the rate measured now covers it.
  g.calmSinceMs ??= atMs - dt;
  if (atMs - g.calmSinceMs < p.calmMs) return undefined;
  g.engaged = false;
  g.calmSinceMs = undefined;
  return 'disengage';
}

/**
 * The counters of `nft list set ip sluice syn_seen` and of its ip6 twin
 * (one text, or both concatenated), by `VIP . port` key. nft prints an
 * IPv6 address in RFC 5952 text, the form config.ts gives a VIP, so the
 * keys match synproxyGroups' as they do for IPv4.
 */
export function parseSynSeen(list: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of list.matchAll(/(?<=[\s{,])([0-9a-f]*[.:][0-9a-f.:]*) \. (\d+) counter packets (\d+) bytes \d+/g)) out.set(`${m[1] ?? ''} . ${m[2] ?? ''}`, Number(m[3]));
  return out;
}

export interface SynproxyServiceStatus {
  readonly service: string;
  readonly mode: 'auto' | 'on';
  readonly engaged: boolean;
  /** SYNs per second at the last reading. */
  readonly synRate: number;
  readonly engagedTotal: number;
  readonly disengagedTotal: number;
}

export interface SynproxyAutoStatus {
  readonly services: readonly SynproxyServiceStatus[];
  readonly readings: number;
  readonly readFailures: number;
  readonly writes: number;
  readonly writeFailures: number;
}

export interface SynproxyAutoDeps {
  readonly log: Logger;
  readonly config: () => Readonly<FrontConfig>;
  /** `syn_seen` of the ip table, and of the ip6 table's when it has a capable service, as `nft list set` prints them (nft-netlink.ts readSetCounters). */
  readonly read: () => Promise<string>;
  /** Loads an `nft -f` script off the event loop (nft.ts nftLoadAsync). */
  readonly write: (script: string) => Promise<void>;
  /** Monotonic milliseconds. */
  readonly now: () => number;
}

/** An `on` service's gate: its rate is measured, it never changes state. */
const ALWAYS: GatePolicy = { above: Infinity, calmMs: Infinity };

interface ServiceGate {
  readonly gate: GateState;
  engagedTotal: number;
  disengagedTotal: number;
}

export class SynproxyAuto {
  readonly #deps: SynproxyAutoDeps;
  /** Gates by service name: every capable service (on: rate only, always engaged). */
  #gates = new Map<string, ServiceGate>();
  /** Each gate's mode at the last sync: a service turned from on to auto starts disengaged. */
  #modes = new Map<string, 'auto' | 'on'>();
  #timer: NodeJS.Timeout | undefined;
  #reading = false;
  #writing = false;
  #dirty = false;
  /** Bumped by each install: a reading or write begun before it is stale. */
  #generation = 0;
  #readFailing = false;
  #readings = 0;
  #readFailures = 0;
  #writes = 0;
  #writeFailures = 0;

  constructor(deps: SynproxyAutoDeps) {
    this.#deps = deps;
    this.#sync(deps.config());
  }

  /** The auto services engaged now, by name: what an install renders. */
  engaged(): ReadonlySet<string> {
    const out = new Set<string>();
    for (const [name, s] of this.#gates) if (s.gate.engaged) out.add(name);
    return out;
  }

  /**
   * An install (start, reload, repair) rendered engaged() of `cfg` into
   * the table: its counters start again (new baselines), gates follow the
   * services by name (an auto service that stays keeps its state), and a
   * write in flight is redone over the new table.
   */
  installed(cfg: Readonly<FrontConfig> = this.#deps.config()): void {
    this.#generation++;
    this.#sync(cfg);
    for (const s of this.#gates.values()) s.gate.lastPackets = undefined;
    if (this.#writing) this.#dirty = true;
  }

  start(periodMs = 1000): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => {
      void this.tick();
    }, periodMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One reading and the transitions it brings (the timer's; tests call it directly). */
  async tick(): Promise<void> {
    if (this.#reading || this.#gates.size === 0) return;
    this.#reading = true;
    const generation = this.#generation;
    let list: string;
    try {
      list = await this.#deps.read();
    } catch (err) {
      this.#readFailures++;
      if (!this.#readFailing) this.#deps.log.warn({ err: err instanceof Error ? err.message : err }, 'SYN counts unreadable: SYN cookies stay as they are');
      this.#readFailing = true;
      return;
    } finally {
      this.#reading = false;
    }
    if (generation !== this.#generation) return;
    this.#readFailing = false;
    this.#readings++;
    this.#apply(parseSynSeen(list), this.#deps.now());
  }

  /** Steps every gate with one reading's counts (by `VIP . port`) taken at `atMs`. */
  #apply(counts: ReadonlyMap<string, number>, atMs: number): void {
    const cfg = this.#deps.config();
    for (const g of synproxyGroups(cfg)) {
      for (const svc of g.services) {
        const s = this.#gates.get(svc.name);
        const packets = counts.get(svc.key);
        if (s === undefined || packets === undefined) continue;
        const p: GatePolicy = svc.mode === 'on' ? ALWAYS : { above: svc.above, calmMs: svc.calmSeconds * 1000 };
        const t = stepGate(s.gate, packets, atMs, p);
        if (svc.mode === 'on') continue;
        if (t === 'engage') {
          s.engagedTotal++;
          this.#dirty = true;
          this.#deps.log.warn({ service: svc.name, synRate: Math.round(s.gate.rate), above: p.above }, 'SYN flood: SYN cookies engaged');
        } else if (t === 'disengage') {
          s.disengagedTotal++;
          this.#dirty = true;
          this.#deps.log.info({ service: svc.name, synRate: Math.round(s.gate.rate), calmSeconds: p.calmMs / 1000 }, 'SYN flood over: SYN cookies disengaged');
        }
      }
    }
    if (this.#dirty) void this.#write();
  }

  /** Writes the engaged state until what the kernel holds is the latest (one write at a time). */
  async #write(): Promise<void> {
    if (this.#writing) return;
    this.#writing = true;
    try {
      while (this.#dirty) {
        this.#dirty = false;
        const script = synproxiedUpdateScript(this.#deps.config(), this.engaged());
        if (script === '') break;
        try {
          await this.#deps.write(script);
          this.#writes++;
        } catch (err) {
          this.#writeFailures++;
          this.#deps.log.error({ err: err instanceof Error ? err.message : err }, 'SYN cookie sets not written: retried at the next reading');
          // Retried by the next reading's #apply (dirty stays set), not in a loop here.
          this.#dirty = true;
          break;
        }
      }
    } finally {
      this.#writing = false;
    }
  }

  /** Gates for the capable services of `cfg`: kept by name, new ones disengaged, on services engaged. */
  #sync(cfg: Readonly<FrontConfig>): void {
    const next = new Map<string, ServiceGate>();
    const modes = new Map<string, 'auto' | 'on'>();
    for (const g of synproxyGroups(cfg)) {
      for (const svc of g.services) {
        const old = this.#gates.get(svc.name);
        const gate = old?.gate ?? newGate();
        // On: always engaged. Auto: as it was (a reload under a flood keeps cookies on).
        gate.engaged = svc.mode === 'on' || (old !== undefined && old.gate.engaged && this.#modes.get(svc.name) !== 'on');
        next.set(svc.name, { gate, engagedTotal: old?.engagedTotal ?? 0, disengagedTotal: old?.disengagedTotal ?? 0 });
        modes.set(svc.name, svc.mode);
      }
    }
    this.#gates = next;
    this.#modes = modes;
  }

  status(): SynproxyAutoStatus {
    const cfg = this.#deps.config();
    const services: SynproxyServiceStatus[] = [];
    for (const g of synproxyGroups(cfg)) {
      for (const svc of g.services) {
        const s = this.#gates.get(svc.name);
        if (s === undefined) continue;
        services.push({ service: svc.name, mode: svc.mode, engaged: s.gate.engaged, synRate: Math.round(s.gate.rate), engagedTotal: s.engagedTotal, disengagedTotal: s.disengagedTotal });
      }
    }
    return { services, readings: this.#readings, readFailures: this.#readFailures, writes: this.#writes, writeFailures: this.#writeFailures };
  }
}
