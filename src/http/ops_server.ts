/**
 * A daemon's read-only ops HTTP server (config key `http.listen`):
 *
 *   GET /metrics   Prometheus text exposition of the daemon's registry
 *   GET /status    JSON: the object the daemon's `status` admin command
 *                  returns in its `status` field
 *   GET <path>     routes added with addRoute() (the dashboard's pages)
 *
 * Anything else is answered 404 (unknown path) or 405 (any method but GET;
 * nothing here changes state), and every request is counted by route and
 * status code (routes are the registered paths plus "unmatched", a bounded
 * set). A handler that throws is answered 500, counted and logged at a
 * bounded rate; the server goes on.
 *
 * No authentication: bind it to loopback or a management address.
 * Bounded: at most MAX_CONNECTIONS connections, short header and request
 * timeouts, request bodies never read.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Registry } from 'prom-client';
import { InvalidArgumentError, SluiceError } from '../errors/errors.ts';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import { parseHttpListen } from './config.ts';
import { renderMetrics } from '../metrics/collect.ts';

/** The ops HTTP server could not bind its configured http.listen address. */
export class HttpListenError extends SluiceError {
  readonly code = 'ERR_SLUICE_HTTP_LISTEN';
}

export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface OpsServerOptions {
  /** The validated http.listen value. */
  readonly listen: string;
  readonly registry: Registry;
  /** The daemon's status object (what its admin `status` command returns). */
  readonly status: () => unknown;
  readonly log: Logger;
}

/** Requests answered, by route and status code. */
export interface RequestCount {
  readonly route: string;
  readonly code: number;
  count: number;
}

export const UNMATCHED_ROUTE = 'unmatched';
const MAX_CONNECTIONS = 64;
const MAX_ROUTES = 64;

export class OpsServer {
  readonly listen: string;
  readonly #server: Server;
  readonly #routes = new Map<string, RouteHandler>();
  readonly #counts = new Map<string, RequestCount>();
  readonly #sockets = new Set<Socket>();
  readonly #log: Logger;
  readonly #limited: LimitedLog;
  #closed = false;

  constructor(opts: OpsServerOptions) {
    this.listen = opts.listen;
    this.#log = opts.log;
    this.#limited = new LimitedLog(opts.log);
    this.#routes.set('/metrics', async (_req, res) => {
      const text = await renderMetrics(opts.registry);
      res.writeHead(200, { 'content-type': opts.registry.contentType, 'cache-control': 'no-store' });
      res.end(text);
    });
    this.#routes.set('/status', (_req, res) => {
      const body = JSON.stringify(opts.status());
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      res.end(`${body}\n`);
    });
    this.#server = createServer({ requestTimeout: 10_000, headersTimeout: 5000, keepAliveTimeout: 5000 }, (req, res) => {
      void this.#handle(req, res);
    });
    this.#server.maxConnections = MAX_CONNECTIONS;
    this.#server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
    this.#server.on('clientError', (_err, socket) => {
      this.#count(UNMATCHED_ROUTE, 400);
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  /**
   * Serves GET `path` with `handler` (an exact path, no query string). The
   * built-in /metrics and /status cannot be replaced.
   */
  addRoute(path: string, handler: RouteHandler): void {
    if (!/^\/[A-Za-z0-9._~\-/]*$/.test(path)) throw new InvalidArgumentError(`route path must start with / and hold only A-Z a-z 0-9 . _ ~ - /, got ${JSON.stringify(path)}`);
    if (this.#routes.has(path)) throw new InvalidArgumentError(`route ${path} is already served`);
    if (this.#routes.size >= MAX_ROUTES) throw new InvalidArgumentError(`at most ${MAX_ROUTES} routes`);
    if (typeof handler !== 'function') throw new InvalidArgumentError('route handler must be a function');
    this.#routes.set(path, handler);
  }

  /** Binds http.listen. HttpListenError (naming the key) when it cannot. */
  async start(): Promise<void> {
    const a = parseHttpListen(this.listen);
    if (!a) throw new HttpListenError(`http.listen ${JSON.stringify(this.listen)} is not ADDRESS:PORT like 127.0.0.1:9100 or [::1]:9100`);
    await new Promise<void>((resolve, reject) => {
      const failed = (err: NodeJS.ErrnoException): void => {
        reject(new HttpListenError(`cannot serve http.listen ${this.listen}: ${err.code ?? err.message}${hint(err.code)}`, { cause: err }));
      };
      this.#server.once('error', failed);
      this.#server.listen({ host: a.host, port: a.port, ipv6Only: a.family === 6, exclusive: true }, () => {
        this.#server.off('error', failed);
        resolve();
      });
    });
    this.#server.on('error', (err) => {
      this.#log.error({ err }, 'ops HTTP server error');
    });
    this.#log.info({ listen: this.listen }, 'ops HTTP server listening (GET /metrics, /status)');
  }

  /** The bound address (port 0 in tests resolves here). */
  get address(): AddressInfo | undefined {
    const a = this.#server.address();
    return a !== null && typeof a === 'object' ? a : undefined;
  }

  /** Request counts by route and code (a snapshot). */
  requestCounts(): RequestCount[] {
    return [...this.#counts.values()].map((c) => ({ ...c }));
  }

  /** Stops listening and drops open connections. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#server.close();
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const handler = this.#routes.get(path);
    const route = handler ? path : UNMATCHED_ROUTE;
    if (req.method !== 'GET') {
      this.#reply(res, route, 405, 'only GET is served here\n', { allow: 'GET' });
      return;
    }
    if (!handler) {
      this.#reply(res, route, 404, `no such page; try ${[...this.#routes.keys()].join(', ')}\n`);
      return;
    }
    try {
      await handler(req, res);
      this.#count(route, res.statusCode);
    } catch (err) {
      this.#limited.warn(`route:${route}`, { err, route }, 'ops HTTP handler failed');
      if (!res.headersSent) this.#reply(res, route, 500, 'internal error; see the daemon log\n');
      else {
        this.#count(route, 500);
        res.destroy();
      }
    }
  }

  #reply(res: ServerResponse, route: string, code: number, text: string, headers: Record<string, string> = {}): void {
    res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', ...headers });
    res.end(text);
    this.#count(route, code);
  }

  #count(route: string, code: number): void {
    const key = `${route} ${code}`;
    const c = this.#counts.get(key);
    if (c) c.count++;
    else this.#counts.set(key, { route, code, count: 1 });
  }
}

function hint(code: string | undefined): string {
  switch (code) {
    case 'EADDRINUSE':
      return ' (the port is taken: choose another port in http.listen, or remove the http section)';
    case 'EADDRNOTAVAIL':
      return ' (no interface has this address here: use one of this host\'s addresses, e.g. 127.0.0.1)';
    case 'EACCES':
      return ' (a port below 1024 needs privileges: choose a higher port in http.listen)';
    default:
      return ' (fix http.listen or remove the http section)';
  }
}
