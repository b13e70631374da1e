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
import { parseSourcePrefix } from '../packet/source_prefixes.ts';
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
    .describe('`rtt`: the nearest usable cluster, weighed with free capacity (`steering.capacityWeight`); `capacity`: drawn in proportion to free capacity; `mapping`: the cluster a global min-cost assignment of client prefixes gave the client\'s prefix, recomputed every `steering.mapping.recomputeSeconds`, with an adaptive TTL (docs/steering.md); prefixes it has not mapped get the `rtt` answer.'),
  ttl: z.int().min(0).max(86400).default(5).describe('TTL (seconds) of steered answers: short, so a client follows load and failures within seconds. Policy `mapping` sets its own per prefix (`steering.mapping.ttlMin`..`ttlMax`) and uses this one for the prefixes it answers as `rtt` does.'),
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

/** A CH TXT identity answer: text of at most 255 octets (one character-string), or false: REFUSED. */
function identityText(key: string) {
  return z.union([
    z.literal(false),
    z
      .string({ error: `${key} is text or false` })
      .min(1, `${key} is text or false (false: REFUSED)`)
      .refine((s) => Buffer.byteLength(s) <= 255, `${key} is at most 255 octets (one TXT string)`),
  ]);
}

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

/** Policy `mapping`'s options (`steering.mapping`); `sluice simulate` scenarios take them too (`mapping`). */
export const mappingOptionsSchema = z
  .strictObject({
    recomputeSeconds: z.number().min(0.5).max(3600).default(5).describe('How often the assignment is recomputed from the latest demand, RTTs and cluster reports.'),
    nearest: z.int().min(1).max(64).default(4).describe('Candidate clusters per prefix: its nearest usable clusters by measured RTT (plus its current one). Demand that fits in none of them is answered as `rtt` does.'),
    rttQuantumMs: z.number().min(0.1).max(1000).default(2).describe('RTTs are rounded to this quantum, and prefixes with the same rounded RTTs to the same candidates and the same current cluster form one map unit of the solve (its error is at most half a quantum of RTT).'),
    movePenaltyMs: z.number().min(0).max(10_000).default(10).describe('Hysteresis: a prefix moves to another cluster only when its RTT gain exceeds this (ms), or when capacity forces it.'),
    headroom: z.number().gt(0).max(1).default(0.95).describe('Share of a cluster\'s capacity the assignment may fill (raised, the same for every cluster, when the demand does not fit in it).'),
    trendSeconds: z.number().min(0).max(3600).default(30).describe('Planning ahead for rising demand: a prefix is assigned for its demand plus how far it stands above its own average over this time constant (an EWMA; on a steady rise that is the demand this far ahead; the assignment takes effect as the resolvers\' caches expire); 0: for its demand now.'),
    ttlMin: z.int().min(0).max(86400).default(5).describe('TTL (seconds) of a prefix whose assignment may move soon: its cluster is near capacity, its RTT is fresh, or it moved recently.'),
    ttlMax: z.int().min(0).max(86400).default(30).describe('TTL (seconds) of a prefix whose assignment has held for `stableSeconds`. Above the TTL of the rest of the answers, a cluster can receive moved prefixes faster than the ones leaving it go (docs/steering.md, "TTL sweep": 60 overloaded a simulated flash crowd, 30 did not).'),
    nearCapacity: z.number().gt(0).max(1).default(0.85).describe('A cluster filled to this share of the capacity the assignment had for it is near capacity: its prefixes get `ttlMin`.'),
    freshRttSeconds: z.number().min(0).max(86400).default(30).describe('A prefix whose newest RTT is younger than this gets `ttlMin` (a new measurement may still move it).'),
    stableSeconds: z.number().min(0).max(86400).default(120).describe('The TTL rises from `ttlMin` to `ttlMax` over this long since the prefix last changed cluster.'),
    maxPrefixes: z.int().min(1).max(1_000_000).default(20_000).describe('Prefixes in the assignment at most: those with the highest demand; the rest are answered as `rtt` does. A recompute runs on the DNS server\'s event loop (about 10-20 µs per prefix here, docs/steering.md), so this bounds how long queries wait for it.'),
    demandHalfLifeSeconds: z.number().min(1).max(86400).default(60).describe('Half-life of the smoothing of per-prefix query rates (the demand estimate), and of the fall of the reported load those rates are scaled to (it rises at once).'),
  })
  .prefault({})
  .refine((m) => m.ttlMin <= m.ttlMax, { message: 'ttlMin must not exceed ttlMax', path: ['ttlMin'] });

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
          file: z.string().min(1).describe('An RFC 1035 zone file (`$INCLUDE` relative to it; record types in docs/operations.md, "Zone files"). Read at start and on every reload; a file with any error is refused, every error named (`sluice check-zone FILE` lists them).'),
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
        ipv4Prefix: z.int().min(8).max(32).default(24).describe('IPv4 client prefix length: the unit of RTTs, stickiness, high-rate clients and the ECS scope of steered answers.'),
        ipv6Prefix: z.int().min(16).max(128).default(56).describe('IPv6 client prefix length, the same for IPv6 clients.'),
        rttExpireSeconds: z.number().min(1).max(86400 * 7).default(600).describe('A measured RTT (per client prefix and cluster) is forgotten after this long.'),
        maxPrefixes: z.int().min(16).max(10_000_000).default(100_000).describe('Client prefixes kept at most in each of the RTT, high-rate and sticky tables; beyond it the oldest entry is evicted.'),
        highRateExpireSeconds: z.number().min(1).max(86400).default(180).describe('A high-rate client is treated as such this long after the last front-node report naming it.'),
        stickySeconds: z.number().min(1).max(86400).default(300).describe('How long after its last answer a `sticky` name keeps a client on its cluster.'),
        mapping: mappingOptionsSchema
          .describe('Policy `mapping`: the global assignment of client prefixes to clusters (docs/steering.md).'),
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
    identity: z
      .strictObject({
        id: identityText('identity.id')
          .optional()
          .describe('Answer to `dig CH TXT id.server` (RFC 4892). Default: this host\'s name (gethostname), as NSD\'s `identity`. `false`: REFUSED, as NSD\'s `hide-identity: yes`.'),
        hostname: identityText('identity.hostname')
          .optional()
          .describe('Answer to `dig CH TXT hostname.bind`. Default: this host\'s name (gethostname), as NSD (which answers its `identity` here too). `false`: REFUSED.'),
        version: identityText('identity.version')
          .optional()
          .describe('Answer to `dig CH TXT version.bind` and `version.server`. Default: `sluice <version>`, as NSD\'s `version` defaults to its package version. `false`: REFUSED, as NSD\'s `hide-version: yes`.'),
      })
      .prefault({})
      .describe('Server identity in class CH (TXT, TTL 0). Any other CH query is REFUSED. Queries and answers are counted in `sluice_dns_identity_queries_total`.'),
    workers: z
      .int()
      .min(0)
      .max(256)
      .default(1)
      .describe('Server processes sharing the listen addresses (SO_REUSEPORT); 0: one per CPU (os.availableParallelism()). With more than one, a primary process holds the control plane, admin socket and ops HTTP and forwards state to the workers; a worker that dies is replaced. With rrl.enabled the kernel steers each client prefix to one worker (so its limit holds); otherwise by a hash of address and port. A change needs a restart.'),
    udpIo: z
      .enum(['batch', 'dgram'], { error: 'udpIo is batch or dgram' })
      .default('batch')
      .describe('How UDP queries are read and answered: `batch` reads up to 64 datagrams with one recvmmsg, answers them in one call into JavaScript and sends the answers with one sendmmsg (the addon, native/src/udp_batch.c); `dgram` uses Node\'s dgram socket, one event and one send per datagram (a fallback: the same answers at about twice the CPU per query, README "DNS"). A change needs a restart.'),
    udpPayload: z.int().min(512).max(4096).default(1232).describe('Our EDNS UDP payload size: RFC 9715 / DNS flag day 2020 advise 1232 (no IP fragmentation).'),
    rrl: z
      .strictObject({
        enabled: z.boolean().default(true).describe('Limit UDP responses (TCP is never limited).'),
        responsesPerSecond: z
          .number()
          .min(0)
          .max(1_000_000)
          .default(200)
          .describe(
            'Identical responses per second to one client prefix: the same name and type (a NODATA answer: the same name; a wildcard answer: the same zone and type; a referral: the same delegation). 0 = no limit. Default 200, NSD\'s `rrl-ratelimit`; BIND\'s `responses-per-second` has no limit unless set.',
          ),
        nxdomainsPerSecond: z.number().min(0).max(1_000_000).optional().describe('NXDOMAIN responses per second for names of one zone to one client prefix (BIND\'s `nxdomains-per-second`); unset = `responsesPerSecond`, as in BIND. 0 = no limit.'),
        errorsPerSecond: z.number().min(0).max(1_000_000).optional().describe('Error responses (REFUSED, FORMERR, NOTIMP, SERVFAIL, BADVERS) per second to one client prefix, whatever the name (BIND\'s `errors-per-second`); unset = `responsesPerSecond`, as in BIND. 0 = no limit.'),
        slip: z.int().min(0).max(10).default(2).describe('Every slip-th limited response is sent truncated (TC, no records) instead of dropped, so a real client retries over TCP; 0 drops all. Default 2, as in BIND and NSD.'),
        window: z.int().min(1).max(3600).default(15).describe('Seconds over which a prefix\'s excess is remembered: a flood that stops must stay quiet up to this long before that response flows again (BIND\'s `window`, default 15).'),
        ipv4PrefixLength: z.int().min(8).max(32).default(24).describe('IPv4 client prefix length responses are counted per (BIND\'s `ipv4-prefix-length` and NSD\'s `rrl-ipv4-prefix-length`, both 24).'),
        ipv6PrefixLength: z.int().min(16).max(128).default(56).describe('IPv6 client prefix length (BIND\'s `ipv6-prefix-length`, 56; NSD\'s `rrl-ipv6-prefix-length` is 64).'),
        exempt: z
          .array(z.string().refine((s) => parseSourcePrefix(s) !== undefined, 'expected a prefix like 198.18.0.0/15 or 2001:2::/48 (the length always given)'))
          .max(256)
          .default([])
          .describe('Client prefixes never limited, e.g. your own resolvers and monitoring (BIND\'s `exempt-clients`).'),
        logOnly: z.boolean().default(false).describe('Count what would be limited (`sluice_dns_rrl_would_limit_total`) but send every response (BIND\'s `log-only`; nothing is logged per response: the answer path never logs).'),
        maxEntries: z
          .int()
          .min(16)
          .max(10_000_000)
          .default(100_000)
          .describe('Responses tracked at most (prefix × response identity), in a fixed table of ~28 octets a slot; beyond it the least recently used entry of its set is replaced. BIND\'s `max-table-size` defaults to 20000, NSD\'s `rrl-size` to 1000000.'),
      })
      .prefault({})
      .describe('Response rate limiting by response, as BIND counts it (docs/operations.md); defaults as BIND and NSD document theirs.'),
    transfer: z
      .strictObject({
        allow: z
          .array(z.string().refine((s) => parseSourcePrefix(s) !== undefined, 'expected a prefix like 198.18.3.0/24 or 198.18.3.7/32 (the length always given)'))
          .max(256)
          .default([])
          .describe('Client prefixes allowed to transfer the zones (AXFR, and IXFR answered with the whole zone) over TCP without TSIG; anyone else is REFUSED.'),
        keys: z
          .array(
            z.strictObject({
              name: domain.describe('The key\'s name, as the secondary names it (e.g. xfr.example.test).'),
              algorithm: z.literal('hmac-sha256', { error: 'the TSIG algorithm is hmac-sha256' }).default('hmac-sha256').describe('RFC 8945 algorithm: hmac-sha256.'),
              secret: z
                .string()
                .regex(/^[A-Za-z0-9+/]+={0,2}$/, 'the secret is base64, as tsig-keygen and nsd.conf write it')
                .refine((s) => Buffer.from(s, 'base64').length >= 16, 'a secret of at least 16 octets (tsig-keygen makes 32)')
                .describe('The shared secret, base64.'),
            }),
          )
          .max(64)
          .default([])
          .superRefine((keys, ctx) => {
            const seen = new Set<string>();
            keys.forEach((k, i) => {
              if (seen.has(k.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `TSIG key "${k.name}" is configured twice` });
              seen.add(k.name);
            });
          })
          .describe('TSIG keys (RFC 8945): a transfer request signed with one of them is allowed from any address, and its answer signed.'),
        notify: z
          .array(z.string().regex(/^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\])(:\d{1,5})?$/, 'expected ADDRESS or ADDRESS:PORT, IPv6 in brackets ([2001:db8::3]:53)'))
          .max(64)
          .default([])
          .describe('Secondaries sent a NOTIFY (RFC 1996) for a zone whose SOA serial a reload changed: ADDRESS[:PORT], port 53 by default.'),
        notifyRetries: z.int().min(0).max(20).default(5).describe('A NOTIFY not answered is sent again this many times.'),
        notifyRetrySeconds: z.number().min(0.1).max(600).default(5).describe('Seconds between NOTIFY attempts to one secondary.'),
      })
      .prefault({})
      .describe('Zone transfers to secondaries (docs/operations.md, "Secondaries"): who may transfer, and whom to NOTIFY. Steered names are transferred with their fallback answer.'),
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
