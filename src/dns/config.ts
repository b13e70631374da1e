/**
 * `sluice dns --config FILE`: the site's authoritative server. One schema,
 * validated once, defaults filled, frozen (src/config/load.ts).
 *
 *   name: dns1
 *   listen: ["198.18.2.2:53", "[fd00::2]:53"]    # UDP and TCP on each
 *   zones: [{ file: /etc/sluice/example.test.zone }]
 *   clusters: [{ name: c1, vips: [198.19.1.1, "2001:db8:1::1"] }, ...]
 *   steering: { names: [{ name: www.example.test, policy: rtt, ttl: 5 }] }
 *   control: { keyFile, publish: {listen, allow}, subscribe: [front PUBs] }
 *
 * Each key's `.describe()` text is its entry in docs/configuration.md
 * (npm run docs:config regenerates it).
 *   http: { listen: 127.0.0.1:9101 }             # GET /metrics, /status
 */
import { isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';
import { controlBaseSchema, keyRef, peerSchema, requireKeys, zmqEndpoint } from '../control/config.ts';
import { httpSchema } from '../http/config.ts';
import { POLICY_NAMES } from './policy/index.ts';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
/**
 * An address answered for a steered name, either family: A answers hold
 * the IPv4 ones, AAAA answers the IPv6 ones. IPv6 text is normalised to
 * RFC 5952 (what the answers are encoded from, and what `sluice status`
 * shows); an IPv4-mapped IPv6 address is refused (it would be answered as
 * AAAA for what is an IPv4 VIP), and so is a zone index.
 */
const vipAddress = z
  .string({ error: 'expected an IPv4 or IPv6 address like 198.19.1.1 or 2001:db8:1::1' })
  .superRefine((s, ctx) => {
    if (isIPv4(s)) return;
    if (s.includes('%') || !isIPv6(s)) ctx.addIssue({ code: 'custom', message: `"${s}" is not an IPv4 or IPv6 address: write e.g. 198.19.1.1 or 2001:db8:1::1 (IPv6 without brackets or zone index)` });
    else if (/^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(canonicalIPv6(s))) {
      const [hi = 0, lo = 0] = canonicalIPv6(s).slice(7).split(':').map((g) => parseInt(g, 16));
      ctx.addIssue({ code: 'custom', message: `"${s}" is an IPv4-mapped IPv6 address: write the IPv4 address itself (${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff})` });
    }
  })
  .transform((s) => (isIPv4(s) ? s : canonicalIPv6(s)));

/** RFC 5952 text without a dotted quad (the WHATWG URL serializer's), the form the zone parser also holds. */
function canonicalIPv6(s: string): string {
  return new URL(`http://[${s}]`).hostname.slice(1, -1);
}

/** A list of VIPs, each address once (after normalisation: 2001:db8::1 and 2001:DB8:0::1 are the same VIP). */
function vipList(what: string) {
  return z
    .array(vipAddress)
    .max(32)
    .superRefine((list, ctx) => {
      const seen = new Set<string>();
      list.forEach((a, i) => {
        if (seen.has(a)) ctx.addIssue({ code: 'custom', path: [i], message: `${a} is listed twice in ${what}: list each address once` });
        seen.add(a);
      });
    });
}
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
  name: domain.describe('The steered name (types A and AAAA), e.g. www.example.test: inside one of the zones served; unique. Matched after lowercasing and removing a final dot.'),
  policy: z
    .enum(POLICY_NAMES, { error: `policy is one of ${POLICY_NAMES.join(', ')}` })
    .default('rtt')
    .describe('`rtt`: the nearest usable cluster, weighed with free capacity (`steering.capacityWeight`); `capacity`: drawn in proportion to free capacity.'),
  ttl: z.int().min(0).max(86400).default(5).describe('TTL (seconds) of steered answers: short, so a client follows load and failures within seconds.'),
  answers: z.int().min(1).max(16).default(1).describe('How many clusters\' VIPs an answer holds (in order of preference).'),
  sticky: z.boolean().default(false).describe('A client keeps its cluster while that cluster stays usable (up, with free capacity), for up to `steering.stickySeconds` after its last answer.'),
  fallback: z
    .strictObject({
      mode: z
        .enum(['all', 'sorry', 'servfail'], { error: 'fallback.mode is all, sorry or servfail' })
        .default('all')
        .describe('`all` answers every configured VIP (better a loaded site than none), `sorry` the `addresses` given (a maintenance page), `servfail` fails the query.'),
      addresses: vipList('fallback.addresses')
        .default([])
        .describe('The sorry server\'s addresses, IPv4 and IPv6 in one list (A answers get the IPv4 ones, AAAA the IPv6 ones); at least one when `mode` is `sorry`.'),
    })
    .prefault({})
    .superRefine((f, ctx) => {
      if (f.mode === 'sorry' && f.addresses.length === 0) ctx.addIssue({ code: 'custom', path: ['addresses'], message: 'fallback.mode sorry needs at least one address (the sorry server)' });
    })
    .describe('What to answer when no cluster is usable (all down or full).'),
});

const control = controlBaseSchema.extend({
  publish: z
    .strictObject({
      listen: zmqEndpoint.describe('Endpoint of our PUB socket (the testbed uses port 7300).'),
      allow: z.array(keyRef).default([]).describe('The front nodes\' public keys: z85 keys, .pub files, or directories of .pub files.'),
    })
    .optional()
    .describe('Our PUB socket (ZAP domain `fronts`): `rtt_probe_request` to the front nodes, which subscribe to it.'),
  subscribe: z.array(peerSchema).default([]).describe('The front nodes\' PUB sockets (their `control.publish.listen`): `cluster_load`, `high_rate_clients`, `rtt_results`.'),
});

export const dnsConfigSchema = z
  .strictObject({
    name: name.describe('Our name on the control plane and in logs.'),
    listen: z
      .array(listenAddress)
      .min(1, 'listen on at least one ADDRESS:PORT')
      .max(16)
      .describe('Addresses served, UDP and TCP on each: ADDRESS:PORT, IPv6 in brackets ("198.18.2.2:53", "[2001:db8::2]:53").'),
    zones: z
      .array(
        z.strictObject({
          file: z.string().min(1).describe('An RFC 1035 zone file ($INCLUDE is refused). Read at start and on every reload.'),
          origin: domain.optional().describe('The zone\'s origin (matched after lowercasing and removing a final dot); without it, the file\'s first $ORIGIN.'),
        }),
      )
      .min(1, 'serve at least one zone (an RFC 1035 zone file)')
      .max(64)
      .describe('The zones served with authority; queries outside them are REFUSED.'),
    clusters: z
      .array(
        z.strictObject({
          name: name.describe('The cluster\'s name: its front node\'s `cluster` (its `cluster_load` reports carry it); unique.'),
          vips: vipList('a cluster\'s vips')
            .min(1, 'a cluster needs at least one VIP: vips: [198.19.1.1] (IPv4 and IPv6 in one list)')
            .describe(
              'The VIPs answered for this cluster, IPv4 and IPv6 in one list (e.g. `[198.19.1.1, "2001:db8:1::1"]`; quote IPv6 addresses in YAML flow lists for clarity): A answers hold its IPv4 VIPs, AAAA answers its IPv6 VIPs, both from one decision per client prefix. A cluster without VIPs of a family is passed over for that family: AAAA goes to the most preferred usable cluster that has IPv6 VIPs (docs/operations.md, "IPv6 answers").',
            ),
        }),
      )
      .max(64)
      .default([])
      .describe('The clusters steered names choose among. Required (at least one) when `steering.names` is not empty.'),
    steering: z
      .strictObject({
        names: z.array(steeredName).max(256).default([]).describe('The steered names; every other name is answered from the zone files.'),
        capacityWeight: z.number().min(0).max(100).default(1).describe('Policy `rtt`: cost = rtt × (1 + capacityWeight × (1 − free share)); 0 = RTT only.'),
        reportSeconds: z.number().min(0.5).max(3600).default(5).describe('Expected seconds between a front node\'s `cluster_load` reports (its `control.clusterLoad.everySeconds`).'),
        downAfterIntervals: z.int().min(1).max(100).default(3).describe('A cluster whose reports stop for this many intervals is down.'),
        ipv4Prefix: z.int().min(8).max(32).default(24).describe('IPv4 client prefix length: the unit of RTTs, stickiness, high-rate clients, response rate limiting and the ECS scope of steered answers.'),
        ipv6Prefix: z.int().min(16).max(128).default(56).describe('IPv6 client prefix length, the same for IPv6 clients.'),
        rttExpireSeconds: z.number().min(1).max(86400 * 7).default(600).describe('A measured RTT (per client prefix and cluster) is forgotten after this long.'),
        maxPrefixes: z.int().min(16).max(10_000_000).default(100_000).describe('Client prefixes kept at most in each of the RTT, high-rate and sticky tables; beyond it the oldest entry is evicted.'),
        highRateExpireSeconds: z.number().min(1).max(86400).default(180).describe('A high-rate client is treated as such this long after the last front-node report naming it.'),
        stickySeconds: z.number().min(1).max(86400).default(300).describe('How long after its last answer a `sticky` name keeps a client on its cluster.'),
        recentClients: z.int().min(0).max(10_000).default(200).describe('Answers kept for `sluice status --dns` (the latest per client prefix).'),
      })
      .prefault({})
      .describe('Steered names and how clusters are chosen.'),
    probe: z
      .strictObject({
        count: z.int().min(1).max(16).default(3).describe('Echo requests per target asked of each front node.'),
        intervalSeconds: z.number().min(0.1).max(3600).default(1).describe('How often pending probe requests are sent.'),
        maxTargetsPerSecond: z.number().min(1).max(10_000).default(100).describe('Probe targets requested per second at most.'),
        maxPending: z.int().min(1).max(1_000_000).default(10_000).describe('Targets waiting to be requested at most; the excess is dropped (counted) and asked for on a later query.'),
        retrySeconds: z.number().min(1).max(86400).default(60).describe('A prefix is asked for again at most this often.'),
      })
      .prefault({})
      .describe('RTT probe requests: a query from a client prefix without a current RTT to some usable cluster asks the front nodes to ping it.'),
    workers: z
      .int()
      .min(0)
      .max(256)
      .default(1)
      .describe('Server processes sharing the listen addresses (SO_REUSEPORT); 0: one per CPU (os.availableParallelism()). With more than one, a primary process holds the control plane, admin socket and ops HTTP and forwards state to the workers; a worker that dies is replaced. With rrl.enabled the kernel steers each client prefix to one worker (so its limit holds); otherwise by a hash of address and port. A change needs a restart.'),
    udpPayload: z.int().min(512).max(4096).default(1232).describe('Our EDNS UDP payload size: RFC 9715 / DNS flag day 2020 advise 1232 (no IP fragmentation).'),
    rrl: z
      .strictObject({
        enabled: z.boolean().default(true).describe('Limit UDP responses per client prefix.'),
        responsesPerSecond: z.number().min(1).max(1_000_000).default(100).describe('Per client prefix (`steering.ipv4Prefix` / `ipv6Prefix`), UDP only.'),
        slip: z.int().min(0).max(10).default(2).describe('Every slip-th limited response is sent truncated (TC) instead of dropped; 0 drops all.'),
        maxEntries: z.int().min(16).max(10_000_000).default(100_000).describe('Client prefixes tracked at most; beyond it the oldest entry is dropped.'),
      })
      .prefault({})
      .describe('Response rate limiting (like BIND\'s); TCP is never limited.'),
    tcp: z
      .strictObject({
        maxConnections: z.int().min(1).max(100_000).default(256).describe('Concurrent TCP connections at most; more are refused (counted).'),
        idleSeconds: z.number().min(1).max(3600).default(10).describe('A TCP client silent this long is disconnected (RFC 7766 §6.2.3 suggests seconds).'),
      })
      .prefault({})
      .describe('DNS over TCP (RFC 7766 framing, several queries per connection).'),
    adminSocket: z
      .string()
      .startsWith('/', 'adminSocket must be an absolute path')
      .default('/run/sluice/dns.sock')
      .describe('Unix socket (mode 0600) for `sluice status --dns`.'),
    http: httpSchema.optional().describe('Read-only ops HTTP server: GET /metrics (Prometheus text) and GET /status (the admin socket\'s status as JSON). Absent: none. A change needs a restart.'),
    control: control.optional().describe('The control plane. Without it no `cluster_load` report arrives: every cluster stays down and steered names get their fallback.'),
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
