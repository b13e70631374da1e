/**
 * `sluice front` configuration schema (YAML). Documented by example in
 * deploy/examples/front-cluster1.yaml.
 */
import { z } from 'zod';
import { controlBaseSchema, keyRef, peerSchema, requireKeys, zmqEndpoint } from '../control/config.ts';
import { METHOD_NAMES } from './select/backend.ts';
import { checkpointSchema, shapingSchema, type CheckpointConfig } from '../shaping/config.ts';

/** A checkpoint list (src/shaping/config.ts): evaluated in order, every matching rule applies. */
const checkpoints = z.array(checkpointSchema).max(32, 'at most 32 checkpoints per list').default([]);

const ipv4 = z.ipv4({ error: 'expected an IPv4 address like 198.18.201.11' });
const port = z.int({ error: 'expected a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535');
const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');

const server = z.strictObject({
  name,
  address: ipv4,
  /** Defaults to the service's port. */
  port: port.optional(),
  /**
   * Without agents (no control.agents): concurrent connections the server
   * takes, required by the capacity method. With agents: the starting
   * estimate in new connections/s, replaced by the reports' estimates.
   */
  capacity: z.int().positive('capacity must be > 0 (or omit it for no limit)').optional(),
  weight: z.number().positive('weight must be > 0').default(1),
  /** drain: no new connections, existing ones kept; disabled: the same, shown as disabled. */
  state: z.enum(['active', 'drain', 'disabled'], { error: 'state is one of active, drain, disabled' }).default('active'),
  /** Checked after this server is chosen (criterion server counts per server). */
  checkpoints,
});

const service = z
  .strictObject({
    name,
    vip: ipv4,
    port,
    /** udp: the first packet of each flow (conntrack NEW) is decided; the kernel keeps the flow until its conntrack entry times out. */
    protocol: z.enum(['tcp', 'udp'], { error: 'protocol is tcp or udp' }).default('tcp'),
    method: z.enum(METHOD_NAMES, { error: `method is one of ${METHOD_NAMES.join(', ')}` }).default('capacity'),
    servers: z.array(server).min(1, 'a service needs at least one server').max(200, 'at most 200 servers per service'),
    /** Checked first for each new connection to this service (seed 001's frontend list). */
    checkpoints,
  })
  .superRefine((svc, ctx) => {
    const seen = new Set<string>();
    svc.servers.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['servers', i, 'name'], message: `server name "${s.name}" is used twice in this service` });
      seen.add(s.name);
    });
  });

/**
 * The control plane (issue 4). Without this section the front node runs on
 * configured capacities and overflow figures alone.
 */
const control = controlBaseSchema.extend({
  /** Agents push load and request-rate reports here (bind on the LAN side). */
  agents: z
    .strictObject({
      listen: zmqEndpoint,
      /** Agents' public keys: z85 keys, .pub files, or directories of .pub files. */
      allow: z.array(keyRef).default([]),
    })
    .optional(),
  /** Our publish socket: cluster load, high-rate clients, RTT results, for DNS and the other front nodes. */
  publish: z
    .strictObject({
      listen: zmqEndpoint,
      allow: z.array(keyRef).default([]),
    })
    .optional(),
  /** Publish sockets we subscribe to: the other clusters' front nodes (cluster load) and DNS (probe requests). */
  subscribe: z.array(peerSchema).default([]),
  /** The agents' load interval (seconds) and how many silent intervals mean a server is down. */
  loadSeconds: z.number().min(0.5).max(3600).default(5),
  downAfterIntervals: z.int().min(1).max(100).default(3),
  estimate: z
    .strictObject({
      /** Utilization the capacity estimate aims at (capacity = rate that would reach it). */
      targetUtilization: z.number().gt(0).max(1).default(0.8),
      /** Weight of each new observation (EWMA), 0..1. */
      smoothing: z.number().gt(0).max(1).default(0.5),
      /** An estimate moves at most by this factor per report. */
      maxStep: z.number().min(1.01).max(100).default(2),
      minCapacity: z.number().positive().default(1),
      maxCapacity: z.number().positive().default(1_000_000),
      /** Reports below this utilization carry no capacity information. */
      minUtilization: z.number().min(0).max(1).default(0.02),
      /** Starting estimate (new connections/s) for servers without a configured capacity. */
      initialCapacity: z.number().positive().default(100),
    })
    .prefault({}),
  requestRate: z
    .strictObject({
      /** Seconds between passes of send_request_rate (match the agents' requestRateSeconds). */
      passSeconds: z.number().min(1).max(86400).default(60),
      /** Clients above factor x the average rate are reported to DNS. */
      factor: z.number().gt(1).max(1000).default(3),
      /** Clients per high_rate_clients message. */
      queueSize: z.int().min(1).max(4096).default(100),
      maxClients: z.int().min(16).max(10_000_000).default(1_000_000),
      /** A client with no requests for this long is forgotten. */
      expireSeconds: z.number().positive().max(86400 * 7).default(600),
    })
    .prefault({}),
  clusterLoad: z
    .strictObject({
      everySeconds: z.number().min(0.5).max(3600).default(5),
      /** Also send at once when available capacity moves by more than this share of capacity. */
      changeFraction: z.number().gt(0).max(1).default(0.1),
    })
    .prefault({}),
  /**
   * RTT probes for DNS (receive_probe_for_rtt): DNS's rtt_probe_request
   * targets are pinged (ICMP echo; needs root) and the averaged RTTs
   * published as rtt_results. maxPerSecond x timeoutMs/1000 stays below the
   * 65535 echoes the ICMP session can have outstanding (bounds below).
   */
  probe: z
    .strictObject({
      /** Echo requests per target at most: a request's own count wins, capped by this. */
      count: z.int().min(1).max(16).default(3),
      /** Least time between two echo requests to the same target. */
      spacingMs: z.int().min(0).max(10_000).default(200),
      /** An echo unanswered for this long is lost. */
      timeoutMs: z.int().min(10).max(10_000).default(1000),
      /** Targets queued or being probed at most; more are dropped (counted). */
      maxTargets: z.int().min(1).max(65_536).default(4096),
      /** Echo requests per second over all targets at most, however many requests arrive. */
      maxPerSecond: z.number().min(1).max(5000).default(200),
      /** Finished results are published this often. */
      reportSeconds: z.number().min(0.1).max(3600).default(1),
    })
    .prefault({}),
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
    /** This cluster's checkpoints (seed 001's backend list): after the service's, before the server's. */
    checkpoints,
    shaping: shapingSchema,
    adminSocket: z.string().startsWith('/', 'adminSocket must be an absolute path').default('/run/sluice/front.sock'),
    control: control.optional(),
  })
  .superRefine((cfg, ctx) => {
    if (cfg.control) {
      requireKeys(cfg.control, ctx, cfg.control.subscribe.map((p, i) => ({ path: ['control', 'subscribe', i], peer: p })));
      if (cfg.control.maxAgeSeconds < cfg.control.loadSeconds) ctx.addIssue({ code: 'custom', path: ['control', 'maxAgeSeconds'], message: 'must be at least control.loadSeconds, or every load report is dropped as stale' });
    }
    checkCheckpoints(cfg, ctx);
    const names = new Set<string>();
    const endpoints = new Set<string>();
    cfg.services.forEach((s, i) => {
      if (s.method === 'capacity' && cfg.control?.agents === undefined) {
        s.servers.forEach((srv, k) => {
          if (srv.capacity === undefined) ctx.addIssue({ code: 'custom', path: ['services', i, 'servers', k, 'capacity'], message: 'the capacity method needs a capacity on every server (or configure control.agents to estimate it, or choose method: byrequests)' });
        });
      }
      if (names.has(s.name)) ctx.addIssue({ code: 'custom', path: ['services', i, 'name'], message: `service name "${s.name}" is used twice` });
      names.add(s.name);
      const ep = `${s.vip}:${String(s.port)}/${s.protocol}`;
      if (endpoints.has(ep)) ctx.addIssue({ code: 'custom', path: ['services', i], message: `${ep} is configured twice` });
      endpoints.add(ep);
    });
  });

type CheckedConfig = Pick<z.output<typeof frontConfigSchema>, 'checkpoints' | 'services' | 'overflow'>;

/**
 * Cross-rule checks: names unique on the front node, counter conditions
 * name an existing rule, steering names an overflow cluster, criterion
 * server only where a server is chosen (server-level lists).
 */
function checkCheckpoints(cfg: CheckedConfig, ctx: z.RefinementCtx): void {
  const all: { cp: CheckpointConfig; path: (string | number)[]; server: boolean }[] = [];
  cfg.checkpoints.forEach((cp, i) => all.push({ cp, path: ['checkpoints', i], server: false }));
  cfg.services.forEach((svc, si) => {
    svc.checkpoints.forEach((cp, i) => all.push({ cp, path: ['services', si, 'checkpoints', i], server: false }));
    svc.servers.forEach((srv, ki) => {
      srv.checkpoints.forEach((cp, i) => all.push({ cp, path: ['services', si, 'servers', ki, 'checkpoints', i], server: true }));
    });
  });
  const names = new Set(all.map((a) => a.cp.name));
  const seen = new Set<string>();
  const clusters = cfg.overflow.map((o) => o.cluster);
  for (const { cp, path, server } of all) {
    if (seen.has(cp.name)) ctx.addIssue({ code: 'custom', path: [...path, 'name'], message: `checkpoint name "${cp.name}" is used twice (names are unique on a front node)` });
    seen.add(cp.name);
    const ref = cp.when?.counter?.name;
    if (ref !== undefined && !names.has(ref)) ctx.addIssue({ code: 'custom', path: [...path, 'when', 'counter', 'name'], message: `no checkpoint named "${ref}"` });
    if (typeof cp.action === 'object' && !clusters.includes(cp.action.steer)) {
      ctx.addIssue({ code: 'custom', path: [...path, 'action', 'steer'], message: `"${cp.action.steer}" is not an overflow cluster (configure it under overflow:)` });
    }
    if (cp.criterion === 'server' && !server) ctx.addIssue({ code: 'custom', path: [...path, 'criterion'], message: 'criterion server is for server-level checkpoints (services[].servers[].checkpoints): no server is chosen before them' });
  }
}

export type FrontConfig = z.output<typeof frontConfigSchema>;
export type ServiceConfig = FrontConfig['services'][number];
export type ServerConfig = ServiceConfig['servers'][number];
