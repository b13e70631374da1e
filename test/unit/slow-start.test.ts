/**
 * Slow start in the selection methods (select/*.ts, Backend.share) and
 * health reaching DNS: a server ramping up gets its share of new
 * connections from capacity, byrequests and leastconn, none less from
 * maglev (static, documented); a cluster whose servers are all unhealthy
 * reports no usable server and no capacity, which DNS takes as down.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ClusterTable } from '../../src/dns/cluster_state.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { buildServices } from '../../src/front/daemon.ts';
import { clusterLoadOf } from '../../src/front/receive_server_load.ts';
import { createSelector, type Backend, type MethodName } from '../../src/front/select/index.ts';

interface B extends Backend {
  share: number;
}

function pool(n: number, capacity: number): B[] {
  return Array.from({ length: n }, (_, i) => ({ id: `s${String(i)}`, weight: 1, capacity, active: 0, load: 0, usable: true, share: 1 }));
}

/** Picks `count` connections that stay open (active and load grow) and counts them per server. */
function spread(method: MethodName, backends: B[], count: number): number[] {
  const sel = createSelector(method);
  sel.rebuild(backends);
  const got = backends.map(() => 0);
  for (let k = 0; k < count; k++) {
    const i = sel.pick(backends, 0x0a000001 + k * 7919);
    if (i < 0) continue;
    got[i] = (got[i] ?? 0) + 1;
  }
  return got;
}

describe('slow start share in the selection methods', () => {
  // Server 0 ramps at share 0.25 among 3 equal servers: its expected part is 0.25 / 2.25 = 1/9.
  const cases: { method: MethodName; capacity: number; lo: number; hi: number }[] = [
    { method: 'byrequests', capacity: Infinity, lo: 100, hi: 100 },
    { method: 'capacity', capacity: 1_000_000, lo: 100, hi: 100 },
  ];
  for (const c of cases) {
    it(`${c.method}: a server at share 0.25 gets 1/9 of 900 new connections`, () => {
      const b = pool(3, c.capacity);
      b[0]!.share = 0.25;
      const got = spread(c.method, b, 900);
      assert.ok(got[0]! >= c.lo && got[0]! <= c.hi, `got ${JSON.stringify(got)}`);
      assert.equal(got[1]! + got[2]!, 800);
    });
  }

  it('leastconn: a ramping idle server does not take every pick; it joins at (active + 1) / (weight x share)', () => {
    const b = pool(3, Infinity);
    const sel = createSelector('leastconn');
    sel.rebuild(b);
    b[1]!.active = 3;
    b[2]!.active = 3;
    b[0]!.share = 0.25; // key (0 + 1) / 0.25 = 4 > 3: the others are preferred first
    const first = sel.pick(b, 1);
    assert.notEqual(first, 0);
    b[0]!.share = 1; // ramp over: plain wlc, the idle server wins
    assert.equal(sel.pick(b, 1), 0);
  });

  it('maglev ignores the share (static algorithm): the same clients map to the same server', () => {
    const b = pool(3, Infinity);
    const before = spread('maglev', b, 300);
    b[0]!.share = 0.05;
    assert.deepEqual(spread('maglev', b, 300), before);
  });
});

describe('health reaches DNS', () => {
  it('a cluster whose servers are all unhealthy reports serversUp 0 and no capacity: down for DNS', () => {
    const cfg = frontConfigSchema.parse({
      cluster: 'c1',
      uplinkAddress: '198.18.101.2',
      services: [
        {
          name: 'www',
          vip: '198.19.1.1',
          port: 80,
          health: { kind: 'tcp' },
          servers: [
            { name: 'a', address: '198.18.201.11', capacity: 100 },
            { name: 'b', address: '198.18.201.12', capacity: 100 },
          ],
        },
      ],
    });
    const services = buildServices(cfg);
    const dns = new ClusterTable([{ name: 'c1', vips: ['198.19.1.1'] }], 5, 3);
    const c1 = dns.byName('c1')!;
    const report = (): void => {
      const f = clusterLoadOf(services);
      dns.receive({ cluster: 'c1', vips: ['198.19.1.1'], ...f }, 1000);
    };
    report();
    assert.equal(dns.state(c1, 1000), 'up');
    assert.equal(c1.capacity, 200);
    const [a, b] = services[0]!.servers;
    a!.health.setCheck('down', 'connect refused', 10);
    a!.refreshUsable();
    report();
    assert.equal(c1.capacity, 100, 'only the usable server counts');
    assert.equal(c1.serversUp, 1);
    b!.health.setCheck('down', 'timeout after 1 s', 20);
    b!.refreshUsable();
    report();
    assert.equal(c1.serversUp, 0);
    assert.equal(c1.capacity, 0);
    assert.equal(dns.state(c1, 1000), 'down', 'a fresh report with no usable server: down at once, not after the reports stop');
  });
});
