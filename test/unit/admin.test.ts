import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { AdminServer, type AdminTarget } from '../../src/front/admin.ts';
import { frontConfigSchema, type FrontConfig } from '../../src/front/config.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { buildRequest } from '../../src/cli/ctl.ts';

const text = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');

/** Records what the admin server applies; the protocol is what is under test here. */
function target(): AdminTarget & { applied: Readonly<FrontConfig>[] } {
  const t = {
    log: componentLogger('test-admin').child({}, { level: 'silent' }),
    config: parseConfig(frontConfigSchema, text, 'x'),
    applied: [] as Readonly<FrontConfig>[],
    apply(next: Readonly<FrontConfig>) {
      t.applied.push(next);
      t.config = next;
    },
    reload: () => true,
    status: () => ({ up: true }),
  };
  return t;
}

describe('front admin protocol', () => {
  it('drain, weight, capacity, enable, remove produce validated, frozen configs', () => {
    const t = target();
    const a = new AdminServer('/nonexistent', t);
    assert.deepEqual(a.handle('{"cmd":"drain","service":"www","server":"s1b"}'), { ok: true });
    assert.equal(t.config.services[0]!.servers[1]!.state, 'drain');
    assert.deepEqual(a.handle('{"cmd":"weight","service":"www","server":"s1a","value":5}'), { ok: true });
    assert.equal(t.config.services[0]!.servers[0]!.weight, 5);
    assert.deepEqual(a.handle('{"cmd":"capacity","service":"www","server":"s1c","value":50}'), { ok: true });
    assert.equal(t.config.services[0]!.servers[2]!.capacity, 50);
    assert.deepEqual(a.handle('{"cmd":"enable","service":"www","server":"s1b"}'), { ok: true });
    assert.equal(t.config.services[0]!.servers[1]!.state, 'active');
    assert.deepEqual(a.handle('{"cmd":"remove","service":"www","server":"s1a"}'), { ok: true });
    assert.deepEqual(
      t.config.services[0]!.servers.map((s) => s.name),
      ['s1b', 's1c'],
    );
    assert.ok(Object.isFrozen(t.config.services[0]!.servers[0]));
    assert.equal(t.applied.length, 5);
  });

  const bad: [string, string, RegExp][] = [
    ['not JSON', 'drain www s1b', /not JSON/],
    ['not an object', '42', /JSON object/],
    ['unknown command', '{"cmd":"explode"}', /unknown cmd/],
    ['unknown service', '{"cmd":"drain","service":"ftp","server":"s1b"}', /no service/],
    ['unknown server', '{"cmd":"drain","service":"www","server":"s9"}', /no server/],
    ['negative weight', '{"cmd":"weight","service":"www","server":"s1a","value":-1}', /weight must be > 0/],
    ['capacity not a number', '{"cmd":"capacity","service":"www","server":"s1a","value":"lots"}', /capacity/],
    ['removing the last server', '', /at least one server/],
  ];
  for (const [name, line, msg] of bad) {
    it(`refuses ${name}, keeping the running config`, () => {
      const t = target();
      const a = new AdminServer('/nonexistent', t);
      let l = line;
      if (name === 'removing the last server') {
        a.handle('{"cmd":"remove","service":"www","server":"s1a"}');
        a.handle('{"cmd":"remove","service":"www","server":"s1b"}');
        l = '{"cmd":"remove","service":"www","server":"s1c"}';
      }
      const before = t.config;
      const r = a.handle(l);
      assert.equal(r['ok'], false);
      assert.match(String(r['error']), msg);
      assert.equal(t.config, before);
      assert.ok(a.rejected >= 1);
    });
  }

  it('sluice ctl builds requests and refuses bad usage', () => {
    assert.deepEqual(buildRequest(['drain', 'www', 's1b']), { cmd: 'drain', service: 'www', server: 's1b' });
    assert.deepEqual(buildRequest(['weight', 'www', 's1b', '3']), { cmd: 'weight', service: 'www', server: 's1b', value: 3 });
    assert.equal(typeof buildRequest(['weight', 'www', 's1b', 'x']), 'string');
    assert.equal(typeof buildRequest(['drain', 'www']), 'string');
    assert.equal(typeof buildRequest(['frob']), 'string');
  });
});
