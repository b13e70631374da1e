/**
 * The front node's watchdog check: is the packet loop alive?
 *
 * Invariant (what a WATCHDOG=1 from the front node asserts): at the moment
 * of the ping
 *   1. the JS event loop turns (the watchdog timer ran at all);
 *   2. the queue is open and libuv still polls its netlink socket (libuv
 *      stops a poll handle for good after a poll error);
 *   3. the kernel lists our queue number as bound to our socket's netlink
 *      port id (/proc/net/netfilter/nfnetlink_queue, per network
 *      namespace): packets of our rules really come to this socket. That
 *      file is mode 0440 root: the service user (deploy/systemd) cannot read
 *      it, and then this point rests on the open socket alone, which is
 *      enough: the kernel unbinds a queue only when its socket is released
 *      or sends the UNBIND itself (any other socket's command on a bound
 *      queue gets EPERM, nfqnl_recv_config), and we hold the socket open;
 *   4. the socket is not stalled: it was not readable at the previous check
 *      AND still readable now with no poll callback in between. A healthy
 *      loop drains a readable socket within one loop turn, so two checks
 *      half a watchdog interval apart that both find data waiting, with the
 *      wakeup count unchanged, mean packets are piling up unread. (One
 *      readable check alone is normal: a packet may have just arrived.)
 * Failing any of these withholds WATCHDOG=1; systemd then restarts the
 * daemon, whose start re-installs the rules and binds the queue again.
 */
import { readFileSync } from 'node:fs';
import type { NativeLiveness } from '../nfqueue/native.ts';
import type { Liveness } from './watchdog.ts';

export const NFQUEUE_PROC = '/proc/net/netfilter/nfnetlink_queue';

/** The queue's liveness source (NfQueue; a fake in unit tests). */
export interface LivenessSource {
  readonly queue: number;
  liveness(): NativeLiveness | undefined;
}

/**
 * Owners of bound queues from the proc file: queue number -> port id.
 * Line: queue_num portid queue_total copy_mode copy_range dropped user_dropped id_seq 1
 */
export function parseQueueOwners(text: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    const q = Number(f[0]);
    const p = Number(f[1]);
    if (f.length >= 2 && Number.isInteger(q) && Number.isInteger(p)) out.set(q, p);
  }
  return out;
}

export class QueueLiveness {
  readonly #source: () => LivenessSource | undefined;
  readonly #readProc: () => string;
  #last: { readable: boolean; wakeups: number } | undefined;

  /** `source` returns the current queue (undefined before it is open). */
  constructor(source: () => LivenessSource | undefined, readProc: () => string = () => readFileSync(NFQUEUE_PROC, 'utf8')) {
    this.#source = source;
    this.#readProc = readProc;
  }

  check(): Liveness {
    const q = this.#source();
    const l = q?.liveness();
    if (q === undefined || l === undefined) return this.#dead('the queue is not open');
    if (!l.polling) return this.#dead(`queue ${q.queue}: the netlink socket is no longer polled (poll error)`);
    let owners: Map<number, number> | undefined;
    try {
      owners = parseQueueOwners(this.#readProc());
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Not root (see point 3 above): the open, polled socket stands for the binding.
      if (code !== 'EACCES' && code !== 'EPERM') return this.#dead(`cannot read ${NFQUEUE_PROC}: ${(err as Error).message}`);
    }
    const owner = owners?.get(q.queue);
    if (owners !== undefined && owner !== l.portid) {
      return this.#dead(owner === undefined ? `queue ${q.queue} is not bound in the kernel` : `queue ${q.queue} is bound to netlink port ${owner}, not ours (${l.portid})`);
    }
    const prev = this.#last;
    this.#last = { readable: l.readable, wakeups: l.wakeups };
    if (prev !== undefined && prev.readable && l.readable && prev.wakeups === l.wakeups) {
      return { alive: false, reason: `queue ${q.queue}: packets waiting and not read since the previous check` };
    }
    return { alive: true };
  }

  #dead(reason: string): Liveness {
    this.#last = undefined;
    return { alive: false, reason };
  }
}
