/**
 * The CPU time of the front node's event-loop turns (native/src/loop_turns.c).
 *
 * Why beside the loop-delay sampler (nodejs_eventloop_lag_*): that one reads
 * wall-clock lateness, which on a machine whose cores are shared with
 * busier processes includes the time the daemon's thread waited for a CPU.
 * A turn's CPU time is what the daemon itself spent before it could poll
 * for the next SYNs: its own stall. Measured on the testbed with 1M flows
 * ending (scripts/bench/front-flows.ts), the two differ by the scheduler's
 * share; the daemon can shorten only this one.
 *
 * Read at scrape time: the longest turn since the last read, then reset
 * (as prom-client resets its loop-delay histogram at each scrape).
 */
import { SluiceError } from '../errors/errors.ts';
import { loadNative } from '../nfqueue/native.ts';

/** The addon refused to start the measure (started twice in one process, or libuv failed). */
export class LoopTurnsError extends SluiceError {
  readonly code = 'ERR_SLUICE_LOOP_TURNS';
}

const MAX_NS = 0;
const TURNS = 1;

export class LoopTurns {
  readonly #stats: Float64Array;

  private constructor(stats: Float64Array) {
    this.#stats = stats;
  }

  /** Starts measuring the calling thread's loop; once per process. Throws LoopTurnsError. */
  static start(): LoopTurns {
    const native = loadNative();
    const stats = new Float64Array(native.LOOP_TURN_WORDS);
    try {
      native.loopTurnsStart(stats);
    } catch (err) {
      throw new LoopTurnsError(`cannot measure event-loop turns: ${(err as Error).message}`, { cause: err });
    }
    return new LoopTurns(stats);
  }

  /** The longest turn's CPU time in seconds since the last call (0 if no turn ended since), then starts a new interval. */
  takeMaxSeconds(): number {
    const ns = this.#stats[MAX_NS] ?? 0;
    this.#stats[MAX_NS] = 0;
    return ns / 1e9;
  }

  /** Turns counted since start. */
  get turns(): number {
    return this.#stats[TURNS] ?? 0;
  }
}
