/**
 * <prefix>_http_requests_total{route,code}: the ops HTTP server's own
 * requests (routes: the registered paths and "unmatched"; bounded).
 */
import type { Registry } from 'prom-client';
import { counterFrom } from './collect.ts';

/** What these metrics read of an ops HTTP server (src/http/ops_server.ts's OpsServer has it). */
export interface RequestCountSource {
  /** Requests answered so far, one entry per route and status code. */
  requestCounts(): readonly { readonly route: string; readonly code: number; readonly count: number }[];
}

export function registerHttpMetrics(registry: Registry, prefix: string, server: () => RequestCountSource | undefined): void {
  counterFrom(registry, `${prefix}_http_requests_total`, 'Ops HTTP requests answered, by route and status code.', ['route', 'code'], () =>
    (server()?.requestCounts() ?? []).map((c) => [{ route: c.route, code: String(c.code) }, c.count] as const),
  );
}
