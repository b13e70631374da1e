/**
 * The process's ZAP handler released by its last user and acquired again at
 * once (a test's nodes closed and the next test's created; a control plane
 * rebuilt): ZeroMQ's I/O thread unbinds the old inproc endpoint a moment
 * after close(), and a bind before that failed with EADDRINUSE (CI, in
 * test/unit/front-role.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { ZapHandler } from '../../src/control/zap.ts';

const silent = pino({ level: 'silent' });

describe('ZAP handler', () => {
  it('released and acquired again at once, 200 times: every acquire binds', async () => {
    for (let i = 0; i < 200; i++) {
      const z = await ZapHandler.acquire(silent);
      z.release();
    }
    const last = await ZapHandler.acquire(silent);
    assert.ok(last);
    last.release();
  });
});
