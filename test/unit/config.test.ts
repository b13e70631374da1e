import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ConfigError, deepFreeze, keepRestartKeys, parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';

const EXAMPLE = new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url);
const exampleText = readFileSync(EXAMPLE, 'utf8');

const minimal = `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: 198.18.201.11 }
`;

describe('front config', () => {
  it('the shipped example is valid', () => {
    const cfg = parseConfig(frontConfigSchema, exampleText, 'example');
    assert.equal(cfg.services[0]?.servers.length, 3);
    assert.equal(cfg.overflow[0]?.vip, '198.19.2.1');
  });

  it('the example ha section, uncommented, is valid (and renders)', () => {
    const block = exampleText.split('# --- ha example begin\n')[1]!.split('# --- ha example end')[0]!;
    const uncommented = block
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => l.slice(2))
      .join('\n');
    const cfg = parseConfig(frontConfigSchema, `${exampleText}\n${uncommented}\n`, 'example+ha');
    assert.equal(cfg.node, 'fr1a');
    const ha = cfg.ha;
    assert.ok(ha);
    assert.equal(ha.nodes.length, 2);
    assert.equal(ha.advertSeconds, 0.3);
  });

  it('the example checkpoints section, uncommented, is valid', () => {
    const block = exampleText.split('# --- checkpoints example begin\n')[1]!.split('# --- checkpoints example end')[0]!;
    const uncommented = block
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => l.slice(2))
      .join('\n');
    const cfg = parseConfig(frontConfigSchema, `${exampleText}\n${uncommented}\n`, 'example+checkpoints');
    assert.deepEqual(cfg.checkpoints.map((c) => c.name), ['per-source', 'conc-per-24', 'heavy-to-c2', 'blocked']);
    assert.equal(cfg.checkpoints[0]?.limit, 50);
    assert.equal(cfg.shaping.maxHeld, 16384);
  });

  it('the example throttle section, uncommented, is valid: a gatekeeper rule and its masters', () => {
    const block = exampleText.split('# --- throttle example begin\n')[1]!.split('# --- throttle example end')[0]!;
    const uncommented = block
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => l.slice(2))
      .join('\n');
    const cfg = parseConfig(frontConfigSchema, `${exampleText}\n${uncommented}\n`, 'example+throttle');
    assert.equal(cfg.checkpoints[0]?.kind, 'gatekeeper');
    assert.equal(cfg.checkpoints[0].domain, 'www');
    assert.equal(cfg.throttle?.masters[0]?.accounting, 'tcp://198.18.0.10:7201');
    assert.equal(cfg.throttle.resyncRetryMs, 1000);
  });

  it('the example admission section, uncommented, is valid: limits, members, an etcd-elected coordinator', () => {
    const block = exampleText.split('# --- admission example begin\n')[1]!.split('# --- admission example end')[0]!;
    const uncommented = block
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => l.slice(2))
      .join('\n');
    const cfg = parseConfig(frontConfigSchema, `${exampleText}\n${uncommented}\n`, 'example+admission');
    assert.equal(cfg.checkpoints[0]?.kind, 'admission');
    assert.equal(cfg.admission?.services[0]?.operations[1]?.clusterLimit, 800);
    assert.equal(cfg.admission.cluster?.isolationSeconds, 6);
    // Without the checkpoint the limits would apply to nothing: refused, naming the key.
    assert.throws(
      () => parseConfig(frontConfigSchema, `${exampleText}\n${uncommented.replace(/^checkpoints:\n.*\n/m, '')}\n`, 'x'),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === 'admission'),
    );
  });

  it('the example control section, uncommented, is valid and names a missing key file', () => {
    const block = exampleText.split('# --- control example begin\n')[1]!.split('# --- control example end')[0]!;
    const uncommented = block
      .split('\n')
      .filter((l) => l.startsWith('# ') && !l.startsWith('#   # '))
      .map((l) => l.slice(2))
      .join('\n');
    const cfg = parseConfig(frontConfigSchema, `${exampleText}\n${uncommented}\n`, 'example+control');
    assert.equal(cfg.control?.agents?.listen, 'tcp://198.18.201.1:7101');
    assert.equal(cfg.control.estimate.targetUtilization, 0.8);
    assert.throws(
      () => parseConfig(frontConfigSchema, `${exampleText}\n${uncommented.replace(/^ {2}keyFile:.*$/m, '')}\n`, 'x'),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === 'control.keyFile'),
    );
  });

  it('fills defaults and freezes the result', () => {
    const cfg = parseConfig(frontConfigSchema, minimal, 'm');
    assert.equal(cfg.queue, 0);
    assert.equal(cfg.failMode, 'bypass');
    assert.equal(cfg.connections.max, 1_000_000);
    assert.equal(cfg.connections.recycleSeconds, 120);
    assert.equal(cfg.connections.eventBufferMiB, 64);
    const svc = cfg.services[0];
    assert.ok(svc);
    const srv = svc.servers.at(0);
    assert.ok(srv);
    assert.equal(svc.protocol, 'tcp');
    assert.equal(srv.weight, 1);
    assert.equal(srv.state, 'active');
    assert.ok(Object.isFrozen(cfg) && Object.isFrozen(srv));
    assert.throws(() => {
      (cfg as { queue: number }).queue = 3;
    }, TypeError);
  });

  const bad: { name: string; text: string; path: string; message: RegExp }[] = [
    { name: 'YAML syntax', text: 'cluster: [c1', path: 'line 1', message: /./ },
    { name: 'duplicate YAML key', text: `${minimal}\ncluster: c2\n`, path: 'line', message: /unique/i },
    { name: 'unknown key', text: `${minimal}\nqeueu: 3\n`, path: '', message: /qeueu/ },
    { name: 'missing uplinkAddress', text: minimal.replace('uplinkAddress: 198.18.101.2\n', ''), path: 'uplinkAddress', message: /IPv4/ },
    { name: 'bad VIP', text: minimal.replace('198.19.1.1', '198.19.1'), path: 'services[0].vip', message: /IPv4 address like/ },
    { name: 'port out of range', text: minimal.replace('port: 80', 'port: 70000'), path: 'services[0].port', message: /1\.\.65535/ },
    { name: 'unknown method', text: minimal.replace('byrequests', 'random'), path: 'services[0].method', message: /capacity, byrequests, leastconn, maglev/ },
    { name: 'capacity method without capacities', text: minimal.replace('byrequests', 'capacity'), path: 'services[0].servers[0].capacity', message: /needs a capacity/ },
    { name: 'no servers', text: minimal.replace(/servers:\n.*\n/, 'servers: []\n'), path: 'services[0].servers', message: /at least one server/ },
    {
      name: 'duplicate server name',
      text: minimal.replace('- { name: s1a, address: 198.18.201.11 }', '- { name: s1a, address: 198.18.201.11 }\n      - { name: s1a, address: 198.18.201.12 }'),
      path: 'services[0].servers[1].name',
      message: /used twice/,
    },
    { name: 'bad server state', text: minimal.replace('198.18.201.11 }', '198.18.201.11, state: sleeping }'), path: 'services[0].servers[0].state', message: /active, drain, disabled/ },
    { name: 'sctp service', text: minimal.replace('port: 80', 'port: 80\n    protocol: sctp'), path: 'services[0].protocol', message: /tcp or udp/ },
    { name: 'bad failMode', text: `${minimal}\nfailMode: open\n`, path: 'failMode', message: /bypass or drop/ },
    { name: 'relative admin socket', text: `${minimal}\nadminSocket: front.sock\n`, path: 'adminSocket', message: /absolute/ },
    { name: 'event buffer of 0 MiB', text: `${minimal}\nconnections: { eventBufferMiB: 0 }\n`, path: 'connections.eventBufferMiB', message: /1\.\.1024/ },
    { name: 'event buffer not a whole number', text: `${minimal}\nconnections: { eventBufferMiB: 0.5 }\n`, path: 'connections.eventBufferMiB', message: /whole number of MiB, 1\.\.1024/ },
    { name: 'event buffer not a number', text: `${minimal}\nconnections: { eventBufferMiB: lots }\n`, path: 'connections.eventBufferMiB', message: /whole number of MiB, 1\.\.1024/ },
    { name: 'event buffer over 1 GiB', text: `${minimal}\nconnections: { eventBufferMiB: 2048 }\n`, path: 'connections.eventBufferMiB', message: /1\.\.1024/ },
  ];
  for (const c of bad) {
    it(`refuses ${c.name}, naming the key`, () => {
      try {
        parseConfig(frontConfigSchema, c.text, 'front.yaml');
        assert.fail('accepted');
      } catch (err) {
        assert.ok(err instanceof ConfigError, String(err));
        assert.equal(err.code, 'ERR_SLUICE_CONFIG');
        const hit = err.problems.find((p) => p.path.startsWith(c.path) && c.message.test(p.message + p.path));
        assert.ok(hit, `no problem at ${c.path} matching ${String(c.message)} in ${JSON.stringify(err.problems)}`);
        assert.match(err.message, /^front\.yaml: invalid configuration:/);
      }
    });
  }
});

describe('keepRestartKeys', () => {
  const running = deepFreeze({ queue: 0, sock: '/a', services: ['www'] });
  const cases: [string, typeof running, { applied: typeof running; changed: string[] }][] = [
    ['nothing bound at start changed: the file as is', { queue: 0, sock: '/a', services: ['www', 'api'] }, { applied: { queue: 0, sock: '/a', services: ['www', 'api'] }, changed: [] }],
    ['a bound key changed: kept and named, the rest applied', { queue: 7, sock: '/a', services: ['api'] }, { applied: { queue: 0, sock: '/a', services: ['api'] }, changed: ['queue'] }],
    ['two changed: both kept, named in key order', { queue: 7, sock: '/b', services: ['www'] }, { applied: { queue: 0, sock: '/a', services: ['www'] }, changed: ['queue', 'sock'] }],
  ];
  for (const [name, next, want] of cases) {
    it(name, () => {
      const got = keepRestartKeys(running, deepFreeze(next), ['queue', 'sock']);
      assert.deepEqual(got, want);
      assert.ok(Object.isFrozen(got.applied));
    });
  }
});
