/**
 * The process's ZAP handler (RFC 27): libzmq asks it, over
 * inproc://zeromq.zap.01, whether a peer completing a CURVE handshake with
 * one of our bound sockets may talk to it. Each bound socket names a ZAP
 * domain; each domain has its own allowlist of client public keys. A peer
 * whose key is not in the list is refused during the handshake: it never
 * reaches our message handlers, and the refusal is counted per domain.
 *
 * There is one inproc endpoint per ZeroMQ context, so one handler per
 * process; daemons register domains on it.
 */
import { Router } from 'zeromq';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import { z85Encode } from './keys.ts';

const ZAP_ENDPOINT = 'inproc://zeromq.zap.01';
/** Binding the endpoint again after a release is retried this often, BIND_RETRY_MS apart (see start()). */
const BIND_RETRIES = 100;
const BIND_RETRY_MS = 10;

export interface DomainCounters {
  accepted: number;
  refused: number;
}

export class ZapHandler {
  static #shared: ZapHandler | undefined;
  #refs = 0;
  readonly #router = new Router();
  readonly #allow = new Map<string, ReadonlySet<string>>();
  readonly counters = new Map<string, DomainCounters>();
  /** Requests that did not follow RFC 27 (a libzmq bug if ever seen). */
  malformed = 0;
  #started: Promise<void> | undefined;
  readonly #log: Logger;
  readonly #limited: LimitedLog;

  private constructor(log: Logger) {
    this.#log = log;
    this.#limited = new LimitedLog(log);
  }

  /** The process's handler, bound on first use; release() when done with it. */
  static async acquire(log: Logger): Promise<ZapHandler> {
    const z = (ZapHandler.#shared ??= new ZapHandler(log));
    z.#refs++;
    try {
      await z.start();
    } catch (err) {
      // Not bound: drop this handler, so that a later acquire tries afresh.
      z.release();
      throw err;
    }
    return z;
  }

  /** Drops one reference; the last one closes the handler (so the process can exit). */
  release(): void {
    if (--this.#refs > 0) return;
    this.#router.close();
    if (ZapHandler.#shared === this) ZapHandler.#shared = undefined;
  }

  /** Binds the inproc endpoint; must happen before any CURVE server socket binds. */
  private start(): Promise<void> {
    this.#started ??= (async () => {
      // The previous handler's endpoint (closed by the last release()) is
      // unbound by ZeroMQ's I/O thread a moment after close(): a bind
      // before that fails with EADDRINUSE (every time when released and
      // acquired again at once). Retried within ~1 s.
      for (let tries = 0; ; tries++) {
        try {
          await this.#router.bind(ZAP_ENDPOINT);
          break;
        } catch (err) {
          if (tries >= BIND_RETRIES || (err as { code?: unknown }).code !== 'EADDRINUSE') throw err;
          await new Promise((r) => setTimeout(r, BIND_RETRY_MS));
        }
      }
      void this.#serve();
    })();
    return this.#started;
  }

  /** Sets (or replaces) the allowed client keys of a domain. */
  allow(domain: string, keys: ReadonlySet<string>): void {
    this.#allow.set(domain, keys);
    if (!this.counters.has(domain)) this.counters.set(domain, { accepted: 0, refused: 0 });
  }

  async #serve(): Promise<void> {
    try {
      for await (const frames of this.#router) {
        // [routing id, "", version, request id, domain, address, identity, mechanism, credentials...]
        const [rid, delim, version, requestId, domain, address, , mechanism, key] = frames;
        if (!rid || !delim || !version || !requestId || !domain || !mechanism) {
          this.malformed++;
          continue;
        }
        const d = domain.toString('latin1');
        const allowed = this.#allow.get(d);
        const z85 = key?.length === 32 ? z85Encode(key) : '';
        const ok = mechanism.toString('latin1') === 'CURVE' && allowed !== undefined && allowed.has(z85);
        const c = this.counters.get(d) ?? { accepted: 0, refused: 0 };
        this.counters.set(d, c);
        if (ok) c.accepted++;
        else {
          c.refused++;
          this.#limited.warn(`refused:${d}`, { domain: d, address: address?.toString('latin1') ?? '?', key: z85 === '' ? '(none)' : z85 }, 'control peer refused: public key not in the allowlist');
        }
        await this.#router.send([rid, delim, version, requestId, ok ? '200' : '400', ok ? 'OK' : 'key not allowed', ok ? z85 : '', '']);
      }
    } catch (err) {
      // Closed at shutdown; anything else is logged (the sockets then refuse every handshake).
      if (!this.#router.closed) this.#log.error({ err }, 'ZAP handler stopped');
    }
  }

}
