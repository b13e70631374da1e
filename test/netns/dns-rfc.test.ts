/**
 * `sluice dns` as real clients see it: the daemon in a namespace of its
 * own, queried with dig (and, for what dig cannot send, a small dgram
 * client, test/fixtures/dns-udp-client.ts), one behaviour per test:
 * authoritative answers of every type, negative answers (RFC 2308),
 * REFUSED outside the zones, referrals, FORMERR/NOTIMP, responses ignored,
 * EDNS0 (RFC 6891) and BADVERS, truncation and TCP (RFC 7766), ECS (RFC
 * 7871), IPv6, and response rate limiting (a second daemon with a low rate).
 *
 * The namespace <prefix>-dns holds a veth pair (both ends inside; nothing
 * leaves it) with 198.18.250.2, .3 and 2001:2::2; the daemons, dig and the
 * client all run in it. Teardown (after(), and process 'exit'/SIGINT/SIGTERM
 * hooks for a crash or an interrupted run) kills whatever runs in the
 * namespace, deletes it and the temp dir.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { down } from '../../scripts/testbed/testbed.ts';
import { ipBatch, run } from '../../scripts/testbed/sh.ts';
import { NsProcess, nsRunAsync, onAnyExit, testPrefix } from '../helpers/testbed.ts';
import { DnsProcess, testDnsWorkers } from '../helpers/dns.ts';

const UDP_CLIENT = fileURLToPath(new URL('../fixtures/dns-udp-client.ts', import.meta.url));
const TCP_FLOOD = fileURLToPath(new URL('../fixtures/dns-tcp-flood.ts', import.meta.url));
const NODE = process.execPath;
const V4 = '198.18.250.2';
const V4_RRL = '198.18.250.3';
const V6 = '2001:2::2';

// --- the zones ---------------------------------------------------------------------

/** 8 distinct TXT records of 200 octets: ~1.7 kB, over 1232 and 512. */
const BIG_TXT = Array.from({ length: 8 }, (_, i) => `big IN TXT "${String.fromCharCode(0x61 + i).repeat(200)}"`).join('\n');

const EXAMPLE_ZONE = `$ORIGIN example.test.
$TTL 3600
@        IN SOA  ns1 hostmaster 2024010101 1h 15m 1w 300
         IN NS   ns1
         IN NS   ns2
         IN MX   10 mail
         IN A    198.18.250.80
ns1      IN A    198.18.250.53
ns2      IN A    198.18.250.54
         IN AAAA 2001:2::54
mail     300 IN A 198.18.250.25
         300 IN AAAA 2001:2::25
web      IN A    198.18.250.81
         IN AAAA 2001:2::81
alias    IN CNAME web
alias2   IN CNAME alias.example.test.
info     IN TXT  "hello world" "second string"
_sip._udp IN SRV 10 20 5060 web
${BIG_TXT}
; steered by the server; this static record is the fallback
www      60 IN A 198.18.250.10
; a delegation with in-bailiwick glue
sub      IN NS   ns1.sub
         IN NS   ns.elsewhere.invalid.
ns1.sub  IN A    198.18.250.153
         IN AAAA 2001:2::153
`;

/** A second zone whose SOA TTL (60) is below its minimum (600). */
const OTHER_ZONE = `$ORIGIN other.test.
$TTL 3600
@        60 IN SOA ns1.example.test. hostmaster 7 1h 15m 1w 600
         IN NS ns1.example.test.
host     IN A  198.18.250.90
`;

function dnsConfig(dir: string, o: { listen: string[]; socket: string; rrl: string }): string {
  return `name: dns-rfc
listen: [${o.listen.map((l) => JSON.stringify(l)).join(', ')}]
zones: [{ file: ${join(dir, 'example.test.zone')} }, { file: ${join(dir, 'other.test.zone')} }]
clusters: [{ name: c1, vips: [198.19.1.1] }, { name: c2, vips: [198.19.2.1] }]
steering: { names: [{ name: www.example.test, ttl: 5 }] }
workers: ${testDnsWorkers()}
rrl: ${o.rrl}
adminSocket: ${o.socket}
`;
}

// --- dig ---------------------------------------------------------------------------------

interface DigRecord {
  name: string;
  ttl: number;
  type: string;
  data: string;
}

interface DigMessage {
  opcode: string;
  status: string;
  id: number;
  flags: string[];
  counts: { query: number; answer: number; authority: number; additional: number };
  edns: { version: number; flags: string[]; udp: number } | undefined;
  subnet: string | undefined;
  question: string[];
  answer: DigRecord[];
  authority: DigRecord[];
  additional: DigRecord[];
  server: string;
  size: number;
}

/** Every response in dig's output (several with +keepopen and several names). */
function parseDig(text: string): DigMessage[] {
  const out: DigMessage[] = [];
  let m: DigMessage | undefined;
  let section: 'question' | 'answer' | 'authority' | 'additional' | undefined;
  for (const line of text.split('\n')) {
    const header = /->>HEADER<<- opcode: (\w+), status: (\w+), id: (\d+)/.exec(line);
    if (header) {
      m = { opcode: header[1]!, status: header[2]!, id: Number(header[3]), flags: [], counts: { query: 0, answer: 0, authority: 0, additional: 0 }, edns: undefined, subnet: undefined, question: [], answer: [], authority: [], additional: [], server: '', size: 0 };
      out.push(m);
      section = undefined;
      continue;
    }
    if (!m) continue;
    const flags = /^;; flags:([^;]*); QUERY: (\d+), ANSWER: (\d+), AUTHORITY: (\d+), ADDITIONAL: (\d+)/.exec(line);
    const edns = /^; EDNS: version: (\d+), flags:([^;]*); udp: (\d+)/.exec(line);
    const sectionHeader = /^;; (QUESTION|ANSWER|AUTHORITY|ADDITIONAL) SECTION:/.exec(line);
    if (flags) {
      m.flags = flags[1]!.trim().split(/\s+/).filter((f) => f !== '');
      m.counts = { query: Number(flags[2]), answer: Number(flags[3]), authority: Number(flags[4]), additional: Number(flags[5]) };
    } else if (edns) m.edns = { version: Number(edns[1]), flags: edns[2]!.trim().split(/\s+/).filter((f) => f !== ''), udp: Number(edns[3]) };
    else if (line.startsWith('; CLIENT-SUBNET: ')) m.subnet = line.slice('; CLIENT-SUBNET: '.length).trim();
    else if (sectionHeader) section = sectionHeader[1]!.toLowerCase() as typeof section;
    else if (line.startsWith(';; SERVER: ')) m.server = line.slice(';; SERVER: '.length).trim();
    else if (line.startsWith(';; MSG SIZE  rcvd: ')) m.size = Number(line.slice(';; MSG SIZE  rcvd: '.length));
    else if (line.trim() === '') section = section === 'question' ? section : undefined;
    else if (section === 'question' && line.startsWith(';')) m.question.push(line.slice(1).trim().split(/\s+/).join(' '));
    else if (section !== undefined && section !== 'question' && !line.startsWith(';')) {
      const [name = '', ttl = '', , type = '', ...data] = line.trim().split(/\s+/);
      m[section].push({ name, ttl: Number(ttl), type, data: data.join(' ') });
    }
  }
  return out;
}

const digOutputs: string[] = [];

/** Runs dig in the namespace; every response it prints, RA checked clear on each. */
async function digAll(ns: string, args: readonly string[]): Promise<{ messages: DigMessage[]; stdout: string; code: number }> {
  const r = await nsRunAsync(ns, 'dig', ['+time=2', '+tries=2', ...args]);
  digOutputs.push(r.stdout);
  const messages = parseDig(r.stdout);
  for (const m of messages) {
    assert.ok(m.flags.includes('qr'), `QR set: dig ${args.join(' ')}\n${r.stdout}`);
    assert.ok(!m.flags.includes('ra'), `RA clear (authoritative only): dig ${args.join(' ')}\n${r.stdout}`);
  }
  return { messages, stdout: r.stdout + r.stderr, code: r.code };
}

/** One response expected. */
async function dig(ns: string, ...args: string[]): Promise<DigMessage> {
  const { messages, stdout } = await digAll(ns, args);
  assert.equal(messages.length, 1, `one response to dig ${args.join(' ')}:\n${stdout}`);
  return messages[0]!;
}

const rr = (m: DigMessage, s: 'answer' | 'authority' | 'additional'): string[] => m[s].map((r) => `${r.name} ${r.ttl} ${r.type} ${r.data}`);

// --- the tests ---------------------------------------------------------------------------

describe('sluice dns: RFC behaviour seen by dig', () => {
  const prefix = testPrefix();
  const ns = `${prefix}-dns`;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dns-rfc-'));
  const teardown = (): void => {
    down(prefix); // kills everything left in <prefix>-*, deletes the namespaces
    rmSync(dir, { recursive: true, force: true });
  };
  onAnyExit(teardown);
  let daemon: DnsProcess | undefined;
  const d = (): DnsProcess => {
    assert.ok(daemon, 'the daemon started');
    return daemon;
  };

  before(async () => {
    run('ip', ['netns', 'add', ns]);
    ipBatch(ns, [
      'link set lo up',
      'link add dns0 type veth peer name dns1',
      `addr add ${V4}/24 dev dns0`,
      `addr add ${V4_RRL}/24 dev dns0`,
      `addr add ${V6}/64 dev dns0 nodad`,
      'link set dns0 up',
      'link set dns1 up',
    ]);
    writeFileSync(join(dir, 'example.test.zone'), EXAMPLE_ZONE);
    writeFileSync(join(dir, 'other.test.zone'), OTHER_ZONE);
    const config = join(dir, 'dns.yaml');
    writeFileSync(config, dnsConfig(dir, { listen: [`${V4}:53`, `[${V6}]:53`], socket: join(dir, 'dns.sock'), rrl: '{ enabled: false }' }));
    daemon = new DnsProcess(ns, config, join(dir, 'dns.sock'));
    await daemon.ready();
  });

  after(async () => {
    try {
      await daemon?.stop();
    } finally {
      teardown();
    }
  });

  it('an authoritative answer has AA set (and RD copied, RA clear)', async () => {
    const m = await dig(ns, `@${V4}`, '+rec', 'web.example.test', 'A');
    assert.equal(m.status, 'NOERROR');
    assert.deepEqual(m.flags, ['qr', 'aa', 'rd']);
    assert.deepEqual(rr(m, 'answer'), ['web.example.test. 3600 A 198.18.250.81']);
  });

  it('A', async () => {
    const m = await dig(ns, `@${V4}`, 'example.test', 'A');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer'), ['example.test. 3600 A 198.18.250.80']);
  });

  it('AAAA', async () => {
    const m = await dig(ns, `@${V4}`, 'web.example.test', 'AAAA');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer'), ['web.example.test. 3600 AAAA 2001:2::81']);
  });

  it('a CNAME chain is followed inside the zone', async () => {
    const m = await dig(ns, `@${V4}`, 'alias2.example.test', 'A');
    assert.equal(m.status, 'NOERROR');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer'), ['alias2.example.test. 3600 CNAME alias.example.test.', 'alias.example.test. 3600 CNAME web.example.test.', 'web.example.test. 3600 A 198.18.250.81']);
  });

  it('MX with the exchange’s addresses in additional', async () => {
    const m = await dig(ns, `@${V4}`, 'example.test', 'MX');
    assert.deepEqual(rr(m, 'answer'), ['example.test. 3600 MX 10 mail.example.test.']);
    assert.deepEqual(rr(m, 'additional'), ['mail.example.test. 300 A 198.18.250.25', 'mail.example.test. 300 AAAA 2001:2::25']);
  });

  it('TXT with several character-strings', async () => {
    const m = await dig(ns, `@${V4}`, 'info.example.test', 'TXT');
    assert.deepEqual(rr(m, 'answer'), ['info.example.test. 3600 TXT "hello world" "second string"']);
  });

  it('SRV with the target’s addresses in additional', async () => {
    const m = await dig(ns, `@${V4}`, '_sip._udp.example.test', 'SRV');
    assert.deepEqual(rr(m, 'answer'), ['_sip._udp.example.test. 3600 SRV 10 20 5060 web.example.test.']);
    assert.deepEqual(rr(m, 'additional'), ['web.example.test. 3600 A 198.18.250.81', 'web.example.test. 3600 AAAA 2001:2::81']);
  });

  it('NS at the apex with the in-zone servers’ addresses', async () => {
    const m = await dig(ns, `@${V4}`, 'example.test', 'NS');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer'), ['example.test. 3600 NS ns1.example.test.', 'example.test. 3600 NS ns2.example.test.']);
    assert.deepEqual(rr(m, 'additional'), ['ns1.example.test. 3600 A 198.18.250.53', 'ns2.example.test. 3600 A 198.18.250.54', 'ns2.example.test. 3600 AAAA 2001:2::54']);
  });

  it('SOA', async () => {
    const m = await dig(ns, `@${V4}`, 'example.test', 'SOA');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer'), ['example.test. 3600 SOA ns1.example.test. hostmaster.example.test. 2024010101 3600 900 604800 300']);
  });

  it('the steered name: the steered TTL; with no cluster reports (no control plane) every VIP', async () => {
    const m = await dig(ns, `@${V4}`, 'www.example.test', 'A');
    assert.equal(m.status, 'NOERROR');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer').sort(), ['www.example.test. 5 A 198.19.1.1', 'www.example.test. 5 A 198.19.2.1']);
  });

  it('NXDOMAIN with the SOA in authority, TTL min(SOA TTL, minimum) (RFC 2308 §3)', async () => {
    const m = await dig(ns, `@${V4}`, 'nope.example.test', 'A');
    assert.equal(m.status, 'NXDOMAIN');
    assert.ok(m.flags.includes('aa'));
    assert.equal(m.counts.answer, 0);
    // SOA TTL 3600, minimum 300
    assert.deepEqual(rr(m, 'authority'), ['example.test. 300 SOA ns1.example.test. hostmaster.example.test. 2024010101 3600 900 604800 300']);
    // other.test: SOA TTL 60, minimum 600
    const o = await dig(ns, `@${V4}`, 'nope.other.test', 'A');
    assert.equal(o.status, 'NXDOMAIN');
    assert.deepEqual(rr(o, 'authority'), ['other.test. 60 SOA ns1.example.test. hostmaster.other.test. 7 3600 900 604800 600']);
  });

  it('NODATA: NOERROR, no answer, the SOA in authority', async () => {
    const m = await dig(ns, `@${V4}`, 'web.example.test', 'TXT');
    assert.equal(m.status, 'NOERROR');
    assert.ok(m.flags.includes('aa'));
    assert.equal(m.counts.answer, 0);
    assert.deepEqual(rr(m, 'authority'), ['example.test. 300 SOA ns1.example.test. hostmaster.example.test. 2024010101 3600 900 604800 300']);
    const o = await dig(ns, `@${V4}`, 'host.other.test', 'MX');
    assert.equal(o.status, 'NOERROR');
    assert.deepEqual(rr(o, 'authority'), ['other.test. 60 SOA ns1.example.test. hostmaster.other.test. 7 3600 900 604800 600']);
  });

  it('REFUSED for a name outside the zones; RA clear on every answer (dig +rec)', async () => {
    for (const name of ['www.outside.invalid', 'test', 'example', '']) {
      const m = await dig(ns, `@${V4}`, '+rec', name === '' ? '.' : name, 'A');
      assert.equal(m.status, 'REFUSED', name);
      assert.ok(!m.flags.includes('aa'), 'not authoritative');
      assert.equal(m.counts.answer + m.counts.authority, 0);
    }
    // RA on every response of this file so far, whatever they were.
    const all = digOutputs.flatMap((o) => parseDig(o));
    assert.ok(all.length > 10);
    for (const m of all) assert.ok(!m.flags.includes('ra'), JSON.stringify(m));
    for (const name of ['web.example.test', 'nope.example.test', 'x.sub.example.test', 'www.example.test']) {
      const m = await dig(ns, `@${V4}`, '+rec', name, 'A');
      assert.ok(m.flags.includes('rd') && !m.flags.includes('ra'), `${name}: RD copied, RA clear: ${m.flags.join(' ')}`);
    }
  });

  it('a referral below the cut: AA clear, NS in authority, glue in additional', async () => {
    for (const name of ['x.sub.example.test', 'sub.example.test', 'a.b.sub.example.test']) {
      const m = await dig(ns, `@${V4}`, '+norec', name, 'A');
      assert.equal(m.status, 'NOERROR', name);
      assert.deepEqual(m.flags, ['qr'], `${name}: AA clear`);
      assert.equal(m.counts.answer, 0);
      assert.deepEqual(rr(m, 'authority'), ['sub.example.test. 3600 NS ns1.sub.example.test.', 'sub.example.test. 3600 NS ns.elsewhere.invalid.']);
      assert.deepEqual(rr(m, 'additional'), ['ns1.sub.example.test. 3600 A 198.18.250.153', 'ns1.sub.example.test. 3600 AAAA 2001:2::153']);
    }
  });

  it('FORMERR for a malformed query (dig +header-only: qdcount 0)', async () => {
    const before = await d().status();
    const m = await dig(ns, `@${V4}`, '+header-only', 'example.test');
    assert.equal(m.status, 'FORMERR');
    assert.equal(m.counts.query, 0);
    assert.equal(m.counts.answer + m.counts.authority, 0);
    assert.deepEqual(m.edns, { version: 0, flags: [], udp: 1232 }, 'the query had an OPT: so has the refusal (RFC 6891 §6.1.1)');
    const after = await d().status();
    assert.equal(after.counters['formerr']! - before.counters['formerr']!, 1);
    assert.equal((after.rejects['qdcount'] ?? 0) - (before.rejects['qdcount'] ?? 0), 1);
  });

  it('NOTIMP for opcode NOTIFY and UPDATE, the opcode echoed', async () => {
    const n = await dig(ns, `@${V4}`, '+opcode=notify', 'example.test', 'SOA');
    assert.equal(n.status, 'NOTIMP');
    assert.equal(n.opcode, 'NOTIFY');
    assert.deepEqual(n.edns, { version: 0, flags: [], udp: 1232 }, 'OPT echoed on the refusal too');
    const u = await dig(ns, `@${V4}`, '+opcode=5', 'example.test', 'SOA');
    assert.equal(u.status, 'NOTIMP');
    assert.equal(u.opcode, 'UPDATE');
  });

  it('a query with QR set is ignored: no reply within 1 s; the next normal query is answered', async () => {
    const before = await d().status();
    const qr = await nsRunAsync(ns, NODE, [UDP_CLIENT, '--server', V4, '--name', 'web.example.test', '--flags', '0x8100', '--wait', '1000']);
    assert.equal(qr.code, 0, qr.stderr);
    assert.deepEqual(JSON.parse(qr.stdout), { sent: 1, replies: 0, full: 0, tc: 0, rcodes: {}, unknownIds: 0 });
    const normal = await nsRunAsync(ns, NODE, [UDP_CLIENT, '--server', V4, '--name', 'web.example.test', '--flags', '0x0100', '--wait', '2000']);
    assert.equal(normal.code, 0, normal.stderr);
    assert.deepEqual(JSON.parse(normal.stdout), { sent: 1, replies: 1, full: 1, tc: 0, rcodes: { '0': 1 }, unknownIds: 0 });
    const after = await d().status();
    assert.equal(after.counters['ignored']! - before.counters['ignored']!, 1);
    assert.equal((after.rejects['response'] ?? 0) - (before.rejects['response'] ?? 0), 1);
  });

  it('EDNS0: the OPT is echoed with our UDP size 1232 (dig +bufsize=4096), DO copied; none without EDNS', async () => {
    const m = await dig(ns, `@${V4}`, '+bufsize=4096', 'web.example.test', 'A');
    assert.deepEqual(m.edns, { version: 0, flags: [], udp: 1232 });
    assert.equal(m.counts.additional, 1, 'the OPT');
    const dnssec = await dig(ns, `@${V4}`, '+dnssec', 'web.example.test', 'A');
    assert.deepEqual(dnssec.edns, { version: 0, flags: ['do'], udp: 1232 });
    const plain = await dig(ns, `@${V4}`, '+noedns', 'web.example.test', 'A');
    assert.equal(plain.edns, undefined);
    assert.equal(plain.counts.additional, 0);
  });

  it('BADVERS for EDNS version 1 (dig +edns=1); dig then retries with version 0', async () => {
    const m = await dig(ns, `@${V4}`, '+edns=1', '+noednsnegotiation', 'web.example.test', 'A');
    assert.equal(m.status, 'BADVERS');
    assert.equal(m.edns?.version, 0, 'we speak version 0');
    assert.equal(m.counts.answer, 0);
    const { stdout } = await digAll(ns, [`@${V4}`, '+edns=1', 'web.example.test', 'A']);
    assert.match(stdout, /BADVERS, retrying with EDNS version 0/);
    const retried = parseDig(stdout).at(-1);
    assert.equal(retried?.status, 'NOERROR');
    assert.deepEqual(rr(retried, 'answer'), ['web.example.test. 3600 A 198.18.250.81']);
  });

  it('TC for the big TXT set over UDP, without EDNS (512) and with EDNS 1232; the whole set over TCP', async () => {
    const noedns = await dig(ns, `@${V4}`, '+ignore', '+noedns', 'big.example.test', 'TXT');
    assert.equal(noedns.status, 'NOERROR');
    assert.ok(noedns.flags.includes('tc') && noedns.flags.includes('aa'), noedns.flags.join(' '));
    assert.deepEqual(noedns.counts, { query: 1, answer: 0, authority: 0, additional: 0 });
    const edns = await dig(ns, `@${V4}`, '+ignore', '+bufsize=1232', 'big.example.test', 'TXT');
    assert.ok(edns.flags.includes('tc'));
    assert.deepEqual(edns.counts, { query: 1, answer: 0, authority: 0, additional: 1 });
    assert.equal(edns.edns?.udp, 1232);
    // A client asking for 4096 still gets at most our 1232.
    const big = await dig(ns, `@${V4}`, '+ignore', '+bufsize=4096', 'big.example.test', 'TXT');
    assert.ok(big.flags.includes('tc'));
    const tcp = await dig(ns, `@${V4}`, '+tcp', 'big.example.test', 'TXT');
    assert.ok(!tcp.flags.includes('tc'));
    assert.equal(tcp.answer.length, 8);
    assert.ok(tcp.size > 1232, `the TCP answer is ${tcp.size} octets`);
    assert.match(tcp.server, /\(TCP\)$/);
    assert.deepEqual(tcp.answer.map((r) => r.data).sort(), Array.from({ length: 8 }, (_, i) => `"${String.fromCharCode(0x61 + i).repeat(200)}"`));
    // dig on its own falls back to TCP after the TC answer.
    const { messages, stdout } = await digAll(ns, [`@${V4}`, 'big.example.test', 'TXT']);
    assert.match(stdout, /Truncated, retrying in TCP mode/);
    assert.equal(messages.at(-1)?.answer.length, 8);
  });

  it('ECS (dig +subnet): echoed with scope 0 for an unsteered name, IPv4, IPv6 and family 0', async () => {
    const m = await dig(ns, `@${V4}`, '+subnet=198.18.11.0/24', 'web.example.test', 'A');
    assert.equal(m.status, 'NOERROR');
    assert.equal(m.subnet, '198.18.11.0/24/0');
    assert.deepEqual(rr(m, 'answer'), ['web.example.test. 3600 A 198.18.250.81']);
    const v6 = await dig(ns, `@${V4}`, '+subnet=2001:2:0:1200::/56', 'web.example.test', 'A');
    assert.equal(v6.subnet, '2001:2:0:1200::/56/0');
    // Negative answers carry it too (scope 0: they do not depend on the client).
    const nx = await dig(ns, `@${V4}`, '+subnet=198.18.11.0/24', 'nope.example.test', 'A');
    assert.equal(nx.status, 'NXDOMAIN');
    assert.equal(nx.subnet, '198.18.11.0/24/0');
    // FAMILY 0 / SOURCE 0, no address: a client withholding its address (RFC 7871 §7.1.2).
    const withheld = await dig(ns, `@${V4}`, '+ednsopt=8:00000000', 'www.example.test', 'A');
    assert.equal(withheld.status, 'NOERROR');
    assert.equal(withheld.subnet, '0/0/0');
    assert.equal(withheld.answer.length, 2);
    // A malformed ECS (scope set in a query) is FORMERR.
    const bad = await dig(ns, `@${V4}`, '+ednsopt=8:00011818c6120b', 'web.example.test', 'A');
    assert.equal(bad.status, 'FORMERR');
  });

  it('IPv6 transport: UDP and TCP to [2001:2::2]:53', async () => {
    const m = await dig(ns, `@${V6}`, 'web.example.test', 'AAAA');
    assert.equal(m.status, 'NOERROR');
    assert.ok(m.flags.includes('aa'));
    assert.deepEqual(rr(m, 'answer'), ['web.example.test. 3600 AAAA 2001:2::81']);
    assert.match(m.server, /^2001:2::2#53\(2001:2::2\) \(UDP\)$/);
    const t = await dig(ns, `@${V6}`, '+tcp', 'alias2.example.test', 'A');
    assert.equal(t.answer.length, 3);
    assert.match(t.server, /\(TCP\)$/);
  });

  it('TCP: one query, and several queries on one connection (dig +tcp +keepopen)', async () => {
    const one = await dig(ns, `@${V4}`, '+tcp', 'web.example.test', 'A');
    assert.deepEqual(rr(one, 'answer'), ['web.example.test. 3600 A 198.18.250.81']);
    const before = await d().status();
    const { messages, stdout } = await digAll(ns, [`@${V4}`, '+tcp', '+keepopen', 'web.example.test', 'A', 'alias.example.test', 'A', 'example.test', 'MX']);
    assert.equal(messages.length, 3, stdout);
    assert.deepEqual(rr(messages[0]!, 'answer'), ['web.example.test. 3600 A 198.18.250.81']);
    assert.deepEqual(rr(messages[1]!, 'answer'), ['alias.example.test. 3600 CNAME web.example.test.', 'web.example.test. 3600 A 198.18.250.81']);
    assert.deepEqual(rr(messages[2]!, 'answer'), ['example.test. 3600 MX 10 mail.example.test.']);
    for (const m of messages) assert.match(m.server, /\(TCP\)$/);
    const after = await d().status();
    assert.equal(after.counters['tcpAccepted']! - before.counters['tcpAccepted']!, 1, 'one connection');
    assert.equal(after.counters['tcp']! - before.counters['tcp']!, 3, 'three queries');
  });

  it('TCP backpressure: a client that never reads stops being read; its answers are not buffered without bound', async () => {
    const before = await d().status();
    const flood = new NsProcess(ns, [TCP_FLOOD, '--server', V4, '--name', 'big.example.test', '--type', '16', '--count', '20000']);
    try {
      const w = (await flood.next(15_000)) as { written: number };
      const mid = await d().status();
      const answered = mid.counters['tcp']! - before.counters['tcp']!;
      // 20000 answers of ~1.7 KB are ~34 MB: far beyond socket buffers. The
      // server answered only what the buffers hold, then stopped reading.
      assert.ok(w.written > answered, `written ${w.written}, answered ${answered}`);
      assert.ok(answered < 20_000, `answered ${answered}`);
      flood.child.stdin.write('read\n');
      const r = (await flood.next(30_000)) as { answers: number };
      assert.equal(r.answers, w.written, 'every query answered once the client reads');
    } finally {
      await flood.stop();
    }
  });

  it('RRL (rate 20/s, slip 2): a UDP burst from one source gets drops and TC answers; TCP is never limited', async (t) => {
    const config = join(dir, 'rrl.yaml');
    const socket = join(dir, 'rrl.sock');
    writeFileSync(config, dnsConfig(dir, { listen: [`${V4_RRL}:53`], socket, rrl: '{ enabled: true, responsesPerSecond: 20, slip: 2 }' }));
    const rrl = new DnsProcess(ns, config, socket);
    t.after(() => rrl.stop());
    await rrl.ready();

    const burst = await nsRunAsync(ns, NODE, [UDP_CLIENT, '--server', V4_RRL, '--name', 'web.example.test', '--count', '300', '--batch', '10', '--wait', '1000']);
    assert.equal(burst.code, 0, burst.stderr);
    const r = JSON.parse(burst.stdout) as { sent: number; replies: number; full: number; tc: number };
    const s = await rrl.status();
    const c = s.counters;
    const detail = `client ${burst.stdout.trim()}; server ${JSON.stringify(c)}`;
    assert.equal(r.sent, 300);
    assert.ok(c['rrlDropped']! > 0, `some dropped: ${detail}`);
    assert.ok(c['rrlSlipped']! > 0, `some slipped: ${detail}`);
    assert.ok(Math.abs(c['rrlDropped']! - c['rrlSlipped']!) <= 1, `slip 2: every other limited response is sent truncated: ${detail}`);
    assert.ok(r.tc > 0 && r.tc <= c['rrlSlipped']!, `TC answers arrived, one per slip at most: ${detail}`);
    assert.ok(r.full > 0, `answers within the rate arrived: ${detail}`);
    assert.ok(r.replies + c['rrlDropped']! <= r.sent, `dropped ones got no reply: ${detail}`);
    assert.equal(c['truncated'], c['rrlSlipped'], `every TC was a slip (web.example.test fits 512): ${detail}`);

    // Right after the burst the source is over its rate; TCP is not limited.
    const names = Array.from({ length: 60 }, () => ['web.example.test', 'A']).flat();
    const { messages, stdout } = await digAll(ns, [`@${V4_RRL}`, '+tcp', '+keepopen', ...names]);
    assert.equal(messages.length, 60, stdout);
    for (const m of messages) {
      assert.equal(m.status, 'NOERROR');
      assert.ok(!m.flags.includes('tc'));
      assert.deepEqual(rr(m, 'answer'), ['web.example.test. 3600 A 198.18.250.81']);
    }
    const after = (await rrl.status()).counters;
    assert.equal(after['rrlDropped'], c['rrlDropped'], 'TCP answers are not rate limited');
    assert.equal(after['rrlSlipped'], c['rrlSlipped']);
    assert.equal(after['tcp']! - c['tcp']!, 60);
  });

  it('the daemon is still running and logged no error', () => {
    assert.ok(d().running);
    const bad = d().lines.filter((l) => typeof l['level'] === 'number' && l['level'] >= 50);
    assert.deepEqual(bad, []);
  });
});
