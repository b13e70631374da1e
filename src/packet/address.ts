/**
 * IPv4 addresses are carried as unsigned 32-bit numbers on the hot path
 * (no strings, no allocation). These conversions are for configuration,
 * logs and tests.
 */

const DOTTED = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** Parses dotted-quad IPv4 text; undefined if it is not one. */
export function parseIPv4Address(text: string): number | undefined {
  const m = DOTTED.exec(text);
  if (!m) return undefined;
  let v = 0;
  for (let i = 1; i <= 4; i++) {
    const part = m[i] ?? '';
    if (part.length > 1 && part.startsWith('0')) return undefined; // no octal look-alikes
    const o = Number(part);
    if (o > 255) return undefined;
    v = v * 256 + o;
  }
  return v;
}

export function formatIPv4Address(addr: number): string {
  return `${(addr >>> 24) & 0xff}.${(addr >>> 16) & 0xff}.${(addr >>> 8) & 0xff}.${addr & 0xff}`;
}

/** Whether `addr` lies in `network`/`prefixLength`. */
export function inPrefix(addr: number, network: number, prefixLength: number): boolean {
  const mask = prefixMask(prefixLength);
  return ((addr & mask) >>> 0) === ((network & mask) >>> 0);
}

/** A prefix's network mask as uint32 (length 0..32). */
export function prefixMask(length: number): number {
  return length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0;
}

/** An IPv4 prefix (schema-checked text) as [network address, mask], both uint32. */
export function parseCidr(text: string): [number, number] {
  const [addr = '', len = '32'] = text.split('/');
  const parts = addr.split('.').map(Number);
  const a = (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
  const mask = prefixMask(Number(len));
  return [(a & mask) >>> 0, mask];
}
