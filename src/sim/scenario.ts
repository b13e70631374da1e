/**
 * The scenario of `sluice simulate`: clusters, client prefixes, demand and
 * events, in YAML (or JSON), validated once against one schema with
 * defaults and frozen, through the configs' loader (src/config/load.ts), so
 * a malformed scenario is refused with the key named and the fix, like a
 * configuration.
 *
 * Geography is simplified to what steering sees: a cluster or a client
 * map unit has a place (latitude, longitude); the RTT between them is
 *   rtt = baseMs + great-circle km × msPerKm + the unit's access delay
 * (or given outright, `units[].rttMs`, for small hand-made cases).
 */
import { z } from 'zod';
import { loadConfig, parseConfig } from '../config/load.ts';
import { mappingOptionsSchema } from '../dns/config.ts';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
const seconds = z.number({ error: 'expected seconds (a number)' }).min(0);

export const SIM_POLICIES = ['round-robin', 'nearest', 'rtt', 'capacity', 'mapping'] as const;
export type SimPolicyName = (typeof SIM_POLICIES)[number];

const region = z.strictObject({
  name: name.describe('The region\'s name (events and cluster groups refer to it).'),
  lat: z.number().min(-90).max(90).describe('Centre latitude, degrees.'),
  lon: z.number().min(-180).max(180).describe('Centre longitude, degrees.'),
  radiusKm: z.number().min(0).max(5000).default(800).describe('Clusters and map units of the region are placed uniformly within this distance of the centre.'),
  share: z.number().min(0).default(1).describe('The region\'s share of the peak demand (shares are normalised over the regions).'),
  utcOffsetHours: z.number().min(-12).max(14).default(0).describe('Local time of the region: the daily curve peaks at `demand.peakHour` local time.'),
});

const clusterGroup = z.strictObject({
  name: name.describe('The cluster\'s name, or with `count` > 1 the prefix of the names (NAME-01, NAME-02, ...).'),
  count: z.int().min(1).max(1000).default(1).describe('How many clusters this entry stands for.'),
  region: name.optional().describe('Placed at random within this region (one of `regions[].name`).'),
  lat: z.number().min(-90).max(90).optional().describe('Placed here instead (with `lon`).'),
  lon: z.number().min(-180).max(180).optional(),
  capacity: z.number({ error: 'expected a capacity (new connections/s)' }).positive({ error: 'capacity must be > 0 (new connections/s); to take a cluster away use a cluster-lost or capacity event' }).describe('New connections per second the cluster can take (what its front node reports).'),
});

const explicitUnit = z.strictObject({
  prefixes: z.int().min(1).max(10_000_000).describe('Client prefixes in this map unit (they share its RTT row and demand curve).'),
  region: name.describe('The region whose daily curve and events apply (one of `regions[].name`).'),
  weight: z.number().min(0).default(1).describe('The unit\'s share of its region\'s demand, relative to the region\'s other units.'),
  rttMs: z.array(z.number().positive()).min(1).describe('RTT (ms) to each cluster, in the order the clusters are listed (expanded).'),
});

const event = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('cluster-lost'),
      at: seconds.describe('When (seconds from the start).'),
      cluster: name.describe('The cluster lost: it serves nothing and stops reporting.'),
    }),
    z.strictObject({
      type: z.literal('capacity'),
      at: seconds,
      cluster: name,
      factor: z.number().min(0).max(100).describe('The cluster\'s capacity is multiplied by this (0.5: halved).'),
    }),
    z.strictObject({
      type: z.literal('flash-crowd'),
      at: seconds,
      until: seconds.describe('When the crowd is gone.'),
      region: name,
      factor: z.number().min(0).max(1000).describe('The region\'s demand is multiplied by this between `at` and `until`.'),
      rampSeconds: seconds.default(300).describe('Linear ramp up after `at` and down before `until`.'),
    }),
    z.strictObject({
      type: z.literal('report-delay'),
      at: seconds,
      seconds: seconds.describe('The front nodes\' reports arrive this late from `at` on.'),
    }),
  ],
  { error: 'event type is cluster-lost, capacity, flash-crowd or report-delay' },
);

export const scenarioSchema = z
  .strictObject({
    name: z.string().min(1).max(100).describe('Shown in the report.'),
    seed: z.int().min(0).max(2 ** 31 - 1).default(1).describe('Seed of every random choice (placement, unit sizes, resolver phases); `--seed` overrides it.'),
    durationSeconds: z.number().min(60).max(7 * 86400).default(86400).describe('Simulated time.'),
    stepSeconds: z.number().min(1).max(600).default(20).describe('The simulation step: demand is fluid within a step; reports are delivered and resolvers re-query once per step.'),
    reportSeconds: z.number().min(0.5).max(600).default(2).describe('The front nodes\' cluster_load interval (with `downAfterIntervals`, how soon a silent cluster is down).'),
    downAfterIntervals: z.int().min(1).max(100).default(3).describe('A cluster silent this many report intervals is down (the DNS server\'s rule).'),
    reportDelaySeconds: seconds.default(2).describe('How old the load in a report is when the DNS server applies it (rounded up to whole steps).'),
    ttlSeconds: z.number().min(1).max(86400).default(30).describe('TTL of the steered answers; resolvers re-query at expiry.'),
    capacityWeight: z.number().min(0).max(100).default(1).describe('Policy `rtt`: its `steering.capacityWeight`.'),
    oracleEverySeconds: z.number().min(1).max(86400).default(600).describe('How often the exact oracle assignment is computed.'),
    steadySettleSeconds: seconds.default(900).describe('After an event (and after the start), the time excluded from "steady state" (stability metric).'),
    drawClasses: z.int().min(1).max(64).default(4).describe('Per map unit, how many distinct prefixes the DNS pipeline is asked about (hash-drawn policies spread a unit over them).'),
    mappingClasses: z.int().min(1).max(64).default(8).describe('Policy `mapping`: each map unit enters the assignment as this many prefixes of equal demand (a unit\'s prefix i in class i mod mappingClasses), so the assignment can split a unit between clusters as it splits a map unit of the daemon between its member prefixes.'),
    mapping: mappingOptionsSchema.describe('Policy `mapping`: its options, as `steering.mapping` of the DNS server\'s configuration (docs/configuration.md); the daemon\'s defaults apply.'),
    mappingTtl: z
      .enum(['adaptive', 'fixed'], { error: 'mappingTtl is adaptive or fixed' })
      .default('adaptive')
      .describe('Policy `mapping`: `adaptive`: each answer carries the TTL the assignment gave its prefix (`mapping.ttlMin`..`ttlMax`) and the resolvers cache it that long; `fixed`: every answer has `ttlSeconds`, as for the other policies. Answers the policy falls back on (`rtt`) have `ttlSeconds` either way.'),
    phaseBins: z.int().min(1).max(1024).default(32).describe('Resolver TTL phases are rounded to this many bins per TTL: a unit\'s prefixes in one bin (and draw class) re-query together, as one cohort.'),
    steer: z
      .enum(['policy', 'pipeline'], { error: 'steer is policy or pipeline' })
      .default('policy')
      .describe('`pipeline`: the rtt and capacity policies answer through the DNS server\'s whole pipeline (Steering.decide, ~15 µs a decision); `policy`: through the policy\'s rank() with the candidates built once per step from the same ClusterTable (same answers, for large scenarios).'),
    policies: z.array(z.enum(SIM_POLICIES, { error: `policies are ${SIM_POLICIES.join(', ')}` })).min(1).default(['round-robin', 'nearest', 'rtt', 'capacity', 'mapping']).describe('The policies run, each on the same demand and seed.'),
    network: z
      .strictObject({
        baseMs: z.number().min(0).default(4).describe('RTT at zero distance.'),
        msPerKm: z.number().min(0).default(0.02).describe('RTT per km of great-circle distance (fibre and path inflation, round trip).'),
        accessMsMax: z.number().min(0).default(20).describe('Each map unit adds an access delay drawn uniformly in [0, accessMsMax].'),
      })
      .prefault({}),
    regions: z.array(region).min(1).max(1000).describe('Where clusters and clients are.'),
    clusters: z.array(clusterGroup).min(1).max(1000).describe('The clusters (entries with `count` stand for several).'),
    prefixes: z
      .strictObject({
        count: z.int().min(1).max(20_000_000).optional().describe('Client prefixes, spread over `units` generated map units in proportion to the regions\' shares.'),
        units: z.int().min(1).max(100_000).optional().describe('Generated map units: places where prefixes share an RTT row and a demand curve.'),
        explicit: z.array(explicitUnit).max(100_000).optional().describe('Map units given outright, instead of `count` and `units`.'),
      })
      .describe('The client prefixes: `count` and `units` (generated), or `explicit`.'),
    demand: z
      .strictObject({
        peak: z.number().positive().describe('Sum over the regions of their peak demand, new connections/s.'),
        peakHour: z.number().min(0).max(24).default(20).describe('Local hour of each region\'s daily peak.'),
        troughRatio: z.number().min(0).max(1).default(0.3).describe('Demand at the daily trough as a share of the peak (cosine between).'),
      })
      .describe('The daily demand curve.'),
    events: z.array(event).max(1000).default([]),
  })
  .superRefine((s, ctx) => {
    const regions = new Set(s.regions.map((r) => r.name));
    const clusterNames = new Set<string>();
    s.clusters.forEach((c, i) => {
      if (c.region !== undefined && !regions.has(c.region)) ctx.addIssue({ code: 'custom', path: ['clusters', i, 'region'], message: `no region "${c.region}": add it to regions or use one of ${[...regions].join(', ')}` });
      if (c.region === undefined && (c.lat === undefined || c.lon === undefined)) ctx.addIssue({ code: 'custom', path: ['clusters', i], message: 'give the cluster a region, or lat and lon' });
      for (const n of expandNames(c.name, c.count)) {
        if (clusterNames.has(n)) ctx.addIssue({ code: 'custom', path: ['clusters', i, 'name'], message: `cluster "${n}" is defined twice` });
        clusterNames.add(n);
      }
    });
    if (clusterNames.size > 250) ctx.addIssue({ code: 'custom', path: ['clusters'], message: `at most 250 clusters (there are ${clusterNames.size})` });
    const p = s.prefixes;
    if (p.explicit === undefined && (p.count === undefined || p.units === undefined)) ctx.addIssue({ code: 'custom', path: ['prefixes'], message: 'give prefixes.count and prefixes.units, or prefixes.explicit' });
    if (p.explicit !== undefined && (p.count !== undefined || p.units !== undefined)) ctx.addIssue({ code: 'custom', path: ['prefixes'], message: 'prefixes.explicit replaces count and units: give one or the other' });
    if (p.count !== undefined && p.units !== undefined && p.units > p.count) ctx.addIssue({ code: 'custom', path: ['prefixes', 'units'], message: `more units (${p.units}) than prefixes (${p.count})` });
    p.explicit?.forEach((u, i) => {
      if (!regions.has(u.region)) ctx.addIssue({ code: 'custom', path: ['prefixes', 'explicit', i, 'region'], message: `no region "${u.region}"` });
      if (u.rttMs.length !== clusterNames.size) ctx.addIssue({ code: 'custom', path: ['prefixes', 'explicit', i, 'rttMs'], message: `one RTT per cluster: ${clusterNames.size} expected, ${u.rttMs.length} given` });
    });
    if (Math.abs(s.oracleEverySeconds / s.stepSeconds - Math.round(s.oracleEverySeconds / s.stepSeconds)) > 1e-9) ctx.addIssue({ code: 'custom', path: ['oracleEverySeconds'], message: `a multiple of stepSeconds (${s.stepSeconds})` });
    if (new Set(s.policies).size !== s.policies.length) ctx.addIssue({ code: 'custom', path: ['policies'], message: 'a policy is listed twice' });
    s.events.forEach((e, i) => {
      if (e.at > s.durationSeconds) ctx.addIssue({ code: 'custom', path: ['events', i, 'at'], message: `after the end (durationSeconds ${s.durationSeconds})` });
      if ((e.type === 'cluster-lost' || e.type === 'capacity') && !clusterNames.has(e.cluster)) ctx.addIssue({ code: 'custom', path: ['events', i, 'cluster'], message: `no cluster "${e.cluster}" (names: ${[...clusterNames].slice(0, 5).join(', ')}...)` });
      if (e.type === 'flash-crowd') {
        if (!regions.has(e.region)) ctx.addIssue({ code: 'custom', path: ['events', i, 'region'], message: `no region "${e.region}"` });
        if (e.until <= e.at) ctx.addIssue({ code: 'custom', path: ['events', i, 'until'], message: 'until must be after at' });
      }
    });
  });

export type Scenario = z.output<typeof scenarioSchema>;

/** The names a cluster entry stands for: NAME alone, or NAME-01.. with count > 1. */
export function expandNames(base: string, count: number): string[] {
  if (count === 1) return [base];
  const width = String(count).length < 2 ? 2 : String(count).length;
  return Array.from({ length: count }, (_, i) => `${base}-${String(i + 1).padStart(width, '0')}`);
}

export function loadScenario(file: string): Readonly<Scenario> {
  return loadConfig(scenarioSchema, file);
}

export function parseScenario(text: string, file = 'scenario'): Readonly<Scenario> {
  return parseConfig(scenarioSchema, text, file);
}
