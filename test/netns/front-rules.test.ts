/**
 * The front node's rules against real iptables in a scratch namespace:
 * accepted by iptables-restore (HMARK, conntrack, NFQUEUE options included),
 * idempotent, and never touching rules it does not own.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { installRules, removeRules } from '../../src/front/iptables.ts';
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
    const before = dump(ns);

    const rules = renderRules(cfg);
    installRules(rules, ns);
    installRules(rules, ns);
    const installed = dump(ns);
    assert.equal(installed.split('\n').filter((l) => l === '-A PREROUTING -j SLUICE_QUEUE').length, 1);
    assert.equal(installed.split('\n').filter((l) => l === '-A PREROUTING -j SLUICE_DNAT').length, 1);
    assert.match(installed, /-A SLUICE_DNAT .*HMARK/);
    assert.match(installed, /-A SLUICE_QUEUE .*--queue-num 0 --queue-bypass/);
    // Our jumps come first, foreign rules stay in place.
    assert.match(installed, /-A PREROUTING -j SLUICE_DNAT\n-A PREROUTING -p udp -m udp --dport 53 -j DNAT/);

    // The reject chains are entered by marked packets only.
    assert.equal(installed.split('\n').filter((l) => l === '-A FORWARD -m mark --mark 0x5175ffff -j SLUICE_REJECT').length, 1);
    assert.ok(!installed.includes('-A FORWARD -j SLUICE_REJECT'), installed);

    removeRules(ns);
    assert.equal(dump(ns), before);
    removeRules(ns); // removing twice is fine
    assert.equal(dump(ns), before);
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
    assert.match(resetting, /-A FORWARD -m mark --mark 0x5175ffff -j SLUICE_REJECT\n/);
    assert.match(resetting, /-A SLUICE_REJECT_IN -p tcp -m mark --mark 0x5175ffff -j REJECT --reject-with tcp-reset/);
    installRules(renderRules(plain), ns);
    assert.equal(nsRun(ns, 'iptables', ['-t', 'filter', '-S']), before);
    assert.match(dump(ns), /-A SLUICE_QUEUE /);
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
    assert.match(installed, /-A FORWARD -m mark --mark 0x5175ffff -j SLUICE_REJECT\n/);
    assert.match(installed, /-A INPUT -m mark --mark 0x5175ffff -j SLUICE_REJECT_IN\n/);
    assert.doesNotMatch(installed, /-A (FORWARD|INPUT) -j SLUICE_REJECT/);
    // And a stop after the old daemon's kill -9 removes them too.
    nsRun(ns, 'iptables', ['-t', 'filter', '-A', 'FORWARD', '-j', 'SLUICE_REJECT']);
    removeRules(ns);
    assert.equal(dump(ns), before);
  });
});
