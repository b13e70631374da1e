/**
 * `sluice front` configuration schema (YAML). Documented by example in
 * deploy/examples/front-cluster1.yaml.
 */
import { z } from 'zod';
import { METHOD_NAMES } from './select/backend.ts';

const ipv4 = z.ipv4({ error: 'expected an IPv4 address like 198.18.201.11' });
const port = z.int({ error: 'expected a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535');
const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');

const server = z.strictObject({
  name,
  address: ipv4,
  /** Defaults to the service's port. */
  port: port.optional(),
  /** Concurrent connections the server takes; required by the capacity method. */
  capacity: z.int().positive('capacity must be > 0 (or omit it for no limit)').optional(),
  weight: z.number().positive('weight must be > 0').default(1),
  /** drain: no new connections, existing ones kept; disabled: the same, shown as disabled. */
  state: z.enum(['active', 'drain', 'disabled'], { error: 'state is one of active, drain, disabled' }).default('active'),
});

const service = z
  .strictObject({
    name,
    vip: ipv4,
    port,
    protocol: z.literal('tcp', { error: 'only tcp virtual services are supported' }).default('tcp'),
    method: z.enum(METHOD_NAMES, { error: `method is one of ${METHOD_NAMES.join(', ')}` }).default('capacity'),
    servers: z.array(server).min(1, 'a service needs at least one server').max(200, 'at most 200 servers per service'),
  })
  .superRefine((svc, ctx) => {
    const seen = new Set<string>();
    svc.servers.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['servers', i, 'name'], message: `server name "${s.name}" is used twice in this service` });
      seen.add(s.name);
      if (svc.method === 'capacity' && s.capacity === undefined) {
        ctx.addIssue({ code: 'custom', path: ['servers', i, 'capacity'], message: 'the capacity method needs a capacity on every server (or choose method: byrequests)' });
      }
    });
  });

export const frontConfigSchema = z
  .strictObject({
    /** This cluster's name (reported to DNS, shown in status). */
    cluster: name,
    /** NFQUEUE number for this daemon's rules. */
    queue: z.int().min(0).max(65535).default(0),
    /**
     * While the daemon is not running: `bypass` spreads new connections over
     * the servers by a static source hash (kernel only); `drop` refuses them.
     * Established connections continue either way.
     */
    failMode: z.enum(['bypass', 'drop'], { error: 'failMode is bypass or drop' }).default('bypass'),
    /** This front node's address toward the other clusters (overflowed connections are SNATed to it). */
    uplinkAddress: ipv4,
    /** Interface toward the servers (server resets are seen there). */
    lanInterface: z.string().regex(/^[A-Za-z0-9_.-]{1,15}$/, 'an interface name (at most 15 characters)').default('lan0'),
    connections: z
      .strictObject({
        max: z.int().min(16).max(16_000_000).default(1_000_000),
        /** A finished (FIN/RST) record is kept this long for late packets, then freed. */
        recycleSeconds: z.number().positive().max(3600).default(120),
        /** How often records are reconciled with the kernel's flows (idle ones freed). */
        reconcileSeconds: z.number().positive().max(3600).default(30),
      })
      .prefault({}),
    services: z.array(service).min(1, 'configure at least one virtual service').max(31, 'at most 31 virtual services'),
    /** Other clusters, for overflow when all of this cluster's servers are full. */
    overflow: z
      .array(
        z.strictObject({
          cluster: name,
          vip: ipv4,
          /** Free capacity (connections) until the control plane reports it. */
          freeCapacity: z.int().min(0).default(0),
        }),
      )
      .default([]),
    adminSocket: z.string().startsWith('/', 'adminSocket must be an absolute path').default('/run/sluice/front.sock'),
  })
  .superRefine((cfg, ctx) => {
    const names = new Set<string>();
    const endpoints = new Set<string>();
    cfg.services.forEach((s, i) => {
      if (names.has(s.name)) ctx.addIssue({ code: 'custom', path: ['services', i, 'name'], message: `service name "${s.name}" is used twice` });
      names.add(s.name);
      const ep = `${s.vip}:${String(s.port)}/${s.protocol}`;
      if (endpoints.has(ep)) ctx.addIssue({ code: 'custom', path: ['services', i], message: `${ep} is configured twice` });
      endpoints.add(ep);
    });
  });

export type FrontConfig = z.output<typeof frontConfigSchema>;
export type ServiceConfig = FrontConfig['services'][number];
export type ServerConfig = ServiceConfig['servers'][number];
