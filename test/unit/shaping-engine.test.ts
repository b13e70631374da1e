// FrontEngine with checkpoints (src/front/engine.ts + src/shaping): real
// packets through decide(), fake queue timers. Held SYNs get their verdict
// later, retransmits are dropped, rejections carry REJECT_MARK, concurrency
// counts come back through the connection table's release hook on FIN.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable } from '../../src/front/connections.ts';
import { FrontEngine, HELD } from '../../src/front/engine.ts';
import { REJECT_MARK, overflowMark, serverMark } from '../../src/front/marks.ts';
import { OVERFLOW_BASE, ServiceRuntime } from '../../src/front/service.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { TcpFlag } from '../../src/packet/ipv4.ts';
import { Shaper } from '../../src/shaping/shaper.ts';
import { tcp } from '../helpers/packets.ts';

function setup(checkpoints: string) {
  const cfg = parseConfig(
    frontConfigSchema,
    `
cluster: c1
uplinkAddress: 198.18.101.2
overflow: [{ cluster: c2, vip: 198.19.2.1, freeCapacity: 10 }]
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11 }
    checkpoints:
${checkpoints}
`,
    't',
  );
  const services = cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
  const armed = new Map<number, number>();
  const now = { t: 0 };
  const shaper = new Shaper(
    { cluster: cfg.checkpoints, services: cfg.services, overflow: cfg.overflow.map((o) => o.cluster) },
    { maxHeld: cfg.shaping.maxHeld, connections: 100, overflowBase: OVERFLOW_BASE, scheduler: (i) => ({ arm: (at) => armed.set(i, at) }) },
  );
  const table = new ConnectionTable(100, 1000, {
    released(svc, srv, slot) {
      const s = services[svc]?.servers[srv];
      if (s) s.active--;
      shaper.releaseConnection(slot, now.t);
    },
  });
  const e = new FrontEngine(services, table, shaper);
  const settled: [number, number, number, number][] = [];
  e.onSettled = (id, v, mark) => settled.push([id, v, mark, now.t]);
  const run = (t: number): void => {
    for (let g = 0; g < 1000; g++) {
      let idx = -1;
      let at = Infinity;
      for (const [i, a] of armed) if (a < at) [idx, at] = [i, a];
      if (idx < 0 || at > t) break;
      armed.delete(idx);
      now.t = at;
      shaper.all[idx]!.queue!.fire(at);
    }
    now.t = t;
  };
  return { e, settled, run, now, services };
}

const syn = (port: number, src = '198.18.11.2') => tcp({ src, dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });
const fin = (port: number, src = '198.18.11.2') => tcp({ src, dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Fin | TcpFlag.Ack });

describe('FrontEngine with checkpoints', () => {
  it('rate limit: pass, hold then release by timer, retransmit dropped, reset beyond the queue', () => {
    const { e, settled, run, now } = setup(`      - { name: per-src, kind: rate-limit, limit: 2, queue: { maxLength: 1, maxDelayMs: 1500 } }`);
    const m = serverMark(0, 0);
    const got: [number, number][] = [];
    for (let p = 1; p <= 4; p++) {
      const v = e.decide(syn(p), 0, syn(p).length, 0, 100 + p);
      got.push([v, e.mark]);
    }
    assert.deepEqual(got, [[Verdict.Accept, m], [Verdict.Accept, m], [HELD, 0], [Verdict.Accept, REJECT_MARK]]);
    now.t = 300;
    assert.equal(e.decide(syn(3), 0, syn(3).length, 300, 200), Verdict.Drop); // retransmit of the held SYN
    run(2000);
    assert.deepEqual(settled, [[103, Verdict.Accept, m, 1001]]);
    assert.equal(e.counters.shapingRetransmits, 1);
    assert.equal(e.counters.shapingRejected, 1);
    assert.equal(e.counters.decided, 3);
  });

  it('concurrency limit: a FIN lets the next waiting SYN through', () => {
    const { e, settled, run, now } = setup(`      - { name: conc, kind: concurrency-limit, limit: 1 }`);
    assert.equal(e.decide(syn(1), 0, syn(1).length, 0, 1), Verdict.Accept);
    assert.equal(e.decide(syn(2), 0, syn(2).length, 0, 2), HELD);
    now.t = 40;
    assert.equal(e.decide(fin(1), 0, fin(1).length, 40, 3), Verdict.Accept);
    run(41);
    assert.deepEqual(settled, [[2, Verdict.Accept, serverMark(0, 0), 40]]);
  });

  it('a counter condition steers a heavy source to the overflow cluster; silent rejection', () => {
    const { e } = setup(`      - { name: src-rate, kind: counter }
      - { name: heavy, kind: counter, criterion: none, when: { counter: { name: src-rate, above: 2 } }, action: { steer: c2 } }
      - { name: deny, kind: counter, criterion: none, when: { sourceIn: [198.18.99.0/24] }, action: reject, reject: drop }`);
    const marks: number[] = [];
    for (let p = 1; p <= 4; p++) {
      e.decide(syn(p), 0, syn(p).length, 0, p);
      marks.push(e.mark);
    }
    assert.deepEqual(marks, [serverMark(0, 0), serverMark(0, 0), overflowMark(0, 0), overflowMark(0, 0)]);
    assert.equal(e.decide(syn(9, '198.18.99.7'), 0, 40, 0, 9), Verdict.Drop);
  });
});

describe('checkpoint config validation', () => {
  const bad = (cps: string): string[] => {
    try {
      setup(cps);
      return [];
    } catch (err) {
      return String(err).split('\n').filter((l) => l.includes('checkpoints'));
    }
  };
  it('names the key path and the fix', () => {
    assert.match(bad(`      - { name: r, kind: rate-limit }`).join(), /services\[0\]\.checkpoints\[0\]\.limit: a rate-limit rule needs a limit/);
    assert.match(bad(`      - { name: r, kind: counter, action: { steer: nope } }`).join(), /action\.steer.*not an overflow cluster/);
    assert.match(bad(`      - { name: r, kind: counter, criterion: server }`).join(), /criterion.*server-level/);
    assert.match(bad(`      - { name: r, kind: counter, when: { counter: { name: x, above: 1 } } }`).join(), /no checkpoint named "x"/);
    assert.match(bad(`      - { name: r, kind: counter }\n      - { name: r, kind: counter }`).join(), /used twice/);
  });
});
