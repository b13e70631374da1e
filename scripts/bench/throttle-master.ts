/**
 * The benchmark's master process: one `Master` (src/throttle/master.ts)
 * with the store under test, bound on loopback with CURVE, printing its
 * counters as a JSON line every 200 ms on stdout. Run by
 * scripts/bench/throttle.ts; argv[2] is a JSON object:
 *   { config: <master config>, store: "memory" | "redis" | "smockron",
 *     smockronLua?: <Smockron's Lua script text, for store smockron> }
 *
 * Store "smockron" runs Smockron's own Redis script (read by the parent
 * from a Smockron checkout, never copied into Sluice) with Smockron's call
 * pattern: one EVALSHA per accounting message, KEYS = its key, ARGV =
 * max(request time, now), T, burst * T; the reply is the next allowable
 * time. Everything else (sockets, decoding, publishing, Redis client and
 * its pipelining, ScriptBatcher) is the same master, so the ratio isolates
 * the script. (Smockron itself sent one EVALSHA per message on one
 * then-redis connection, which pipelines by writing without waiting.)
 */
import { Redis } from 'ioredis';
import { masterConfigSchema } from '../../src/throttle/config.ts';
import type { GcraRule } from '../../src/throttle/gcra.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { Master } from '../../src/throttle/master.ts';
import { ScriptBatcher } from '../../src/throttle/redis_batch.ts';
import type { ThrottleStore } from '../../src/throttle/store.ts';

interface Args {
  config: unknown;
  store: 'memory' | 'redis' | 'smockron';
  smockronLua?: string;
  burst?: number;
}

/** Smockron's call pattern around its script (datastore.js logAccess/execScript), as a ThrottleStore. */
class SmockronScriptStore implements ThrottleStore {
  readonly kind = 'redis';
  readonly redis: Redis;
  readonly #batcher: ScriptBatcher;
  readonly #burst: number;

  constructor(port: number, lua: string, burst: number) {
    // The same client options and the same pipelining as RedisStore.
    this.redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableAutoPipelining: false, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    this.#batcher = new ScriptBatcher(this.redis, lua);
    this.#burst = burst;
  }

  async open(): Promise<void> {
    await this.redis.connect();
    await this.#batcher.load();
  }

  async charge(domain: string, identifier: string, at: number, rule: GcraRule): Promise<number> {
    // Smockron's key 'throttle;<domain>;<identifier>'; ARGV max(ts, now), interval, burst as ms (its datastore.js).
    const next = Number(await this.#batcher.run(`throttle;${domain};${identifier}`, [String(Math.round(at)), String(Math.round(rule.intervalMs)), String(Math.round(rule.intervalMs * this.#burst))]));
    // The master publishes nextAllowed(rule, tat) = tat - tolerance: hand it Smockron's next allowable time.
    return next + rule.toleranceMs;
  }

  scan(): Promise<number> {
    return Promise.resolve(0);
  }

  tracked(): number {
    return 0;
  }

  sweep(): void {
    /* keys expire in Redis */
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const cfg = masterConfigSchema.parse(args.config);
const log = componentLogger('bench-master');
let store: ThrottleStore | undefined;
if (args.store === 'smockron') {
  if (args.smockronLua === undefined || cfg.store.kind !== 'redis') throw new Error('store smockron needs smockronLua and a redis store config');
  const s = new SmockronScriptStore(cfg.store.port, args.smockronLua, args.burst ?? 1);
  await s.open();
  store = s;
}
const master = await Master.start(cfg, log, store ? { store } : {});
const timer = setInterval(() => {
  const c = master.counters;
  process.stdout.write(`${JSON.stringify({ t: performance.now(), received: c.received, charged: c.charged, storeErrors: c.storeErrors, rejected: Object.values(c.rejected).reduce((a, b) => a + b, 0), published: (master.status()['counters'] as { published: number }).published })}\n`);
}, 200);
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
process.on('SIGTERM', () => {
  clearInterval(timer);
  void master.stop().then(() => process.exit(0));
});
