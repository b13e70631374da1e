import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { FLOW_CHUNK_BYTES, readKernelFlows, streamKernelFlows, type KernelFlow } from '../../src/front/conntrack-proc.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';

const dir = mkdtempSync(join(tmpdir(), 'ct-proc-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

function line(i: number): string {
  const port = 10_000 + i;
  return `ipv4     2 tcp      6 431999 ESTABLISHED src=198.18.64.1 dst=198.19.1.1 sport=${String(port)} dport=80 src=198.18.4.2 dst=198.18.64.1 sport=80 dport=${String(port)} [ASSURED] mark=1358954497 zone=0 use=2`;
}

describe('streamKernelFlows', () => {
  it('reads every flow of a table many chunks long, lines cut at chunk ends included', async () => {
    const n = Math.ceil((FLOW_CHUNK_BYTES * 3.5) / line(0).length);
    const lines: string[] = [];
    for (let i = 0; i < n; i++) {
      lines.push(line(i));
      if (i % 100 === 7) lines.push('ipv4 2 icmp 1 29 src=1.2.3.4 dst=5.6.7.8 type=8 code=0 id=1 src=5.6.7.8 dst=1.2.3.4 type=0 code=0 id=1 mark=0 use=1'); // not ours: skipped
    }
    const path = join(dir, 'big');
    writeFileSync(path, lines.join('\n') + '\n');
    const ports: number[] = [];
    const count = await streamKernelFlows((f) => ports.push(f.clientPort), path);
    assert.equal(count, n);
    assert.deepEqual(
      ports,
      Array.from({ length: n }, (_, i) => 10_000 + i),
    );
  });

  it('takes a last line without its newline, and an empty table', async () => {
    const path = join(dir, 'nonl');
    writeFileSync(path, `${line(1)}\n${line(2)}`);
    const flows: KernelFlow[] = await readKernelFlows(path);
    assert.deepEqual(
      flows.map((f) => [f.clientPort, f.client, f.dst, f.replySrc]),
      [1, 2].map((i) => [10_000 + i, parseIPv4Address('198.18.64.1'), parseIPv4Address('198.19.1.1'), parseIPv4Address('198.18.4.2')]),
    );
    writeFileSync(join(dir, 'empty'), '');
    assert.equal(await streamKernelFlows(() => assert.fail('no flow'), join(dir, 'empty')), 0);
  });

  it('no table in the namespace yet: no flows; a path that cannot be read as a file: ConntrackReadError', async () => {
    assert.equal(await streamKernelFlows(() => undefined, join(dir, 'absent')), 0);
    await assert.rejects(streamKernelFlows(() => undefined, dir), { code: 'ERR_SLUICE_CONNTRACK_READ' });
  });
  // The conntrack(8) listing (where /proc is not readable: CAP_NET_ADMIN
  // without root) goes through the same splitter; the systemd netns test
  // (test/netns/front-systemd.test.ts) runs the daemon so.
});
