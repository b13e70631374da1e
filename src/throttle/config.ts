/**
 * Configuration of distributed throttling: `sluice master --config FILE`
 * (masterConfigSchema), `sluice master-proxy --config FILE`
 * (proxyConfigSchema) and the gatekeeper a front node embeds
 * (gatekeeperSchema). One schema each, validated once by
 * src/config/load.ts, defaults filled, frozen.
 *
 *   name: master1
 *   control: { keyFile: /etc/sluice/keys/master1.key,
 *              allow: [/etc/sluice/keys/gatekeepers] }
 *   accounting: { listen: tcp://198.18.0.10:7201 }      # or { connect, publicKey } to a proxy
 *   publish:    { listen: tcp://198.18.0.10:7202 }
 *   store: { kind: memory }                              # or { kind: redis, host, port }
 *   domains:
 *     - { name: www, requests: 10, periodSeconds: 1, burst: 20 }
 *   http: { listen: 127.0.0.1:9103 }                    # optional: GET /metrics, /status
 *
 * Each master key's `.describe()` text is its entry in
 * docs/configuration.md (npm run docs:config regenerates it).
 */
import { z } from 'zod';
import { controlBaseSchema, keyRef, requireKeys, zmqEndpoint } from '../control/config.ts';
import { httpSchema } from '../http/config.ts';
import { isDomainName } from './protocol.ts';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
const domainName = z.string().refine(isDomainName, 'a throttling domain is 1-128 letters, digits, . _ - (the virtual service it throttles)');

/** A socket end: bound here (listen) or connected to a proxy (connect + its key). */
export const socketEnd = z
  .strictObject({
    listen: zmqEndpoint.optional().describe('Bind here, tcp://ADDRESS:PORT (a CURVE server admitting `control.allow`). Exactly one of `listen` and `connect`.'),
    connect: zmqEndpoint.optional().describe('Connect to a `sluice master-proxy` instead, tcp://ADDRESS:PORT (sharding by domain, docs/throttling.md).'),
    publicKey: keyRef.optional().describe('With `connect`: the proxy\'s public key, z85 or a .pub file. Required there unless `control.plaintext` is true.'),
  })
  .superRefine((s, ctx) => {
    if ((s.listen === undefined) === (s.connect === undefined)) ctx.addIssue({ code: 'custom', message: 'give exactly one of listen (bind here) or connect (to a master-proxy)' });
    if (s.listen !== undefined && s.publicKey !== undefined) ctx.addIssue({ code: 'custom', path: ['publicKey'], message: 'publicKey is the peer key of a connect; a listening socket uses control.keyFile' });
  });
export type SocketEnd = z.output<typeof socketEnd>;

export const ruleSchema = z.strictObject({
  name: domainName.describe('The domain (a front node\'s virtual service, the gatekeeper checkpoints\' `domain`): 1-128 letters, digits, . _ -. Unique.'),
  requests: z.int().min(1).max(1_000_000).describe('N: requests per client (identifier) allowed per `periodSeconds`.'),
  periodSeconds: z.number().positive().max(86_400).default(1).describe('... per this many seconds: one request every periodSeconds/requests on average.'),
  burst: z.int().min(1).max(1_000_000).default(1).describe('B: requests a client that has been quiet may make at once (GCRA tolerance (B-1) x periodSeconds/requests).'),
});
export type RuleConfig = z.output<typeof ruleSchema>;

const storeSchema = z.discriminatedUnion(
  'kind',
  [
    z.strictObject({
      kind: z.literal('memory').describe('`memory`: state in this process, lost when it stops.'),
      maxIdentifiers: z.int().min(1).max(10_000_000).default(1_000_000).describe('Memory store: identifiers tracked per domain; beyond it the oldest is dropped (that client is not held: fails open).'),
    }),
    z.strictObject({
      kind: z.literal('redis').describe('`redis`: state in Redis, one atomic script per charge; masters sharing a Redis and `keyPrefix` share the state (failover).'),
      host: z.string().min(1).default('127.0.0.1').describe('Redis host.'),
      port: z.int().min(1).max(65535).default(6379).describe('Redis port.'),
      path: z.string().min(1).optional().describe('A Redis Unix socket instead of host and port.'),
      db: z.int().min(0).max(15).default(0).describe('Redis database number.'),
      keyPrefix: z.string().min(1).max(64).default('sluice:throttle:').describe('Prefix of every key; masters sharing state use the same prefix (and Redis).'),
      commandTimeoutMs: z.int().min(10).max(60_000).default(1000).describe('A Redis command not answered within this many ms fails (a store error: nothing is published, the throttle fails open).'),
    }),
  ],
  { error: 'store.kind is memory or redis' },
);

export const masterConfigSchema = z
  .strictObject({
    name: name.describe('This master\'s name (logs, status, its ZAP domains).'),
    adminSocket: z.string().min(1).default('/run/sluice/master.sock').describe('Unix socket (mode 0600) for `sluice status --master` and `{"cmd":"reload"}`. A change needs a restart.'),
    control: controlBaseSchema
      .extend({
        allow: z.array(keyRef).default([]).describe('Gatekeepers (front nodes) and proxies admitted on our bound sockets: z85 keys, .pub files or directories of them. Applied on reload.'),
      })
      .describe('Our key pair (`keyFile`, required unless `plaintext`), the receive limits, and the allowlist. Only `allow` applies on reload.'),
    accounting: socketEnd.describe('Where accounting arrives (SUB): ACCEPTED, DELAYED, REJECTED, RESYNC from the gatekeepers. A change needs a restart.'),
    publish: socketEnd.describe('Where DELAY_UNTIL and RESYNC_DONE leave for the gatekeepers (PUB). A change needs a restart.'),
    store: storeSchema.prefault({ kind: 'memory' }).describe('Where the GCRA state lives. A change needs a restart.'),
    domains: z.array(ruleSchema).min(1, 'throttle at least one domain').max(4096).describe('One rule per throttled domain. Added, changed and removed domains apply on reload.'),
    maxDelaySeconds: z.number().positive().max(86_400).default(3600).describe('DELAYED accounting reporting a longer delay than this is refused as garbage (counted).'),
    http: httpSchema.optional().describe('Read-only ops HTTP server: GET /metrics (Prometheus text) and GET /status (the admin socket\'s status as JSON). Absent: none. A change needs a restart.'),
  })
  .superRefine((c, ctx) => {
    const peers: { path: (string | number)[]; peer: { publicKey?: string | undefined } }[] = [];
    if (c.accounting.connect !== undefined) peers.push({ path: ['accounting'], peer: c.accounting });
    if (c.publish.connect !== undefined) peers.push({ path: ['publish'], peer: c.publish });
    requireKeys(c.control, ctx, peers);
    const seen = new Set<string>();
    c.domains.forEach((d, i) => {
      if (seen.has(d.name)) ctx.addIssue({ code: 'custom', path: ['domains', i, 'name'], message: `domain ${d.name} is configured twice` });
      seen.add(d.name);
    });
  });
export type MasterConfig = z.output<typeof masterConfigSchema>;

/** `sluice master-proxy`: forwards accounting to masters and control back, by subscription. */
export const proxyConfigSchema = z
  .strictObject({
    name,
    control: controlBaseSchema.extend({
      /** Gatekeepers: connect to accounting.frontend and control.backend. */
      allowGatekeepers: z.array(keyRef).default([]),
      /** Masters: connect to accounting.backend and control.frontend. */
      allowMasters: z.array(keyRef).default([]),
    }),
    accounting: z.strictObject({ frontend: zmqEndpoint, backend: zmqEndpoint }),
    publish: z.strictObject({ frontend: zmqEndpoint, backend: zmqEndpoint }),
  })
  .superRefine((c, ctx) => {
    requireKeys(c.control, ctx);
  });
export type ProxyConfig = z.output<typeof proxyConfigSchema>;

/** One master as a gatekeeper sees it: where to send accounting, where to hear control. */
export const masterPeerSchema = z.strictObject({
  accounting: zmqEndpoint.describe('The master\'s accounting endpoint (its `accounting.listen`, or a master-proxy\'s accounting frontend).'),
  control: zmqEndpoint.describe('The master\'s control endpoint (its `publish.listen`, or a master-proxy\'s publish backend).'),
  publicKey: keyRef.optional().describe('The master\'s (or proxy\'s) public key: z85 or a .pub file. Required unless `control.plaintext` is true.'),
});

export const gatekeeperDomainSchema = z.strictObject({
  name: domainName,
  /** Identifier = the source address masked to this many bits (32: the address). */
  prefixLength: z.int().min(1).max(32).default(32),
  /** IPv6 clients: identifier = the source address masked to this many bits (default /64: one subscriber's LAN, RFC 6177; 128: the address). */
  prefixLength6: z.int().min(1).max(128).default(64),
  /** A request whose delay would exceed this is rejected instead (RST). */
  maxDelaySeconds: z.number().positive().max(3600).default(5),
});

/**
 * The gatekeeper's link to its masters: everything but the domains. A
 * front node's `throttle:` section is this (throttleSchema); its domains
 * come from its `gatekeeper` checkpoints (src/front/throttle.ts).
 */
const linkShape = {
  name: name.describe('This gatekeeper\'s name: its resync session ids start with it (logs on the master).'),
  control: controlBaseSchema.describe('This gatekeeper\'s key pair (it is a CURVE client of every master; each master\'s `control.allow` lists its public key) and the receive limits.'),
  /**
   * Masters sharing one state (Redis) or one master. Control is heard from
   * all of them; accounting goes to one at a time, the first connected in
   * this order, and moves on when it disconnects (so a charge is never
   * applied twice).
   */
  masters: z
    .array(masterPeerSchema)
    .min(1, 'configure at least one master')
    .max(8, 'at most 8 masters')
    .describe('Masters sharing one state (Redis), or one master. Delays are heard from all; accounting goes to the first connected, in this order, and moves to the next when it disconnects.'),
  /** Remembered delays per domain; beyond it the soonest-ending are dropped (fail open). */
  maxIdentifiers: z.int().min(16).max(10_000_000).default(100_000).describe('Delays remembered per domain at most; beyond it passed ones are swept, then the oldest dropped (that client passes: fail open).'),
  /** Accounting messages queued while sending; beyond it they are dropped and counted. */
  queueLength: z.int().min(16).max(1_000_000).default(65_536).describe('Accounting messages queued for sending at most; beyond it they are dropped and counted.'),
  /** REJECTED accounting: every one (1), none (0), or this fraction, sampled. */
  rejectedSample: z.number().min(0).max(1).default(1).describe('REJECTED accounting sent: every one (1), none (0), or this fraction at random.'),
  /** Resync retry while no RESYNC_DONE came back, ms. */
  resyncRetryMs: z.int().min(50).max(60_000).default(1000).describe('RESYNC is repeated this often (ms) until the master answers RESYNC_DONE.'),
};

function requireLinkKeys(c: { control: { plaintext: boolean; keyFile?: string | undefined }; masters: readonly { publicKey?: string | undefined }[] }, ctx: z.RefinementCtx): void {
  requireKeys(
    c.control,
    ctx,
    c.masters.map((m, i) => ({ path: ['masters', i], peer: m })),
  );
}

export const gatekeeperSchema = z
  .strictObject({
    ...linkShape,
    domains: z.array(gatekeeperDomainSchema).min(1).max(4096),
  })
  .superRefine(requireLinkKeys);
export type GatekeeperConfig = z.output<typeof gatekeeperSchema>;

/** A front node's `throttle:` section: the gatekeeper without its domains. */
export const throttleSchema = z.strictObject(linkShape).superRefine(requireLinkKeys);
export type ThrottleConfig = z.output<typeof throttleSchema>;
