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
  if (prefixLength === 0) return true;
  const mask = (0xffffffff << (32 - prefixLength)) >>> 0;
  return ((addr & mask) >>> 0) === ((network & mask) >>> 0);
}
