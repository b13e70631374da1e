/**
 * `sluice dns` under a fuzzer: 100,000 malformed and mutated queries over
 * UDP and a few hundred malformed TCP frames (test/fixtures/dns-fuzz.ts, a
 * seeded PRNG; the seed is printed, SLUICE_FUZZ_SEED replays it), while dig
 * keeps asking for real names. The server must keep answering (also after
 * half the packets), stay up, send only well-formed replies, and account
 * for every query in its counters (RRL is off, so nothing is dropped
 * silently: every query ends in exactly one outcome counter).
 *
 * The namespace <prefix>-dns holds a veth pair (both ends inside) with
 * 198.18.250.2 and 2001:2::2; daemon, fuzzer and dig run in it. Teardown
 * (after(), and process 'exit'/SIGINT/SIGTERM hooks for a crash or an
 * interrupted run) kills whatever runs in the namespace, deletes it and
 * the temp dir.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { DnsProcess, testDnsWorkers } from '../helpers/dns.ts';
import { sleep, until } from '../helpers/wait.ts';

const FUZZ = fileURLToPath(new URL('../fixtures/dns-fuzz.ts', import.meta.url));
const NODE = process.execPath;
const V4 = '198.18.250.2';
const V6 = '2001:2::2';
const PACKETS = 100_000;

const ZONE = `$ORIGIN example.test.
$TTL 3600
@        IN SOA  ns1 hostmaster 2024010101 1h 15m 1w 300
         IN NS   ns1
         IN MX   10 mail
ns1      IN A    198.18.250.53
mail     IN A    198.18.250.25
web      IN A    198.18.250.81
         IN AAAA 2001:2::81
alias    IN CNAME web
alias2   IN CNAME alias
info     IN TXT  "hello world"
_sip._udp IN SRV 10 20 5060 web
${Array.from({ length: 8 }, (_, i) => `big IN TXT "${String.fromCharCode(0x61 + i).repeat(200)}"`).join('\n')}
www      60 IN A 198.18.250.10
*.wild   IN A    198.18.250.99
sub      IN NS   ns1.sub
ns1.sub  IN A    198.18.250.153
`;



/** dig in the namespace: the status and answer records, or undefined without a reply. */
async function dig(ns: string, server: string, name: string, type = 'A'): Promise<{ status: string; answers: string[] } | undefined> {
  const r = await nsRunAsync(ns, 'dig', ['+time=1', '+tries=3', '+noall', '+comments', '+answer', `@${server}`, name, type]);
  const status = /status: (\w+)/.exec(r.stdout)?.[1];
  if (r.code !== 0 || status === undefined) return undefined;
  const answers = r.stdout.split('\n').filter((l) => l !== '' && !l.startsWith(';')).map((l) => l.trim().split(/\s+/).join(' '));
  return { status, answers };
}

interface FuzzDone {
  done: true;
  seed: number;
  sent: number;
  replies: number;
  markers: number;
  markersLost: number;
  tcpConnections: number;
  tcpFrames: number;
  tcpReplies: number;
  malformedReplies: number;
  examples: string[];
  timedOut: boolean;
}

/** Every outcome counter: with RRL off, each query ends in exactly one. */
const OUTCOMES = ['ignored', 'formerr', 'notimp', 'badvers', 'refused', 'servfail', 'nxdomain', 'nodata', 'answered', 'referral'] as const;

describe('sluice dns under a fuzzer', () => {
  const prefix = testPrefix();
  const ns = `${prefix}-dns`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dns-fuzz-'));
  const teardown = (): void => {
    down(prefix); // kills everything left in <prefix>-*, deletes the namespaces
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  let fuzzer: ChildProcess | undefined;

  before(async () => {
    run('ip', ['netns', 'add', ns]);
    ipBatch(ns, ['link set lo up', 'link add dns0 type veth peer name dns1', `addr add ${V4}/24 dev dns0`, `addr add ${V6}/64 dev dns0 nodad`, 'link set dns0 up', 'link set dns1 up']);
    writeFileSync(join(dir, 'example.test.zone'), ZONE);
    const config = join(dir, 'dns.yaml');
    const socket = join(dir, 'dns.sock');
    writeFileSync(
      config,
      `name: dns-fuzz
listen: ["${V4}:53", "[${V6}]:53"]
zones: [{ file: ${join(dir, 'example.test.zone')} }]
clusters: [{ name: c1, vips: [198.19.1.1] }, { name: c2, vips: [198.19.2.1] }]
steering: { names: [{ name: www.example.test, ttl: 5 }] }
workers: ${testDnsWorkers()}
rrl: { enabled: false }
adminSocket: ${socket}
`,
    );
    daemon = new DnsProcess(ns, config, socket);
    await daemon.ready();
  });

  after(async () => {
    try {
      fuzzer?.kill('SIGKILL');
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  it(`${PACKETS} fuzzed UDP packets and malformed TCP frames: answering throughout, well-formed replies, every query counted, no crash`, async (t) => {
    assert.ok(daemon);
    const d = daemon;
    const seed = process.env['SLUICE_FUZZ_SEED'] ?? String(randomInt(2 ** 31));
    t.diagnostic(`fuzz seed ${seed} (replay: SLUICE_FUZZ_SEED=${seed})`);
    const before = await d.status();

    const child = spawn('ip', ['netns', 'exec', ns, NODE, FUZZ, '--server', V4, '--seed', seed, '--count', String(PACKETS), '--deadline-s', '55'], { stdio: ['ignore', 'pipe', 'pipe'] });
    fuzzer = child;
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    let fraction = 0;
    let done: FuzzDone | undefined;
    createInterface({ input: child.stdout }).on('line', (line) => {
      const o = JSON.parse(line) as Record<string, unknown>;
      if (o['done'] === true) done = o as unknown as FuzzDone;
      else if (typeof o['sent'] === 'number' && typeof o['total'] === 'number') fraction = o['sent'] / o['total'];
    });
    const exited = new Promise<number>((resolve) => child.once('exit', (code) => { resolve(code ?? -1); }));
    const running = (): boolean => child.exitCode === null && child.signalCode === null;

    // While it runs: dig www and web; once past half the packets, both must be answered.
    const names = [['www.example.test', 'A'], ['web.example.test', 'A']] as const;
    const answeredAfterHalf = new Set<string>();
    const tries: string[] = [];
    const end = Date.now() + 90_000;
    while (running() && answeredAfterHalf.size < names.length && Date.now() < end) {
      for (const [name, type] of names) {
        if (answeredAfterHalf.has(name)) continue;
        const from = fraction;
        const r = await dig(ns, V4, name, type);
        tries.push(`${name}@${from.toFixed(2)}:${r?.status ?? 'no reply'}`);
        if (from >= 0.5 && running() && r?.status === 'NOERROR' && r.answers.length > 0) answeredAfterHalf.add(name);
      }
      await sleep(100);
    }
    const code = await exited;
    fuzzer = undefined;
    assert.equal(code, 0, `fuzzer exit ${code}: ${stderr}`);
    assert.ok(done, 'the fuzzer reported its totals');
    const info = `seed ${seed}: ${JSON.stringify(done)}`;
    t.diagnostic(info);
    assert.equal(done.timedOut, false, info);
    assert.equal(done.sent, PACKETS, info);
    assert.ok(done.tcpFrames >= 300, info);
    assert.deepEqual([...answeredAfterHalf].sort(), ['web.example.test', 'www.example.test'], `both names answered while the fuzzer ran, after half its packets; digs: ${tries.join(' ')}`);
    assert.equal(done.malformedReplies, 0, `every reply is a well-formed DNS message: ${done.examples.join('\n')}`);

    // After: still up, still answering, every query counted once.
    assert.ok(d.running, 'sluice dns is still running');
    const www = await dig(ns, V4, 'www.example.test');
    assert.deepEqual(www?.answers.sort(), ['www.example.test. 5 IN A 198.19.1.1', 'www.example.test. 5 IN A 198.19.2.1']);
    const web6 = await dig(ns, V6, 'web.example.test', 'AAAA');
    assert.deepEqual(web6?.answers, ['web.example.test. 3600 IN AAAA 2001:2::81']);

    const s = await d.status();
    const c = s.counters;
    const delta = (k: string): number => (c[k] ?? 0) - (before.counters[k] ?? 0);
    const counters = JSON.stringify(c);
    assert.ok(delta('queries') >= PACKETS, `queries ${delta('queries')} >= ${PACKETS}: ${counters}`);
    assert.ok(delta('udp') >= PACKETS, counters);
    assert.ok(delta('tcp') > 0 && delta('tcpAccepted') >= done.tcpConnections, counters);
    assert.ok(delta('formerr') + delta('ignored') + delta('notimp') > 0, counters);
    assert.ok(delta('formerr') > 0 && delta('ignored') > 0 && delta('notimp') > 0, counters);
    assert.ok(Object.keys(s.rejects).length > 0, 'the rejects map is not empty');
    assert.equal(c['queries'], OUTCOMES.reduce((sum, k) => sum + (c[k] ?? 0), 0), `every query has exactly one outcome: ${counters}`);
    assert.equal(Object.values(s.rejects).reduce((a, b) => a + b, 0), (c['ignored'] ?? 0) + (c['formerr'] ?? 0) + (c['notimp'] ?? 0), `every rejection has a reason: ${JSON.stringify(s.rejects)}`);
    assert.equal(c['encodeErrors'], 0, counters);
    for (const reason of ['short', 'response', 'opcode', 'qdcount', 'ancount', 'nscount', 'arcount', 'counts', 'name', 'question', 'opt_owner', 'opt_twice', 'opt_length', 'ecs', 'record']) {
      assert.ok((s.rejects[reason] ?? 0) > 0, `the fuzzer reached reject reason ${reason}: ${JSON.stringify(s.rejects)}`);
    }

    // No crash and nothing alarming in its log.
    const alarming = d.lines.filter((l) => (typeof l['level'] === 'number' && l['level'] >= 50) || (typeof l['raw'] === 'string' && /error|uncaught|exception|\bat\s/i.test(l['raw'])));
    assert.deepEqual(alarming, []);
    await until(() => d.status().then((x) => x.counters['tcpConnections'] === 0), 'every fuzzer TCP connection closed', 15_000, 200);
  });
});
