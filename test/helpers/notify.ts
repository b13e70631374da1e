/**
 * A real AF_UNIX datagram socket standing in for systemd's notification
 * socket (test/fixtures/notify-listener.py): every datagram a daemon sends
 * to $NOTIFY_SOCKET, with the sender pid the kernel reports.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const LISTENER = fileURLToPath(new URL('../fixtures/notify-listener.py', import.meta.url));

export interface Notification {
  readonly pid: number | null;
  readonly fields: Readonly<Record<string, string>>;
}

export class NotifyListener {
  readonly address: string;
  readonly messages: Notification[] = [];
  readonly #child: ChildProcessWithoutNullStreams;
  #waiters: { match: (n: Notification) => boolean; resolve: (n: Notification) => void }[] = [];

  private constructor(address: string, child: ChildProcessWithoutNullStreams) {
    this.address = address;
    this.#child = child;
  }

  /** Binds `address` (a path, or @name for an abstract socket) and resolves once listening. */
  static start(address: string): Promise<NotifyListener> {
    const child = spawn('/usr/bin/python3', [LISTENER, address], { stdio: ['pipe', 'pipe', 'pipe'] });
    const l = new NotifyListener(address, child);
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    return new Promise((resolve, reject) => {
      child.once('exit', (code) => {
        reject(new Error(`notify listener exited (${code}): ${stderr}`));
      });
      createInterface({ input: child.stdout }).on('line', (line) => {
        const m = JSON.parse(line) as Notification & { listening?: boolean };
        if (m.listening === true) {
          resolve(l);
          return;
        }
        l.messages.push(m);
        l.#waiters = l.#waiters.filter((w) => {
          if (!w.match(m)) return true;
          w.resolve(m);
          return false;
        });
      });
    });
  }

  /** The first message from index `from` on that has `key` (=`value` if given). */
  waitFor(key: string, value?: string, from = 0, timeoutMs = 20_000): Promise<Notification> {
    const match = (n: Notification): boolean => key in n.fields && (value === undefined || n.fields[key] === value);
    const seen = this.messages.slice(from).find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        reject(new Error(`no ${key}${value !== undefined ? `=${value}` : ''} within ${timeoutMs} ms; got ${JSON.stringify(this.messages.slice(-5))}`));
      }, timeoutMs);
      this.#waiters.push({
        match,
        resolve: (n) => {
          clearTimeout(t);
          resolve(n);
        },
      });
    });
  }

  /** Index of the first message from `from` on with `key`, or -1. */
  indexOf(key: string, from = 0): number {
    const i = this.messages.slice(from).findIndex((n) => key in n.fields);
    return i < 0 ? -1 : i + from;
  }

  stop(): void {
    this.#child.kill('SIGTERM');
  }
}
