/**
 * Seed 000's receive_request_rate: a server's per-client request counts,
 * each folded into the cluster's table by update_request_rate.
 *
 * A client is counted by its prefix (control.requestRate.ipv4Prefix /
 * ipv6Prefix: per address for IPv4 and per /64 for IPv6 by default), so the
 * many addresses one IPv6 host or site takes from its /64 (privacy
 * addresses rotate daily) are one client, as one IPv4 address is.
 */
import type { Body } from '../control/messages.ts';
import { parseClientAddress, prefixOf, type FamilyPrefixLengths } from '../util/ip.ts';
import type { ClientRateTable } from './update_request_rate.ts';

/** Returns the number of clients applied (the schema has already checked every address). */
export function receiveRequestRate(table: ClientRateTable, report: Body<'request_rate'>, now: number, lengths: FamilyPrefixLengths): number {
  let n = 0;
  for (const [ip, requests] of report.clients) {
    const a = parseClientAddress(ip);
    if (a === undefined || requests <= 0) continue;
    const p = prefixOf(a, lengths);
    table.updateRequestRate(p.network, p.length, requests, now);
    n++;
  }
  return n;
}
