/**
 * Checkpoint rules in the front node's configuration (issue 7, seed 001).
 * Lists appear at three levels: per virtual service (`services[].checkpoints`,
 * the seed's frontend), per cluster (top-level `checkpoints`, the backend:
 * this front node's cluster) and per server (`services[].servers[].checkpoints`).
 * Each list is evaluated in order; every rule whose condition holds applies.
 * Documented by example in deploy/examples/front-cluster1.yaml.
 */
import { z } from 'zod';

const name = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
const port = z.int({ error: 'expected a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535');
const cidr = z.cidrv4({ error: 'expected an IPv4 prefix like 198.18.0.0/16' });

export const CHECKPOINT_KINDS = ['counter', 'rate-limit', 'concurrency-limit'] as const;
export const CRITERIA = ['source', 'source-prefix', 'service', 'server', 'none'] as const;
export const MEASURES = ['rate', 'concurrent', 'total'] as const;

export const checkpointSchema = z
  .strictObject({
    /** Unique on this front node: status, metrics and counter conditions use it. */
    name,
    /** counter: count only; rate-limit: `limit` new connections per period per key; concurrency-limit: `limit` open connections per key. */
    kind: z.enum(CHECKPOINT_KINDS, { error: `kind is one of ${CHECKPOINT_KINDS.join(', ')}` }),
    /** What a key is: the client address, its prefix (prefixLength), the virtual service, the chosen server (server-level lists only), or one shared counter. */
    criterion: z.enum(CRITERIA, { error: `criterion is one of ${CRITERIA.join(', ')}` }).default('source'),
    /** For criterion source-prefix (IPv4: the front node steers IPv4 only). */
    prefixLength: z.int().min(1, 'prefixLength is 1..32').max(32, 'prefixLength is 1..32').default(24),
    /** Required for the limit kinds. */
    limit: z.int().min(1, 'limit must be >= 1').max(10_000_000).optional(),
    /** The frequency counter's period (rate-limit: limit per period; conditions on `rate` read per period). */
    periodMs: z.int().min(10, 'periodMs is 10..3600000').max(3_600_000, 'periodMs is 10..3600000').default(1000),
    /** Optional condition: every part given must hold for the rule to apply. */
    when: z
      .strictObject({
        sourceIn: z.array(cidr).min(1).max(64, 'at most 64 prefixes').optional(),
        destinationPort: z.array(port).min(1).max(16, 'at most 16 ports').optional(),
        /** Another (or this) rule's counter for this request's key under that rule's criterion (absent key: 0). */
        counter: z
          .strictObject({
            name,
            measure: z.enum(MEASURES, { error: `measure is one of ${MEASURES.join(', ')}` }).default('rate'),
            above: z.number().optional(),
            below: z.number().optional(),
          })
          .refine((c) => c.above !== undefined || c.below !== undefined, { message: 'give above, below or both' })
          .optional(),
      })
      .optional(),
    /** When the condition holds: continue (count and go on), reject, or steer to an overflow cluster. Counter rules only. */
    action: z
      .union([z.enum(['continue', 'reject']), z.strictObject({ steer: name })], { error: 'action is continue, reject, or {steer: <overflow cluster>}' })
      .default('continue'),
    /** How a rejection looks to the client: a TCP reset, or a silent drop (the client retries the SYN). */
    reject: z.enum(['rst', 'drop'], { error: 'reject is rst or drop' }).default('rst'),
    /** Limit kinds: over the limit a SYN waits here; beyond maxLength waiting or after maxDelayMs it is rejected. */
    queue: z
      .strictObject({
        maxLength: z.int().min(0).max(1_000_000).default(1024),
        maxDelayMs: z.int().min(0).max(60_000).default(1000),
      })
      .prefault({}),
    /** The stick table: at most `size` keys; a key idle for expireSeconds is freed. */
    table: z
      .strictObject({
        size: z.int().min(1).max(4_000_000).default(65_536),
        expireSeconds: z.number().positive().max(86_400).default(60),
      })
      .prefault({}),
  })
  .superRefine((c, ctx) => {
    if (c.kind !== 'counter' && c.limit === undefined) ctx.addIssue({ code: 'custom', path: ['limit'], message: `a ${c.kind} rule needs a limit` });
    if (c.kind !== 'counter' && c.action !== 'continue') ctx.addIssue({ code: 'custom', path: ['action'], message: 'limit rules wait or reject by themselves; to reject or steer on a count, add a counter rule with a counter condition' });
  });

export const shapingSchema = z
  .strictObject({
    /**
     * Requests held in all queues together at most; beyond it a SYN over a
     * limit is rejected. A held SYN occupies the kernel's NFQUEUE until its
     * verdict, and the front node opens its queue with room for 65536
     * packets: at most half of it may be held, so held SYNs never starve
     * other setup packets (and the queue is fail-open besides).
     */
    maxHeld: z.int().min(0).max(32_768, 'at most 32768: half the kernel queue (65536) stays free for other packets').default(16_384),
    /** How often idle keys are expired from the stick tables. */
    sweepMs: z.int().min(10).max(60_000).default(1000),
  })
  .prefault({});

export type CheckpointConfig = z.output<typeof checkpointSchema>;
export type ShapingConfig = z.output<typeof shapingSchema>;
