import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { fallbackMark, overflowMark, serverMark } from '../../src/front/marks.ts';
import { ESTABLISHED_TCP_RETURN, ESTABLISHED_UDP_RETURN, renderRules } from '../../src/front/rules.ts';

const text = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');

describe('front rules', () => {
  it('marks: tagged, per service and target, never colliding', () => {
    const all = new Set<number>();
    for (let s = 0; s < 31; s++) {
      for (let i = 0; i < 0x3f; i++) all.add(serverMark(s, i));
      for (let i = 0; i < 0x40; i++) all.add(fallbackMark(s, i));
      for (let i = 0; i < 0x40; i++) all.add(overflowMark(s, i));
    }
    assert.equal(all.size, 31 * (0x3f + 0x40 + 0x40));
    assert.equal(serverMark(0, 0), 0x51750001);
  });

  it('queues setup and teardown packets of each VIP only, one DNAT per server mark', () => {
    const r = renderRules(parseConfig(frontConfigSchema, text, 'x'));
    const [first, ...queue] = r.byChain['SLUICE_QUEUE'] ?? [];
    // Established packets without SYN, FIN or RST leave the chain first; every later rule needs one of those or a state other than ESTABLISHED.
    assert.equal(first, ESTABLISHED_TCP_RETURN);
    assert.ok(queue.every((l) => l.includes('-j NFQUEUE --queue-num 0 --queue-bypass') || l.includes('-j NFLOG --nflog-group 0 --nflog-size 128 --nflog-threshold 64')));
    assert.ok(queue.some((l) => l.includes('-d 198.19.1.1/32 -p tcp --dport 80 --tcp-flags SYN,ACK,FIN,RST SYN')));
    // FIN and RST are logged (no verdict), after the queue rules, so a packet
    // without a kernel flow is queued first and never both queued and logged.
    const firstLog = queue.findIndex((l) => l.includes('NFLOG'));
    assert.ok(firstLog > 0 && queue.slice(firstLog).every((l) => l.includes('NFLOG') && / --tcp-flags (FIN FIN|RST RST) /.test(l)), queue.join('\n'));
    assert.ok(queue.slice(0, firstLog).every((l) => !/ --tcp-flags (FIN FIN|RST RST) /.test(l)), 'FIN/RST are not queued');
    assert.ok(!queue.some((l) => l.includes('ESTABLISHED') || l.includes('RETURN')), 'established packets are never queued');
    const dnat = r.byChain['SLUICE_DNAT'] ?? [];
    assert.ok(dnat.includes('-d 198.19.1.1/32 -p tcp --dport 80 -m mark --mark 0x51750002 -j DNAT --to-destination 198.18.201.12:80'));
    assert.ok(dnat.some((l) => l.includes('HMARK --hmark-tuple src --hmark-mod 3 --hmark-offset 0x51750040')));
    assert.deepEqual(r.byChain['SLUICE_SNAT'], ['-d 198.19.2.1/32 -p tcp --dport 80 -m mark --mark 0x51750080 -j SNAT --to-source 198.18.101.2']);
  });

  it('fail mode drop: no bypass, no fallback spread', () => {
    const r = renderRules(parseConfig(frontConfigSchema, `${text}\nfailMode: drop\n`, 'x'));
    assert.ok(!r.restore.includes('--queue-bypass'));
    assert.ok(!r.restore.includes('HMARK'));
  });

  it('drained servers are left out of the fallback spread, kept for their marks', () => {
    const r = renderRules(parseConfig(frontConfigSchema, text.replace('capacity: 200 }', 'capacity: 200, state: drain }'), 'x'));
    const dnat = r.byChain['SLUICE_DNAT'] ?? [];
    assert.ok(dnat.some((l) => l.includes('--hmark-mod 2 ')));
    assert.ok(dnat.some((l) => l.includes('--mark 0x51750002 -j DNAT --to-destination 198.18.201.12:80')));
  });

  it('UDP service: the first packet of each flow is queued; DNAT, fallback and SNAT are per protocol', () => {
    const r = renderRules(parseConfig(frontConfigSchema, text.replace('    port: 80\n', '    port: 53\n    protocol: udp\n'), 'x'));
    assert.deepEqual(r.byChain['SLUICE_QUEUE'], [ESTABLISHED_UDP_RETURN, '-d 198.19.1.1/32 -p udp --dport 53 -m conntrack --ctstate NEW -j NFQUEUE --queue-num 0 --queue-bypass']);
    const dnat = r.byChain['SLUICE_DNAT'] ?? [];
    assert.ok(dnat.includes('-d 198.19.1.1/32 -p udp --dport 53 -m mark --mark 0x51750002 -j DNAT --to-destination 198.18.201.12:53'));
    assert.ok(dnat.some((l) => l.startsWith('-d 198.19.1.1/32 -p udp --dport 53 -m mark --mark 0 -j HMARK')));
    assert.ok(!r.restore.includes('--tcp-flags'));
    assert.deepEqual(r.byChain['SLUICE_SNAT'], ['-d 198.19.2.1/32 -p udp --dport 53 -m mark --mark 0x51750080 -j SNAT --to-source 198.18.101.2']);
  });
});
