/**
 * `sluice dns --config FILE`: the site's authoritative server. One schema,
 * validated once, defaults filled, frozen (src/config/load.ts).
 *
 *   name: dns1
 *   listen: ["198.18.2.2:53", "[fd00::2]:53"]    # UDP and TCP on each
 *   zones: [{ file: /etc/sluice/example.test.zone }]
 *   clusters: [{ name: c1, vips: [198.19.1.1] }, ...]
 *   steering: { names: [{ name: www.example.test, policy: rtt, ttl: 5 }] }
 *   control: { keyFile, publish: {listen, allow}, subscribe: [front PUBs] }
 *   http: { listen: 127.0.0.1:9101 }             # GET /metrics, /status
 */
import { z } from 'zod';
import { controlBaseSchema, keyRef, peerSchema, requireKeys, zmqEndpoint } from '../control/config.ts';
import { httpSchema } from '../http/config.ts';
import { POLICY_NAMES } from './policy/index.ts';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
const ipv4 = z.ipv4({ error: 'expected an IPv4 address like 198.19.1.1' });
const domain = z
  .string({ error: 'expected a domain name' })
  .transform((s) => s.toLowerCase().replace(/\.$/, ''))
  .pipe(z.string().regex(/^([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/, 'expected a domain name like www.example.test').max(253));

/** "198.18.2.2:53", "[fd00::2]:53", "0.0.0.0:53", "[::]:53" */
const listenAddress = z
  .string()
  .regex(/^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d{1,5}$/, 'expected ADDRESS:PORT like 198.18.2.2:53 or [fd00::2]:53')
  .refine((s) => {
    const port = Number(s.slice(s.lastIndexOf(':') + 1));
    return port >= 1 && port <= 65535;
  }, 'the port is 1..65535');

const steeredName = z.strictObject({
  name: domain,
  /** rtt: nearest usable cluster weighed with free capacity; capacity: drawn in proportion to free capacity. */
  policy: z.enum(POLICY_NAMES, { error: `policy is one of ${POLICY_NAMES.join(', ')}` }).default('rtt'),
  /** TTL of steered answers: short, so a client follows load and failures within seconds. */
  ttl: z.int().min(0).max(86400).default(5),
  /** How many clusters' VIPs an answer holds (in order of preference). */
  answers: z.int().min(1).max(16).default(1),
  /** A client keeps its cluster while that cluster stays usable (up, with free capacity). */
  sticky: z.boolean().default(false),
  /**
   * When no cluster is usable (all down or full): `all` answers every
   * configured VIP (better a loaded site than none), `sorry` the addresses
   * given (a maintenance page), `servfail` fails the query.
   */
  fallback: z
    .strictObject({
      mode: z.enum(['all', 'sorry', 'servfail'], { error: 'fallback.mode is all, sorry or servfail' }).default('all'),
      addresses: z.array(ipv4).max(16).default([]),
    })
    .prefault({})
    .superRefine((f, ctx) => {
      if (f.mode === 'sorry' && f.addresses.length === 0) ctx.addIssue({ code: 'custom', path: ['addresses'], message: 'fallback.mode sorry needs at least one address (the sorry server)' });
    }),
});

const control = controlBaseSchema.extend({
  /** Our PUB socket: rtt_probe_request to the front nodes (they subscribe). */
  publish: z.strictObject({ listen: zmqEndpoint, allow: z.array(keyRef).default([]) }).optional(),
  /** The front nodes' PUB sockets: cluster_load, high_rate_clients, rtt_results. */
  subscribe: z.array(peerSchema).default([]),
});

export const dnsConfigSchema = z
  .strictObject({
    /** Our name on the control plane and in logs. */
    name,
    listen: z.array(listenAddress).min(1, 'listen on at least one ADDRESS:PORT').max(16),
    zones: z
      .array(z.strictObject({ file: z.string().min(1), origin: domain.optional() }))
      .min(1, 'serve at least one zone (an RFC 1035 zone file)')
      .max(64),
    clusters: z
      .array(z.strictObject({ name, vips: z.array(ipv4).min(1, 'a cluster needs at least one VIP').max(16) }))
      .max(64)
      .default([]),
    steering: z
      .strictObject({
        names: z.array(steeredName).max(256).default([]),
        /** cost = rtt × (1 + capacityWeight × (1 − free share)); 0 = RTT only. */
        capacityWeight: z.number().min(0).max(100).default(1),
        /** Expected seconds between a front node's cluster_load reports (its clusterLoad.everySeconds). */
        reportSeconds: z.number().min(0.5).max(3600).default(5),
        /** A cluster whose reports stop for this many intervals is down. */
        downAfterIntervals: z.int().min(1).max(100).default(3),
        /** Client prefixes: the unit of RTTs, stickiness, high-rate and the ECS scope of steered answers. */
        ipv4Prefix: z.int().min(8).max(32).default(24),
        ipv6Prefix: z.int().min(16).max(128).default(56),
        rttExpireSeconds: z.number().min(1).max(86400 * 7).default(600),
        maxPrefixes: z.int().min(16).max(10_000_000).default(100_000),
        highRateExpireSeconds: z.number().min(1).max(86400).default(180),
        stickySeconds: z.number().min(1).max(86400).default(300),
        /** Answers kept for `sluice status` (the latest per client prefix). */
        recentClients: z.int().min(0).max(10_000).default(200),
      })
      .prefault({}),
    probe: z
      .strictObject({
        /** Echo requests per target asked of each front node. */
        count: z.int().min(1).max(16).default(3),
        /** How often pending probe requests are sent. */
        intervalSeconds: z.number().min(0.1).max(3600).default(1),
        maxTargetsPerSecond: z.number().min(1).max(10_000).default(100),
        maxPending: z.int().min(1).max(1_000_000).default(10_000),
        /** A prefix is asked for again at most this often. */
        retrySeconds: z.number().min(1).max(86400).default(60),
      })
      .prefault({}),
    /** Our UDP payload size: RFC 9715 / DNS flag day 2020 advise 1232 (no IP fragmentation). */
    udpPayload: z.int().min(512).max(4096).default(1232),
    rrl: z
      .strictObject({
        enabled: z.boolean().default(true),
        /** Per client prefix (ipv4Prefix / ipv6Prefix of steering), UDP only. */
        responsesPerSecond: z.number().min(1).max(1_000_000).default(100),
        /** Every slip-th limited response is sent truncated (TC) instead of dropped; 0 drops all. */
        slip: z.int().min(0).max(10).default(2),
        maxEntries: z.int().min(16).max(10_000_000).default(100_000),
      })
      .prefault({}),
    tcp: z
      .strictObject({
        maxConnections: z.int().min(1).max(100_000).default(256),
        /** A TCP client silent this long is disconnected (RFC 7766 §6.2.3 suggests seconds). */
        idleSeconds: z.number().min(1).max(3600).default(10),
      })
      .prefault({}),
    adminSocket: z.string().startsWith('/', 'adminSocket must be an absolute path').default('/run/sluice/dns.sock'),
    /** Read-only ops HTTP server: GET /metrics (Prometheus), GET /status. Absent: none. */
    http: httpSchema.optional(),
    control: control.optional(),
  })
  .superRefine((cfg, ctx) => {
    const clusters = new Set<string>();
    cfg.clusters.forEach((c, i) => {
      if (clusters.has(c.name)) ctx.addIssue({ code: 'custom', path: ['clusters', i, 'name'], message: `cluster "${c.name}" is configured twice` });
      clusters.add(c.name);
    });
    const names = new Set<string>();
    cfg.steering.names.forEach((n, i) => {
      if (names.has(n.name)) ctx.addIssue({ code: 'custom', path: ['steering', 'names', i, 'name'], message: `"${n.name}" is steered twice` });
      names.add(n.name);
      if (cfg.clusters.length === 0) ctx.addIssue({ code: 'custom', path: ['steering', 'names', i], message: 'steered names need clusters: add clusters: [{name, vips}]' });
    });
    if (cfg.control) {
      requireKeys(
        cfg.control,
        ctx,
        cfg.control.subscribe.map((peer, i) => ({ path: ['control', 'subscribe', i], peer })),
      );
    }
  });

export type DnsConfig = z.output<typeof dnsConfigSchema>;
