/**
 * Seed 000's send_request_rate: once per pass, the threshold is `factor`
 * times the average client rate; every client above it is queued, and the
 * queue is sent to DNS whenever it is full and once more at the end of the
 * pass (that last message has final: true, even when empty, so the DNS side
 * knows the pass is complete).
 */
import type { Body } from '../control/messages.ts';
import { formatIPv4Address } from '../packet/address.ts';
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
  const average = w.clients > 0 ? w.total / w.clients : 0;
  const threshold = o.factor * average;
  let queue: [string, number][] = [];
  let reported = 0;
  let messages = 0;
  const flush = (final: boolean): void => {
    send({ cluster: o.cluster, threshold, average, clients: queue, final });
    messages++;
    queue = [];
  };
  for (const [client, r] of table.clients) {
    if (average <= 0 || r.rate <= threshold) continue;
    queue.push([formatIPv4Address(client), r.rate]);
    reported++;
    if (queue.length >= o.queueSize) flush(false);
  }
  flush(true);
  return { average, threshold, reported, messages };
}
