/**
 * `sluice dns` inside a namespace for the DNS tests: a FrontProcess (log
 * lines kept) that knows when the server is ready and reads its status from
 * the admin socket.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { FrontProcess } from './front.ts';
import { until } from './wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

export interface DnsStatus {
  counters: Record<string, number>;
  rejects: Record<string, number>;
}

export class DnsProcess extends FrontProcess {
  readonly socket: string;

  constructor(ns: string, config: string, socket: string) {
    super(ns, config, 'dns');
    this.socket = socket;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async ready(): Promise<void> {
    await until(() => !this.running || this.lines.some((l) => l['msg'] === 'dns ready'), 'dns ready', 15_000);
    assert.ok(this.running, `sluice dns exited: ${JSON.stringify(this.lines)}`);
  }

  override async status(): Promise<DnsStatus & Record<string, unknown>> {
    const { stdout } = await promisify(execFile)(BIN, ['status', '--dns', '--socket', this.socket, '--json']);
    return JSON.parse(stdout) as DnsStatus & Record<string, unknown>;
  }
}

/**
 * `workers:` for the DNS tests' configs: SLUICE_TEST_DNS_WORKERS runs the
 * RFC, fuzz, IPv6 and steering tests against the multi-process server
 * (default 1, the single process).
 */
export function testDnsWorkers(): number {
  const n = Number(process.env['SLUICE_TEST_DNS_WORKERS'] ?? '1');
  if (!Number.isInteger(n) || n < 1) throw new Error(`SLUICE_TEST_DNS_WORKERS must be a positive integer, not ${process.env['SLUICE_TEST_DNS_WORKERS']}`);
  return n;
}
