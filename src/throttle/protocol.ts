/**
 * The throttling wire protocol (seed 004, Smockron's gatekeeper/master
 * protocol): ZeroMQ multipart messages on two PUB/SUB sockets, every frame
 * ASCII, the first frame the topic.
 *
 * Topic: the domain followed by one NUL byte. SUB filters are prefixes;
 * the terminator makes them exact ("www" does not receive "www2"'s traffic).
 *
 * Accounting, gatekeeper PUB -> master SUB (4 to 6 frames):
 *   [0] "<domain>\0"
 *   [1] ACCEPTED | DELAYED | REJECTED | RESYNC
 *   [2] identifier (the client's address or prefix, e.g. 198.51.100.7,
 *       198.51.100.0/24 or 2001:db8:1:2::/64); for RESYNC the gatekeeper's
 *       session id
 *   [3] request time, ms since the epoch, decimal (up to 3 fraction digits)
 *   [4] DELAYED: the time the request was delayed to (same format);
 *       otherwise empty or absent
 *   [5] optional debug text for logs (printable ASCII, at most 256 bytes)
 *
 * Control, master PUB -> gatekeeper SUB (4 frames):
 *   [0] "<domain>\0"
 *   [1] DELAY_UNTIL | RESYNC_DONE
 *   [2] identifier | (RESYNC_DONE) the session id the resync answered
 *   [3] DELAY_UNTIL: the next allowable request time (ms, as above);
 *       RESYNC_DONE: how many DELAY_UNTIL the resync published
 *
 * Resync: a gatekeeper that starts or reconnects sends RESYNC per domain;
 * the master publishes a DELAY_UNTIL for every identifier of the domain
 * whose next allowable time is still ahead, then RESYNC_DONE with the
 * gatekeeper's session id. Every gatekeeper subscribed to the domain sees
 * the replay; merging is idempotent (the later time wins), so that is
 * harmless. A gatekeeper without RESYNC_DONE retries (slow joiners: a
 * freshly connected SUB may miss the first messages).
 *
 * Identifiers of both families (issue 23). The identifier frame is text
 * and its own family tag (a separate family frame could only disagree
 * with it): IPv4 is the dotted quad, "/<len>" when shorter than 32; IPv6
 * is the RFC 5952 text of the address masked to the domain's IPv6 prefix
 * length (gatekeeper `prefixLength6`, default 64), "/<len>" when shorter
 * than 128: 2001:db8:1:2::/64. An IPv4-mapped source is sent as the IPv4
 * client it is. IPv4 text never contains ':' and IPv6 text always does,
 * so the two families never share an identifier, nor a store key (the
 * stores key by domain and identifier text: store_memory.ts,
 * store_redis.ts). Decoders take an identifier with ':' only in that
 * canonical form (lower case, zeros compressed as RFC 5952 says, host bits
 * clear, a length 1..127 without leading zeros or none; not IPv4-mapped):
 * one client is one GCRA state whichever gatekeeper spelled it. Everything
 * else is decoded exactly as before.
 *
 * Older versions (no version frame; the frames are unchanged):
 *  - a master from before issue 23 treats identifiers as opaque printable
 *    text: it charges IPv6 identifiers and publishes their DELAY_UNTIL like
 *    any other, so new gatekeepers throttle IPv6 clients with old masters
 *    (it does not check the canonical form: it trusts its gatekeepers);
 *  - a gatekeeper from before issue 23 lets IPv6 clients pass (counted
 *    `untracked` by its checkpoint) and sends no IPv6 identifier; the
 *    DELAY_UNTIL for IPv6 identifiers that other gatekeepers of its domains
 *    caused reach it too and are dropped, counted as `badIdentifier`
 *    (harmless: upgrade every front node and the count stops rising);
 *  - the Redis key layout is unchanged (<prefix><domain>|<identifier>).
 *
 * Decoders never throw: a message that breaks any rule comes back as a
 * reason the receiver counts; the checks are ordered cheapest first.
 */

import { formatIPv6Address, isIPv4Mapped, parseIPv6Address, prefixWordMask } from '../packet/address6.ts';

export const TERMINATOR = '\0';
export const ACCOUNTING_KINDS = ['ACCEPTED', 'DELAYED', 'REJECTED', 'RESYNC'] as const;
export type AccountingKind = (typeof ACCOUNTING_KINDS)[number];
export const CONTROL_KINDS = ['DELAY_UNTIL', 'RESYNC_DONE'] as const;
export type ControlKind = (typeof CONTROL_KINDS)[number];

export const DECODE_REJECTS = ['frames', 'oversized', 'topic', 'kind', 'identifier', 'timestamp', 'delay', 'debug', 'stale', 'future'] as const;
export type DecodeReject = (typeof DECODE_REJECTS)[number];

export const MAX_DOMAIN = 128;
export const MAX_IDENTIFIER = 128;
export const MAX_DEBUG = 256;
const MAX_FRAME = 512;

const DOMAIN_RE = /^[A-Za-z0-9._-]{1,128}$/;
const IDENT_RE = /^[\x21-\x7e]{1,128}$/;
const TS_RE = /^\d{1,15}(\.\d{1,3})?$/;
const PRINTABLE_RE = /^[\x20-\x7e]*$/;

const LENGTH6_RE = /^[1-9]\d?$|^1[01]\d$|^12[0-7]$/;

/**
 * Whether an identifier containing ':' is an IPv6 one in the canonical
 * form (file comment). Allocates (the master's and the gatekeeper's
 * receive paths, not the packet path).
 */
export function isCanonicalIdentifier6(id: string): boolean {
  const slash = id.indexOf('/');
  if (slash >= 0 && !LENGTH6_RE.test(id.slice(slash + 1))) return false;
  const text = slash >= 0 ? id.slice(0, slash) : id;
  const w = parseIPv6Address(text);
  if (w === undefined || isIPv4Mapped(w)) return false;
  if (slash >= 0) {
    const length = Number(id.slice(slash + 1));
    for (let k = 0; k < 4; k++) if ((((w[k] ?? 0) & prefixWordMask(length, k)) >>> 0) !== w[k]) return false;
  }
  return formatIPv6Address(w) === text;
}

export function isDomainName(s: string): boolean {
  return DOMAIN_RE.test(s);
}

export function isIdentifier(s: string): boolean {
  return IDENT_RE.test(s);
}

/** The SUB filter / first frame of a domain. */
export function topicOf(domain: string): string {
  return domain + TERMINATOR;
}

/** ms since the epoch as it travels: integer part and at most 3 decimals. */
export function formatTs(ms: number): string {
  return Number.isInteger(ms) ? String(ms) : ms.toFixed(3);
}

export interface AccountingLimits {
  /** Oldest request time accepted, ms before the receiver's now. */
  readonly maxAgeMs: number;
  /** Largest clock lead of the sender, ms. */
  readonly maxFutureMs: number;
  /** Largest delay a DELAYED message may report, ms. */
  readonly maxDelayMs: number;
}

/** One decoded accounting message; decoders fill a caller-owned object. */
export interface Accounting {
  domain: string;
  kind: AccountingKind;
  identifier: string;
  ts: number;
  /** DELAYED only; NaN otherwise. */
  delayedTo: number;
  /** '' when absent. */
  debug: string;
}

export interface Control {
  domain: string;
  kind: ControlKind;
  identifier: string;
  /** DELAY_UNTIL: the next allowable time; RESYNC_DONE: the count. */
  value: number;
}

export function newAccounting(): Accounting {
  return { domain: '', kind: 'ACCEPTED', identifier: '', ts: 0, delayedTo: NaN, debug: '' };
}

export function newControl(): Control {
  return { domain: '', kind: 'DELAY_UNTIL', identifier: '', value: 0 };
}

export function encodeAccounting(domain: string, kind: AccountingKind, identifier: string, ts: number, delayedTo?: number, debug?: string): string[] {
  const frames = [topicOf(domain), kind, identifier, formatTs(ts)];
  if (delayedTo !== undefined || debug !== undefined) frames.push(delayedTo === undefined ? '' : formatTs(delayedTo));
  if (debug !== undefined) frames.push(debug.length > MAX_DEBUG ? debug.slice(0, MAX_DEBUG) : debug);
  return frames;
}

export function encodeControl(domain: string, kind: ControlKind, identifier: string, value: number): string[] {
  return [topicOf(domain), kind, identifier, formatTs(value)];
}

function decodeTopic(f: Buffer): string | undefined {
  if (f.length < 2 || f.length > MAX_DOMAIN + 1 || f[f.length - 1] !== 0) return undefined;
  const d = f.toString('latin1', 0, f.length - 1);
  return DOMAIN_RE.test(d) ? d : undefined;
}

function decodeTs(f: Buffer): number {
  if (f.length === 0 || f.length > 19) return NaN;
  const s = f.toString('latin1');
  return TS_RE.test(s) ? Number(s) : NaN;
}

function oversized(frames: readonly Buffer[]): boolean {
  for (const f of frames) if (f.length > MAX_FRAME) return true;
  return false;
}

/** Checks one accounting message into `out`; returns undefined when valid, else the reason. */
export function decodeAccounting(frames: readonly Buffer[], now: number, limits: AccountingLimits, out: Accounting): DecodeReject | undefined {
  if (frames.length < 4 || frames.length > 6) return 'frames';
  if (oversized(frames)) return 'oversized';
  const [t, k, id, ts] = frames as [Buffer, Buffer, Buffer, Buffer];
  const domain = decodeTopic(t);
  if (domain === undefined) return 'topic';
  const kind = k.toString('latin1');
  if (kind !== 'ACCEPTED' && kind !== 'DELAYED' && kind !== 'REJECTED' && kind !== 'RESYNC') return 'kind';
  const identifier = id.toString('latin1');
  if (!IDENT_RE.test(identifier) || (identifier.includes(':') && !isCanonicalIdentifier6(identifier))) return 'identifier';
  const when = decodeTs(ts);
  if (Number.isNaN(when)) return 'timestamp';
  if (when < now - limits.maxAgeMs) return 'stale';
  if (when > now + limits.maxFutureMs) return 'future';
  const d = frames[4];
  let delayedTo = NaN;
  if (kind === 'DELAYED') {
    if (d === undefined) return 'delay';
    delayedTo = decodeTs(d);
    if (Number.isNaN(delayedTo) || delayedTo < when || delayedTo - when > limits.maxDelayMs) return 'delay';
  } else if (d !== undefined && d.length > 0) return 'delay';
  const dbg = frames[5];
  let debug = '';
  if (dbg !== undefined) {
    if (dbg.length > MAX_DEBUG) return 'debug';
    debug = dbg.toString('latin1');
    if (!PRINTABLE_RE.test(debug)) return 'debug';
  }
  out.domain = domain;
  out.kind = kind;
  out.identifier = identifier;
  out.ts = when;
  out.delayedTo = delayedTo;
  out.debug = debug;
  return undefined;
}

/**
 * Checks one control message into `out`. `maxAheadMs` bounds DELAY_UNTIL
 * (a time further ahead than any configured delay is garbage or a broken
 * clock and would lock an identifier out).
 */
export function decodeControl(frames: readonly Buffer[], now: number, maxAheadMs: number, out: Control): DecodeReject | undefined {
  if (frames.length !== 4) return 'frames';
  if (oversized(frames)) return 'oversized';
  const [t, k, id, v] = frames as [Buffer, Buffer, Buffer, Buffer];
  const domain = decodeTopic(t);
  if (domain === undefined) return 'topic';
  const kind = k.toString('latin1');
  if (kind !== 'DELAY_UNTIL' && kind !== 'RESYNC_DONE') return 'kind';
  const identifier = id.toString('latin1');
  if (!IDENT_RE.test(identifier) || (identifier.includes(':') && !isCanonicalIdentifier6(identifier))) return 'identifier';
  const value = decodeTs(v);
  if (Number.isNaN(value)) return 'timestamp';
  if (kind === 'DELAY_UNTIL' && value > now + maxAheadMs) return 'future';
  out.domain = domain;
  out.kind = kind;
  out.identifier = identifier;
  out.value = value;
  return undefined;
}
