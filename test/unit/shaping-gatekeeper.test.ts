// The `gatekeeper` checkpoint kind (src/shaping/shaper.ts #gatekeeper +
// TimedHolds) with a real Gatekeeper library object whose delays are set
// directly (remember(), as a DELAY_UNTIL would): pass + ACCEPTED, hold
// until the delay ends + DELAYED, reject beyond maxDelayMs or a full hold
// list + REJECTED, fail open while no gatekeeper is attached. Real packets
// through FrontEngine.decide(), fake queue timers. The masters are not
// reachable (plaintext to a closed port): accounting is queued and counted.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable } from '../../src/front/connections.ts';
import { FrontEngine, HELD } from '../../src/front/engine.ts';
import { gatekeeperConfigOf } from '../../src/front/throttle.ts';
import { REJECT_MARK, serverMark } from '../../src/front/marks.ts';
import { OVERFLOW_BASE, ServiceRuntime } from '../../src/front/service.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { TcpFlag } from '../../src/packet/ipv4.ts';
import { Shaper } from '../../src/shaping/shaper.ts';
import { Gatekeeper } from '../../src/throttle/gatekeeper.ts';
import { tcp } from '../helpers/packets.ts';

const THROTTLE = `
throttle:
  name: fr1
  control: { plaintext: true }
  masters: [{ accounting: tcp://127.0.0.1:9, control: tcp://127.0.0.1:9 }]
`;

function front(checkpoints: string, extra = THROTTLE, cluster = '') {
  return parseConfig(
    frontConfigSchema,
    `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11 }
    checkpoints:
${checkpoints}
${cluster}
${extra}
`,
    't',
  );
}

const gatekeepers: Gatekeeper[] = [];
after(() => {
  for (const g of gatekeepers) g.stop();
});

async function setup(checkpoints: string) {
  const cfg = front(checkpoints);
  const services = cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
  const armed = new Map<number, number>();
  const shaper = new Shaper(
    { cluster: cfg.checkpoints, services: cfg.services, overflow: [] },
    { maxHeld: cfg.shaping.maxHeld, connections: 100, overflowBase: OVERFLOW_BASE, scheduler: (i) => ({ arm: (at) => armed.set(i, at) }) },
  );
  const gcfg = gatekeeperConfigOf(cfg, shaper);
  assert.ok(gcfg);
  const gk = await Gatekeeper.start(gcfg, pino({ level: 'silent' }));
  gatekeepers.push(gk);
  const table = new ConnectionTable(100, 1000, { released: () => undefined });
  const e = new FrontEngine(services, table, shaper);
  const settled: [number, number, number][] = [];
  e.onSettled = (id, v, mark) => settled.push([id, v, mark]);
  return { e, shaper, gk, armed, settled, gcfg };
}

const syn = (port: number, src = '198.18.11.2') => tcp({ src, dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });

describe('gatekeeper checkpoint', () => {
  it('passes, holds until the masters\' time, rejects beyond maxDelayMs or a full hold list, and accounts each', async () => {
    const { e, shaper, gk, armed, settled, gcfg } = await setup(`      - { name: gk, kind: gatekeeper, queue: { maxLength: 1, maxDelayMs: 2000 } }`);
    assert.deepEqual(gcfg.domains, [{ name: 'www', prefixLength: 32, prefixLength6: 64, maxDelaySeconds: 2 }]);
    // Not attached yet (the daemon attaches once the gatekeeper runs): fail open, counted.
    assert.equal(e.decide(syn(1), 0, syn(1).length, 0, 1), Verdict.Accept);
    const cp = shaper.all[0]!;
    assert.equal(cp.counts.untracked, 1);
    assert.deepEqual(shaper.attachGatekeeper(gk), []);
    const d = gk.domain('www')!;

    // No delay known: pass at once, ACCEPTED.
    assert.equal(e.decide(syn(2), 0, syn(2).length, 10, 2), Verdict.Accept);
    assert.equal(e.mark, serverMark(0, 0));
    assert.equal(d.counters.accepted, 1);

    // A delay of ~500 ms: held until then, DELAYED.
    const client = parseIPv4Address('198.18.11.2')!;
    gk.remember(d, client, Date.now() + 500, Date.now());
    assert.equal(e.decide(syn(3), 0, syn(3).length, 20, 3), HELD);
    assert.equal(d.counters.delayed, 1);
    const at = armed.get(0)!;
    assert.ok(at > 20 + 400 && at <= 20 + 500, `armed at ${at}`);
    // The hold list is full (maxLength 1): the next one is rejected with a reset.
    assert.equal(e.decide(syn(4), 0, syn(4).length, 30, 4), Verdict.Accept);
    assert.equal(e.mark, REJECT_MARK);
    assert.equal(cp.rejects.queueFull, 1);
    assert.equal(d.counters.rejected, 1);
    // A retransmit of the held SYN is dropped, not accounted again.
    assert.equal(e.decide(syn(3), 0, syn(3).length, 40, 5), Verdict.Drop);
    assert.equal(d.counters.delayed + d.counters.rejected + d.counters.accepted, 3);
    // The timer: not before its time, then the held SYN goes to its server.
    cp.fire(at - 1);
    assert.deepEqual(settled, []);
    cp.fire(at);
    assert.deepEqual(settled, [[3, Verdict.Accept, serverMark(0, 0)]]);
    assert.equal(shaper.pool.held, 0);
    assert.equal(cp.holds!.counts.admitted, 1);

    // A delay past maxDelayMs: rejected at once.
    gk.remember(d, client, Date.now() + 10_000, Date.now());
    assert.equal(e.decide(syn(6), 0, syn(6).length, at + 1, 6), Verdict.Accept);
    assert.equal(e.mark, REJECT_MARK);
    assert.equal(cp.rejects.maxDelay, 1);
    assert.equal(d.counters.rejected, 2);
    // Another client is not affected.
    assert.equal(e.decide(syn(7, '198.18.11.3'), 0, syn(7).length, at + 2, 7), Verdict.Accept);
    assert.equal(e.mark, serverMark(0, 0));
    assert.equal(gk.counters.accountingQueued, 5);
  });

  it('keys by prefix with criterion source-prefix, and holds in time order', async () => {
    const { e, shaper, gk, armed, settled } = await setup(`      - { name: gk, kind: gatekeeper, criterion: source-prefix, prefixLength: 24 }`);
    shaper.attachGatekeeper(gk);
    const d = gk.domain('www')!;
    assert.equal(d.prefixLength, 24);
    const now = Date.now();
    gk.remember(d, parseIPv4Address('198.18.11.0')!, now + 800, now);
    gk.remember(d, parseIPv4Address('198.18.12.0')!, now + 300, now);
    assert.equal(e.decide(syn(1, '198.18.11.9'), 0, syn(1).length, 0, 1), HELD);
    assert.equal(e.decide(syn(2, '198.18.12.9'), 0, syn(2).length, 0, 2), HELD);
    assert.equal(e.decide(syn(3, '198.18.13.9'), 0, syn(3).length, 0, 3), Verdict.Accept);
    const cp = shaper.all[0]!;
    cp.fire(armed.get(0)!);
    assert.deepEqual(settled.map((s) => s[0]), [2]);
    cp.fire(armed.get(0)!);
    assert.deepEqual(settled.map((s) => s[0]), [2, 1]);
    assert.equal(cp.holds!.armedAt, Infinity);
    assert.equal(cp.holds!.length, 0);
  });
});

describe('gatekeeper checkpoint configuration', () => {
  const problems = (f: () => unknown): string => {
    try {
      f();
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    return assert.fail('accepted');
  };

  it('needs the throttle section', () => {
    assert.match(problems(() => front(`      - { name: gk, kind: gatekeeper }`, '')), /services\[0\]\.checkpoints\[0\]\.kind: .*throttle: section/);
  });

  it('needs a domain outside a service list, one prefix length per domain, a client criterion, no limit', () => {
    assert.match(problems(() => front('      []', THROTTLE, 'checkpoints: [{ name: c, kind: gatekeeper }]')), /checkpoints\[0\]\.domain: required outside a service/);
    assert.match(problems(() => front(`      - { name: gk, kind: gatekeeper, criterion: source-prefix, prefixLength: 24 }`, THROTTLE, 'checkpoints: [{ name: c, kind: gatekeeper, domain: www }]')), /one identifier per domain/);
    assert.match(problems(() => front(`      - { name: gk, kind: gatekeeper, prefixLength6: 56 }`, THROTTLE, 'checkpoints: [{ name: c, kind: gatekeeper, domain: www }]')), /prefixLength6: domain www keys IPv6 clients by \/(56|64) .* same prefixLength6/);
    assert.match(problems(() => front(`      - { name: gk, kind: gatekeeper, criterion: service }`)), /criterion source or source-prefix/);
    assert.match(problems(() => front(`      - { name: gk, kind: gatekeeper, limit: 3 }`)), /no local limit/);
    assert.match(problems(() => front(`      - { name: gk, kind: rate-limit, limit: 3, domain: www }`)), /domain is for kind gatekeeper/);
  });

  it('a throttle section without gatekeeper rules starts no gatekeeper', () => {
    const cfg = front('      []');
    assert.equal(gatekeeperConfigOf(cfg, new Shaper({ cluster: [], services: cfg.services, overflow: [] }, { maxHeld: 1, connections: 1, overflowBase: OVERFLOW_BASE, scheduler: () => ({ arm: () => undefined }) })), undefined);
  });
});
