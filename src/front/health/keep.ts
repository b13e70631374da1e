/**
 * Health across a reload: a server that remains (same service, name,
 * address and port) keeps its ServerHealth object, so its state, reason,
 * stamps, transition count and slow start ramp carry over, as the capacity
 * estimates do. A server whose address or port changed is another server:
 * it starts afresh (the service's `health.startAs`).
 */
import type { ServiceRuntime } from '../service.ts';
import type { ServerHealth } from './server-health.ts';

/** `address` is the server's address as four words, both families (IPv4 mapped; ServerRuntime.address6): an IPv6 server's u32 `address` is 0. */
export type KeepHealth = (service: string) => (server: string, address: Uint32Array, port: number) => ServerHealth | undefined;

export function healthKeeper(old: readonly ServiceRuntime[]): KeepHealth {
  const kept = new Map<string, ServerHealth>();
  const key = (service: string, server: string, address: Uint32Array, port: number): string => `${service}\n${server}\n${address.join('.')}:${String(port)}`;
  for (const s of old) for (const b of s.servers) kept.set(key(s.name, b.id, b.address6, b.port), b.health);
  return (service) => (server, address, port) => kept.get(key(service, server, address, port));
}
