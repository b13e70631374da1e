/**
 * `sluice front` configuration schema (YAML). Documented by example in
 * deploy/examples/front-cluster1.yaml. Each key's `.describe()` text is its
 * entry in docs/configuration.md (npm run docs:config regenerates it).
 */
import { z } from 'zod';
import { controlBaseSchema, keyRef, peerSchema, requireKeys, zmqEndpoint } from '../control/config.ts';
import { httpSchema } from '../http/config.ts';
import { METHOD_NAMES } from './select/backend.ts';
import { checkpointSchema, shapingSchema, type CheckpointConfig } from '../shaping/config.ts';
import { throttleSchema } from '../throttle/config.ts';
import { admissionSchema } from '../admission/config.ts';
import { MAX_OVERFLOW_TARGETS, MAX_SERVERS_MARKED, MAX_SERVICES_MARKED } from './marks.ts';
import { parseStatusSet } from './health/status-set.ts';
import { checkHa, haSchema } from './ha/config.ts';

/** A checkpoint list (src/shaping/config.ts): evaluated in order, every matching rule applies. */
const checkpoints = z.array(checkpointSchema).max(32, 'at most 32 checkpoints per list').default([]);

const ipv4 = z.ipv4({ error: 'expected an IPv4 address like 198.18.201.11' });
const ipv6 = z.ipv6({ error: 'expected an IPv6 address like 2001:2:0:101::2' });

/**
 * An IPv6 address in RFC 5952 text (lowercase, the longest run of zero
 * groups compressed): the form the rules, `nft list` and `sluice status`
 * print, so a VIP written `2001:0002:0:1001:0:0:0:1` in the file is the
 * same VIP everywhere. The WHATWG URL parser's serialisation is RFC 5952's
 * (an embedded IPv4 tail is printed in hex, which RFC 5952 5 allows).
 */
export function canonicalIPv6(text: string): string {
  return new URL(`http://[${text}]/`).hostname.slice(1, -1);
}

/**
 * A VIP or a server address: IPv4, or IPv6 in canonical text. A service
 * is of one family (checked with its servers: checkFamilies); the rules
 * of each family are their own nft table (nft.ts) and iptables or
 * ip6tables chains (rules.ts).
 */
const anyAddress = (what: string): z.ZodType<string> =>
  z.union([ipv4, ipv6.transform(canonicalIPv6)], { error: `expected ${what}: an IPv4 address like 198.18.201.11 or an IPv6 address like 2001:2:0:1001::1` });
const vipAddress = anyAddress('a VIP');

/** The family of a configured (validated) address. */
export function familyOf(address: string): 4 | 6 {
  return address.includes(':') ? 6 : 4;
}
const port = z.int({ error: 'expected a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535');
const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');

const server = z.strictObject({
  name: name.describe('Server name, unique within the service: `sluice ctl`, `sluice status` and the server\'s agent (its `name`) use it.'),
  address: anyAddress('a server address').describe('The server\'s address on the LAN, of the service VIP\'s family (IPv4 or IPv6). Its replies must be routed back through this front node (operations.md).'),
  port: port.optional().describe('Port on the server; defaults to the service\'s port.'),
  capacity: z
    .int()
    .positive('capacity must be > 0 (or omit it for no limit)')
    .optional()
    .describe(
      'Without agents (no `control.agents`): the concurrent connections the server takes; required on every server of a service whose method is `capacity`; absent means no limit. With agents: the starting estimate in new connections/s, replaced by the reports\' estimates.',
    ),
  weight: z.number().positive('weight must be > 0').default(1).describe('Relative share for `byrequests` (lbfactor), `leastconn` and `maglev` (rounded to an integer there); the `capacity` method does not use it.'),
  state: z
    .enum(['active', 'drain', 'disabled'], { error: 'state is one of active, drain, disabled' })
    .default('active')
    .describe('`drain`: no new connections, established ones continue; `disabled`: the same, shown as disabled. Only `active` servers receive the fallback spread while the daemon is down.'),
  checkpoints: checkpoints.describe('Checked after this server is chosen (criterion `server` counts per server): seed 001\'s per-server list.'),
});

/**
 * A service's active health check (src/front/health/), in keepalived's
 * (TCP_CHECK, HTTP_GET) and HAProxy's (`check inter rise fall`,
 * `slowstart`, `http-check expect`) vocabulary. Kind `none` (the default)
 * keeps configs written before checks existed working unchanged.
 */
const health = z
  .strictObject({
    kind: z
      .enum(['none', 'tcp', 'http'], { error: 'health.kind is none, tcp or http' })
      .default('none')
      .describe('`tcp`: a connect to the server\'s check port passes (keepalived TCP_CHECK); `http`: a GET of `path` whose status is in `expectStatus` (and whose body matches `bodyMatch`, if set) passes (HTTP_GET); `none`: no check from the front node (the agent, if any, still reports).'),
    intervalSeconds: z.number().min(0.1, 'health.intervalSeconds is 0.1..3600').max(3600, 'health.intervalSeconds is 0.1..3600').default(2).describe('Seconds between two checks of one server (HAProxy `inter`). The servers\' first checks are spread evenly over one interval.'),
    timeoutSeconds: z
      .number()
      .min(0.01, 'health.timeoutSeconds is 0.01..3600')
      .max(3600, 'health.timeoutSeconds is 0.01..3600')
      .default(1)
      .describe('A check that has not passed after this long (connect, request and response together) fails as a timeout; its socket is destroyed. Must be below `intervalSeconds`.'),
    rise: z.int({ error: 'health.rise is an integer 1..100' }).min(1, 'health.rise is 1..100').max(100, 'health.rise is 1..100').default(2).describe('Checks passed in a row before a down server is up again (HAProxy `rise`).'),
    fall: z.int({ error: 'health.fall is an integer 1..100' }).min(1, 'health.fall is 1..100').max(100, 'health.fall is 1..100').default(3).describe('Checks failed in a row before an up server is down (HAProxy `fall`): it gets no new connections; established ones continue.'),
    refusedLimit: z
      .int({ error: 'health.refusedLimit is an integer 0..100000' })
      .min(0, 'health.refusedLimit is 0..100000')
      .max(100_000, 'health.refusedLimit is 0..100000')
      .default(10)
      .describe('Passive check: a server that refuses this many new connections (its reset answering a client\'s SYN, seen on the data path) since its last passed check goes down at once, without waiting for `fall` failed checks (HAProxy `observe layer4` with `error-limit` and `on-error mark-down`); its check brings it back after `rise` passes. At a high connection rate a dead server costs this many failed connections instead of `fall` x `intervalSeconds` of them. 0: off. Only with a check (`kind` tcp or http): without one nothing would bring the server back.'),
    unansweredLimit: z
      .int({ error: 'health.unansweredLimit is an integer 0..100000' })
      .min(0, 'health.unansweredLimit is 0..100000')
      .max(100_000, 'health.unansweredLimit is 0..100000')
      .default(10)
      .describe('Passive check: a server that leaves this many retransmitted SYNs unanswered (a client sent its SYN again, after ~1 s, and the flow has seen no reply from the server: a host down or cut off, or a listener whose accept queue is full) since its last passed check goes down at once, without waiting for `fall` failed checks (HAProxy counts connect timeouts the same way under `observe layer4`); its check brings it back after `rise` passes. Each retransmission counts. A SYN-ACK lost on the way to the client does not count (the flow has seen the reply). 0: off. Only with a check (`kind` tcp or http).'),
    source: anyAddress('a local address')
      .optional()
      .describe('Local address the checks are sent from (keepalived `bindto`), of the service\'s family (IPv6 for an IPv6 service); it must be on an interface of the front node (checked at start). Absent: the kernel chooses (the LAN address toward the server).'),
    port: port.optional().describe('Port the checks go to; absent: each server\'s own port (the service\'s by default).'),
    path: z
      .string()
      .regex(/^\/[\x21-\x7e]*$/, 'health.path is an absolute path of visible ASCII characters without spaces, like /healthz')
      .max(1024, 'health.path is at most 1024 characters')
      .default('/')
      .describe('`http`: the path requested (HTTP/1.0 GET, `Connection: close`).'),
    host: z
      .string()
      .regex(/^[A-Za-z0-9.:[\]-]{1,255}$/, 'health.host is a host name or address (letters, digits, . - : [ ])')
      .optional()
      .describe('`http`: the Host header; absent: the server\'s address.'),
    expectStatus: z
      .string()
      .default('200-399')
      .superRefine((v, ctx) => {
        const r = parseStatusSet(v);
        if (typeof r === 'string') ctx.addIssue({ code: 'custom', message: `health.expectStatus: ${r} (a list like "200-399" or "200,204,301-302")` });
      })
      .describe('`http`: the status codes that pass, as codes and ranges ("200,204,301-302"). The default 200-399 is HAProxy\'s (2xx and 3xx); keepalived\'s HTTP_GET default is 200-299.'),
    bodyMatch: z
      .union([
        z.string().min(1, 'health.bodyMatch is a non-empty substring, or { regex: ... }').max(1024, 'health.bodyMatch is at most 1024 characters'),
        z.strictObject({
          regex: z
            .string()
            .min(1)
            .max(1024)
            .superRefine((v, ctx) => {
              try {
                new RegExp(v);
              } catch (err) {
                ctx.addIssue({ code: 'custom', message: `health.bodyMatch.regex is not a valid regular expression: ${(err as Error).message}` });
              }
            }),
        }),
      ])
      .optional()
      .describe('`http`: the body (its first 64 KiB) must contain this substring, or match `{ regex: "..." }` (JavaScript syntax); otherwise the check fails as "body did not match" (HAProxy `http-check expect string` / `rstring`).'),
    slowStartSeconds: z
      .number()
      .min(0, 'health.slowStartSeconds is 0..3600')
      .max(3600, 'health.slowStartSeconds is 0..3600')
      .default(0)
      .describe('A server that comes back up gets a share of its normal traffic that rises linearly from 5% to 100% over this many seconds (HAProxy `slowstart`); 0: off. Applied by `capacity`, `byrequests` and `leastconn`; `maglev` (static consistent hashing) ignores it, as HAProxy ignores `slowstart` for static algorithms.'),
    startAs: z
      .enum(['up', 'down'], { error: 'health.startAs is up or down' })
      .default('up')
      .describe('The check\'s state of a server before its first results (at start, and for a server a reload adds): `up` as HAProxy and keepalived do (a dead one goes down after `fall` checks), `down` to wait for `rise` passed checks (keepalived `alpha`). A reload keeps the state of servers that remain (same name, address and port).'),
  })
  .superRefine((h, ctx) => {
    if (h.kind !== 'none' && h.timeoutSeconds >= h.intervalSeconds) ctx.addIssue({ code: 'custom', path: ['timeoutSeconds'], message: `health.timeoutSeconds (${String(h.timeoutSeconds)}) must be below health.intervalSeconds (${String(h.intervalSeconds)}): a check must end before the next one is due` });
  })
  .prefault({})
  .describe('Active health checks of this service\'s servers from the front node (docs/operations.md, "Server health").');

/**
 * Kernel SYN cookies in front of the decision (SYNPROXY, nft `synproxy`):
 * the options the kernel answers a client's SYN with, before any server
 * is chosen. They must match what the servers themselves would answer:
 * SYNPROXY relays the server's window unchanged after the handshake, so
 * `wscale` must be the servers' window scale (Linux: 7 with the default
 * tcp_rmem maximum of 6 MiB), and `mss` must fit the path to the servers.
 */
const synproxyOptions = z.strictObject({
  mss: z.int().min(536, 'synproxy.mss is 536..65495').max(65495, 'synproxy.mss is 536..65495').default(1460).describe('MSS announced to clients in the cookie SYN-ACK: the smaller of the uplink\'s and the LAN\'s MTU minus 40 (1460 for 1500).'),
  wscale: z.int().min(0, 'synproxy.wscale is 0..14').max(14, 'synproxy.wscale is 0..14').default(7).describe('Window scale announced to clients: must equal the servers\' own (Linux: 7 with the default net.ipv4.tcp_rmem maximum of 6 MiB), since their windows are relayed unscaled.'),
  timestamps: z.boolean().default(true).describe('Announce TCP timestamps (the cookie then also carries the window scale and SACK options); the kernel offsets the servers\' timestamps.'),
  sack: z.boolean().default(true).describe('Announce selective acknowledgement (SACK permitted).'),
});

/** A TCP service's SYNPROXY options, all defaults filled: what the nft table renders. */
export type SynproxyOptions = z.output<typeof synproxyOptions>;
const SYNPROXY_DEFAULTS: SynproxyOptions = synproxyOptions.parse({});
/** `above` and `calmSeconds` when not set (mode auto). */
export const SYNPROXY_ABOVE = 20000;
export const SYNPROXY_CALM_SECONDS = 30;

/**
 * The `synproxy` object: the cookie options plus the mode. Without `mode`
 * it is `on`, as before modes existed (an options object meant cookies
 * always); `above` and `calmSeconds` belong to `auto` and are refused
 * elsewhere, so that an object never silently means something else.
 */
const synproxyObject = synproxyOptions
  .extend({
    mode: z.enum(['auto', 'on', 'off'], { error: 'synproxy.mode is auto, on or off' }).optional().describe('`auto`: cookies only while the service is under a SYN flood (its SYN rate above `above`); `on`: always; `off`: never. Absent in an object: `on` (an options object meant cookies always before modes existed).'),
    above: z.int().min(1, 'synproxy.above is at least 1 SYN/s').optional().describe(`Mode auto: cookies engage at the first one-second reading of the service's SYN rate (client SYNs to VIP and port, counted by the kernel) above this many per second. Default ${String(SYNPROXY_ABOVE)}.`),
    calmSeconds: z.int().min(1, 'synproxy.calmSeconds is at least 1').max(3600, 'synproxy.calmSeconds is at most 3600').optional().describe(`Mode auto: cookies disengage once the SYN rate stayed below above/2 for this many seconds. Default ${String(SYNPROXY_CALM_SECONDS)}.`),
  })
  .superRefine((o, ctx) => {
    if ((o.mode ?? 'on') !== 'auto') {
      for (const k of ['above', 'calmSeconds'] as const) if (o[k] !== undefined) ctx.addIssue({ code: 'custom', path: [k], message: `synproxy.${k} applies to mode auto: set mode: auto (an object without mode is on)` });
    }
  });

/**
 * A TCP service's resolved SYN cookies: `auto` (engaged by the daemon while
 * the service's SYN rate is high, synproxy-auto.ts) or `on` (always), with
 * the options and the thresholds, all defaults filled.
 */
export type SynproxyPlan = SynproxyOptions & { readonly mode: 'auto' | 'on'; readonly above: number; readonly calmSeconds: number };

const service = z
  .strictObject({
    name: name.describe('Service name, unique in this file (`sluice ctl SERVICE SERVER ...`).'),
    vip: vipAddress.describe('Virtual IP address the clients connect to, IPv4 or IPv6 (the servers are of the same family). It need not be on an interface of the front node; it must be routed to it.'),
    port: port.describe('Port of the virtual service. VIP, port and protocol together must be unique.'),
    protocol: z
      .enum(['tcp', 'udp'], { error: 'protocol is tcp or udp' })
      .default('tcp')
      .describe('`tcp`: SYN decided, FIN and RST recycle the record. `udp`: the first packet of each flow (conntrack NEW) is decided; the kernel keeps the flow until its conntrack entry times out.'),
    method: z
      .enum(METHOD_NAMES, { error: `method is one of ${METHOD_NAMES.join(', ')}` })
      .default('capacity')
      .describe('Server selection: `capacity` in proportion to remaining capacity; `byrequests` Apache\'s lbfactor/lbstatus; `leastconn` fewest active connections per weight; `maglev` consistent hashing of the client address.'),
    servers: z
      .array(server)
      .min(1, 'a service needs at least one server')
      .max(MAX_SERVERS_MARKED, `at most ${String(MAX_SERVERS_MARKED)} servers per service (the packet mark's server field, src/front/marks.ts): split the servers over two services (another VIP or port), or over two front nodes`)
      .describe(`The servers of this service (names unique within it), at most ${String(MAX_SERVERS_MARKED)}: the packet mark's server field.`),
    checkpoints: checkpoints.describe('Checked first for each new connection to this service (seed 001\'s frontend list).'),
    synPath: z
      .enum(['kernel', 'queue'], { error: 'synPath is kernel or queue' })
      .default('queue')
      .describe(
        '`queue` (default): every SYN waits in NFQUEUE for the daemon\'s verdict. `kernel`: a new connection\'s SYN takes its server from a schedule the daemon writes into the kernel (an nft map, rewritten as capacities and health change), and the daemon records it from a log copy: no SYN waits for the daemon, and new connections keep their proportions while the daemon is stalled or away; measured on a 2-core machine it was level with `queue` in new connections/s (0.82 against 0.83 of DNAT) and added less connect latency (p99 +0.94 ms against +4.8 ms; docs/front-node-design.md, "The SYN path"). Applies to TCP services of method `capacity` or `byrequests` with no checkpoint (service, server or cluster level); the others always use `queue`.',
      ),
    health,
    synproxy: z
      .union([z.boolean(), z.literal('auto'), synproxyObject], { error: 'synproxy is auto, true, false, or { mode, above, calmSeconds, mss, wscale, timestamps, sack }' })
      .optional()
      .describe(
        'TCP, IPv4 or IPv6. Kernel SYN cookies (SYNPROXY) in front of the decision: the kernel answers the SYN with a cookie, and only a client that completes the handshake reaches the daemon (a spoofed SYN costs no queue entry, record or conntrack entry). Cookies cost every connection one client round trip before its first byte, so by default (`auto`, or absent) they engage only while the service is under a SYN flood: the kernel counts each service\'s client SYNs, and the daemon engages cookies at the first one-second reading above `above` SYNs/s (20000: set it to 2-3x the service\'s peak legitimate SYN rate on one node) and disengages them once the rate stayed below above/2 for `calmSeconds` (30). `true` (or an object without `mode`): always on; `false`: never. Absent: auto for a TCP service, unless a checkpoint that applies to it can reset (`reject: rst`), which SYNPROXY cannot combine with (set `false` or `reject: drop`). Needs `net.netfilter.nf_conntrack_tcp_loose=0` and a local route for the VIP on the front node, in mode auto too (checked at start; docs/operations.md, "SYN cookies").',
      ),
  })
  .superRefine((svc, ctx) => {
    if (svc.protocol === 'udp' && svc.synproxy !== undefined && !isOff(svc.synproxy)) ctx.addIssue({ code: 'custom', path: ['synproxy'], message: 'synproxy is for TCP services (a UDP flow has no handshake)' });
    const seen = new Set<string>();
    svc.servers.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['servers', i, 'name'], message: `server name "${s.name}" is used twice in this service` });
      seen.add(s.name);
    });
  });

/** The control plane (issue 4). */
const control = controlBaseSchema.extend({
  agents: z
    .strictObject({
      listen: zmqEndpoint.describe('Endpoint the agents push to (bind on the LAN side; the testbed uses port 7101).'),
      allow: z.array(keyRef).default([]).describe('The agents\' public keys: z85 keys, .pub files, or directories of .pub files.'),
    })
    .optional()
    .describe('The PULL socket agents push load and request-rate reports to (ZAP domain `agents`). Without it, capacities come from this file.'),
  publish: z
    .strictObject({
      listen: zmqEndpoint.describe('Endpoint of our PUB socket (the testbed binds the uplink address, port 7102).'),
      allow: z.array(keyRef).default([]).describe('Subscribers\' public keys (the DNS server, the other front nodes): z85 keys, .pub files, or directories of .pub files.'),
    })
    .optional()
    .describe('Our PUB socket (ZAP domain `subscribers`): cluster load, high-rate clients and RTT results for the DNS server and the other front nodes.'),
  subscribe: z.array(peerSchema).default([]).describe('PUB sockets we subscribe to: the other clusters\' front nodes (cluster load, for overflow) and the DNS server (RTT probe requests).'),
  loadSeconds: z.number().min(0.5).max(3600).default(5).describe('The agents\' load report interval (their `loadSeconds`). `control.maxAgeSeconds` must be at least this.'),
  downAfterIntervals: z.int().min(1).max(100).default(3).describe('A server whose agent is silent for this many load intervals gets no new connections until it reports again.'),
  estimate: z
    .strictObject({
      targetUtilization: z.number().gt(0).max(1).default(0.8).describe('Utilization the capacity estimate aims at: capacity = the connection rate that would bring the server to it.'),
      smoothing: z.number().gt(0).max(1).default(0.5).describe('Weight of each new observation in the moving average (EWMA).'),
      maxStep: z.number().min(1.01).max(100).default(2).describe('An estimate moves at most by this factor per report.'),
      minCapacity: z.number().positive().default(1).describe('Lower bound of an estimate (new connections/s).'),
      maxCapacity: z.number().positive().default(1_000_000).describe('Upper bound of an estimate (new connections/s).'),
      minUtilization: z.number().min(0).max(1).default(0.02).describe('Reports below this utilization carry no capacity information.'),
      initialCapacity: z.number().positive().default(100).describe('Starting estimate (new connections/s) for servers without a configured capacity.'),
    })
    .prefault({})
    .describe('Capacity estimation from the agents\' load reports (receive_server_load).'),
  requestRate: z
    .strictObject({
      passSeconds: z.number().min(1).max(86400).default(60).describe('Seconds between passes of send_request_rate (match the agents\' `requestRateSeconds`).'),
      factor: z.number().gt(1).max(1000).default(3).describe('Clients above factor × the average rate (over the clients with requests in the pass) are reported to DNS as high-rate clients.'),
      queueSize: z.int().min(1).max(4096).default(100).describe('Clients per `high_rate_clients` message.'),
      maxClients: z.int().min(16).max(10_000_000).default(1_000_000).describe('Clients tracked at most; more are dropped (counted).'),
      expireSeconds: z.number().positive().max(86400 * 7).default(600).describe('A client with no requests for this long is forgotten.'),
      ipv4Prefix: z.int().min(8).max(32).default(32).describe('IPv4 clients are counted per prefix of this length (32: per address) and reported to DNS as that prefix. Keep it no shorter than the DNS server\'s `steering.ipv4Prefix` unless one heavy network should mark every DNS prefix inside it (it does: the length travels with the report).'),
      ipv6Prefix: z.int().min(16).max(128).default(64).describe('IPv6 clients are counted per prefix of this length (64: per subnet, the unit one host or site usually holds whole; 128: per address) and reported to DNS as that prefix.'),
    })
    .prefault({})
    .describe('Per-client request rates from the agents\' access logs, and the high-rate clients published to DNS.'),
  clusterLoad: z
    .strictObject({
      everySeconds: z.number().min(0.5).max(3600).default(5).describe('Seconds between `cluster_load` messages (the DNS server\'s `steering.reportSeconds`).'),
      changeFraction: z.number().gt(0).max(1).default(0.1).describe('Also send at once when available capacity moves by more than this share of capacity.'),
    })
    .prefault({})
    .describe('Our `cluster_load` messages to the DNS server and the other front nodes.'),
  /*
   * maxPerSecond x timeoutMs/1000 stays below the 65535 echoes the ICMP
   * session can have outstanding (bounds below).
   */
  probe: z
    .strictObject({
      count: z.int().min(1).max(16).default(3).describe('Echo requests per target at most: a request\'s own count wins, capped by this.'),
      spacingMs: z.int().min(0).max(10_000).default(200).describe('Least time between two echo requests to the same target (ms).'),
      timeoutMs: z.int().min(10).max(10_000).default(1000).describe('An echo unanswered for this long (ms) is lost.'),
      maxTargets: z.int().min(1).max(65_536).default(4096).describe('Targets queued or being probed at most; more are dropped (counted).'),
      maxPerSecond: z.number().min(1).max(5000).default(200).describe('Echo requests per second over all targets at most, however many requests arrive.'),
      reportSeconds: z.number().min(0.1).max(3600).default(1).describe('Finished results are published this often.'),
      dedupSeconds: z
        .number()
        .min(0)
        .max(3600)
        .default(10)
        .describe(
          'A target probed less than this many seconds ago is not probed again: its result is published again in the next `rtt_results` instead, so several DNS servers asking for the same client cause one probe. 0: only targets still being probed are deduplicated.',
        ),
      methods: z
        .array(z.string().regex(/^(icmp|tcp:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))$/, 'a method is `icmp` or `tcp:<port>` (port 1-65535), e.g. tcp:443'))
        .min(1)
        .max(8)
        .refine((a) => new Set(a).size === a.length, 'each method at most once')
        .default(['icmp', 'tcp:443', 'tcp:53'])
        .describe(
          'Probe methods, cheapest first: `icmp` (echo) and `tcp:<port>` (a SYN to the port, the RTT from the SYN-ACK or RST; the half-open connection is reset at once). A target that does not answer one method is tried with the next in the same probe; the method that answered is remembered per target and tried first next time. Each method may add `timeoutMs` to a probe of a target that answers nothing.',
        ),
      retryCheaperSeconds: z.number().min(1).max(86_400).default(600).describe('A target remembered at a costlier method than the first is probed from the first method again this often (its ICMP filter may have gone).'),
      methodMemory: z.int().min(1).max(1_048_576).default(16_384).describe('Targets whose answering method is remembered, at most (least recently answered forgotten first).'),
      tcpMaxOutstanding: z.int().min(1).max(4096).default(1024).describe('TCP probes waiting for an answer, at most, per port; more are counted as lost at once.'),
    })
    .prefault({})
    .describe('RTT probes for DNS (receive_probe_for_rtt): the DNS server\'s `rtt_probe_request` targets are probed (ICMP echo, else a TCP SYN: `methods`; raw sockets, needs root) and the averaged RTTs published as `rtt_results`. Without a raw ICMP socket probing is off; without a raw TCP socket only ICMP is used.'),
});

export const frontConfigSchema = z
  .strictObject({
    cluster: name.describe('This cluster\'s name (reported to DNS and the other front nodes, shown in status).'),
    node: z
      .string({ error: 'expected a node name' })
      .regex(/^[A-Za-z0-9._:-]{1,64}$/, 'node is 1-64 letters, digits, . _ : - (a control-plane name)')
      .optional()
      .describe(
        'This front node\'s own name on the control plane: the sender of its messages, which is how the DNS server and the other front nodes tell the two front nodes of a pair apart (each keeps both nodes\' reports and takes the cluster\'s figures from the master\'s). Absent: the `cluster` value, right for a cluster with one front node. The two front nodes of one cluster have the same `cluster` and different `node`. In a pair: one of `ha.nodes[].name`. A change needs a restart.',
      ),
    queue: z.int().min(0).max(65535).default(0).describe('NFQUEUE number of this daemon\'s rules; one daemon per queue.'),
    nflogGroup: z
      .int()
      .min(0)
      .max(65535)
      .default(0)
      .describe('NFLOG group of this daemon\'s rules: TCP FIN and RST reach the daemon as log copies (no verdict) on it; one daemon per group.'),
    failMode: z
      .enum(['bypass', 'drop'], { error: 'failMode is bypass or drop' })
      .default('bypass')
      .describe('While the daemon is not running: `bypass` spreads new connections over the active servers by a static source hash (kernel only); `drop` refuses them. Established connections continue either way.'),
    uplinkAddress: ipv4.describe('This front node\'s address toward the other clusters (overflowed connections are SNATed to it). With `ha`: the uplink virtual address (`ha.uplink.virtualAddress` without its prefix), held by whichever node is master.'),
    uplinkAddress6: ipv6
      .transform(canonicalIPv6)
      .optional()
      .describe('This front node\'s IPv6 address toward the other clusters: overflowed connections of IPv6 services are SNATed to it. Required when an IPv6 service can overflow (`overflow` not empty).'),
    lanInterface: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,15}$/, 'an interface name (at most 15 characters)')
      .default('lan0')
      .describe('Interface toward the servers: server resets are logged (NFLOG) from it.'),
    connections: z
      .strictObject({
        max: z
          .int()
          .min(16)
          .max(16_000_000)
          .default(1_000_000)
          .describe('Connection records kept at most. At the bound the oldest recycled record is freed early; if none is recycled, the connection is still steered but not tracked (counted as untracked).'),
        recycleSeconds: z.number().positive().max(3600).default(120).describe('A finished (FIN/RST) record is kept this long for late packets, then freed.'),
        reconcileSeconds: z.number().positive().max(3600).default(30).describe('How often the kernel\'s flow table is read to free records whose flow is gone, when conntrack destroy events cannot do it: without events, or while records adopted at start remain (then every period at first, and 2, 4, ... up to 16 periods apart while the reads find nothing the events missed). With events a read also follows an event overrun.'),
        eventBufferMiB: z
          .int({ error: 'connections.eventBufferMiB is a whole number of MiB, 1..1024' })
          .min(1, 'connections.eventBufferMiB is 1..1024')
          .max(1024, 'connections.eventBufferMiB is 1..1024')
          .default(64)
          .describe('Receive buffer of the conntrack destroy-event socket (SO_RCVBUFFORCE), in MiB: about 1,600 events per MiB (measured). It holds the events that arrive while the daemon is busy or waits for a CPU (a million flows timing out: 60k events/s at the peak); when it overflows, events are lost and a full read of the kernel\'s table frees their records seconds later. Kernel memory, used only while events wait (up to twice this: the kernel doubles a socket\'s buffer to cover its overhead).'),
      })
      .prefault({})
      .describe('Connection records (one per client address and port per service).'),
    rules: z
      .strictObject({
        checkSeconds: z
          .number()
          .min(0.5, 'rules.checkSeconds is 0.5..60')
          .max(60, 'rules.checkSeconds is 0.5..60')
          .default(2)
          .describe('How often the daemon reads its rules back (`iptables-save` per table with chains of ours) and reinstalls them if they were removed or changed (operations.md, "Rules that heal"). Each check is one short child process per table.'),
        restartAfterFailures: z
          .int()
          .min(1, 'rules.restartAfterFailures is 1..1000')
          .max(1000, 'rules.restartAfterFailures is 1..1000')
          .default(3)
          .describe('Under the systemd watchdog: after this many failed reinstalls in a row (iptables refuses), WATCHDOG=1 is withheld and systemd restarts the daemon.'),
      })
      .prefault({})
      .describe('The periodic check of the daemon\'s own rules: removed or changed rules are reinstalled, logged and counted.'),
    services: z
      .array(service)
      .min(1, 'configure at least one virtual service')
      .max(MAX_SERVICES_MARKED, `at most ${String(MAX_SERVICES_MARKED)} virtual services per front node (the packet mark's service field, src/front/marks.ts): run the others on another front node (its own cluster or network namespace)`)
      .describe(`The virtual services this front node steers, at most ${String(MAX_SERVICES_MARKED)}: the packet mark's service field.`),
    overflow: z
      .array(
        z.strictObject({
          cluster: name.describe('The other cluster\'s name (as its front node\'s `cluster`).'),
          vip: ipv4.describe('The other cluster\'s IPv4 VIP; overflowed connections of IPv4 services are DNATed to it on the service\'s port.'),
          vip6: ipv6
            .transform(canonicalIPv6)
            .optional()
            .describe('The other cluster\'s IPv6 VIP; overflowed connections of IPv6 services are DNATed to it on the service\'s port. Required on every overflow cluster when an IPv6 service exists.'),
          freeCapacity: z.int().min(0).default(0).describe('Free capacity (connections) until the control plane reports it.'),
        }),
      )
      .max(MAX_OVERFLOW_TARGETS, `at most ${String(MAX_OVERFLOW_TARGETS)} overflow clusters (the packet mark's overflow field, src/front/marks.ts): keep the ones nearest to this cluster`)
      .default([])
      .describe(`Other clusters, for overflow when every server of this cluster is at capacity: new connections go to them in proportion to their free capacity. At most ${String(MAX_OVERFLOW_TARGETS)}: the packet mark's overflow field.`),
    checkpoints: checkpoints.describe('This cluster\'s checkpoints (seed 001\'s backend list): after the service\'s, before the server\'s.'),
    shaping: shapingSchema,
    throttle: throttleSchema
      .optional()
      .describe('Distributed throttling (docs/throttling.md): this front node\'s gatekeeper and the masters it talks to. Required by checkpoints of kind `gatekeeper`; their domains are the gatekeeper\'s domains.'),
    admission: admissionSchema
      .optional()
      .describe('Admission control (docs/admission.md): token limits per service and operation, local and cluster-wide (reserved from an elected coordinator). Applied by checkpoints of kind `admission`.'),
    adminSocket: z
      .string()
      .startsWith('/', 'adminSocket must be an absolute path')
      .default('/run/sluice/front.sock')
      .describe('Unix socket (mode 0600) for `sluice ctl` and `sluice status`.'),
    stateFile: z
      .string()
      .startsWith('/', 'stateFile must be an absolute path')
      .optional()
      .describe('Where `sluice ctl` changes (drain, weight, capacity, add, remove) are kept so they survive a reload and a restart (operations.md, "Changes that survive"). Absent: `$STATE_DIRECTORY/front.state.json` under systemd (the unit\'s `StateDirectory=sluice`: /var/lib/sluice), else `<config file>.state.json` beside the config. A change needs a restart.'),
    http: httpSchema.optional().describe('Read-only ops HTTP server: GET /metrics (Prometheus text) and GET /status (the admin socket\'s status as JSON). Absent: none. A change needs a restart.'),
    control: control.optional().describe('The control plane. Without it the front node runs on configured capacities and overflow figures alone.'),
    ha: haSchema
      .optional()
      .describe('A front-node pair (docs/operations.md, "Front-node pairs"): keepalived moves the uplink and LAN virtual addresses, conntrackd replicates the flows; `sluice ha render` writes both daemons\' files from this block (the same on both nodes). Absent: a single front node. A change needs a restart (and a re-render).'),
  })
  .superRefine((cfg, ctx) => {
    if (cfg.control) {
      requireKeys(cfg.control, ctx, cfg.control.subscribe.map((p, i) => ({ path: ['control', 'subscribe', i], peer: p })));
      if (cfg.control.maxAgeSeconds < cfg.control.loadSeconds) ctx.addIssue({ code: 'custom', path: ['control', 'maxAgeSeconds'], message: 'must be at least control.loadSeconds, or every load report is dropped as stale' });
    }
    checkCheckpoints(cfg, ctx);
    checkHa(cfg, ctx);
    checkFamilies(cfg, ctx);
    const names = new Set<string>();
    const endpoints = new Set<string>();
    cfg.services.forEach((s, i) => {
      if (s.method === 'capacity' && cfg.control?.agents === undefined) {
        s.servers.forEach((srv, k) => {
          if (srv.capacity === undefined) ctx.addIssue({ code: 'custom', path: ['services', i, 'servers', k, 'capacity'], message: 'the capacity method needs a capacity on every server (or configure control.agents to estimate it, or choose method: byrequests)' });
        });
      }
      if (s.synproxy !== undefined && !isOff(s.synproxy) && canReset(cfg, s)) {
        ctx.addIssue({
          code: 'custom',
          path: ['services', i, 'synproxy'],
          message: 'synproxy cannot be combined with a checkpoint that resets (reject: rst) on this service: the SYN decided behind SYN cookies is the kernel\'s own, after the client\'s handshake, and a reset cannot reach the client; set synproxy: false, or reject: drop',
        });
      }
      if (names.has(s.name)) ctx.addIssue({ code: 'custom', path: ['services', i, 'name'], message: `service name "${s.name}" is used twice` });
      names.add(s.name);
      const ep = `${s.vip}:${String(s.port)}/${s.protocol}`;
      if (endpoints.has(ep)) ctx.addIssue({ code: 'custom', path: ['services', i], message: `${ep} is configured twice` });
      endpoints.add(ep);
    });
  });

/**
 * A service is of one family: its VIP and its servers (DNAT does not
 * translate between families, and the mark's rule lives in the VIP's
 * family's table). An IPv6 service overflows to the other clusters' IPv6
 * VIPs, SNATed to uplinkAddress6. SYN cookies work in both families (each
 * table has its own SYNPROXY part; for IPv6 the cookie itself is
 * ip6tables' SYNPROXY target, as nft's synproxy checks an IPv6 packet's
 * checksum as IPv4 on our kernels: synproxy-groups.ts). The kernel SYN
 * path too: each table has the schedule map and chains of its own
 * family's services (nft.ts).
 */
function checkFamilies(cfg: Pick<z.output<typeof frontConfigSchema>, 'services' | 'overflow' | 'uplinkAddress6'>, ctx: z.RefinementCtx): void {
  const v6 = cfg.services.some((s) => familyOf(s.vip) === 6);
  cfg.services.forEach((s, i) => {
    const fam = familyOf(s.vip);
    const src = s.health.source;
    if (src !== undefined && familyOf(src) !== fam) {
      ctx.addIssue({ code: 'custom', path: ['services', i, 'health', 'source'], message: `health.source ${src} is IPv${String(familyOf(src))} but the service's VIP ${s.vip} is IPv${String(fam)}: the checks go to its IPv${String(fam)} servers; give an IPv${String(fam)} address of this node, or remove it to let the kernel choose` });
    }
    s.servers.forEach((srv, k) => {
      if (familyOf(srv.address) !== fam) {
        ctx.addIssue({
          code: 'custom',
          path: ['services', i, 'servers', k, 'address'],
          message: `server ${srv.name} is IPv${String(familyOf(srv.address))} but the VIP ${s.vip} is IPv${String(fam)}: a service is of one family (DNAT does not translate between them); give the server its IPv${String(fam)} address, or make a second service with an IPv${String(familyOf(srv.address))} VIP for it`,
        });
      }
    });
  });
  if (!v6 || cfg.overflow.length === 0) return;
  cfg.overflow.forEach((o, i) => {
    if (o.vip6 === undefined) ctx.addIssue({ code: 'custom', path: ['overflow', i, 'vip6'], message: `an IPv6 service overflows to cluster ${o.cluster} on its IPv6 VIP: add overflow[${String(i)}].vip6` });
  });
  if (cfg.uplinkAddress6 === undefined) ctx.addIssue({ code: 'custom', path: ['uplinkAddress6'], message: 'an IPv6 service can overflow: set uplinkAddress6 (this node\'s IPv6 address toward the other clusters; overflowed connections are SNATed to it)' });
}

/** Whether an explicit `synproxy` value turns cookies off. */
function isOff(v: NonNullable<ServiceConfig['synproxy']>): boolean {
  return v === false || (typeof v === 'object' && v.mode === 'off');
}

/**
 * The SYN cookies of service `svc` of `cfg`, or undefined when its SYNs
 * always go straight to the decision: UDP, `synproxy: false` or mode off,
 * or left unset on a service where a checkpoint can reset (the default
 * steps aside; an explicit `synproxy` there is refused by the schema).
 * Absent or `auto`: mode auto; `true`, or an object without `mode`: on.
 */
export function synproxyOf(cfg: Pick<FrontConfig, 'checkpoints'>, svc: Pick<ServiceConfig, 'vip' | 'protocol' | 'synproxy' | 'checkpoints' | 'servers'>): SynproxyPlan | undefined {
  const v = svc.synproxy;
  // Either family: each table has its own SYNPROXY part (nft.ts).
  if (svc.protocol !== 'tcp' || v === false) return undefined;
  const auto = { mode: 'auto', above: SYNPROXY_ABOVE, calmSeconds: SYNPROXY_CALM_SECONDS } as const;
  if (v === undefined) return canReset(cfg, svc) ? undefined : { ...SYNPROXY_DEFAULTS, ...auto };
  if (v === 'auto') return { ...SYNPROXY_DEFAULTS, ...auto };
  if (v === true) return { ...SYNPROXY_DEFAULTS, ...auto, mode: 'on' };
  const { mode = 'on', above = SYNPROXY_ABOVE, calmSeconds = SYNPROXY_CALM_SECONDS, ...options } = v;
  if (mode === 'off') return undefined;
  return { ...options, mode, above, calmSeconds };
}

/**
 * Whether a checkpoint that applies to `svc` (cluster-wide, the service's,
 * its servers') can answer a SYN with a reset: the same test as
 * rules.ts resetsClients, per service. A SYNPROXY service's decided SYN is
 * the kernel's own, sent in OUTPUT after the client's handshake completed:
 * a REJECT there would answer the kernel, not the client (whose connection
 * is already established with the cookie's sequence numbers).
 */
function canReset(cfg: Pick<FrontConfig, 'checkpoints'>, svc: Pick<ServiceConfig, 'checkpoints' | 'servers'>): boolean {
  const all = [...cfg.checkpoints, ...svc.checkpoints, ...svc.servers.flatMap((srv) => srv.checkpoints)];
  return all.some((cp) => cp.reject === 'rst' && (cp.kind !== 'counter' || cp.action === 'reject'));
}

/** The front node's name on the control plane: `node`, else the cluster's name. */
export function frontNodeName(cfg: Pick<FrontConfig, 'cluster' | 'node'>): string {
  return cfg.node ?? cfg.cluster;
}

type CheckedConfig = Pick<z.output<typeof frontConfigSchema>, 'checkpoints' | 'services' | 'overflow' | 'throttle' | 'admission'>;

/**
 * Cross-rule checks: names unique on the front node, counter conditions
 * name an existing rule, steering names an overflow cluster, criterion
 * server only where a server is chosen (server-level lists).
 */
function checkCheckpoints(cfg: CheckedConfig, ctx: z.RefinementCtx): void {
  const all: { cp: CheckpointConfig; path: (string | number)[]; server: boolean; service?: string }[] = [];
  cfg.checkpoints.forEach((cp, i) => all.push({ cp, path: ['checkpoints', i], server: false }));
  cfg.services.forEach((svc, si) => {
    svc.checkpoints.forEach((cp, i) => all.push({ cp, path: ['services', si, 'checkpoints', i], server: false, service: svc.name }));
    svc.servers.forEach((srv, ki) => {
      srv.checkpoints.forEach((cp, i) => all.push({ cp, path: ['services', si, 'servers', ki, 'checkpoints', i], server: true }));
    });
  });
  const names = new Set(all.map((a) => a.cp.name));
  const seen = new Set<string>();
  const clusters = cfg.overflow.map((o) => o.cluster);
  const prefixes = new Map<string, number>();
  const prefixes6 = new Map<string, number>();
  const admissionRules = all.filter((a) => a.cp.kind === 'admission');
  for (const a of admissionRules) {
    if (cfg.admission === undefined) ctx.addIssue({ code: 'custom', path: [...a.path, 'kind'], message: 'an admission checkpoint needs the top-level admission: section (the limits)' });
  }
  if (cfg.admission !== undefined) {
    if (admissionRules.length === 0) ctx.addIssue({ code: 'custom', path: ['admission'], message: 'no checkpoint applies these limits: add { name: admit, kind: admission } to a service\'s (or the cluster\'s) checkpoints' });
    const services = new Set(cfg.services.map((s) => s.name));
    cfg.admission.services.forEach((s, i) => {
      if (!services.has(s.service)) ctx.addIssue({ code: 'custom', path: ['admission', 'services', i, 'service'], message: `no virtual service named "${s.service}" (services[].name)` });
    });
  }
  for (const { cp, path, server, service } of all) {
    if (cp.kind === 'gatekeeper') {
      if (cfg.throttle === undefined) ctx.addIssue({ code: 'custom', path: [...path, 'kind'], message: 'a gatekeeper checkpoint needs the top-level throttle: section (the masters to talk to)' });
      const domain = cp.domain ?? service;
      if (domain === undefined) ctx.addIssue({ code: 'custom', path: [...path, 'domain'], message: 'required outside a service\'s list: name the throttling domain' });
      else {
        const len = cp.criterion === 'source' ? 32 : cp.prefixLength;
        const known = prefixes.get(domain);
        if (known !== undefined && known !== len) ctx.addIssue({ code: 'custom', path: [...path, 'prefixLength'], message: `domain ${domain} is keyed by /${known} in another gatekeeper rule: one identifier per domain` });
        prefixes.set(domain, len);
        // IPv6 clients are keyed by prefixLength6 whatever the criterion (shaping/config.ts).
        const known6 = prefixes6.get(domain);
        if (known6 !== undefined && known6 !== cp.prefixLength6) ctx.addIssue({ code: 'custom', path: [...path, 'prefixLength6'], message: `domain ${domain} keys IPv6 clients by /${String(known6)} in another gatekeeper rule: give every rule of the domain the same prefixLength6` });
        prefixes6.set(domain, cp.prefixLength6);
      }
    }
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
export type HealthConfig = ServiceConfig['health'];
