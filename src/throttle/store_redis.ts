/**
 * GCRA state in Redis, shared by every master configured with the same
 * server and key prefix: each update is ONE atomic Lua script run by
 * EVALSHA (loaded with SCRIPT LOAD at start, loaded again after a NOSCRIPT
 * reply, e.g. when Redis restarted), so two masters charging the same
 * identifier at once never lose a charge.
 *
 * Runs are pipelined per event-loop turn (redis_batch.ts).
 *
 * Key: <prefix><domain>|<identifier> (an identifier of either family as
 * the gatekeepers send it: IPv4 text has no ':', IPv6 text always has, so
 * the families never share a key; protocol.ts), value: the TAT as decimal ms with 3
 * fraction digits (Lua numbers are doubles: a TAT near 1.8e12 ms keeps its
 * 0.001 ms in %.3f); the charge's reply is the TAT in whole microseconds. The key expires at its TAT (PXAT, Redis >= 6.2): once
 * TAT has passed the state is equivalent to none (gcra.ts), so expiry never
 * changes a decision and the key space holds only identifiers still
 * throttled or inside their burst window.
 *
 * Errors (Redis down, timeouts) reject the charge; the master counts them
 * and publishes nothing for that message: the throttle fails open.
 */
import { Redis } from 'ioredis';
import type { GcraRule } from './gcra.ts';
import { ScriptBatcher } from './redis_batch.ts';
import type { ThrottleStore } from './store.ts';

// ARGV[1] = time the request is charged at (ms), ARGV[2] = T (ms), both as
// JavaScript prints numbers (shortest round-trip form). Stores the new TAT
// (ms, 3 decimals) and returns it in whole microseconds: an integer reply
// (Redis truncates a Lua number reply to an integer; 1.8e15 us < 2^53).
const CHARGE_LUA = `
local at = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < at then tat = at end
tat = tat + tonumber(ARGV[2])
redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PXAT', string.format('%.0f', math.ceil(tat)))
return math.floor(tat * 1000 + 0.5)
`;

export interface RedisStoreOptions {
  readonly host: string;
  readonly port: number;
  /** Unix socket path; when set, host and port are unused. */
  readonly path?: string | undefined;
  readonly db: number;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
}

/** Largest number of SCAN rounds of one resync (1000 keys asked per round). */
const MAX_SCAN_ROUNDS = 100_000;

export class RedisStore implements ThrottleStore {
  readonly kind = 'redis';
  readonly redis: Redis;
  readonly #prefix: string;
  readonly batcher: ScriptBatcher;

  private constructor(o: RedisStoreOptions) {
    this.#prefix = o.keyPrefix;
    const where = o.path !== undefined ? { path: o.path } : { host: o.host, port: o.port };
    this.redis = new Redis({
      ...where,
      db: o.db,
      lazyConnect: true,
      // Charges are pipelined explicitly, per event-loop turn (ScriptBatcher).
      enableAutoPipelining: false,
      // While Redis is away commands fail at once (counted, fail open)
      // instead of queueing without bound.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: o.commandTimeoutMs,
      retryStrategy: (times) => Math.min(50 * times, 2000),
    });
    this.batcher = new ScriptBatcher(this.redis, CHARGE_LUA);
    // Connection errors are also reported by the failing commands; the
    // listener keeps ioredis from treating them as unhandled.
    this.redis.on('error', () => undefined);
    this.redis.on('ready', () => {
      void this.batcher.load().catch(() => undefined);
    });
  }

  /** Connects and loads the script; rejects when Redis cannot be reached. */
  static async open(o: RedisStoreOptions): Promise<RedisStore> {
    const s = new RedisStore(o);
    try {
      await s.redis.connect();
      await s.batcher.load();
    } catch (err) {
      s.redis.disconnect();
      throw err;
    }
    return s;
  }

  key(domain: string, identifier: string): string {
    return `${this.#prefix}${domain}|${identifier}`;
  }

  /** One EVALSHA of the charge script, pipelined with the others of this event-loop turn (redis_batch.ts). */
  async charge(domain: string, identifier: string, at: number, rule: GcraRule): Promise<number> {
    return (await this.batcher.run(this.key(domain, identifier), [String(at), String(rule.intervalMs)])) as number / 1000;
  }

  async scan(domain: string, now: number, visit: (identifier: string, tat: number) => void): Promise<number> {
    const match = `${this.#prefix}${domain}|*`;
    const skip = this.#prefix.length + domain.length + 1;
    let cursor = '0';
    let n = 0;
    for (let round = 0; round < MAX_SCAN_ROUNDS; round++) {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      if (keys.length > 0) {
        const values = await this.redis.mget(keys);
        keys.forEach((k, i) => {
          const tat = Number(values[i] ?? NaN);
          if (tat > now) {
            visit(k.slice(skip), tat);
            n++;
          }
        });
      }
      cursor = next;
      if (cursor === '0') break;
    }
    return n;
  }

  async tracked(domain: string): Promise<number> {
    let n = 0;
    let cursor = '0';
    for (let round = 0; round < MAX_SCAN_ROUNDS; round++) {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.#prefix}${domain}|*`, 'COUNT', 1000);
      n += keys.length;
      cursor = next;
      if (cursor === '0') break;
    }
    return n;
  }

  sweep(_now: number): void {
    /* Redis expires keys at their TAT (PXAT) */
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}
