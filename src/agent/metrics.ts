/**
 * sluice_agent_*: a server agent's metrics: reports sent, the figures of its
 * last load report, and its access-log follower's counters, read at scrape
 * time; the server's reported health, its checks and the operator's state
 * file; plus the shared control-plane metrics. Labels: report types, line
 * and event kinds (bounded). Never a client address.
 */
import type { Registry } from 'prom-client';
import type { Body } from '../control/messages.ts';
import type { AccessLogFollower } from './access-log.ts';
import type { AgentConfig } from './config.ts';
import type { CheckCounters } from './health-check.ts';
import type { FrontLinkStatus } from './fronts.ts';
import { REPORTED_HEALTH, type ReportedHealth } from './health.ts';
import type { OperatorCounters } from './operator-state.ts';
import type { ControlNode } from '../control/node.ts';
import type { OpsServer } from '../http/ops_server.ts';
import { counterFrom, counterOf, gaugeFrom, type Sample } from '../metrics/collect.ts';
import { registerControlMetrics } from '../metrics/control.ts';
import { registerHttpMetrics } from '../metrics/http.ts';

/** The parts of the agent its metrics read (AgentDaemon has them). */
export interface AgentParts {
  readonly config: Readonly<AgentConfig>;
  readonly follower: AccessLogFollower;
  readonly lastLoad: Body<'load_report'> | undefined;
  readonly reportsSent: number;
  readonly requestReportsSent: number;
  readonly sampleErrors: number;
  readonly health: { readonly state: ReportedHealth; readonly transitions: number };
  readonly healthReports: number;
  readonly connectReports: number;
  readonly operator: { readonly counters: Readonly<OperatorCounters> };
  readonly checker: { readonly counters: Readonly<CheckCounters> };
  /** Each front node's link (at most MAX_FRONTS). */
  fronts(): readonly FrontLinkStatus[];
}

export interface AgentMetricsSource {
  readonly daemon: AgentParts;
  control(): ControlNode | undefined;
  ops(): OpsServer | undefined;
}

export function registerAgentMetrics(registry: Registry, src: AgentMetricsSource): void {
  const d = src.daemon;
  gaugeFrom(registry, 'sluice_agent_info', 'This agent: its server name and utilization source (value 1).', ['server', 'source'], () => [[{ server: d.config.name, source: d.config.utilization.source }, 1]]);
  counterFrom(registry, 'sluice_agent_reports_total', 'Reports handed to the control plane, by message type (delivery: sluice_control_messages_sent_total).', ['type'], () => [
    [{ type: 'load_report' }, d.reportsSent],
    [{ type: 'request_rate' }, d.requestReportsSent],
  ]);
  gaugeFrom(registry, 'sluice_agent_health', 'The health this agent reports for its server (1 for the current state: up, down, drain, maint).', ['server', 'state'], () => REPORTED_HEALTH.map((st) => [{ server: d.config.name, state: st }, d.health.state === st ? 1 : 0]));
  counterOf(registry, 'sluice_agent_health_transitions_total', 'Changes of the reported health.', () => d.health.transitions);
  counterFrom(registry, 'sluice_agent_reports_at_once_total', 'Load reports sent at once rather than at the interval, by why: a health change, or the front node (re)connected (also counted in sluice_agent_reports_total).', ['why'], () => [
    [{ why: 'health' }, d.healthReports],
    [{ why: 'connect' }, d.connectReports],
  ]);
  counterFrom(registry, 'sluice_agent_health_checks_total', 'The agent\'s own checks of its service, by result.', ['result'], () => [
    [{ result: 'passed' }, d.checker.counters.checks - d.checker.counters.failures],
    [{ result: 'failed' }, d.checker.counters.failures],
  ]);
  counterFrom(registry, 'sluice_agent_state_file_events_total', 'The operator\'s state file: new content read and taken, verbs written by ctl, distinct bad contents rejected (the previous verb stays).', ['event'], () => [
    [{ event: 'read' }, d.operator.counters.applied],
    [{ event: 'written' }, d.operator.counters.written],
    [{ event: 'rejected' }, d.operator.counters.rejected],
  ]);
  // Per front node (labels bounded: at most 8 endpoints, from the config).
  gaugeFrom(registry, 'sluice_agent_front_connected', 'Whether the socket to each front node is connected (1) or not (0).', ['endpoint'], () => d.fronts().map((f) => [{ endpoint: f.endpoint }, f.connected ? 1 : 0] as const));
  counterFrom(registry, 'sluice_agent_front_messages_total', 'Messages to each front node, by outcome: sent (delivered to its socket) or dropped (not connected, or its backlog full; the other fronts are not affected).', ['endpoint', 'outcome'], () =>
    d.fronts().flatMap((f) => [[{ endpoint: f.endpoint, outcome: 'sent' }, f.sent] as const, [{ endpoint: f.endpoint, outcome: 'dropped' }, f.dropped] as const]),
  );
  counterOf(registry, 'sluice_agent_load_sample_errors_total', 'Load samples that failed (no report that interval).', () => d.sampleErrors);
  // Labelled by server so that before the first report there is no series at all (rather than a 0).
  const lastOf = (k: 'utilization' | 'cpu' | 'connections' | 'memoryUsed' | 'load1') => (): Sample<'server'>[] => [[{ server: d.config.name }, d.lastLoad?.[k] ?? NaN]];
  gaugeFrom(registry, 'sluice_agent_utilization', 'Utilization in the last load report (the configured source; 1 = full).', ['server'], lastOf('utilization'));
  gaugeFrom(registry, 'sluice_agent_cpu', 'CPU share in the last load report.', ['server'], lastOf('cpu'));
  gaugeFrom(registry, 'sluice_agent_connections', 'Established connections on the service ports in the last load report.', ['server'], lastOf('connections'));
  gaugeFrom(registry, 'sluice_agent_memory_used', 'Memory share in use in the last load report.', ['server'], lastOf('memoryUsed'));
  gaugeFrom(registry, 'sluice_agent_load1', 'One-minute load average in the last load report.', ['server'], lastOf('load1'));
  const f = (): AgentMetricsSource['daemon']['follower']['counters'] => d.follower.counters;
  counterOf(registry, 'sluice_agent_access_log_lines_total', 'Access log lines read.', () => f().lines);
  counterOf(registry, 'sluice_agent_access_log_requests_total', 'Access log lines counted as requests of a client (either family).', () => f().requests);
  counterOf(registry, 'sluice_agent_access_log_requests_ipv6_total', 'Of those, requests of IPv6 clients.', () => f().requestsIpv6);
  counterFrom(registry, 'sluice_agent_access_log_rejected_lines_total', 'Access log lines not counted, by reason.', ['reason'], () => [
    [{ reason: 'garbage' }, f().garbage],
    [{ reason: 'bad_address' }, f().badAddress],
    [{ reason: 'zone_id' }, f().zoneId],
    [{ reason: 'partial' }, f().partial],
  ]);
  counterFrom(registry, 'sluice_agent_access_log_events_total', 'Access log follower events: rotation, truncation, table_full (a client not counted), read_error.', ['event'], () => [
    [{ event: 'rotation' }, f().rotations],
    [{ event: 'truncation' }, f().truncations],
    [{ event: 'table_full' }, f().tableFull],
    [{ event: 'read_error' }, f().readErrors],
  ]);
  registerControlMetrics(registry, () => src.control());
  registerHttpMetrics(registry, 'sluice_agent', () => src.ops());
}
