/**
 * A Prometheus histogram exposed from Buckets (buckets.ts) that the daemon
 * fills itself: prom-client's own Histogram can only be fed one observe() at
 * a time, which would put prom-client calls where the measurements happen.
 *
 * This is a collector object in the shape prom-client's Registry renders
 * (name, help, type, get() -> {values}); the registry formats the
 * `_bucket{le=...}`, `_sum` and `_count` lines from it like any histogram.
 * The unit test renders it through a real Registry, so a prom-client upgrade
 * that changed that contract fails there.
 */
import type { Metric, Registry } from 'prom-client';
import type { Buckets } from './buckets.ts';
import type { Labels } from './collect.ts';

interface Value {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

export class BucketHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly labelNames: readonly L[];
  readonly #read: () => Iterable<readonly [Labels<L>, Buckets]>;

  constructor(registry: Registry, name: string, help: string, labelNames: readonly L[], read: () => Iterable<readonly [Labels<L>, Buckets]>) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    this.#read = read;
    registry.registerMetric(this as unknown as Metric);
  }

  collect(): void {
    // Values are read in get(); nothing to prepare.
  }

  reset(): void {
    // The counts belong to the daemon; nothing held here.
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const values: Value[] = [];
    for (const [labels, b] of this.#read()) {
      let cumulative = 0;
      for (let i = 0; i < b.bounds.length; i++) {
        cumulative += b.counts[i] ?? 0;
        values.push({ value: cumulative, labels: { ...labels, le: b.bounds[i] ?? 0 }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: b.count, labels: { ...labels, le: '+Inf' }, metricName: `${this.name}_bucket` });
      values.push({ value: b.sum, labels: { ...labels }, metricName: `${this.name}_sum` });
      values.push({ value: b.count, labels: { ...labels }, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }
}
