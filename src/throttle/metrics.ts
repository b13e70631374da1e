/**
 * sluice_master_*: the throttling master's metrics, read at scrape time
 * from the master's own counters (Master, its publish queue, its store and
 * its CURVE sockets) and the daemon's reload and admin counts. Nothing here
 * runs on the accounting path: handle() keeps plain numbers and prom-client
 * copies them at each scrape (src/metrics/collect.ts).
 *
 * Labels: domain names (the config's, at most 4096), decoder reject
 * reasons (DECODE_REJECTS), outcomes, sources, socket names and results:
 * all bounded. Never an identifier (a client address or prefix).
 *
 * The master is read through `master()`: before start() has finished (or
 * after a failed start) there is none, and its series are simply absent.
 * Domains removed by a reload stop being exposed; the unlabelled totals
 * (received, charged, store errors) keep counting for the whole process.
 */
import type { Registry } from 'prom-client';
import type { OpsServer } from '../http/ops_server.ts';
import { byKey, counterFrom, counterOf, gaugeFrom, gaugeOf, type Sample } from '../metrics/collect.ts';
import { registerHttpMetrics } from '../metrics/http.ts';
import type { MasterConfig } from './config.ts';
import type { DomainState, Master } from './master.ts';

/** The parts of the daemon its metrics read (MasterDaemon has them). */
export interface MasterParts {
  readonly initial: Readonly<MasterConfig>;
  readonly reloads: number;
  readonly reloadsRefused: number;
}

export interface MasterMetricsSource {
  readonly daemon: MasterParts;
  master(): Master | undefined;
  admin(): { readonly handled: number; readonly rejected: number } | undefined;
  ops(): OpsServer | undefined;
}

export function registerMasterMetrics(registry: Registry, src: MasterMetricsSource): void {
  const d = src.daemon;
  const domains = (f: (m: Master, x: DomainState) => number): Sample<'domain'>[] => {
    const m = src.master();
    return m ? [...m.domains.values()].map((x) => [{ domain: x.name }, f(m, x)] as const) : [];
  };

  gaugeFrom(registry, 'sluice_master_info', 'This master: its name and store kind (value 1).', ['name', 'store'], () => [[{ name: d.initial.name, store: d.initial.store.kind }, 1]]);

  // Accounting in.
  counterOf(registry, 'sluice_master_accounting_received_total', 'Accounting messages that passed the checks (frames, size, topic, kind, identifier, times).', () => src.master()?.counters.received ?? 0);
  counterFrom(registry, 'sluice_master_accounting_refused_total', 'Accounting messages dropped by the checks, by reason.', ['reason'], () => {
    const m = src.master();
    return m ? byKey('reason', m.counters.rejected, (k) => k) : [];
  });
  counterOf(registry, 'sluice_master_accounting_unknown_domain_total', 'Accounting for a domain this master does not throttle (dropped).', () => src.master()?.counters.unknownDomain ?? 0);
  counterFrom(registry, 'sluice_master_requests_total', 'Requests the gatekeepers reported, by domain and outcome: accepted and delayed are charged, rejected only counted.', ['domain', 'outcome'], () => {
    const m = src.master();
    if (!m) return [];
    return [...m.domains.values()].flatMap((x) => [
      [{ domain: x.name, outcome: 'accepted' }, x.counters.accepted] as const,
      [{ domain: x.name, outcome: 'delayed' }, x.counters.delayed] as const,
      [{ domain: x.name, outcome: 'rejected' }, x.counters.rejected] as const,
    ]);
  });
  counterFrom(registry, 'sluice_master_resyncs_total', 'RESYNC requests from gatekeepers (start, failover, reconnect), by domain.', ['domain'], () => domains((_m, x) => x.counters.resyncs));

  // The store.
  counterOf(registry, 'sluice_master_charges_total', 'Charges the store completed (GCRA state updated).', () => src.master()?.counters.charged ?? 0);
  counterOf(registry, 'sluice_master_store_errors_total', 'Store operations that failed (Redis unreachable or slow: charges and resync scans); nothing is published for them, the throttle fails open.', () => src.master()?.counters.storeErrors ?? 0);
  gaugeOf(registry, 'sluice_master_charges_in_flight', 'Charges handed to the store and not answered yet (Redis).', () => src.master()?.inFlight ?? NaN);
  gaugeFrom(registry, 'sluice_master_identifiers', 'Identifiers (clients) tracked per domain: exact in memory, counted every 5 s in Redis.', ['domain'], () => domains((m, x) => m.trackedIn(x)));
  counterOf(registry, 'sluice_master_identifiers_evicted_total', 'Identifiers the memory store dropped at store.maxIdentifiers (those clients lose their delay: fail open).', () => src.master()?.evicted ?? 0);

  // Delays out.
  counterFrom(registry, 'sluice_master_delays_total', 'DELAY_UNTIL messages queued, by domain and source: charge (a client must wait) or resync (replayed to a gatekeeper).', ['domain', 'source'], () => {
    const m = src.master();
    if (!m) return [];
    return [...m.domains.values()].flatMap((x) => [
      [{ domain: x.name, source: 'charge' }, x.counters.published] as const,
      [{ domain: x.name, source: 'resync' }, x.counters.replayed] as const,
    ]);
  });
  counterFrom(registry, 'sluice_master_publish_total', 'Messages to the gatekeepers (DELAY_UNTIL, RESYNC_DONE) by result: sent, dropped (queue full or socket closed), error (the send failed).', ['result'], () => {
    const m = src.master();
    if (!m) return [];
    const p = m.publishCounts;
    return [
      [{ result: 'sent' }, p.sent],
      [{ result: 'dropped' }, p.dropped],
      [{ result: 'error' }, p.errors],
    ];
  });
  gaugeOf(registry, 'sluice_master_publish_queue', 'Messages waiting in the publish queue.', () => src.master()?.publishCounts.queued ?? NaN);

  // The sockets.
  counterFrom(registry, 'sluice_master_handshake_failures_total', 'CURVE handshakes that failed on the accounting and publish sockets: auth = key not allowed, protocol = not ZMTP/CURVE.', ['kind'], () => {
    const h = src.master()?.handshakes;
    return h
      ? [
          [{ kind: 'auth' }, h.authFailures],
          [{ kind: 'protocol' }, h.protocolFailures],
        ]
      : [];
  });
  counterFrom(registry, 'sluice_master_zap_handshakes_total', 'CURVE handshakes checked against control.allow, by socket (accounting, control = the publish socket) and result.', ['socket', 'result'], () => {
    const m = src.master();
    if (!m) return [];
    return (['accounting', 'control'] as const).flatMap((socket) => {
      const z = m.zapCounters(socket);
      return [
        [{ socket, result: 'accepted' }, z.accepted] as const,
        [{ socket, result: 'refused' }, z.refused] as const,
      ];
    });
  });

  // The daemon.
  counterFrom(registry, 'sluice_master_reloads_total', 'Reloads, by result.', ['result'], () => [
    [{ result: 'applied' }, d.reloads],
    [{ result: 'refused' }, d.reloadsRefused],
  ]);
  counterFrom(registry, 'sluice_master_admin_requests_total', 'Admin socket requests, by result.', ['result'], () => {
    const a = src.admin();
    return [
      [{ result: 'handled' }, a?.handled ?? 0],
      [{ result: 'rejected' }, a?.rejected ?? 0],
    ];
  });
  registerHttpMetrics(registry, 'sluice_master', () => src.ops());
}
