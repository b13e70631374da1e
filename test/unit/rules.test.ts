import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { fallbackMark, overflowMark, serverMark } from '../../src/front/marks.ts';
import { CHAINS, ESTABLISHED_TCP_RETURN, ESTABLISHED_UDP_RETURN, REPLY_TCP_RETURN, renderRules, resetsClients } from '../../src/front/rules.ts';

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
    const q = '-j NFQUEUE --queue-num 0 --queue-bypass';
    const log = '-j NFLOG --nflog-group 0 --nflog-size 128 --nflog-threshold 64';
    const m = '-d 198.19.1.1/32 -p tcp --dport 80';
    assert.deepEqual(r.byChain['SLUICE_QUEUE'], [
      // Established packets without SYN, FIN or RST leave first, then replies without RST.
      ESTABLISHED_TCP_RETURN,
      REPLY_TCP_RETURN,
      // Queued: SYN, then anything without a kernel flow; only then are FIN
      // and RST logged, so no packet is both queued and logged.
      `${m} --tcp-flags SYN,ACK,FIN,RST SYN ${q}`,
      `${m} -m conntrack --ctstate NEW,INVALID ${q}`,
      `${m} ! --tcp-flags FIN,RST NONE ${log}`,
      `${m} -j RETURN`,
      ...['11', '12', '13'].map((h) => `-i lan0 -s 198.18.201.${h}/32 -p tcp --sport 80 --tcp-flags RST RST ${log}`),
    ]);
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

  it('the reject chains are entered only by packets that carry the reject mark', () => {
    assert.deepEqual(CHAINS.rejectForward.jumpIf, ['-m', 'mark', '--mark', '0x5175ffff']);
    assert.deepEqual(CHAINS.rejectInput.jumpIf, ['-m', 'mark', '--mark', '0x5175ffff']);
    assert.equal('jumpIf' in CHAINS.queue, false);
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
