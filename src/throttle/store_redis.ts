/**
 * GCRA state in Redis, shared by every master configured with the same
 * server and key prefix: each update is ONE atomic Lua script run by
 * EVALSHA (loaded with SCRIPT LOAD at start, loaded again after a NOSCRIPT
 * reply, e.g. when Redis restarted), so two masters charging the same
 * identifier at once never lose a charge.
 *
 * Key: <prefix><domain>|<identifier>, value: the TAT as decimal ms with 3
 * fraction digits (Lua numbers are doubles: a TAT near 1.8e12 ms keeps its
 * 0.001 ms in %.3f). The key expires at its TAT (PXAT, Redis >= 6.2): once
 * TAT has passed the state is equivalent to none (gcra.ts), so expiry never
 * changes a decision and the key space holds only identifiers still
 * throttled or inside their burst window.
 *
 * Errors (Redis down, timeouts) reject the charge; the master counts them
 * and publishes nothing for that message: the throttle fails open.
 */
import { Redis } from 'ioredis';
import type { GcraRule } from './gcra.ts';
import type { ThrottleStore } from './store.ts';

// ARGV[1] = time the request is charged at (ms), ARGV[2] = T (ms). Returns the new TAT.
const CHARGE_LUA = `
local at = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < at then tat = at end
tat = tat + tonumber(ARGV[2])
local s = string.format('%.3f', tat)
redis.call('SET', KEYS[1], s, 'PXAT', string.format('%.0f', math.ceil(tat)))
return s
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
  #sha = '';

  private constructor(o: RedisStoreOptions) {
    this.#prefix = o.keyPrefix;
    const where = o.path !== undefined ? { path: o.path } : { host: o.host, port: o.port };
    this.redis = new Redis({
      ...where,
      db: o.db,
      lazyConnect: true,
      // Every command of this process pipelines with those of the same tick:
      // one round trip carries a burst of accounting messages.
      enableAutoPipelining: true,
      // While Redis is away commands fail at once (counted, fail open)
      // instead of queueing without bound.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: o.commandTimeoutMs,
      retryStrategy: (times) => Math.min(50 * times, 2000),
    });
    // Connection errors are also reported by the failing commands; the
    // listener keeps ioredis from treating them as unhandled.
    this.redis.on('error', () => undefined);
    this.redis.on('ready', () => {
      void this.#load().catch(() => undefined);
    });
  }

  /** Connects and loads the script; rejects when Redis cannot be reached. */
  static async open(o: RedisStoreOptions): Promise<RedisStore> {
    const s = new RedisStore(o);
    try {
      await s.redis.connect();
      await s.#load();
    } catch (err) {
      s.redis.disconnect();
      throw err;
    }
    return s;
  }

  async #load(): Promise<void> {
    this.#sha = String(await this.redis.script('LOAD', CHARGE_LUA));
  }

  key(domain: string, identifier: string): string {
    return `${this.#prefix}${domain}|${identifier}`;
  }

  async charge(domain: string, identifier: string, at: number, rule: GcraRule): Promise<number> {
    const key = this.key(domain, identifier);
    let reply: unknown;
    try {
      reply = await this.redis.evalsha(this.#sha, 1, key, at.toFixed(3), rule.intervalMs.toFixed(6));
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      await this.#load();
      reply = await this.redis.evalsha(this.#sha, 1, key, at.toFixed(3), rule.intervalMs.toFixed(6));
    }
    return Number(reply);
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
