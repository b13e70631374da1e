/**
 * The kernel's view of our NFQUEUE, from /proc/net/netfilter/nfnetlink_queue
 * (per network namespace): how many packets wait for a verdict now, and how
 * many the kernel dropped because the queue was full (without fail-open) or
 * could not be delivered to us (socket buffer full). Read at scrape time
 * only; absent file or queue: undefined.
 *
 * Line format (net/netfilter/nfnetlink_queue.c, seq_show):
 *   queue_num peer_portid queue_total copy_mode copy_range queue_dropped queue_user_dropped id_sequence 1
 */
import { readFileSync } from 'node:fs';

export interface KernelQueueStats {
  /** Packets waiting for a verdict now. */
  readonly waiting: number;
  /** Dropped because the queue was full (fail-open accepts them instead). */
  readonly queueDropped: number;
  /** Dropped because they could not be sent to our socket. */
  readonly userDropped: number;
  /**
   * The last packet id the kernel gave (ids run 1, 2, ... from the bind):
   * every packet numbered was received by the daemon or lost to its socket
   * (QueueStats.lost), so idSequence = packets + lost once the socket is read.
   */
  readonly idSequence: number;
}

export const NFQUEUE_PROC = '/proc/net/netfilter/nfnetlink_queue';

export function parseKernelQueue(text: string, queue: number): KernelQueueStats | undefined {
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || Number(f[0]) !== queue) continue;
    const waiting = Number(f[2]);
    const queueDropped = Number(f[5]);
    const userDropped = Number(f[6]);
    const idSequence = Number(f[7]);
    if (![waiting, queueDropped, userDropped, idSequence].every(Number.isFinite)) return undefined;
    return { waiting, queueDropped, userDropped, idSequence };
  }
  return undefined;
}

export function readKernelQueue(queue: number, file = NFQUEUE_PROC): KernelQueueStats | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  return parseKernelQueue(text, queue);
}
