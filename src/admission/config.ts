/**
 * The front node's `admission:` section (issue 9, seed 002): hierarchical
 * limits in tokens per second for services (the front's virtual services)
 * and their operations (classes of connections within one), local to this
 * front node and cluster-wide across the site's front nodes, and how the
 * members reach each other and elect their coordinator.
 *
 *   admission:
 *     services:
 *       - service: web              # a virtual service of this front node
 *         weight: 1
 *         localLimit: 300           # tokens/s on this front node
 *         clusterLimit: 600         # tokens/s across all members
 *         operations:
 *           - { name: api, weight: 2, when: { destinationPort: [8080] }, clusterLimit: 200 }
 *     cluster:
 *       member: c1
 *       listen: tcp://198.18.101.2:7400
 *       members: [{ name: c1, endpoint: ..., publicKey: ... }, ...]
 *       coordinator: { static: c1 }            # or { etcd: { endpoints: [...] } }
 *
 * Admitting a connection costs service weight x operation weight tokens; a
 * cost of 0 is always admitted. Every member must carry the same limits
 * (the coordinator refuses members whose limits differ: see protocol.ts).
 */
import { z } from 'zod';
import { controlBaseSchema, keyRef, requireKeys, zmqEndpoint } from '../control/config.ts';
import { sourceInList } from '../shaping/config.ts';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
const port = z.int({ error: 'expected a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535');
const limit = z.number({ error: 'expected tokens per second' }).positive('a limit is > 0 tokens per second (leave it out for no limit)').max(1e9);
const weight = z.number({ error: 'expected a weight' }).min(0, 'a weight is >= 0 (0: always admitted)').max(1e6);

export const operationSchema = z.strictObject({
  name: name.describe('The operation\'s name, unique within its service (status, metrics).'),
  weight: weight.default(1).describe('Tokens per admitted connection are service weight x this weight; 0 admits every connection of the operation.'),
  when: z
    .strictObject({
      destinationPort: z.array(port).min(1).max(16, 'at most 16 ports').optional().describe('The connection\'s destination port is one of these.'),
      sourceIn: sourceInList.optional().describe('The client address is in one of these prefixes (a configured client class), IPv4 and IPv6 in one list (198.18.64.0/20, 2001:2:0:40::/60); an IPv4-mapped IPv6 prefix is the IPv4 prefix it maps.'),
    })
    .optional()
    .describe('Which connections belong to this operation: every part given must hold; absent, all. The first operation of the list that matches wins; a connection matching none belongs to the implicit operation `other` (weight 1, no limits of its own).'),
  localLimit: limit.optional().describe('Tokens per second this front node admits for the operation.'),
  clusterLimit: limit.optional().describe('Tokens per second all members together admit for the operation (reserved from the coordinator).'),
});

export const serviceSchema = z
  .strictObject({
    service: name.describe('A virtual service of this front node (`services[].name`).'),
    weight: weight.default(1).describe('Multiplies every operation\'s weight; 0 admits every connection of the service.'),
    localLimit: limit.optional().describe('Tokens per second this front node admits for the whole service, whatever the operations.'),
    clusterLimit: limit.optional().describe('Tokens per second all members together admit for the whole service.'),
    operations: z.array(operationSchema).max(32, 'at most 32 operations per service').default([]).describe('The service\'s operations, matched in order.'),
  })
  .superRefine((s, ctx) => {
    const seen = new Set<string>();
    s.operations.forEach((o, i) => {
      if (o.name === OTHER) ctx.addIssue({ code: 'custom', path: ['operations', i, 'name'], message: `"${OTHER}" is the implicit operation of connections matching none; choose another name` });
      if (seen.has(o.name)) ctx.addIssue({ code: 'custom', path: ['operations', i, 'name'], message: `operation ${o.name} is configured twice in service ${s.service}` });
      seen.add(o.name);
    });
  });

/** The implicit operation of a service's connections that match no configured operation. */
export const OTHER = 'other';

const memberSchema = z.strictObject({
  name: name.describe('The member\'s name (its `cluster.member`).'),
  endpoint: zmqEndpoint.describe('The member\'s `cluster.listen` endpoint.'),
  publicKey: keyRef.optional().describe('The member\'s public key: z85 or a .pub file. Required unless `control.plaintext` is true.'),
});

export const etcdSchema = z.strictObject({
  endpoints: z.array(z.url({ error: 'expected an etcd client URL like http://198.18.2.2:2379' })).min(1).max(9).describe('etcd client URLs.'),
  election: z.string().regex(/^[A-Za-z0-9._/-]{1,64}$/, 'an election name is 1-64 letters, digits, . _ / -').default('sluice-admission').describe('The election\'s name (one per site).'),
  leaseTtlSeconds: z.int().min(3, 'at least 3 s (the lease granted is 1 s shorter, and etcd keeps leases at least ~1.5 s)').max(60).default(5).describe('A dead coordinator is replaced within this time: each campaign\'s etcd lease is granted 1 s shorter, because etcd revokes expired leases on a 500 ms loop and the next campaigner learns of it by a watch.'),
});

const coordinatorSchema = z.union(
  [
    z.strictObject({ static: name.describe('The member that coordinates (no election: when it is down, members fall back to their share).') }),
    z.strictObject({ etcd: etcdSchema.describe('Elect the coordinator among the members with etcd leases.') }),
  ],
  { error: 'coordinator is { static: MEMBER } or { etcd: { endpoints: [...] } }' },
);

export const clusterSchema = z
  .strictObject({
    member: name.describe('This front node\'s member name (one of `members`).'),
    listen: zmqEndpoint.describe('Where this member receives admission messages (coordinator requests and replies).'),
    control: controlBaseSchema.describe('Key pair and receive limits of the admission sockets (CURVE: every member is a client of every other).'),
    members: z
      .array(memberSchema)
      .min(1)
      .max(64, 'at most 64 members')
      .describe('Every member of the site, this one included, the same list on each: a member\'s share when it cannot reach a coordinator is the cluster limit divided by their number.'),
    coordinator: coordinatorSchema.describe('How the coordinator is chosen.'),
    reserveChunkPercent: z.number().positive().max(100).default(1).describe('A reservation asks at least this percentage of the cluster limit (more if the estimated need is larger).'),
    releaseChunkPercent: z.number().positive().max(100).default(5).describe('Unneeded rate is released once a second, at most this percentage of the cluster limit at a time.'),
    headroomPercent: z.number().min(0).max(100).default(10).describe('Rate kept above the running average before any is released, and asked above it when reserving.'),
    estimatorSeconds: z.number().min(0.1).max(60).default(2).describe('Time constant of the running average of each operation\'s demand (tokens per second asked, admitted or not).'),
    silenceSeconds: z.number().min(0).max(60).default(1).describe('After a denied reservation, no new one for the operation during this time.'),
    isolationSeconds: z.number().min(1).max(600).default(6).describe('Without an answer from a coordinator for this long, a member keeps at most its share (limit / members) of each cluster limit; a new coordinator grants nothing more until every member was heard or this time passed. Must exceed the election time (etcd: the lease TTL).'),
    requestTimeoutMs: z.int().min(10).max(60_000).default(1000).describe('A reservation or release not answered in this time is given up (the next state report reconciles).'),
  })
  .superRefine((c, ctx) => {
    requireKeys(c.control, ctx, c.members.map((m, i) => ({ path: ['members', i], peer: m })));
    const names = new Set<string>();
    c.members.forEach((m, i) => {
      if (names.has(m.name)) ctx.addIssue({ code: 'custom', path: ['members', i, 'name'], message: `member ${m.name} is listed twice` });
      names.add(m.name);
    });
    if (!names.has(c.member)) ctx.addIssue({ code: 'custom', path: ['member'], message: `this member (${c.member}) must be in members` });
    if ('static' in c.coordinator && !names.has(c.coordinator.static)) ctx.addIssue({ code: 'custom', path: ['coordinator', 'static'], message: `the coordinator ${c.coordinator.static} must be one of members` });
    if ('etcd' in c.coordinator && c.isolationSeconds <= c.coordinator.etcd.leaseTtlSeconds) {
      ctx.addIssue({ code: 'custom', path: ['isolationSeconds'], message: `must exceed coordinator.etcd.leaseTtlSeconds (${c.coordinator.etcd.leaseTtlSeconds}): members must keep their rate while a new coordinator is elected` });
    }
  });

export const admissionSchema = z
  .strictObject({
    services: z.array(serviceSchema).min(1, 'configure at least one service').max(256).describe('Limits per virtual service and its operations.'),
    cluster: clusterSchema.optional().describe('The members sharing the cluster limits and their coordinator. Required when any cluster limit is set.'),
  })
  .superRefine((a, ctx) => {
    const seen = new Set<string>();
    a.services.forEach((s, i) => {
      if (seen.has(s.service)) ctx.addIssue({ code: 'custom', path: ['services', i, 'service'], message: `service ${s.service} is configured twice` });
      seen.add(s.service);
    });
    const clustered = a.services.some((s) => s.clusterLimit !== undefined || s.operations.some((o) => o.clusterLimit !== undefined));
    if (clustered && a.cluster === undefined) ctx.addIssue({ code: 'custom', path: ['cluster'], message: 'cluster limits need the cluster: section (members and their coordinator)' });
  });

export type AdmissionConfig = z.output<typeof admissionSchema>;
export type AdmissionClusterConfig = z.output<typeof clusterSchema>;
export type EtcdConfig = z.output<typeof etcdSchema>;
export type AdmissionServiceConfig = z.output<typeof serviceSchema>;
