/**
 * A server that goes down takes its unanswerable flows with it (the
 * analogue of IPVS's expire_nodest_conn; native/src/ct_expire.c says
 * which flows and why): without it, a client that reuses the source port
 * of a flow left unreplied to the dead server (conntrack keeps it 120 s)
 * is sent there again without a decision, and a UDP client that keeps
 * sending never leaves it.
 *
 * Only health downs (check, agent, passive check), never a drain: a
 * drained server is alive and keeps its flows. The expiries run one at a
 * time, off the loop (the kernel walks its whole table for each, filtering
 * on the mark), in the order the servers went down; the destroy events of
 * the deleted flows free their records as for any ended flow.
 *
 * A flow is the server's when it carries the server's mark (what the
 * decision set) and its reply comes from the server's address and port
 * (what the DNAT made). Both, because a reload that renumbered servers
 * leaves older flows under their old marks: another server's flows under
 * this mark are not touched, and this server's under an older mark are
 * not found (they end by their timeouts, as before this existed).
 */
import type { Logger } from '../log/logger.ts';
import { SluiceError } from '../errors/errors.ts';

export class FlowExpiryError extends SluiceError {
  readonly code = 'ERR_SLUICE_FLOW_EXPIRY';
}

export interface ExpiryResult {
  readonly matched: number;
  readonly deleted: number;
  readonly gone: number;
}

/** The kernel side (the addon's ctExpire); injected by unit tests. */
export type ExpireFn = (mark: number, address: Uint32Array, port: number) => Promise<ExpiryResult>;

/** A server gone down: its names, mark, address (four words, IPv4 mapped) and port. */
export interface ExpiredServer {
  readonly service: string;
  readonly server: string;
  readonly mark: number;
  readonly address: Uint32Array;
  readonly port: number;
}

export class FlowExpiry {
  /** Expiries run to the end, and failed (each failure logged with its cause). */
  runs = 0;
  failures = 0;
  /** Flows deleted, and flows that ended before their delete. */
  deleted = 0;
  gone = 0;
  readonly #expire: ExpireFn;
  readonly #log: Logger;
  readonly #queue: ExpiredServer[] = [];
  #running = false;
  /** Settles when the queue is empty (tests wait on it). */
  #idle: Promise<void> = Promise.resolve();
  #settle: (() => void) | undefined;

  constructor(expire: ExpireFn, log: Logger) {
    this.#expire = expire;
    this.#log = log;
  }

  /** Expires the flows of a server gone down, after those already asked for. */
  serverDown(down: ExpiredServer): void {
    // One pending expiry per mark is enough: a second would find nothing the first leaves.
    if (this.#queue.some((p) => p.mark === down.mark)) return;
    // A copy of the address: the runtime's words may change with a reload before the expiry runs.
    this.#queue.push({ ...down, address: Uint32Array.from(down.address) });
    if (this.#running) return;
    this.#running = true;
    this.#idle = new Promise((resolve) => {
      this.#settle = resolve;
    });
    void this.#drain();
  }

  /** Resolves once every expiry asked for so far has run. */
  idle(): Promise<void> {
    return this.#idle;
  }

  async #drain(): Promise<void> {
    for (let p = this.#queue.shift(); p !== undefined; p = this.#queue.shift()) {
      try {
        const r = await this.#expire(p.mark, p.address, p.port);
        this.runs++;
        this.deleted += r.deleted;
        this.gone += r.gone;
        if (r.matched > 0) this.#log.info({ service: p.service, server: p.server, deleted: r.deleted, gone: r.gone }, 'flows the server cannot answer expired (unreplied TCP, UDP): their next packet is decided again');
      } catch (err) {
        this.failures++;
        const e = new FlowExpiryError(`cannot expire the flows of server ${p.server} (service ${p.service}) that went down: ${(err as Error).message}; clients reusing their ports reach it until conntrack's timeout`, { cause: err });
        this.#log.warn({ service: p.service, server: p.server, err: e, code: e.code }, 'flow expiry failed');
      }
    }
    this.#running = false;
    this.#settle?.();
    this.#settle = undefined;
  }
}
