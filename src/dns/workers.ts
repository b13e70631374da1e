/**
 * `sluice dns` on every core: a primary process and `workers` server
 * processes that share the listen addresses with SO_REUSEPORT.
 *
 * Division of work:
 *   primary  validates config and zones, holds the control plane (one
 *            subscription per front node and the one PUB the front nodes
 *            subscribe to: a PUB endpoint cannot be bound N times), the
 *            admin socket, ops HTTP and systemd; forwards every state
 *            message it applies to every worker; replaces a worker that
 *            dies (logged, counted).
 *   worker   binds UDP and TCP on every address (SO_REUSEPORT), answers,
 *            applies the forwarded state to its own tables, sends its due
 *            probe targets and its counters to the primary.
 *
 * Why forward rather than subscribe in each worker: the PUB socket, and
 * the cost: one IPC message per state message per worker (a few per second
 * per front node), against N ZeroMQ/CURVE sessions per front node.
 *
 * A replacement worker gets the state it missed from a replay: the last
 * cluster_load and high_rate_clients per sender and the last REPLAY_RTT
 * rtt_results, each with its age, so freshness is judged as if it had
 * been there.
 *
 * The `mapping` policy's table is the primary's alone (mapping/share.ts):
 * at each recompute the primary asks every worker for its query counts per
 * prefix (collectDemand), adds them into its one demand meter, recomputes,
 * and sends the workers the entries that changed (publishMapping); a new
 * or replacement worker gets the whole table when it is ready. So every
 * worker answers a prefix the same, whichever of them its queries reach.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log/logger.ts';
import { SluiceError } from '../errors/errors.ts';
import { MappingPublisher, type SharedEntry } from './mapping/share.ts';

/** A DNS worker failed to start serving (its own error, or it exited before it listened). */
export class DnsWorkerStartError extends SluiceError {
  readonly code = 'ERR_SLUICE_DNS_WORKER_START';
}

export type StateType = 'cluster_load' | 'high_rate_clients' | 'rtt_results';

export type ToWorker =
  | { readonly t: 'state'; readonly type: StateType; readonly body: unknown; readonly from: string; readonly ageMs: number }
  | { readonly t: 'reload' }
  | { readonly t: 'stop' }
  /** Report your mapping query counts since the last report (a 'demand' reply). */
  | { readonly t: 'demand?' }
  /** The primary's mapping table: whole (full) or a delta (share.ts). */
  | { readonly t: 'mapping'; readonly full: boolean; readonly set: readonly (string | number)[]; readonly del: readonly string[] };

export type WorkerStats = Readonly<Record<string, number>>;

/** A worker's recent steering decision (status), aged in ms when sent. */
export interface RecentDecision {
  readonly name: string;
  readonly prefix: string;
  readonly vips: readonly string[];
  readonly clusters: readonly string[];
  readonly reason: string;
  readonly ageMs: number;
}

export type FromWorker =
  | { readonly t: 'ready' }
  | { readonly t: 'failed'; readonly error: string }
  | { readonly t: 'probes'; readonly due: readonly (readonly [string, string])[] }
  | { readonly t: 'stats'; readonly stats: WorkerStats; readonly recent: readonly RecentDecision[] }
  /** Query counts per prefix of the `mapping` names since the last report (share.ts encodeDemand). */
  | { readonly t: 'demand'; readonly counts: readonly (string | number)[] };

const REPLAY_RTT = 1024;
/** A worker that dies this soon after it started is replaced only after RESTART_DELAY_MS (no fork loop). */
const EARLY_DEATH_MS = 5000;
const RESTART_DELAY_MS = 1000;

interface Slot {
  child: ChildProcess | undefined;
  startedAt: number;
  stats: WorkerStats | undefined;
  recent: readonly RecentDecision[];
  recentAt: number;
}

interface Remembered {
  readonly type: StateType;
  readonly body: unknown;
  readonly from: string;
  readonly at: number;
}

export interface WorkerPoolOptions {
  readonly count: number;
  readonly configFile: string;
  readonly log: Logger;
  /** Probe targets a worker found due: [target, prefix key] (ProbeScheduler.flush). */
  readonly onProbes: (due: readonly (readonly [string, string])[]) => void;
  /** A worker's counters changed (sum them with stats()). */
  readonly onStats: () => void;
  /** A worker's mapping query counts (share.ts mergeDemand). */
  readonly onDemand?: (counts: readonly (string | number)[]) => void;
}

export class WorkerPool {
  readonly #opts: WorkerPoolOptions;
  readonly #slots: Slot[];
  readonly #last = new Map<string, Remembered>();
  readonly #rtt: Remembered[] = [];
  /** The last counters of workers that died: kept in the sums, so totals never go back. */
  readonly #retired: Record<string, number> = {};
  #stopping = false;
  readonly #mapping = new MappingPublisher();
  /** The collectDemand round under way: replies still awaited, and its end. */
  #demandWait: { left: number; done: () => void } | undefined;
  died = 0;
  replaced = 0;
  /**
   * IPC messages to a worker that had just died (EPIPE: it was still
   * `connected` when sent). Without a listener the ChildProcess's 'error'
   * event would end the primary: a killed worker would take the whole server
   * down. The message is lost with the worker; its replacement gets the
   * replay and the whole mapping table.
   */
  sendFailed = 0;

  constructor(opts: WorkerPoolOptions) {
    this.#opts = opts;
    this.#slots = Array.from({ length: opts.count }, () => ({ child: undefined, startedAt: 0, stats: undefined, recent: [], recentAt: 0 }));
  }

  get count(): number {
    return this.#slots.length;
  }

  get alive(): number {
    return this.#slots.filter((s) => s.child !== undefined).length;
  }

  /** The last counters of every live worker, and the sum of the dead ones'. */
  stats(): WorkerStats[] {
    const out: WorkerStats[] = [this.#retired];
    for (const s of this.#slots) if (s.stats !== undefined) out.push(s.stats);
    return out;
  }

  /** The live workers' recent decisions, newest first, aged as of now. */
  recent(limit: number): RecentDecision[] {
    const now = performance.now();
    const all = this.#slots.flatMap((s) => s.recent.map((d) => ({ ...d, ageMs: d.ageMs + now - s.recentAt })));
    return all.sort((a, b) => a.ageMs - b.ageMs).slice(0, limit);
  }

  pids(): number[] {
    return this.#slots.flatMap((s) => (s.child?.pid !== undefined ? [s.child.pid] : []));
  }

  /** Forks every worker; resolves when all listen, rejects with the first failure (the others are stopped). */
  async start(): Promise<void> {
    try {
      await Promise.all(this.#slots.map((_, i) => this.#spawn(i)));
    } catch (err) {
      this.stop();
      throw err;
    }
  }

  /** `replacement`: a replacement that fails to start is tried again after RESTART_DELAY_MS, until stop(). */
  #spawn(i: number, replacement = false): Promise<void> {
    const slot = this.#slots[i];
    if (slot === undefined) return Promise.resolve();
    // The workers are not the service systemd watches: only the primary notifies.
    const env = { ...process.env };
    delete env['NOTIFY_SOCKET'];
    delete env['WATCHDOG_USEC'];
    delete env['WATCHDOG_PID'];
    const child = fork(fileURLToPath(new URL('./worker_main.ts', import.meta.url)), [this.#opts.configFile, String(i), String(this.#slots.length)], { env, stdio: 'inherit' });
    slot.child = child;
    slot.startedAt = performance.now();
    slot.stats = undefined;
    return new Promise((resolve, reject) => {
      let ready = false;
      child.on('error', (err) => {
        // A fork that failed (no pid) gets no 'exit': fail the start here.
        if (child.pid === undefined) {
          if (slot.child === child) slot.child = undefined;
          reject(new DnsWorkerStartError(`worker ${i}: ${err.message}`));
          if (replacement && !this.#stopping) this.#replace(i, RESTART_DELAY_MS);
          return;
        }
        this.sendFailed++;
        this.#opts.log.warn({ worker: i, pid: child.pid, err: err.message }, 'message to a dns worker not delivered (it is exiting; its replacement gets the state)');
      });
      child.on('message', (m: FromWorker) => {
        switch (m.t) {
          case 'ready':
            ready = true;
            this.#replay(child);
            // The table at once: a replacement answers as the others do from its first query.
            if (this.#mapping.size > 0) child.send({ t: 'mapping', ...this.#mapping.full() } satisfies ToWorker);
            resolve();
            break;
          case 'failed':
            reject(new DnsWorkerStartError(`worker ${i}: ${m.error}`));
            break;
          case 'probes':
            this.#opts.onProbes(m.due);
            break;
          case 'stats':
            slot.stats = m.stats;
            slot.recent = m.recent;
            slot.recentAt = performance.now();
            this.#opts.onStats();
            break;
          case 'demand': {
            this.#opts.onDemand?.(m.counts);
            const w = this.#demandWait;
            if (w !== undefined && --w.left <= 0) w.done();
            break;
          }
        }
      });
      child.on('exit', (code, signal) => {
        if (slot.child === child) {
          for (const [k, n] of Object.entries(slot.stats ?? {})) this.#retired[k] = (this.#retired[k] ?? 0) + n;
          slot.child = undefined;
          slot.stats = undefined;
          slot.recent = [];
        }
        if (!ready) reject(new DnsWorkerStartError(`worker ${i} exited before it listened (code ${String(code)}, signal ${String(signal)})`));
        if (this.#stopping) return;
        if (!ready) {
          if (replacement) this.#replace(i, RESTART_DELAY_MS);
          return;
        }
        this.died++;
        const early = performance.now() - slot.startedAt < EARLY_DEATH_MS;
        this.#opts.log.error({ worker: i, pid: child.pid, code, signal }, 'dns worker died; starting a replacement');
        this.#replace(i, early ? RESTART_DELAY_MS : 0);
      });
    });
  }

  #replace(i: number, delayMs: number): void {
    setTimeout(() => {
      if (this.#stopping) return;
      this.#spawn(i, true).then(
        () => {
          this.replaced++;
          this.#opts.log.info({ worker: i, pid: this.#slots[i]?.child?.pid }, 'dns worker replaced');
        },
        (err: unknown) => {
          this.#opts.log.error({ worker: i, err: (err as Error).message }, `replacement dns worker failed; trying again in ${RESTART_DELAY_MS} ms`);
        },
      );
    }, delayMs).unref();
  }

  /** A state message the primary applied: to every worker, and remembered for replacements. */
  forward(type: StateType, body: unknown, from: string): void {
    const r: Remembered = { type, body, from, at: performance.now() };
    if (type === 'rtt_results') {
      if (this.#rtt.length >= REPLAY_RTT) this.#rtt.shift();
      this.#rtt.push(r);
    } else this.#last.set(`${type} ${from}`, r);
    const msg: ToWorker = { t: 'state', type, body, from, ageMs: 0 };
    for (const s of this.#slots) if (s.child?.connected === true) s.child.send(msg);
  }

  #replay(child: ChildProcess): void {
    const now = performance.now();
    for (const r of [...this.#last.values(), ...this.#rtt]) {
      if (child.connected) child.send({ t: 'state', type: r.type, body: r.body, from: r.from, ageMs: now - r.at } satisfies ToWorker);
    }
  }

  /**
   * Asks every live worker for its mapping query counts (delivered to
   * onDemand); resolves when all replied or after timeoutMs (a late reply
   * is still added, to the next recompute's interval: no count is lost).
   */
  collectDemand(timeoutMs: number): Promise<void> {
    this.#demandWait?.done();
    return new Promise((resolve) => {
      let left = 0;
      for (const s of this.#slots) {
        if (s.child?.connected !== true) continue;
        s.child.send({ t: 'demand?' } satisfies ToWorker);
        left++;
      }
      if (left === 0) {
        resolve();
        return;
      }
      const timer = setTimeout(() => {
        w.done();
      }, timeoutMs);
      const w = {
        left,
        done: (): void => {
          clearTimeout(timer);
          if (this.#demandWait === w) this.#demandWait = undefined;
          resolve();
        },
      };
      this.#demandWait = w;
    });
  }

  /** The primary's new mapping table: what changed goes to every worker (nothing when nothing did). */
  publishMapping(entries: Iterable<[string, SharedEntry]>): { set: number; del: number } {
    const d = this.#mapping.delta(entries);
    if (d.set.length > 0 || d.del.length > 0) this.broadcast({ t: 'mapping', ...d });
    return { set: d.set.length / 3, del: d.del.length };
  }

  broadcast(msg: ToWorker): void {
    for (const s of this.#slots) if (s.child?.connected === true) s.child.send(msg);
  }

  stop(): void {
    this.#stopping = true;
    for (const s of this.#slots) s.child?.kill('SIGTERM');
  }
}
