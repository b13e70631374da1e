/**
 * The dashboard's memory of the last 10 minutes, per cluster and per server:
 * new connections/s, utilization and (per server) the state shown and its
 * health transitions. Fed with the view after every poll round
 * (Poller -> History.record), read by /api/history and the charts.
 *
 * Connections/s are deltas of the front node's `decided` counters between
 * polls, accumulated until the next point is stored and divided by the time
 * between the two points. A counter that went down means the daemon
 * restarted and counts from 0 again: the delta of that poll is the new value
 * (as Prometheus' rate() does), and the reset is counted. A point after a
 * gap of more than GAP_STEPS steps (the front node was not answering) has no
 * rate: an average over the whole outage would be drawn as a fact.
 *
 * Health transitions are events, kept apart from the points so that a
 * change between two stored points is never lost: a change of the state
 * shown between two polls is one event; when the front node reports its
 * `transitions` counter and it moved by more than the changes seen (a server
 * that went down and came back between two polls), the event says how many.
 *
 * Bounds, whatever the site's size (the invariants of this file):
 *   - at most POINTS_MAX points per series: one point per step, the step
 *     being the poll interval, or window / POINTS_MAX when polls are faster;
 *   - at most EVENTS_MAX events per server (the oldest are dropped);
 *   - at most `maxSeries` series (clusters and servers together, default
 *     SERIES_MAX). A series not seen for a whole window is forgotten; a new
 *     one that finds no room is not tracked, and counted in `dropped` (the
 *     page says so). Clusters are recorded before servers, so they get the
 *     room first. A cluster, service or server name longer than NAME_MAX
 *     (a front node's configuration allows far less) is not tracked either:
 *     the names are the only part of a series whose size a status sets.
 * Points are kept in preallocated typed arrays (rings): the memory of a
 * series does not grow after its creation.
 */
import type { ClusterView, DashboardState, ServerState } from './state.ts';
import { InvalidArgumentError } from '../errors/errors.ts';

export const HISTORY_WINDOW_MS = 10 * 60 * 1000;
export const POINTS_MAX = 600;
export const EVENTS_MAX = 32;
export const SERIES_MAX = 512;
export const NAME_MAX = 256;
/** A point more than this many steps after the previous one follows a gap. */
export const GAP_STEPS = 3;

/** The states a server is shown in, and their codes in the rings (0: unknown). */
export const SERVER_STATES: readonly ServerState[] = ['up', 'draining', 'disabled', 'maint', 'down'];

export interface HistoryOptions {
  /** The poll interval (ms). */
  readonly intervalMs: number;
  readonly windowMs?: number;
  readonly maxSeries?: number;
}

/**
 * A fixed-capacity ring of samples: a time and `columns` numbers each (NaN:
 * unknown). Pushing past the capacity overwrites the oldest sample.
 */
export class Ring {
  readonly capacity: number;
  readonly #at: Float64Array;
  readonly #cols: Float64Array[];
  #head = 0;
  #size = 0;

  constructor(capacity: number, columns: number) {
    if (!(Number.isInteger(capacity) && capacity > 0)) throw new InvalidArgumentError(`ring capacity ${capacity}: a positive integer is needed`);
    this.capacity = capacity;
    this.#at = new Float64Array(capacity);
    this.#cols = Array.from({ length: columns }, () => new Float64Array(capacity));
  }

  get size(): number {
    return this.#size;
  }

  push(at: number, values: readonly number[]): void {
    const i = (this.#head + this.#size) % this.capacity;
    this.#at[i] = at;
    for (const [c, col] of this.#cols.entries()) col[i] = values[c] ?? Number.NaN;
    if (this.#size < this.capacity) this.#size++;
    else this.#head = (this.#head + 1) % this.capacity;
  }

  /** Time of the k-th oldest sample (0 <= k < size). */
  at(k: number): number {
    return this.#at[(this.#head + k) % this.capacity] ?? Number.NaN;
  }

  /** Column c of the k-th oldest sample. */
  value(k: number, c: number): number {
    return this.#cols[c]?.[(this.#head + k) % this.capacity] ?? Number.NaN;
  }

  /** Drops the samples older than `from`. */
  dropBefore(from: number): void {
    while (this.#size > 0 && this.at(0) < from) {
      this.#head = (this.#head + 1) % this.capacity;
      this.#size--;
    }
  }
}

export interface HealthEvent {
  /** Monotonic ms (the poller's clock). */
  readonly at: number;
  /** The state shown before and after; equal when only the transitions counter moved. */
  readonly from: ServerState;
  readonly to: ServerState;
  /** Transitions this event stands for (more than 1: the server changed more often than the polls saw). */
  readonly count: number;
  /** The front node's reason for the new health state, if it gave one. */
  readonly reason: string | null;
}

/** Columns of a series' ring. */
const CPS = 0;
const UTIL = 1;
const STATE = 2;

export type SeriesKind = 'cluster' | 'server';

export class Series {
  readonly kind: SeriesKind;
  readonly cluster: string;
  readonly service: string;
  readonly server: string;
  readonly points: Ring;
  readonly events: HealthEvent[] = [];
  /** Counter resets seen (daemon restarts). */
  resets = 0;
  /** Events dropped past EVENTS_MAX. */
  eventsDropped = 0;
  lastSeen = -Infinity;
  #prev: number | null = null;
  #accum = 0;
  /** Time the accumulated delta counts from (the last stored point), null: no baseline. */
  #accumFrom: number | null = null;
  #lastPush: number | null = null;
  #state: ServerState | null = null;
  #transitions: number | null = null;

  constructor(kind: SeriesKind, cluster: string, service: string, server: string, capacity: number) {
    this.kind = kind;
    this.cluster = cluster;
    this.service = service;
    this.server = server;
    this.points = new Ring(capacity, 3);
  }

  /**
   * One poll's reading. `counter` is the decided counter (null: not
   * reported), `utilization` 0..1+ (null: unknown), `state` and
   * `transitions` for servers. A point is stored when `push` says so.
   */
  observe(now: number, push: boolean, gapMs: number, r: { counter: number | null; utilization: number | null; state?: ServerState | null; transitions?: number | null; reason?: string | null }): void {
    this.lastSeen = now;
    if (r.counter === null) {
      this.#prev = null;
      this.#accumFrom = null;
      this.#accum = 0;
    } else if (this.#prev !== null) {
      let d = r.counter - this.#prev;
      if (d < 0) {
        this.resets++;
        d = r.counter;
      }
      this.#accum += d;
      this.#prev = r.counter;
    } else {
      this.#prev = r.counter;
      this.#accum = 0;
      // No earlier reading: the rate starts at the next point.
      this.#accumFrom = null;
    }
    this.#health(now, r.state ?? null, r.transitions ?? null, r.reason ?? null);
    if (!push) return;
    let cps = Number.NaN;
    if (this.#accumFrom !== null && now > this.#accumFrom && now - this.#accumFrom <= gapMs) cps = this.#accum / ((now - this.#accumFrom) / 1000);
    this.#accum = 0;
    this.#accumFrom = this.#prev === null ? null : now;
    this.#lastPush = now;
    const code = this.#state === null ? 0 : SERVER_STATES.indexOf(this.#state) + 1;
    this.points.push(now, [cps, r.utilization ?? Number.NaN, code]);
  }

  get lastPush(): number | null {
    return this.#lastPush;
  }

  #health(now: number, state: ServerState | null, transitions: number | null, reason: string | null): void {
    let changes = 0;
    let from = this.#state;
    if (state !== null && this.#state !== null && state !== this.#state) changes = 1;
    let counted = 0;
    if (transitions !== null && this.#transitions !== null) {
      counted = transitions - this.#transitions;
      if (counted < 0) counted = transitions; // the front node restarted: its counter starts at 0
    }
    if (transitions !== null) this.#transitions = transitions;
    const count = Math.max(changes, counted);
    if (state !== null) {
      from ??= state;
      this.#state = state;
    }
    if (count > 0 && state !== null && from !== null) this.#event({ at: now, from, to: state, count, reason });
  }

  #event(e: HealthEvent): void {
    this.events.push(e);
    if (this.events.length > EVENTS_MAX) {
      this.events.shift();
      this.eventsDropped++;
    }
  }

  /** Forgets what is older than `from`. */
  trim(from: number): void {
    this.points.dropBefore(from);
    while (this.events.length > 0 && (this.events[0]?.at ?? from) < from) this.events.shift();
  }

  /** The state shown at the k-th oldest point, null when unknown. */
  stateAt(k: number): ServerState | null {
    const code = this.points.value(k, STATE);
    return SERVER_STATES[code - 1] ?? null;
  }

  cpsAt(k: number): number | null {
    const v = this.points.value(k, CPS);
    return Number.isNaN(v) ? null : v;
  }

  utilizationAt(k: number): number | null {
    const v = this.points.value(k, UTIL);
    return Number.isNaN(v) ? null : v;
  }
}

/** The history as /api/history sends it: times in seconds relative to `now` (negative: the past). */
export interface HistoryPoints {
  t: number[];
  cps: (number | null)[];
  utilization: (number | null)[];
}

export interface HistoryServerJson {
  service: string;
  name: string;
  points: HistoryPoints & { state: (ServerState | null)[] };
  events: { t: number; from: ServerState; to: ServerState; count: number; reason: string | null }[];
  resets: number;
}

export interface HistoryClusterJson {
  name: string;
  points: HistoryPoints;
  resets: number;
  servers: HistoryServerJson[];
}

export interface HistoryJson {
  generatedAt: string;
  windowSeconds: number;
  stepSeconds: number;
  maxSeries: number;
  series: number;
  /** Series seen in the last round that found no room (see SERIES_MAX). */
  dropped: number;
  clusters: HistoryClusterJson[];
}

const seriesKey = (kind: SeriesKind, cluster: string, service: string, server: string): string => `${kind}\u0000${cluster}\u0000${service}\u0000${server}`;

export class History {
  readonly windowMs: number;
  readonly stepMs: number;
  readonly intervalMs: number;
  readonly maxSeries: number;
  readonly capacity: number;
  /** Insertion order: clusters and their servers in the order first seen. */
  readonly #series = new Map<string, Series>();
  dropped = 0;

  constructor(opts: HistoryOptions) {
    this.windowMs = opts.windowMs ?? HISTORY_WINDOW_MS;
    this.intervalMs = opts.intervalMs;
    this.maxSeries = opts.maxSeries ?? SERIES_MAX;
    if (!(this.intervalMs > 0 && this.windowMs > 0 && this.maxSeries >= 1)) throw new InvalidArgumentError('history: interval, window and maxSeries must be positive');
    this.stepMs = Math.max(this.intervalMs, this.windowMs / POINTS_MAX);
    // One more than fits in the window, so a full window is drawn edge to edge.
    this.capacity = Math.min(POINTS_MAX, Math.ceil(this.windowMs / this.stepMs)) + 1;
  }

  get size(): number {
    return this.#series.size;
  }

  /** Every series, clusters and servers in the order first seen. */
  series(): IterableIterator<Series> {
    return this.#series.values();
  }

  /** Records one round's view at monotonic time `now` (ms). */
  record(now: number, view: DashboardState): void {
    for (const [k, s] of this.#series) {
      if (now - s.lastSeen > this.windowMs) this.#series.delete(k);
      else s.trim(now - this.windowMs);
    }
    let dropped = 0;
    const gapMs = GAP_STEPS * this.stepMs;
    const fronts = view.clusters.filter((c) => c.frontUp);
    for (const c of fronts) {
      const s = this.#get('cluster', c.name, '', '');
      if (!s) {
        dropped++;
        continue;
      }
      s.observe(now, this.#due(s, now), gapMs, { counter: c.decided, utilization: clusterUtilization(c) });
    }
    for (const c of fronts) {
      for (const b of c.servers) {
        const s = this.#get('server', c.name, b.service, b.name);
        if (!s) {
          dropped++;
          continue;
        }
        s.observe(now, this.#due(s, now), gapMs, { counter: b.decided, utilization: b.utilization, state: b.state, transitions: b.health?.transitions ?? null, reason: b.health?.reason ?? null });
      }
    }
    this.dropped = dropped;
  }

  /** Whether a point is due: a step since the last one, less half a poll of jitter. */
  #due(s: Series, now: number): boolean {
    const last = s.lastPush;
    return last === null || now - last >= this.stepMs - this.intervalMs / 2;
  }

  #get(kind: SeriesKind, cluster: string, service: string, server: string): Series | undefined {
    const key = seriesKey(kind, cluster, service, server);
    let s = this.#series.get(key);
    if (!s && this.#series.size < this.maxSeries && cluster.length <= NAME_MAX && service.length <= NAME_MAX && server.length <= NAME_MAX) {
      s = new Series(kind, cluster, service, server, this.capacity);
      this.#series.set(key, s);
    }
    return s;
  }

  /** The history as JSON, optionally of one cluster only. */
  toJSON(now: number, cluster?: string): HistoryJson {
    const rel = (at: number): number => Math.round((at - now) / 100) / 10;
    const clusters = new Map<string, HistoryClusterJson>();
    const clusterOf = (name: string): HistoryClusterJson => {
      let c = clusters.get(name);
      if (!c) {
        c = { name, points: { t: [], cps: [], utilization: [] }, resets: 0, servers: [] };
        clusters.set(name, c);
      }
      return c;
    };
    for (const s of this.#series.values()) {
      if (cluster !== undefined && s.cluster !== cluster) continue;
      const c = clusterOf(s.cluster);
      const points: HistoryPoints = { t: [], cps: [], utilization: [] };
      const states: (ServerState | null)[] = [];
      for (let k = 0; k < s.points.size; k++) {
        points.t.push(rel(s.points.at(k)));
        points.cps.push(roundOrNull(s.cpsAt(k)));
        points.utilization.push(roundOrNull(s.utilizationAt(k)));
        states.push(s.stateAt(k));
      }
      if (s.kind === 'cluster') {
        c.points = points;
        c.resets = s.resets;
      } else {
        c.servers.push({
          service: s.service,
          name: s.server,
          points: { ...points, state: states },
          events: s.events.map((e) => ({ t: rel(e.at), from: e.from, to: e.to, count: e.count, reason: e.reason })),
          resets: s.resets,
        });
      }
    }
    return {
      generatedAt: new Date().toISOString(),
      windowSeconds: this.windowMs / 1000,
      stepSeconds: this.stepMs / 1000,
      maxSeries: this.maxSeries,
      series: this.#series.size,
      dropped: this.dropped,
      clusters: [...clusters.values()],
    };
  }
}

/** The cluster's load over its capacity (both new connections/s), null when either is unknown or the capacity 0. */
export function clusterUtilization(c: ClusterView): number | null {
  return c.load !== null && c.capacity !== null && c.capacity > 0 ? c.load / c.capacity : null;
}

function roundOrNull(x: number | null): number | null {
  return x === null ? null : Math.round(x * 1000) / 1000;
}
