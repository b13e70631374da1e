/**
 * Fixed loopback ports for unit tests that must name a port before anything
 * binds it (a ZeroMQ endpoint a peer connects to, a Redis server's port).
 *
 * Invariants:
 * - every block lies below the kernel's ephemeral range (32768-60999 here),
 *   so no outgoing connection of a test running at the same time can hold
 *   one of these ports;
 * - blocks are disjoint and a test file takes ports from its own block only,
 *   so the two files `test:unit` runs at once never pick the same port (CI
 *   failed when front-role's range overlapped test/helpers/throttle.ts's).
 *
 * A file's block is found from the file the test runner started: under
 * `node --test` each file runs in its own process with it as argv[1].
 */
import { basename } from 'node:path';

const FIRST = 18_000;
const BLOCK = 600;
const FILES = [
  'control.test.ts',
  'front-role.test.ts',
  'agent-health.test.ts',
  'agent-fronts.test.ts',
  'throttle.test.ts',
  'throttle-ipv6.test.ts',
  'throttle-redis.test.ts',
  'master-ops.test.ts',
] as const;

// Ports are handed out in order from a random start in the first half of the
// block (a rerun soon after does not meet the last run's TIME_WAIT sockets);
// the second half is headroom a file may use up.
const file = basename(process.argv[1] ?? '');
const index = (FILES as readonly string[]).indexOf(file);
const start = FIRST + index * BLOCK;
let next = start + Math.floor(Math.random() * (BLOCK / 2));

/** The next port of this test file's block; throws for a file not in the table or a block used up. */
export function nextPort(): number {
  if (index < 0) throw new Error(`test/helpers/ports.ts: ${file} has no port block; add it to FILES`);
  if (next >= start + BLOCK) throw new Error(`test/helpers/ports.ts: ${file} used up its ${BLOCK} ports`);
  return next++;
}

