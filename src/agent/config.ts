/**
 * `sluice agent` configuration: one per server. Validated once, frozen.
 */
import { z } from 'zod';
import { controlBaseSchema, peerSchema, requireKeys } from '../control/config.ts';
import { httpSchema } from '../http/config.ts';
import { parseIPv4Address } from '../packet/address.ts';
import { UTILIZATION_SOURCES } from './load.ts';
import { formatRegex } from './access-log.ts';

const ipv4 = z.string().refine((s) => parseIPv4Address(s) !== undefined, 'expected an IPv4 address like 198.18.201.11');

export const agentConfigSchema = z
  .strictObject({
    /** The server's name as the front node's config lists it (services[].servers[].name). */
    name: z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, 'expected 1-64 characters of A-Z a-z 0-9 . _ : -'),
    address: ipv4,
    /** The front node's control endpoint (its control.agents.listen) and public key. */
    front: peerSchema,
    control: controlBaseSchema.default({ plaintext: false, maxMessageBytes: 1024 * 1024, maxAgeSeconds: 30 }),
    loadSeconds: z.number().min(0.5).max(3600).default(5),
    requestRateSeconds: z.number().min(1).max(86400).default(60),
    /** Service ports whose established connections are counted. */
    ports: z.array(z.number().int().min(1).max(65535)).min(1).default([80]),
    utilization: z
      .strictObject({
        source: z.enum(UTILIZATION_SOURCES).default('cpu'),
        /** connections source: the count that means full (utilization 1). */
        maxConnections: z.number().int().positive().default(1000),
        /** cgroup source: the web server's cgroup below the hierarchy root, e.g. system.slice/nginx.service. */
        cgroup: z.string().min(1).optional(),
      })
      .default({ source: 'cpu', maxConnections: 1000 })
      .superRefine((u, ctx) => {
        if (u.source === 'cgroup' && u.cgroup === undefined) ctx.addIssue({ code: 'custom', path: ['cgroup'], message: 'required when source is cgroup: the web server cgroup path, e.g. system.slice/nginx.service' });
      }),
    accessLog: z
      .strictObject({
        path: z.string().min(1).default('/var/log/nginx/access.log'),
        /** nginx-combined, apache-combined, or a regex with a named group (?<client>...). */
        format: z
          .string()
          .default('nginx-combined')
          .refine((f) => {
            try {
              formatRegex(f);
              return true;
            } catch {
              return false;
            }
          }, 'expected nginx-combined, apache-combined, or a regular expression with a named group (?<client>...)'),
        pollSeconds: z.number().min(0.1).max(60).default(1),
        maxClients: z.number().int().min(1).max(10_000_000).default(100_000),
      })
      .default({ path: '/var/log/nginx/access.log', format: 'nginx-combined', pollSeconds: 1, maxClients: 100_000 }),
    /** Read-only ops HTTP server: GET /metrics (Prometheus), GET /status. Absent: none. */
    http: httpSchema.optional(),
  })
  .superRefine((c, ctx) => {
    requireKeys(c.control, ctx, [{ path: ['front'], peer: c.front }]);
  });

export type AgentConfig = z.output<typeof agentConfigSchema>;
