/** Reads the numbers the benchmarks use out of wrk's report. */
export interface WrkResult {
  readonly rps: number;
  /** Transfer/sec in MB/s. */
  readonly mbps: number;
  /** Socket errors (connect, read, write, timeout) plus non-2xx/3xx responses. */
  readonly errors: number;
  /** The same by kind (zero when wrk printed none): which failure a run saw. */
  readonly errorKinds: { readonly connect: number; readonly read: number; readonly write: number; readonly timeout: number; readonly non2xx: number };
}

export function parseWrk(out: string): WrkResult | undefined {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const tr = /Transfer\/sec:\s+([\d.]+)(B|KB|MB|GB)/.exec(out);
  if (!rps || !tr) return undefined;
  const scale = tr[2] === 'GB' ? 1024 : tr[2] === 'KB' ? 1 / 1024 : tr[2] === 'B' ? 1 / 2 ** 20 : 1;
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const errors = (errs ? [1, 2, 3, 4].reduce((s, i) => s + Number(errs[i]), 0) : 0) + (non2xx ? Number(non2xx[1]) : 0);
  const kind = (i: number): number => (errs ? Number(errs[i]) : 0);
  const errorKinds = { connect: kind(1), read: kind(2), write: kind(3), timeout: kind(4), non2xx: non2xx ? Number(non2xx[1]) : 0 };
  return { rps: Number(rps[1]), mbps: Number(tr[1]) * scale, errors, errorKinds };
}
