/**
 * RFC 1035 §5.1 master-file parser for the record types Sluice serves:
 * A, AAAA, NS, CNAME, SOA, PTR, MX, TXT, SRV, NAPTR, DS, SSHFP, TLSA, CAA,
 * and any type in RFC 3597 generic form (`TYPE65534 \# 4 0a000001`); class
 * IN (also written `CLASS1`).
 *
 * Syntax: `$ORIGIN`, `$TTL` (RFC 2308 §4), `$INCLUDE file [origin]`, `@`,
 * relative and absolute names, blank owner = previous owner, optional TTL
 * and class in either order, parentheses joining lines, `;` comments,
 * quoted strings with `\X` and `\DDD` escapes, TTLs in seconds or units
 * (1w2d3h4m5s). `TYPEnnn` names any type; a type Sluice has a form for
 * takes its usual RDATA or generic RDATA (`\# len hex`, decoded into that
 * form, RFC 3597 §5), any other type only generic RDATA.
 *
 * $INCLUDE (RFC 1035 §5.1): the file is relative to the including file's
 * directory; the origin given (else the current one) applies inside it,
 * and after it the including file's origin and current owner are back.
 * $TTL and the last TTL carry on across files. Only files may include
 * (parseZoneFile / checkZoneFile, or a `readFile` option): zone text given
 * as a string never makes the server open files. Depth is at most
 * MAX_INCLUDE_DEPTH, a file including itself (directly or not) is an
 * error, and all files together are bounded as one file is.
 *
 * TTL of a record without one: `$TTL` in force, else `opts.defaultTtl`
 * (an implicit `$TTL` at the top of the file), else the last TTL written
 * on a record (RFC 1035 §5.1), else an error.
 *
 * Zone rules checked: exactly one SOA, at the origin; at least one NS at
 * the origin; every owner inside the origin; a CNAME alone at its name
 * (RFC 1034 §3.6.2, no DNSSEC exceptions); one TTL per RRset (RFC 2181
 * §5.2); no NS at a wildcard (RFC 4592 §4.2). Identical records are kept
 * once (RFC 2181 §5). Data below a delegation other than glue is kept but
 * never answered (the lookup refers instead).
 *
 * Not supported (an error each): `$GENERATE`, classes other than IN,
 * meta types (0, OPT, 128-255) and the types dns2 encodes in a form Sluice
 * does not hold (DNSKEY, SPF), names with octets other than letters,
 * digits, '-', '_', '/' (dns2 writes names as dotted text, so a '.' inside
 * a label cannot be represented), '*' other than as the whole leftmost
 * label, TXT strings and CAA values that are not UTF-8.
 *
 * Errors: the whole text is read; every problem is a ZoneError whose
 * message is `file:line: what is wrong; how to fix it`, like
 * named-checkzone lists them. A line with a problem is left out (so the
 * zone rules may add errors of their own). checkZone* return them all;
 * parseZone* throw the first (a zone with any error is never served).
 *
 * Bounds: the text is at most 64 MiB and yields at most 1M records, at
 * most MAX_ERRORS errors are kept, so a bad file costs bounded memory; the
 * parse is one linear pass per file.
 */
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { dirname, resolve } from 'node:path';
import { InvalidArgumentError, SluiceError } from '../../errors/errors.ts';
import { DNSSEC_ALGORITHMS, DS_DIGEST_LENGTH, decodeRdata, dsRdata, labelOk, naptrRdata, octetsThenData } from './rdata.ts';
import { CLASS_IN, GENERIC_TYPE, RRTYPE, TYPE_BY_NAME, inZone, wireType, type DataType, type RR } from './records.ts';

export const MAX_ZONE_BYTES = 64 * 1024 * 1024;
export const MAX_ZONE_RECORDS = 1_000_000;
/** RFC 2181 §8: TTLs are 31-bit. */
export const MAX_TTL = 0x7fffffff;
/** $INCLUDE nesting at most this deep (the top file is depth 0). */
export const MAX_INCLUDE_DEPTH = 8;
/** Errors kept at most; the last one says that more were left out. */
export const MAX_ERRORS = 1000;
/** RFC 1035 §3.2.1: RDLENGTH is 16 bits. */
const MAX_RDATA = 65535;

/** A zone file problem; `file` and `line` say where (also in the message; line 0: the file as a whole). */
export abstract class ZoneError extends SluiceError {
  readonly file: string;
  readonly line: number;
  constructor(file: string, line: number, what: string, fix: string) {
    super(`${file}${line > 0 ? `:${line}` : ''}: ${what}; ${fix}`);
    this.file = file;
    this.line = line;
  }
}
/** Malformed text: bad token, missing field, bad address or name. */
export class ZoneSyntaxError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_SYNTAX';
}
/** Valid master-file text Sluice does not accept ($GENERATE, class CH, type SPF...). */
export class ZoneUnsupportedError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_UNSUPPORTED';
}
/** A number, TTL, label or name outside its range. */
export class ZoneRangeError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_RANGE';
}
/** Well-formed records that do not make a valid zone (SOA, NS, CNAME rules, names outside). */
export class ZoneDataError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_DATA';
}
/** The file is over MAX_ZONE_BYTES or MAX_ZONE_RECORDS. */
export class ZoneTooLargeError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_TOO_LARGE';
}
/** A zone file or an $INCLUDE'd file cannot be read, includes itself, or nests too deep. */
export class ZoneIncludeError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_INCLUDE';
}

export interface ParseOptions {
  /** The zone's origin; else the first `$ORIGIN` before any record. Trailing dot optional. */
  readonly origin?: string;
  /** Named in error messages; $INCLUDE paths are relative to its directory. */
  readonly file?: string;
  /** TTL for records without one when no `$TTL` is in force. */
  readonly defaultTtl?: number;
  /** Reads an $INCLUDE'd file (its resolved path). Without it, $INCLUDE is refused. */
  readonly readFile?: (path: string) => string;
}

export interface ParsedZone {
  readonly origin: string;
  readonly records: readonly RR[];
}

/** Everything a check finds: the zone when there is no error, else every error in file order (per file). */
export interface ZoneReport {
  readonly zone: ParsedZone | undefined;
  readonly errors: readonly ZoneError[];
}

interface Token {
  /** Raw text, escapes not yet decoded; quotes removed. */
  readonly text: string;
  readonly quoted: boolean;
  readonly line: number;
}

/** One logical line: a directive or a record, parentheses already joined. */
interface Entry {
  /** The line does not start in column 0: the owner is the previous one. */
  readonly blankOwner: boolean;
  readonly tokens: readonly Token[];
}

type ErrorClass = new (file: string, line: number, what: string, fix: string) => ZoneError;

const TYPE_NAME = new Map([...TYPE_BY_NAME].map(([k, v]) => [v, k]));
const CLASSES = new Set(['IN', 'CH', 'CS', 'HS']);
const CLASS_NUMBER: Readonly<Record<string, number>> = { IN: 1, CS: 2, CH: 3, HS: 4 };
/**
 * Types refused even in generic form: meta types (RFC 6895 §3.1: 0, OPT,
 * 128-255) and the types dns2 has an encoder for that expects a form Sluice
 * does not hold (a generic record of such a type would be mis-encoded).
 */
const REFUSED_TYPES: ReadonlyMap<number, string> = new Map([
  [0, 'type 0 is reserved (RFC 6895 §3.1)'],
  [41, 'OPT is a pseudo-record of each message, never zone data (RFC 6891 §6.1.1)'],
  [48, 'DNSKEY: Sluice does not serve signed zones'],
  [99, 'SPF records are obsolete (RFC 7208 §3.1); publish the policy as TXT'],
]);
const TTL_UNITS: Readonly<Record<string, number>> = { w: 604800, d: 86400, h: 3600, m: 60, s: 1 };
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses zone text given as a string; throws the first ZoneError found (see checkZone for all). */
export function parseZone(text: string, opts: ParseOptions = {}): ParsedZone {
  return orThrow(checkZone(text, opts));
}

/** Reads and parses a zone file, $INCLUDE allowed; throws the first ZoneError found. */
export function parseZoneFile(file: string, opts: Omit<ParseOptions, 'file'> = {}): ParsedZone {
  return orThrow(checkZoneFile(file, opts));
}

function orThrow(r: ZoneReport): ParsedZone {
  const first = r.errors[0];
  if (first !== undefined) throw first;
  if (r.zone === undefined) throw new InvalidArgumentError('a zone check returned neither a zone nor an error');
  return r.zone;
}

/** Reads a zone file ($INCLUDE allowed, relative to it) and reports every error. */
export function checkZoneFile(file: string, opts: Omit<ParseOptions, 'file'> = {}): ZoneReport {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    return { zone: undefined, errors: [new ZoneIncludeError(file, 0, `cannot read the file (${(err as Error).message})`, 'check the path and its permissions')] };
  }
  return checkZone(text, { readFile: (path) => readFileSync(path, 'utf8'), ...opts, file });
}

/** Parses zone text and reports every error (InvalidArgumentError for bad options). */
export function checkZone(text: string, opts: ParseOptions = {}): ZoneReport {
  const dt = opts.defaultTtl;
  if (dt !== undefined && !(Number.isInteger(dt) && dt >= 0 && dt <= MAX_TTL)) {
    throw new InvalidArgumentError(`defaultTtl ${dt} must be an integer 0..${MAX_TTL}`);
  }
  const origin = opts.origin === undefined ? undefined : normaliseOrigin(opts.origin);
  return new ZoneParser(origin, dt, opts.readFile).run(text, opts.file ?? '<zone>');
}

/** Per-file state: what $INCLUDE saves and restores. */
interface FileState {
  readonly z: ZoneText;
  /** The base of relative names ($ORIGIN moves it). */
  origin: string | undefined;
  lastOwner: string | undefined;
}

class ZoneParser {
  /** The zone's own origin: fixed by the option or the first $ORIGIN; later $ORIGINs only move the relative base. */
  #zoneOrigin: string | undefined;
  readonly #startOrigin: string | undefined;
  #dollarTtl: number | undefined;
  #lastTtl: number | undefined;
  #soaLine: number | undefined;
  #bytes = 0;
  readonly #readFile: ((path: string) => string) | undefined;
  readonly #records: RR[] = [];
  readonly #errors: ZoneError[] = [];
  // Per name: wire type → line and TTL of the RRset's first record (for the zone rules).
  readonly #rrsets = new Map<string, Map<number, { line: number; ttl: number }>>();
  readonly #seen = new Set<string>();
  /** Resolved paths of the files being read, outermost first (loop detection). */
  readonly #chain: string[] = [];

  constructor(origin: string | undefined, defaultTtl: number | undefined, readFile: ((path: string) => string) | undefined) {
    this.#zoneOrigin = origin;
    this.#startOrigin = origin;
    this.#dollarTtl = defaultTtl;
    this.#readFile = readFile;
  }

  run(text: string, file: string): ZoneReport {
    const z = new ZoneText(file);
    this.#file(text, { z, origin: this.#startOrigin, lastOwner: undefined }, resolve(file));
    const zoneOrigin = this.#zoneOrigin;
    if (this.#errors.length < MAX_ERRORS && (zoneOrigin === undefined || this.#soaLine === undefined)) {
      this.#report(z.error(ZoneDataError, 1, `the zone${zoneOrigin === undefined ? '' : ` "${zoneOrigin}"`} has no SOA record`, 'add one at the origin, e.g. "@ IN SOA ns1 hostmaster 1 1h 15m 1w 5m"'));
    } else if (zoneOrigin !== undefined && this.#rrsets.get(zoneOrigin)?.has(RRTYPE.NS) !== true) {
      this.#report(z.error(ZoneDataError, this.#soaLine ?? 1, `the zone "${zoneOrigin}" has no NS record at its origin`, 'add at least one "@ IN NS <server>" record'));
    }
    if (this.#errors.length > 0 || zoneOrigin === undefined) return { zone: undefined, errors: this.#errors };
    return { zone: { origin: zoneOrigin, records: this.#records }, errors: [] };
  }

  /** Keeps an error; beyond MAX_ERRORS, one last error says the rest were left out. */
  #report(err: ZoneError): void {
    if (this.#errors.length < MAX_ERRORS - 1) this.#errors.push(err);
    else if (this.#errors.length === MAX_ERRORS - 1) this.#errors.push(new ZoneSyntaxError(err.file, err.line, `more than ${MAX_ERRORS} errors; the rest are not listed`, 'fix these first'));
  }

  #full(): boolean {
    return this.#errors.length >= MAX_ERRORS;
  }

  #file(text: string, st: FileState, path: string): void {
    const z = st.z;
    this.#bytes += Buffer.byteLength(text);
    if (this.#bytes > MAX_ZONE_BYTES) {
      this.#report(z.error(ZoneTooLargeError, 1, `the zone's files are over ${MAX_ZONE_BYTES} bytes`, 'split the data into several zones'));
      return;
    }
    this.#chain.push(path);
    try {
      for (const e of entries(text, z, (err) => {
        this.#report(err);
      })) {
        if (this.#full()) return;
        try {
          this.#entry(e, st);
        } catch (err) {
          if (!(err instanceof ZoneError)) throw err;
          this.#report(err);
        }
      }
    } finally {
      this.#chain.pop();
    }
  }

  #entry(e: Entry, st: FileState): void {
    const z = st.z;
    const first = e.tokens[0];
    if (first === undefined) return;
    const at = first.line;

    if (!first.quoted && first.text.startsWith('$')) {
      const directive = first.text.toUpperCase();
      if (directive === '$INCLUDE') {
        this.#include(e, st);
        return;
      }
      if (directive !== '$ORIGIN' && directive !== '$TTL') throw z.error(ZoneUnsupportedError, at, `unknown directive ${first.text}`, 'use $ORIGIN, $TTL or $INCLUDE');
      const arg = e.tokens[1];
      if (arg === undefined || e.tokens.length > 2) {
        throw z.error(ZoneSyntaxError, at, `${directive} takes one value`, `write e.g. ${directive === '$TTL' ? '$TTL 3600' : '$ORIGIN example.test.'}`);
      }
      if (directive === '$TTL') this.#dollarTtl = z.ttl(arg, '$TTL');
      else st.origin = z.name(arg, st.origin, '$ORIGIN');
      this.#zoneOrigin ??= st.origin;
      return;
    }

    let i = 0;
    let owner = st.lastOwner;
    if (!e.blankOwner) {
      owner = z.name(first, st.origin, 'owner');
      i = 1;
    }
    if (owner === undefined) throw z.error(ZoneSyntaxError, at, 'the first record has no owner (its line starts with a space)', 'start the line with the owner name or @');
    const zoneOrigin = this.#zoneOrigin;
    if (zoneOrigin === undefined) throw z.error(ZoneSyntaxError, at, 'a record before the zone origin is known', 'add $ORIGIN at the top or pass the origin');
    if (!inZone(owner, zoneOrigin)) {
      throw z.error(ZoneDataError, at, `owner "${owner}" is outside the zone origin "${zoneOrigin}"`, 'put the record in the zone for its name, or fix $ORIGIN');
    }
    st.lastOwner = owner;

    // [TTL] [class] or [class] [TTL], then the type. Types never start with a
    // digit. The loop leaves i just past the type: the first rdata token.
    let rrTtl: number | undefined;
    let sawClass = false;
    let typeTok: Token | undefined;
    for (; i < e.tokens.length && typeTok === undefined; i++) {
      const t = e.tokens[i];
      if (t === undefined) break;
      const u = t.text.toUpperCase();
      if (rrTtl === undefined && !t.quoted && /^\d/.test(t.text)) rrTtl = z.ttl(t, 'TTL');
      else if (!sawClass && !t.quoted && (CLASSES.has(u) || /^CLASS\d+$/.test(u))) {
        const n = CLASS_NUMBER[u] ?? (u.startsWith('CLASS') ? Number(u.slice(5)) : -1);
        if (n !== CLASS_IN) throw z.error(ZoneUnsupportedError, t.line, `class ${u} is not supported`, 'Sluice serves class IN only; write IN (or CLASS1) or leave the class out');
        sawClass = true;
      } else typeTok = t;
    }
    if (typeTok === undefined) throw z.error(ZoneSyntaxError, at, 'the record has no type', 'write the type and its data, e.g. "www IN A 192.0.2.1"');
    const type = z.type(typeTok);
    if (rrTtl !== undefined) this.#lastTtl = rrTtl;
    const ttl = rrTtl ?? this.#dollarTtl ?? this.#lastTtl;
    if (ttl === undefined) throw z.error(ZoneSyntaxError, at, 'the record has no TTL', 'add "$TTL 3600" at the top of the file or a TTL on the record');
    const tname = TYPE_NAME.get(type as DataType) ?? `TYPE${type}`;
    const f = new Fields(z, e.tokens, i, tname, typeTok.line);
    const rr = rdata(z, type, { name: owner, class: CLASS_IN, ttl }, f, st.origin);
    f.end();
    this.#add(z, rr, at);
  }

  #include(e: Entry, st: FileState): void {
    const z = st.z;
    const first = e.tokens[0];
    const at = first?.line ?? 1;
    const fileTok = e.tokens[1];
    if (fileTok === undefined || e.tokens.length > 3) throw z.error(ZoneSyntaxError, at, '$INCLUDE takes a file name and an optional origin', 'write e.g. "$INCLUDE hosts.zone" or "$INCLUDE hosts.zone sub.example.test."');
    if (this.#readFile === undefined) {
      // Zone text from a string (not a file): never make the server open files.
      throw z.error(ZoneUnsupportedError, at, '$INCLUDE in zone text that is not read from a file', 'load the zone from a file (zones[].file) to use $INCLUDE');
    }
    const originTok = e.tokens[2];
    const origin = originTok === undefined ? st.origin : z.name(originTok, st.origin, '$INCLUDE origin');
    const name = z.octets(fileTok).toString('utf8');
    const path = resolve(dirname(resolve(z.file)), name);
    if (this.#chain.includes(path)) throw z.error(ZoneIncludeError, at, `$INCLUDE ${name} includes a file already being read (${path})`, 'remove the loop');
    if (this.#chain.length > MAX_INCLUDE_DEPTH) throw z.error(ZoneIncludeError, at, `$INCLUDE ${name} nests more than ${MAX_INCLUDE_DEPTH} files deep`, 'include fewer levels');
    let text: string;
    try {
      text = this.#readFile(path);
    } catch (err) {
      throw z.error(ZoneIncludeError, at, `cannot read $INCLUDE file ${path} (${(err as Error).message})`, 'check the path (relative to this file) and its permissions');
    }
    this.#zoneOrigin ??= origin;
    // The included file's origin and owner are its own; ours are untouched (RFC 1035 §5.1).
    this.#file(text, { z: new ZoneText(name.startsWith('/') ? name : resolveForMessage(z.file, name)), origin, lastOwner: undefined }, path);
  }

  #add(z: ZoneText, rr: RR, line: number): void {
    const wt = wireType(rr);
    let types = this.#rrsets.get(rr.name);
    if (types === undefined) this.#rrsets.set(rr.name, (types = new Map<number, { line: number; ttl: number }>()));
    const set = types.get(wt);
    const tname = TYPE_NAME.get(wt as DataType) ?? `TYPE${wt}`;
    if (set !== undefined && set.ttl !== rr.ttl) {
      throw z.error(ZoneDataError, line, `TTL ${rr.ttl} differs from TTL ${set.ttl} of the "${rr.name}" ${tname} records at line ${set.line}`, 'give every record of an RRset the same TTL (RFC 2181 §5.2)');
    }
    const key = JSON.stringify(rr);
    if (this.#seen.has(key)) return; // an identical record: an RRset is a set
    if (rr.type === RRTYPE.SOA) {
      if (rr.name !== this.#zoneOrigin) throw z.error(ZoneDataError, line, `SOA at "${rr.name}", not at the origin "${this.#zoneOrigin ?? ''}"`, 'a zone has its one SOA at the origin (@)');
      if (this.#soaLine !== undefined) throw z.error(ZoneDataError, line, `a second SOA record (the first is at line ${this.#soaLine})`, 'keep exactly one SOA');
    }
    if (rr.type === RRTYPE.NS && rr.name.startsWith('*')) {
      throw z.error(ZoneUnsupportedError, line, `NS at the wildcard "${rr.name}"`, 'wildcard delegations are undefined (RFC 4592 §4.2); delegate each name');
    }
    if (rr.type === RRTYPE.CNAME && set !== undefined) {
      throw z.error(ZoneDataError, line, `a second CNAME at "${rr.name}" (the first is at line ${set.line})`, 'an alias has exactly one target; remove one');
    }
    const clash = rr.type === RRTYPE.CNAME ? types.values().next().value : types.get(RRTYPE.CNAME);
    if (clash !== undefined) {
      throw z.error(ZoneDataError, line, `"${rr.name}" has a CNAME and other data (see line ${clash.line})`, 'a CNAME must be alone at its name (RFC 1034 §3.6.2); move the other data or the alias');
    }
    if (this.#records.length >= MAX_ZONE_RECORDS) throw z.error(ZoneTooLargeError, line, `more than ${MAX_ZONE_RECORDS} records`, 'split the data into several zones');
    this.#seen.add(key);
    if (rr.type === RRTYPE.SOA) this.#soaLine = line;
    if (set === undefined) types.set(wt, { line, ttl: rr.ttl });
    this.#records.push(Object.freeze(rr));
  }
}

/** An included file's name as errors show it: relative names stay relative to the including file's directory. */
function resolveForMessage(including: string, name: string): string {
  const dir = dirname(including);
  return dir === '.' ? name : `${dir}/${name}`;
}

/** The origin a caller passed: absolute, trailing dot optional, any case. */
function normaliseOrigin(origin: string): string {
  if (origin === '' || origin === '.') return '';
  try {
    return new ZoneText('<origin>').name({ text: origin.endsWith('.') ? origin : `${origin}.`, quoted: false, line: 0 }, undefined, 'origin');
  } catch (err) {
    throw new InvalidArgumentError(`origin "${origin}" is not a valid domain name`, { cause: err });
  }
}

type Base = { name: string; class: typeof CLASS_IN; ttl: number };

function rdata(z: ZoneText, type: number, base: Base, f: Fields, origin: string | undefined): RR {
  const generic = f.peekGeneric();
  const known = TYPE_NAME.has(type as DataType) ? (type as DataType) : undefined;
  if (generic) {
    const data = f.generic();
    if (known === undefined) return { ...base, type: GENERIC_TYPE, rrtype: type, data };
    const fields = decodeRdata(known, data);
    if (typeof fields === 'string') throw z.error(ZoneSyntaxError, f.line, `generic ${TYPE_NAME.get(known) ?? ''} RDATA: ${fields}`, `write RDATA a ${TYPE_NAME.get(known) ?? ''} record can hold (RFC 3597 §5), or its usual form`);
    return { ...base, ...fields };
  }
  if (known === undefined) throw z.error(ZoneSyntaxError, f.line, `TYPE${type} data is not in generic form`, 'Sluice has no form for this type: write its RDATA as "\\# <length> <hex>" (RFC 3597 §5)');
  return knownRdata(z, known, base, f, origin);
}

function knownRdata(z: ZoneText, type: DataType, base: Base, f: Fields, origin: string | undefined): RR {
  switch (type) {
    case RRTYPE.A:
      return { ...base, type, address: z.ipv4(f.next('address')) };
    case RRTYPE.AAAA:
      return { ...base, type, address: z.ipv6(f.next('address')) };
    case RRTYPE.NS:
      return { ...base, type, ns: z.name(f.next('name server'), origin, 'name server') };
    case RRTYPE.CNAME:
      return { ...base, type, domain: z.name(f.next('target'), origin, 'CNAME target') };
    case RRTYPE.PTR:
      return { ...base, type, domain: z.name(f.next('target'), origin, 'PTR target') };
    case RRTYPE.MX:
      return { ...base, type, priority: z.uint(f.next('preference'), 65535, 'MX preference'), exchange: z.name(f.next('exchange'), origin, 'MX exchange') };
    case RRTYPE.SRV:
      return {
        ...base,
        type,
        priority: z.uint(f.next('priority'), 65535, 'SRV priority'),
        weight: z.uint(f.next('weight'), 65535, 'SRV weight'),
        port: z.uint(f.next('port'), 65535, 'SRV port'),
        target: z.name(f.next('target'), origin, 'SRV target'),
      };
    case RRTYPE.SOA:
      // The timers take TTL syntax (1h, 2w) and its 31-bit range; the serial is a plain u32.
      return {
        ...base,
        type,
        primary: z.name(f.next('primary name server'), origin, 'SOA primary'),
        admin: z.name(f.next('admin mailbox'), origin, 'SOA admin mailbox'),
        serial: z.uint(f.next('serial'), 0xffffffff, 'SOA serial'),
        refresh: z.ttl(f.next('refresh'), 'SOA refresh'),
        retry: z.ttl(f.next('retry'), 'SOA retry'),
        expiration: z.ttl(f.next('expire'), 'SOA expire'),
        minimum: z.ttl(f.next('minimum'), 'SOA minimum'),
      };
    case RRTYPE.TXT: {
      const data = [z.txt(f.next('text'))];
      while (f.more()) data.push(z.txt(f.next('text')));
      return { ...base, type, data: Object.freeze(data) };
    }
    case RRTYPE.CAA: {
      // RFC 8659 §4.1.1: flags, a tag of ASCII letters and digits, the value (the rest of the RDATA).
      const flags = z.uint(f.next('flags'), 255, 'CAA flags');
      const tag = z.word(f.next('tag'), 'CAA tag');
      if (!/^[a-z0-9]{1,255}$/i.test(tag)) throw z.error(ZoneSyntaxError, f.line, `CAA tag "${tag}" is not ASCII letters and digits`, 'write a tag like issue, issuewild or iodef (RFC 8659 §4.1)');
      const valueTok = f.next('value');
      const value = z.octets(valueTok);
      try {
        return { ...base, type, flags, tag, value: utf8.decode(value) };
      } catch {
        throw z.error(ZoneUnsupportedError, valueTok.line, `CAA value "${valueTok.text}" is not UTF-8`, 'Sluice holds CAA values as UTF-8 text; escape only whole UTF-8 sequences');
      }
    }
    case RRTYPE.NAPTR: {
      // RFC 3403 §4.1; the replacement is a name ("." for none), never compressed.
      const order = z.uint(f.next('order'), 65535, 'NAPTR order');
      const preference = z.uint(f.next('preference'), 65535, 'NAPTR preference');
      const flags = z.charString(f.next('flags'), 'NAPTR flags');
      const services = z.charString(f.next('services'), 'NAPTR services');
      const regexp = z.charString(f.next('regexp'), 'NAPTR regexp');
      const replacement = z.name(f.next('replacement'), origin, 'NAPTR replacement');
      return { ...base, type, data: naptrRdata(order, preference, flags, services, regexp, replacement) };
    }
    case RRTYPE.SSHFP: {
      // RFC 4255 §3.2: algorithm, fingerprint type, the fingerprint in hex (spaces allowed).
      const algorithm = z.uint(f.next('algorithm'), 255, 'SSHFP algorithm');
      const fpType = z.uint(f.next('fingerprint type'), 255, 'SSHFP fingerprint type');
      return { ...base, type, data: octetsThenData([algorithm, fpType], f.hex('fingerprint')) };
    }
    case RRTYPE.TLSA: {
      // RFC 6698 §2.2: usage, selector, matching type, the association data in hex.
      const usage = z.uint(f.next('usage'), 255, 'TLSA usage');
      const selector = z.uint(f.next('selector'), 255, 'TLSA selector');
      const matching = z.uint(f.next('matching type'), 255, 'TLSA matching type');
      return { ...base, type, data: octetsThenData([usage, selector, matching], f.hex('certificate association data')) };
    }
    case RRTYPE.DS: {
      // RFC 4034 §5.3: key tag, algorithm (number or mnemonic), digest type, digest in hex.
      const keyTag = z.uint(f.next('key tag'), 65535, 'DS key tag');
      const algTok = f.next('algorithm');
      const alg = /^\d+$/.test(algTok.text) ? z.uint(algTok, 255, 'DS algorithm') : DNSSEC_ALGORITHMS.get(z.word(algTok, 'DS algorithm').toUpperCase());
      if (alg === undefined) throw z.error(ZoneSyntaxError, algTok.line, `DS algorithm "${algTok.text}" is not a number or a known mnemonic`, `write a number or one of ${[...DNSSEC_ALGORITHMS.keys()].join(', ')}`);
      const digestType = z.uint(f.next('digest type'), 255, 'DS digest type');
      const digest = f.hex('digest');
      const want = DS_DIGEST_LENGTH.get(digestType);
      if (want !== undefined && digest.length !== want) throw z.error(ZoneSyntaxError, f.line, `a DS digest of type ${digestType} is ${want} octets, not ${digest.length}`, 'copy the whole digest (e.g. from dnssec-dsfromkey)');
      return { ...base, type, data: dsRdata(keyTag, alg, digestType, digest) };
    }
  }
}

/** Field parsers; every error names this file and the token's line. */
class ZoneText {
  readonly file: string;
  constructor(file: string) {
    this.file = file;
  }

  error(cls: ErrorClass, line: number, what: string, fix: string): ZoneError {
    return new cls(this.file, line, what, fix);
  }

  word(t: Token, what: string): string {
    if (t.quoted) throw this.error(ZoneSyntaxError, t.line, `${what} "${t.text}" is quoted`, 'only TXT strings are quoted; remove the quotes');
    return t.text;
  }

  /** A type: a mnemonic Sluice knows, or TYPEnnn (RFC 3597 §5) for any type that is not refused. */
  type(t: Token): number {
    const u = this.word(t, 'type').toUpperCase();
    const known = TYPE_BY_NAME.get(u);
    if (known !== undefined) return known;
    const m = /^TYPE(\d{1,5})$/.exec(u);
    if (m === null) {
      throw this.error(ZoneUnsupportedError, t.line, `unknown or unsupported type "${t.text}"`, `Sluice serves ${[...TYPE_BY_NAME.keys()].join(', ')}; write any other type as TYPEnnn with generic RDATA "\\# <length> <hex>" (RFC 3597 §5)`);
    }
    const n = Number(m[1]);
    if (n > 65535) throw this.error(ZoneRangeError, t.line, `type ${t.text} is over 65535`, 'a type is 16 bits');
    const refused = REFUSED_TYPES.get(n) ?? (n >= 128 && n <= 255 ? `TYPE${n} is a meta or query type (RFC 6895 §3.1)` : undefined);
    if (refused !== undefined) throw this.error(ZoneUnsupportedError, t.line, refused, 'remove the record');
    return n;
  }

  /** A <character-string> (RFC 1035 §5.1): at most 255 octets, any octets. */
  charString(t: Token, what: string): Buffer {
    const b = this.octets(t);
    if (b.length > 255) throw this.error(ZoneRangeError, t.line, `${what} of ${b.length} octets`, 'a character-string is at most 255 octets');
    return b;
  }

  /** Decodes `\X` and `\DDD` (RFC 1035 §5.1) into octets; the rest of the text is UTF-8. */
  octets(t: Token): Buffer {
    const s = t.text;
    if (!s.includes('\\')) return Buffer.from(s, 'utf8');
    const out: Buffer[] = [];
    let from = 0;
    for (let i = s.indexOf('\\'); i >= 0; i = s.indexOf('\\', from)) {
      out.push(Buffer.from(s.slice(from, i), 'utf8'));
      const digits = /^\d{1,3}/.exec(s.slice(i + 1, i + 4))?.[0];
      if (digits !== undefined) {
        if (digits.length !== 3) throw this.error(ZoneSyntaxError, t.line, `bad escape "\\${digits}" in "${s}"`, 'a decimal escape has exactly three digits, e.g. \\032');
        const v = Number(digits);
        if (v > 255) throw this.error(ZoneRangeError, t.line, `escape "\\${digits}" in "${s}" is over 255`, 'a decimal escape is one octet, \\000 to \\255');
        out.push(Buffer.of(v));
        from = i + 4;
      } else {
        // The tokenizer guarantees a character follows every backslash.
        const ch = String.fromCodePoint(s.codePointAt(i + 1) ?? 0);
        out.push(Buffer.from(ch, 'utf8'));
        from = i + 1 + ch.length;
      }
    }
    out.push(Buffer.from(s.slice(from), 'utf8'));
    return Buffer.concat(out);
  }

  /** A domain name: `@`, relative to `origin`, or absolute (trailing dot); returned lowercase without the dot. */
  name(t: Token, origin: string | undefined, what: string): string {
    const s = this.word(t, what);
    const base = (): string => {
      if (origin === undefined) throw this.error(ZoneSyntaxError, t.line, `${what} "${s}" is relative but no origin is known`, 'add $ORIGIN before it, pass the origin, or end the name with a dot');
      return origin;
    };
    if (s === '@') return base();
    if (s === '.') return '';
    // Split on unescaped dots; a final unescaped dot makes the name absolute.
    const raw: string[] = [];
    let label = '';
    let absolute = false;
    for (let i = 0; i < s.length; i++) {
      const c = s.charAt(i);
      absolute = c === '.';
      if (c === '\\') {
        label += s.slice(i, i + 2); // kept escaped: decoded per label below
        i++;
      } else if (c === '.') {
        raw.push(label);
        label = '';
      } else label += c;
    }
    if (!absolute) raw.push(label);
    const labels = raw.map((l) => {
      if (l === '') throw this.error(ZoneSyntaxError, t.line, `${what} "${s}" has an empty label`, 'remove the doubled or leading dot');
      const b = this.octets({ ...t, text: l });
      if (b.length > 63) throw this.error(ZoneRangeError, t.line, `label "${l}" in ${what} "${s}" is ${b.length} octets`, 'a label is at most 63 octets (RFC 1035 §2.3.4)');
      const text = b.toString('latin1');
      if (!labelOk(text)) {
        throw this.error(ZoneUnsupportedError, t.line, `label "${l}" in ${what} "${s}" has a character Sluice does not accept`, "use letters, digits, '-', '_' and '/' only");
      }
      return text.toLowerCase();
    });
    const rel = labels.join('.');
    let full = rel;
    if (!absolute) {
      const o = base();
      full = o === '' ? rel : `${rel}.${o}`;
    }
    if (full.lastIndexOf('*') > 0) throw this.error(ZoneUnsupportedError, t.line, `${what} "${s}" has '*' below the leftmost label`, "'*' is only a wildcard, as the whole leftmost label");
    // Wire length: a length octet per label, plus the root octet.
    const wire = full === '' ? 1 : full.length + 2;
    if (wire > 255) throw this.error(ZoneRangeError, t.line, `${what} "${full}" is ${wire} octets`, 'a name is at most 255 octets (RFC 1035 §2.3.4)');
    return full;
  }

  uint(t: Token, max: number, what: string): number {
    const s = this.word(t, what);
    if (!/^\d+$/.test(s)) throw this.error(ZoneSyntaxError, t.line, `${what} "${s}" is not a number`, 'write a decimal integer');
    const v = Number(s);
    if (v > max) throw this.error(ZoneRangeError, t.line, `${what} ${s} is out of range`, `use 0..${max}`);
    return v;
  }

  /** Seconds, or units (1w2d3h4m5s, any case); 0..2^31-1. */
  ttl(t: Token, what: string): number {
    const s = this.word(t, what);
    let v = 0;
    if (/^\d+$/.test(s)) v = Number(s);
    else if (/^(\d+[wdhms])+$/i.test(s)) {
      for (const [, n, u] of s.matchAll(/(\d+)([wdhms])/gi)) v += Number(n) * (TTL_UNITS[(u ?? '').toLowerCase()] ?? 0);
    } else throw this.error(ZoneSyntaxError, t.line, `${what} "${s}" is not a time`, 'write seconds (3600) or units (1h30m; w d h m s)');
    if (v > MAX_TTL) throw this.error(ZoneRangeError, t.line, `${what} ${s} is over ${MAX_TTL} seconds`, 'use a smaller value (RFC 2181 §8)');
    return v;
  }

  /** A strict dotted quad: four decimal octets, no leading zeros (they read as octal elsewhere). */
  ipv4(t: Token): string {
    const s = this.word(t, 'IPv4 address');
    const parts = s.split('.');
    if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255)) {
      throw this.error(ZoneSyntaxError, t.line, `"${s}" is not an IPv4 address`, 'write a dotted quad, e.g. 192.0.2.1 (no leading zeros)');
    }
    return s;
  }

  ipv6(t: Token): string {
    const s = this.word(t, 'IPv6 address');
    if (s.includes('%') || !isIPv6(s)) throw this.error(ZoneSyntaxError, t.line, `"${s}" is not an IPv6 address`, 'write e.g. 2001:db8::1 (no zone index)');
    // The WHATWG URL serializer gives RFC 5952 text without a dotted quad:
    // the form dns2 decodes to and can encode (it cannot encode ::ffff:1.2.3.4).
    return new URL(`http://[${s}]`).hostname.slice(1, -1);
  }

  /** One TXT character-string: at most 255 octets, held as UTF-8 text (what dns2 encodes). */
  txt(t: Token): string {
    const b = this.octets(t);
    if (b.length > 255) throw this.error(ZoneRangeError, t.line, `a TXT string of ${b.length} octets`, 'split it into several quoted strings of at most 255 octets');
    try {
      return utf8.decode(b);
    } catch {
      throw this.error(ZoneUnsupportedError, t.line, `TXT string "${t.text}" is not UTF-8`, 'Sluice holds TXT data as UTF-8 text; escape only whole UTF-8 sequences');
    }
  }
}

/** The rdata tokens of one record, taken in order. */
class Fields {
  readonly #z: ZoneText;
  readonly #tokens: readonly Token[];
  #i: number;
  readonly #type: string;
  readonly #line: number;
  constructor(z: ZoneText, tokens: readonly Token[], start: number, type: string, line: number) {
    this.#z = z;
    this.#tokens = tokens;
    this.#i = start;
    this.#type = type;
    this.#line = line;
  }
  /** The line of the record's type (where RDATA errors are reported). */
  get line(): number {
    return this.#line;
  }
  more(): boolean {
    return this.#i < this.#tokens.length;
  }
  /** Is the RDATA in RFC 3597 generic form (an unquoted `\#` first)? */
  peekGeneric(): boolean {
    const t = this.#tokens[this.#i];
    return t !== undefined && !t.quoted && t.text === '\\#';
  }
  /** RFC 3597 §5: `\# <length> <hex>...`; the hex may be split by spaces and must be exactly <length> octets. */
  generic(): Buffer {
    this.next('\\#');
    const len = this.#z.uint(this.next('RDATA length'), MAX_RDATA, 'generic RDATA length');
    const data = len === 0 && !this.more() ? Buffer.alloc(0) : this.hex('generic RDATA');
    if (data.length !== len) throw this.#z.error(ZoneSyntaxError, this.#line, `generic RDATA of ${data.length} octets, but the length says ${len}`, 'make the length match the hex octets');
    return data;
  }
  /** All remaining tokens as one hex string (whitespace may split it): at least one octet. */
  hex(what: string): Buffer {
    if (!this.more()) this.next(what);
    let s = '';
    while (this.more()) s += this.#z.word(this.next(what), what);
    if (!/^([0-9a-f]{2})+$/i.test(s)) throw this.#z.error(ZoneSyntaxError, this.#line, `the ${what} "${s.length > 40 ? `${s.slice(0, 40)}...` : s}" is not hex octets`, 'write an even number of hex digits (0-9, a-f)');
    if (s.length / 2 > MAX_RDATA) throw this.#z.error(ZoneRangeError, this.#line, `the ${what} is ${s.length / 2} octets`, `RDATA is at most ${MAX_RDATA} octets`);
    return Buffer.from(s, 'hex');
  }
  next(what: string): Token {
    const t = this.#tokens[this.#i++];
    if (t === undefined) throw this.#z.error(ZoneSyntaxError, this.#line, `the ${this.#type} record has no ${what}`, `write all the fields of a ${this.#type} record`);
    return t;
  }
  end(): void {
    const t = this.#tokens[this.#i];
    if (t !== undefined) throw this.#z.error(ZoneSyntaxError, t.line, `unexpected "${t.text}" after the ${this.#type} data`, 'remove it, or quote a TXT string that has spaces');
  }
}

/**
 * Splits the text into entries: `;` comments dropped, parentheses join
 * lines (they do not nest), a quoted string is one token and stays on one
 * line. A backslash escapes the next character, never a newline.
 *
 * A malformed entry is reported and dropped, and reading goes on: after the
 * end of its line, or inside parentheses after the closing ")" (so the
 * rest of a multi-line record does not read as records of its own).
 */
function* entries(text: string, z: ZoneText, report: (err: ZoneError) => void): Generator<Entry> {
  let line = 1;
  let tokens: Token[] = [];
  let blankOwner = false;
  let lineStart = true;
  let openLine = 0; // line of the unclosed '(' (0: none)
  const n = text.length;
  /** Index after the escape at j. */
  const escapeEnd = (j: number): number => {
    if (j + 1 >= n || text.charCodeAt(j + 1) === 0x0a) {
      throw z.error(ZoneSyntaxError, line, 'a backslash at the end of a line', 'use parentheses to continue a record on the next line');
    }
    return j + 2;
  };
  for (let i = 0; i < n; ) {
    const c = text.charCodeAt(i);
    if (c === 0x0a) {
      line++;
      i++;
      if (openLine === 0) {
        if (tokens.length > 0) yield { blankOwner, tokens };
        tokens = [];
        lineStart = true;
      }
      continue;
    }
    if (lineStart) blankOwner = c === 0x20 || c === 0x09;
    lineStart = false;
    try {
      if (c === 0x20 || c === 0x09 || c === 0x0d) {
        i++;
      } else if (c === 0x3b /* ; */) {
        const nl = text.indexOf('\n', i);
        i = nl < 0 ? n : nl;
      } else if (c === 0x28 /* ( */) {
        if (openLine !== 0) throw z.error(ZoneSyntaxError, line, `a "(" inside the "(" of line ${openLine}`, 'parentheses do not nest; remove one');
        openLine = line;
        i++;
      } else if (c === 0x29 /* ) */) {
        if (openLine === 0) throw z.error(ZoneSyntaxError, line, 'a ")" without "("', 'remove it or add the "("');
        openLine = 0;
        i++;
      } else if (c === 0x22 /* " */) {
        let j = i + 1;
        for (; j < n && text.charCodeAt(j) !== 0x22; j = text.charCodeAt(j) === 0x5c ? escapeEnd(j) : j + 1) {
          if (text.charCodeAt(j) === 0x0a) throw z.error(ZoneSyntaxError, line, 'a quoted string is not closed on its line', 'add the closing quote');
        }
        if (j >= n) throw z.error(ZoneSyntaxError, line, 'a quoted string is not closed', 'add the closing quote');
        tokens.push({ text: text.slice(i + 1, j), quoted: true, line });
        i = j + 1;
      } else {
        let j = i;
        for (; j < n; j++) {
          const d = text.charCodeAt(j);
          if (d === 0x20 || d === 0x09 || d === 0x0d || d === 0x0a || d === 0x3b || d === 0x28 || d === 0x29 || d === 0x22) break;
          if (d === 0x5c) j = escapeEnd(j) - 1;
        }
        tokens.push({ text: text.slice(i, j), quoted: false, line });
        i = j;
      }
    } catch (err) {
      if (!(err instanceof ZoneError)) throw err;
      report(err);
      // Drop the entry; resume at the end of its line, or past the ")" of an open group.
      const close = openLine !== 0 ? text.indexOf(')', i) : -1;
      let stop = close >= 0 ? close + 1 : i;
      const nl = text.indexOf('\n', stop);
      stop = nl < 0 ? n : nl;
      for (let k = text.indexOf('\n', i); k >= 0 && k < stop; k = text.indexOf('\n', k + 1)) line++;
      i = stop;
      tokens = [];
      openLine = 0;
    }
  }
  if (openLine !== 0) report(z.error(ZoneSyntaxError, openLine, 'a "(" is never closed', 'add the ")"'));
  else if (tokens.length > 0) yield { blankOwner, tokens };
}
