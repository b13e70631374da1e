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

const cfg = parseConfig(frontConfigSchema, readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8'), 'example');

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

    removeRules(ns);
    assert.equal(dump(ns), before);
    removeRules(ns); // removing twice is fine
    assert.equal(dump(ns), before);
  });
});
