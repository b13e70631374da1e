/**
 * Runs one Lua script many times over one Redis connection, pipelined: every
 * run requested in the same event-loop turn goes out in one pipeline of
 * EVALSHA commands (at most MAX_BATCH per pipeline). The master's receive
 * loop yields between accounting messages, so per-tick automatic pipelining
 * would send them one by one; a turn (setImmediate) collects a burst.
 *
 * Order: one connection, commands in call order, so runs on one key apply
 * in the order run() was called. The script is loaded with SCRIPT LOAD at
 * open; a NOSCRIPT reply (Redis restarted or flushed its scripts) loads it
 * again and reruns the affected commands once.
 */
import type { Redis } from 'ioredis';
import { SluiceError } from '../errors/errors.ts';

/** A pipeline came back without a reply for one of its commands (the run's result is unknown). */
export class RedisNoReplyError extends SluiceError {
  readonly code = 'ERR_SLUICE_REDIS_NO_REPLY';
}

interface Pending {
  readonly key: string;
  readonly args: readonly string[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (err: unknown) => void;
}

const MAX_BATCH = 4096;

export class ScriptBatcher {
  readonly #redis: Redis;
  readonly #lua: string;
  #sha = '';
  #batch: Pending[] = [];
  #scheduled = false;
  /** Pipelines sent, and commands in them (batching efficiency). */
  pipelines = 0;
  commands = 0;

  constructor(redis: Redis, lua: string) {
    this.#redis = redis;
    this.#lua = lua;
  }

  async load(): Promise<void> {
    this.#sha = String(await this.#redis.script('LOAD', this.#lua));
  }

  /** Runs the script with one key; resolves with its reply. */
  run(key: string, args: readonly string[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#batch.push({ key, args, resolve, reject });
      if (this.#batch.length >= MAX_BATCH) this.#flush();
      else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    const batch = this.#batch;
    if (batch.length === 0) return;
    this.#batch = [];
    this.pipelines++;
    this.commands += batch.length;
    const p = this.#redis.pipeline();
    for (const c of batch) p.evalsha(this.#sha, 1, c.key, ...c.args);
    p.exec().then(
      (results) => {
        let retry: Pending[] | undefined;
        batch.forEach((c, i) => {
          const [err, reply] = results?.[i] ?? [new RedisNoReplyError('no reply from Redis'), null];
          if (err === null) c.resolve(reply);
          else if (err.message.startsWith('NOSCRIPT')) (retry ??= []).push(c);
          else c.reject(err);
        });
        if (retry !== undefined) this.#retry(retry);
      },
      (err: unknown) => {
        for (const c of batch) c.reject(err);
      },
    );
  }

  #retry(batch: Pending[]): void {
    this.load().then(
      () => {
        for (const c of batch) this.#redis.evalsha(this.#sha, 1, c.key, ...c.args).then(c.resolve, c.reject);
      },
      (err: unknown) => {
        for (const c of batch) c.reject(err);
      },
    );
  }
}
