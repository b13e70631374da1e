/**
 * services[].health in the front node's schema: defaults that keep older
 * configs working, and every bad value refused with a message naming the key.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { frontConfigSchema } from '../../src/front/config.ts';

function parse(health: unknown): ReturnType<typeof frontConfigSchema.safeParse> {
  return frontConfigSchema.safeParse({
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    services: [{ name: 'www', vip: '198.19.1.1', port: 80, method: 'byrequests', ...(health !== undefined ? { health } : {}), servers: [{ name: 'a', address: '198.18.201.11' }] }],
  });
}

describe('front config: services[].health', () => {
  it('absent: kind none with the documented defaults', () => {
    const r = parse(undefined);
    assert.ok(r.success);
    assert.deepEqual(r.data.services[0]?.health, { kind: 'none', intervalSeconds: 2, timeoutSeconds: 1, rise: 2, fall: 3, refusedLimit: 10, unansweredLimit: 10, path: '/', expectStatus: '200-399', slowStartSeconds: 0, startAs: 'up' });
  });

  it('a full http check is accepted', () => {
    const r = parse({ kind: 'http', intervalSeconds: 1, timeoutSeconds: 0.5, rise: 2, fall: 2, source: '198.18.201.1', port: 8080, path: '/healthz?x=1', host: 'www.example', expectStatus: '200,204,301-302', bodyMatch: { regex: '^ok$' }, slowStartSeconds: 10, startAs: 'down' });
    assert.ok(r.success, JSON.stringify(r.error?.issues));
  });

  it('an IPv6 service takes an IPv6 source (canonical text), and refuses an IPv4 one', () => {
    const six = (source: string): ReturnType<typeof frontConfigSchema.safeParse> =>
      frontConfigSchema.safeParse({
        cluster: 'c1',
        uplinkAddress: '198.18.101.2',
        services: [{ name: 'www6', vip: '2001:2:0:1001::1', port: 80, method: 'byrequests', health: { kind: 'tcp', source }, servers: [{ name: 'a', address: '2001:2:0:201::11' }] }],
      });
    const ok = six('2001:2:0:201:0:0:0:1');
    assert.ok(ok.success, JSON.stringify(ok.error?.issues));
    assert.equal(ok.data.services[0]?.health.source, '2001:2:0:201::1');
    const bad4 = six('198.18.201.1');
    assert.ok(!bad4.success);
    assert.match(bad4.error.issues.find((i) => i.path.join('.') === 'services.0.health.source')?.message ?? '', /IPv4 but the service's VIP 2001:2:0:1001::1 is IPv6/);
  });

  const bad: [string, unknown, string, RegExp][] = [
    ['unknown kind', { kind: 'icmp' }, 'services.0.health.kind', /none, tcp or http/],
    ['timeout not below interval', { kind: 'tcp', intervalSeconds: 1, timeoutSeconds: 1 }, 'services.0.health.timeoutSeconds', /must be below health.intervalSeconds/],
    ['rise 0', { kind: 'tcp', rise: 0 }, 'services.0.health.rise', /1\.\.100/],
    ['fall 1.5', { kind: 'tcp', fall: 1.5 }, 'services.0.health.fall', /integer/],
    ['interval 0', { kind: 'tcp', intervalSeconds: 0 }, 'services.0.health.intervalSeconds', /0\.1\.\.3600/],
    ['source not an address', { kind: 'tcp', source: 'lan0' }, 'services.0.health.source', /IPv4/],
    ['port 0', { kind: 'tcp', port: 0 }, 'services.0.health.port', /1\.\.65535/],
    ['relative path', { kind: 'http', path: 'health' }, 'services.0.health.path', /absolute path/],
    ['path with a space', { kind: 'http', path: '/a b' }, 'services.0.health.path', /without spaces/],
    ['host with a newline', { kind: 'http', host: 'a\r\nX: y' }, 'services.0.health.host', /host name/],
    ['status class', { kind: 'http', expectStatus: '2xx' }, 'services.0.health.expectStatus', /not a status code/],
    ['empty range', { kind: 'http', expectStatus: '399-200' }, 'services.0.health.expectStatus', /empty/],
    ['bad regex', { kind: 'http', bodyMatch: { regex: '(' } }, 'services.0.health.bodyMatch.regex', /not a valid regular expression/],
    ['refusedLimit -1', { kind: 'tcp', refusedLimit: -1 }, 'services.0.health.refusedLimit', /0\.\.100000/],
    ['refusedLimit 2.5', { kind: 'tcp', refusedLimit: 2.5 }, 'services.0.health.refusedLimit', /integer/],
    ['unansweredLimit -1', { kind: 'tcp', unansweredLimit: -1 }, 'services.0.health.unansweredLimit', /0\.\.100000/],
    ['unansweredLimit 100001', { kind: 'tcp', unansweredLimit: 100_001 }, 'services.0.health.unansweredLimit', /0\.\.100000/],
    ['negative slow start', { kind: 'tcp', slowStartSeconds: -1 }, 'services.0.health.slowStartSeconds', /0\.\.3600/],
    ['startAs maybe', { kind: 'tcp', startAs: 'maybe' }, 'services.0.health.startAs', /up or down/],
    ['unknown key', { kind: 'tcp', inter: 2 }, 'services.0.health', /inter/],
    ['an IPv6 source on an IPv4 service', { kind: 'tcp', source: '2001:2:0:201::1' }, 'services.0.health.source', /IPv6 but the service's VIP 198\.19\.1\.1 is IPv4.*give an IPv4 address of this node/],
  ];
  for (const [name, health, path, message] of bad) {
    it(`refuses ${name}, naming ${path}`, () => {
      const r = parse(health);
      assert.ok(!r.success);
      const issue = r.error.issues.find((i) => i.path.join('.') === path);
      assert.ok(issue, `an issue at ${path}: ${JSON.stringify(r.error.issues)}`);
      assert.match(issue.message, message);
    });
  }
});
