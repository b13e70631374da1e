/**
 * A private redis-server for a test or benchmark: loopback only, its own
 * temporary directory, no persistence, stopped by stop(). Debian's
 * redis-server package (scripts/install.sh) provides the binary.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class RedisServer {
  readonly dir: string;
  readonly port: number;
  readonly child: ChildProcess;

  private constructor(dir: string, port: number, child: ChildProcess) {
    this.dir = dir;
    this.port = port;
    this.child = child;
  }

  static async start(port: number): Promise<RedisServer> {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
    const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--dir', dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'yes', '--daemonize', 'no', '--loglevel', 'warning'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const s = new RedisServer(dir, port, child);
    const end = Date.now() + 10_000;
    while (!(await s.ping())) {
      if (child.exitCode !== null || Date.now() > end) {
        s.stop();
        throw new Error(`redis-server on 127.0.0.1:${port} did not start: ${err.trim() || `exit ${child.exitCode}`}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return s;
  }

  /** True when the server answers PING with PONG. */
  ping(): Promise<boolean> {
    return new Promise((resolve) => {
      const c = createConnection({ host: '127.0.0.1', port: this.port });
      let buf = '';
      const done = (ok: boolean): void => {
        c.destroy();
        resolve(ok);
      };
      c.setTimeout(1000, () => {
        done(false);
      });
      c.on('error', () => {
        done(false);
      });
      c.on('connect', () => c.write('PING\r\n'));
      c.on('data', (d) => {
        buf += d.toString();
        if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
      });
    });
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
