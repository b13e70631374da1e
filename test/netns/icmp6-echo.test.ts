/**
 * The RTT prober's pinger over real ICMP and ICMPv6 (net-ping's IPv4 and
 * IPv6 sessions side by side, src/front/icmp_echo.ts), between two
 * namespaces of our own joined by a veth pair: IPv4 from 198.18.0.0/15 and
 * IPv6 from the benchmarking range 2001:2::/48 (RFC 5180, `nodad` so the
 * addresses are usable at once). Every echo to a present address must come
 * back with an RTT (a number >= 0; this kernel has no netem, so no delay
 * is added and no timing is asserted); an address nobody holds is answered
 * null (neighbour discovery fails, the echo times out).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/icmp-ping.ts', import.meta.url));
const prefix = testPrefix();
const A = `${prefix}-pa`;
const B = `${prefix}-pb`;
const ip = (...args: string[]): void => {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
};
const teardown = (): void => {
  for (const ns of [A, B]) {
    try {
      ip('netns', 'del', ns);
    } catch {
      // not there
    }
  }
};
onAnyExit(teardown);

describe('ICMPv6 and ICMP echo from the front node pinger', () => {
  before(() => {
    ip('netns', 'add', A);
    ip('netns', 'add', B);
    ip('-n', A, 'link', 'add', 'va', 'type', 'veth', 'peer', 'name', 'vb', 'netns', B);
    for (const [ns, dev, v4, v6] of [
      [A, 'va', '198.18.250.1/24', '2001:2:0:ff::1/64'],
      [B, 'vb', '198.18.250.2/24', '2001:2:0:ff::2/64'],
    ] as const) {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      // No DAD for the link-local address either: neighbour discovery is sent
      // from it, and while it is tentative (a second or two) no echo could go out.
      execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${dev}.accept_dad=0`]);
      ip('-n', ns, 'addr', 'add', v4, 'dev', dev);
      ip('-n', ns, '-6', 'addr', 'add', v6, 'dev', dev, 'nodad');
      ip('-n', ns, 'link', 'set', dev, 'up');
    }
  });
  after(teardown);

  /** Waits (bounded) until the system ping reaches `addr`: the link is up and neighbour discovery done, so the pinger's own echoes are what is measured. */
  const reachable = (addr: string): void => {
    for (let i = 0; i < 20; i++) {
      try {
        execFileSync('ip', ['netns', 'exec', A, 'ping', '-c', '1', '-W', '1', addr], { stdio: 'ignore' });
        return;
      } catch {
        // not yet
      }
    }
    assert.fail(`${addr} not reachable by ping`);
  };

  it('measures RTTs to an IPv6 and an IPv4 target, and answers null for an absent IPv6 address', async () => {
    reachable('2001:2:0:ff::2');
    reachable('198.18.250.2');
    const r = await nsRunAsync(A, process.execPath, [FIXTURE, '--targets', '2001:2:0:ff::2,198.18.250.2,2001:2:0:ff::99', '--count', '3', '--timeout', '500']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const by = new Map(lines.filter((l) => 'target' in l).map((l) => [l['target'] as string, l['rtts'] as (number | null)[]]));
    assert.deepEqual(lines.at(-1), { ipv6Unavailable: null });
    for (const t of ['2001:2:0:ff::2', '198.18.250.2']) {
      const rtts = by.get(t);
      assert.ok(rtts?.length === 3 && rtts.every((x) => x !== null && x >= 0), `${t}: ${JSON.stringify(rtts)}`);
    }
    assert.deepEqual(by.get('2001:2:0:ff::99'), [null, null, null]);
    process.stdout.write(`# RTTs ms: ${JSON.stringify(Object.fromEntries(by))}\n`);
  });
});
