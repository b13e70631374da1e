/**
 * The HTTP status codes an `http` health check accepts (`expectStatus`):
 * a comma-separated list of codes and inclusive ranges, e.g. "200-399"
 * (the default: HAProxy's `http-check` accepts 2xx and 3xx) or
 * "200,204,301-302". Parsed once when the config is validated; the check
 * then tests membership with one bitmap lookup.
 */
export type StatusSet = Uint8Array;

/** Codes a status line may carry (RFC 9110: three digits, 100..599). */
export const STATUS_MIN = 100;
export const STATUS_MAX = 599;

/** The set, or a message saying what is wrong with `text` (for the schema's error). */
export function parseStatusSet(text: string): StatusSet | string {
  const set = new Uint8Array(STATUS_MAX + 1);
  const parts = text.split(',').map((p) => p.trim());
  for (const p of parts) {
    const m = /^(\d{3})(?:-(\d{3}))?$/.exec(p);
    if (!m) return `"${p}" is not a status code or a range like 200-399`;
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (lo < STATUS_MIN || hi > STATUS_MAX) return `"${p}": status codes are ${String(STATUS_MIN)}..${String(STATUS_MAX)}`;
    if (hi < lo) return `"${p}": the range is empty (${String(lo)} > ${String(hi)})`;
    set.fill(1, lo, hi + 1);
  }
  return set;
}

export function statusIn(set: StatusSet, code: number): boolean {
  return set[code] === 1;
}
