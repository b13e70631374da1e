/** `sluice status --master`: a running throttling master's domains and counters. */
import type { MasterStatus } from '../throttle/status.ts';
import { table } from './table.ts';

/** A master's status has a store and domains (a front node's, a DNS server's or an agent's has no store). */
export function isMasterStatus(s: unknown): s is MasterStatus {
  return typeof s === 'object' && s !== null && 'store' in s && 'domains' in s;
}

export function renderMasterStatus(s: MasterStatus): string {
  const c = s.counters;
  const refused = Object.entries(c.rejected)
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return [
    `master ${s.name}: store ${s.store}; accounting in ${c.received} (charged ${c.charged}), DELAY_UNTIL out ${c.published} (dropped ${c.publishDropped}); refused messages ${refused || '-'}; unknown domain ${c.unknownDomain}; store errors ${c.storeErrors}; handshakes refused ${s.handshakes.authFailures}`,
    '',
    table(
      ['DOMAIN', 'RULE', 'BURST', 'TRACKED', 'ACCEPTED', 'DELAYED', 'REJECTED', 'DELAYS OUT', 'RESYNCS', 'REPLAYED'],
      s.domains.map((d) => [d.name, `${d.requests}/${d.periodSeconds}s`, String(d.burst), String(d.tracked), String(d.accepted), String(d.delayed), String(d.rejected), String(d.published), String(d.resyncs), String(d.replayed)]),
    ),
  ].join('\n');
}
