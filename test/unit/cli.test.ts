import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));

function sluice(...args: string[]) {
  return spawnSync(BIN, args, { encoding: 'utf8' });
}

describe('sluice CLI', () => {
  it('runs on the pinned Node 24 whatever node is on PATH', () => {
    const r = sluice('version');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^sluice \d+\.\d+\.\d+ \(node v24\./);
  });
  it('lists its commands with help, exit 0', () => {
    const r = sluice('help');
    assert.equal(r.status, 0);
    assert.match(r.stdout, /usage: sluice <command>/);
    assert.match(r.stdout, /version/);
  });
  it('unknown command: usage on stderr, exit 2', () => {
    const r = sluice('frobnicate');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown command "frobnicate"/);
  });
  it('no command: usage, exit 2', () => {
    assert.equal(sluice().status, 2);
  });
});
