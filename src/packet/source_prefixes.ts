/**
 * Lists of client-address prefixes of both families, as configured in
 * `when.sourceIn` (checkpoints, admission operations), compiled once into
 * typed arrays and matched without allocation on the packet path.
 *
 * Text (parseSourcePrefix, for configuration): an IPv4 prefix
 * `a.b.c.d/n` (n 0..32) or an IPv6 prefix `x::/n` (n 0..128, any strict
 * RFC 4291 spelling), the length always given; host bits are cleared (as
 * IPv4's parseCidr always did). An IPv6 prefix inside the IPv4-mapped range
 * (`::ffff:198.18.0.0/112`, length >= 96) IS the IPv4 prefix it maps
 * (198.18.0.0/16): one address has one meaning whichever way it is written.
 *
 * Matching: an IPv4 client (address as u32) against the IPv4 entries, by
 * the same mask-and-compare loop as before IPv6 existed; an IPv6 client
 * (four words) against the IPv6 entries, four masked word compares each.
 * An IPv6 client whose words are IPv4-mapped (a packet claiming
 * ::ffff:a.b.c.d as its IPv6 source; RFC 4291 2.5.5.2 says such addresses
 * never appear on the wire) is matched as the IPv4 client a.b.c.d, so it
 * gains nothing over sending IPv4. Families otherwise never meet: ::/0
 * matches every IPv6 client and no IPv4 one, 0.0.0.0/0 the reverse.
 */
import { InvalidArgumentError } from '../errors/errors.ts';
import { parseIPv4Address, prefixMask } from './address.ts';
import { parseCidr6, prefixWordMask } from './address6.ts';

export type SourcePrefix = { readonly family: 4; readonly network: number; readonly length: number } | { readonly family: 6; readonly network: Uint32Array; readonly length: number };

const V4_PREFIX = /^(\d{1,3}(?:\.\d{1,3}){3})\/(0|[1-9]\d?)$/;
/** A length without leading zeros (parseCidr6 alone takes "/064"). */
const LENGTH = /^(0|[1-9]\d{0,2})$/;

/** A prefix of either family from its text, or undefined when the text is not strictly one (see the module comment). */
export function parseSourcePrefix(text: string): SourcePrefix | undefined {
  if (text.includes(':')) {
    const slash = text.indexOf('/');
    if (slash < 0 || !LENGTH.test(text.slice(slash + 1))) return undefined;
    const p = parseCidr6(text);
    if (p === undefined) return undefined;
    const w = p.network;
    if (p.length >= 96 && w[0] === 0 && w[1] === 0 && w[2] === 0xffff) return { family: 4, network: (w[3] ?? 0) >>> 0, length: p.length - 96 };
    return { family: 6, network: w, length: p.length };
  }
  const m = V4_PREFIX.exec(text);
  if (m === null) return undefined;
  const addr = parseIPv4Address(m[1] ?? '');
  const length = Number(m[2]);
  if (addr === undefined || length > 32) return undefined;
  return { family: 4, network: (addr & prefixMask(length)) >>> 0, length };
}

export class SourcePrefixes {
  /** Entries of each family. */
  readonly count4: number;
  readonly count6: number;
  readonly #addr4: Uint32Array;
  readonly #mask4: Uint32Array;
  /** Stride 4: network words and mask words of each IPv6 entry. */
  readonly #net6: Uint32Array;
  readonly #mask6: Uint32Array;

  /** `texts` are schema-checked; one that is not a prefix throws (a bug: the schema let it through). */
  constructor(texts: readonly string[]) {
    const v4: { network: number; length: number }[] = [];
    const v6: { network: Uint32Array; length: number }[] = [];
    for (const t of texts) {
      const p = parseSourcePrefix(t);
      if (p === undefined) throw new InvalidArgumentError(`not an IPv4 or IPv6 prefix: ${t}`);
      if (p.family === 4) v4.push(p);
      else v6.push(p);
    }
    this.count4 = v4.length;
    this.count6 = v6.length;
    this.#addr4 = Uint32Array.from(v4.map((p) => p.network));
    this.#mask4 = Uint32Array.from(v4.map((p) => prefixMask(p.length)));
    this.#net6 = new Uint32Array(v6.length * 4);
    this.#mask6 = new Uint32Array(v6.length * 4);
    v6.forEach((p, k) => {
      for (let w = 0; w < 4; w++) {
        this.#net6[k * 4 + w] = p.network[w] ?? 0;
        this.#mask6[k * 4 + w] = prefixWordMask(p.length, w);
      }
    });
  }

  /** Whether IPv4 address `addr` (u32) is in an IPv4 entry. */
  has4(addr: number): boolean {
    const n = this.count4;
    for (let k = 0; k < n; k++) if (((addr & (this.#mask4[k] ?? 0)) >>> 0) === this.#addr4[k]) return true;
    return false;
  }

  /** Whether the IPv6 address at words[at..at+3] is in an IPv6 entry (IPv4-mapped: has4 of its IPv4 address). */
  has6(words: Uint32Array, at: number): boolean {
    const w0 = words[at] ?? 0;
    const w1 = words[at + 1] ?? 0;
    const w2 = words[at + 2] ?? 0;
    const w3 = words[at + 3] ?? 0;
    if (w0 === 0 && w1 === 0 && w2 === 0xffff) return this.has4(w3);
    const n = this.count6;
    const net = this.#net6;
    const mask = this.#mask6;
    for (let k = 0, i = 0; k < n; k++, i += 4) {
      if (((w0 & (mask[i] ?? 0)) >>> 0) === net[i] && ((w1 & (mask[i + 1] ?? 0)) >>> 0) === net[i + 1] && ((w2 & (mask[i + 2] ?? 0)) >>> 0) === net[i + 2] && ((w3 & (mask[i + 3] ?? 0)) >>> 0) === net[i + 3]) return true;
    }
    return false;
  }
}
