/**
 * `sluice agent` configuration: one per server. Validated once, frozen.
 * Each key's `.describe()` text is its entry in docs/configuration.md
 * (npm run docs:config regenerates it).
 */
import { z } from 'zod';
import { controlBaseSchema, peerSchema, requireKeys, type PeerConfig } from '../control/config.ts';
import { httpSchema } from '../http/config.ts';
import { parseIPv4Address } from '../packet/address.ts';
import { UTILIZATION_SOURCES } from './load.ts';
import { formatRegex } from './access-log.ts';

/** Front nodes an agent reports to at most (a pair, with room to spare: each is one socket). */
export const MAX_FRONTS = 8;

const ipv4 = z.string().refine((s) => parseIPv4Address(s) !== undefined, 'expected an IPv4 address like 198.18.201.11');

export const agentConfigSchema = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,64}$/, 'expected 1-64 characters of A-Z a-z 0-9 . _ : -')
      .describe('The server\'s name as the front node\'s config lists it (`services[].servers[].name`).'),
    address: ipv4.describe('The server\'s IPv4 address (as in the front node\'s config).'),
    front: peerSchema
      .optional()
      .describe('The front node\'s control endpoint (its `control.agents.listen`) and public key, for a cluster with one front node. Exactly one of `front` and `fronts`.'),
    fronts: z
      .array(peerSchema)
      .min(1, 'list at least one front node (or use `front:` for a single one)')
      .max(MAX_FRONTS, `at most ${String(MAX_FRONTS)} front nodes`)
      .optional()
      .describe(
        `Every front node of the cluster (a keepalived pair: both), each with its control endpoint (its \`control.agents.listen\`) and public key, 1 to ${String(MAX_FRONTS)}, endpoints unique. Every report goes to every one of them over its own socket, so the backup knows the servers as well as the master when it takes over; a front node that is down costs the others nothing. Exactly one of \`front\` and \`fronts\`.`,
      ),
    control: controlBaseSchema
      .default({ plaintext: false, maxMessageBytes: 1024 * 1024, maxAgeSeconds: 30 })
      .describe('Our side of the control plane: our key pair (`keyFile`, required unless `plaintext`) and the receive limits.'),
    loadSeconds: z.number().min(0.5).max(3600).default(5).describe('Seconds between load reports (the front node\'s `control.loadSeconds`).'),
    requestRateSeconds: z.number().min(1).max(86400).default(60).describe('Seconds between per-client request-count reports (the front node\'s `control.requestRate.passSeconds`).'),
    ports: z
      .array(z.number().int().min(1).max(65535))
      .min(1)
      .default([80])
      .describe('Service ports whose established connections are counted (IPv4 and IPv6, this network namespace).'),
    utilization: z
      .strictObject({
        source: z
          .enum(UTILIZATION_SOURCES)
          .default('cpu')
          .describe(
            'The utilization figure the front node\'s capacity estimate uses: `cpu` busy share of all CPUs (/proc/stat); `load` 1-minute load average / CPUs; `connections` established connections on `ports` / `maxConnections`; `memory` 1 − MemAvailable / MemTotal; `cgroup` CPU time of the web server\'s cgroup / its CPU quota (cgroup v2 or v1).',
          ),
        maxConnections: z.number().int().positive().default(1000).describe('Source `connections`: the count that means full (utilization 1).'),
        cgroup: z.string().min(1).optional().describe('Source `cgroup` (required there): the web server\'s cgroup below the hierarchy root, e.g. system.slice/nginx.service.'),
      })
      .default({ source: 'cpu', maxConnections: 1000 })
      .superRefine((u, ctx) => {
        if (u.source === 'cgroup' && u.cgroup === undefined) ctx.addIssue({ code: 'custom', path: ['cgroup'], message: 'required when source is cgroup: the web server cgroup path, e.g. system.slice/nginx.service' });
      })
      .describe('How the server\'s utilization (0 to 1) is measured.'),
    accessLog: z
      .strictObject({
        path: z.string().min(1).default('/var/log/nginx/access.log').describe('The web server\'s access log, followed like `tail -F` (rotation by rename or copytruncate, truncation) from its end at start.'),
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
          }, 'expected nginx-combined, apache-combined, or a regular expression with a named group (?<client>...)')
          .describe('`nginx-combined`, `apache-combined`, or a regular expression with a named group (?<client>...) capturing the client\'s IPv4 address.'),
        pollSeconds: z.number().min(0.1).max(60).default(1).describe('How often the log is read.'),
        maxClients: z.number().int().min(1).max(10_000_000).default(100_000).describe('Distinct clients counted per interval at most; lines of further clients are counted as tableFull.'),
      })
      .default({ path: '/var/log/nginx/access.log', format: 'nginx-combined', pollSeconds: 1, maxClients: 100_000 })
      .describe('The access log the per-client request counts are read from.'),
    adminSocket: z
      .string()
      .startsWith('/', 'adminSocket must be an absolute path')
      .default('/run/sluice/agent.sock')
      .describe('Unix socket (mode 0600) for `sluice status --agent` and `sluice ctl --socket PATH reload`. A change needs a restart.'),
    health: z
      .strictObject({
        kind: z.enum(['none', 'tcp', 'http']).default('none').describe('The agent\'s own check of its service on the local host: `tcp` connects to `address`:`port`; `http` GETs `url` and expects `expectStatus`; `none` checks nothing (the server is reported up unless the operator set drain or maint).'),
        address: ipv4.default('127.0.0.1').describe('Kind `tcp`, and `http` without `url`: the local address the service listens on.'),
        port: z.number().int().min(1).max(65535).optional().describe('Kind `tcp`, and `http` without `url`: the service port (default: the first of `ports`).'),
        url: z
          .url({ protocol: /^http$/, error: 'expected an http:// URL on the local host, e.g. http://127.0.0.1/health' })
          .optional()
          .describe('Kind `http`: the URL to GET (default http://`address`:`port`/). Meant for the local host: the agent checks its own server.'),
        expectStatus: z.array(z.number().int().min(100).max(599)).min(1).max(64).optional().describe('Kind `http`: the statuses that pass (default: any 2xx or 3xx).'),
        intervalSeconds: z.number().min(0.2).max(3600).default(2).describe('Seconds between checks (one runs at a time).'),
        timeoutSeconds: z.number().min(0.05).max(60).default(1).describe('A check that has not passed after this many seconds fails. At most `intervalSeconds`.'),
        rise: z.number().int().min(1).max(100).default(2).describe('Passes in a row that bring a down server up.'),
        fall: z.number().int().min(1).max(100).default(3).describe('Failures in a row that take an up server down.'),
      })
      .default({ kind: 'none', address: '127.0.0.1', intervalSeconds: 2, timeoutSeconds: 1, rise: 2, fall: 3 })
      .superRefine((h, ctx) => {
        if (h.timeoutSeconds > h.intervalSeconds) ctx.addIssue({ code: 'custom', path: ['timeoutSeconds'], message: `must be at most intervalSeconds (${h.intervalSeconds})` });
        if (h.kind !== 'http' && (h.url !== undefined || h.expectStatus !== undefined)) ctx.addIssue({ code: 'custom', path: ['kind'], message: 'url and expectStatus are for kind http; set kind: http or remove them' });
      })
      .describe('The server\'s own health, checked by the agent and sent with every load report (the front node stops sending new connections to a server reported down, drain or maint). A change is reported at once.'),
    stateFile: z
      .strictObject({
        path: z.string().startsWith('/', 'stateFile.path must be an absolute path').default('/var/lib/sluice/agent-state').describe('The operator\'s verb for this server: one line `drain|maint|up|ready [reason]` (no file or an empty one: up). Written by hand or by `sluice agent ctl`; kept across restarts. Bad content is logged, counted and ignored (the previous verb stays).'),
        pollSeconds: z.number().min(0.1).max(60).default(1).describe('How often the state file is re-read.'),
      })
      .default({ path: '/var/lib/sluice/agent-state', pollSeconds: 1 })
      .describe('The operator\'s drain/maint verb (HAProxy agent-check style). Precedence of what the agent reports: maint, then a failing check (down), then drain, then up.'),
    http: httpSchema.optional().describe('Read-only ops HTTP server: GET /metrics (Prometheus text) and GET /status (the admin socket\'s status as JSON). Absent: none. A change needs a restart.'),
  })
  .superRefine((c, ctx) => {
    if (c.front !== undefined && c.fronts !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['fronts'], message: 'give either front (one front node) or fronts (a list, e.g. both nodes of a pair), not both: move front into the fronts list' });
    } else if (c.front === undefined && c.fronts === undefined) {
      ctx.addIssue({ code: 'custom', path: ['fronts'], message: 'required: the front nodes to report to, as fronts: [{ endpoint, publicKey }, ...] (or front: { endpoint, publicKey } for a single one)' });
    }
    const seen = new Set<string>();
    c.fronts?.forEach((f, i) => {
      if (seen.has(f.endpoint)) ctx.addIssue({ code: 'custom', path: ['fronts', i, 'endpoint'], message: `${f.endpoint} is listed twice: list each front node once` });
      seen.add(f.endpoint);
    });
    requireKeys(
      c.control,
      ctx,
      c.fronts !== undefined ? c.fronts.map((peer, i) => ({ path: ['fronts', i], peer })) : c.front !== undefined ? [{ path: ['front'], peer: c.front }] : [],
    );
  });

export type AgentConfig = z.output<typeof agentConfigSchema>;

/** The front nodes an agent reports to: `fronts`, or the single `front` (the schema guarantees exactly one). */
export function agentFronts(c: Pick<AgentConfig, 'front' | 'fronts'>): readonly PeerConfig[] {
  return c.fronts ?? (c.front !== undefined ? [c.front] : []);
}
