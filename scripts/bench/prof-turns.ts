/**
 * The longest event-loop turns in a V8 CPU profile (`--cpu-prof`, as
 * scripts/bench/front-flows.ts --cpu-prof writes for the daemon), and what
 * ran in them.
 *
 * A turn, here, is a run of consecutive samples that are not "(idle)"
 * (Node marks the thread idle while its loop waits in epoll), so its length
 * is the time the thread was busy without polling for packets: with a fine
 * interval (100 µs) the longest ones are the daemon's own stalls. For each,
 * the functions that were on top of the stack (self time) and, per sample,
 * the innermost frame of our own source (src/), which names the code that
 * asked for the work (a native call's or a GC's time lands on the caller).
 * A turn that begins or ends between two samples is measured to within one
 * interval.
 *
 *   node scripts/bench/prof-turns.ts PROFILE|DIR [--top 10] [--frames 6]
 * (DIR: the newest .cpuprofile in it.)
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    top: { type: 'string', default: '10' },
    frames: { type: 'string', default: '6' },
  },
});
const target = positionals[0];
if (target === undefined) {
  console.error('usage: prof-turns.ts PROFILE|DIR [--top 10] [--frames 6]');
  process.exit(2);
}
let file = target;
if (statSync(target).isDirectory()) {
  const newest = readdirSync(target)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(target, f))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
  if (newest === undefined) {
    console.error(`no .cpuprofile in ${target}`);
    process.exit(1);
  }
  file = newest;
}
const prof = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map<number, ProfileNode>();
const parent = new Map<number, number>();
for (const n of prof.nodes) {
  byId.set(n.id, n);
  for (const c of n.children ?? []) parent.set(c, n.id);
}
const name = (f: CallFrame): string => {
  const src = f.url.replace(/^file:\/\/.*?\/(src|native|node_modules)\//, '$1/');
  return `${f.functionName || '(anonymous)'}${src !== '' ? ` ${src}:${String(f.lineNumber + 1)}` : ''}`;
};
/** The innermost frame of our own code on a sample's stack (src/), or its top frame. */
function ours(id: number): string {
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const f = byId.get(cur)?.callFrame;
    if (f !== undefined && /\/src\//.test(f.url)) return name(f);
  }
  const top = byId.get(id)?.callFrame;
  return top === undefined ? '?' : name(top);
}

interface Turn {
  startMs: number;
  ms: number;
  samples: number[];
}
const turns: Turn[] = [];
let t = 0;
let cur: Turn | undefined;
for (let i = 0; i < prof.samples.length; i++) {
  t += prof.timeDeltas[i] ?? 0;
  const id = prof.samples[i] ?? 0;
  const idle = byId.get(id)?.callFrame.functionName === '(idle)';
  // A sample stands for the time until the next one.
  const dt = (prof.timeDeltas[i + 1] ?? 0) / 1000;
  if (idle) {
    if (cur !== undefined) turns.push(cur);
    cur = undefined;
    continue;
  }
  cur ??= { startMs: t / 1000, ms: 0, samples: [] };
  cur.ms += dt;
  cur.samples.push(id);
}
if (cur !== undefined) turns.push(cur);

const count = (xs: string[]): [string, number][] => {
  const m = new Map<string, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return [...m].sort((a, b) => b[1] - a[1]);
};
const top = Number(values.top);
const frames = Number(values.frames);
const durationS = (prof.endTime - prof.startTime) / 1e6;
const busyMs = turns.reduce((s, x) => s + x.ms, 0);
console.log(`${file}: ${durationS.toFixed(1)} s, ${String(prof.samples.length)} samples, ${String(turns.length)} busy runs, busy ${(busyMs / 1000).toFixed(1)} s`);
const hist = [1, 2, 5, 10].map((lim) => `>${String(lim)} ms: ${String(turns.filter((x) => x.ms > lim).length)}`);
console.log(`turns ${hist.join(', ')}`);
for (const turn of [...turns].sort((a, b) => b.ms - a.ms).slice(0, top)) {
  console.log(`\n${turn.ms.toFixed(1)} ms at ${(turn.startMs / 1000).toFixed(2)} s (${String(turn.samples.length)} samples)`);
  const self = count(turn.samples.map((id) => name(byId.get(id)?.callFrame ?? { functionName: '?', url: '', lineNumber: 0 })));
  console.log(`  self:  ${self.slice(0, frames).map(([n, c]) => `${n} ${String(c)}`).join(' | ')}`);
  const mine = count(turn.samples.map(ours));
  console.log(`  ours:  ${mine.slice(0, frames).map(([n, c]) => `${n} ${String(c)}`).join(' | ')}`);
}
