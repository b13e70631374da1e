/**
 * A fixed-bucket histogram kept as plain numbers by the code that measures
 * (e.g. RTTs as probe replies and results arrive), read by the metrics at
 * scrape time (histogram.ts). observe() allocates nothing and never throws.
 *
 * counts[i] holds the observations <= bounds[i] and > bounds[i-1] (not
 * cumulative); counts[bounds.length] the ones above the last bound.
 * Non-finite or negative observations are not recorded (counted in `invalid`).
 */
import { InvalidArgumentError } from '../errors/errors.ts';

export class Buckets {
  readonly bounds: Float64Array;
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  invalid = 0;

  /** `bounds`: strictly increasing finite upper bounds. */
  constructor(bounds: readonly number[]) {
    for (let i = 0; i < bounds.length; i++) {
      const b = bounds[i] ?? NaN;
      if (!Number.isFinite(b) || (i > 0 && b <= (bounds[i - 1] ?? -Infinity))) throw new InvalidArgumentError('bucket bounds must be finite and strictly increasing');
    }
    this.bounds = Float64Array.from(bounds);
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(x: number): void {
    if (!(x >= 0) || !Number.isFinite(x)) {
      this.invalid++;
      return;
    }
    const b = this.bounds;
    let i = 0;
    while (i < b.length && x > (b[i] ?? Infinity)) i++;
    this.counts[i] = (this.counts[i] ?? 0) + 1;
    this.sum += x;
    this.count++;
  }
}

/** RTT bucket bounds in seconds: 0.5 ms .. 5 s (LAN to intercontinental, and the timeouts). */
export const RTT_SECONDS_BOUNDS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5];
