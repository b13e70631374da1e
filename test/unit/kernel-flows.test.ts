import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { FLOW_CHUNK_BYTES, FlowLines, parseConntrackLine, readKernelFlows, streamKernelFlows, type KernelFlow } from '../../src/front/kernel-flows.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';

const dir = mkdtempSync(join(tmpdir(), 'ct-proc-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

function line(i: number): string {
  const port = 10_000 + i;
  return `ipv4     2 tcp      6 431999 ESTABLISHED src=198.18.64.1 dst=198.19.1.1 sport=${String(port)} dport=80 src=198.18.4.2 dst=198.18.64.1 sport=80 dport=${String(port)} [ASSURED] mark=1358954497 zone=0 use=2`;
}

/** Resolves once cond() holds; fails after 5 s (the reads are on the threadpool). */
async function until(cond: () => boolean): Promise<void> {
  for (let t = 0; !cond(); t++) {
    if (t > 5000) assert.fail('not reached in 5 s');
    await new Promise((r) => setTimeout(r, 1));
  }
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
    const count = await streamKernelFlows((f) => ports.push(f.clientPort), { path });
    assert.equal(count, n);
    assert.deepEqual(
      ports,
      Array.from({ length: n }, (_, i) => 10_000 + i),
    );
  });

  it('reads whole chunks, and no further chunk until the pace resolves', async () => {
    const n = Math.ceil((FLOW_CHUNK_BYTES * 2.5) / line(0).length);
    const path = join(dir, 'paced');
    writeFileSync(path, Array.from({ length: n }, (_, i) => line(i)).join('\n') + '\n');
    // Flows seen at each pace call: a chunk of a regular file is full but the last.
    const seenAtPace: number[] = [];
    let seen = 0;
    let release: () => void = () => undefined;
    const read = streamKernelFlows(
      () => seen++,
      {
        path,
        pace: () => {
          seenAtPace.push(seen);
          return new Promise<void>((r) => (release = r));
        },
      },
    );
    await until(() => seenAtPace.length === 1);
    const perChunk = Math.floor(FLOW_CHUNK_BYTES / line(0).length);
    assert.ok(seenAtPace[0] !== undefined && seenAtPace[0] >= perChunk * 0.95 && seenAtPace[0] <= perChunk, `first chunk: ${String(seenAtPace[0])} flows, ~${String(perChunk)} fit`);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(seenAtPace.length, 1, 'held: no second chunk read');
    release();
    await until(() => seenAtPace.length === 2);
    release();
    await until(() => seenAtPace.length === 3);
    release();
    assert.equal(await read, n);
    assert.equal(seenAtPace.length, 3);
  });

  it('takes a last line without its newline, and an empty table', async () => {
    const path = join(dir, 'nonl');
    writeFileSync(path, `${line(1)}\n${line(2)}`);
    const flows: KernelFlow[] = await readKernelFlows({ path });
    assert.deepEqual(
      flows.map((f) => [f.clientPort, f.client, f.dst, f.replySrc]),
      [1, 2].map((i) => [10_000 + i, parseIPv4Address('198.18.64.1'), parseIPv4Address('198.19.1.1'), parseIPv4Address('198.18.4.2')]),
    );
    writeFileSync(join(dir, 'empty'), '');
    assert.equal(await streamKernelFlows(() => assert.fail('no flow'), { path: join(dir, 'empty') }), 0);
  });

  it('no table in the namespace yet: no flows; a path that cannot be read as a file: ConntrackReadError', async () => {
    assert.equal(await streamKernelFlows(() => undefined, { path: join(dir, 'absent') }), 0);
    await assert.rejects(streamKernelFlows(() => undefined, { path: dir }), { code: 'ERR_SLUICE_CONNTRACK_READ' });
  });
  it('a line cut anywhere between two chunks, and a line longer than the carry buffer, parse as whole lines', () => {
    const long = `${line(3)}${' pad=0'.repeat(400)}`; // 2.5 KiB: the kept bytes of a cut line outgrow their first buffer
    const text = [line(1), 'ipv4 2 icmp 1 29 src=1.2.3.4 dst=5.6.7.8 type=8 code=0 id=1 src=5.6.7.8 dst=1.2.3.4 type=0 code=0 id=1 mark=0 use=1', line(2), long, line(4)].join('\n') + '\n';
    const bytes = Buffer.from(text, 'latin1');
    const want = [1, 2, 3, 4].map((i) => 10_000 + i);
    for (const size of [1, 2, 7, 64, 251, 1000, bytes.length]) {
      const ports: number[] = [];
      const sink = new FlowLines((f) => ports.push(f.clientPort));
      // Chunks of `size` bytes, each in a larger reused buffer whose tail is stale (as the /proc read's is), filled with newlines past `length`.
      const buf = Buffer.alloc(size + 16, 0x0a); // stale newlines: a line ends only within `length`
      for (let at = 0; at < bytes.length; at += size) sink.push(buf, bytes.copy(buf, 0, at, Math.min(at + size, bytes.length)));
      sink.end();
      assert.deepEqual(ports, want, `chunks of ${String(size)}`);
    }
  });

  it('parses lines from their bytes (table-driven): families, protocols, states, and what it refuses', () => {
    const T = 'ipv4     2 tcp      6 431999';
    const tuple = 'src=198.18.64.1 dst=198.19.1.1 sport=40000 dport=80 src=198.18.4.2 dst=198.18.64.1 sport=8080 dport=40000';
    const a = (t: string): number => parseIPv4Address(t) ?? -1;
    const v4 = { family: 4, protocol: 'tcp', client: a('198.18.64.1'), clientPort: 40000, dst: a('198.19.1.1'), dstPort: 80, replySrc: a('198.18.4.2'), replySrcPort: 8080 };
    const cases: [string, string, object | undefined][] = [
      ['established', `${T} ESTABLISHED ${tuple} [ASSURED] mark=0 zone=0 use=2`, { ...v4, state: 'ESTABLISHED' }],
      ['every known state', `${T} SYN_SENT2 ${tuple} mark=0 use=1`, { ...v4, state: 'SYN_SENT2' }],
      ['a state added later is kept as text', `${T} SOMETHING_NEW ${tuple} use=1`, { ...v4, state: 'SOMETHING_NEW' }],
      ['unreplied, tabs, no trailing fields', `ipv4\t2\ttcp\t6\t5\tSYN_SENT\t${tuple.replace(' src=198.18.4.2', ' [UNREPLIED] src=198.18.4.2')}`, { ...v4, state: 'SYN_SENT' }],
      ['udp has no state field', `ipv4 2 udp 17 29 ${tuple} mark=0 use=1`, { ...v4, protocol: 'udp', state: 'UDP' }],
      ['a carriage return at the end', `${T} CLOSE_WAIT ${tuple}\r`, { ...v4, state: 'CLOSE_WAIT' }],
      ['icmp', 'ipv4 2 icmp 1 29 src=1.2.3.4 dst=5.6.7.8 type=8 code=0 id=1 src=5.6.7.8 dst=1.2.3.4 type=0 code=0 id=1 mark=0 use=1', undefined],
      ['another family', `ipx 2 tcp 6 5 ESTABLISHED ${tuple}`, undefined],
      ['an octet over 255', `${T} ESTABLISHED ${tuple.replace('198.19.1.1', '198.19.1.256')}`, undefined],
      ['an octal look-alike', `${T} ESTABLISHED ${tuple.replace('198.19.1.1', '198.19.01.1')}`, undefined],
      ['three octets', `${T} ESTABLISHED ${tuple.replace('198.19.1.1', '198.19.1')}`, undefined],
      ['a port over 65535', `${T} ESTABLISHED ${tuple.replace('sport=40000', 'sport=65536')}`, undefined],
      ['a port that is not a number', `${T} ESTABLISHED ${tuple.replace('dport=80', 'dport=8x')}`, undefined],
      ['an empty value', `${T} ESTABLISHED ${tuple.replace('dport=80', 'dport=')}`, undefined],
      ['keys out of order', `${T} ESTABLISHED ${tuple.replace('src=198.18.64.1 dst=198.19.1.1', 'dst=198.19.1.1 src=198.18.64.1')}`, undefined],
      ['the reply tuple missing', `${T} ESTABLISHED src=198.18.64.1 dst=198.19.1.1 sport=40000 dport=80 mark=0`, undefined],
      ['empty', '', undefined],
    ];
    for (const [name, text, want] of cases) assert.deepEqual(parseConntrackLine(text), want, name);
  });

  // The daemon's own read goes over ctnetlink (test/netns/ct-dump.test.ts
  // compares it with this parser's reading of /proc, root and unprivileged).
});
