/**
 * The TCP probe (src/front/tcp_probe.ts) on a real kernel, between two
 * namespaces of our own joined by a veth pair (IPv4 198.18.250.0/24, IPv6
 * 2001:2:0:ff::/64). B listens on port 443 (IPv4 and IPv6) and on nothing
 * else: a SYN to 443 gets a SYN-ACK, a SYN to 53 a RST, a SYN to an absent
 * address nothing.
 *
 * Besides the RTTs (numbers >= 0; no netem here, no timing asserted) it
 * checks the reset of the half-open connection, and measures who resets
 * it: nft counters in B count the RSTs that arrive, and a rule in A that
 * drops RSTs not sent by a process socket (the kernel's own, answering a
 * SYN-ACK for a port it has no socket on; `meta skuid` matches only
 * packets of a user's socket) counts the kernel's. With that rule, our RST
 * alone must clear B's SYN-RECV entry; with all RSTs dropped (the negative
 * control) the entry stays, so the check can fail.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/tcp-ping.ts', import.meta.url));
const prefix = testPrefix();
const A = `${prefix}-ta`;
const B = `${prefix}-tb`;
const B4 = '198.18.250.2';
const B6 = '2001:2:0:ff::2';
const ip = (...args: string[]): void => {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
};
const nft = (ns: string, script: string): void => {
  execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: script, stdio: ['pipe', 'ignore', 'pipe'] });
};
/** A counter's packets, by the comment on its rule. */
const counter = (ns: string, table: string, comment: string): number => {
  const out = execFileSync('ip', ['netns', 'exec', ns, 'nft', 'list', 'table', 'inet', table], { encoding: 'utf8' });
  const line = out.split('\n').find((l) => l.includes(`comment "${comment}"`));
  const m = /counter packets (\d+)/.exec(line ?? '');
  assert.ok(m, `no counter "${comment}" in:\n${out}`);
  return Number(m[1]);
};
const ping = (addr: string): boolean => {
  try {
    execFileSync('ip', ['netns', 'exec', A, 'ping', '-c', '1', '-W', '1', addr], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const synRecv = (): string => execFileSync('ip', ['netns', 'exec', B, 'ss', '-Htn', 'state', 'syn-recv'], { encoding: 'utf8' }).trim();
let listener: ChildProcess | undefined;
const teardown = (): void => {
  listener?.kill();
  for (const ns of [A, B]) {
    try {
      ip('netns', 'del', ns);
    } catch {
      // not there
    }
  }
};
onAnyExit(teardown);

interface Out {
  by: Map<string, (number | null)[]>;
  counters: { sent: number; synAcks: number; rsts: number; resetsSent: number; timeouts: number; refused: number; sendErrors: number };
  ipv6Unavailable: string | null;
}
async function probe(args: string[]): Promise<Out> {
  const r = await nsRunAsync(A, process.execPath, [FIXTURE, ...args]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const last = lines.at(-1) as unknown as Omit<Out, 'by'>;
  return { by: new Map(lines.filter((l) => 'target' in l).map((l) => [l['target'] as string, l['rtts'] as (number | null)[]])), counters: last.counters, ipv6Unavailable: last.ipv6Unavailable };
}
const answered = (rtts: (number | null)[] | undefined, n: number): boolean => rtts?.length === n && rtts.every((x) => x !== null && x >= 0);

describe('TCP probe (SYN, timed to the SYN-ACK or RST) from the front node', () => {
  before(async () => {
    ip('netns', 'add', A);
    ip('netns', 'add', B);
    ip('-n', A, 'link', 'add', 'va', 'type', 'veth', 'peer', 'name', 'vb', 'netns', B);
    for (const [ns, dev, v4, v6] of [
      [A, 'va', '198.18.250.1/24', '2001:2:0:ff::1/64'],
      [B, 'vb', `${B4}/24`, `${B6}/64`],
    ] as const) {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${dev}.accept_dad=0`]);
      ip('-n', ns, 'addr', 'add', v4, 'dev', dev);
      ip('-n', ns, '-6', 'addr', 'add', v6, 'dev', dev, 'nodad');
      ip('-n', ns, 'link', 'set', dev, 'up');
    }
    // RSTs arriving at B from A, per family.
    nft(B, `table inet probe {
  chain in {
    type filter hook input priority 0; policy accept;
    ip saddr 198.18.250.1 tcp flags & rst == rst counter comment "rst4"
    ip6 saddr 2001:2:0:ff::1 tcp flags & rst == rst counter comment "rst6"
  }
}`);
    // A listener on 443 that never accepts (the handshake completes in the kernel; a SYN-RECV entry lives until a RST or the final ACK).
    listener = spawn('ip', ['netns', 'exec', B, process.execPath, '-e', "require('net').createServer().listen({ port: 443, host: '::', ipv6Only: false }, () => console.log('up'))"], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      listener!.stdout!.once('data', () => { resolve(); });
      listener!.once('exit', (c) => { reject(new Error(`listener exited ${String(c)}`)); });
    });
  });
  after(teardown);

  it('measures RTTs from SYN-ACKs (port 443) and RSTs (port 53), IPv4 and IPv6, and answers null for an absent address', async () => {
    // Link up and neighbour discovery done first (bounded), so the probes are what is measured.
    for (const addr of [B4, B6]) await until(() => ping(addr), `${addr} reachable by ping`, 20_000, 100);
    const open = await probe(['--port', '443', '--targets', `${B4},${B6}`, '--count', '3', '--timeout', '1000']);
    assert.equal(open.ipv6Unavailable, null);
    for (const t of [B4, B6]) assert.ok(answered(open.by.get(t), 3), `${t}: ${JSON.stringify(open.by.get(t))}`);
    assert.deepEqual({ ...open.counters }, { sent: 6, synAcks: 6, rsts: 0, resetsSent: 6, timeouts: 0, refused: 0, sendErrors: 0 });
    const closed = await probe(['--port', '53', '--targets', `${B4},${B6},198.18.250.99`, '--count', '2', '--timeout', '300']);
    for (const t of [B4, B6]) assert.ok(answered(closed.by.get(t), 2), `${t}: ${JSON.stringify(closed.by.get(t))}`);
    assert.deepEqual(closed.by.get('198.18.250.99'), [null, null]);
    assert.deepEqual({ ...closed.counters }, { sent: 6, synAcks: 0, rsts: 4, resetsSent: 0, timeouts: 2, refused: 0, sendErrors: 0 });
    // Outstanding side by side: each answer finds its own probe (ports and acks differ).
    const par = await probe(['--port', '443', '--parallel', '--targets', `${B4},${B6},198.18.250.99,2001:2:0:ff::99`, '--timeout', '500']);
    assert.ok(answered(par.by.get(B4), 1) && answered(par.by.get(B6), 1), JSON.stringify([...par.by]));
    assert.deepEqual([par.by.get('198.18.250.99'), par.by.get('2001:2:0:ff::99')], [[null], [null]]);
    process.stdout.write(`# RTTs ms, 443: ${JSON.stringify(Object.fromEntries(open.by))}; 53: ${JSON.stringify(Object.fromEntries(closed.by))}\n`);
  });

  it('resets the half-open connection itself; the local kernel RSTs the SYN-ACK too (measured)', async () => {
    await until(() => synRecv() === '', 'no SYN-RECV entry left in B from the first test', 5000, 100);
    const before4 = counter(B, 'probe', 'rst4');
    const before6 = counter(B, 'probe', 'rst6');
    // Without intervention: how many RSTs reach B per SYN-ACK probe.
    const plain = await probe(['--port', '443', '--targets', `${B4},${B6}`, '--count', '2']);
    assert.equal(plain.counters.resetsSent, 4);
    const per4 = counter(B, 'probe', 'rst4') - before4;
    const per6 = counter(B, 'probe', 'rst6') - before6;
    process.stdout.write(`# RSTs at the target for 2 SYN-ACK probes: IPv4 ${per4}, IPv6 ${per6} (ours 2 each; the rest are the local kernel's)\n`);
    assert.ok(per4 >= 2 && per6 >= 2, `${per4} ${per6}`);

    // Drop the kernel's RSTs in A (packets of no process socket): ours alone must clear B's SYN-RECV.
    nft(A, `table inet k {
  chain out {
    type filter hook output priority 0; policy accept;
    tcp flags & rst == rst meta skuid 0 accept
    tcp flags & rst == rst counter drop comment "kernel-rst"
  }
}`);
    const ours = await probe(['--port', '443', '--targets', `${B4},${B6}`, '--count', '2']);
    assert.equal(ours.counters.resetsSent, 4);
    const kernelRsts = counter(A, 'k', 'kernel-rst');
    process.stdout.write(`# kernel RSTs dropped in A for 4 SYN-ACKs: ${kernelRsts}\n`);
    await until(() => synRecv() === '', 'B holds no half-open connection after our RSTs alone', 3000, 100);

    // Negative control: with every RST dropped the half-open connection stays (so the check above can fail).
    nft(A, 'flush table inet k\nadd rule inet k out tcp flags & rst == rst drop');
    const none = await probe(['--port', '443', '--targets', B4, '--count', '1']);
    assert.ok(answered(none.by.get(B4), 1));
    assert.notEqual(synRecv(), '', 'a SYN-RECV entry in B while all RSTs are dropped');
    nft(A, 'delete table inet k');
  });
});
