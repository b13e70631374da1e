/**
 * <prefix>_http_requests_total{route,code}: the ops HTTP server's own
 * requests (routes: the registered paths and "unmatched"; bounded).
 */
import type { Registry } from 'prom-client';
import type { OpsServer } from '../http/ops_server.ts';
import { counterFrom } from './collect.ts';

export function registerHttpMetrics(registry: Registry, prefix: string, server: () => OpsServer | undefined): void {
  counterFrom(registry, `${prefix}_http_requests_total`, 'Ops HTTP requests answered, by route and status code.', ['route', 'code'], () =>
    (server()?.requestCounts() ?? []).map((c) => [{ route: c.route, code: String(c.code) }, c.count] as const),
  );
}
