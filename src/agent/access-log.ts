/**
 * Per-client request counts from a web server's access log, read the way
 * `tail -F` reads: from where the file ends at start, following appends,
 * surviving rotation by rename (the old file is read to its end before the
 * new one is opened), copytruncate and plain truncation (the file shrank:
 * start again at 0), a missing file (wait for it), partial lines (held until
 * their newline arrives) and garbage (counted, skipped).
 *
 * Formats: nginx `combined` and Apache `combined` (the same fields; nginx
 * escapes a quote in the request as \x22, Apache as \"), or a custom regular
 * expression with a named group `client`. Only the client address is used.
 *
 * Client addresses (src/util/ip.ts): IPv4, or IPv6 in any RFC 4291 text form
 * (compressed `::`, an embedded IPv4 tail), optionally in brackets as nginx
 * writes `$remote_addr` of some proxies and `$proxy_protocol_addr` setups.
 * Each is counted under its canonical text, so `2001:DB8::0:1` and
 * `[2001:db8::1]` are one client; an IPv4-mapped address (::ffff:a.b.c.d,
 * nginx listening on `[::]` with ipv6only=off) is that IPv4 client. Zone
 * ids (`fe80::1%eth0`) are refused: a link-local client is no steering
 * target. A line whose client field is not an address is counted as
 * rejected by reason (bad_address, zone_id), apart from lines that do not
 * match the format at all (garbage).
 *
 * Known limit (as for every log follower): after a copytruncate, lines
 * written between logrotate's copy and its truncate are lost, and if the
 * new file grows past our old offset before the next poll, the truncation
 * is not noticed and the bytes before the old offset are skipped. Polling
 * every second keeps that window small.
 */
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { SluiceError } from '../errors/errors.ts';
import { parseClientAddress } from '../util/ip.ts';

const QUOTED = '"(?:[^"\\\\]|\\\\.)*"';
/** host ident user [time] "request" status bytes "referer" "agent" */
const COMBINED = new RegExp(`^(?<client>\\S+) \\S+ \\S+ \\[[^\\]]+\\] ${QUOTED} \\d{3} (?:\\d+|-) ${QUOTED} ${QUOTED}`);

export const LOG_FORMATS = {
  'nginx-combined': COMBINED,
  'apache-combined': COMBINED,
} as const;

export type LogFormatName = keyof typeof LOG_FORMATS;

/** A custom access-log format is not a regular expression with a named group `client`. */
export class AccessLogFormatError extends SluiceError {
  readonly code = 'ERR_SLUICE_ACCESS_LOG_FORMAT';
}

/** A format name, or a custom regex source with a named group `client`; else AccessLogFormatError. */
export function formatRegex(format: string): RegExp {
  if (Object.hasOwn(LOG_FORMATS, format)) return LOG_FORMATS[format as LogFormatName];
  let re: RegExp;
  try {
    re = new RegExp(format);
  } catch (err) {
    throw new AccessLogFormatError(`a custom access-log format must be a regular expression: ${(err as Error).message}`, { cause: err });
  }
  if (!re.source.includes('(?<client>')) throw new AccessLogFormatError('a custom access-log format needs a named group (?<client>...)');
  return re;
}

export type LineResult = 'ok' | 'garbage' | 'bad-address' | 'zone-id';

/**
 * Client address of one log line in canonical text (src/util/ip.ts), or why
 * there is none: `garbage` when the line does not match the format,
 * `zone-id` for a scoped IPv6 address, `bad-address` for any other client
 * field that is not an address (a hostname, 300.1.1.1, a truncated IPv6).
 */
export function parseLogLine(line: string, re: RegExp): { result: LineResult; client: string; family: 4 | 6 | 0 } {
  const m = re.exec(line);
  const raw = m?.groups?.['client'];
  if (raw === undefined) return { result: 'garbage', client: '', family: 0 };
  const text = raw.length > 2 && raw.startsWith('[') && raw.endsWith(']') && raw.includes(':') ? raw.slice(1, -1) : raw;
  if (text.includes('%')) return { result: 'zone-id', client: '', family: 0 };
  const a = parseClientAddress(text);
  if (a === undefined) return { result: 'bad-address', client: '', family: 0 };
  return { result: 'ok', client: a.text, family: a.family };
}

export interface FollowerCounters {
  lines: number;
  requests: number;
  /** Lines that do not match the format. */
  garbage: number;
  /** Lines whose client field is no address of either family. */
  badAddress: number;
  /** Lines whose client is a scoped IPv6 address (with a zone id). */
  zoneId: number;
  /** Of `requests`, those of IPv6 clients. */
  requestsIpv6: number;
  /** Partial lines dropped (at a rotation or truncation, or over the length limit). */
  partial: number;
  rotations: number;
  truncations: number;
  /** Clients not counted because the table was full. */
  tableFull: number;
  readErrors: number;
}

export interface FollowerOptions {
  readonly format: string;
  /** Longest line kept; longer ones are dropped as partial. */
  readonly maxLineBytes?: number;
  /** Most distinct clients per interval; more are counted in tableFull. */
  readonly maxClients?: number;
  /** Read the existing content too (default: start at the end, like tail -F). */
  readonly fromStart?: boolean;
}

export class AccessLogFollower {
  readonly path: string;
  readonly counters: FollowerCounters = { lines: 0, requests: 0, garbage: 0, badAddress: 0, zoneId: 0, requestsIpv6: 0, partial: 0, rotations: 0, truncations: 0, tableFull: 0, readErrors: 0 };
  /** Requests per client (canonical address text) since the last take(). */
  #counts = new Map<string, number>();
  readonly #re: RegExp;
  readonly #maxLine: number;
  readonly #maxClients: number;
  #fd = -1;
  #ino = -1;
  #dev = -1;
  #offset = 0;
  #carry = '';
  #skipping = false; // inside an over-long line: drop until its newline
  readonly #buf = Buffer.allocUnsafe(256 * 1024);

  constructor(path: string, opts: FollowerOptions) {
    this.path = path;
    this.#re = formatRegex(opts.format);
    this.#maxLine = opts.maxLineBytes ?? 16 * 1024;
    this.#maxClients = opts.maxClients ?? 100_000;
    this.#open(opts.fromStart !== true);
  }

  #open(atEnd: boolean): void {
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch {
      return; // not there (yet): the next poll tries again
    }
    const st = fstatSync(fd);
    this.#fd = fd;
    this.#ino = st.ino;
    this.#dev = st.dev;
    this.#offset = atEnd ? st.size : 0;
    this.#carry = '';
    this.#skipping = false;
  }

  #close(): void {
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }

  /** Reads whatever was appended since the last poll. Never throws. */
  poll(): void {
    try {
      this.#poll();
    } catch {
      this.counters.readErrors++;
    }
  }

  #poll(): void {
    if (this.#fd < 0) {
      this.#open(false); // appeared after start (or after a rotation): read it all
      if (this.#fd < 0) return;
    }
    let st: { ino: number; dev: number; size: number } | undefined;
    try {
      st = statSync(this.path);
    } catch {
      st = undefined; // renamed away, new one not created yet
    }
    if (st === undefined || st.ino !== this.#ino || st.dev !== this.#dev) {
      this.#drain(); // the rest of the rotated file
      this.#dropCarry();
      this.#close();
      this.counters.rotations++;
      this.#open(false);
      if (this.#fd >= 0) this.#drain();
      return;
    }
    if (st.size < this.#offset) {
      this.counters.truncations++;
      this.#dropCarry();
      this.#offset = 0;
    }
    this.#drain();
  }

  #dropCarry(): void {
    if (this.#carry !== '' || this.#skipping) this.counters.partial++;
    this.#carry = '';
    this.#skipping = false;
  }

  #drain(): void {
    for (;;) {
      const n = readSync(this.#fd, this.#buf, 0, this.#buf.length, this.#offset);
      if (n <= 0) return;
      this.#offset += n;
      this.#feed(this.#buf.toString('latin1', 0, n));
    }
  }

  #feed(chunk: string): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf('\n', start);
      if (nl < 0) break;
      const piece = chunk.slice(start, nl);
      start = nl + 1;
      if (this.#skipping) {
        this.#skipping = false;
        continue;
      }
      const line = this.#carry === '' ? piece : this.#carry + piece;
      this.#carry = '';
      this.#line(line);
    }
    if (start < chunk.length && !this.#skipping) {
      this.#carry += chunk.slice(start);
      if (this.#carry.length > this.#maxLine) {
        this.counters.partial++;
        this.#carry = '';
        this.#skipping = true;
      }
    }
  }

  #line(line: string): void {
    if (line.length > this.#maxLine) {
      this.counters.partial++;
      return;
    }
    if (line === '') return;
    this.counters.lines++;
    const r = parseLogLine(line, this.#re);
    if (r.result === 'garbage') {
      this.counters.garbage++;
      return;
    }
    if (r.result === 'bad-address') {
      this.counters.badAddress++;
      return;
    }
    if (r.result === 'zone-id') {
      this.counters.zoneId++;
      return;
    }
    this.counters.requests++;
    if (r.family === 6) this.counters.requestsIpv6++;
    const c = this.#counts.get(r.client);
    if (c !== undefined) this.#counts.set(r.client, c + 1);
    else if (this.#counts.size < this.#maxClients) this.#counts.set(r.client, 1);
    else this.counters.tableFull++;
  }

  /** The counts since the last take, and a fresh table. */
  take(): Map<string, number> {
    const out = this.#counts;
    this.#counts = new Map();
    return out;
  }

  close(): void {
    this.#close();
  }
}
