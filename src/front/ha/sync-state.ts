/**
 * conntrackd's sync state, as `conntrackd -C FILE -s` prints it (1.4.7):
 *
 *   cache internal:
 *   current active connections:	           4
 *   connections created:		           6	failed:	           0
 *   ...
 *   cache external:
 *   current active connections:	           0
 *   ...
 *   UDP traffic (active device=sync0):
 *                    740 Bytes sent                  176 Bytes recv
 *                     20 Pckts sent                   11 Pckts recv
 *                      0 Error send                    0 Error recv
 *   message tracking:
 *                      0 Malformed msgs                    6 Lost msgs
 *
 * Read every SYNC_READ_MS off the packet path: one child process at a time
 * (a read still running when the next is due is skipped, never doubled),
 * bounded by a timeout. A read that fails (conntrackd down, no socket,
 * timeout, unreadable output) makes the state 'unknown' with the reason;
 * it never throws into the daemon.
 */
import { runOffLoop } from '../run-off-loop.ts';
import { CommandFailedError, CommandTimeoutError } from '../../errors/errors.ts';

export const SYNC_READ_MS = 5000;
export const SYNC_TIMEOUT_MS = 3000;

export interface SyncFigures {
  /** Flows in the internal cache (this node's own, replicated to the peer). */
  readonly internal: number;
  /** Flows in the external cache (the peer's, committed at a takeover). */
  readonly external: number;
  readonly bytesSent: number;
  readonly bytesReceived: number;
  readonly packetsSent: number;
  readonly packetsReceived: number;
  readonly sendErrors: number;
  readonly receiveErrors: number;
  readonly malformed: number;
  /** Sync messages the sequence tracking saw lost (FTFW resends them). */
  readonly lost: number;
  /** The sync interface conntrackd reports active. */
  readonly device: string | null;
}

export type SyncState =
  | { readonly state: 'off' }
  | { readonly state: 'ok'; readonly at: string; readonly figures: SyncFigures }
  | { readonly state: 'unknown'; readonly at: string | null; readonly reason: string };

/** The figures of `conntrackd -s` output; a string saying what is missing when it is not that output. */
export function parseSyncStats(text: string): SyncFigures | string {
  const section = (name: string): string | undefined => {
    const i = text.indexOf(`cache ${name}:`);
    if (i < 0) return undefined;
    const rest = text.slice(i + name.length + 7);
    const end = rest.search(/\n\s*\n/);
    return end < 0 ? rest : rest.slice(0, end);
  };
  const active = (s: string | undefined): number | undefined => {
    const m = s === undefined ? null : /current active connections:\s+(\d+)/.exec(s);
    return m?.[1] === undefined ? undefined : Number(m[1]);
  };
  const internal = active(section('internal'));
  const external = active(section('external'));
  if (internal === undefined || external === undefined) return 'no "cache internal" / "cache external" active connections in the output';
  const pair = (a: string, b: string): [number, number] | undefined => {
    const m = new RegExp(`(\\d+)\\s+${a}\\s+(\\d+)\\s+${b}`).exec(text);
    return m?.[1] === undefined || m[2] === undefined ? undefined : [Number(m[1]), Number(m[2])];
  };
  const bytes = pair('Bytes sent', 'Bytes recv');
  const packets = pair('Pckts sent', 'Pckts recv');
  const errors = pair('Error send', 'Error recv');
  const tracking = pair('Malformed msgs', 'Lost msgs');
  if (!bytes || !packets || !errors || !tracking) return 'no UDP traffic or message tracking figures in the output (is this conntrackd in FTFW mode over UDP?)';
  const device = /active device=([^)\s]+)\)/.exec(text)?.[1] ?? null;
  return {
    internal,
    external,
    bytesSent: bytes[0],
    bytesReceived: bytes[1],
    packetsSent: packets[0],
    packetsReceived: packets[1],
    sendErrors: errors[0],
    receiveErrors: errors[1],
    malformed: tracking[0],
    lost: tracking[1],
    device,
  };
}

/** Runs a command; resolves with stdout, rejects with an Error whose message names the command and why (injected in tests). */
export type RunCommand = (file: string, args: readonly string[], timeoutMs: number) => Promise<string>;

/** Off the event loop (run-off-loop.ts), like the rule check's children: conntrackd -s runs every few seconds on a pair's nodes. */
export const runCommand: RunCommand = async (file, args, timeoutMs) => {
  try {
    return await runOffLoop([file, ...args], { timeoutMs, maxMiB: 1 });
  } catch (err) {
    const why = err instanceof CommandTimeoutError ? `no answer within ${String(timeoutMs)} ms` : err instanceof CommandFailedError ? (err.stderr.trim().split('\n').pop() ?? '') || err.message : (err as Error).message;
    throw new CommandFailedError(`${file} ${args.join(' ')}`, why, { cause: err });
  }
};

export class SyncStateReader {
  #state: SyncState;
  #running = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Reads skipped because the previous one had not ended. */
  skipped = 0;
  /** Reads that ended in 'unknown'. */
  failures = 0;
  readonly #conf: string | undefined;
  readonly #run: RunCommand;
  readonly #now: () => Date;
  readonly #onChange: ((from: SyncState, to: SyncState) => void) | undefined;

  /** `conf`: ha.files.conntrackd; undefined without `ha` (state 'off', nothing runs). */
  constructor(conf: string | undefined, opts: { run?: RunCommand; now?: () => Date; onChange?: (from: SyncState, to: SyncState) => void } = {}) {
    this.#conf = conf;
    this.#run = opts.run ?? runCommand;
    this.#now = opts.now ?? (() => new Date());
    this.#onChange = opts.onChange;
    this.#state = conf === undefined ? { state: 'off' } : { state: 'unknown', at: null, reason: 'not read yet' };
  }

  get state(): SyncState {
    return this.#state;
  }

  start(everyMs = SYNC_READ_MS): void {
    if (this.#conf === undefined || this.#timer) return;
    void this.read();
    this.#timer = setInterval(() => void this.read(), everyMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One read (never two at once: a read due while one runs is skipped and counted). */
  async read(): Promise<void> {
    const conf = this.#conf;
    if (conf === undefined) return;
    if (this.#running) {
      this.skipped++;
      return;
    }
    this.#running = true;
    let next: SyncState;
    try {
      const out = await this.#run('conntrackd', ['-C', conf, '-s'], SYNC_TIMEOUT_MS);
      const f = parseSyncStats(out);
      next = typeof f === 'string' ? { state: 'unknown', at: this.#now().toISOString(), reason: `conntrackd -C ${conf} -s: ${f}` } : { state: 'ok', at: this.#now().toISOString(), figures: f };
    } catch (err) {
      next = { state: 'unknown', at: this.#now().toISOString(), reason: (err as Error).message };
    } finally {
      this.#running = false;
    }
    if (next.state === 'unknown') this.failures++;
    const prev = this.#state;
    this.#state = next;
    if (prev.state !== next.state || (prev.state === 'unknown' && next.state === 'unknown' && prev.reason !== next.reason)) this.#onChange?.(prev, next);
  }
}
