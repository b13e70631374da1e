/**
 * Plain-text tables for the status renderers (`sluice status`, `--dns`,
 * `--master`, `--agent`) and the demo: left-aligned columns two spaces
 * apart, no trailing blanks.
 */

/** Left-aligned columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string => r.map((c, i) => c.padEnd(w[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
