import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

function sluice(...args: string[]) {
  return spawnSync(BIN, args, { encoding: 'utf8' });
}

describe('sluice CLI', () => {
  it('runs on the pinned Node 24 whatever node is on PATH', () => {
    const r = sluice('version');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^sluice \d+\.\d+\.\d+ \(node v24\./);
  });
  it('lists its commands with help, exit 0', () => {
    const r = sluice('help');
    assert.equal(r.status, 0);
    assert.match(r.stdout, /usage: sluice <command>/);
    assert.match(r.stdout, /version/);
  });
  it('unknown command: usage on stderr, exit 2', () => {
    const r = sluice('frobnicate');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown command "frobnicate"/);
  });
  it('no command: usage, exit 2', () => {
    assert.equal(sluice().status, 2);
  });
});

/** Every command `sluice help` lists (so a command added later is covered too). */
function listedCommands(): string[] {
  const r = sluice('help');
  const names = [...r.stdout.matchAll(/^ {2}([a-z][a-z-]*) {2,}/gm)].map((m) => m[1] ?? '');
  return names.filter((n) => n !== 'help');
}

function sluiceAsync(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(BIN, args, { encoding: 'utf8', timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

/** Runs the tasks, at most `width` at a time; results in task order. */
async function inPool<T>(tasks: readonly (() => Promise<T>)[], width: number): Promise<T[]> {
  const out: T[] = new Array<T>(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const i = next++;
      const task = tasks[i];
      if (task) out[i] = await task();
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, worker));
  return out;
}

describe('sluice <command> --help', () => {
  const commands = listedCommands();
  it('sluice help lists every command', () => {
    // The table below is built from this list: it must hold them all.
    const expected = ['front', 'dns', 'agent', 'master', 'master-proxy', 'ctl', 'keygen', 'schedule', 'simulate', 'status', 'dashboard', 'check-config', 'check-zone', 'ha', 'version'];
    assert.deepEqual([...commands].sort(), [...expected].sort());
  });
  // `--help` comes last after arguments the command would refuse or act on
  // (a config that does not exist, an unknown option): help wins, and
  // nothing starts (exit 0 at once, nothing on stderr: no log line, no
  // usage error). `-h` alone. Both print what `sluice help NAME` prints.
  const cases = commands.flatMap((name) => [
    [name, [name, '--config', '/nonexistent/sluice.yaml', '--no-such-option', '--help']],
    [name, [name, '-h']],
  ] as const);
  it(`prints the command's usage on stdout and exits 0, for every command (${cases.length} cases)`, async () => {
    // A few at a time: each loads the whole CLI, and 36 at once on a busy
    // 2-core machine took over a minute each (the timeout, not a failure).
    const results = await inPool(cases.map(([, args]) => () => sluiceAsync(args)), 4);
    const helps = await inPool(commands.map((name) => () => sluiceAsync(['help', name])), 4);
    const helpOf = new Map(commands.map((name, i) => [name, helps[i]!.stdout]));
    cases.forEach(([name, args], i) => {
      const r = results[i]!;
      const what = `sluice ${args.join(' ')}`;
      assert.equal(r.code, 0, `${what}: exit ${r.code}, stderr ${r.stderr}`);
      assert.equal(r.stderr, '', what);
      assert.ok(r.stdout.startsWith(`usage: sluice ${name}`), `${what}: ${r.stdout}`);
      assert.equal(r.stdout, helpOf.get(name), `${what}: the same text as sluice help ${name}`);
    });
  });
  it('after --, -h and --help are arguments, not a request for help', () => {
    const r = sluice('keygen', '--', '--help');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
  });
});

describe('sluice schedule (seed 003 vectors through the CLI)', () => {
  it('four workers of 25 with b disabled: a c d a c d ...', () => {
    const r = sluice('schedule', '--method', 'byrequests', '--servers', 'a=25,b=25,c=25,d=25', '--disable', 'b', '--count', '9');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'a\nc\nd\na\nc\nd\na\nc\nd\n');
  });
  it('70/30: the ten-step schedule of the seed table (7 a, 3 b)', () => {
    const r = sluice('schedule', '--method', 'byrequests', '--servers', 'a=70,b=30', '--count', '10');
    assert.equal(r.status, 0, r.stderr);
    // Read off the seed's lbstatus table: the worker whose lbstatus drops is chosen
    // (row 5, a 50/50 tie, goes to a: the comparison is strict).
    assert.equal(r.stdout.trim().split('\n').join(' '), 'a b a a a b a a b a');
  });
  it('capacity 1:2: twice as many to b', () => {
    const r = sluice('schedule', '--method', 'capacity', '--servers', 'a=10,b=20', '--count', '30');
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.filter((l) => l === 'b').length, 20);
  });
  it('maglev: the same client always gets the same server', () => {
    const a = sluice('schedule', '--method', 'maglev', '--servers', 'x=1,y=1,z=1', '--count', '50');
    const b = sluice('schedule', '--method', 'maglev', '--servers', 'x=1,y=1,z=1', '--count', '50');
    assert.equal(a.status, 0, a.stderr);
    assert.equal(a.stdout, b.stdout);
    assert.equal(new Set(a.stdout.trim().split('\n')).size, 3);
  });
  const bad: [string, string[]][] = [
    ['unknown method', ['--method', 'random', '--servers', 'a=1']],
    ['malformed servers', ['--method', 'byrequests', '--servers', 'a:1']],
    ['disabling an unknown server', ['--method', 'byrequests', '--servers', 'a=1', '--disable', 'q']],
    ['zero weight', ['--method', 'byrequests', '--servers', 'a=0']],
    ['unknown option', ['--method', 'byrequests', '--servers', 'a=1', '--bogus']],
  ];
  for (const [name, args] of bad) {
    it(`refuses ${name} with exit 2 and the usage`, () => {
      const r = sluice('schedule', ...args);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /usage: sluice schedule/);
    });
  }
});

describe('sluice status --agent', () => {
  it('renders what the agent reports, a missing figure as -', async () => {
    const { renderAgentStatus } = await import('../../src/cli/status.ts');
    const accessLog = { path: '/var/log/nginx/access.log', lines: 12, requests: 10, garbage: 2, badAddress: 0, zoneId: 0, requestsIpv6: 0, partial: 0, rotations: 0, truncations: 0, tableFull: 0, readErrors: 0 };
    const base = { agent: true as const, name: 's1a', front: 'tcp://198.18.201.1:7101', uptimeSeconds: 42, reports: { load: 7, requestRate: 3, sampleErrors: 1 }, accessLog, reloads: 1, reloadsRefused: 0 };
    const lastLoad = { server: 's1a', address: '198.18.201.11', interval: 1, cpu: 0.5, load1: 0.1, load5: 0.1, load15: 0.1, connections: 9, memoryUsed: 0.3, utilization: 0.25 };
    const cases: [string, Parameters<typeof renderAgentStatus>[0], RegExp[]][] = [
      ['with a load report', { ...base, lastLoad }, [/^agent s1a -> tcp:\/\/198\.18\.201\.1:7101, up 42 s, reloads 1 \(refused 0\)$/m, /^7\s+3\s+1\s+25%\s+50%\s+9$/m, /^access log \/var\/log\/nginx\/access\.log: lines=12 requests=10 garbage=2 badAddress=0 zoneId=0 requestsIpv6=0 partial=0 rotations=0 truncations=0 tableFull=0 readErrors=0$/m]],
      // The agent sends no lastLoad before its first report.
      ['before the first report', base, [/^7\s+3\s+1\s+-\s+-\s+-$/m]],
    ];
    for (const [name, status, patterns] of cases) {
      const text = renderAgentStatus(status);
      for (const p of patterns) assert.match(text, p, name);
    }
  });
  it('--dns and --agent together: usage error, exit 2', () => {
    const r = sluice('status', '--dns', '--agent');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /exclude each other/);
  });
});
