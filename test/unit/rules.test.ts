import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { QUEUE_MARK, REJECT_MARK, hex, overflowMark, serverMark } from '../../src/front/marks.ts';
import { FALLBACK_COUNTER, FALLBACK_INLINE_MAX, FALLBACK_SLOTS, GUARD_COUNTER, chainsOf, configuredSpread, elementDiff, elementDiffScript, fallbackDiffScript, fallbackElements, fallbackHeldOf, fallbackUpdateScript, renderNft, STRUCTURE_COMMENT, type FallbackSpread, type LayoutItem } from '../../src/front/nft.ts';
import { CHAINS, renderRules, resetsClients } from '../../src/front/rules.ts';

const text = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');

/** `services` services on ports 1000.., `servers` servers each (JSON is YAML). */
function bigConfig(services: number, servers: number, extra: Record<string, unknown> = {}): ReturnType<typeof parseConfig<typeof frontConfigSchema>> {
  const doc = {
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    services: Array.from({ length: services }, (_, si) => ({
      name: `svc${String(si)}`,
      vip: '198.19.1.1',
      port: 1000 + si,
      method: 'byrequests',
      // On the kernel SYN schedule unless `extra` says otherwise (the default is queue).
      synPath: 'kernel',
      ...extra,
      servers: Array.from({ length: servers }, (_, k) => ({ name: `s${String(k)}`, address: `10.${String(k >> 8)}.${String(k & 0xff)}.1`, port: 80, ...(extra['method'] === 'capacity' ? { capacity: 100 } : {}) })),
    })),
  };
  return parseConfig(frontConfigSchema, JSON.stringify(doc), 'x');
}

describe('front rules', () => {
  it('iptables keeps one NFQUEUE rule, entered only by packets the nft table marked for the queue', () => {
    const r = renderRules(parseConfig(frontConfigSchema, text, 'x'));
    assert.deepEqual(r.byChain['SLUICE_QUEUE'], ['-j NFQUEUE --queue-num 0 --queue-bypass']);
    assert.deepEqual(CHAINS.queue.jumpIf, ['-m', 'mark', '--mark', hex(QUEUE_MARK)]);
    assert.ok(!r.restore.includes('*nat'), 'the nat side is in the nft table');
  });

  it('fail mode drop: no bypass, no fallback map elements nor rules', () => {
    const cfg = parseConfig(frontConfigSchema, `${text}\nfailMode: drop\n`, 'x');
    assert.ok(!renderRules(cfg).restore.includes('--queue-bypass'));
    const n = renderNft(cfg, configuredSpread(cfg));
    assert.equal(n.elements['fallback'], 0);
    assert.ok(!n.table.includes('jhash'));
  });

  it('nft: one set entry per service, one map element per (service, server) and (service, overflow) mark', () => {
    const cfg = parseConfig(frontConfigSchema, text, 'x');
    const n = renderNft(cfg, configuredSpread(cfg));
    assert.ok(n.table.includes('set services { type ipv4_addr . inet_proto . inet_service; elements = { 198.19.1.1 . tcp . 80 } }'));
    assert.ok(n.table.includes(`${hex(serverMark(0, 1))} : 198.18.201.12 . 80`));
    assert.ok(n.table.includes(`${hex(overflowMark(0, 0))} : 198.19.2.1 . 80`));
    assert.ok(n.table.includes(`set overflow_marks { type mark; elements = { ${hex(overflowMark(0, 0))} } }`));
    assert.ok(n.table.includes('meta mark @overflow_marks snat ip to 198.18.101.2'));
    assert.ok(n.table.includes(`meta mark != ${hex(REJECT_MARK)} ip daddr @vips counter name ${GUARD_COUNTER} drop`));
    assert.ok(n.table.includes('dnat ip to meta mark map @targets'));
    // The kernel counts the fallback's DNATs (TCP and UDP): what happened while no daemon was bound.
    assert.ok(n.table.includes(`  counter ${FALLBACK_COUNTER} { packets 0 bytes 0 }`));
    assert.equal(n.table.split(`counter name ${FALLBACK_COUNTER} dnat ip to ip daddr . meta l4proto . th dport . jhash`).length - 1, 3); // prerouting's SYN and UDP, output's SYN (SYN cookies)
    // SYN cookies auto (the default): counted in syn_seen, none engaged.
    // (The example's services use the default SYN path, the queue: nothing on the kernel schedule.)
    assert.deepEqual(n.elements, { vips: 1, services: 1, overflow_marks: 1, targets: 4, kernel: 0, schedule: 0, fallback: FALLBACK_SLOTS, syn_seen: 1, synproxied: 0, synproxied_0: 0 });
    // A server's reset is recognised by the flow's conntrack mark (a decision of ours), not by a set of servers.
    assert.ok(n.table.includes('iifname "lan0" ct direction reply ct mark & 0xff000000 == 0x51000000 ct mark != 0x51fff000 tcp flags & rst == rst log group 0'));
    // The script replaces our table alone, in one transaction.
    assert.ok(n.script.startsWith('table ip sluice\ndelete table ip sluice\ntable ip sluice {'));
    // Its sets and maps are declared empty and filled by `add element` in
    // the same transaction (5.5 s instead of 13 s for 456k elements), every
    // element once; the counters keep their values.
    assert.ok(!n.script.includes('elements = {'));
    assert.ok(n.script.includes(`  counter ${GUARD_COUNTER} { packets 0 bytes 0 }`));
    const added = new Map<string, number>();
    for (const m of n.script.matchAll(/^add element ip sluice (\S+) \{ (.*) \}$/gm)) added.set(m[1] ?? '', (added.get(m[1] ?? '') ?? 0) + (m[2] ?? '').split(', ').length);
    // (Sets and maps with no element get no `add element` line.)
    assert.deepEqual(Object.fromEntries(added), Object.fromEntries(Object.entries(n.elements).filter(([, v]) => v > 0)));
    assert.ok(n.script.includes(n.table.split('\n').find((l) => l.startsWith('  chain classify'))!));
  });

  // The rules a packet walks do not grow with services or servers: the same
  // chains, only the sets and maps grow. [services, servers each, elements of targets].
  const sizes: [number, number][] = [
    [1, 1],
    [10, 30],
    [1000, 4],
    [2, 300],
  ];
  for (const [services, servers] of sizes) {
    it(`nft: ${String(services)} services x ${String(servers)} servers render the same rules, ${String(services * servers)} map elements`, () => {
      const cfg = bigConfig(services, servers);
      const n = renderNft(cfg, configuredSpread(cfg));
      // The shared chains' rules: the same whatever the size. Each service
      // on the kernel schedule adds its own chain of two rules (its counter),
      // reached by one verdict-map lookup: a SYN still walks the same rules.
      const shared = (table: string): string[] => {
        let inKernel = false;
        return table.split('\n').filter((l) => {
          if (/^ {2}chain k_\d+ \{$/.test(l)) inKernel = true;
          else if (l === '  }') inKernel = false;
          return !inKernel && l.startsWith('    ') && !l.includes('elements');
        });
      };
      const one = renderNft(bigConfig(1, 1), configuredSpread(bigConfig(1, 1)));
      assert.deepEqual(shared(n.table), shared(one.table));
      const kernelChains = Object.entries(n.chainSizes).filter(([c]) => c.startsWith('k_'));
      assert.equal(kernelChains.length, services);
      assert.ok(kernelChains.every(([, size]) => size === 2));
      assert.equal(n.elements['targets'], services * servers);
      assert.equal(n.elements['services'], services);
      assert.equal(n.elements['fallback'], services * FALLBACK_SLOTS);
    });
  }

  it('fallback: slots spread evenly over the usable servers only, and a service without one has no slots', () => {
    const cfg = bigConfig(2, 3);
    const spread: FallbackSpread = [[['10.0.0.1', 80], ['10.0.0.3', 80]], []];
    const els = fallbackElements(cfg, spread);
    assert.equal(els.length, FALLBACK_SLOTS);
    const per = new Map<string, number>();
    for (const e of els) {
      const to = e.split(' : ')[1] ?? '';
      per.set(to, (per.get(to) ?? 0) + 1);
    }
    assert.deepEqual([...per.entries()].sort(), [['10.0.0.1 . 80', FALLBACK_SLOTS / 2], ['10.0.0.3 . 80', FALLBACK_SLOTS / 2]]);
    const update = fallbackUpdateScript(cfg, spread);
    assert.ok(update.startsWith('flush map ip sluice fallback\nadd element ip sluice fallback { '));
    assert.equal(fallbackUpdateScript(cfg, [[], []]), 'flush map ip sluice fallback\n');
  });

  it('drained servers are left out of the fallback spread, kept in the DNAT map', () => {
    const cfg = parseConfig(frontConfigSchema, text.replace('capacity: 200 }', 'capacity: 200, state: drain }'), 'x');
    const n = renderNft(cfg, configuredSpread(cfg));
    assert.ok(!n.table.includes(' : 198.18.201.12 . 80,') || n.table.includes(`${hex(serverMark(0, 1))} : 198.18.201.12 . 80`));
    const fb = fallbackElements(cfg, configuredSpread(cfg));
    assert.ok(fb.every((e) => !e.endsWith('198.18.201.12 . 80')));
    assert.ok(n.table.includes(`${hex(serverMark(0, 1))} : 198.18.201.12 . 80`));
  });

  it('structure: a change of servers or services keeps it (an element update suffices), a change of chains does not', () => {
    // Queued services: nothing per service in the chains.
    const q = { synPath: 'queue' };
    const base = renderNft(bigConfig(2, 3, q), configuredSpread(bigConfig(2, 3, q)), { packets: 5, bytes: 300 });
    const more = renderNft(bigConfig(3, 4, q), configuredSpread(bigConfig(3, 4, q)));
    assert.equal(more.structure, base.structure, 'more services and servers: same chains');
    // On the kernel schedule each service has its own chain (its counter and
    // slots), outside the structure: the update rewrites those chains in
    // place, so more services, more servers or another byrequests cycle
    // keep the structure too.
    const k1 = renderNft(bigConfig(2, 3), configuredSpread(bigConfig(2, 3)));
    for (const [sv, sr] of [[2, 5], [3, 3], [1, 4]] as const) assert.equal(renderNft(bigConfig(sv, sr), configuredSpread(bigConfig(sv, sr))).structure, k1.structure, `${String(sv)} x ${String(sr)}`);
    const k3 = renderNft(bigConfig(3, 4), configuredSpread(bigConfig(3, 4)));
    assert.deepEqual(k3.kernelChains, ['k_0', 'k_1', 'k_2']);
    assert.match(k3.update, /^add chain ip sluice k_0\nflush chain ip sluice k_0\nadd rule ip sluice k_0 meta mark set numgen inc mod 4 offset 0 map @schedule /);
    assert.doesNotMatch(base.structure, /elements =|packets 5/, 'no elements and no counter values in the structure');
    const drop = bigConfig(2, 3, q);
    const dropped = renderNft({ ...drop, failMode: 'drop' }, configuredSpread(drop));
    assert.notEqual(dropped.structure, base.structure, 'fail mode drop: no fallback rules, another structure');
    const lan = renderNft({ ...drop, lanInterface: 'lan9' }, configuredSpread(drop));
    assert.notEqual(lan.structure, base.structure, 'another LAN interface: another classify chain');
    // The update flushes and refills every set and map, and nothing else.
    const lines = more.update.trim().split('\n');
    assert.deepEqual(lines.filter((l) => l.startsWith('flush ')).map((l) => l.split(' ').slice(1, 2).concat(l.split(' ').slice(-1)).join(' ')), ['set vips', 'set services', 'set overflow_marks', 'map targets', 'map kernel', 'map schedule', 'map fallback', 'set syn_seen', 'set synproxied', 'set synproxied_0']);
    assert.ok(lines.every((l) => l.startsWith('flush ') || l.startsWith('add element ')), more.update);
    // (more is all queued services: no kernel-schedule chain to rewrite.)
    assert.deepEqual(more.kernelChains, []);
    const added = (name: string): number => lines.filter((l) => l.startsWith(`add element ip sluice ${name} `)).reduce((n, l) => n + l.split(' : ').length - 1 + (name === 'vips' || name === 'services' || name === 'overflow_marks' ? l.split(',').length : 0), 0);
    assert.equal(added('targets'), more.elements['targets']);
    assert.equal(added('services'), more.elements['services']);
  });

  it('element diffs: only changed elements, deletes before adds, a changed value deleted and added again', () => {
    assert.deepEqual(elementDiff('targets', ['0x1 : 10.0.0.1 . 80', '0x2 : 10.0.0.2 . 80', '0x3 : 10.0.0.3 . 80'], ['0x1 : 10.0.0.1 . 80', '0x2 : 10.0.0.9 . 80', '0x4 : 10.0.0.4 . 80']), [
      'delete element ip sluice targets { 0x2, 0x3 }',
      'add element ip sluice targets { 0x2 : 10.0.0.9 . 80, 0x4 : 10.0.0.4 . 80 }',
    ]);
    assert.deepEqual(elementDiff('vips', ['198.19.1.1', '198.19.1.2'], ['198.19.1.2', '198.19.1.3']), ['delete element ip sluice vips { 198.19.1.1 }', 'add element ip sluice vips { 198.19.1.3 }']);
    assert.deepEqual(elementDiff('vips', ['198.19.1.1'], ['198.19.1.1']), []);
  });

  it('an install over the last rendering writes only what changed: one service\'s servers, nothing of the fallback map', () => {
    const a = bigConfig(50, 10, { synPath: 'queue' });
    const b = structuredClone(a);
    const svc = b.services[7];
    assert.ok(svc?.servers[3]);
    svc.servers[3] = { ...svc.servers[3], address: '10.9.9.9' };
    const na = renderNft(a, configuredSpread(a));
    const nb = renderNft(b, configuredSpread(b));
    assert.equal(na.structure, nb.structure);
    const diff = elementDiffScript(na, nb);
    assert.deepEqual(diff.split('\n').filter((l) => l !== '' && !l.includes('synproxied')), [
      `delete element ip sluice targets { ${hex(serverMark(7, 3))} }`,
      `add element ip sluice targets { ${hex(serverMark(7, 3))} : 10.9.9.9 . 80 }`,
    ]);
    assert.ok(!diff.includes('fallback'), 'the fallback writer owns the map between whole installs');
    assert.ok(!diff.includes('schedule'), 'no kernel-schedule service: the schedule map stays empty');
    assert.equal(elementDiffScript(na, na).split('\n').filter((l) => l !== '' && !l.includes('synproxied')).length, 0);
  });

  it('a whole install fills a small fallback map itself and leaves a large one to the fallback writer', () => {
    const small = bigConfig(2, 3, { synPath: 'queue' });
    const ns = renderNft(small, configuredSpread(small));
    assert.ok(ns.fallbackInline);
    assert.ok(ns.script.includes('add element ip sluice fallback'));
    const services = Math.floor(FALLBACK_INLINE_MAX / FALLBACK_SLOTS) + 1;
    const large = bigConfig(services, 2, { synPath: 'queue' });
    const nl = renderNft(large, configuredSpread(large));
    assert.ok(!nl.fallbackInline);
    assert.ok(!nl.script.includes('add element ip sluice fallback'), 'declared empty');
    assert.ok(nl.script.includes('jhash ip saddr'), 'its rules are there');
    assert.equal(nl.elements['fallback'], services * FALLBACK_SLOTS, 'what the map is to hold');
    assert.equal(ns.structure.includes('jhash'), nl.structure.includes('jhash'));
    // The writer's diffs: nothing when the map holds the spread; the changed slots when one server goes.
    const spread = configuredSpread(small);
    const held = fallbackElements(small, spread);
    assert.equal(fallbackDiffScript(small, spread, fallbackHeldOf(small, spread)).script, '');
    assert.equal(ns.fallbackHeld.size, 2, 'what the whole install left in the map');
    assert.equal(nl.fallbackHeld.size, 0);
    const fewer: FallbackSpread = [spread[0] ?? [], (spread[1] ?? []).slice(0, 2)];
    const d = fallbackDiffScript(small, fewer, ns.fallbackHeld).script;
    assert.ok(!d.startsWith('flush'));
    // Applied to what the map held, the diff gives the new spread exactly, and touches only slots that changed.
    const map = new Map(held.map((e) => [e.split(' : ')[0] ?? '', e]));
    let touched = 0;
    for (const line of d.split('\n')) {
      const m = /^(add|delete) element ip sluice fallback \{ (.*) \}$/.exec(line);
      for (const e of m?.[2]?.split(', ') ?? []) {
        if (m?.[1] === 'delete') assert.ok(map.delete(e));
        else {
          map.set(e.split(' : ')[0] ?? '', e);
          touched++;
        }
      }
    }
    const want = fallbackElements(small, fewer);
    assert.deepEqual([...map.values()].sort(), [...want].sort());
    assert.equal(touched, want.filter((e) => !held.includes(e)).length);
    assert.ok(touched < want.length);
    assert.ok(fallbackDiffScript(small, fewer, undefined).script.startsWith('flush map ip sluice fallback\n'), 'unknown contents: flushed and refilled');
  });

  it('our chains in a `nft list chains` listing, not those of other tables', () => {
    const list = 'table ip filter {\n\tchain INPUT {\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n}\ntable ip sluice {\n\tchain classify {\n\t\ttype filter hook prerouting priority mangle - 10; policy accept;\n\t}\n\tchain to_service {\n\t}\n}\n';
    assert.deepEqual(chainsOf(list), ['classify', 'to_service']);
    assert.deepEqual(chainsOf(''), []);
  });

  it('UDP service: keyed by protocol in the services set', () => {
    const cfg = parseConfig(frontConfigSchema, text.replace('    port: 80\n', '    port: 53\n    protocol: udp\n'), 'x');
    const n = renderNft(cfg, configuredSpread(cfg));
    assert.ok(n.table.includes('elements = { 198.19.1.1 . udp . 53 }'));
    assert.ok(n.table.includes(`${hex(serverMark(0, 1))} : 198.18.201.12 . 53`));
  });

  it('the reject chains are entered only by packets that carry the reject mark', () => {
    assert.deepEqual(CHAINS.rejectForward.jumpIf, ['-m', 'mark', '--mark', '0x51ffffff']);
    assert.deepEqual(CHAINS.rejectInput.jumpIf, ['-m', 'mark', '--mark', '0x51ffffff']);
  });

  // Whether some checkpoint can answer a SYN with a reset (then, and only
  // then, the reject chains exist): [where, checkpoint YAML, expected].
  const rl = '{ name: r, kind: rate-limit, criterion: source, limit: 5 }';
  const cases: [string, string, boolean][] = [
    ['none', '', false],
    ['cluster', `checkpoints: [${rl}]`, true],
    ['cluster', 'checkpoints: [{ name: r, kind: rate-limit, criterion: source, limit: 5, reject: drop }]', false],
    ['cluster', 'checkpoints: [{ name: c, kind: counter, criterion: source }]', false],
    ['cluster', 'checkpoints: [{ name: c, kind: counter, criterion: none, when: { sourceIn: [203.0.113.0/24] }, action: reject }]', true],
    ['cluster', 'checkpoints: [{ name: c, kind: counter, criterion: none, when: { sourceIn: [203.0.113.0/24] }, action: reject, reject: drop }]', false],
    ['service', `svc:${rl}`, true],
    ['server', `srv:{ name: k, kind: concurrency-limit, criterion: source, limit: 5 }`, true],
  ];
  for (const [where, yaml, expected] of cases) {
    it(`reject chains: ${where} ${yaml || 'no checkpoints'} -> ${String(expected)}`, () => {
      let doc = text;
      if (yaml.startsWith('svc:')) doc = doc.replace('    port: 80\n', `    port: 80\n    checkpoints: [${yaml.slice(4)}]\n`);
      else if (yaml.startsWith('srv:')) doc = doc.replace('capacity: 200 }', `capacity: 200, checkpoints: [${yaml.slice(4)}] }`);
      else if (yaml !== '') doc = `${doc}\n${yaml}\n`;
      const cfg = parseConfig(frontConfigSchema, doc, 'x');
      assert.equal(resetsClients(cfg), expected);
      const r = renderRules(cfg);
      assert.equal(r.chains.includes(CHAINS.rejectForward) && r.chains.includes(CHAINS.rejectInput), expected);
      assert.equal(r.restore.includes('*filter'), expected);
      assert.equal(r.restore.includes('-j REJECT --reject-with tcp-reset'), expected);
    });
  }
});

describe('nft: a table of the same structure gets its elements, not a replacement', () => {
  const cfg = parseConfig(frontConfigSchema, text, 'x');
  const n = renderNft(cfg, configuredSpread(cfg));
  const own = { kind: 'table', comment: `${STRUCTURE_COMMENT}${n.structureTag}` } as const;

  it('the table names its structure in its comment; the tag follows the structure, not the elements', () => {
    assert.match(n.structureTag, /^[0-9a-f]{16}$/);
    assert.ok(n.table.startsWith(`table ip sluice {\n  comment "${STRUCTURE_COMMENT}${n.structureTag}"\n`));
    assert.ok(n.script.includes(`  comment "${STRUCTURE_COMMENT}${n.structureTag}"\n`));
    // Another server address: other elements, the same structure.
    const moved = parseConfig(frontConfigSchema, text.replace('198.18.201.12', '198.18.201.99'), 'x');
    const m = renderNft(moved, configuredSpread(moved));
    assert.notEqual(m.sets['targets']?.join(), n.sets['targets']?.join());
    assert.equal(m.structureTag, n.structureTag);
    // Failing closed: no fallback rules, another structure.
    const drop = parseConfig(frontConfigSchema, `${text}\nfailMode: drop\n`, 'x');
    assert.notEqual(renderNft(drop, configuredSpread(drop)).structureTag, n.structureTag);
  });

  // [case, layout, kept?]
  const cases: [string, LayoutItem[], boolean][] = [
    ['no table', [], false],
    ['a table without a comment (written before the comment existed)', [{ kind: 'table', comment: '' }], false],
    ['a table of another structure', [{ kind: 'table', comment: `${STRUCTURE_COMMENT}0000000000000000` }], false],
    ['a table of this structure', [own, { kind: 'chain', name: 'classify', base: true }], true],
  ];
  for (const [name, layout, kept] of cases) it(`${name}: ${kept ? 'kept' : 'replaced whole'}`, () => { assert.equal(n.kept(layout) !== undefined, kept); });

  it('a kernel schedule too large to write inline: replaced whole (its chains cost nft seconds over a filled map)', () => {
    const own = (r: ReturnType<typeof renderNft>): LayoutItem[] => [{ kind: 'table', comment: `${STRUCTURE_COMMENT}${r.structureTag}` }];
    const smallCfg = bigConfig(10, 10);
    const small = renderNft(smallCfg, configuredSpread(smallCfg));
    assert.ok(small.scheduleInline);
    assert.notEqual(small.kept(own(small)), undefined);
    const largeCfg = bigConfig(200, 100);
    const large = renderNft(largeCfg, configuredSpread(largeCfg));
    assert.equal(large.scheduleInline, false);
    assert.equal(large.kept(own(large)), undefined);
  });

  it('the kept script: every set and map flushed and filled as a whole install fills it; chains of an older schedule deleted after the verdict map; nothing else touched', () => {
    const s = n.kept([own, { kind: 'chain', name: 'classify', base: true }, { kind: 'chain', name: 'to_service', base: false }, { kind: 'chain', name: 'k_7', base: false }]) ?? '';
    const lines = s.trimEnd().split('\n');
    for (const [kind, name] of [['set', 'vips'], ['set', 'services'], ['set', 'overflow_marks'], ['map', 'targets'], ['map', 'kernel'], ['map', 'schedule'], ['map', 'fallback']]) assert.ok(lines.includes(`flush ${kind ?? ''} ip sluice ${name ?? ''}`), `${name ?? ''} flushed`);
    // The elements a whole install adds, each one.
    for (const l of n.script.split('\n').filter((x) => x.startsWith('add element '))) assert.ok(lines.includes(l), l);
    assert.deepEqual(lines.filter((l) => l.startsWith('delete ')), ['delete chain ip sluice k_7']);
    assert.ok(lines.indexOf('delete chain ip sluice k_7') > lines.indexOf('flush map ip sluice kernel'));
    assert.ok(!lines.some((l) => /^(delete table|flush table|flush chain ip sluice (classify|nat_pre))/.test(l)));
  });
});
