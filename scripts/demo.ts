/**
 * The demo site. For now (foundation) it is the namespace testbed itself:
 * WAN with per-path delays, 2 clusters of nginx servers behind their front
 * nodes, a DNS namespace and clients. It shows, every 2 s, what each client
 * sees of each cluster (RTT through the WAN, which server answered), and
 * tears everything down on Ctrl-C or at the end of --duration, with a
 * summary. Later issues start the Sluice daemons here.
 *
 *   scripts/demo.sh [--duration SECONDS] [--keep] [--prefix NAME]
 */
import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import { describePlan } from './testbed/plan.ts';
import { down, up } from './testbed/testbed.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string' },
    keep: { type: 'boolean', default: false },
    prefix: { type: 'string', default: 'demo' },
  },
});
const duration = values.duration === undefined ? Infinity : Number(values.duration);
if (!(duration > 0)) {
  console.error('--duration must be a positive number of seconds');
  process.exit(2);
}

function nsExec(ns: string, cmd: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('ip', ['netns', 'exec', ns, cmd, ...args], { timeout: 5000 }, (err, stdout) => {
      resolve(err ? undefined : stdout);
    });
  });
}

interface Cell {
  ok: number;
  failed: number;
  rtts: number[];
  servers: Map<string, number>;
}

console.log('Bringing up the demo site...');
const st = up({ prefix: values.prefix });
console.log(describePlan(st.plan));
console.log(values.keep ? `\n(--keep: the site stays up; remove it with: node scripts/testbed/cli.ts down --prefix ${values.prefix})` : '\nCtrl-C to stop (the site is torn down).');

const cells = new Map<string, Cell>();
let stopping = false;
const started = Date.now();

async function probe(): Promise<void> {
  const jobs: Promise<void>[] = [];
  for (const c of st.plan.clients) {
    for (const k of st.plan.clusters) {
      const key = `cl${c.index} -> cluster ${k.index}`;
      let cell = cells.get(key);
      if (!cell) {
        cell = { ok: 0, failed: 0, rtts: [], servers: new Map() };
        cells.set(key, cell);
      }
      const theCell = cell;
      const round = Math.floor((Date.now() - started) / 2000);
      const server = k.servers[round % k.servers.length];
      if (!server) continue;
      jobs.push(
        (async () => {
          const out = await nsExec(c.name, 'curl', ['-s', '-m', '3', '-o', '/dev/null', '-w', '%{time_connect}', `http://${server.address}/`]);
          const page = await nsExec(c.name, 'curl', ['-s', '-m', '3', `http://${server.address}/`]);
          if (out === undefined || page === undefined) {
            theCell.failed++;
            return;
          }
          theCell.ok++;
          theCell.rtts.push(Number(out) * 1000);
          const id = page.split(' ')[1] ?? '?';
          theCell.servers.set(id, (theCell.servers.get(id) ?? 0) + 1);
        })(),
      );
    }
  }
  await Promise.all(jobs);
}

function table(title: string): void {
  console.log(`\n${title}`);
  console.log('path                    ok  failed  connect RTT ms (median)  servers answered');
  for (const [key, cell] of cells) {
    const s = [...cell.rtts].sort((a, b) => a - b);
    const med = s.length > 0 ? (s[Math.floor(s.length / 2)] ?? 0).toFixed(1) : '-';
    const servers = [...cell.servers].map(([id, n]) => `${id}:${n}`).join(' ');
    console.log(`${key.padEnd(22)} ${String(cell.ok).padStart(3)} ${String(cell.failed).padStart(7)}  ${med.padStart(23)}  ${servers}`);
  }
}

function finish(code: number): void {
  if (stopping) return;
  stopping = true;
  table('Summary');
  if (!values.keep) {
    down(values.prefix);
    console.log('\nDemo site torn down.');
  }
  process.exit(code);
}
process.on('SIGINT', () => {
  finish(0);
});
process.on('SIGTERM', () => {
  finish(0);
});

// SIGINT/SIGTERM end the process from finish(); otherwise run for --duration.
while (Date.now() - started < duration * 1000) {
  await probe();
  table(`t=${((Date.now() - started) / 1000).toFixed(0)}s`);
  await new Promise((r) => setTimeout(r, 2000));
}
finish(0);
