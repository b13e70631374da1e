/**
 * Seed 000's receive_request_rate: a server's per-client request counts,
 * each folded into the cluster's table by update_request_rate.
 */
import type { Body } from '../control/messages.ts';
import { parseIPv4Address } from '../packet/address.ts';
import type { ClientRateTable } from './update_request_rate.ts';

/** Returns the number of clients applied (the schema has already checked every address). */
export function receiveRequestRate(table: ClientRateTable, report: Body<'request_rate'>, now: number): number {
  let n = 0;
  for (const [ip, requests] of report.clients) {
    const a = parseIPv4Address(ip);
    if (a === undefined || requests <= 0) continue;
    table.updateRequestRate(a, requests, now);
    n++;
  }
  return n;
}
