/**
 * The agent's inputs: access-log parsing and following (both combined
 * formats, rotation by rename, copytruncate, truncation, partial and garbage
 * lines) and load figures from crafted /proc and cgroup files.
 */
import assert from 'node:assert/strict';
import { readFileSync, appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, truncateSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AccessLogFollower, formatRegex, parseLogLine } from '../../src/agent/access-log.ts';
import { agentConfigSchema } from '../../src/agent/config.ts';
import { countEstablished, LoadSampler, readCgroupCpu, readMemoryUsed } from '../../src/agent/load.ts';
import { ConfigError, parseConfig, validateConfig } from '../../src/config/load.ts';

const NGINX = '198.18.11.2 - - [21/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 31 "-" "curl/7.88.1"';
const NGINX_ESC = '198.18.11.3 - alice [21/Nov/2026:10:00:00 +0000] "GET /\\x22quoted\\x22 HTTP/1.1" 404 0 "http://r/" "Mozilla/5.0 (X11)"';
const APACHE = '198.18.12.2 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"';
const APACHE_ESC = '198.18.12.3 - - [10/Oct/2000:13:55:36 -0700] "GET /a\\"b HTTP/1.0" 304 - "-" "agent \\"x\\""';

describe('access-log line parsing', () => {
  const cases: [string, string, string, string | undefined][] = [
    ['nginx combined', 'nginx-combined', NGINX, '198.18.11.2'],
    ['nginx with \\x22 escapes and a user', 'nginx-combined', NGINX_ESC, '198.18.11.3'],
    ['apache combined (httpd docs example)', 'apache-combined', APACHE, '198.18.12.2'],
    ['apache with \\" escapes and - bytes', 'apache-combined', APACHE_ESC, '198.18.12.3'],
    ['hostname instead of address', 'apache-combined', APACHE.replace('198.18.12.2', 'host.example'), 'bad-address'],
    ['bad address', 'nginx-combined', NGINX.replace('198.18.11.2', '198.18.11.256'), 'bad-address'],
    ['truncated line', 'nginx-combined', NGINX.slice(0, 40), 'garbage'],
    ['no status', 'nginx-combined', NGINX.replace(' 200 ', ' ok '), 'garbage'],
    ['binary garbage', 'nginx-combined', '\u0000\u0001\u00ff', 'garbage'],
    ['custom format', '^(?<client>\\S+) \\|', '198.18.13.9 | x', '198.18.13.9'],
  ];
  for (const [name, format, line, want] of cases) {
    it(name, () => {
      const r = parseLogLine(line, formatRegex(format));
      assert.equal(r.result === 'ok' ? r.client : r.result, want);
    });
  }
  it('refuses a custom format without a client group, or that is no regular expression', () => {
    assert.throws(() => formatRegex('^(\\S+)'), { code: 'ERR_SLUICE_ACCESS_LOG_FORMAT', message: /named group/ });
    assert.throws(() => formatRegex('^(?<client>\\S+'), { code: 'ERR_SLUICE_ACCESS_LOG_FORMAT', message: /must be a regular expression/ });
  });
});

describe('access-log client addresses of both families', () => {
  // [client field as logged, canonical client or the rejection]
  const cases: [string, string][] = [
    ['2001:db8::1', '2001:db8::1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['::1', '::1'],
    ['::', '::'],
    ['1::', '1::'],
    ['2001:db8:0:1:0:0:0:1', '2001:db8:0:1::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2:3:4:5:6'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
    ['64:ff9b::198.18.11.5', '64:ff9b::c612:b05'],
    ['::ffff:198.18.11.2', '198.18.11.2'],
    ['::FFFF:198.18.11.2', '198.18.11.2'],
    ['::ffff:c612:b02', '198.18.11.2'],
    ['[::ffff:198.18.11.2]', '198.18.11.2'],
    ['198.18.11.2', '198.18.11.2'],
    ['fe80::1%eth0', 'zone-id'],
    ['[fe80::1%25eth0]', 'zone-id'],
    ['2001:db8::1::2', 'bad-address'],
    ['2001:db8:::1', 'bad-address'],
    [':2001:db8::1', 'bad-address'],
    ['2001:db8::1:', 'bad-address'],
    ['2001:db8:1:2:3:4:5', 'bad-address'],
    ['2001:db8:1:2:3:4:5:6:7', 'bad-address'],
    ['1:2:3:4:5:6:7:8::', 'bad-address'],
    ['2001:db8::12345', 'bad-address'],
    ['2001:db8::g', 'bad-address'],
    ['::ffff:198.18.11.256', 'bad-address'],
    ['::198.18.11.2:1', 'bad-address'],
    ['1:2:3:4:5:6:7:198.18.11.2', 'bad-address'],
    ['[198.18.11.2]', 'bad-address'],
    ['[2001:db8::1', 'bad-address'],
    ['2001:db8::1]', 'bad-address'],
    ['[]', 'bad-address'],
    [':', 'bad-address'],
    [':::', 'bad-address'],
    ['0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:1', 'bad-address'],
  ];
  for (const [field, want] of cases) {
    it(`${field} -> ${want}`, () => {
      const r = parseLogLine(NGINX.replace('198.18.11.2', field), formatRegex('nginx-combined'));
      assert.equal(r.result === 'ok' ? r.client : r.result, want);
      if (r.result === 'ok') assert.equal(r.family, want.includes(':') ? 6 : 4);
    });
  }
});

function counts(f: AccessLogFollower): Record<string, number> {
  return Object.fromEntries(f.take());
}

describe('access-log following', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-log-'));
  const line = (ip: string) => `${NGINX.replace('198.18.11.2', ip)}\n`;

  it('starts at the end, follows appends, and holds partial lines until complete', () => {
    const p = join(dir, 'a.log');
    writeFileSync(p, line('198.18.11.9')); // history: not counted
    const f = new AccessLogFollower(p, { format: 'nginx-combined' });
    appendFileSync(p, line('198.18.11.2') + line('198.18.11.2'));
    const half = line('198.18.11.3');
    appendFileSync(p, half.slice(0, 30));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.2': 2 });
    appendFileSync(p, half.slice(30));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.3': 1 });
    assert.equal(f.counters.partial, 0);
    f.close();
  });

  it('counts garbage and over-long lines and goes on', () => {
    const p = join(dir, 'b.log');
    writeFileSync(p, '');
    const f = new AccessLogFollower(p, { format: 'nginx-combined', maxLineBytes: 400 });
    appendFileSync(p, 'garbage line\n' + 'x'.repeat(1000) + '\n' + line('198.18.11.4') + '\u0000\u0000\n');
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.4': 1 });
    assert.equal(f.counters.garbage, 2);
    assert.equal(f.counters.partial, 1);
    f.close();
  });

  it('counts IPv6 clients under one canonical key, IPv4-mapped ones as IPv4, and bad addresses by reason', () => {
    const p = join(dir, 'b6.log');
    writeFileSync(p, '');
    const f = new AccessLogFollower(p, { format: 'nginx-combined' });
    const lines = ['2001:db8::1', '[2001:DB8::0:1]', '2001:0db8::0001', '::ffff:198.18.11.4', '198.18.11.4', 'fe80::1%eth0', '2001:db8::1::2', 'host.example'];
    appendFileSync(p, lines.map(line).join(''));
    f.poll();
    assert.deepEqual(counts(f), { '2001:db8::1': 3, '198.18.11.4': 2 });
    assert.deepEqual(
      { lines: f.counters.lines, requests: f.counters.requests, requestsIpv6: f.counters.requestsIpv6, zoneId: f.counters.zoneId, badAddress: f.counters.badAddress, garbage: f.counters.garbage },
      { lines: 8, requests: 5, requestsIpv6: 3, zoneId: 1, badAddress: 2, garbage: 0 },
    );
    f.close();
  });

  it('survives rotation by rename: reads the old file to its end, then the new one from 0', () => {
    const p = join(dir, 'c.log');
    writeFileSync(p, '');
    const f = new AccessLogFollower(p, { format: 'nginx-combined' });
    appendFileSync(p, line('198.18.11.5'));
    f.poll();
    renameSync(p, `${p}.1`);
    appendFileSync(`${p}.1`, line('198.18.11.5')); // nginx writes on until it reopens
    writeFileSync(p, line('198.18.11.6'));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.5': 2, '198.18.11.6': 1 });
    assert.equal(f.counters.rotations, 1);
    // and a rotation where the new file appears only later
    renameSync(p, `${p}.2`);
    f.poll();
    writeFileSync(p, line('198.18.11.7'));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.7': 1 });
    f.close();
  });

  it('survives copytruncate and plain truncation', () => {
    const p = join(dir, 'd.log');
    writeFileSync(p, '');
    const f = new AccessLogFollower(p, { format: 'apache-combined' });
    appendFileSync(p, line('198.18.11.8').repeat(3));
    f.poll();
    copyFileSync(p, `${p}.1`);
    truncateSync(p, 0);
    appendFileSync(p, line('198.18.11.9'));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.8': 3, '198.18.11.9': 1 });
    assert.equal(f.counters.truncations, 1);
    f.close();
  });

  it('waits for a missing file and reads it whole when it appears', () => {
    const p = join(dir, 'e.log');
    rmSync(p, { force: true });
    const f = new AccessLogFollower(p, { format: 'nginx-combined' });
    f.poll();
    writeFileSync(p, line('198.18.11.10'));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.10': 1 });
    f.close();
  });

  it('bounds the client table and counts what it could not hold', () => {
    const p = join(dir, 'f.log');
    writeFileSync(p, '');
    const f = new AccessLogFollower(p, { format: 'nginx-combined', maxClients: 2 });
    appendFileSync(p, line('198.18.11.1') + line('198.18.11.2') + line('198.18.11.3') + line('198.18.11.1'));
    f.poll();
    assert.deepEqual(counts(f), { '198.18.11.1': 2, '198.18.11.2': 1 });
    assert.equal(f.counters.tableFull, 1);
    f.close();
  });
});

describe('load figures from /proc and cgroup files', () => {
  const root = mkdtempSync(join(tmpdir(), 'sluice-proc-'));
  mkdirSync(join(root, 'proc/net'), { recursive: true });
  const stat = (user: number, idle: number) => { writeFileSync(join(root, 'proc/stat'), `cpu  ${user} 0 0 ${idle} 0 0 0 0 0 0\ncpu0 1 1 1 1\n`); };
  writeFileSync(join(root, 'proc/loadavg'), '0.50 0.40 0.30 1/100 1234\n');
  writeFileSync(join(root, 'proc/meminfo'), 'MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n');
  const hdr = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';
  writeFileSync(
    join(root, 'proc/net/tcp'),
    hdr +
      '   0: 0B12C6C6:0050 020BC6C6:D431 01 00000000:00000000 00:00000000 00000000    33        0 1 1\n' + // :80 established
      '   1: 0B12C6C6:0050 020BC6C6:D432 01 00000000:00000000 00:00000000 00000000    33        0 1 1\n' +
      '   2: 0B12C6C6:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000    0        0 1 1\n' + // listen
      '   3: 0B12C6C6:01BB 020BC6C6:D433 01 00000000:00000000 00:00000000 00000000    33        0 1 1\n' + // :443
      '   4: 0B12C6C6:0050 020BC6C6:D434 06 00000000:00000000 00:00000000 00000000    0        0 1 1\n', // time-wait
  );
  writeFileSync(join(root, 'proc/net/tcp6'), hdr + '   0: 00000000000000000000000001000000:0050 00000000000000000000000001000000:D431 01 0 0 0 0 0 1 1\n');

  it('counts established connections on the service ports, IPv4 and IPv6', () => {
    assert.equal(countEstablished(new Set([80]), root), 3);
    assert.equal(countEstablished(new Set([80, 443]), root), 4);
  });
  it('memory used is 1 - available/total', () => {
    assert.equal(readMemoryUsed(root), 0.75);
  });
  it('cpu utilization is the busy share since the previous sample', () => {
    stat(100, 900);
    const s = new LoadSampler({ source: 'cpu', ports: [80], maxConnections: 10, root });
    stat(175, 925); // +75 busy of +100
    const f = s.sample();
    assert.equal(f.utilization, 0.75);
    assert.deepEqual([f.load1, f.load5, f.load15, f.connections], [0.5, 0.4, 0.3, 3]);
  });
  it('connections utilization is established / maxConnections', () => {
    stat(1, 1);
    assert.equal(new LoadSampler({ source: 'connections', ports: [80], maxConnections: 12, root }).sample().utilization, 0.25);
  });
  it('cgroup v1 and v2: usage over elapsed time and quota', () => {
    mkdirSync(join(root, 'sys/fs/cgroup/cpuacct/web'), { recursive: true });
    mkdirSync(join(root, 'sys/fs/cgroup/cpu/web'), { recursive: true });
    writeFileSync(join(root, 'sys/fs/cgroup/cpuacct/web/cpuacct.usage'), '1000000000\n');
    writeFileSync(join(root, 'sys/fs/cgroup/cpu/web/cpu.cfs_quota_us'), '50000\n');
    writeFileSync(join(root, 'sys/fs/cgroup/cpu/web/cpu.cfs_period_us'), '100000\n');
    assert.deepEqual(readCgroupCpu('web', root), { usageNs: 1e9, cpus: 0.5 });
    const s = new LoadSampler({ source: 'cgroup', ports: [80], maxConnections: 1, cgroup: 'web', root }, 0);
    writeFileSync(join(root, 'sys/fs/cgroup/cpuacct/web/cpuacct.usage'), '1250000000\n'); // +0.25 CPU-s
    assert.equal(s.sample(1000).utilization, 0.5); // 0.25 s of a 0.5-CPU budget over 1 s
    mkdirSync(join(root, 'sys/fs/cgroup/v2web'), { recursive: true });
    writeFileSync(join(root, 'sys/fs/cgroup/v2web/cpu.stat'), 'usage_usec 3000000\nuser_usec 2000000\n');
    writeFileSync(join(root, 'sys/fs/cgroup/v2web/cpu.max'), 'max 100000\n');
    assert.equal(readCgroupCpu('v2web', root).usageNs, 3e9);
    assert.equal(readCgroupCpu('v2web', root).cpus, Infinity);
  });
});

describe('agent configuration', () => {
  const ok = { name: 's1a', address: '198.18.201.11', front: { endpoint: 'tcp://198.18.201.1:7101', publicKey: 'x.pub' }, control: { keyFile: 'a.key' } };
  it('applies defaults', () => {
    const c = validateConfig(agentConfigSchema, ok, 'agent.yaml');
    assert.deepEqual([c.loadSeconds, c.requestRateSeconds, c.utilization.source, c.accessLog.format], [5, 60, 'cpu', 'nginx-combined']);
  });
  const bad: [string, unknown, string][] = [
    ['no key file', { ...ok, control: {} }, 'control.keyFile'],
    ['no front key', { ...ok, front: { endpoint: ok.front.endpoint } }, 'front.publicKey'],
    ['bad endpoint', { ...ok, front: { ...ok.front, endpoint: 'http://x' } }, 'front.endpoint'],
    ['cgroup without path', { ...ok, utilization: { source: 'cgroup' } }, 'utilization.cgroup'],
    ['bad format', { ...ok, accessLog: { format: '^(\\S+)' } }, 'accessLog.format'],
    ['unknown key', { ...ok, lodSeconds: 5 }, 'lodSeconds'],
  ];
  for (const [name, cfg, path] of bad) {
    it(`refuses ${name}, naming ${path || 'the top level'}`, () => {
      assert.throws(
        () => validateConfig(agentConfigSchema, cfg, 'agent.yaml'),
        (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === path),
      );
    });
  }
  it('the deploy example is valid', () => {
    const c = parseConfig(agentConfigSchema, readFileSync(new URL('../../deploy/examples/agent-s1a.yaml', import.meta.url), 'utf8'), 'agent-s1a.yaml');
    assert.equal(c.name, 's1a');
  });
  it('plaintext needs no keys', () => {
    validateConfig(agentConfigSchema, { ...ok, front: { endpoint: ok.front.endpoint }, control: { plaintext: true } }, 'agent.yaml');
  });
});
