/**
 * LoopTurns (native/src/loop_turns.c): a turn's CPU time counts what the
 * thread computed, not the time it was off a CPU. One process, one measure:
 * the cases run in order on the same instance.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoopTurns, LoopTurnsError } from '../../src/front/loop-turns.ts';

/** Resolves after at least one more loop turn has ended (a timer fires in a later turn than the one that set it). */
const nextTurns = (): Promise<void> => new Promise((resolve) => setTimeout(() => setImmediate(resolve), 5));

/** Computes until this thread has used `ms` of CPU (not of wall time: the machine may be busy). */
function spin(ms: number): void {
  const cpu = (): number => {
    const u = process.threadCpuUsage();
    return (u.user + u.system) / 1000;
  };
  const end = cpu() + ms;
  while (cpu() < end) {
    /* busy: on the CPU */
  }
}

describe('event-loop turn CPU time', () => {
  const turns = LoopTurns.start();

  it('a turn that computes for 40 ms reads at least 40 ms of CPU', async () => {
    await nextTurns();
    turns.takeMaxSeconds();
    const before = turns.turns;
    setTimeout(() => {
      spin(40);
    }, 1);
    await nextTurns();
    await nextTurns();
    assert.ok(turns.turns > before, 'turns are counted');
    assert.ok(turns.takeMaxSeconds() >= 0.04, 'the busy turn is the longest');
  });

  it('a turn that blocks for 200 ms without computing reads far less (the thread was off the CPU)', async () => {
    await nextTurns();
    turns.takeMaxSeconds();
    const shared = new Int32Array(new SharedArrayBuffer(4));
    // Atomics.wait blocks the thread in the kernel: wall time passes, CPU time does not.
    setTimeout(() => Atomics.wait(shared, 0, 0, 200), 1);
    await nextTurns();
    await nextTurns();
    const max = turns.takeMaxSeconds();
    assert.ok(max < 0.1, `longest turn ${String(max)} s of CPU for a 200 ms block`);
  });

  it('reading resets the maximum; a second start in the process is refused with a typed error', async () => {
    await nextTurns();
    turns.takeMaxSeconds();
    assert.ok(turns.takeMaxSeconds() < 0.04, 'no turn has ended since the last read, or only short ones');
    assert.throws(() => LoopTurns.start(), LoopTurnsError);
  });
});
