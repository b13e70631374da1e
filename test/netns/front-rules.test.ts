/**
 * The front node's rules against real iptables and nft in a scratch
 * namespace: accepted by iptables-restore and nft -f, idempotent, never
 * touching rules or tables it does not own, and removed (with an earlier
 * version's chains) by the one removeRules.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { installRules } from '../../src/front/iptables.ts';
import { configuredSpread, FALLBACK_SLOTS } from '../../src/front/nft.ts';
import { fallbackCountOf } from '../../src/front/rules-check.ts';
import { installRuleset, removeRules, renderRuleset } from '../../src/front/ruleset.ts';
import { renderRules } from '../../src/front/rules.ts';
import { run } from '../../scripts/testbed/sh.ts';
import { nsRun, testPrefix } from '../helpers/testbed.ts';

const example = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');
// A checkpoint that can answer with a reset: the reject chains are installed.
const cfg = parseConfig(frontConfigSchema, `${example}\ncheckpoints: [{ name: r, kind: rate-limit, criterion: source, limit: 5 }]\n`, 'example');
// No checkpoints (the example as shipped): no reject chains.
const plain = parseConfig(frontConfigSchema, example, 'example');

function dump(ns: string): string {
  return ['mangle', 'nat', 'filter'].map((t) => nsRun(ns, 'iptables', ['-t', t, '-S'])).join('');
}

/** The iptables rules, the foreign nft table, and the names of the nft tables (iptables leaves its empty built-in tables behind). */
function ruleset(ns: string): string {
  const tables = nsRun(ns, 'nft', ['list', 'tables']).split('\n').filter((l) => !/^table ip (filter|nat|mangle)$/.test(l));
  return `${dump(ns)}${nsRun(ns, 'nft', ['-s', 'list', 'table', 'inet', 'other'])}${tables.join('\n')}`;
}

describe('front rules in a namespace', () => {
  it('install is idempotent; remove restores exactly the foreign rules', (t) => {
    const ns = `${testPrefix()}-ipt`;
    run('ip', ['netns', 'add', ns]);
    t.after(() => {
      run('ip', ['netns', 'del', ns]);
    });
    // Someone else's rules in the same tables and hooks.
    nsRun(ns, 'iptables', ['-t', 'mangle', '-A', 'PREROUTING', '-p', 'udp', '-j', 'MARK', '--set-mark', '7']);
    nsRun(ns, 'iptables', ['-t', 'nat', '-A', 'PREROUTING', '-p', 'udp', '--dport', '53', '-j', 'DNAT', '--to-destination', '198.18.2.2']);
    nsRun(ns, 'iptables', ['-t', 'nat', '-N', 'OTHER']);
    // And someone else's nft table.
    nsRun(ns, 'nft', ['-f', '-'], 'table inet other {\n chain input { type filter hook input priority 0; policy accept; tcp dport 22 accept; }\n}\n');
    const before = ruleset(ns);

    const rules = renderRuleset(cfg, configuredSpread(cfg));
    installRuleset(rules, ns);
    installRuleset(rules, ns);
    const installed = dump(ns);
    const mark = '-A PREROUTING -m mark --mark 0x51fff000 -j SLUICE_QUEUE';
    assert.equal(installed.split('\n').filter((l) => l === mark).length, 1);
    assert.match(installed, /-A SLUICE_QUEUE -j NFQUEUE --queue-num 0 --queue-bypass/);
    assert.ok(!installed.includes('SLUICE_DNAT'), 'the nat side is in the nft table');
    // Our jump comes first, foreign rules stay in place.
    assert.match(installed, new RegExp(`${mark}\n-A PREROUTING -p udp -j MARK`));
    const table = nsRun(ns, 'nft', ['list', 'table', 'ip', 'sluice']);
    assert.match(table, /dnat ip to meta mark map @targets/);
    assert.match(table, /counter name "vip_guard_drops" drop/);
    assert.equal(fallbackCountOf(table), FALLBACK_SLOTS, 'the fallback map holds its slots');
    assert.equal(nsRun(ns, 'nft', ['list', 'tables']).split('\n').filter((l) => l === 'table ip sluice').length, 1);
    assert.match(ruleset(ns), /table inet other/);

    // The reject chains are entered by marked packets only.
    assert.equal(installed.split('\n').filter((l) => l === '-A FORWARD -m mark --mark 0x51ffffff -j SLUICE_REJECT').length, 1);
    assert.ok(!installed.includes('-A FORWARD -j SLUICE_REJECT'), installed);

    removeRules(ns);
    assert.equal(ruleset(ns), before);
    removeRules(ns); // removing twice is fine
    assert.equal(ruleset(ns), before);
  });

  it('a reload adds the reject chains when a checkpoint can reset, and takes them away when none can', (t) => {
    const ns = `${testPrefix()}-ipr`;
    run('ip', ['netns', 'add', ns]);
    t.after(() => {
      run('ip', ['netns', 'del', ns]);
    });
    nsRun(ns, 'iptables', ['-t', 'filter', '-A', 'FORWARD', '-p', 'udp', '-j', 'ACCEPT']);
    const before = nsRun(ns, 'iptables', ['-t', 'filter', '-S']);
    installRules(renderRules(plain), ns);
    assert.equal(nsRun(ns, 'iptables', ['-t', 'filter', '-S']), before);
    installRules(renderRules(cfg), ns);
    const resetting = nsRun(ns, 'iptables', ['-t', 'filter', '-S']);
    assert.match(resetting, /-A FORWARD -m mark --mark 0x51ffffff -j SLUICE_REJECT\n/);
    assert.match(resetting, /-A SLUICE_REJECT_IN -p tcp -m mark --mark 0x51ffffff -j REJECT --reject-with tcp-reset/);
    installRules(renderRules(plain), ns);
    assert.equal(nsRun(ns, 'iptables', ['-t', 'filter', '-S']), before);
    assert.match(dump(ns), /-A SLUICE_QUEUE /);
  });

  it('removes the nat chains and the unconditional queue jump an earlier version left behind', (t) => {
    const ns = `${testPrefix()}-ipl`;
    run('ip', ['netns', 'add', ns]);
    t.after(() => {
      run('ip', ['netns', 'del', ns]);
    });
    const before = dump(ns);
    // What a killed daemon of the earlier version leaves (its nat chains, an unconditional jump).
    nsRun(ns, 'iptables-restore', ['--noflush'], '*nat\n:SLUICE_DNAT - [0:0]\n:SLUICE_SNAT - [0:0]\n-A SLUICE_DNAT -p tcp -m mark --mark 0x51750001 -j DNAT --to-destination 198.18.201.11:80\nCOMMIT\n*mangle\n:SLUICE_QUEUE - [0:0]\nCOMMIT\n');
    nsRun(ns, 'iptables', ['-t', 'nat', '-I', 'PREROUTING', '1', '-j', 'SLUICE_DNAT']);
    nsRun(ns, 'iptables', ['-t', 'nat', '-I', 'POSTROUTING', '1', '-j', 'SLUICE_SNAT']);
    nsRun(ns, 'iptables', ['-t', 'mangle', '-I', 'PREROUTING', '1', '-j', 'SLUICE_QUEUE']);
    installRuleset(renderRuleset(plain, configuredSpread(plain)), ns);
    const installed = dump(ns);
    assert.ok(!installed.includes('SLUICE_DNAT') && !installed.includes('SLUICE_SNAT'), installed);
    assert.ok(!installed.includes('-A PREROUTING -j SLUICE_QUEUE'), installed);
    removeRules(ns);
    assert.equal(dump(ns), before);
    assert.ok(!nsRun(ns, 'nft', ['list', 'tables']).includes('sluice'));
  });

  it('replaces the unconditional reject jumps an earlier version left behind', (t) => {
    const ns = `${testPrefix()}-ipu`;
    run('ip', ['netns', 'add', ns]);
    t.after(() => {
      run('ip', ['netns', 'del', ns]);
    });
    const before = dump(ns);
    // What a killed daemon of the earlier version leaves: chains, and jumps without a mark test.
    const rules = renderRules(cfg);
    nsRun(ns, 'iptables-restore', ['--noflush'], rules.restore);
    nsRun(ns, 'iptables', ['-t', 'filter', '-I', 'FORWARD', '1', '-j', 'SLUICE_REJECT']);
    nsRun(ns, 'iptables', ['-t', 'filter', '-I', 'INPUT', '1', '-j', 'SLUICE_REJECT_IN']);
    installRules(rules, ns);
    const installed = dump(ns);
    assert.match(installed, /-A FORWARD -m mark --mark 0x51ffffff -j SLUICE_REJECT\n/);
    assert.match(installed, /-A INPUT -m mark --mark 0x51ffffff -j SLUICE_REJECT_IN\n/);
    assert.doesNotMatch(installed, /-A (FORWARD|INPUT) -j SLUICE_REJECT/);
    // And a stop after the old daemon's kill -9 removes them too.
    nsRun(ns, 'iptables', ['-t', 'filter', '-A', 'FORWARD', '-j', 'SLUICE_REJECT']);
    removeRules(ns);
    assert.equal(dump(ns), before);
  });
});
