/**
 * RFC 1035 §5.1 master-file parser for the record types Sluice serves
 * (A, AAAA, NS, CNAME, SOA, MX, TXT, SRV; class IN).
 *
 * Syntax: `$ORIGIN`, `$TTL` (RFC 2308 §4), `@`, relative and absolute
 * names, blank owner = previous owner, optional TTL and class in either
 * order, parentheses joining lines, `;` comments, quoted strings with `\X`
 * and `\DDD` escapes, TTLs in seconds or units (1w2d3h4m5s).
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
 * Not supported (refused with an error): `$INCLUDE`, `$GENERATE`, classes
 * other than IN, other types (incl. RFC 3597 TYPEnnn), names with octets
 * other than letters, digits, '-', '_', '/' (dns2 writes names as dotted
 * text, so a '.' inside a label cannot be represented), '*' other than as
 * the whole leftmost label, TXT strings that are not UTF-8.
 *
 * Errors: the first problem found is thrown as a ZoneError whose message is
 * `file:line: what is wrong; how to fix it`. Stopping at the first keeps the
 * parser simple; zone files are small and edited by hand.
 *
 * Bounds: the text is at most 64 MiB and yields at most 1M records, so a
 * bad file costs bounded memory; the parse is one linear pass.
 */
import { isIPv6 } from 'node:net';
import { InvalidArgumentError, SluiceError } from '../../errors/errors.ts';
import { CLASS_IN, RRTYPE, TYPE_BY_NAME, inZone, type DataType, type RR } from './records.ts';

export const MAX_ZONE_BYTES = 64 * 1024 * 1024;
export const MAX_ZONE_RECORDS = 1_000_000;
/** RFC 2181 §8: TTLs are 31-bit. */
export const MAX_TTL = 0x7fffffff;

/** A zone file problem; `file` and `line` say where (also in the message). */
export abstract class ZoneError extends SluiceError {
  readonly file: string;
  readonly line: number;
  constructor(file: string, line: number, what: string, fix: string) {
    super(`${file}:${line}: ${what}; ${fix}`);
    this.file = file;
    this.line = line;
  }
}
/** Malformed text: bad token, missing field, bad address or name. */
export class ZoneSyntaxError extends ZoneError {
  readonly code = 'ERR_SLUICE_ZONE_SYNTAX';
}
/** Valid master-file text Sluice does not accept ($INCLUDE, class CH, type NAPTR...). */
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

export interface ParseOptions {
  /** The zone's origin; else the first `$ORIGIN` before any record. Trailing dot optional. */
  readonly origin?: string;
  /** Named in error messages. */
  readonly file?: string;
  /** TTL for records without one when no `$TTL` is in force. */
  readonly defaultTtl?: number;
}

export interface ParsedZone {
  readonly origin: string;
  readonly records: readonly RR[];
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
const TTL_UNITS: Readonly<Record<string, number>> = { w: 604800, d: 86400, h: 3600, m: 60, s: 1 };
/** Label octets accepted: letters, digits, '-', '_', '/' (RFC 2317 names). */
const LABEL_RE = /^[a-z0-9_/-]+$/i;
const utf8 = new TextDecoder('utf-8', { fatal: true });

export function parseZone(text: string, opts: ParseOptions = {}): ParsedZone {
  const z = new ZoneText(opts.file ?? '<zone>');
  if (text.length > MAX_ZONE_BYTES || Buffer.byteLength(text) > MAX_ZONE_BYTES) {
    throw z.error(ZoneTooLargeError, 1, `the file is over ${MAX_ZONE_BYTES} bytes`, 'split the data into several zones');
  }
  const dt = opts.defaultTtl;
  if (dt !== undefined && !(Number.isInteger(dt) && dt >= 0 && dt <= MAX_TTL)) {
    throw new InvalidArgumentError(`defaultTtl ${dt} must be an integer 0..${MAX_TTL}`);
  }

  let origin = opts.origin === undefined ? undefined : normaliseOrigin(opts.origin);
  /** The zone's own origin: fixed by the option or the first $ORIGIN; later $ORIGINs only move the relative base. */
  let zoneOrigin = origin;
  let dollarTtl = dt;
  let lastTtl: number | undefined;
  let lastOwner: string | undefined;
  let soaLine: number | undefined;
  const records: RR[] = [];
  // Per name: type → line and TTL of the RRset's first record (for the zone rules).
  const rrsets = new Map<string, Map<number, { line: number; ttl: number }>>();
  const seen = new Set<string>();

  const add = (rr: RR, line: number): void => {
    let types = rrsets.get(rr.name);
    if (types === undefined) rrsets.set(rr.name, (types = new Map<number, { line: number; ttl: number }>()));
    const set = types.get(rr.type);
    const tname = TYPE_NAME.get(rr.type) ?? String(rr.type);
    if (set !== undefined && set.ttl !== rr.ttl) {
      throw z.error(ZoneDataError, line, `TTL ${rr.ttl} differs from TTL ${set.ttl} of the "${rr.name}" ${tname} records at line ${set.line}`, 'give every record of an RRset the same TTL (RFC 2181 §5.2)');
    }
    const key = JSON.stringify(rr);
    if (seen.has(key)) return; // an identical record: an RRset is a set
    seen.add(key);
    if (rr.type === RRTYPE.SOA) {
      if (rr.name !== zoneOrigin) throw z.error(ZoneDataError, line, `SOA at "${rr.name}", not at the origin "${zoneOrigin ?? ''}"`, 'a zone has its one SOA at the origin (@)');
      if (soaLine !== undefined) throw z.error(ZoneDataError, line, `a second SOA record (the first is at line ${soaLine})`, 'keep exactly one SOA');
      soaLine = line;
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
    if (records.length >= MAX_ZONE_RECORDS) throw z.error(ZoneTooLargeError, line, `more than ${MAX_ZONE_RECORDS} records`, 'split the data into several zones');
    if (set === undefined) types.set(rr.type, { line, ttl: rr.ttl });
    records.push(Object.freeze(rr));
  };

  for (const e of entries(text, z)) {
    const first = e.tokens[0];
    if (first === undefined) continue;
    const at = first.line;

    if (!first.quoted && first.text.startsWith('$')) {
      const directive = first.text.toUpperCase();
      if (directive === '$INCLUDE') {
        // Zone data never makes the server open files: a zone from an
        // untrusted source could otherwise read any file the server can.
        throw z.error(ZoneUnsupportedError, at, '$INCLUDE is not supported', 'zone data may not read other files; paste the included records into this file');
      }
      if (directive !== '$ORIGIN' && directive !== '$TTL') throw z.error(ZoneUnsupportedError, at, `unknown directive ${first.text}`, 'use $ORIGIN or $TTL');
      const arg = e.tokens[1];
      if (arg === undefined || e.tokens.length > 2) {
        throw z.error(ZoneSyntaxError, at, `${directive} takes one value`, `write e.g. ${directive === '$TTL' ? '$TTL 3600' : '$ORIGIN example.test.'}`);
      }
      if (directive === '$TTL') dollarTtl = z.ttl(arg, '$TTL');
      else origin = z.name(arg, origin, '$ORIGIN');
      zoneOrigin ??= origin;
      continue;
    }

    let i = 0;
    let owner = lastOwner;
    if (!e.blankOwner) {
      owner = z.name(first, origin, 'owner');
      i = 1;
    }
    if (owner === undefined) throw z.error(ZoneSyntaxError, at, 'the first record has no owner (its line starts with a space)', 'start the line with the owner name or @');
    if (zoneOrigin === undefined) throw z.error(ZoneSyntaxError, at, 'a record before the zone origin is known', 'add $ORIGIN at the top or pass the origin');
    if (!inZone(owner, zoneOrigin)) {
      throw z.error(ZoneDataError, at, `owner "${owner}" is outside the zone origin "${zoneOrigin}"`, 'put the record in the zone for its name, or fix $ORIGIN');
    }
    lastOwner = owner;

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
      else if (!sawClass && !t.quoted && CLASSES.has(u)) {
        if (u !== 'IN') throw z.error(ZoneUnsupportedError, t.line, `class ${u} is not supported`, 'Sluice serves class IN only; write IN or leave the class out');
        sawClass = true;
      } else typeTok = t;
    }
    if (typeTok === undefined) throw z.error(ZoneSyntaxError, at, 'the record has no type', 'write the type and its data, e.g. "www IN A 192.0.2.1"');
    const type = TYPE_BY_NAME.get(z.word(typeTok, 'type').toUpperCase());
    if (type === undefined) {
      throw z.error(ZoneUnsupportedError, typeTok.line, `unknown or unsupported type "${typeTok.text}"`, `Sluice serves ${[...TYPE_BY_NAME.keys()].join(', ')}`);
    }
    if (rrTtl !== undefined) lastTtl = rrTtl;
    const ttl = rrTtl ?? dollarTtl ?? lastTtl;
    if (ttl === undefined) throw z.error(ZoneSyntaxError, at, 'the record has no TTL', 'add "$TTL 3600" at the top of the file or a TTL on the record');
    const f = new Fields(z, e.tokens, i, TYPE_NAME.get(type) ?? '', typeTok.line);
    const rr = rdata(z, type, { name: owner, class: CLASS_IN, ttl }, f, origin);
    f.end();
    add(rr, at);
  }

  if (zoneOrigin === undefined || soaLine === undefined) {
    throw z.error(ZoneDataError, 1, `the zone${zoneOrigin === undefined ? '' : ` "${zoneOrigin}"`} has no SOA record`, 'add one at the origin, e.g. "@ IN SOA ns1 hostmaster 1 1h 15m 1w 5m"');
  }
  if (rrsets.get(zoneOrigin)?.has(RRTYPE.NS) !== true) {
    throw z.error(ZoneDataError, soaLine, `the zone "${zoneOrigin}" has no NS record at its origin`, 'add at least one "@ IN NS <server>" record');
  }
  return { origin: zoneOrigin, records };
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

function rdata(z: ZoneText, type: DataType, base: { name: string; class: typeof CLASS_IN; ttl: number }, f: Fields, origin: string | undefined): RR {
  switch (type) {
    case RRTYPE.A:
      return { ...base, type, address: z.ipv4(f.next('address')) };
    case RRTYPE.AAAA:
      return { ...base, type, address: z.ipv6(f.next('address')) };
    case RRTYPE.NS:
      return { ...base, type, ns: z.name(f.next('name server'), origin, 'name server') };
    case RRTYPE.CNAME:
      return { ...base, type, domain: z.name(f.next('target'), origin, 'CNAME target') };
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
      if (text !== '*' && !LABEL_RE.test(text)) {
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
  more(): boolean {
    return this.#i < this.#tokens.length;
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
 */
function* entries(text: string, z: ZoneText): Generator<Entry> {
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
  }
  if (openLine !== 0) throw z.error(ZoneSyntaxError, openLine, 'a "(" is never closed', 'add the ")"');
  if (tokens.length > 0) yield { blankOwner, tokens };
}
