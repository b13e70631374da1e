/**
 * The kernel SYN schedule: new connections decided without waiting for the
 * daemon, from choices the daemon made beforehand.
 *
 * Why: a queued SYN waits for the Node event loop to be scheduled. On a
 * busy machine that wait, not the daemon's CPU, set the new-connection rate
 * (issue 22: 0.60-0.94 of kernel DNAT round by round, the daemon at ~27 %
 * of a core in every round). Here the SYN never leaves the kernel:
 *
 *   to_service  a first SYN (conntrack entry not yet confirmed: not a
 *               retransmit) to a service in map `kernel` jumps to the
 *               service's chain k_<i>
 *   k_<i>       mark = schedule[offset_i + (numgen inc mod slots_i)]: the
 *               i-th service's own counter walks the slots the daemon
 *               wrote; the SYN is logged to the NFLOG group (the daemon
 *               records the connection from that copy, as it recycles
 *               records from FIN and RST copies) and goes on; nat_pre
 *               DNATs it by the mark as for a queued SYN. An empty slot
 *               (no server, no overflow cluster) leaves the lookup without
 *               a match: the SYN gets QUEUE_MARK and the daemon decides it
 *               (and counts what it drops).
 *
 * JavaScript still owns every decision: the slots are the method's own
 * schedule, computed here from the servers' state by the same smooth
 * weighted round robin the selectors use (select/smooth.ts):
 *   capacity    weights = remaining capacity x slow-start share, as
 *               CapacityProportional reads them; SCHEDULE_SLOTS slots;
 *   byrequests  weights = lbfactor x share of eligible servers; with
 *               integer weights summing to at most MAX_CYCLE the slots
 *               are exactly one cycle of Apache's lbstatus schedule from
 *               its initial state (the sum of lbstatus is back to zero
 *               after sum(weights) picks), so the kernel's counter walks
 *               byrequests' vector exactly, cycle after cycle;
 *   no server eligible: the overflow clusters by free capacity, as
 *               selectTarget does.
 * Only services that need nothing at the moment of decision take this
 * path: TCP, method capacity or byrequests, no checkpoints, and `synPath:
 * kernel` (config.ts; not the default: with 1,000 services its install,
 * reload and writer cost too much, docs/front-node-design.md "The SYN
 * path"). leastconn needs the live counts per pick, maglev a
 * per-client table (both stay queued, as do checkpoints, which may hold).
 *
 * Near capacity the daemon decides: a server whose remaining capacity is
 * within its headroom (HEADROOM_SECONDS of its recent connection rate, at
 * least HEADROOM_MIN connections) leaves the schedule; when only such
 * servers remain, the schedule is empty and every SYN is queued, so the
 * last connections to a server and the overflow that follows are decided
 * exactly, by the daemon's own counts, as before. Only when every server
 * is full or unusable do the slots hold the overflow clusters.
 * `failMode: drop` keeps every SYN queued: the operator asked that nothing
 * be steered without the daemon, and the kernel schedule outlives it.
 *
 * Lag, and what it costs: the kernel follows the schedule last written.
 * The writer (KernelScheduleWriter) recomputes it on every daemon tick
 * (SCHEDULE_TICK_MS) and at once when a recorded SYN fills a server; it
 * rewrites a service's slots only on a material change (a server entering
 * or leaving the schedule, or slot counts moving by more than 1/32 of the
 * slots), in one nft transaction. Between a server filling up and the
 * write (one `nft -f`, ~10-30 ms here), it still receives new connections:
 * the overshoot is the SYN rate times that delay. When the daemon is away
 * the kernel keeps the last schedule: new connections keep their
 * proportions (better than the daemon-down fallback's even spread), and
 * the records are rebuilt from conntrack at the next start.
 */
import type { FrontConfig, ServiceConfig } from './config.ts';
import { hex, overflowMark, serverMark } from './marks.ts';
import { eligible } from './select/backend.ts';
import { OVERFLOW_BASE, type ServiceRuntime } from './service.ts';
import type { Logger } from '../log/logger.ts';

/** Slots of a capacity schedule (and of a byrequests one whose cycle is longer than MAX_CYCLE). */
export const SCHEDULE_SLOTS = 256;
/** A server within this many seconds of its recent rate from its capacity leaves the schedule (the daemon decides its last connections). */
export const HEADROOM_SECONDS = 0.2;
/** ... and within at least this many connections. */
export const HEADROOM_MIN = 2;
/** Longest byrequests cycle written exactly; also the spacing of the services' key ranges. */
export const MAX_CYCLE = 1024;
/** The daemon recomputes the schedules this often (ms). */
export const SCHEDULE_TICK_MS = 100;

/** The per-service chain of service index `i` in sluice's nft table. */
export function kernelChain(i: number): string {
  return `k_${String(i)}`;
}

/** Whether service `svc` of `cfg` takes the kernel schedule (see the module comment). */
export function isKernelService(cfg: Pick<FrontConfig, 'checkpoints'> & { readonly failMode?: FrontConfig['failMode'] }, svc: ServiceConfig): boolean {
  // `synPath` may be absent from configs built by hand (tools, older tests): the default, queue.
  if ((svc.synPath as string | undefined) !== 'kernel' || cfg.failMode === 'drop') return false;
  if (svc.protocol !== 'tcp' || (svc.method !== 'capacity' && svc.method !== 'byrequests')) return false;
  // `checkpoints` may be absent from configs built by hand (tools, older tests) rather than parsed.
  const none = (l: readonly unknown[] | undefined): boolean => l === undefined || l.length === 0;
  return none(cfg.checkpoints) && none(svc.checkpoints) && svc.servers.every((s) => none(s.checkpoints));
}

/**
 * Slots for byrequests weights `w` (0: not eligible): with integer weights
 * summing to at most MAX_CYCLE, that sum (one exact cycle of the current
 * eligible servers); else SCHEDULE_SLOTS. The slot count is in the
 * service's chain rule: the writer rewrites the rule when it changes (a
 * drain, a server back), and the new rule's counter starts the new cycle
 * at its first slot.
 */
export function cycleSlots(w: readonly number[]): number {
  let sum = 0;
  for (const x of w) {
    if (x <= 0) continue;
    if (!Number.isInteger(x)) return SCHEDULE_SLOTS;
    sum += x;
  }
  return sum > 0 && sum <= MAX_CYCLE ? sum : SCHEDULE_SLOTS;
}

/** Slots of service `svc`'s schedule from its configuration (every active server eligible). */
export function slotsOf(svc: ServiceConfig): number {
  return svc.method === 'byrequests' ? cycleSlots(svc.servers.map((s) => (s.state === 'active' ? s.weight : 0))) : SCHEDULE_SLOTS;
}

export interface ScheduledService {
  /** Service index (the mark's service field). */
  readonly index: number;
  /** First key of its slots in map `schedule`: index x MAX_CYCLE, so a service keeps its range across reloads that add others. */
  readonly offset: number;
}

/** The services on the kernel path, with their key ranges. */
export function scheduleLayout(cfg: Pick<FrontConfig, 'checkpoints' | 'services'> & { readonly failMode?: FrontConfig['failMode'] }): ScheduledService[] {
  const out: ScheduledService[] = [];
  cfg.services.forEach((svc, index) => {
    if (isKernelService(cfg, svc)) out.push({ index, offset: index * MAX_CYCLE });
  });
  return out;
}

/** The rules of service `l`'s chain for `slots` slots: the schedule's lookup (logged for the record), else the queue. */
export function kernelChainRules(l: ScheduledService, slots: number, log: string, queueMark: string): [string, string] {
  return [`meta mark set numgen inc mod ${String(slots)} offset ${String(l.offset)} map @schedule ${log} return`, `meta mark set ${queueMark} return`];
}

/** Target codes per slot, per service index (undefined: not on the kernel path). -1: an empty slot. */
export type ScheduleTargets = readonly (Int32Array | undefined)[];

/**
 * Smooth weighted round robin from its initial state (all current values
 * 0) over `weights`, `slots` picks into `out` (indices, -1 if every weight
 * is 0). The same arithmetic as select/smooth.ts: add each weight, pick the
 * largest current (ties to the first), subtract the total from it.
 */
export function fillSmooth(weights: readonly number[], slots: number, out: Int32Array, base = 0): void {
  const current = new Float64Array(weights.length);
  let total = 0;
  for (const w of weights) total += w;
  for (let k = 0; k < slots; k++) {
    if (total <= 0) {
      out[k] = -1;
      continue;
    }
    let best = -1;
    for (let i = 0; i < weights.length; i++) {
      const w = weights[i] ?? 0;
      if (w <= 0) continue;
      current[i] = (current[i] ?? 0) + w;
      if (best < 0 || (current[i] ?? 0) > (current[best] ?? 0)) best = i;
    }
    current[best] = (current[best] ?? 0) - total;
    out[k] = base + best;
  }
}

/**
 * The weights the service's method reads now (select/capacity.ts,
 * select/byrequests.ts), 0 for a server within its headroom of capacity
 * (`headroom(i)`: connections), and whether any server is so (not full,
 * but its last connections are the daemon's to decide).
 */
function serverWeights(svc: ServiceRuntime, headroom: (i: number) => number): { w: number[]; near: boolean } {
  let near = false;
  const w = svc.servers.map((b, i) => {
    const x = serverWeight(svc, b, headroom(i));
    if (x === NEAR) near = true;
    return Math.max(0, x);
  });
  return { w, near };
}

/** serverWeight's answer for a server within its headroom of capacity (weight 0, and the service is near capacity). */
const NEAR = -1;

/** One server's weight as its service's method reads it now, 0 without room, NEAR within `headroom` connections of its capacity. */
function serverWeight(svc: ServiceRuntime, b: ServiceRuntime['servers'][number], headroom: number): number {
  if (!b.usable) return 0;
  const remaining = b.capacity - b.load;
  if (remaining <= 0) return 0;
  if (Number.isFinite(remaining) && remaining <= headroom) return NEAR;
  if (svc.selector.method === 'capacity') return (Number.isFinite(remaining) ? remaining : 1) * b.share;
  return eligible(b) ? b.weight * b.share : 0;
}

/** A server's headroom at new-connection rate `rate` (/s): HEADROOM_SECONDS of it, at least HEADROOM_MIN. */
function headroomAt(rate: number): number {
  return Math.max(HEADROOM_MIN, Math.ceil(rate * HEADROOM_SECONDS));
}

/**
 * One service's slots from its runtime state: its servers; else (none with
 * room beyond its headroom) empty if some server still has room (the queue
 * decides its last connections exactly), else the overflow clusters by free
 * capacity, else empty.
 */
export function serviceSchedule(svc: ServiceRuntime, headroom: (i: number) => number = () => HEADROOM_MIN): Int32Array {
  const { w, near } = serverWeights(svc, headroom);
  return scheduleOf(svc, w, near);
}

function sameRange(a: Float64Array, b: Float64Array, len: number): boolean {
  for (let i = 0; i < len; i++) if (a[i] !== b[i]) return false;
  return true;
}

function scheduleOf(svc: ServiceRuntime, w: readonly number[], near: boolean): Int32Array {
  if (w.some((x) => x > 0)) {
    const slots = svc.selector.method === 'byrequests' ? cycleSlots(w) : SCHEDULE_SLOTS;
    const out = new Int32Array(slots);
    fillSmooth(w, slots, out);
    return out;
  }
  const out = new Int32Array(SCHEDULE_SLOTS);
  if (near) out.fill(-1);
  else fillSmooth(svc.overflow.map((o) => Math.max(0, o.freeCapacity)), SCHEDULE_SLOTS, out, OVERFLOW_BASE);
  return out;
}

/** The schedules of the running services (`headroom`: per service and server index, connections). */
export function runtimeSchedule(cfg: Pick<FrontConfig, 'checkpoints' | 'services'> & { readonly failMode?: FrontConfig['failMode'] }, services: readonly ServiceRuntime[], headroom?: (service: number, server: number) => number): ScheduleTargets {
  const out: (Int32Array | undefined)[] = [];
  for (const l of scheduleLayout(cfg)) {
    const svc = services[l.index];
    if (svc !== undefined) out[l.index] = serviceSchedule(svc, headroom === undefined ? undefined : (i) => headroom(l.index, i));
  }
  return out;
}

/**
 * The schedules from the configuration alone (start, tools, tests):
 * active servers by configured capacity (capacity: unlimited counts 1) or
 * weight (byrequests); the daemon rewrites them from the runtime state at
 * its first tick.
 */
export function configuredSchedule(cfg: Pick<FrontConfig, 'checkpoints' | 'services' | 'overflow'> & { readonly failMode?: FrontConfig['failMode'] }): ScheduleTargets {
  const out: (Int32Array | undefined)[] = [];
  for (const l of scheduleLayout(cfg)) {
    const svc = cfg.services[l.index];
    if (svc === undefined) continue;
    // A server's capacity within the headroom is the daemon's to fill (see serviceSchedule).
    const room = (s: ServiceConfig['servers'][number]): number => (s.capacity === undefined || !Number.isFinite(s.capacity) ? 1 : s.capacity > HEADROOM_MIN ? s.capacity : 0);
    const w = svc.servers.map((s) => (s.state !== 'active' ? 0 : svc.method === 'capacity' ? room(s) : room(s) > 0 ? s.weight : 0));
    const near = svc.servers.some((s) => s.state === 'active' && room(s) === 0);
    const n = w.some((x) => x > 0) ? slotsOf({ ...svc, servers: svc.servers.map((s, i) => ({ ...s, weight: w[i] ?? 0, state: (w[i] ?? 0) > 0 ? 'active' : 'disabled' })) }) : SCHEDULE_SLOTS;
    const slots = new Int32Array(n);
    if (w.some((x) => x > 0)) fillSmooth(w, n, slots);
    else if (near) slots.fill(-1);
    else fillSmooth(cfg.overflow.map((o) => Math.max(0, o.freeCapacity)), n, slots, OVERFLOW_BASE);
    out[l.index] = slots;
  }
  return out;
}

function markOf(service: number, target: number): number {
  return target >= OVERFLOW_BASE ? overflowMark(service, target - OVERFLOW_BASE) : serverMark(service, target);
}

/** Map `schedule`'s elements (`key : mark`) for one service's slots. */
export function slotElements(service: ScheduledService, targets: Int32Array | undefined): string[] {
  const out: string[] = [];
  if (targets === undefined) return out;
  for (let k = 0; k < targets.length; k++) {
    const t = targets[k] ?? -1;
    if (t >= 0) out.push(`${String(service.offset + k)} : ${hex(markOf(service.index, t))}`);
  }
  return out;
}

/** Every element of map `schedule`. */
export function scheduleElements(layout: readonly ScheduledService[], targets: ScheduleTargets): string[] {
  return layout.flatMap((l) => slotElements(l, targets[l.index]));
}

/**
 * Whether `next` differs enough from `prev` to be written: a target that
 * enters or leaves the schedule always (a server filled, drained, down or
 * back), else slot counts per target moving by more than 1/32 of the slots
 * in all. byrequests' weights move only with eligibility and slow start.
 */
export function materialChange(prev: Int32Array | undefined, next: Int32Array | undefined): boolean {
  if (prev === undefined || next === undefined) return prev !== next;
  if (prev.length !== next.length) return true;
  const count = new Map<number, number>();
  for (const t of prev) count.set(t, (count.get(t) ?? 0) + 1);
  const nextCount = new Map<number, number>();
  for (const t of next) nextCount.set(t, (nextCount.get(t) ?? 0) + 1);
  let moved = 0;
  for (const [t, n] of nextCount) {
    const had = count.get(t);
    if (had === undefined) return true;
    moved += Math.abs(n - had);
  }
  for (const t of count.keys()) if (!nextCount.has(t)) return true;
  // Each slot that changed target counts twice in `moved` (one less here, one more there).
  return moved / 2 > Math.max(1, next.length / 32);
}

export interface KernelScheduleDeps {
  readonly log: Logger;
  readonly config: () => Readonly<FrontConfig>;
  /** Loads an `nft -f` script off the event loop (nft.ts nftLoadAsync). */
  readonly write: (script: string) => Promise<void>;
  /**
   * The `nft -f` lines that replace one service's slots: delete `oldKeys`,
   * add `elements`, and with `slots`, first rewrite the service's chain for
   * that many slots (nft.ts scheduleUpdateScript).
   */
  readonly script: (service: ScheduledService, oldKeys: readonly number[], elements: readonly string[], slots?: number) => string;
  /**
   * The `nft -f` script that makes the kernel hold `targets` for every
   * service of `layout` whatever it holds now: the map flushed and
   * refilled, and the chains of services `chains` (indices) rewritten for
   * their slot counts (nft.ts scheduleRewriteScript).
   */
  readonly rewrite: (layout: readonly ScheduledService[], targets: ScheduleTargets, chains: ReadonlySet<number>) => string;
  /** Monotonic ms (tests inject one). */
  readonly now?: () => number;
}

export interface KernelScheduleStatus {
  readonly services: number;
  readonly writes: number;
  readonly writeFailures: number;
  /** Whole-schedule rewrites because a write raced with an install (what the kernel held was unknown). */
  readonly rewrites: number;
  /** Elements map `schedule` should hold now. */
  readonly elements: number;
  /** Services whose schedule is empty now (their SYNs queued: near capacity, or nothing to send them to). */
  readonly queued: number;
}

/**
 * The writer's per-service state, in typed arrays indexed like the
 * service's servers: each server's recent new-connection rate from its
 * `decided` count (for its headroom), and the inputs its schedule was last
 * computed from. Belongs to one ServiceRuntime object: a reload builds new
 * ones, and their rates start again at 0.
 */
interface ServiceState {
  readonly svc: ServiceRuntime;
  readonly decided: Float64Array;
  readonly at: Float64Array;
  readonly rate: Float64Array;
  /**
   * Everything the schedule is computed from (serviceSchedule): the
   * servers' weights after headroom, whether one is near capacity (1/0),
   * and when no server can take the SYN, the overflow clusters' free
   * capacity. Equal inputs give the same schedule, so the writer skips the
   * slot fill of a service whose inputs did not change (with 1,000
   * byrequests services of 100 servers the fill alone was ~10M steps a tick).
   */
  readonly cur: Float64Array;
  /** The inputs #want was last computed from; `prevLen` -1: none (after a full install). */
  readonly prev: Float64Array;
  prevLen: number;
}

function serviceState(svc: ServiceRuntime, now: number): ServiceState {
  const n = svc.servers.length;
  const decided = new Float64Array(n);
  for (let i = 0; i < n; i++) decided[i] = svc.servers[i]?.decided ?? 0;
  const m = n + 1 + svc.overflow.length;
  return { svc, decided, at: new Float64Array(n).fill(now), rate: new Float64Array(n), cur: new Float64Array(m), prev: new Float64Array(m), prevLen: -1 };
}

/**
 * Keeps map `schedule` following the servers' state. Invariants: one write
 * at a time, always of the latest state; `#have` is what the map holds
 * after the last successful write or full install, so a failed write is
 * retried at the next update with the full difference.
 *
 * A write is an `nft` child process; an install (start, reload, ctl change,
 * repair) is another, run from the event loop while a write may be in
 * flight, and the kernel commits the two in either order. A write that
 * lands after the install puts a schedule computed before it (a removed
 * server's marks, another service's slot offsets) into the new table, and
 * its deletes may fail there instead. So a write in flight during an
 * install leaves what the kernel holds unknown (`#unknown`), and the next
 * write is a whole rewrite (the map flushed and refilled, and the chains
 * that write rewrote: the install put the others in place), which holds
 * whatever the order was; the older write never has the last word. The
 * fallback writer does the same for its map (fallback.ts). Only those
 * chains: nft 1.0.6 takes ~12 ms per rule that names a map of 100k
 * elements, so every chain of 1,000 services would take 12 s.
 */
export class KernelScheduleWriter {
  readonly #deps: KernelScheduleDeps;
  readonly #now: () => number;
  #layout: ScheduledService[] = [];
  #want: (Int32Array | undefined)[] = [];
  #have: (Int32Array | undefined)[] = [];
  /** Per service index: rates and last inputs (ServiceState). */
  #states: (ServiceState | undefined)[] = [];
  #writing = false;
  #dirty = false;
  /** What the kernel holds is unknown (a write raced with an install): the next write rewrites the whole schedule. */
  #unknown = false;
  /** Services whose chain the write in flight rewrites (a slot count changed), and those a whole rewrite must put back. */
  #flightChains: readonly number[] = [];
  readonly #staleChains = new Set<number>();
  /** Installs so far: a write that sees this change under it raced with one. */
  #installs = 0;
  #rewrites = 0;
  #stopped = false;
  #failing = false;
  #writes = 0;
  #writeFailures = 0;
  #failedAt = -Infinity;
  /** When a whole install left the slots to this writer (installedEmpty), until they are written. */
  #fillingSince: number | undefined;

  constructor(deps: KernelScheduleDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? (() => performance.now());
  }

  /** A server's headroom now: HEADROOM_SECONDS of its recent rate, at least HEADROOM_MIN. */
  headroom(svc: ServiceRuntime, i: number): number {
    const st = this.#states[svc.index];
    return headroomAt(st !== undefined && st.svc === svc ? (st.rate[i] ?? 0) : 0);
  }

  /** The schedules a full install renders now (with the current headrooms). */
  render(cfg: Pick<FrontConfig, 'checkpoints' | 'services'> & { readonly failMode?: FrontConfig['failMode'] }, services: readonly ServiceRuntime[]): ScheduleTargets {
    return runtimeSchedule(cfg, services, (s, i) => {
      const svc = services[s];
      return svc === undefined ? HEADROOM_MIN : this.headroom(svc, i);
    });
  }

  /** A full install (start, reload, repair) rendered `targets` of configuration `cfg` (default: the running one) into the table. */
  installed(targets: ScheduleTargets, cfg: Pick<FrontConfig, 'checkpoints' | 'services'> & { readonly failMode?: FrontConfig['failMode'] } = this.#deps.config()): void {
    this.#layout = scheduleLayout(cfg);
    this.#have = [...targets];
    this.#want = [...targets];
    for (const st of this.#states) if (st !== undefined) st.prevLen = -1;
    this.#installs++;
    this.#fillingSince = undefined;
    // A write in flight may commit before this install or after it (see the
    // class comment): then what the kernel holds is unknown, and a whole
    // rewrite follows that write. Without one the kernel holds `targets`.
    if (this.#writing) {
      this.#unknown = true;
      for (const i of this.#flightChains) this.#staleChains.add(i);
    }
    this.#dirty = this.#writing || this.#unknown;
  }

  /**
   * The whole install just made declared map `schedule` empty (nft.ts
   * SCHEDULE_INLINE_MAX): the kernel holds every service's chain for its
   * slot count and no slot. Written now, off the event loop; until then the
   * lookups miss and the daemon decides those SYNs from the queue.
   */
  installedEmpty(): void {
    this.#have = this.#have.map((t) => (t === undefined ? undefined : new Int32Array(t.length).fill(-1)));
    this.#fillingSince = this.#now();
    this.#dirty = true;
    this.#kick();
  }

  /** What a full install renders now: the latest state asked for. */
  current(): ScheduleTargets {
    return this.#want;
  }

  /**
   * What the kernel holds: the last full install's schedule with every
   * successful write since; undefined while a write is in flight (it may
   * or may not have landed).
   */
  held(): ScheduleTargets | undefined {
    return this.#writing || this.#unknown ? undefined : [...this.#have];
  }

  /**
   * The servers' state may have changed: recompute, and write what changed
   * materially. Called every SCHEDULE_TICK_MS: without allocation while
   * nothing changed (typed arrays per service; with 1,000 services of 100
   * servers the arrays built per service and the WeakMap of rates took
   * ~35 ms of the event loop per call, measured 2026-11-26).
   */
  update(services: readonly ServiceRuntime[]): void {
    if (this.#stopped) return;
    const now = this.#now();
    let changed = false;
    for (const l of this.#layout) {
      const svc = services[l.index];
      if (svc === undefined) continue;
      let st = this.#states[l.index];
      if (st === undefined || st.svc !== svc) this.#states[l.index] = st = serviceState(svc, now);
      const len = this.#inputsOf(st, now);
      if (len === st.prevLen && sameRange(st.cur, st.prev, len)) continue;
      st.prev.set(st.cur.subarray(0, len));
      st.prevLen = len;
      const n = svc.servers.length;
      const w: number[] = [];
      for (let i = 0; i < n; i++) w.push(st.cur[i] ?? 0);
      const next = scheduleOf(svc, w, (st.cur[n] ?? 0) === 1);
      if (!materialChange(this.#want[l.index], next)) continue;
      this.#want[l.index] = next;
      changed = true;
    }
    if (changed) this.#dirty = true;
    // A failed write is retried at most once a second (not at every tick against a broken nft).
    if (this.#dirty && (!this.#failing || now - this.#failedAt >= 1000)) this.#kick();
  }

  /**
   * Samples the service's servers' rates (smoothed rate of `decided`, at
   * most one sample per 50 ms; a reload's fresh server starts at 0) and
   * writes its inputs into `st.cur` (ServiceState), as serverWeights()
   * with this writer's headrooms. Returns their length.
   */
  #inputsOf(st: ServiceState, now: number): number {
    const svc = st.svc;
    const n = svc.servers.length;
    let near = false;
    let any = false;
    for (let i = 0; i < n; i++) {
      const b = svc.servers[i];
      if (b === undefined) continue;
      const dt = (now - (st.at[i] ?? now)) / 1000;
      if (dt >= 0.05) {
        const r = Math.max(0, b.decided - (st.decided[i] ?? 0)) / dt;
        const was = st.rate[i] ?? 0;
        // Rises at once (the headroom must cover a burst), decays over ~1 s.
        st.rate[i] = r > was ? r : was + (r - was) * Math.min(1, dt);
        st.decided[i] = b.decided;
        st.at[i] = now;
      }
      const w = serverWeight(svc, b, headroomAt(st.rate[i] ?? 0));
      if (w === NEAR) near = true;
      st.cur[i] = Math.max(0, w);
      if (w > 0) any = true;
    }
    st.cur[n] = near ? 1 : 0;
    let len = n + 1;
    if (!near && !any) for (const o of svc.overflow) st.cur[len++] = o.freeCapacity;
    return len;
  }

  status(): KernelScheduleStatus {
    let elements = 0;
    let queued = 0;
    for (const l of this.#layout) {
      const n = this.#want[l.index]?.filter((t) => t >= 0).length ?? 0;
      elements += n;
      if (n === 0) queued++;
    }
    return { services: this.#layout.length, writes: this.#writes, writeFailures: this.#writeFailures, rewrites: this.#rewrites, elements, queued };
  }

  stop(): void {
    this.#stopped = true;
  }

  #kick(): void {
    if (this.#stopped || this.#writing || !this.#dirty) return;
    void this.#write();
  }

  async #write(): Promise<void> {
    this.#dirty = false;
    const lines: string[] = [];
    // Unknown (a write raced with an install): every service's slots, whatever the kernel holds.
    const whole = this.#unknown;
    const next = whole ? [...this.#want] : [...this.#have];
    const chains: number[] = [];
    if (whole) {
      // Chains of services no longer in the layout are gone with the install.
      for (const l of this.#layout) if (this.#staleChains.has(l.index)) chains.push(l.index);
      this.#staleChains.clear();
      lines.push(this.#deps.rewrite(this.#layout, next, new Set(chains)));
    }
    // Every chain rewrite before every slot: nft evaluates a rule naming
    // the map against the elements already in its view of the transaction
    // (~12 ms per rule at 100k slots; design doc).
    const slotLines: string[] = [];
    for (const l of whole ? [] : this.#layout) {
      const want = this.#want[l.index];
      const have = this.#have[l.index];
      if (want === have) continue;
      const oldKeys: number[] = [];
      if (have !== undefined) for (let k = 0; k < have.length; k++) if ((have[k] ?? -1) >= 0) oldKeys.push(l.offset + k);
      // Another slot count: the chain's rule changes with it (a new cycle from its first slot).
      const slots = want !== undefined && want.length !== have?.length ? want.length : undefined;
      if (slots !== undefined) {
        lines.push(this.#deps.script(l, [], [], slots));
        chains.push(l.index);
      }
      slotLines.push(this.#deps.script(l, oldKeys, slotElements(l, want)));
      next[l.index] = want;
    }
    lines.push(...slotLines);
    if (lines.every((l) => l === '')) {
      // Nothing for the kernel to change (e.g. a service with no slot either way).
      if (!whole) this.#have = next;
      return;
    }
    this.#writing = true;
    this.#unknown = false;
    this.#flightChains = chains;
    const installs = this.#installs;
    try {
      await this.#deps.write(lines.join(''));
      // An install during the write replaced `#have` (and set #unknown): keep those.
      if (installs === this.#installs) this.#have = next;
      this.#writes++;
      if (whole) this.#rewrites++;
      if (whole) this.#deps.log.info({ services: this.#layout.length }, 'kernel schedule rewritten whole (a write had raced with an install)');
      if (this.#fillingSince !== undefined && installs === this.#installs) {
        this.#deps.log.info({ elements: this.status().elements, ms: Math.round(this.#now() - this.#fillingSince) }, 'kernel schedule filled (the table was installed without its slots)');
        this.#fillingSince = undefined;
      }
      if (this.#failing) this.#deps.log.info('kernel schedule written again');
      this.#failing = false;
    } catch (err) {
      // Refused by a table an install replaced under it: expected, not a
      // failure; the whole rewrite follows (installed() set #unknown).
      if (installs === this.#installs) {
        if (whole) {
          this.#unknown = true;
          for (const i of chains) this.#staleChains.add(i);
        }
        this.#writeFailures++;
        this.#failedAt = this.#now();
        this.#dirty = true;
        if (!this.#failing) this.#deps.log.warn({ err: err instanceof Error ? err.message : err }, 'kernel schedule could not be written (logged once until a write works; SYNs follow the previous schedule)');
        this.#failing = true;
      }
    } finally {
      this.#writing = false;
      this.#flightChains = [];
    }
    // After a failure, the next update() or tick retries (no loop on a broken nft).
    if (!this.#failing) this.#kick();
  }
}
