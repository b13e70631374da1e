/**
 * Where the dashboard reads a daemon's status from. Two kinds, one contract:
 * the same JSON object a daemon's admin socket answers to {"cmd":"status"}
 * (its `status` field).
 *
 *   unix:/run/sluice/front.sock   the daemon's admin socket (src/admin/socket.ts)
 *   http://10.0.0.1:9100          the daemon's ops HTTP server, GET /status
 *
 * Every read is bounded in time and size; a failure rejects with a message
 * the page shows next to the source (the dashboard marks it down and goes on):
 * one of the Status errors below, or for a unix source the admin client's
 * (AdminUnreachableError, AdminTimeoutError, AdminReplyError).
 */
import type { ReadableStreamDefaultReader, ReadableStreamReadResult } from 'node:stream/web';
import { adminRequest } from '../admin/client.ts';
import { InvalidArgumentError, SluiceError } from '../errors/errors.ts';

/** The status source's address could not be reached. */
export class StatusUnreachableError extends SluiceError {
  readonly code = 'ERR_SLUICE_STATUS_UNREACHABLE';
}
/** No status (or not all of it) within the read's time bound. */
export class StatusTimeoutError extends SluiceError {
  readonly code = 'ERR_SLUICE_STATUS_TIMEOUT';
}
/** The daemon answered without its status (admin reply not ok, or an HTTP error status). */
export class StatusRefusedError extends SluiceError {
  readonly code = 'ERR_SLUICE_STATUS_REFUSED';
}
/** The answer is not JSON. */
export class StatusUnreadableError extends SluiceError {
  readonly code = 'ERR_SLUICE_STATUS_UNREADABLE';
}
/** The answer is larger than MAX_STATUS_BYTES. */
export class StatusTooLargeError extends SluiceError {
  readonly code = 'ERR_SLUICE_STATUS_TOO_LARGE';
}

/** A status larger than this is refused (a front node's is a few KiB). */
export const MAX_STATUS_BYTES = 4 * 1024 * 1024;

export interface StatusSource {
  /** The label given on the command line (NAME of NAME=SRC). */
  readonly name: string;
  /** The address as given, for display. */
  readonly address: string;
  /** The daemon's status object; rejects on any failure within timeoutMs. */
  read(timeoutMs: number): Promise<unknown>;
}

const NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;

/** Parses one `NAME=unix:/path` or `NAME=http://host:port`; throws InvalidArgumentError saying what is wrong. */
export function parseSource(spec: string): StatusSource {
  const eq = spec.indexOf('=');
  const name = eq > 0 ? spec.slice(0, eq) : '';
  const address = eq > 0 ? spec.slice(eq + 1) : '';
  if (!NAME_RE.test(name)) throw new InvalidArgumentError(`--source "${spec}": expected NAME=unix:/path/to/admin.sock or NAME=http://host:port, NAME of letters, digits, _ . - (at most 64)`);
  if (address.startsWith('unix:')) {
    const path = address.slice('unix:'.length);
    if (path === '') throw new InvalidArgumentError(`--source "${spec}": unix: needs the admin socket's path`);
    return new UnixSource(name, path);
  }
  if (address.startsWith('http://') || address.startsWith('https://')) {
    let url: URL;
    try {
      url = new URL(address);
    } catch {
      throw new InvalidArgumentError(`--source "${spec}": "${address}" is not a URL`);
    }
    return new HttpSource(name, url);
  }
  throw new InvalidArgumentError(`--source "${spec}": the address must start with unix: or http://`);
}

/** A daemon's admin socket: one {"cmd":"status"} request per read. */
export class UnixSource implements StatusSource {
  readonly name: string;
  readonly address: string;
  readonly #path: string;

  constructor(name: string, path: string) {
    this.name = name;
    this.#path = path;
    this.address = `unix:${path}`;
  }

  async read(timeoutMs: number): Promise<unknown> {
    const reply = await adminRequest(this.#path, { cmd: 'status' }, timeoutMs);
    if (reply.ok !== true) throw new StatusRefusedError(`status refused: ${typeof reply.error === 'string' ? reply.error : 'no reason given'}`);
    return reply.status;
  }
}

/** A daemon's ops HTTP server: GET <base>/status. */
export class HttpSource implements StatusSource {
  readonly name: string;
  readonly address: string;
  readonly #url: URL;

  constructor(name: string, base: URL) {
    this.name = name;
    this.address = base.href;
    this.#url = new URL('status', base.href.endsWith('/') ? base : new URL(`${base.href}/`));
  }

  async read(timeoutMs: number): Promise<unknown> {
    const signal = AbortSignal.timeout(timeoutMs);
    let res: Response;
    try {
      res = await fetch(this.#url, { signal, redirect: 'error', headers: { accept: 'application/json' } });
    } catch (err) {
      if (signal.aborted) throw new StatusTimeoutError(`no reply from ${this.#url.href} within ${timeoutMs} ms`, { cause: err });
      throw new StatusUnreachableError(`cannot reach ${this.#url.href}: ${causeOf(err)}`, { cause: err });
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new StatusRefusedError(`${this.#url.href} answered HTTP ${res.status}`);
    }
    const text = await readBounded(res, MAX_STATUS_BYTES, signal);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new StatusUnreadableError(`${this.#url.href} answered something that is not JSON`);
    }
  }
}

function causeOf(err: unknown): string {
  const e = err as Error & { cause?: { message?: unknown } };
  return typeof e.cause?.message === 'string' ? e.cause.message : e.message;
}

/** The body as text, refused past `max` bytes (the timeout's signal also ends it). */
async function readBounded(res: Response, max: number, signal: AbortSignal): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader() as ReadableStreamDefaultReader<Uint8Array>;
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const chunk: ReadableStreamReadResult<Uint8Array> = await reader.read();
      if (chunk.done) break;
      size += chunk.value.byteLength;
      if (size > max) throw new StatusTooLargeError(`status larger than ${max} bytes`);
      parts.push(chunk.value);
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    throw signal.aborted ? new StatusTimeoutError('status body not received in time', { cause: err }) : err;
  }
  return Buffer.concat(parts).toString('utf8');
}
