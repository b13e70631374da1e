/**
 * `sluice dns` as the primary of a real NSD secondary (issue 25, acceptance
 * 4): NSD transfers the static zone (TSIG-signed with hmac-sha256: NSD
 * checks our signatures), answers for it (a steered name with its fallback
 * answer), picks up a change after the NOTIFY a reload sends (the SOA
 * refresh is an hour: only the NOTIFY explains it), and a transfer from
 * an address that is not allowed is REFUSED, one signed with a wrong key
 * fails, one signed with the right key is allowed from anywhere (dig
 * verifies our TSIG too).
 *
 * Namespaces: <prefix>-pri (sluice dns on 198.18.253.1, and 198.18.254.1
 * towards the other client), <prefix>-sec (NSD on 198.18.253.3), <prefix>-oth
 * (dig from 198.18.254.4); veth pairs pri-sec and pri-oth. Always deleted,
 * with the temp dir.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { DnsProcess } from '../helpers/dns.ts';
import { nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const PRIMARY = '198.18.253.1';
const SECONDARY = '198.18.253.3';
const PRIMARY_OTHER = '198.18.254.1';
const OTHER = '198.18.254.4';
const KEY = { name: 'xfr.example.test', secret: Buffer.alloc(32, 7).toString('base64') };
const WRONG = Buffer.alloc(32, 9).toString('base64');

const zone = (serial: number, extra: string): string => `$ORIGIN example.test.
$TTL 3600
@        IN SOA ns1 hostmaster ${serial} 3600 600 86400 300
         IN NS  ns1
         IN MX  10 mail
ns1      IN A   ${PRIMARY}
mail     IN A   198.18.253.25
web      IN A   198.18.253.80
         IN AAAA 2001:2::80
info     IN TXT "static zone"
; steered: a secondary gets the fallback answer (every cluster's VIP)
www   60 IN A   198.18.253.10
${extra}
`;

describe('sluice dns as a primary: AXFR to NSD, NOTIFY, access control', () => {
  const prefix = testPrefix();
  const pri = `${prefix}-pri`;
  const sec = `${prefix}-sec`;
  const oth = `${prefix}-oth`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dns-axfr-'));
  let nsd: ChildProcess | undefined;
  const teardown = (): void => {
    nsd?.kill('SIGKILL');
    down(prefix);
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  const d = (): DnsProcess => {
    assert.ok(daemon, 'the daemon started');
    return daemon;
  };
  const zoneFile = join(dir, 'example.test.zone');
  let nsdLog = '';
  const transfer = async (): Promise<Record<string, number>> => (await d().status())['transfer'] as Record<string, number>;
  const dig = async (ns: string, ...args: string[]): Promise<string> => {
    const r = await nsRunAsync(ns, 'dig', ['+time=2', '+tries=1', ...args]);
    return r.stdout + r.stderr;
  };
  /** The answer section of dig +short from the secondary, sorted. */
  const secondary = async (name: string, type: string): Promise<string[]> =>
    (await dig(sec, `@${SECONDARY}`, '+short', '+norec', name, type))
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith(';'))
      .sort();

  before(async () => {
    for (const n of [pri, sec, oth]) run('ip', ['netns', 'add', n]);
    run('ip', ['link', 'add', `${prefix}a`, 'netns', pri, 'type', 'veth', 'peer', 'name', `${prefix}b`, 'netns', sec]);
    run('ip', ['link', 'add', `${prefix}c`, 'netns', pri, 'type', 'veth', 'peer', 'name', `${prefix}d`, 'netns', oth]);
    ipBatch(pri, ['link set lo up', `addr add ${PRIMARY}/24 dev ${prefix}a`, `link set ${prefix}a up`, `addr add ${PRIMARY_OTHER}/24 dev ${prefix}c`, `link set ${prefix}c up`]);
    ipBatch(sec, ['link set lo up', `addr add ${SECONDARY}/24 dev ${prefix}b`, `link set ${prefix}b up`]);
    ipBatch(oth, ['link set lo up', `addr add ${OTHER}/24 dev ${prefix}d`, `link set ${prefix}d up`, `route add 198.18.253.0/24 via ${PRIMARY_OTHER}`]);
    writeFileSync(zoneFile, zone(1, ''));
    const config = join(dir, 'dns.yaml');
    writeFileSync(
      config,
      `name: dns-primary
listen: ["${PRIMARY}:53"]
zones: [{ file: ${zoneFile} }]
clusters: [{ name: c1, vips: [198.19.1.1] }, { name: c2, vips: [198.19.2.1, "2001:2:19::1"] }]
steering: { names: [{ name: www.example.test, ttl: 5 }] }
transfer:
  allow: [${SECONDARY}/32]
  keys: [{ name: ${KEY.name}, secret: "${KEY.secret}" }]
  notify: ["${SECONDARY}"]
  notifyRetrySeconds: 1
rrl: { enabled: false }
adminSocket: ${join(dir, 'dns.sock')}
`,
    );
    daemon = new DnsProcess(pri, config, join(dir, 'dns.sock'));
    await daemon.ready();
    const nsdConf = join(dir, 'nsd.conf');
    writeFileSync(
      nsdConf,
      `server:
  ip-address: ${SECONDARY}
  port: 53
  do-ip6: no
  username: ""
  chroot: ""
  zonesdir: "${dir}"
  database: ""
  pidfile: "${join(dir, 'nsd.pid')}"
  xfrdfile: "${join(dir, 'xfrd.state')}"
  xfrdir: "${dir}"
  zonelistfile: "${join(dir, 'zone.list')}"
  verbosity: 2
  server-count: 1
remote-control:
  control-enable: no
key:
  name: "${KEY.name}"
  algorithm: hmac-sha256
  secret: "${KEY.secret}"
zone:
  name: example.test
  zonefile: "${join(dir, 'secondary.zone')}"
  request-xfr: ${PRIMARY} ${KEY.name}
  allow-notify: ${PRIMARY} NOKEY
`,
    );
    run('nsd-checkconf', [nsdConf]);
    nsd = spawn('ip', ['netns', 'exec', sec, 'nsd', '-d', '-c', nsdConf], { stdio: ['ignore', 'pipe', 'pipe'] });
    // Kept in memory (bounded): NSD may still write while the temp dir is being deleted.
    const keep = (b: Buffer): void => {
      nsdLog = (nsdLog + b.toString()).slice(-20_000);
    };
    nsd.stdout?.on('data', keep);
    nsd.stderr?.on('data', keep);
  });

  after(async () => {
    try {
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  const nsdOutput = (): string => nsdLog || '(no NSD output)';

  it('NSD transfers the zone (TSIG-signed) and answers for it; the steered name carries its fallback', async () => {
    await until(async () => (await secondary('web.example.test', 'A')).length > 0, 'NSD serves example.test', 20_000, 500).catch((err: unknown) => {
      throw new Error(`${String(err)}\nNSD:\n${nsdOutput()}`);
    });
    assert.deepEqual(await secondary('web.example.test', 'A'), ['198.18.253.80']);
    assert.deepEqual(await secondary('web.example.test', 'AAAA'), ['2001:2::80']);
    assert.deepEqual(await secondary('example.test', 'MX'), ['10 mail.example.test.']);
    assert.deepEqual(await secondary('info.example.test', 'TXT'), ['"static zone"']);
    assert.deepEqual(await secondary('www.example.test', 'A'), ['198.19.1.1', '198.19.2.1'], 'fallback mode all: every cluster\'s IPv4 VIP');
    assert.deepEqual(await secondary('www.example.test', 'AAAA'), ['2001:2:19::1']);
    const aa = await dig(sec, `@${SECONDARY}`, '+norec', 'web.example.test', 'A');
    assert.match(aa, /flags: qr aa/, `NSD answers with authority:\n${aa}`);
    const t = await transfer();
    assert.ok((t['served'] ?? 0) >= 1, `a transfer served: ${JSON.stringify(t)}`);
    assert.equal(t['tsigFailed'], 0, 'NSD\'s signed request verified');
  });

  it('a reload with a new serial sends NOTIFY; NSD transfers and answers the change', async () => {
    writeFileSync(zoneFile, zone(2, 'new      IN A   198.18.253.99'));
    d().signal('SIGHUP');
    await until(async () => (await secondary('new.example.test', 'A')).length > 0, 'NSD serves the new record', 20_000, 500).catch((err: unknown) => {
      throw new Error(`${String(err)}\nNSD:\n${nsdOutput()}`);
    });
    assert.deepEqual(await secondary('new.example.test', 'A'), ['198.18.253.99']);
    assert.match(await dig(sec, `@${SECONDARY}`, '+short', 'example.test', 'SOA'), / 2 3600 600 86400 300/);
    const t = await transfer();
    assert.ok((t['notifyAnswered'] ?? 0) >= 1, `the NOTIFY was answered: ${JSON.stringify(t)}`);
    assert.ok((t['served'] ?? 0) >= 2, `a second transfer: ${JSON.stringify(t)}`);
  });

  it('from an address not allowed: REFUSED; a wrong key fails; the right key is allowed from anywhere', async () => {
    const before = await transfer();
    const refused = await dig(oth, `@${PRIMARY}`, 'example.test', 'AXFR');
    assert.match(refused, /Transfer failed/, refused);
    const plain = await dig(oth, `@${PRIMARY}`, '+tcp', 'example.test', 'A');
    assert.match(plain, /status: NOERROR/, `the other client reaches the server: ${plain}`);
    const wrong = await dig(oth, '-y', `hmac-sha256:${KEY.name}:${WRONG}`, `@${PRIMARY}`, 'example.test', 'AXFR');
    assert.doesNotMatch(wrong, /IN\s+SOA/, `no zone data for a wrong key:\n${wrong}`);
    const signed = await dig(oth, '-y', `hmac-sha256:${KEY.name}:${KEY.secret}`, `@${PRIMARY}`, 'example.test', 'AXFR');
    assert.doesNotMatch(signed, /failure|Transfer failed/i, signed);
    const lines = signed.split('\n').filter((l) => /^\S+\s+\d+\s+IN\s+/.test(l));
    assert.equal(lines.filter((l) => /\sSOA\s/.test(l)).length, 2, `SOA first and last:\n${signed}`);
    assert.ok(lines.some((l) => /^new\.example\.test\.\s+3600\s+IN\s+A\s+198\.18\.253\.99$/.test(l)), signed);
    assert.ok(lines.some((l) => /^www\.example\.test\.\s+5\s+IN\s+A\s+198\.19\.1\.1$/.test(l)), `steered name with its fallback, steered TTL:\n${signed}`);
    assert.ok(!lines.some((l) => l.includes('198.18.253.10')), 'not the file\'s static A at the steered name');
    const t = await transfer();
    assert.equal((t['refused'] ?? 0) - (before['refused'] ?? 0), 1, JSON.stringify(t));
    assert.equal((t['tsigFailed'] ?? 0) - (before['tsigFailed'] ?? 0), 1, JSON.stringify(t));
  });
});
