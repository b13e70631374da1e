/**
 * Server identity in class CH (the convention BIND and NSD follow; RFC 4892
 * §2.1 for id.server): `dig CH TXT id.server`, `hostname.bind`,
 * `version.bind` and `version.server`, each answered from the config
 * (`identity`) or REFUSED when that answer is turned off, as NSD does with
 * hide-identity and hide-version. Any other CH query, and any type but TXT
 * and ANY, is REFUSED. All of this is what NSD 4.6 answers (checked with dig
 * against a running NSD).
 *
 * Answers are one TXT record owned by the question name (a compression
 * pointer to it, so any letter case of the query is echoed as sent), class
 * CH, TTL 0 (not to be cached), AA clear, as NSD's. Each body is encoded
 * once here; answering copies it (no allocation per query).
 */
import type { Body } from './wire/body.ts';

/** What the config says: the text, or false (REFUSED). */
export interface IdentityConfig {
  readonly id?: string | false | undefined;
  readonly hostname?: string | false | undefined;
  readonly version?: string | false | undefined;
}

/** The names answered, and which config key answers each. */
export const IDENTITY_NAMES = { 'id.server': 'id', 'hostname.bind': 'hostname', 'version.bind': 'version', 'version.server': 'version' } as const;
export type IdentityName = keyof typeof IDENTITY_NAMES;

const QTYPE_TXT = 16;
const QTYPE_ANY = 255;
const CLASS_CH = 3;

export class Identity {
  /** name -> the encoded answer, or undefined when turned off. */
  readonly #bodies = new Map<string, Body | undefined>();
  /** Per name: answered and refused counts (read by the metrics at scrape time). */
  readonly answered = new Map<IdentityName, number>();
  readonly refused = new Map<IdentityName, number>();
  /** CH queries for other names or types (REFUSED). */
  other = 0;
  readonly texts: Readonly<Record<IdentityName, string | false>>;

  /** `host`: the default of id and hostname (gethostname); `version`: the default version text. */
  constructor(cfg: IdentityConfig, defaults: { host: string; version: string }) {
    const text = (v: string | false | undefined, def: string): string | false => (v === undefined ? def : v);
    const id = text(cfg.id, defaults.host);
    const hostname = text(cfg.hostname, defaults.host);
    const version = text(cfg.version, defaults.version);
    this.texts = { 'id.server': id, 'hostname.bind': hostname, 'version.bind': version, 'version.server': version };
    for (const [name, t] of Object.entries(this.texts) as [IdentityName, string | false][]) {
      this.#bodies.set(name, t === false ? undefined : txtBody(t));
      this.answered.set(name, 0);
      this.refused.set(name, 0);
    }
  }

  /** Keeps the counts of the identity this one replaces (a reload): counters never go back. */
  inherit(previous: Identity): void {
    for (const [name, n] of previous.answered) this.answered.set(name, n);
    for (const [name, n] of previous.refused) this.refused.set(name, n);
    this.other = previous.other;
  }

  /** The answer to a CH query (lowercase name), or undefined: REFUSED. Counts either way. */
  answer(name: string, qtype: number): Body | undefined {
    const known = this.#bodies.has(name);
    if (!known || (qtype !== QTYPE_TXT && qtype !== QTYPE_ANY)) {
      if (known) this.refused.set(name as IdentityName, (this.refused.get(name as IdentityName) ?? 0) + 1);
      else this.other++;
      return undefined;
    }
    const body = this.#bodies.get(name);
    const counts = body === undefined ? this.refused : this.answered;
    counts.set(name as IdentityName, (counts.get(name as IdentityName) ?? 0) + 1);
    return body;
  }
}

/**
 * One CH TXT record behind the question: owner = pointer to offset 12,
 * TTL 0, the text as character-strings of at most 255 octets (the config
 * allows 255 octets, so one string; longer text would be split).
 */
function txtBody(text: string): Body {
  const octets = Buffer.from(text, 'utf8');
  const strings: Buffer[] = [];
  for (let i = 0; i < octets.length || strings.length === 0; i += 255) strings.push(octets.subarray(i, i + 255));
  const rdlen = strings.reduce((n, s) => n + 1 + s.length, 0);
  const b = Buffer.alloc(12 + rdlen);
  b.writeUInt16BE(0xc00c, 0);
  b.writeUInt16BE(QTYPE_TXT, 2);
  b.writeUInt16BE(CLASS_CH, 4);
  b.writeUInt32BE(0, 6);
  b.writeUInt16BE(rdlen, 10);
  let p = 12;
  for (const s of strings) {
    b[p++] = s.length;
    b.set(s, p);
    p += s.length;
  }
  return { bytes: b, an: 1, ns: 0, ar: 0, rcode: 0, aa: false };
}
