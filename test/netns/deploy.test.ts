/**
 * deploy/install.sh into a temporary root (--root), for real: the installed
 * tree runs (the pinned Node, the addon, check-config on the installed
 * examples), a second install changes nothing and keeps an edited config,
 * `systemd-analyze verify --root` passes on every unit (and fails on a bad
 * one), --uninstall leaves only /etc/sluice, --purge leaves nothing.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, readlinkSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';

const INSTALL = fileURLToPath(new URL('../../deploy/install.sh', import.meta.url));
const UNITS = ['sluice-front.service', 'sluice-dns.service', 'sluice-agent.service', 'sluice-master.service'];
const root = mkdtempSync(join(tmpdir(), 'sluice-root-'));
after(() => {
  rmSync(root, { recursive: true, force: true });
});

function run(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(cmd, args, { encoding: 'utf8', env, cwd: tmpdir() });
}

/** Every path under the root except inside /opt/sluice/node_modules, relative, sorted. */
function tree(): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      out.push(relative(root, p));
      if (e.isDirectory() && p !== join(root, 'opt/sluice/node_modules')) walk(p);
    }
  };
  walk(root);
  return out.sort();
}

/** systemd-analyze verify inside the root; the root needs systemd's own units (targets) to resolve dependencies. */
function verify(units: readonly string[]) {
  const sys = join(root, 'usr/lib/systemd/system');
  cpSync('/lib/systemd/system', sys, { recursive: true, verbatimSymlinks: true });
  try {
    return run('systemd-analyze', ['verify', `--root=${root}`, ...units]);
  } finally {
    rmSync(join(root, 'usr/lib/systemd'), { recursive: true, force: true });
  }
}

describe('deploy/install.sh', () => {
  it('installs the runtime tree, the units, the sysusers entry and the examples', () => {
    const r = run(INSTALL, ['--root', root]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    for (const f of ['opt/sluice/bin/sluice', 'opt/sluice/src/cli/main.ts', 'opt/sluice/package.json', 'opt/sluice/native/build/Release/sluice_nfq.node', 'opt/sluice/node_modules/node/bin/node', 'opt/sluice/node_modules/zeromq/package.json', 'opt/sluice/node_modules/raw-socket/build/Release/raw.node', 'usr/lib/sysusers.d/sluice.conf', ...UNITS.map((u) => `etc/systemd/system/${u}`)]) {
      assert.ok(existsSync(join(root, f)), f);
    }
    // Not @types: protobufjs (under etcd3) depends on @types/node at run time.
    for (const dev of ['typescript', 'eslint', 'node-gyp', 'playwright-core', 'typescript-eslint']) assert.equal(existsSync(join(root, 'opt/sluice/node_modules', dev)), false, `devDependency ${dev} not installed`);
    assert.equal(readlinkSync(join(root, 'usr/local/bin/sluice')), '/opt/sluice/bin/sluice');
    for (const f of ['front.yaml', 'dns.yaml', 'agent.yaml', 'zones/example.test.zone']) assert.equal(statSync(join(root, 'etc/sluice', f)).mode & 0o777, 0o640, f);
    assert.equal(statSync(join(root, 'etc/sluice')).mode & 0o777, 0o750);
    // The installed tree runs on its own: pinned Node, addon, CLI.
    const v = run(join(root, 'opt/sluice/bin/sluice'), ['version']);
    assert.match(v.stdout, /^sluice \S+ \(node v24\./, v.stderr);
    for (const f of ['front.yaml', 'agent.yaml']) {
      const c = run(join(root, 'opt/sluice/bin/sluice'), ['check-config', join(root, 'etc/sluice', f)]);
      assert.equal(c.status, 0, c.stdout + c.stderr);
    }
    const addon = run(join(root, 'opt/sluice/node_modules/node/bin/node'), ['-e', `const a = require(${JSON.stringify(join(root, 'opt/sluice/native/build/Release/sluice_nfq.node'))}); if (typeof a.notify !== 'function') process.exit(3)`]);
    assert.equal(addon.status, 0, addon.stderr);
  });

  it('a second run (DESTDIR form) changes nothing and never replaces an existing configuration', () => {
    const before = tree();
    appendFileSync(join(root, 'etc/sluice/front.yaml'), '# edited by the operator\n');
    const r = run(INSTALL, [], { ...process.env, DESTDIR: root });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /kept the existing .*front\.yaml/);
    assert.deepEqual(tree(), before);
    assert.match(readFileSync(join(root, 'etc/sluice/front.yaml'), 'utf8'), /# edited by the operator\n$/);
  });

  it('systemd-analyze verify passes on every installed unit, and catches a bad one', () => {
    const ok = verify(UNITS);
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stderr.trim(), '', 'no warning either');
    const bad = join(root, 'etc/systemd/system/sluice-bad.service');
    writeFileSync(bad, readFileSync(join(root, 'etc/systemd/system/sluice-dns.service'), 'utf8').replace('WatchdogSec=', 'WatchdogSecs=').replace('/opt/sluice/bin/sluice dns', '/opt/sluice/bin/absent dns'));
    try {
      const r = verify(['sluice-bad.service']);
      assert.match(r.stderr, /Unknown key 'WatchdogSecs'/);
      assert.match(r.stderr, /absent is not executable/);
      assert.notEqual(r.status, 0);
    } finally {
      rmSync(bad);
    }
  });

  it('--uninstall removes all but /etc/sluice; --uninstall --purge leaves the root empty', () => {
    let r = run(INSTALL, ['--root', root, '--uninstall']);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(tree(), ['etc', 'etc/sluice', 'etc/sluice/agent.yaml', 'etc/sluice/dns.yaml', 'etc/sluice/front.yaml', 'etc/sluice/master.yaml', 'etc/sluice/zones', 'etc/sluice/zones/example.test.zone']);
    r = run(INSTALL, ['--root', root, '--uninstall', '--purge']);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(tree(), []);
    r = run(INSTALL, ['--root', root, '--uninstall']);
    assert.equal(r.status, 0, 'uninstalling twice is fine');
  });
});
