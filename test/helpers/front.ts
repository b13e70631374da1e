/**
 * Runs `sluice front` inside a testbed namespace and reads its structured
 * log (pino JSON lines on stderr).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

export interface FrontProcessOptions {
  /** The daemon's environment (default: this process's). */
  readonly env?: NodeJS.ProcessEnv;
  /** A command that execs the daemon, put before it (e.g. setpriv with its options). */
  readonly wrap?: readonly string[];
}

export class FrontProcess {
  readonly child: ChildProcess;
  readonly lines: Record<string, unknown>[] = [];
  #waiters: { match: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];

  /**
   * `command` is the daemon: front (default), agent, dns or master. Agents are entered
   * with nsenter (network namespace only): `ip netns exec` remounts /sys,
   * which hides the cgroup files the agents read their utilization from.
   */
  constructor(ns: string, configFile: string, command: 'front' | 'agent' | 'dns' | 'master' = 'front', opts: FrontProcessOptions = {}) {
    const enter = command === 'agent' ? ['nsenter', `--net=/run/netns/${ns}`] : ['ip', 'netns', 'exec', ns];
    this.child = spawn(enter[0]!, [...enter.slice(1), ...(opts.wrap ?? []), BIN, command, '--config', configFile], { stdio: ['ignore', 'ignore', 'pipe'], detached: true, ...(opts.env ? { env: opts.env } : {}) });
    if (this.child.stderr) {
      createInterface({ input: this.child.stderr }).on('line', (text) => {
        let l: Record<string, unknown>;
        try {
          l = JSON.parse(text) as Record<string, unknown>;
        } catch {
          l = { raw: text };
        }
        this.lines.push(l);
        this.#waiters = this.#waiters.filter((w) => {
          if (!w.match(l)) return true;
          w.resolve(l);
          return false;
        });
      });
    }
  }

  /** Resolves with the first log line (past or future) whose msg is `msg`. */
  waitFor(msg: string, timeoutMs = 15_000, from = 0): Promise<Record<string, unknown>> {
    const match = (l: Record<string, unknown>): boolean => l['msg'] === msg;
    const seen = this.lines.slice(from).find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        reject(new Error(`front: no "${msg}" within ${timeoutMs} ms; log: ${JSON.stringify(this.lines.slice(-5))}`));
      }, timeoutMs);
      this.#waiters.push({
        match,
        resolve: (l) => {
          clearTimeout(t);
          resolve(l);
        },
      });
    });
  }

  /** Asks for a status line (SIGUSR2) and returns it. */
  async status(): Promise<Record<string, unknown>> {
    const from = this.lines.length;
    this.child.kill('SIGUSR2');
    return this.waitFor('status', 5000, from);
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const done = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await done;
  }
}

export function writeConfig(path: string, yaml: string): string {
  writeFileSync(path, yaml);
  return path;
}
