/**
 * The `http:` section every daemon's config may carry: where its read-only
 * ops HTTP server (GET /metrics, GET /status; ops_server.ts) listens.
 * Absent: no HTTP server at all.
 *
 *   http:
 *     listen: 127.0.0.1:9100      # or [::1]:9100
 *
 * The server has no authentication: bind it to loopback or a management
 * address, never to an address clients reach.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';

export interface HttpListen {
  readonly host: string;
  readonly port: number;
  readonly family: 4 | 6;
}

const FIX = 'expected ADDRESS:PORT like 127.0.0.1:9100 or [::1]:9100 (an IPv4 address, or an IPv6 address in brackets, and a port 1..65535)';

/** "127.0.0.1:9100" or "[::1]:9100" -> its parts; undefined when malformed. */
export function parseHttpListen(text: string): HttpListen | undefined {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  const v6 = m[1];
  if (v6 !== undefined) return isIPv6(v6) ? { host: v6, port, family: 6 } : undefined;
  const v4 = m[2] ?? '';
  return isIPv4(v4) ? { host: v4, port, family: 4 } : undefined;
}

export const httpSchema = z.strictObject({
  listen: z.string({ error: FIX }).refine((s) => parseHttpListen(s) !== undefined, FIX).describe('ADDRESS:PORT to listen on (IPv4, or [IPv6]:PORT). Bind it to loopback or a management address: the server has no authentication.'),
});

export type HttpConfig = z.output<typeof httpSchema>;
