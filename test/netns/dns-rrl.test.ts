/**
 * Response rate limiting by response (issue 25, acceptance 6), seen from
 * a client namespace: one /24 that sends 2,000 distinct queries/s (a big
 * resolver) is fully answered, while the same /24 asking one name 2,000
 * times/s is held to the configured rate. dnsperf is the client (a bounded
 * run: -Q caps the rate, -l the seconds; -q lets enough queries be
 * outstanding that dropped ones, waiting out their 1 s timeout, do not
 * slow it down); the server's own counters (admin socket) say what it
 * sent, dropped and slipped, and dnsperf what arrived.
 *
 * Namespaces <prefix>-srv (sluice dns, 198.18.252.1) and <prefix>-cli
 * (dnsperf, 198.18.252.10), one veth pair between them; always deleted.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { DnsProcess } from '../helpers/dns.ts';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';

const SERVER = '198.18.252.1';
const CLIENT = '198.18.252.10';
const NAMES = 2000;
const QPS = 2000;
const SECONDS = 3;
const RATE = 50;

const ZONE = `$ORIGIN example.test.
$TTL 3600
@        IN SOA ns1 hostmaster 1 1h 15m 1w 300
         IN NS  ns1
ns1      IN A   ${SERVER}
www      IN A   198.18.252.80
${Array.from({ length: NAMES }, (_, i) => `h${i} IN A 198.18.${(i >> 8) & 0xff}.${i & 0xff}`).join('\n')}
`;

interface Perf {
  sent: number;
  completed: number;
  lost: number;
}

function parsePerf(out: string): Perf {
  const num = (label: string): number => {
    const m = new RegExp(`${label}:\\s+(\\d+)`).exec(out);
    assert.ok(m, `dnsperf printed "${label}":\n${out}`);
    return Number(m[1]);
  };
  return { sent: num('Queries sent'), completed: num('Queries completed'), lost: num('Queries lost') };
}

describe('RRL by response: a resolver prefix', () => {
  const prefix = testPrefix();
  const srv = `${prefix}-srv`;
  const cli = `${prefix}-cli`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dns-rrl-'));
  const teardown = (): void => {
    down(prefix);
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  const d = (): DnsProcess => {
    assert.ok(daemon, 'the daemon started');
    return daemon;
  };
  const counters = async (): Promise<Record<string, number>> => (await d().status()).counters;
  const perf = async (queryFile: string): Promise<Perf> => {
    const r = await nsRunAsync(cli, 'dnsperf', ['-s', SERVER, '-d', queryFile, '-Q', String(QPS), '-l', String(SECONDS), '-c', '1', '-q', '8000', '-t', '1']);
    assert.equal(r.code, 0, `dnsperf: ${r.stderr}${r.stdout}`);
    return parsePerf(r.stdout);
  };

  before(async () => {
    run('ip', ['netns', 'add', srv]);
    run('ip', ['netns', 'add', cli]);
    run('ip', ['link', 'add', `${prefix}s`, 'netns', srv, 'type', 'veth', 'peer', 'name', `${prefix}c`, 'netns', cli]);
    ipBatch(srv, ['link set lo up', `addr add ${SERVER}/24 dev ${prefix}s`, `link set ${prefix}s up`]);
    ipBatch(cli, ['link set lo up', `addr add ${CLIENT}/24 dev ${prefix}c`, `link set ${prefix}c up`]);
    writeFileSync(join(dir, 'example.test.zone'), ZONE);
    writeFileSync(join(dir, 'distinct.txt'), Array.from({ length: NAMES }, (_, i) => `h${i}.example.test A\n`).join(''));
    writeFileSync(join(dir, 'same.txt'), 'www.example.test A\n');
    const config = join(dir, 'dns.yaml');
    writeFileSync(
      config,
      `name: dns-rrl
listen: ["${SERVER}:53"]
zones: [{ file: ${join(dir, 'example.test.zone')} }]
rrl: { responsesPerSecond: ${RATE}, slip: 2, window: 5 }
adminSocket: ${join(dir, 'dns.sock')}
`,
    );
    daemon = new DnsProcess(srv, config, join(dir, 'dns.sock'));
    await daemon.ready();
  });

  after(async () => {
    try {
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  it(`${QPS} distinct queries/s from one /24 are all answered`, async () => {
    const before = await counters();
    const p = await perf(join(dir, 'distinct.txt'));
    const c = await counters();
    const answered = (c['answered'] ?? 0) - (before['answered'] ?? 0);
    assert.ok(p.sent >= QPS * SECONDS * 0.5, `dnsperf sent ${p.sent} queries in ${SECONDS} s`);
    assert.equal((c['rrlDropped'] ?? 0) - (before['rrlDropped'] ?? 0), 0, 'none dropped by RRL');
    assert.equal((c['rrlSlipped'] ?? 0) - (before['rrlSlipped'] ?? 0), 0, 'none slipped');
    assert.equal(answered, p.sent, `the server answered every query (${answered} of ${p.sent})`);
    assert.equal(p.completed, p.sent, `the client received every answer: ${JSON.stringify(p)}`);
  });

  it(`one name ${QPS} times/s from the same /24 is limited to ${RATE}/s, every 2nd excess response slipped`, async () => {
    const before = await counters();
    const p = await perf(join(dir, 'same.txt'));
    const c = await counters();
    const delta = (k: string): number => (c[k] ?? 0) - (before[k] ?? 0);
    const dropped = delta('rrlDropped');
    const slipped = delta('rrlSlipped');
    // A slipped response is counted as answered too (it is sent, truncated).
    const full = delta('answered') - slipped;
    const detail = JSON.stringify({ perf: p, full, dropped, slipped });
    assert.ok(p.sent >= QPS * SECONDS * 0.5, `dnsperf sent ${p.sent} queries: ${detail}`);
    // Every query the server read ends as a full answer, a drop or a slip; on a busy machine the
    // kernel may drop a few datagrams before the server reads them (not RRL's doing: at most 1%).
    const handled = full + dropped + slipped;
    assert.ok(handled <= p.sent && handled >= p.sent * 0.99, `queries handled ${handled} of ${p.sent}: ${detail}`);
    // The balance starts at RATE and is floored at -window × RATE: a steady flood gets the first RATE answers and nothing after.
    assert.ok(full >= RATE && full <= RATE * (SECONDS + 1), `full answers held near ${RATE}/s: ${detail}`);
    assert.ok(Math.abs(dropped - slipped) <= 1, `slip 2: half the excess slipped: ${detail}`);
    assert.equal(p.completed, full + slipped, `the client got the full and the truncated answers, nothing else: ${detail}`);
    const st = await d().status();
    const rrl = st['rrl'] as { dropped: Record<string, number>; entries: number };
    assert.ok((rrl.dropped['response'] ?? 0) >= dropped, `status names the kind: ${JSON.stringify(rrl)}`);
  });
});
