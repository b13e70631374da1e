import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { AdminServer, type AdminTarget } from '../../src/front/admin.ts';
import { frontConfigSchema, type FrontConfig } from '../../src/front/config.ts';
import { OverrideStore } from '../../src/front/override-store.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { buildRequest } from '../../src/cli/ctl.ts';

const text = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');
const FILE = parseConfig(frontConfigSchema, text, 'x');

/**
 * The daemon's side of a change, as FrontDaemon.change() does it: the
 * override store keeps it in a state file (a fresh one per target) and
 * returns the merged config, which this target records as applied.
 */
function target(stateFile = join(mkdtempSync(join(tmpdir(), 'sluice-admin-')), 'front.state.json')): AdminTarget & { applied: Readonly<FrontConfig>[]; store: OverrideStore; config: Readonly<FrontConfig> } {
  const log = componentLogger('test-admin').child({}, { level: 'silent' });
  const store = new OverrideStore(stateFile, log);
  const t = {
    log,
    store,
    config: store.load(FILE),
    applied: [] as Readonly<FrontConfig>[],
    change(c: Parameters<AdminTarget['change']>[0]) {
      const next = store.change(c, t.config);
      if (typeof next === 'string') return next;
      t.applied.push(next);
      t.config = next;
      return undefined;
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

  it('add: a validated server appended; remove of an added server leaves no override; bad adds refused naming the key', () => {
    const t = target();
    const a = new AdminServer('/nonexistent', t);
    assert.deepEqual(a.handle('{"cmd":"add","service":"www","server":"s1d","address":"198.18.201.14","port":8080,"weight":2,"capacity":40}'), { ok: true });
    const added = t.config.services[0]!.servers.find((s) => s.name === 's1d');
    assert.deepEqual({ ...added }, { name: 's1d', address: '198.18.201.14', port: 8080, weight: 2, capacity: 40, state: 'active', checkpoints: [] });
    assert.equal(t.store.list.length, 1);
    const refusals: [string, RegExp][] = [
      ['{"cmd":"add","service":"www","server":"s1e","address":"198.18.201","capacity":1}', /servers\[4\]\.address: expected an IPv4 address/],
      ['{"cmd":"add","service":"www","server":"s1e","address":"198.18.201.15"}', /servers\[4\]\.capacity: the capacity method needs a capacity/],
      ['{"cmd":"add","service":"www","server":"s1a","address":"198.18.201.15","capacity":1}', /server name "s1a" is used twice/],
      ['{"cmd":"add","service":"ftp","server":"x","address":"198.18.201.15"}', /no service named "ftp"/],
      ['{"cmd":"add","service":"www","server":"bad name!","address":"198.18.201.15","capacity":1}', /servers\[4\]\.name: names are/],
    ];
    for (const [line, msg] of refusals) {
      const r = a.handle(line);
      assert.equal(r['ok'], false, line);
      assert.match(String(r['error']), msg, line);
    }
    assert.deepEqual(a.handle('{"cmd":"remove","service":"www","server":"s1d"}'), { ok: true });
    assert.equal(t.store.list.length, 0, 'an added server removed again leaves nothing to keep');
    assert.deepEqual(t.config.services[0]!.servers.map((s) => s.name), ['s1a', 's1b', 's1c']);
  });

  it('changes are kept in the state file (mode 0600) and re-applied by a new daemon over the same file', () => {
    const t = target();
    const a = new AdminServer('/nonexistent', t);
    for (const l of [
      '{"cmd":"drain","service":"www","server":"s1b"}',
      '{"cmd":"weight","service":"www","server":"s1a","value":5}',
      '{"cmd":"remove","service":"www","server":"s1c"}',
      '{"cmd":"add","service":"www","server":"s1d","address":"198.18.201.14","capacity":40}',
    ]) assert.deepEqual(a.handle(l), { ok: true }, l);
    assert.equal(statSync(t.store.file).mode & 0o777, 0o600);
    const restarted = target(t.store.file);
    assert.deepEqual(restarted.config, t.config, 'a restart over the same file and state file runs the same configuration');
    // revert: one server back to the file; enable after drain: no override left.
    assert.deepEqual(a.handle('{"cmd":"revert","service":"www","server":"s1c"}'), { ok: true });
    assert.deepEqual(t.config.services[0]!.servers.map((s) => s.name), ['s1a', 's1b', 's1c', 's1d'], "back at its place in the file");
    assert.deepEqual(a.handle('{"cmd":"enable","service":"www","server":"s1b"}'), { ok: true });
    assert.deepEqual(t.store.list.map((o) => `${o.kind} ${o.server}`), ['set s1a', 'add s1d']);
    const r = a.handle('{"cmd":"revert","service":"www","server":"s1b"}');
    assert.match(String(r['error']), /no ctl override for www\/s1b/);
    assert.deepEqual(a.handle('{"cmd":"clear"}'), { ok: true });
    assert.deepEqual(t.config, FILE, 'clear: back to the file');
    assert.deepEqual(target(t.store.file).config, FILE);
  });

  it('a change that cannot be kept (state file not writable) is refused and not applied', () => {
    const t = target('/dev/null/front.state.json');
    const a = new AdminServer('/nonexistent', t);
    const r = a.handle('{"cmd":"drain","service":"www","server":"s1b"}');
    assert.equal(r['ok'], false);
    assert.match(String(r['error']), /state file \/dev\/null\/front\.state\.json: cannot be written \(E[A-Z]+\).*StateDirectory=sluice/);
    assert.equal(t.config.services[0]!.servers[1]!.state, 'active');
    assert.equal(t.store.status().stateFileErrors, 1);
  });

  it('sluice ctl builds requests and refuses bad usage', () => {
    assert.deepEqual(buildRequest(['drain', 'www', 's1b']), { cmd: 'drain', service: 'www', server: 's1b' });
    assert.deepEqual(buildRequest(['weight', 'www', 's1b', '3']), { cmd: 'weight', service: 'www', server: 's1b', value: 3 });
    assert.deepEqual(buildRequest(['add', 'www', 's1d', '198.18.201.14:8080', 'weight=2', 'capacity=40']), { cmd: 'add', service: 'www', server: 's1d', address: '198.18.201.14', port: 8080, weight: 2, capacity: 40 });
    assert.deepEqual(buildRequest(['add', 'www', 's1d', '198.18.201.14']), { cmd: 'add', service: 'www', server: 's1d', address: '198.18.201.14' });
    assert.deepEqual(buildRequest(['revert', 'www', 's1d']), { cmd: 'revert', service: 'www', server: 's1d' });
    assert.deepEqual(buildRequest(['clear']), { cmd: 'clear' });
    for (const bad of [['weight', 'www', 's1b', 'x'], ['drain', 'www'], ['frob'], ['add', 'www', 's1d'], ['add', 'www', 's1d', '1.2.3.4', 'weight=x'], ['add', 'www', 's1d', '1.2.3.4', 'speed=3'], ['add', 'www', 's1d', '1.2.3.4:http'], ['clear', 'x'], ['revert', 'www']]) {
      assert.equal(typeof buildRequest(bad), 'string', bad.join(' '));
    }
  });
});
