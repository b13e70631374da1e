/**
 * `sluice check-config`: the deployed examples pass; good and bad
 * configurations of each role are judged as the daemon would judge them,
 * every problem named by key path; the role is told from the keys; exit
 * codes 0 valid, 1 invalid, 2 usage or unreadable.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { checkConfigFile, detectRole, ownKeys } from '../../src/cli/check-config.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const EXAMPLES = fileURLToPath(new URL('../../deploy/examples/', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'sluice-check-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

function check(...args: string[]) {
  return spawnSync(BIN, ['check-config', ...args], { encoding: 'utf8' });
}

const ZONE = join(EXAMPLES, 'example.test.zone');
/** The dns example with its zone file taken from deploy/examples (installed under /etc/sluice/zones). */
const dnsExample = (): string => readFileSync(join(EXAMPLES, 'dns.yaml'), 'utf8').replace('/etc/sluice/zones/example.test.zone', ZONE);

describe('sluice check-config', () => {
  it('the deployed examples pass, role told from their keys', () => {
    for (const [f, role] of [['front-cluster1.yaml', 'front'], ['agent-s1a.yaml', 'agent']] as const) {
      const r = check(join(EXAMPLES, f));
      assert.equal(r.status, 0, r.stdout + r.stderr);
      assert.equal(r.stdout.trim(), `${join(EXAMPLES, f)}: ok (${role})`);
    }
    const dns = file('dns.yaml', dnsExample());
    const r = check(dns);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(r.stdout.trim(), `${dns}: ok (dns)`);
  });

  it('dns: the zone files are loaded; a missing or broken zone, or a steered name outside every zone, is a problem of its key', () => {
    const missing = file('dns-missing.yaml', dnsExample().replace(ZONE, join(dir, 'absent.zone')));
    let r = check(missing, '--role', 'dns');
    assert.equal(r.status, 1);
    assert.match(r.stdout, /invalid \(dns\)\n {2}zones\[0\]\.file: \S*absent\.zone: cannot read the file/);
    const broken = file('broken.zone', '$ORIGIN example.test.\n@ 3600 IN SOA ns1 hostmaster 1 2 3 4\nwww IN A 300.1.1.1\n');
    r = check(file('dns-broken.yaml', dnsExample().replace(ZONE, broken)));
    assert.equal(r.status, 1);
    assert.match(r.stdout, /zones\[0\]\.file: /);
    r = check(file('dns-outside.yaml', dnsExample().replace('name: www.example.test', 'name: www.elsewhere.test')));
    assert.equal(r.status, 1);
    assert.match(r.stdout, /steering\.names\[0\]\.name: "www\.elsewhere\.test" is in none of the zones served/);
  });

  it('front: every problem with its key path and the fix', () => {
    const bad = readFileSync(join(EXAMPLES, 'front-cluster1.yaml'), 'utf8')
      .replace('uplinkAddress: 198.18.101.2', 'uplinkAddres: 198.18.101.2')
      .replace('{ name: s1b, address: 198.18.201.12, capacity: 200 }', '{ name: s1b, address: 198.18.201.300, capacty: 200 }')
      .replace('method: capacity', 'method: fastest');
    const r = check(file('front-bad.yaml', bad));
    assert.equal(r.status, 1);
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0] ?? '', /front-bad\.yaml: invalid \(front\)$/);
    const problems = lines.slice(1).join('\n');
    assert.match(problems, /^ {2}uplinkAddress: required key is missing/m);
    assert.match(problems, /^ {2}uplinkAddres: unknown key; did you mean "uplinkAddress"\?/m);
    assert.match(problems, /^ {2}services\[0\]\.servers\[1\]\.address: expected an IPv4 address/m);
    assert.match(problems, /^ {2}services\[0\]\.servers\[1\]\.capacty: unknown key; did you mean "capacity"\?/m);
    assert.match(problems, /^ {2}services\[0\]\.method: method is one of/m);
  });

  it('agent: a bad value and a rule across keys', () => {
    const bad = readFileSync(join(EXAMPLES, 'agent-s1a.yaml'), 'utf8').replace('source: cpu', 'source: cgroup').replace('name: s1a', 'name: "s 1 a"');
    const r = check(file('agent-bad.yaml', bad));
    assert.equal(r.status, 1);
    assert.match(r.stdout, /invalid \(agent\)/);
    assert.match(r.stdout, /^ {2}name: expected 1-64 characters/m);
    assert.match(r.stdout, /^ {2}utilization\.cgroup: required when source is cgroup/m);
  });

  it('--role overrides detection: a front file checked as dns fails on the dns schema', () => {
    const r = check(join(EXAMPLES, 'front-cluster1.yaml'), '--role', 'dns');
    assert.equal(r.status, 1);
    assert.match(r.stdout, /invalid \(dns\)/);
    assert.match(r.stdout, /^ {2}zones: required key is missing/m);
  });

  it('YAML that does not parse is invalid with its line', () => {
    const r = check(file('broken.yaml', 'cluster: c1\nservices: [\n'));
    assert.equal(r.status, 1);
    assert.match(r.stdout, /invalid \(role unknown\)\n {2}line \d+ column \d+: /);
  });

  it('ambiguous or unknown role, unreadable file, bad arguments: exit 2', () => {
    let r = check(file('mixed.yaml', 'cluster: c1\nzones: []\n'));
    assert.equal(r.status, 2);
    assert.match(r.stderr, /keys of front and dns\); give --role front\|dns\|agent/);
    r = check(file('nothing.yaml', 'name: x\n'));
    assert.equal(r.status, 2);
    assert.match(r.stderr, /none of the keys/);
    r = check(join(dir, 'absent.yaml'));
    assert.equal(r.status, 2);
    assert.match(r.stderr, /cannot read the file \(ENOENT\)/);
    assert.equal(check().status, 2);
    assert.equal(check('a.yaml', 'b.yaml').status, 2);
    assert.equal(check(join(EXAMPLES, 'dns.yaml'), '--role', 'proxy').status, 2);
  });
});

describe('role detection', () => {
  it("each role's own keys are the ones no other schema has", () => {
    assert.ok(ownKeys('front').includes('services') && !ownKeys('front').includes('adminSocket'));
    assert.ok(ownKeys('dns').includes('zones') && !ownKeys('dns').includes('name'));
    assert.ok(ownKeys('agent').includes('front') && !ownKeys('agent').includes('control'));
    assert.deepEqual(detectRole({ services: [], control: {} }), { role: 'front', by: ['services'] });
    assert.deepEqual(detectRole({ name: 'x', control: {} }), { role: undefined, candidates: [] });
    assert.deepEqual(detectRole(['front']), { role: undefined, candidates: [] });
  });

  it('checkConfigFile reports the same as the command', () => {
    assert.deepEqual(checkConfigFile(join(EXAMPLES, 'agent-s1a.yaml'), undefined), { kind: 'ok', role: 'agent' });
  });
});
