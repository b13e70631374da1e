/**
 * Seed 000's send_request_rate: once per pass, the threshold is `factor`
 * times the average rate of the clients that made requests in the pass's
 * window; every client above it is queued, and the
 * queue is sent to DNS whenever it is full and once more at the end of the
 * pass (that last message has final: true, even when empty, so the DNS side
 * knows the pass is complete).
 *
 * A client is a prefix (receive_request_rate.ts); an entry carries its
 * prefix length when that is not one address, and IPv6 clients go in their
 * own messages, sent before the IPv4 ones: a DNS server that speaks
 * control-protocol version 1 only rejects the IPv6 ones (counted) and
 * still gets every IPv4 client and the final message (src/control/messages.ts).
 */
import type { Body } from '../control/messages.ts';
import type { ClientRateTable } from './update_request_rate.ts';

export interface SendRequestRateOptions {
  readonly cluster: string;
  /** Threshold = factor x average rate. */
  readonly factor: number;
  /** Clients per message (the queue's size). */
  readonly queueSize: number;
}

export interface PassResult {
  average: number;
  threshold: number;
  reported: number;
  messages: number;
}

export function sendRequestRate(table: ClientRateTable, o: SendRequestRateOptions, now: number, send: (body: Body<'high_rate_clients'>) => void): PassResult {
  const w = table.closeWindow(now);
  // Over the clients that made requests in the window (closeWindow).
  const average = w.active > 0 ? w.total / w.active : 0;
  const threshold = o.factor * average;
  type Entry = Body<'high_rate_clients'>['clients'][number];
  const queues: { v4: Entry[]; v6: Entry[] } = { v4: [], v6: [] };
  let reported = 0;
  let messages = 0;
  const flush = (q: 'v4' | 'v6', final: boolean): void => {
    send({ cluster: o.cluster, threshold, average, clients: queues[q], final });
    messages++;
    queues[q] = [];
  };
  for (const [client, r] of table.clients) {
    if (average <= 0 || r.rate <= threshold) continue;
    const q = client.includes(':') ? 'v6' : 'v4';
    const host = q === 'v6' ? 128 : 32;
    queues[q].push(r.length === host ? [client, r.rate] : [client, r.rate, r.length]);
    reported++;
    if (queues[q].length >= o.queueSize) flush(q, false);
  }
  if (queues.v6.length > 0) flush('v6', false);
  flush('v4', true);
  return { average, threshold, reported, messages };
}
