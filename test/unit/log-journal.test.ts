/**
 * journald priorities (src/log/journal.ts): the level -> `<N>` table of
 * sd-daemon(3), the $JOURNAL_STREAM check against fstat of the fd, and the
 * bytes a process writes to stderr: prefixed when stderr is the stream the
 * variable names, plain JSON otherwise (the variable unset, malformed, or
 * naming another file, as when a child inherits it with stderr redirected).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { asErrorLines, isJournalStream, journalPrefix, JournalPrefixStream } from '../../src/log/journal.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/log-levels.ts', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

describe('journald priorities', () => {
  it('maps pino levels to sd-daemon(3) prefixes', () => {
    const table: [string, number, string][] = [
      ['trace', 10, '<7>'],
      ['debug', 20, '<7>'],
      ['info', 30, '<6>'],
      ['warn', 40, '<4>'],
      ['error', 50, '<3>'],
      ['fatal', 60, '<3>'],
    ];
    for (const [name, level, prefix] of table) {
      assert.equal(pino.levels.values[name], level, `pino's ${name} level`);
      assert.equal(journalPrefix(level), prefix, name);
    }
  });

  it('recognises the journal stream by device and inode of the fd, not by the variable alone', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-journal-'));
    const fd = openSync(join(dir, 'stream'), 'w');
    const other = openSync(join(dir, 'other'), 'w');
    try {
      const st = fstatSync(fd, { bigint: true });
      const env = (v: string | undefined): NodeJS.ProcessEnv => (v === undefined ? {} : { JOURNAL_STREAM: v });
      assert.equal(isJournalStream(env(`${st.dev}:${st.ino}`), fd), true);
      assert.equal(isJournalStream(env(`${st.dev}:${st.ino}`), other), false, 'another file');
      assert.equal(isJournalStream(env(undefined), fd), false, 'unset');
      assert.equal(isJournalStream(env(''), fd), false, 'empty');
      assert.equal(isJournalStream(env(`${st.dev}-${st.ino}`), fd), false, 'malformed');
      assert.equal(isJournalStream(env(`${st.dev}:${st.ino + 1n}`), fd), false, 'another inode');
    } finally {
      closeSync(fd);
      closeSync(other);
    }
  });

  it('prefixes every line pino writes with its priority', () => {
    const lines: string[] = [];
    const log = pino({ level: 'trace' }, new JournalPrefixStream({ write: (s) => lines.push(s) }));
    log.child({ component: 'x' }).warn('w');
    log.error({ err: new Error('boom') }, 'e');
    log.debug('d');
    log.info('i');
    assert.deepEqual(
      lines.map((l) => l.slice(0, 3)),
      ['<4>', '<3>', '<7>', '<6>'],
    );
    for (const l of lines) {
      assert.ok(l.endsWith('\n'), 'one line per write');
      assert.doesNotThrow(() => JSON.parse(l.slice(3)), 'the rest is the JSON line');
    }
  });

  it('messages printed outside pino (a refused start) get <3> on each non-empty line, only on the journal', () => {
    assert.equal(asErrorLines('bad.yaml: invalid\n  a.b: wrong\n\n  c: wrong', true), '<3>bad.yaml: invalid\n<3>  a.b: wrong\n\n<3>  c: wrong');
    assert.equal(asErrorLines('one line', true), '<3>one line');
    assert.equal(asErrorLines('bad.yaml: invalid\n  a.b: wrong', false), 'bad.yaml: invalid\n  a.b: wrong');
  });

  // The fixture logs once at every level. `sh` sets JOURNAL_STREAM to the
  // device and inode of its own stderr (the pipe spawnSync reads), as systemd
  // does for the journal stream, before it execs Node.
  const run = (journal: 'match' | 'other' | 'unset', program: readonly string[] = [process.execPath, '--disable-warning=ExperimentalWarning', FIXTURE], status = 0): string[] => {
    const set = journal === 'match' ? 'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2)' : journal === 'other' ? 'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/0)' : 'unset JOURNAL_STREAM;';
    const r = spawnSync('sh', ['-c', `${set} exec "$@"`, 'sh', ...program], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, SLUICE_LOG_LEVEL: 'trace', JOURNAL_STREAM: '0:0' },
    });
    assert.equal(r.status, status, r.stderr);
    return r.stderr.split('\n').filter((l) => l !== '');
  };

  it('a process whose stderr is the journal stream writes <N> before each JSON line', () => {
    const lines = run('match');
    assert.deepEqual(
      lines.map((l) => /^<(\d)>\{/.exec(l)?.[1]),
      ['7', '7', '6', '4', '3', '3'],
      lines.join('\n'),
    );
    assert.deepEqual(
      lines.map((l) => (JSON.parse(l.slice(3)) as { msg: string }).msg),
      ['a trace line', 'a debug line', 'an info line', 'a warn line', 'an error line', 'a fatal line'],
    );
  });

  it('plain JSON lines when the variable names another file or is unset', () => {
    for (const journal of ['other', 'unset'] as const) {
      const lines = run(journal);
      assert.equal(lines.length, 6, journal);
      for (const l of lines) assert.ok(l.startsWith('{"level":'), `${journal}: ${l}`);
    }
  });

  it('a daemon command that refuses to start says why at error priority', () => {
    const lines = run('match', [BIN, 'master', '--config', '/nonexistent/master.yaml'], 1);
    assert.ok(lines.length > 0);
    for (const l of lines) assert.match(l, /^<3>/);
    assert.match(lines.join('\n'), /\/nonexistent\/master\.yaml/);
    for (const l of run('unset', [BIN, 'master', '--config', '/nonexistent/master.yaml'], 1)) assert.doesNotMatch(l, /^<\d>/);
  });
});
