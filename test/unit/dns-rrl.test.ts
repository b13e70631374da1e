/**
 * Response rate limiting by response (src/dns/rrl.ts): the table's
 * accounting (table-driven: rates, slip, window, kinds, log-only, bounded
 * memory) with an injected clock, then through the answerer of a real
 * DnsDaemon: which responses are identical (same name and type; NODATA per
 * name; NXDOMAIN per zone; errors per prefix), the client prefix, exempt
 * prefixes, the TC of a slipped response, TCP never limited.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DnsDaemon } from '../../src/dns/daemon.ts';
import { hashText, ResponseRateLimiter, RrlKind, RrlVerdict, type RrlOptions } from '../../src/dns/rrl.ts';

const { SEND: S, DROP: D, SLIP: L } = RrlVerdict;

const OPTS: RrlOptions = { responsesPerSecond: 4, nxdomainsPerSecond: 2, errorsPerSecond: 1, slip: 2, window: 2, maxEntries: 1000, logOnly: false };

/** One check: prefix text, kind, response text, time in ms. */
type Step = readonly [prefix: string, kind: RrlKind, response: string, at: number];

function run(opts: RrlOptions, steps: readonly Step[]): RrlVerdict[] {
  const r = new ResponseRateLimiter(opts);
  return steps.map(([p, k, resp, at]) => {
    const ph = hashText(p);
    const rh = hashText(resp);
    return r.check(ph[0] ?? 0, ph[1] ?? 0, k, rh[0] ?? 0, rh[1] ?? 0, at);
  });
}

const times = (n: number, step: (i: number) => Step): Step[] => Array.from({ length: n }, (_, i) => step(i));
const R = RrlKind.RESPONSE;

describe('RRL accounting', () => {
  const cases: [string, RrlOptions, Step[], RrlVerdict[]][] = [
    ['rate 4: four identical responses pass, then every 2nd limited one slips', OPTS, times(8, () => ['p', R, 'www|1', 0]), [S, S, S, S, D, L, D, L]],
    ['different names from one prefix are never limited', OPTS, times(12, (i) => ['p', R, `n${i}|1`, 0]), Array<RrlVerdict>(12).fill(S)],
    ['same name, different type: different responses', OPTS, [...times(4, () => ['p', R, 'www|1', 0] as const), ['p', R, 'www|28', 0]], [S, S, S, S, S]],
    ['another prefix has its own account', OPTS, [...times(5, () => ['p', R, 'www|1', 0] as const), ['q', R, 'www|1', 0]], [S, S, S, S, D, S]],
    ['credit refills at the rate: 250 ms buys one response at 4/s', OPTS, [...times(5, () => ['p', R, 'www|1', 0] as const), ['p', R, 'www|1', 500]], [S, S, S, S, D, S]],
    // 100 at t=0 floor the balance at -window*rate = -8; +1 s: -8+4-1 = -5 (limited); +2.5 s > window: afresh.
    ['window: a flood is remembered up to window seconds', { ...OPTS, slip: 0 }, [...times(100, () => ['p', R, 'x|1', 0] as const), ['p', R, 'x|1', 1000], ['p', R, 'x|1', 2500]], [...Array<RrlVerdict>(4).fill(S), ...Array<RrlVerdict>(96).fill(D), D, S]],
    ['NXDOMAIN has its own rate (2)', OPTS, times(4, () => ['p', RrlKind.NXDOMAIN, 'example.test|0', 0]), [S, S, D, L]],
    ['errors have their own rate (1)', OPTS, times(3, () => ['p', RrlKind.ERROR, '|0', 0]), [S, D, L]],
    ['same text, different kind: different responses', OPTS, [['p', RrlKind.ERROR, 'a|0', 0], ['p', RrlKind.NXDOMAIN, 'a|0', 0]], [S, S]],
    ['rate 0 does not limit', { ...OPTS, errorsPerSecond: 0 }, times(50, () => ['p', RrlKind.ERROR, '|0', 0]), Array<RrlVerdict>(50).fill(S)],
    ['slip 0 drops every limited response', { ...OPTS, slip: 0 }, times(7, () => ['p', R, 'www|1', 0]), [S, S, S, S, D, D, D]],
    ['log-only sends everything', { ...OPTS, logOnly: true }, times(8, () => ['p', R, 'www|1', 0]), Array<RrlVerdict>(8).fill(S)],
  ];
  for (const [what, opts, steps, want] of cases) {
    it(what, () => {
      assert.deepEqual(run(opts, steps), want);
    });
  }

  it('counts by kind; log-only counts what it would have limited', () => {
    const r = new ResponseRateLimiter({ ...OPTS, logOnly: true });
    for (let i = 0; i < 10; i++) r.check(1, 2, RrlKind.NXDOMAIN, 3, 4, 0);
    assert.equal(r.wouldLimit[RrlKind.NXDOMAIN], 8);
    assert.equal(r.dropped[RrlKind.NXDOMAIN], 0);
  });

  it('memory is fixed: the table never grows past its slots; live entries evicted are counted', () => {
    const r = new ResponseRateLimiter({ ...OPTS, maxEntries: 16 });
    assert.equal(r.capacity, 16);
    for (let i = 0; i < 1000; i++) {
      const h = hashText(`n${i}`);
      r.check(1, 2, R, h[0] ?? 0, h[1] ?? 0, i);
    }
    assert.equal(r.size, 16);
    assert.ok(r.evicted > 900, `evicted ${r.evicted}`);
    // The most recent entry of a set survives: it is not the least recently used.
    const last = hashText('n999');
    for (let i = 0; i < 3; i++) r.check(1, 2, R, last[0] ?? 0, last[1] ?? 0, 1000);
    assert.equal(r.check(1, 2, R, last[0] ?? 0, last[1] ?? 0, 1000), RrlVerdict.DROP, 'n999 kept its account (4 sent, the 5th limited)');
  });
});

// --- through the answerer ----------------------------------------------------------

const ZONE = `$ORIGIN example.test.
$TTL 300
@       IN SOA ns1 hostmaster 1 3600 600 86400 60
        IN NS  ns1
ns1     IN A   198.18.2.2
www     IN A   198.18.2.80
mail    IN A   198.18.2.25
*.wild  IN A   198.18.2.77
sub     IN NS  ns.sub
ns.sub  IN A   198.18.2.53
`;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function daemon(rrl: string): DnsDaemon {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-rrl-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'z.zone'), ZONE);
  writeFileSync(join(dir, 'dns.yaml'), `name: dns1\nlisten: ["127.0.0.1:53"]\nzones: [{ file: ${join(dir, 'z.zone')} }]\nrrl: ${rrl}\nadminSocket: ${join(dir, 'dns.sock')}\n`);
  return new DnsDaemon(join(dir, 'dns.yaml'));
}

function query(name: string, qtype: number, id = 1): Buffer {
  const labels = name === '' ? [] : name.split('.');
  const q = Buffer.alloc(12 + labels.reduce((n, l) => n + 1 + l.length, 1) + 4);
  q.writeUInt16BE(id, 0);
  q.writeUInt16BE(1, 4);
  let p = 12;
  for (const l of labels) {
    q[p++] = l.length;
    p += q.write(l, p, 'latin1');
  }
  q[p++] = 0;
  q.writeUInt16BE(qtype, p);
  q.writeUInt16BE(1, p + 2);
  return q;
}

function rrlOf(d: DnsDaemon): ResponseRateLimiter {
  assert.ok(d.rrl, 'rrl is on');
  return d.rrl;
}

/** 'drop', 'tc' (slipped: TC, no answer) or the rcode:ancount of what was sent. */
function ask(d: DnsDaemon, name: string, qtype: number, source: string, tcp = false, now = 1000): string {
  const q = query(name, qtype);
  const n = d.answerer.respond(q, q.length, source, tcp, now);
  if (n === 0) return 'drop';
  const b = d.answerer.writer.buf;
  if (((b[2] ?? 0) & 0x02) !== 0) return `tc:${b.readUInt16BE(6)}`;
  return `${(b[3] ?? 0) & 0x0f}:${b.readUInt16BE(6)}`;
}

describe('RRL in the answerer: identical responses per client prefix', () => {
  const RRL = '{ responsesPerSecond: 3, slip: 2, window: 5, exempt: [198.18.9.0/24, "2001:2:9::/48"] }';

  it('one name asked too often is limited; many names from the same /24 are all answered', () => {
    const d = daemon(RRL);
    const same = Array.from({ length: 6 }, (_, i) => ask(d, 'www.example.test', 1, `198.18.1.${i + 1}`));
    assert.deepEqual(same, ['0:1', '0:1', '0:1', 'drop', 'tc:0', 'drop'], 'one /24, one response');
    assert.equal(ask(d, 'mail.example.test', 1, '198.18.1.9'), '0:1', 'another name: another response');
    assert.equal(ask(d, 'www.example.test', 1, '198.18.2.1'), '0:1', 'another /24');
    assert.equal(ask(d, 'www.example.test', 1, '198.18.1.1', true), '0:1', 'TCP is never limited');
    assert.equal(d.answerer.counters.rrlDropped, 2);
    assert.equal(d.answerer.counters.rrlSlipped, 1);
    assert.equal(rrlOf(d).dropped[RrlKind.RESPONSE], 2);
  });

  it('NXDOMAIN for any names of one zone is one response (nxdomainsPerSecond defaults to responsesPerSecond)', () => {
    const d = daemon(RRL);
    const v = Array.from({ length: 5 }, (_, i) => ask(d, `random${i}.example.test`, 1, '198.18.1.1'));
    assert.deepEqual(v, ['3:0', '3:0', '3:0', 'drop', 'tc:0']);
    assert.equal(rrlOf(d).dropped[RrlKind.NXDOMAIN], 1);
  });

  it('NODATA per name whatever the type; wildcard answers per zone and type; referrals per delegation', () => {
    const d = daemon(RRL);
    assert.deepEqual([16, 15, 28, 33].map((t) => ask(d, 'mail.example.test', t, '198.18.1.1')), ['0:0', '0:0', '0:0', 'drop']);
    assert.deepEqual(Array.from({ length: 4 }, (_, i) => ask(d, `h${i}.wild.example.test`, 1, '198.18.1.1')), ['0:1', '0:1', '0:1', 'drop']);
    assert.deepEqual(Array.from({ length: 4 }, (_, i) => ask(d, `h${i}.sub.example.test`, 1, '198.18.1.1')), ['0:0', '0:0', '0:0', 'drop']);
    assert.equal(rrlOf(d).dropped[RrlKind.NODATA], 1);
    assert.equal(rrlOf(d).dropped[RrlKind.WILDCARD], 1);
    assert.equal(rrlOf(d).dropped[RrlKind.REFERRAL], 1);
  });

  it('errors share one account per prefix (REFUSED for other zones), slipped with TC', () => {
    const d = daemon('{ responsesPerSecond: 100, errorsPerSecond: 1, slip: 2 }');
    const v = ['a.invalid', 'b.invalid', 'c.invalid'].map((n) => ask(d, n, 1, '198.18.1.1'));
    assert.deepEqual(v, ['5:0', 'drop', 'tc:0']);
    assert.equal(rrlOf(d).dropped[RrlKind.ERROR], 1);
  });

  it('exempt prefixes are never limited; the prefix length is configurable', () => {
    const d = daemon(RRL);
    assert.deepEqual(Array.from({ length: 6 }, () => ask(d, 'www.example.test', 1, '198.18.9.7')), Array<string>(6).fill('0:1'));
    assert.deepEqual(Array.from({ length: 6 }, () => ask(d, 'www.example.test', 1, '2001:2:9::7')), Array<string>(6).fill('0:1'));
    const wide = daemon('{ responsesPerSecond: 1, slip: 0, ipv4PrefixLength: 16 }');
    assert.deepEqual([ask(wide, 'www.example.test', 1, '198.18.1.1'), ask(wide, 'www.example.test', 1, '198.18.200.1')], ['0:1', 'drop'], 'a /16: both sources share it');
    const v6 = daemon('{ responsesPerSecond: 1, slip: 0 }');
    assert.deepEqual([ask(v6, 'www.example.test', 1, '2001:2:0:100::1'), ask(v6, 'www.example.test', 1, '2001:2:0:1ff::1'), ask(v6, 'www.example.test', 1, '2001:2:0:200::1')], ['0:1', 'drop', '0:1'], 'IPv6 /56 by default');
  });

  it('log-only answers everything and counts what it would have limited', () => {
    const d = daemon('{ responsesPerSecond: 1, logOnly: true }');
    assert.deepEqual(Array.from({ length: 3 }, () => ask(d, 'www.example.test', 1, '198.18.1.1')), ['0:1', '0:1', '0:1']);
    assert.equal(rrlOf(d).wouldLimit[RrlKind.RESPONSE], 2);
  });
});
