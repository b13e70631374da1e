/**
 * runOffLoop (src/front/run-off-loop.ts over native/src/run_command.c):
 * real children, each case one property of the contract that the
 * execFile forms it replaced had (stdout, stdin, the failure kinds), and
 * the child's clean start (signals at their defaults, no inherited
 * descriptor).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommandFailedError, CommandTimeoutError } from '../../src/errors/errors.ts';
import { runOffLoop } from '../../src/front/run-off-loop.ts';

async function failure<E extends Error>(p: Promise<unknown>, cls: new (...args: never[]) => E): Promise<E> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof cls, String(err));
    return err;
  }
  assert.fail('resolved');
}

describe('runOffLoop', () => {
  it('resolves the stdout of a command that exits 0; stdin is /dev/null when no input is given', async () => {
    assert.equal(await runOffLoop(['sh', '-c', 'printf "out\\n"; printf "err" >&2; cat'], { timeoutMs: 10_000 }), 'out\n');
  });

  it('feeds its input while reading its output (4 MiB through cat: neither pipe may block the other)', async () => {
    const input = 'abcdefghijklmnopqrstuvwxyz0123456789\n'.repeat(Math.ceil((4 << 20) / 37));
    const out = await runOffLoop(['cat'], { input, timeoutMs: 30_000 });
    assert.equal(out.length, input.length);
    assert.equal(out, input);
  });

  it('an empty input closes stdin at once', async () => {
    assert.equal(await runOffLoop(['wc', '-c'], { input: '', timeoutMs: 10_000 }), '0\n');
  });

  const failures: readonly { name: string; argv: readonly string[]; opts: Parameters<typeof runOffLoop>[1]; message: RegExp; spawnErrno?: string }[] = [
    { name: 'a non-zero exit: its stderr', argv: ['sh', '-c', 'echo "no such table" >&2; exit 3'], opts: { timeoutMs: 10_000 }, message: /^command failed: sh -c .*: no such table$/ },
    { name: 'a non-zero exit without stderr: its status', argv: ['sh', '-c', 'exit 4'], opts: { timeoutMs: 10_000 }, message: /: exit status 4$/ },
    { name: 'a program that does not exist', argv: ['/nonexistent/sluice-no-such-program'], opts: { timeoutMs: 10_000 }, message: /cannot run \/nonexistent\/sluice-no-such-program/, spawnErrno: 'ENOENT' },
    { name: 'output over the bound: killed', argv: ['head', '-c', '3000000', '/dev/zero'], opts: { timeoutMs: 10_000, maxMiB: 1 }, message: /: killed: output over 1 MiB$/ },
    { name: 'a signal ends the child: its number', argv: ['sh', '-c', 'kill -TERM $$; sleep 5'], opts: { timeoutMs: 10_000 }, message: /: killed by signal 15$/ },
  ];
  it('the timeout: killed, and a CommandTimeoutError (a hung tool is not a refusal)', async () => {
    const err = await failure(runOffLoop(['sleep', '30'], { timeoutMs: 200 }), CommandTimeoutError);
    assert.equal(err.code, 'ERR_SLUICE_COMMAND_TIMEOUT');
    assert.equal(err.timeoutMs, 200);
    assert.match(err.message, /^command timed out: sleep 30: killed after 200 ms$/);
  });

  for (const f of failures) {
    it(`fails with CommandFailedError: ${f.name}`, async () => {
      const err = await failure(runOffLoop(f.argv, f.opts), CommandFailedError);
      assert.match(err.message, f.message);
      if (f.spawnErrno !== undefined) {
        const cause = err.cause as { code?: string; errno?: number };
        assert.equal(cause.code, 'ERR_SLUICE_SPAWN');
        assert.match(err.message, new RegExp(f.spawnErrno === 'ENOENT' ? 'No such file or directory' : f.spawnErrno));
      }
    });
  }

  it('SIGPIPE is at its default in the child (Node ignores it, and an ignored signal survives exec)', async () => {
    // With SIGPIPE ignored, `yes` would see EPIPE and print "Broken pipe" on stderr.
    const err = await failure(runOffLoop(['sh', '-c', 'yes | head -n 1; yes | head -n 1 >/dev/null; exit 7'], { timeoutMs: 10_000 }), CommandFailedError);
    assert.match(err.message, /: exit status 7$/, 'nothing on stderr');
  });

  it('the child inherits no descriptor besides stdin, stdout and stderr', async () => {
    // ls opens the directory itself as the lowest free descriptor (3).
    const fds = (await runOffLoop(['ls', '/proc/self/fd'], { timeoutMs: 10_000 })).split('\n').filter((l) => l !== '');
    assert.deepEqual(fds, ['0', '1', '2', '3']);
  });

  it('runs many at once (more than the threadpool has threads), each with its own output', async () => {
    const outs = await Promise.all(Array.from({ length: 12 }, (_, i) => runOffLoop(['sh', '-c', `sleep 0.05; echo ${String(i)}`], { timeoutMs: 10_000 })));
    assert.deepEqual(outs, Array.from({ length: 12 }, (_, i) => `${String(i)}\n`));
  });
});
