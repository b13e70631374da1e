/**
 * The record types zones use (PTR, CAA, NAPTR, SSHFP, TLSA, DS, RFC 3597
 * generic types), $INCLUDE, zone errors at start and reload, and the CH
 * identity names, as dig sees them. `sluice dns` and a real NSD serve the
 * same zones in one namespace; every answer dig prints from Sluice is
 * checked against the text BIND's presentation gives (a table) and against
 * NSD's answer to the same question (NSD reads the same zone text, so its
 * wire form is a reference encoding of each type).
 *
 * The namespace <prefix>-zt has both servers on its loopback (198.18.252.2
 * Sluice, .3 NSD); nothing leaves it. Teardown (after(), and process
 * 'exit'/SIGINT/SIGTERM hooks) kills everything in it, deletes it and the
 * temp dir.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { DnsProcess } from '../helpers/dns.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const SLUICE = '198.18.252.2';
const NSD = '198.18.252.3';
const HTTP_PORT = 9153;

const ZONE = `$ORIGIN zt.test.
$TTL 3600
@        IN SOA ns1 hostmaster 2026112601 1h 15m 1w 300
         IN NS  ns1
ns1      IN A   198.18.252.53
host     IN A   198.18.252.80
         IN SSHFP 1 1 dd465c09cfa51fb45020cc83316fff21b9ec74ac
         IN SSHFP 4 2 ( 6f2d6ad7e7b1bd17a8a0c53b3aef3c4b
                        1cb2e47e5cd6c1e0ac3e7f0cb0b1d6ad )
caa      IN CAA 0 issue "letsencrypt.org"
         IN CAA 128 iodef "mailto:security@zt.test"
_443._tcp.www IN TLSA 3 1 1 0c72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6
unknown  CLASS1 TYPE65534 \\# 4 0a000001
empty    IN TYPE65280 \\# 0
gen-a    TYPE1 \\# 4 c6120050
sip      IN NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.zt.test.
enum     IN NAPTR 100 50 "u" "E2U+sip" "!^.*$!sip:info@zt.test!" .
sub      IN NS  ns1.sub
         IN DS  60485 5 1 2bb183af5f22588179a53b0a98631fad1a292118
ns1.sub  IN A   198.18.252.153
$INCLUDE hosts.inc hosts.zt.test.
after    IN A   198.18.252.90
`;

/** $INCLUDE'd with origin hosts.zt.test.; "after" above is back in zt.test. */
const HOSTS = `web      IN A   198.18.252.81
@        IN TXT "included"
`;

const REVERSE = `$ORIGIN 252.18.198.in-addr.arpa.
$TTL 3600
@        IN SOA ns1.zt.test. hostmaster.zt.test. 7 1h 15m 1w 300
         IN NS  ns1.zt.test.
80       IN PTR host.zt.test.
81       IN PTR web.hosts.zt.test.
`;

/** A zone with one error per line from line 5 on (and nothing else wrong). */
const BROKEN = `$ORIGIN zt.test.
$TTL 3600
@        IN SOA ns1 hostmaster 2026112602 1h 15m 1w 300
         IN NS  ns1
ns1      IN A   198.18.252.300
caa      IN CAA 0 issue
tlsa     IN TLSA 3 1 1 abc
unknown  TYPE65534 \\# 4 0a00
bad      IN BOGUS 1
ch       CH A 198.18.252.1
mx       IN MX ten mail
`;
const BROKEN_LINES = [5, 6, 7, 8, 9, 10, 11];

/** [question name, type, the answer section as dig prints it from BIND's presentation]. */
const ANSWERS: readonly (readonly [string, string, readonly string[]])[] = [
  ['80.252.18.198.in-addr.arpa', 'PTR', ['80.252.18.198.in-addr.arpa. 3600 PTR host.zt.test.']],
  ['81.252.18.198.in-addr.arpa', 'PTR', ['81.252.18.198.in-addr.arpa. 3600 PTR web.hosts.zt.test.']],
  ['caa.zt.test', 'CAA', ['caa.zt.test. 3600 CAA 0 issue "letsencrypt.org"', 'caa.zt.test. 3600 CAA 128 iodef "mailto:security@zt.test"']],
  ['_443._tcp.www.zt.test', 'TLSA', ['_443._tcp.www.zt.test. 3600 TLSA 3 1 1 0C72AC70B745AC19998811B131D662C9AC69DBDBE7CB23E5B514B566 64C5D3D6']],
  ['unknown.zt.test', 'TYPE65534', ['unknown.zt.test. 3600 TYPE65534 \\# 4 0A000001']],
  ['empty.zt.test', 'TYPE65280', ['empty.zt.test. 3600 TYPE65280 \\# 0']],
  ['gen-a.zt.test', 'A', ['gen-a.zt.test. 3600 A 198.18.0.80']],
  ['sip.zt.test', 'NAPTR', ['sip.zt.test. 3600 NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.zt.test.']],
  ['enum.zt.test', 'NAPTR', ['enum.zt.test. 3600 NAPTR 100 50 "u" "E2U+sip" "!^.*$!sip:info@zt.test!" .']],
  ['host.zt.test', 'SSHFP', ['host.zt.test. 3600 SSHFP 1 1 DD465C09CFA51FB45020CC83316FFF21B9EC74AC', 'host.zt.test. 3600 SSHFP 4 2 6F2D6AD7E7B1BD17A8A0C53B3AEF3C4B1CB2E47E5CD6C1E0AC3E7F0C B0B1D6AD']],
  ['sub.zt.test', 'DS', ['sub.zt.test. 3600 DS 60485 5 1 2BB183AF5F22588179A53B0A98631FAD1A292118']],
  ['web.hosts.zt.test', 'A', ['web.hosts.zt.test. 3600 A 198.18.252.81']],
  ['hosts.zt.test', 'TXT', ['hosts.zt.test. 3600 TXT "included"']],
  ['after.zt.test', 'A', ['after.zt.test. 3600 A 198.18.252.90']],
];

interface Dig {
  status: string;
  flags: string[];
  answer: string[];
  stdout: string;
}

/** dig's status, flags and answer section (fields joined by one space). */
async function dig(ns: string, server: string, ...args: string[]): Promise<Dig> {
  const r = await nsRunAsync(ns, 'dig', ['+time=2', '+tries=2', '+norec', `@${server}`, ...args]);
  const status = /status: (\w+)/.exec(r.stdout)?.[1] ?? `no response (exit ${r.code}): ${r.stdout}${r.stderr}`;
  const flags = (/^;; flags:([^;]*);/m.exec(r.stdout)?.[1] ?? '').trim().split(/\s+/).filter((f) => f !== '');
  const answer: string[] = [];
  let inAnswer = false;
  for (const line of r.stdout.split('\n')) {
    if (line.startsWith(';; ANSWER SECTION:')) inAnswer = true;
    else if (line.trim() === '') inAnswer = false;
    else if (inAnswer) {
      // name ttl class type rdata...; the class (IN, CH) is checked by the callers that care.
      const [name = '', ttl = '', cls = '', type = '', ...data] = line.trim().split(/\s+/);
      answer.push(cls === 'IN' ? `${name} ${ttl} ${type} ${data.join(' ')}` : `${name} ${ttl} ${cls} ${type} ${data.join(' ')}`);
    }
  }
  return { status, flags, answer, stdout: r.stdout };
}

describe('sluice dns: zone record types, $INCLUDE, zone errors, identity (dig, against NSD)', () => {
  const prefix = testPrefix();
  const ns = `${prefix}-zt`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-zone-types-'));
  const teardown = (): void => {
    down(prefix);
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  const zoneFile = join(dir, 'zt.test.zone');
  const config = join(dir, 'dns.yaml');
  const configText = (zone: string): string => `name: dns-zt
listen: ["${SLUICE}:53"]
zones: [{ file: ${zone} }, { file: ${join(dir, 'reverse.zone')} }]
identity: { id: zt-test-id, version: false }
rrl: { enabled: false }
adminSocket: ${join(dir, 'dns.sock')}
http: { listen: "${SLUICE}:${HTTP_PORT}" }
`;

  before(async () => {
    run('ip', ['netns', 'add', ns]);
    ipBatch(ns, ['link set lo up', `addr add ${SLUICE}/32 dev lo`, `addr add ${NSD}/32 dev lo`]);
    writeFileSync(zoneFile, ZONE);
    writeFileSync(join(dir, 'hosts.inc'), HOSTS);
    writeFileSync(join(dir, 'reverse.zone'), REVERSE);
    writeFileSync(join(dir, 'broken.zone'), BROKEN);
    writeFileSync(config, configText(zoneFile));
    // NSD reads the same files ($INCLUDE resolved from its zonesdir, the same directory).
    writeFileSync(
      join(dir, 'nsd.conf'),
      `server:
  ip-address: ${NSD}
  username: ""
  zonesdir: "${dir}"
  pidfile: "${dir}/nsd.pid"
  database: ""
  xfrdfile: "${dir}/xfrd.state"
  xfrdir: "${dir}"
  zonelistfile: "${dir}/zone.list"
  logfile: "${dir}/nsd.log"
remote-control:
  control-enable: no
zone:
  name: zt.test
  zonefile: "${zoneFile}"
zone:
  name: 252.18.198.in-addr.arpa
  zonefile: "${join(dir, 'reverse.zone')}"
`,
    );
    daemon = new DnsProcess(ns, config, join(dir, 'dns.sock'));
    const nsd = await nsRunAsync(ns, 'nsd', ['-c', join(dir, 'nsd.conf')]);
    assert.equal(nsd.code, 0, `nsd starts: ${nsd.stderr}`);
    await daemon.ready();
    await until(async () => (await dig(ns, NSD, 'zt.test', 'SOA')).status === 'NOERROR', 'nsd answers', 10_000).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; nsd.log: ${readFileSync(join(dir, 'nsd.log'), 'utf8')}`);
    });
  });

  after(async () => {
    try {
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  for (const [name, type, want] of ANSWERS) {
    it(`${type} ${name}: dig shows what BIND's presentation gives, the same as NSD's answer`, async () => {
      const s = await dig(ns, SLUICE, name, type);
      assert.equal(s.status, 'NOERROR', s.stdout);
      assert.ok(s.flags.includes('aa'), `AA set: ${s.stdout}`);
      assert.deepEqual(s.answer, want, s.stdout);
      const n = await dig(ns, NSD, name, type);
      assert.deepEqual(s.answer, n.answer, `the same answer as NSD's:\n${n.stdout}`);
    });
  }

  it('a name below the delegation is referred (the DS is answered above the cut, the rest below it is not ours)', async () => {
    const s = await dig(ns, SLUICE, 'x.sub.zt.test', 'A');
    assert.equal(s.status, 'NOERROR', s.stdout);
    assert.ok(!s.flags.includes('aa'), s.stdout);
    assert.deepEqual(s.answer, []);
  });

  it('ANY at a name with an unknown type holds it in generic form', async () => {
    const s = await dig(ns, SLUICE, 'unknown.zt.test', 'ANY');
    assert.deepEqual(s.answer, ['unknown.zt.test. 3600 TYPE65534 \\# 4 0A000001'], s.stdout);
  });

  it('CH TXT id.server and hostname.bind from the config (hostname by default: this host\'s name); version.bind/.server turned off: REFUSED', async () => {
    for (const [server, name, want] of [
      [SLUICE, 'id.server', ['id.server. 0 CH TXT "zt-test-id"']],
      [SLUICE, 'ID.Server', ['ID.Server. 0 CH TXT "zt-test-id"']],
      [SLUICE, 'hostname.bind', [`hostname.bind. 0 CH TXT "${hostname()}"`]],
    ] as const) {
      const s = await dig(ns, server, 'CH', 'TXT', name);
      assert.equal(s.status, 'NOERROR', s.stdout);
      assert.deepEqual(s.answer, want, s.stdout);
      // As NSD answers: AA clear, TTL 0.
      assert.ok(!s.flags.includes('aa'), s.stdout);
    }
    for (const name of ['version.bind', 'version.server', 'other.bind']) {
      const s = await dig(ns, SLUICE, 'CH', 'TXT', name);
      assert.equal(s.status, 'REFUSED', s.stdout);
      assert.deepEqual(s.answer, []);
    }
    // A type other than TXT (or ANY) is REFUSED, as NSD does.
    assert.equal((await dig(ns, SLUICE, 'CH', 'A', 'id.server')).status, 'REFUSED');
    assert.equal((await dig(ns, NSD, 'CH', 'A', 'id.server')).status, 'REFUSED');
    // NSD answers version.bind by default, with its version; ours is turned off here.
    assert.match((await dig(ns, NSD, 'CH', 'TXT', 'version.bind')).answer.join(), /CH TXT "NSD /);
  });

  it('identity queries are counted in /metrics by name and result', async () => {
    const r = await nsRunAsync(ns, 'curl', ['-s', '-m', '5', `http://${SLUICE}:${HTTP_PORT}/metrics`]);
    const line = (name: string, result: string): number => Number(new RegExp(`^sluice_dns_identity_queries_total\\{name="${name.replace('.', '\\.')}",result="${result}"\\} (\\d+)$`, 'm').exec(r.stdout)?.[1] ?? 'NaN');
    // The test before: id.server answered twice, refused once (type A); hostname.bind once; version.* refused once each; other.bind once.
    assert.equal(line('id.server', 'answered'), 2, r.stdout);
    assert.equal(line('id.server', 'refused'), 1, r.stdout);
    assert.equal(line('hostname.bind', 'answered'), 1, r.stdout);
    assert.equal(line('version.bind', 'refused'), 1, r.stdout);
    assert.equal(line('version.server', 'refused'), 1, r.stdout);
    assert.equal(line('other', 'refused'), 1, r.stdout);
  });

  it('a reload with a broken zone is refused naming every error with its line; the running zone stays', async () => {
    const d = daemon;
    assert.ok(d);
    writeFileSync(config, configText(join(dir, 'broken.zone')));
    const from = d.lines.length;
    d.signal('SIGHUP');
    await until(() => d.lines.slice(from).some((l) => l['msg'] === 'reload refused; the running configuration and zones stay'), 'reload refused', 10_000);
    const refused = JSON.stringify(d.lines.slice(from).find((l) => l['msg'] === 'reload refused; the running configuration and zones stay'));
    for (const line of BROKEN_LINES) assert.ok(refused.includes(`broken.zone:${line}:`), `line ${line} named: ${refused}`);
    const s = await dig(ns, SLUICE, 'caa.zt.test', 'CAA');
    assert.equal(s.answer.length, 2, `the running zone still answers: ${s.stdout}`);
    writeFileSync(config, configText(zoneFile));
  });

  it('a start with a broken zone is refused naming every error with its line', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, configText(join(dir, 'broken.zone')).replace(`${SLUICE}:53`, `${SLUICE}:5353`).replace('dns.sock', 'bad.sock').replace(`:${HTTP_PORT}`, `:${HTTP_PORT + 1}`));
    const r = await nsRunAsync(ns, BIN, ['dns', '--config', bad]);
    assert.notEqual(r.code, 0, 'the daemon exits');
    for (const line of BROKEN_LINES) assert.ok(r.stderr.includes(`broken.zone:${line}:`), `line ${line} named: ${r.stderr}`);
  });
});
