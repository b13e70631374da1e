/**
 * The addon's netlink read of our nft table's named counters
 * (native/src/nft_netlink.c, src/front/nft-netlink.ts), against the real
 * kernel in a bare namespace: the daemon's start reads them this way
 * because `nft list counters` fetches every set element first (seconds
 * with 1,000 services). Also the table's comment and chains, from which
 * the start decides to keep a table of the same structure (nft.ts
 * keptScript).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { FALLBACK_COUNTER, GUARD_COUNTER, STRAY_COUNTER, STRUCTURE_COMMENT, SYN_SEEN_SET, type LayoutItem } from '../../src/front/nft.ts';
import { parseSynSeen } from '../../src/front/synproxy-auto.ts';
import { TableCounters } from '../../src/front/table-counters.ts';
import { guardCountOf } from '../../src/front/vip-guard.ts';
import { nsRun, useNamespace } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/nft-netlink.ts', import.meta.url));
const ns = useNamespace('nftc');

interface Read {
  ip: [string, number, number][];
  ip6: [string, number, number][];
  text: string | null;
  text6: string | null;
  generation: number;
}

function readAll(): Read {
  const r = JSON.parse(nsRun(ns(), process.execPath, ['--no-warnings', FIXTURE])) as Read & { async: Pick<Read, 'text' | 'text6' | 'generation'> };
  // The threadpool forms (the running daemon's) read the same.
  assert.deepEqual(r.async, { text: r.text, text6: r.text6, generation: r.generation }, 'asynchronous reads');
  const { async: _, ...rest } = r;
  return rest;
}

/** `--set NAME` in the namespace; the threadpool form must read the same (or fail the same way). */
function readSet(name: string): { ip: string; ip6: string } {
  const r = JSON.parse(nsRun(ns(), process.execPath, ['--no-warnings', FIXTURE, '--set', name])) as { ip: string; ip6: string; async: { ip: string; ip6: string } };
  assert.deepEqual(r.async, { ip: r.ip, ip6: r.ip6 }, `asynchronous read of set ${name}`);
  return { ip: r.ip, ip6: r.ip6 };
}

function read(): Omit<Read, 'generation'> {
  const { generation: _, ...rest } = readAll();
  return rest;
}

/** A map of `n` elements: what makes nft's own listing slow, and what the netlink read must not depend on. */
function bigMap(n: number): string {
  const els: string[] = [];
  for (let i = 0; i < n; i++) els.push(`198.19.${String(Math.floor(i / 250) % 250)}.${String((i % 250) + 1)} . ${String(1000 + Math.floor(i / 62500))} : 198.18.201.${String((i % 100) + 1)} . 80`);
  return `  map fallback { type ipv4_addr . inet_service : ipv4_addr . inet_service; elements = { ${els.join(', ')} } }\n`;
}

describe('nf_tables over netlink: the ruleset generation, our table\'s counters', () => {
  it('the generation rises with every commit (nft, iptables-nft, an element), not with a listing', () => {
    const g0 = readAll().generation;
    nsRun(ns(), 'nft', ['add', 'table', 'ip', 'gentest']);
    const g1 = readAll().generation;
    assert.ok(g1 > g0, `nft add table: ${String(g0)} -> ${String(g1)}`);
    nsRun(ns(), 'nft', ['list', 'ruleset']);
    nsRun(ns(), 'iptables-save', []);
    assert.equal(readAll().generation, g1, 'listings commit nothing');
    nsRun(ns(), 'iptables', ['-w', '-t', 'mangle', '-A', 'PREROUTING', '-j', 'ACCEPT']);
    const g2 = readAll().generation;
    assert.ok(g2 > g1, `iptables -A (iptables-nft): ${String(g1)} -> ${String(g2)}`);
    nsRun(ns(), 'nft', ['add', 'set', 'ip', 'gentest', 's', '{ type ipv4_addr; }']);
    const g3 = readAll().generation;
    nsRun(ns(), 'nft', ['add', 'element', 'ip', 'gentest', 's', '{ 198.18.0.1 }']);
    assert.ok(readAll().generation > g3, 'an element added');
    nsRun(ns(), 'iptables', ['-w', '-t', 'mangle', '-F', 'PREROUTING']);
    nsRun(ns(), 'nft', ['delete', 'table', 'ip', 'gentest']);
  });

  it('no table of ours: nothing read, no error', () => {
    assert.deepEqual(read(), { ip: [], ip6: [], text: null, text6: null });
  });

  it('reads exactly our tables\' counters of each family, 64-bit values intact, beside a 20k-element map and another table', () => {
    const script =
      `table ip sluice {\n  counter ${GUARD_COUNTER} { packets 5000000123 bytes 7 }\n  counter ${FALLBACK_COUNTER} { packets 11 bytes 13 }\n  counter ${STRAY_COUNTER} { packets 0 bytes 0 }\n` +
      bigMap(20_000) +
      '}\n' +
      `table ip6 sluice {\n  counter ${FALLBACK_COUNTER} { packets 42 bytes 4200 }\n}\n` +
      // Not ours: same counter name, other table.
      `table ip other {\n  counter ${GUARD_COUNTER} { packets 99 bytes 99 }\n}\n`;
    nsRun(ns(), 'nft', ['-f', '-'], script);
    const r = read();
    assert.deepEqual(
      [...r.ip].sort((a, b) => a[0].localeCompare(b[0])),
      [
        [FALLBACK_COUNTER, 11, 13],
        [GUARD_COUNTER, 5000000123, 7],
        [STRAY_COUNTER, 0, 0],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
    assert.deepEqual(r.ip6, [[FALLBACK_COUNTER, 42, 4200]]);
    // The rendered text goes through the same parsers as the rule check's dumps.
    assert.deepEqual(guardCountOf(r.text ?? ''), { packets: 5000000123, bytes: 7 });
    const tc = new TableCounters();
    assert.deepEqual(tc.seed(r.text ?? '', 'ip'), { fallbackFlows: 11, strayReplies: 0 });
    assert.deepEqual(tc.seed(r.text6 ?? '', 'ip6'), { fallbackFlows: 42, strayReplies: 0 });
    // And it agrees with nft's own listing of the same counter.
    assert.match(nsRun(ns(), 'nft', ['list', 'counter', 'ip', 'sluice', FALLBACK_COUNTER]), /packets 11 bytes 13/);
  });

  it('counts that the kernel raises are read as they are now', () => {
    // A rule on output that counts into the guard counter; a ping to loopback passes it.
    nsRun(ns(), 'nft', ['-f', '-'], `table ip sluice {\n  chain out { type filter hook output priority 0; policy accept; icmp type echo-request counter name ${STRAY_COUNTER};\n  }\n}\n`);
    nsRun(ns(), 'ping', ['-c', '3', '-i', '0.2', '-W', '1', '127.0.0.1']);
    const stray = read().ip.find(([name]) => name === STRAY_COUNTER);
    assert.ok(stray);
    assert.equal(stray[1], 3);
  });

  it('a set\'s element counters (syn_seen) read as nft lists them, in both families; an absent set is a typed error', () => {
    const v6 = ['2001:2::1', '2001:2:0:ff::10', '2001:db8:0:1:2:3:4:5'];
    nsRun(
      ns(),
      'nft',
      ['-f', '-'],
      `table ip sluice {\n  set ${SYN_SEEN_SET} { type ipv4_addr . inet_service; counter; elements = { 198.19.1.1 . 80 counter packets 5000000001 bytes 300, 198.19.1.2 . 443, 198.19.255.254 . 65535 counter packets 7 bytes 9 }; }\n}\n` +
        `table ip6 sluice {\n  set ${SYN_SEEN_SET} { type ipv6_addr . inet_service; counter; elements = { ${v6.map((a, i) => `${a} . ${String(80 + i)} counter packets ${String(i + 1)} bytes 1`).join(', ')} }; }\n}\n`,
    );
    const r = readSet(SYN_SEEN_SET);
    for (const fam of ['ip', 'ip6'] as const) {
      const nft = parseSynSeen(nsRun(ns(), 'nft', ['list', 'set', fam, 'sluice', SYN_SEEN_SET]));
      assert.ok(nft.size >= 3, `nft lists the elements: ${JSON.stringify([...nft])}`);
      assert.deepEqual(parseSynSeen(r[fam]), nft, `${fam}: netlink ${r[fam]}`);
    }
    assert.equal(parseSynSeen(r.ip).get('198.19.1.1 . 80'), 5000000001);
    assert.equal(parseSynSeen(r.ip6).get('2001:db8:0:1:2:3:4:5 . 82'), 3);
    const absent = readSet('no_such_set');
    assert.equal(absent.ip, 'error ERR_SLUICE_NFT_SET');
  });

  it('a table\'s layout: its comment and its chains (base or not), of our table alone; nothing when absent', () => {
    const layout = (): Record<'ip' | 'ip6', LayoutItem[]> => JSON.parse(nsRun(ns(), process.execPath, ['--no-warnings', FIXTURE, '--layout'])) as Record<'ip' | 'ip6', LayoutItem[]>;
    nsRun(ns(), 'nft', ['-f', '-'], 'table ip sluice\ndelete table ip sluice\ntable ip6 sluice\ndelete table ip6 sluice\n');
    assert.deepEqual(layout(), { ip: [], ip6: [] });
    // 300 regular chains (a dump of several datagrams), base chains, a 20k-element map (the read must not walk it), and another table's chain of the same name.
    const k = (n: number): string => `  chain k_${String(n)} {\n    meta mark set ${String(n)}\n  }\n`;
    nsRun(
      ns(),
      'nft',
      ['-f', '-'],
      `table ip sluice {\n  comment "${STRUCTURE_COMMENT}0123456789abcdef"\n  set vips { type ipv4_addr; elements = { 198.19.1.1 } }\n` +
        bigMap(20_000) +
        Array.from({ length: 300 }, (_, i) => k(i)).join('') +
        '  chain classify {\n    type filter hook prerouting priority mangle - 10; policy accept;\n    ip daddr @vips goto k_0\n  }\n  chain nat_out {\n    type nat hook output priority -101; policy accept;\n  }\n}\n' +
        'table ip6 sluice {\n  chain nat_post {\n    type nat hook postrouting priority srcnat - 1; policy accept;\n  }\n}\n' +
        'table ip other {\n  comment "not ours"\n  chain classify {\n    type filter hook prerouting priority 0; policy accept;\n  }\n}\n',
    );
    const r = layout();
    assert.deepEqual(r.ip[0], { kind: 'table', comment: `${STRUCTURE_COMMENT}0123456789abcdef` });
    const chains = r.ip.filter((x) => x.kind === 'chain');
    assert.equal(chains.length, 302, 'every chain of ours, none of the other table');
    assert.deepEqual(chains.filter((x) => x.base).map((x) => x.name), ['classify', 'nat_out']);
    assert.ok(chains.some((x) => x.name === 'k_299' && !x.base));
    // A table with no comment (one written before the comment existed) reads as "".
    assert.deepEqual(r.ip6, [{ kind: 'table', comment: '' }, { kind: 'chain', name: 'nat_post', base: true }]);
    nsRun(ns(), 'nft', ['-f', '-'], 'delete table ip other\ndelete table ip sluice\ndelete table ip6 sluice\n');
  });

  it('a set of 3,000 elements (a dump of many datagrams) reads as nft lists it', () => {
    const els = Array.from({ length: 3000 }, (_, i) => `198.19.${String(Math.floor(i / 250))}.${String((i % 250) + 1)} . ${String(1000 + i)} counter packets ${String(i * 7)} bytes ${String(i)}`);
    nsRun(ns(), 'nft', ['-f', '-'], `table ip sluice {\n  set many { type ipv4_addr . inet_service; counter; elements = { ${els.join(', ')} }; }\n}\n`);
    const r = readSet('many');
    const ours = parseSynSeen(r.ip);
    assert.equal(ours.size, 3000);
    assert.deepEqual(ours, parseSynSeen(nsRun(ns(), 'nft', ['list', 'set', 'ip', 'sluice', 'many'])));
  });
});
