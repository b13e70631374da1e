/**
 * Metrics read from a daemon's own counters at scrape time.
 *
 * Invariant: nothing on a packet or DNS answer path ever calls prom-client.
 * The daemons keep plain numbers (counters, typed arrays); each metric here
 * has a collect() callback that, at scrape, resets the prom-client metric
 * and copies the current values in. A counter's source must itself be
 * monotonic for the life of the process (the daemons carry their counts
 * across reloads), so the exposed `_total` series are real Prometheus
 * counters; series whose labels vanish (a server removed by a reload)
 * simply stop being exposed.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { InvalidArgumentError } from '../errors/errors.ts';

export type Labels<L extends string> = Readonly<Record<L, string>>;
/** One sample: labels (omitted for an unlabelled metric) and value. */
export type Sample<L extends string> = readonly [Labels<L>, number];

/**
 * A registry with prom-client's default process and Node.js metrics.
 * `loopPrecisionMs`: the period of the event-loop delay sampler behind
 * nodejs_eventloop_lag_*_seconds. Each sample is the time between two of
 * its timer's runs, so a stall of d ms reads as d + up to one period: the
 * default 10 ms cannot tell a 1 ms stall from a 10 ms one. The front node
 * passes 1 (its loop decides SYNs; 1,000 wakeups/s of a native timer).
 */
export function newRegistry(loopPrecisionMs = 10): Registry {
  const r = new Registry();
  collectDefaultMetrics({ register: r, eventLoopMonitoringPrecision: loopPrecisionMs });
  return r;
}

/**
 * The registry's exposition text, as `registry.metrics()` renders it, one
 * metric per event-loop turn. prom-client renders every metric in one
 * turn (each collect() and its formatting chained by promises): on the
 * front node, ~140 metrics took 2-7 ms of one turn per scrape (a CPU
 * profile of scripts/bench/front-flows.ts: the daemon's longest turns
 * while a million flows ended were all scrapes), and SYNs waited behind
 * it. Between two metrics the loop polls, so a scrape costs a SYN at most
 * one metric's collect. Each metric is still one consistent read; two
 * metrics may be read a few turns apart, as two scrapes of any exporter
 * are. The Prometheus text format only (the registry's type: the daemons
 * do not use OpenMetrics).
 */
export async function renderMetrics(registry: Registry): Promise<string> {
  const parts: string[] = [];
  for (const metric of registry.getMetricsAsArray()) {
    // A metric removed meanwhile (between two turns) is left out, not an error.
    if (registry.getSingleMetric(metric.name) === undefined) continue;
    parts.push(await registry.getSingleMetricAsString(metric.name));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return `${parts.join('\n\n')}\n`;
}

/** A `_total` counter whose samples come from `read()` at each scrape. */
export function counterFrom<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[], read: () => Iterable<Sample<L>>): Counter<L> {
  if (!name.endsWith('_total')) throw new InvalidArgumentError(`counter ${name} must end in _total`);
  return new Counter<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    collect(this: Counter<L>) {
      this.reset();
      for (const [labels, value] of read()) {
        // A counter never goes below zero; non-finite values are not counts.
        if (Number.isFinite(value) && value >= 0) this.inc(labels as Partial<Record<L, string>>, value);
      }
    },
  });
}

/** An unlabelled counter read from one number. */
export function counterOf(registry: Registry, name: string, help: string, read: () => number): Counter {
  return counterFrom(registry, name, help, [], () => [[{}, read()]]);
}

/** A gauge whose samples come from `read()` at each scrape (non-finite values are skipped). */
export function gaugeFrom<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[], read: () => Iterable<Sample<L>>): Gauge<L> {
  return new Gauge<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    collect(this: Gauge<L>) {
      this.reset();
      for (const [labels, value] of read()) {
        if (Number.isFinite(value)) this.set(labels as Partial<Record<L, string>>, value);
      }
    },
  });
}

/** An unlabelled gauge read from one number. */
export function gaugeOf(registry: Registry, name: string, help: string, read: () => number): Gauge {
  return gaugeFrom(registry, name, help, [], () => [[{}, read()]]);
}

/** Samples of a record of counts keyed by one label ({a: 1, b: 2} -> label=a 1, label=b 2). */
export function byKey<L extends string>(label: L, counts: Readonly<Record<string, number>>, rename: (key: string) => string = snake): Sample<L>[] {
  return Object.entries(counts).map(([k, v]) => [{ [label]: rename(k) } as Labels<L>, v]);
}

/** camelCase -> snake_case, for label values made from field names. */
export function snake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
