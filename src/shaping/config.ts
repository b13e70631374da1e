/**
 * Checkpoint rules in the front node's configuration (issue 7, seed 001).
 * Lists appear at three levels: per virtual service (`services[].checkpoints`,
 * the seed's frontend), per cluster (top-level `checkpoints`, the backend:
 * this front node's cluster) and per server (`services[].servers[].checkpoints`).
 * Each list is evaluated in order; every rule whose condition holds applies.
 * Documented by example in deploy/examples/front-cluster1.yaml.
 */
import { z } from 'zod';
import { parseSourcePrefix } from '../packet/source_prefixes.ts';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
const port = z.int({ error: 'expected a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535');

/**
 * One `sourceIn` entry: an IPv4 or an IPv6 prefix, length given
 * (packet/source_prefixes.ts; an IPv4-mapped IPv6 prefix is the IPv4 one).
 * Validated here once, so run-time compilation cannot fail. Shared with the
 * admission section's client classes.
 */
export const sourcePrefix = z
  .string({ error: 'expected a prefix like 198.18.0.0/16 or 2001:2::/48' })
  .refine((s) => parseSourcePrefix(s) !== undefined, {
    error: (i) => `"${String(i.input)}" is not a prefix: write an IPv4 prefix like 198.18.0.0/16 or an IPv6 prefix like 2001:2::/48 (address, slash, length 0-32 or 0-128, no leading zeros)`,
  });

/** A `sourceIn` list: prefixes of both families in one list. */
export const sourceInList = z.array(sourcePrefix).min(1, 'list at least one prefix (or leave sourceIn out)').max(64, 'at most 64 prefixes');

export const CHECKPOINT_KINDS = ['counter', 'rate-limit', 'concurrency-limit', 'gatekeeper', 'admission'] as const;
export const CRITERIA = ['source', 'source-prefix', 'service', 'server', 'none'] as const;
export const MEASURES = ['rate', 'concurrent', 'total'] as const;

export const checkpointSchema = z
  .strictObject({
    name: name.describe('Unique on this front node: status, metrics and counter conditions use it.'),
    kind: z
      .enum(CHECKPOINT_KINDS, { error: `kind is one of ${CHECKPOINT_KINDS.join(', ')}` })
      .describe('`counter`: count only; `rate-limit`: `limit` new connections per period per key; `concurrency-limit`: `limit` open connections per key (released on FIN, RST or idle free); `gatekeeper`: the site-wide rate of its `domain`, decided with the throttling masters (top-level `throttle:`, docs/throttling.md); `admission`: the hierarchical token limits of the top-level `admission:` section (local and cluster-wide, docs/admission.md): admits or rejects.'),
    criterion: z
      .enum(CRITERIA, { error: `criterion is one of ${CRITERIA.join(', ')}` })
      .default('source')
      .describe('What a key is: the client address, its prefix (`prefixLength`), the virtual service, the chosen server (server-level lists only), or `none` (one shared counter).'),
    prefixLength: z.int().min(1, 'prefixLength is 1..32').max(32, 'prefixLength is 1..32').default(24).describe('For criterion `source-prefix`: the prefix of an IPv4 client.'),
    prefixLength6: z.int().min(1, 'prefixLength6 is 1..128').max(128, 'prefixLength6 is 1..128').default(64).describe('For criterion `source-prefix`: the prefix of an IPv6 client (/64: one subscriber\'s LAN, RFC 6177; /56 or /48 for a whole site). Kind `gatekeeper` keys IPv6 clients by it whatever the criterion (one subscriber holds a whole /64 of addresses, so per address would hold nobody back; 128 for per address).'),
    limit: z.int().min(1, 'limit must be >= 1').max(10_000_000).optional().describe('Required for the limit kinds: connections per period (`rate-limit`) or open at once (`concurrency-limit`) per key.'),
    periodMs: z
      .int()
      .min(10, 'periodMs is 10..3600000')
      .max(3_600_000, 'periodMs is 10..3600000')
      .default(1000)
      .describe('The frequency counter\'s period (rate-limit: `limit` per period; conditions on `rate` read per period).'),
    domain: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,128}$/, 'a throttling domain is 1-128 letters, digits, . _ - ')
      .optional()
      .describe('Kind `gatekeeper`: the throttling domain (as named in the masters\' `domains`). Defaults to the service\'s name in a service\'s list; required in the cluster and server lists.'),
    when: z
      .strictObject({
        sourceIn: sourceInList.optional().describe('The client address is in one of these prefixes, IPv4 and IPv6 in one list (198.18.0.0/16, 2001:2::/48). An IPv6 prefix matches IPv6 clients, an IPv4 one IPv4 clients; an IPv4-mapped IPv6 prefix (::ffff:198.18.0.0/112) is the IPv4 prefix it maps.'),
        destinationPort: z.array(port).min(1).max(16, 'at most 16 ports').optional().describe('The connection\'s destination port is one of these.'),
        counter: z
          .strictObject({
            name: name.describe('The rule whose counter is read.'),
            measure: z.enum(MEASURES, { error: `measure is one of ${MEASURES.join(', ')}` }).default('rate').describe('`rate` per period, `concurrent` open connections, or `total` since the key was created.'),
            above: z.number().optional().describe('Holds when the measure is above this.'),
            below: z.number().optional().describe('Holds when the measure is below this.'),
          })
          .refine((c) => c.above !== undefined || c.below !== undefined, { message: 'give above, below or both' })
          .optional()
          .describe('Another (or this) rule\'s counter for this request\'s key under that rule\'s criterion (a key not in its table reads 0).'),
      })
      .optional()
      .describe('Optional condition: every part given must hold for the rule to apply. Absent: the rule always applies.'),
    action: z
      .union([z.enum(['continue', 'reject']), z.strictObject({ steer: name.describe('An `overflow` cluster name.') })], { error: 'action is continue, reject, or {steer: <overflow cluster>}' })
      .default('continue')
      .describe('When the condition holds: `continue` (count and go on), `reject`, or `{steer: CLUSTER}` to an overflow cluster. Counter rules only.'),
    reject: z.enum(['rst', 'drop'], { error: 'reject is rst or drop' }).default('rst').describe('How a rejection looks to the client: a TCP reset, or a silent drop (the client retries the SYN).'),
    queue: z
      .strictObject({
        maxLength: z.int().min(0).max(1_000_000).default(1024).describe('SYNs waiting at most (per checkpoint); beyond it a SYN is rejected.'),
        maxDelayMs: z.int().min(0).max(60_000).default(1000).describe('A SYN that would wait longer is rejected (kind `gatekeeper`: at once, when the masters\' delay for its key is longer).'),
      })
      .prefault({})
      .describe('Limit and gatekeeper kinds: over the limit a SYN waits here, in time order; only the earliest wake time holds a timer.'),
    table: z
      .strictObject({
        size: z.int().min(1).max(4_000_000).default(65_536).describe('Keys kept at most; when full the least recently used idle key is evicted (keys with open or waiting connections never are).'),
        expireSeconds: z.number().positive().max(86_400).default(60).describe('A key idle this long is freed.'),
      })
      .prefault({})
      .describe('The stick table of this rule\'s keys and their counters.'),
  })
  .superRefine((c, ctx) => {
    if (c.kind === 'admission') {
      if (c.limit !== undefined) ctx.addIssue({ code: 'custom', path: ['limit'], message: 'an admission rule has no limit of its own: the limits are in the top-level admission: section' });
      if (c.action !== 'continue') ctx.addIssue({ code: 'custom', path: ['action'], message: 'an admission rule admits or rejects by itself (leave action out)' });
      if (c.domain !== undefined) ctx.addIssue({ code: 'custom', path: ['domain'], message: 'domain is for kind gatekeeper' });
      return;
    }
    if (c.kind === 'gatekeeper') {
      if (c.criterion !== 'source' && c.criterion !== 'source-prefix') ctx.addIssue({ code: 'custom', path: ['criterion'], message: 'a gatekeeper rule throttles clients: criterion source or source-prefix' });
      if (c.limit !== undefined) ctx.addIssue({ code: 'custom', path: ['limit'], message: 'a gatekeeper rule has no local limit: the rate is the masters\' domain rule' });
      if (c.action !== 'continue') ctx.addIssue({ code: 'custom', path: ['action'], message: 'a gatekeeper rule passes, holds or rejects by itself (leave action out)' });
      return;
    }
    if (c.domain !== undefined) ctx.addIssue({ code: 'custom', path: ['domain'], message: 'domain is for kind gatekeeper' });
    if (c.kind !== 'counter' && c.limit === undefined) ctx.addIssue({ code: 'custom', path: ['limit'], message: `a ${c.kind} rule needs a limit` });
    if (c.kind !== 'counter' && c.action !== 'continue') ctx.addIssue({ code: 'custom', path: ['action'], message: 'limit rules wait or reject by themselves; to reject or steer on a count, add a counter rule with a counter condition' });
  });

/**
 * maxHeld: a held SYN occupies the kernel's NFQUEUE until its verdict, and
 * the front node opens its queue with room for 65536 packets: at most half
 * of it may be held, so held SYNs never starve other setup packets (and the
 * queue is fail-open besides).
 */
export const shapingSchema = z
  .strictObject({
    maxHeld: z
      .int()
      .min(0)
      .max(32_768, 'at most 32768: half the kernel queue (65536) stays free for other packets')
      .default(16_384)
      .describe('SYNs held in all checkpoint queues together at most; beyond it a SYN over a limit is rejected. At most half the kernel queue.'),
    sweepMs: z.int().min(10).max(60_000).default(1000).describe('How often idle keys are expired from the stick tables.'),
  })
  .prefault({})
  .describe('Limits shared by every checkpoint of this front node.');

export type CheckpointConfig = z.output<typeof checkpointSchema>;
export type ShapingConfig = z.output<typeof shapingSchema>;
