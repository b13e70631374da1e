/**
 * The kernel's own account of when flows open and close, in the order it
 * saw them: `conntrack -E` in one namespace. Tests that judge concurrency
 * replay this one stream instead of lining up wall clocks of several
 * processes (curl, a shell's `date`), whose start-up delays on a busy
 * machine differ by hundreds of milliseconds and made phantom overlaps.
 *
 * The order is the truth that matters to a front node: a conntrack entry is
 * confirmed (NEW) only when the SYN leaves the node after its verdict, and
 * the first FIN or RST of a flow moves its entry out of ESTABLISHED (an
 * UPDATE) in the same softirq pass that hands the packet to NFLOG, before
 * any userspace daemon can react to it. So a flow admitted after another
 * one's release shows its NEW after that one's close here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { until } from './wait.ts';

export interface FlowEvent {
  /** 'open': confirmed (NEW); 'close': first state past ESTABLISHED, or destroyed. */
  kind: 'open' | 'close';
  /** Original direction source address and port: the client's end. */
  key: string;
  /** The event line as conntrack printed it (for failure messages). */
  line: string;
}

const LINE = /^\s*\[(NEW|UPDATE|DESTROY)\]\s+tcp\s+6\s+(?:\d+\s+)?([A-Z_]+\s+)?src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)/;
const OPEN_STATES = new Set(['SYN_SENT', 'SYN_RECV', 'ESTABLISHED']);

/** Parses one `conntrack -E` line; undefined for lines of no interest. */
export function parseFlowEvent(line: string): FlowEvent | undefined {
  const m = LINE.exec(line);
  if (!m) return undefined;
  const [, type = '', stateField = '', src = '', , sport = ''] = m;
  const state = stateField.trim();
  const key = `${src}:${sport}`;
  if (type === 'NEW') return { kind: 'open', key, line };
  if (type === 'DESTROY' || !OPEN_STATES.has(state)) return { kind: 'close', key, line };
  return undefined;
}

/**
 * Replays events in order: at most how many flows were open at once, how
 * many opened, and how many are still open at the end. A flow counts from
 * its NEW to its first close event; later close events of it, and closes
 * of flows opened before the slice, are ignored.
 */
export function replayFlows(events: readonly FlowEvent[]): { most: number; opened: number; stillOpen: number } {
  const open = new Set<string>();
  let most = 0;
  let opened = 0;
  for (const e of events) {
    if (e.kind === 'open') {
      if (open.has(e.key)) continue;
      open.add(e.key);
      opened++;
      most = Math.max(most, open.size);
    } else {
      open.delete(e.key);
    }
  }
  return { most, opened, stillOpen: open.size };
}

/** `conntrack -E` for TCP flows to one destination, in a namespace. */
export class FlowWatch {
  readonly events: FlowEvent[] = [];
  private readonly child: ChildProcess;
  private exited = false;

  constructor(ns: string, dst: string, dport: number) {
    this.child = spawn('ip', ['netns', 'exec', ns, 'conntrack', '-E', '-p', 'tcp', '--orig-dst', dst, '--dport', String(dport)], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.on('exit', () => (this.exited = true));
    const rl = createInterface({ input: this.child.stdout! });
    rl.on('line', (line) => {
      const e = parseFlowEvent(line);
      if (e) this.events.push(e);
    });
  }

  /**
   * conntrack prints nothing when its subscription is in place: the caller
   * makes a flow (probe) and this waits until that flow's close is seen, so
   * every later flow is in the stream.
   */
  async ready(probe: () => Promise<unknown>, deadlineMs = 15_000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    while (!this.events.some((e) => e.kind === 'close')) {
      if (this.exited) throw new Error('conntrack -E exited');
      if (Date.now() > deadline) throw new Error('conntrack -E saw no flow close of the probe');
      await probe();
      await until(() => this.events.some((e) => e.kind === 'close'), 'probe flow seen', 1000).catch(() => undefined);
    }
  }

  /** Stops the watch; events that arrived so far stay in `events`. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await gone;
  }
}
