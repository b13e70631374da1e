/**
 * SYN cookies only under a SYN flood (`synproxy: auto`): the config's
 * shapes, the table's sets, the gate's hysteresis (injected clock and
 * readings) and the writer's transactions.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema, synproxyOf, type FrontConfig } from '../../src/front/config.ts';
import { configuredSpread, renderNft, synproxiedUpdateScript } from '../../src/front/nft.ts';
import { compareOwned, isDamaged, ownedNftPart } from '../../src/front/rules-check.ts';
import { renderRules } from '../../src/front/rules.ts';
import { SynproxyAuto, newGate, parseSynSeen, stepGate, type GatePolicy } from '../../src/front/synproxy-auto.ts';

function config(services: Record<string, unknown>[]): FrontConfig {
  const doc = {
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    services: services.map((x, i) => ({ name: `svc${String(i)}`, vip: '198.19.1.1', port: 80 + i, method: 'byrequests', servers: [{ name: 's', address: '198.18.201.11' }], ...x })),
  };
  return parseConfig(frontConfigSchema, JSON.stringify(doc), 'x');
}

describe('synproxy config: auto by default, true/false/options as before', () => {
  const cases: [string, unknown, ReturnType<typeof synproxyOf> extends infer T ? Partial<NonNullable<T>> | undefined : never][] = [
    ['absent', undefined, { mode: 'auto', above: 20000, calmSeconds: 30, mss: 1460 }],
    ['auto', 'auto', { mode: 'auto', above: 20000, calmSeconds: 30 }],
    ['true', true, { mode: 'on', mss: 1460, wscale: 7 }],
    ['false', false, undefined],
    ['options without mode: on, as before', { mss: 1400 }, { mode: 'on', mss: 1400 }],
    ['mode auto with thresholds', { mode: 'auto', above: 500, calmSeconds: 3, wscale: 9 }, { mode: 'auto', above: 500, calmSeconds: 3, wscale: 9 }],
    ['mode off', { mode: 'off' }, undefined],
  ];
  for (const [what, v, want] of cases) {
    it(what, () => {
      const cfg = config([v === undefined ? {} : { synproxy: v }]);
      const got = synproxyOf(cfg, cfg.services[0]!);
      if (want === undefined) assert.equal(got, undefined);
      else for (const [k, x] of Object.entries(want)) assert.equal((got as Record<string, unknown> | undefined)?.[k], x, `${k} of ${JSON.stringify(got)}`);
    });
  }

  it('refuses thresholds without mode auto, and auto on a UDP service', () => {
    assert.throws(() => config([{ synproxy: { above: 500 } }]), /synproxy.above applies to mode auto/);
    assert.throws(() => config([{ synproxy: { mode: 'on', calmSeconds: 5 } }]), /synproxy.calmSeconds applies to mode auto/);
    assert.throws(() => config([{ protocol: 'udp', synproxy: 'auto' }]), /synproxy is for TCP services/);
    assert.throws(() => config([{ synproxy: 'sometimes' }]), /synproxy is auto, true, false/);
  });
});

describe('synproxy sets: syn_seen counts every capable service, synproxied holds the engaged ones', () => {
  const cfg = config([{}, { synproxy: true }, { synproxy: false }, { synproxy: { mode: 'auto', mss: 1400 } }]);

  it('idle: on services only; the same structure whatever is engaged', () => {
    const idle = renderNft(cfg, configuredSpread(cfg));
    assert.match(idle.table, /set syn_seen \{ type ipv4_addr \. inet_service; counter; elements = \{ 198\.19\.1\.1 \. 80, 198\.19\.1\.1 \. 81, 198\.19\.1\.1 \. 83 \} \}/);
    assert.match(idle.table, /set synproxied \{ type ipv4_addr \. inet_service; elements = \{ 198\.19\.1\.1 \. 81 \} \}/);
    const flood = renderNft(cfg, configuredSpread(cfg), undefined, undefined, new Set(['svc0', 'svc3', 'svc2']));
    assert.match(flood.table, /set synproxied \{ type ipv4_addr \. inet_service; elements = \{ 198\.19\.1\.1 \. 80, 198\.19\.1\.1 \. 81, 198\.19\.1\.1 \. 83 \} \}/);
    assert.equal(flood.elements['synproxied'], 3, 'svc2 (off) is never engaged');
    assert.equal(flood.structure, idle.structure, 'engaging is an element update');
    // Counted before the notrack: the count does not depend on cookies.
    const raw = /chain synproxy_raw \{\n(.*\n){2}/.exec(flood.table)?.[0] ?? '';
    assert.match(raw, /@syn_seen\n$/, raw);
  });

  it('no capable service: no SYN cookie set or chain at all', () => {
    const off = config([{ synproxy: false }]);
    const n = renderNft(off, configuredSpread(off));
    assert.doesNotMatch(n.table, /syn_seen|synproxied|synproxy_raw/);
    assert.equal(synproxiedUpdateScript(off, new Set()), '');
  });

  it('the update script refills synproxied and each group in one transaction', () => {
    const script = synproxiedUpdateScript(cfg, new Set(['svc3']));
    assert.deepEqual(script.trim().split('\n'), [
      'flush set ip sluice synproxied',
      'add element ip sluice synproxied { 198.19.1.1 . 81, 198.19.1.1 . 83 }',
      'flush set ip sluice synproxied_0',
      'add element ip sluice synproxied_0 { 198.19.1.1 . 81 }',
      'flush set ip sluice synproxied_1',
      'add element ip sluice synproxied_1 { 198.19.1.1 . 83 }',
    ]);
  });

  it('the rule check ignores the synproxied sets\' elements (they follow floods), not syn_seen\'s', () => {
    const list = (engaged: string, seen: string): string =>
      `table ip sluice {\n\tset syn_seen {\n\t\ttype ipv4_addr . inet_service\n\t\tcounter\n\t\telements = { ${seen} }\n\t}\n\n\tset synproxied {\n\t\ttype ipv4_addr . inet_service\n${engaged === '' ? '' : `\t\telements = { ${engaged} }\n`}\t}\n\n\tset synproxied_0 {\n\t\ttype ipv4_addr . inet_service\n${engaged === '' ? '' : `\t\telements = { ${engaged} }\n`}\t}\n}\n`;
    const a = ownedNftPart(list('', '198.19.1.1 . 80 counter packets 0 bytes 0'));
    const b = ownedNftPart(list('198.19.1.1 . 80,\n\t\t\t     198.19.1.1 . 81', '198.19.1.1 . 80 counter packets 12345 bytes 500000'));
    assert.equal(isDamaged(compareOwned(a, b)), false);
    const c = ownedNftPart(list('', '198.19.1.1 . 81 counter packets 0 bytes 0'));
    assert.equal(isDamaged(compareOwned(a, c)), true);
  });

  it('parses nft\'s listing of the counters', () => {
    const got = parseSynSeen('table ip sluice {\n\tset syn_seen {\n\t\ttype ipv4_addr . inet_service\n\t\tcounter\n\t\telements = { 198.19.1.1 . 80 counter packets 7 bytes 280,\n\t\t\t     198.19.1.2 . 8080 counter packets 123456789 bytes 9 }\n\t}\n}\n');
    assert.deepEqual([...got], [['198.19.1.1 . 80', 7], ['198.19.1.2 . 8080', 123456789]]);
  });
});

describe('synproxy on IPv6 services: the ip6 table has its own SYNPROXY part', () => {
  const doc = {
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    uplinkAddress6: '2001:2:0:6502::2',
    services: [
      { name: 'v4', vip: '198.19.1.1', port: 80, method: 'byrequests', synproxy: true, servers: [{ name: 's', address: '198.18.201.11' }] },
      { name: 'v6', vip: '2001:2:0:c701::1', port: 80, method: 'byrequests', synproxy: true, servers: [{ name: 's', address: '2001:2:0:c901::b' }] },
      { name: 'v6auto', vip: '2001:2:0:c701::1', port: 81, method: 'byrequests', synproxy: { mode: 'auto', mss: 1400 }, servers: [{ name: 's', address: '2001:2:0:c901::b' }] },
      { name: 'v6off', vip: '2001:2:0:c701::1', port: 82, method: 'byrequests', synproxy: false, servers: [{ name: 's', address: '2001:2:0:c901::b' }] },
    ],
  };
  const cfg = parseConfig(frontConfigSchema, JSON.stringify(doc), 'x');

  it('accepts synproxy on an IPv6 service; absent is auto there too', () => {
    assert.equal(synproxyOf(cfg, cfg.services[1]!)?.mode, 'on');
    assert.equal(synproxyOf(cfg, cfg.services[2]!)?.mode, 'auto');
    assert.equal(synproxyOf(cfg, cfg.services[3]!), undefined);
    const absent = parseConfig(frontConfigSchema, JSON.stringify({ ...doc, services: [{ ...doc.services[1], synproxy: undefined }] }), 'x');
    assert.equal(synproxyOf(absent, absent.services[0]!)?.mode, 'auto');
  });

  it('each table holds its own family\'s services, with ip6 matches in the ip6 table', () => {
    const n = renderNft(cfg, configuredSpread(cfg), undefined, undefined, new Set(['v6auto']));
    assert.match(n.table, /set syn_seen \{ type ipv4_addr \. inet_service; counter; elements = \{ 198\.19\.1\.1 \. 80 \} \}/);
    const t6 = n.v6?.table ?? '';
    assert.match(t6, /set syn_seen \{ type ipv6_addr \. inet_service; counter; elements = \{ 2001:2:0:c701::1 \. 80, 2001:2:0:c701::1 \. 81 \} \}/);
    assert.match(t6, /set synproxied \{ type ipv6_addr \. inet_service; elements = \{ 2001:2:0:c701::1 \. 80, 2001:2:0:c701::1 \. 81 \} \}/);
    // nft marks, ip6tables' SYNPROXY answers (nft's synproxy checks an IPv6 checksum as IPv4 on our kernels).
    assert.match(t6, /ip6 daddr \. tcp dport @synproxied_0 ct state invalid,untracked meta mark set 0x51fff001 accept/);
    assert.match(t6, /ip6 daddr \. tcp dport @synproxied_1 ct state invalid,untracked meta mark set 0x51fff002 accept/);
    assert.doesNotMatch(t6, /synproxy mss/);
    assert.match(t6, /chain synproxy_left \{\n\s+type filter hook input priority filter \+ 10; policy accept;\n\s+meta mark 0x51fff001-0x51fff002 counter name vip_guard_drops drop/);
    assert.match(n.table, /ip daddr \. tcp dport @synproxied_0 ct state invalid,untracked synproxy mss 1460 wscale 7 timestamp sack-perm/);
    assert.doesNotMatch(n.table, /synproxy_left/);
    assert.match(t6, /tcp flags & \(syn \| ack \| fin \| rst\) == syn ip6 daddr \. tcp dport @synproxied notrack/);
    assert.match(t6, /dnat ip6 to meta mark map @targets/);
    // No IPv4 match in the ip6 table: nft would refuse `ip daddr` against an ipv6_addr set.
    assert.doesNotMatch(t6, /\bip (daddr|saddr)\b|ipv4_addr|198\.19/);
    assert.doesNotMatch(n.table, /2001:2|ipv6_addr/);
  });

  it('ip6tables answers the marked packets: SLUICE_SYNPROXY in filter INPUT, one SYNPROXY rule per group; iptables has no such chain', () => {
    const r = renderRules(cfg);
    assert.deepEqual(r.byChain['SLUICE_SYNPROXY'], ['-p tcp -m mark --mark 0x51fff001 -j SYNPROXY --sack-perm --timestamp --wscale 7 --mss 1460', '-p tcp -m mark --mark 0x51fff002 -j SYNPROXY --sack-perm --timestamp --wscale 7 --mss 1400']);
    assert.ok(r.chains6.some((c) => c.chain === 'SLUICE_SYNPROXY' && c.table === 'filter' && c.hook === 'INPUT'));
    assert.ok(!r.chains.some((c) => c.chain === 'SLUICE_SYNPROXY'));
    assert.match(r.restore6, /\*filter\n:SLUICE_SYNPROXY - \[0:0\]\n-A SLUICE_SYNPROXY -p tcp -m mark --mark 0x51fff001 -j SYNPROXY/);
    assert.doesNotMatch(r.restore, /SYNPROXY/);
    // The kernel's SYN after the handshake is queued from OUTPUT in both families.
    assert.match(r.restore6, /:SLUICE_QUEUE_OUT/);
    // Without an IPv6 SYNPROXY service: ip6tables gets iptables' chains only.
    const v4only = parseConfig(frontConfigSchema, JSON.stringify({ ...doc, services: doc.services.map((s) => (s.vip.includes(':') ? { ...s, synproxy: false } : s)) }), 'x');
    const r4 = renderRules(v4only);
    assert.equal(r4.restore6, r4.restore);
    assert.deepEqual(r4.chains6, r4.chains);
  });

  it('the update script refills both tables\' sets in one transaction', () => {
    assert.deepEqual(synproxiedUpdateScript(cfg, new Set()).trim().split('\n'), [
      'flush set ip sluice synproxied',
      'add element ip sluice synproxied { 198.19.1.1 . 80 }',
      'flush set ip sluice synproxied_0',
      'add element ip sluice synproxied_0 { 198.19.1.1 . 80 }',
      'flush set ip6 sluice synproxied',
      'add element ip6 sluice synproxied { 2001:2:0:c701::1 . 80 }',
      'flush set ip6 sluice synproxied_0',
      'add element ip6 sluice synproxied_0 { 2001:2:0:c701::1 . 80 }',
      'flush set ip6 sluice synproxied_1',
    ]);
  });

  it('parses both tables\' counters from one text', () => {
    const got = parseSynSeen('table ip sluice {\n\tset syn_seen {\n\t\ttype ipv4_addr . inet_service\n\t\tcounter\n\t\telements = { 198.19.1.1 . 80 counter packets 7 bytes 280 }\n\t}\n}\n\ntable ip6 sluice {\n\tset syn_seen {\n\t\ttype ipv6_addr . inet_service\n\t\tcounter\n\t\telements = { 2001:2:0:c701::1 . 80 counter packets 12 bytes 960,\n\t\t\t     2001:2:0:c701::1 . 81 counter packets 0 bytes 0 }\n\t}\n}\n');
    assert.deepEqual([...got], [['198.19.1.1 . 80', 7], ['2001:2:0:c701::1 . 80', 12], ['2001:2:0:c701::1 . 81', 0]]);
  });
});

describe('the gate: engaged at one reading above `above`, disengaged after calmSeconds below above/2', () => {
  const p: GatePolicy = { above: 1000, calmMs: 3000 };
  // Readings one second apart: SYNs per second; the transitions expected at each.
  const cases: [string, number[], (string | undefined)[]][] = [
    ['idle stays disengaged', [0, 10, 900, 1000], [undefined, undefined, undefined, undefined]],
    ['one reading above engages', [0, 1001], [undefined, 'engage']],
    ['stays engaged while the rate is at or above above/2', [0, 5000, 500, 600, 500, 2000], [undefined, 'engage', undefined, undefined, undefined, undefined]],
    ['disengages after calmSeconds below above/2', [0, 5000, 499, 100, 0, 0], [undefined, 'engage', undefined, undefined, 'disengage', undefined]],
    ['a burst in the calm restarts it', [0, 5000, 100, 100, 800, 100, 100, 100], [undefined, 'engage', undefined, undefined, undefined, undefined, undefined, 'disengage']],
    ['engages again after a disengagement', [0, 5000, 0, 0, 0, 3000], [undefined, 'engage', undefined, undefined, 'disengage', 'engage']],
  ];
  for (const [what, rates, want] of cases) {
    it(what, () => {
      const g = newGate();
      let packets = 1_000_000;
      const got = rates.map((r, i) => {
        packets += r;
        return stepGate(g, packets, 10_000 + i * 1000, p);
      });
      assert.deepEqual(got, want);
    });
  }

  it('a counter that went back (a new table) is a new baseline, never a rate', () => {
    const g = newGate(true);
    assert.equal(stepGate(g, 500_000, 0, p), undefined);
    assert.equal(stepGate(g, 10, 1000, p), undefined);
    assert.equal(stepGate(g, 20, 2000, p), undefined);
    assert.equal(g.rate, 10);
    assert.equal(g.engaged, true);
  });

  it('rates over uneven reading intervals', () => {
    const g = newGate();
    stepGate(g, 0, 0, p);
    assert.equal(stepGate(g, 1500, 2000, p), undefined, '750/s');
    assert.equal(stepGate(g, 3100, 3500, p), 'engage', '1067/s');
  });
});

describe('SynproxyAuto: readings to transactions', () => {
  function harness(cfg: FrontConfig) {
    let now = 0;
    let counts: Record<string, number> = {};
    const writes: string[] = [];
    let failWrites = false;
    const auto = new SynproxyAuto({
      log: pino({ level: 'silent' }),
      config: () => cfg,
      read: () => Promise.resolve(`elements = { ${Object.entries(counts).map(([k, v]) => `${k} counter packets ${String(v)} bytes 0`).join(', ')} }`),
      write: (s) => (failWrites ? Promise.reject(new Error('nft says no')) : (writes.push(s), Promise.resolve())),
      now: () => now,
    });
    return {
      auto,
      writes,
      async reading(at: number, c: Record<string, number>) {
        now = at;
        counts = c;
        await auto.tick();
        await new Promise((r) => setImmediate(r));
      },
      failWrites(v: boolean) {
        failWrites = v;
      },
    };
  }
  const cfg = config([{ synproxy: { mode: 'auto', above: 500, calmSeconds: 3 } }, { synproxy: true }]);

  it('engages, writes once, disengages; on services always engaged; counts transitions', async () => {
    const h = harness(cfg);
    assert.deepEqual([...h.auto.engaged()], ['svc1']);
    await h.reading(0, { '198.19.1.1 . 80': 0, '198.19.1.1 . 81': 0 });
    await h.reading(1000, { '198.19.1.1 . 80': 100, '198.19.1.1 . 81': 0 });
    assert.equal(h.writes.length, 0);
    await h.reading(2000, { '198.19.1.1 . 80': 2100, '198.19.1.1 . 81': 0 });
    assert.deepEqual([...h.auto.engaged()].sort(), ['svc0', 'svc1']);
    assert.equal(h.writes.length, 1);
    assert.match(h.writes[0] ?? '', /add element ip sluice synproxied \{ 198\.19\.1\.1 \. 80, 198\.19\.1\.1 \. 81 \}/);
    for (let t = 3; t <= 6; t++) await h.reading(t * 1000, { '198.19.1.1 . 80': 2100, '198.19.1.1 . 81': 0 });
    assert.deepEqual([...h.auto.engaged()], ['svc1']);
    assert.equal(h.writes.length, 2);
    const st = h.auto.status().services;
    assert.deepEqual(st.map((x) => [x.service, x.mode, x.engaged, x.engagedTotal, x.disengagedTotal]), [['svc0', 'auto', false, 1, 1], ['svc1', 'on', true, 0, 0]]);
  });

  it('an install resets the baselines (its counters start at 0) and keeps the engaged state across a reload', async () => {
    const h = harness(cfg);
    await h.reading(0, { '198.19.1.1 . 80': 0 });
    await h.reading(1000, { '198.19.1.1 . 80': 5000 });
    assert.ok(h.auto.engaged().has('svc0'));
    const next = config([{ synproxy: { mode: 'auto', above: 500, calmSeconds: 3 } }, { synproxy: true }, {}]);
    h.auto.installed(next);
    assert.ok(h.auto.engaged().has('svc0'), 'still under the flood: the reload renders it engaged');
    // The new table's counter: 600 since the install. Not a rate (no baseline), not a calm reading.
    await h.reading(1500, { '198.19.1.1 . 80': 600 });
    assert.equal(h.auto.status().services[0]?.synRate, 5000);
  });

  it('a failed write is retried at the next reading', async () => {
    const h = harness(cfg);
    h.failWrites(true);
    await h.reading(0, { '198.19.1.1 . 80': 0 });
    await h.reading(1000, { '198.19.1.1 . 80': 5000 });
    assert.equal(h.auto.status().writeFailures, 1);
    h.failWrites(false);
    await h.reading(2000, { '198.19.1.1 . 80': 10000 });
    assert.equal(h.writes.length, 1);
    assert.match(h.writes[0] ?? '', /synproxied \{ 198\.19\.1\.1 \. 80, 198\.19\.1\.1 \. 81 \}/);
  });
});
