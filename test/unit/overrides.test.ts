import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema, type FrontConfig } from '../../src/front/config.ts';
import { OverrideStore } from '../../src/front/override-store.ts';
import { mergeOverrides, recordChange, type Override } from '../../src/front/overrides.ts';
import { readStateFile, StateFileError, stateFilePath, writeStateFile } from '../../src/front/state-file.ts';
import { RateWindow } from '../../src/front/rates.ts';
import { componentLogger } from '../../src/log/logger.ts';

/** A service `www` with servers a, b, c (method and per-server extras from the arguments). */
function cfg(servers = '      - { name: a, address: 198.18.201.11 }\n      - { name: b, address: 198.18.201.12, weight: 2 }\n      - { name: c, address: 198.18.201.13 }', method = 'byrequests'): Readonly<FrontConfig> {
  return parseConfig(frontConfigSchema, `cluster: c1\nuplinkAddress: 198.18.101.2\nservices:\n  - name: www\n    vip: 198.19.1.1\n    port: 80\n    method: ${method}\n    servers:\n${servers}\n`, 'test');
}

const servers = (c: Readonly<FrontConfig>): string[] => c.services[0]!.servers.map((s) => `${s.name}:${s.state}:${String(s.weight)}${s.capacity !== undefined ? `:${String(s.capacity)}` : ''}`);

describe('ctl overrides over the file (merge, stale)', () => {
  const drainB: Override = { kind: 'set', service: 'www', server: 'b', values: { state: 'drain' }, file: { state: 'active' } };
  const weightB: Override = { kind: 'set', service: 'www', server: 'b', values: { weight: 7, state: 'drain' }, file: { weight: 2, state: 'active' } };
  const addD: Override = { kind: 'add', service: 'www', server: 'd', address: '198.18.201.14', weight: 3 };
  const removeC: Override = { kind: 'remove', service: 'www', server: 'c' };
  const cases: { name: string; file: Readonly<FrontConfig>; list: Override[]; servers: string[]; kept: number; stale: RegExp[] }[] = [
    { name: 'no overrides: the file', file: cfg(), list: [], servers: ['a:active:1', 'b:active:2', 'c:active:1'], kept: 0, stale: [] },
    { name: 'drain, add, remove apply', file: cfg(), list: [drainB, addD, removeC], servers: ['a:active:1', 'b:drain:2', 'd:active:3'], kept: 3, stale: [] },
    {
      name: 'the file changed one field since: that field is stale, the other holds',
      file: cfg('      - { name: a, address: 198.18.201.11 }\n      - { name: b, address: 198.18.201.12, weight: 4 }'),
      list: [weightB],
      servers: ['a:active:1', 'b:drain:4'],
      kept: 1,
      stale: [/b set weight: the file changed weight from 2 to 4 since the override \(7\)/],
    },
    {
      name: 'the file changed every field: the whole set is dropped',
      file: cfg('      - { name: a, address: 198.18.201.11 }\n      - { name: b, address: 198.18.201.12, state: drain }'),
      list: [drainB],
      servers: ['a:active:1', 'b:drain:1'],
      kept: 0,
      stale: [/b set state: the file changed state from active to drain/],
    },
    { name: 'set on a server the file dropped', file: cfg('      - { name: a, address: 198.18.201.11 }'), list: [drainB], servers: ['a:active:1'], kept: 0, stale: [/b set: server b is no longer in the file/] },
    { name: 'remove of a server the file dropped', file: cfg('      - { name: a, address: 198.18.201.11 }'), list: [removeC], servers: ['a:active:1'], kept: 0, stale: [/c remove: server c is no longer in the file/] },
    {
      name: 'an add the file now has by name: the file wins',
      file: cfg('      - { name: a, address: 198.18.201.11 }\n      - { name: d, address: 198.18.201.99 }'),
      list: [addD],
      servers: ['a:active:1', 'd:active:1'],
      kept: 0,
      stale: [/d add: the file now has a server named d/],
    },
    {
      name: 'a service the file dropped',
      file: parseConfig(frontConfigSchema, 'cluster: c1\nuplinkAddress: 198.18.101.2\nservices:\n  - { name: api, vip: 198.19.1.2, port: 80, method: byrequests, servers: [{ name: a, address: 198.18.201.11 }] }\n', 't'),
      list: [addD],
      servers: ['a:active:1'],
      kept: 0,
      stale: [/service www is no longer in the file/],
    },
    {
      name: 'an add the merged file makes invalid (the capacity method needs a capacity): stale with the schema message, the others hold',
      file: cfg('      - { name: a, address: 198.18.201.11, capacity: 10 }\n      - { name: b, address: 198.18.201.12, capacity: 10, weight: 2 }', 'capacity'),
      list: [drainB, addD],
      servers: ['a:active:1:10', 'b:drain:2:10'],
      kept: 1,
      stale: [/d add: the configuration would be invalid with it: services\[0\]\.servers\[2\]\.capacity: the capacity method needs a capacity/],
    },
    {
      name: 'removing the file\'s last server is invalid: stale, the server stays',
      file: cfg('      - { name: c, address: 198.18.201.13 }'),
      list: [removeC],
      servers: ['c:active:1'],
      kept: 0,
      stale: [/c remove: the configuration would be invalid with it: services\[0\]\.servers: a service needs at least one server/],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const m = mergeOverrides(c.file, c.list);
      assert.deepEqual(servers(m.config), c.servers);
      assert.equal(m.kept.length, c.kept);
      assert.equal(m.stale.length, c.stale.length, JSON.stringify(m.stale));
      m.stale.forEach((s, i) => {
        assert.match(`${s.server} ${s.kind}${s.field ? ` ${s.field}` : ''}: ${s.reason}`, c.stale[i]!);
      });
      assert.ok(Object.isFrozen(m.config.services[0]));
    });
  }
});

describe('recording ctl changes', () => {
  const file = cfg();
  const cases: { name: string; changes: Parameters<typeof recordChange>[3][]; list: string | RegExp }[] = [
    { name: 'drain then enable: nothing left', changes: [{ cmd: 'set', service: 'www', server: 'b', fields: { state: 'drain' } }, { cmd: 'set', service: 'www', server: 'b', fields: { state: 'active' } }], list: '[]' },
    { name: 'weight to the file\'s value: no override', changes: [{ cmd: 'set', service: 'www', server: 'b', fields: { weight: 2 } }], list: '[]' },
    {
      name: 'two fields keep the file values they were made against',
      changes: [{ cmd: 'set', service: 'www', server: 'b', fields: { weight: 5 } }, { cmd: 'set', service: 'www', server: 'b', fields: { weight: 6, state: 'drain' } }],
      list: '[{"kind":"set","service":"www","server":"b","values":{"weight":6,"state":"drain"},"file":{"weight":2,"state":"active"}}]',
    },
    { name: 'a change on an added server updates the add', changes: [{ cmd: 'add', service: 'www', server: 'd', address: '198.18.201.14' }, { cmd: 'set', service: 'www', server: 'd', fields: { state: 'drain', weight: 4 } }], list: '[{"kind":"add","service":"www","server":"d","address":"198.18.201.14","weight":4,"state":"drain"}]' },
    { name: 'add over a file server removed with ctl: refused, revert is the way', changes: [{ cmd: 'remove', service: 'www', server: 'c' }, { cmd: 'add', service: 'www', server: 'c', address: '198.18.201.20' }], list: /sluice ctl revert www c/ },
    { name: 'a change on a removed server is refused', changes: [{ cmd: 'remove', service: 'www', server: 'c' }, { cmd: 'set', service: 'www', server: 'c', fields: { state: 'drain' } }], list: /has no server named "c"/ },
    { name: 'revert without an override is refused', changes: [{ cmd: 'revert', service: 'www', server: 'a' }], list: /no ctl override for www\/a/ },
    { name: 'clear drops everything', changes: [{ cmd: 'remove', service: 'www', server: 'c' }, { cmd: 'clear' }], list: '[]' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      let list: readonly Override[] = [];
      let out: readonly Override[] | string = [];
      for (const ch of c.changes) {
        const running = mergeOverrides(file, list).config;
        out = recordChange(file, running, list, ch);
        if (typeof out === 'string') break;
        list = out;
      }
      const shown = typeof out === 'string' ? out : JSON.stringify(JSON.parse(JSON.stringify(out)));
      if (typeof c.list === 'string') assert.equal(shown, c.list);
      else assert.match(shown, c.list);
    });
  }
});

describe('the state file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-state-'));
  const log = componentLogger('test-state').child({}, { level: 'silent' });

  it('where it is: stateFile, else $STATE_DIRECTORY, else beside the config', () => {
    assert.equal(stateFilePath('/etc/sluice/front.yaml', '/srv/x.json', { STATE_DIRECTORY: '/var/lib/sluice' }), '/srv/x.json');
    assert.equal(stateFilePath('/etc/sluice/front.yaml', undefined, { STATE_DIRECTORY: '/var/lib/sluice:/var/lib/other' }), '/var/lib/sluice/front.state.json');
    assert.equal(stateFilePath('/etc/sluice/front.yaml', undefined, {}), '/etc/sluice/front.yaml.state.json');
  });

  it('round trip; a missing file is no overrides', () => {
    const f = join(dir, 'rt.json');
    assert.deepEqual(readStateFile(f), []);
    const list: Override[] = [{ kind: 'set', service: 'www', server: 'b', values: { capacity: null }, file: { capacity: 10 } }, { kind: 'remove', service: 'www', server: 'c' }];
    writeStateFile(f, list);
    assert.deepEqual(readStateFile(f), list);
    assert.equal(existsSync(`${f}.${String(process.pid)}.tmp`), false);
  });

  const corrupt: [string, string, RegExp][] = [
    ['empty', '', /is not JSON/],
    ['truncated', '{"version":1,"overrides":[{"kind":"se', /is not JSON/],
    ['another version', '{"version":2,"overrides":[]}', /not a valid state file \(version: /],
    ['unknown kind', '{"version":1,"overrides":[{"kind":"explode","service":"www","server":"b"}]}', /not a valid state file \(overrides\.0\.kind/],
    ['bad address', '{"version":1,"overrides":[{"kind":"add","service":"www","server":"d","address":"1.2.3"}]}', /overrides\.0\.address/],
    ['negative weight', '{"version":1,"overrides":[{"kind":"set","service":"www","server":"b","values":{"weight":-1},"file":{}}]}', /overrides\.0\.values\.weight/],
  ];
  for (const [name, text, msg] of corrupt) {
    it(`corrupt (${name}): refused naming the file and the fix; the config loads without overrides; the next change sets it aside`, () => {
      const f = join(dir, `corrupt-${name.replace(/ /g, '-')}.json`);
      writeFileSync(f, text);
      assert.throws(() => readStateFile(f), (e: unknown) => e instanceof StateFileError && e.message.includes(f) && msg.test(e.message) && /remove the file/.test(e.message));
      const store = new OverrideStore(f, log);
      const file = cfg();
      assert.equal(store.load(file), file, 'the file alone');
      assert.equal(store.status().stateFileErrors, 1);
      assert.match(store.status().error ?? '', msg);
      const next = store.change({ cmd: 'set', service: 'www', server: 'a', fields: { state: 'drain' } }, file);
      assert.notEqual(typeof next, 'string', JSON.stringify(next));
      assert.equal(readFileSync(`${f}.corrupt`, 'utf8'), text, 'the refused file is kept aside');
      assert.equal(readStateFile(f).length, 1);
      assert.equal(store.status().error, null);
    });
  }

  it('stale overrides at load: logged, counted, shown, and dropped from the file', () => {
    const f = join(dir, 'stale.json');
    writeStateFile(f, [{ kind: 'set', service: 'www', server: 'b', values: { state: 'drain' }, file: { state: 'active' } }, { kind: 'add', service: 'www', server: 'a', address: '198.18.201.20' }]);
    const store = new OverrideStore(f, log);
    const merged = store.load(cfg());
    assert.deepEqual(servers(merged), ['a:active:1', 'b:drain:2', 'c:active:1']);
    assert.equal(store.status().staleTotal, 1);
    assert.match(store.status().lastStale[0]!.reason, /the file now has a server named a/);
    assert.deepEqual(readStateFile(f).map((o) => o.kind), ['set']);
  });
});

describe('connections/s over a sliding window', () => {
  const cases: { name: string; samples: [number, number][]; rate: number }[] = [
    { name: 'one sample: 0', samples: [[0, 100]], rate: 0 },
    { name: 'steady 5/s', samples: [[0, 0], [1000, 5], [2000, 10], [3000, 15]], rate: 5 },
    { name: 'only the last 3 samples count (window of 3)', samples: [[0, 0], [1000, 100], [2000, 102], [3000, 104]], rate: 2 },
    { name: 'uneven ticks: by the clock', samples: [[0, 0], [500, 10], [2000, 20]], rate: 10 },
    { name: 'a counter that restarted (server removed and added back): the window restarts', samples: [[0, 50], [1000, 60], [2000, 3], [3000, 9]], rate: 6 },
    { name: 'idle: 0', samples: [[0, 7], [1000, 7], [2000, 7]], rate: 0 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const w = new RateWindow(3);
      for (const [t, v] of c.samples) {
        w.begin();
        w.sample('k', v, t);
      }
      assert.equal(w.rate('k'), c.rate);
    });
  }
  it('a key not sampled in a tick is forgotten', () => {
    const w = new RateWindow(3);
    w.begin();
    w.sample('a', 1, 0);
    w.sample('b', 1, 0);
    w.begin();
    w.sample('a', 2, 1000);
    w.begin();
    assert.equal(w.size, 1);
    assert.equal(w.rate('b'), 0);
  });
});
