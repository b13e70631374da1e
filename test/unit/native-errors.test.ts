/**
 * The mapping of the addon's coded errors to Sluice's error classes, for
 * both bindings: [native code, expected class code]. Unknown codes are the
 * binding's socket error; the argument assertion is an InvalidArgumentError.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromNativeCtEventsError, fromNativeLogError, fromNativeQueueError } from '../../src/errors/errors.ts';

function native(code: string): Error {
  return Object.assign(new Error(`native ${code}`), { code, errno: 1, syscall: 'bind' });
}

const cases: [typeof fromNativeQueueError, string, string][] = [
  [fromNativeQueueError, 'ERR_NFQ_BUSY', 'ERR_SLUICE_QUEUE_BUSY'],
  [fromNativeQueueError, 'ERR_NFQ_PERMISSION', 'ERR_SLUICE_QUEUE_PERMISSION'],
  [fromNativeQueueError, 'ERR_NFQ_UNSUPPORTED', 'ERR_SLUICE_QUEUE_UNSUPPORTED'],
  [fromNativeQueueError, 'ERR_NFQ_CONFIG', 'ERR_SLUICE_QUEUE_CONFIG'],
  [fromNativeQueueError, 'ERR_NFQ_SOCKET', 'ERR_SLUICE_QUEUE_SOCKET'],
  [fromNativeQueueError, 'constructor', 'ERR_SLUICE_QUEUE_SOCKET'],
  [fromNativeQueueError, 'ERR_NFQ_NATIVE_ASSERT', 'ERR_SLUICE_INVALID_ARGUMENT'],
  [fromNativeLogError, 'ERR_NFLOG_BUSY', 'ERR_SLUICE_NFLOG_BUSY'],
  [fromNativeLogError, 'ERR_NFLOG_PERMISSION', 'ERR_SLUICE_NFLOG_PERMISSION'],
  [fromNativeLogError, 'ERR_NFLOG_CONFIG', 'ERR_SLUICE_NFLOG_CONFIG'],
  [fromNativeLogError, 'ERR_NFLOG_SOCKET', 'ERR_SLUICE_NFLOG_SOCKET'],
  [fromNativeLogError, 'ERR_NFQ_BUSY', 'ERR_SLUICE_NFLOG_SOCKET'],
  [fromNativeLogError, 'ERR_NFLOG_NATIVE_ASSERT', 'ERR_SLUICE_INVALID_ARGUMENT'],
  [fromNativeCtEventsError, 'ERR_CTEV_PERMISSION', 'ERR_SLUICE_CTEVENTS_PERMISSION'],
  [fromNativeCtEventsError, 'ERR_CTEV_UNSUPPORTED', 'ERR_SLUICE_CTEVENTS_UNSUPPORTED'],
  [fromNativeCtEventsError, 'ERR_CTEV_SOCKET', 'ERR_SLUICE_CTEVENTS_SOCKET'],
  [fromNativeCtEventsError, 'ERR_CTEV_POLL', 'ERR_SLUICE_CTEVENTS_SOCKET'],
  [fromNativeCtEventsError, 'ERR_CTEV_NATIVE_ASSERT', 'ERR_SLUICE_INVALID_ARGUMENT'],
];

describe('native error mapping', () => {
  for (const [map, code, expected] of cases) {
    it(`${map.name}: ${code} -> ${expected}`, () => {
      const err = native(code);
      const out = map(err) as Error & { code: string; errno?: number; syscall?: string };
      assert.equal(out.code, expected);
      assert.equal(out.cause, err);
      if (expected !== 'ERR_SLUICE_INVALID_ARGUMENT') {
        assert.equal(out.errno, 1);
        assert.equal(out.syscall, 'bind');
      }
    });
  }
  it('a thrown non-Error becomes the socket error', () => {
    assert.equal((fromNativeQueueError('boom') as Error & { code: string }).code, 'ERR_SLUICE_QUEUE_SOCKET');
    assert.equal((fromNativeLogError('boom') as Error & { code: string }).code, 'ERR_SLUICE_NFLOG_SOCKET');
  });
});
