/**
 * Test-side helpers for the namespace testbed: a per-run, per-file prefix,
 * guaranteed teardown (node:test after(), plus a synchronous 'exit' hook for
 * crashes), and child processes run inside namespaces.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface, type Interface } from 'node:readline';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { LayoutItem } from '../../src/front/nft.ts';
import { down, up, type TestbedState } from '../../scripts/testbed/testbed.ts';
import type { TestbedOptions } from '../../scripts/testbed/plan.ts';
import { run, runIn } from '../../scripts/testbed/sh.ts';

/**
 * SLUICE_NS_BASE (set once per suite run by scripts/test.sh) + 3 random
 * chars: parallel runs never collide and the suite's final sweep finds
 * every namespace of its own run, and only those.
 */
export function testPrefix(): string {
  const base = process.env['SLUICE_NS_BASE'] ?? `st${randomBytes(2).toString('hex')}`;
  return `${base}${randomBytes(2).toString('hex').slice(0, 3)}`;
}

/**
 * Runs `teardown` (synchronous) when the process ends in any way: normal
 * exit, a crash, or SIGINT/SIGTERM (for which 'exit' alone does not run).
 */
export function onAnyExit(teardown: () => void): void {
  process.on('exit', teardown);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      teardown();
      process.exit(130);
    });
  }
}

/** Brings a testbed up before the file's tests and always down after. */
export function useTestbed(opts: Omit<TestbedOptions, 'prefix'> = {}): () => TestbedState {
  const prefix = testPrefix();
  let state: TestbedState | undefined;
  const teardown = (): void => {
    down(prefix);
  };
  onAnyExit(teardown);
  before(() => {
    state = up({ ...opts, prefix });
  });
  after(() => {
    teardown();
  });
  return () => {
    if (!state) throw new Error('testbed is not up (before() failed?)');
    return state;
  };
}

/**
 * One bare namespace `<prefix>-<suffix>` (only lo, up), created before the
 * file's tests and always deleted after, with whatever still runs in it
 * (also on a crash or SIGINT/SIGTERM, as useTestbed).
 */
export function useNamespace(suffix: string): () => string {
  const prefix = testPrefix();
  const ns = `${prefix}-${suffix}`;
  let made = false;
  const teardown = (): void => {
    down(prefix); // kills everything left in <prefix>-*, deletes the namespaces
  };
  onAnyExit(teardown);
  before(() => {
    run('ip', ['netns', 'add', ns]);
    runIn(ns, 'ip', ['link', 'set', 'lo', 'up']);
    made = true;
  });
  after(() => {
    teardown();
  });
  return () => {
    if (!made) throw new Error(`namespace ${ns} is not up (before() failed?)`);
    return ns;
  };
}

/** Runs a command in a namespace and returns stdout (throws on failure). */
export const nsRun = runIn;

/** Runs a command in a namespace; resolves with exit code and output (never rejects). */
export function nsRunAsync(ns: string, cmd: string, args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => {
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

/** A JSON-lines child process inside a namespace (the test fixtures). */
export class NsProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly #lines: Interface;
  readonly #queue: string[] = [];
  #waiters: ((line: string | undefined) => void)[] = [];
  #closed = false;
  /** The end of its stderr, for the error when its output ends early. */
  #stderr = '';

  constructor(ns: string, args: readonly string[]) {
    this.child = spawn('ip', ['netns', 'exec', ns, process.execPath, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr.on('data', (d: Buffer) => {
      this.#stderr = (this.#stderr + d.toString()).slice(-2000);
    });
    this.#lines = createInterface({ input: this.child.stdout });
    this.#lines.on('line', (l) => {
      const w = this.#waiters.shift();
      if (w) w(l);
      else this.#queue.push(l);
    });
    this.#lines.on('close', () => {
      this.#closed = true;
      for (const w of this.#waiters) w(undefined);
      this.#waiters = [];
    });
  }

  /** Next stdout line parsed as JSON; rejects after `timeoutMs` or if the process ends. */
  next(timeoutMs = 10_000): Promise<Record<string, unknown>> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(JSON.parse(queued) as Record<string, unknown>);
    if (this.#closed) return Promise.reject(this.#ended());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no output within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push((line) => {
        clearTimeout(timer);
        if (line === undefined) reject(this.#ended());
        else resolve(JSON.parse(line) as Record<string, unknown>);
      });
    });
  }

  #ended(): Error {
    const code = this.child.exitCode ?? this.child.signalCode;
    return new Error(`process output ended (exit ${String(code)}); stderr: ${this.#stderr.trim() || '(none)'}`);
  }

  async request(line: string): Promise<Record<string, unknown>> {
    this.child.stdin.write(`${line}\n`);
    return this.next();
  }

  /** Asks the process to quit and waits for it (kills it after 5 s). */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => {
      resolve();
    }));
    this.child.stdin.end('quit\n');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

/** Median of a list of numbers. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

/** RTTs in ms from `ping` output lines ("time=20.1 ms"). */
export function pingRtts(output: string): number[] {
  return [...output.matchAll(/time=([\d.]+) ms/g)].map((m) => Number(m[1]));
}

const NFT_FIXTURE = fileURLToPath(new URL('../fixtures/nft-netlink.ts', import.meta.url));

/**
 * A LayoutReader (src/front/ruleset.ts) for namespace `ns`: the addon's
 * netlink read of our tables' comment and chains, run inside it
 * (test/fixtures/nft-netlink.ts --layout), for what the daemon's start
 * reads in its own (RenderedNft.kept, installRuleset's `keep`).
 */
export function layoutIn(ns: string): (fam: 'ip' | 'ip6') => LayoutItem[] {
  let read: Record<'ip' | 'ip6', LayoutItem[]> | undefined;
  return (fam) => {
    read ??= JSON.parse(runIn(ns, process.execPath, ['--no-warnings', NFT_FIXTURE, '--layout'])) as Record<'ip' | 'ip6', LayoutItem[]>;
    return read[fam];
  };
}
