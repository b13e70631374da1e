/**
 * Kernel SYN cookies for IPv6 services (issue 23, acceptance 5: the flood
 * defence over IPv6), on the dual-stack testbed with real curl -6 and
 * nginx. The IPv4 twin is test/netns/front-synproxy.test.ts.
 *
 * For IPv6 the cookies are ip6tables' SYNPROXY target (nft's synproxy
 * checks an IPv6 checksum as IPv4 on our kernels and drops the packet:
 * src/front/synproxy-groups.ts): the ip6 table marks an engaged service's
 * untracked SYN and INVALID cookie ACK, SLUICE_SYNPROXY answers them. The
 * client's packets cross the WAN delay program (NFQUEUE, 1 ms), so they
 * reach the front node with a checksum to verify (CHECKSUM_NONE), the case
 * nft's synproxy dropped; so do the raw-socket SYNs of the flood.
 *
 *   - connections complete, downloads are intact, every connection was
 *     decided (SYNPROXY's own SYN, from OUTPUT: `www6` has `synPath:
 *     kernel`, so the ip6 table's kernel schedule decides it and the
 *     daemon records it from its log copy; `auto6` is queued) and its
 *     record recycled by the client's FIN;
 *   - 20,000 spoofed IPv6 SYNs cost cookies only: no conntrack entry, no
 *     queued packet, no record, while the client keeps fetching;
 *   - mode auto engages under a flood and disengages after it.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { spawn } from 'node:child_process';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';
import { Download } from '../helpers/restart-load.ts';
import { settledSynproxy, softnetDropped, statDelta, synproxyStat } from '../helpers/synproxy.ts';

const BURST = fileURLToPath(new URL('../fixtures/http-burst.ts', import.meta.url));
const testbed = useTestbed({ clients: 1, clusters: 1, blobMiB: 8, delaysMs: { '1:1': 1 } });

/** The auto service's thresholds: low, so that a test-sized flood engages cookies and the calm comes soon. */
const ABOVE = 500;
const CALM_SECONDS = 3;

function configYaml(): string {
  const k = testbed().plan.clusters[0]!;
  const servers = (n: number): string => k.servers.slice(0, n).map((s) => `      - { name: ${s.id}, address: ${s.address6} }`).join('\n');
  return `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: ${k.uplinkAddress6}
services:
  - name: www6
    vip: ${k.vip6}
    port: 80
    method: byrequests
    synproxy: true
    synPath: kernel
    servers:
${servers(3)}
  - name: auto6
    vip: ${k.vip6.replace(/::1$/, '::2')}
    port: 80
    method: byrequests
    synproxy: { mode: auto, above: ${String(ABOVE)}, calmSeconds: ${String(CALM_SECONDS)} }
    servers:
${servers(2)}
`;
}

/**
 * Spoofed IPv6 SYNs, `n` of them at most `rate` per second, from sources
 * in the client's own /64 that no host has: the cookie SYN-ACKs go back
 * toward the client's link, where nobody answers neighbour discovery for
 * them, and die there (nothing leaves the testbed). AF_INET6 IPPROTO_RAW:
 * the IPv6 header is ours; the TCP checksum is correct (a wrong one would
 * only test the checksum check). Prints the count sent.
 */
const FLOOD6 = `
import socket,struct,random,sys,time
dst=sys.argv[1]; n=int(sys.argv[2]); prefix=sys.argv[3]; rate=float(sys.argv[4])
s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW)
def csum(b):
  t=sum(struct.unpack('!%dH'%(len(b)//2),b))
  while t>>16: t=(t>>16)+(t&0xffff)
  return ~t&0xffff
d=socket.inet_pton(socket.AF_INET6,dst)
t0=time.monotonic()
for i in range(n):
  src=socket.inet_pton(socket.AF_INET6,prefix+'%x'%(0x100+i%4000)); sp=1024+random.randrange(60000)
  tcp=struct.pack('!HHIIBBHHH',sp,80,random.getrandbits(32),0,5<<4,2,64240,0,0)
  c=csum(src+d+struct.pack('!I3xB',len(tcp),6)+tcp); tcp=tcp[:16]+struct.pack('!H',c)+tcp[18:]
  s.sendto(struct.pack('!IHBB',6<<28,len(tcp),6,64)+src+d+tcp,(dst,0))
  if rate>0 and i%50==49:
    ahead=(i+1)/rate-(time.monotonic()-t0)
    if ahead>0: time.sleep(ahead)
print(n)
`;

const delta = statDelta;

/** Queue `num`'s id sequence (the last packet id the kernel gave: every packet ever queued). */
function queueIds(ns: string, num: number): number {
  for (const l of nsRun(ns, 'cat', ['/proc/net/netfilter/nfnetlink_queue']).split('\n')) {
    const f = l.trim().split(/\s+/);
    if (Number(f[0]) === num && f[0] !== '') return Number(f[7]);
  }
  return 0;
}

/** IPv6 conntrack entries in the namespace. */
const conntrack6 = (ns: string): number => nsRun(ns, 'conntrack', ['-L', '-f', 'ipv6']).split('\n').filter((l) => l.startsWith('tcp') || l.startsWith('udp')).length;

describe('sluice front: SYN cookies for IPv6 services (ip6tables SYNPROXY)', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';
  let vip6 = '';
  let auto6 = '';

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0]!;
    frontNs = k.front.name;
    vip6 = k.vip6;
    auto6 = vip6.replace(/::1$/, '::2');
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-ipv6-synproxy.yaml'), configYaml()));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  const counters = async (): Promise<Record<string, number>> => (await front!.status())['counters'] as Record<string, number>;
  const records = async (): Promise<Record<string, number>> => (await front!.status())['records'] as Record<string, number>;
  const fetch = async (client: string, url: string): Promise<{ code: string; ttfb: number }> => {
    const r = await nsRunAsync(client, 'curl', ['-6', '-g', '-s', '-o', '/dev/null', '-m', '3', '-w', '%{http_code} %{time_starttransfer}', url]);
    const [code = '', t = '0'] = r.stdout.split(' ');
    return { code, ttfb: Number(t) };
  };
  /** A download of blob.bin from `url`, hashed as it comes (`rate`: curl's --limit-rate). */
  const download = (client: string, url: string, rate?: string): { bytes: () => number; done: Promise<{ code: number; bytes: number; sha1: string }> } => {
    const dl = spawn('ip', ['netns', 'exec', client, 'curl', '-6', '-g', '-s', '-m', '60', ...(rate !== undefined ? ['--limit-rate', rate] : []), `${url}blob.bin`], { stdio: ['ignore', 'pipe', 'ignore'] });
    const hash = createHash('sha1');
    let bytes = 0;
    dl.stdout.on('data', (d: Buffer) => {
      bytes += d.length;
      hash.update(d);
    });
    return { bytes: () => bytes, done: new Promise((resolve) => dl.on('close', (c) => { resolve({ code: c ?? -1, bytes, sha1: hash.digest('hex') }); })) };
  };

  it('the rules: the ip6 table marks, ip6tables\' SYNPROXY answers, the kernel\'s SYN is queued from OUTPUT', () => {
    const table = nsRun(frontNs, 'nft', ['list', 'table', 'ip6', 'sluice']);
    assert.match(table, /ip6 daddr \. tcp dport @synproxied_0 ct state invalid,untracked meta mark set 0x51fff001 accept/);
    assert.doesNotMatch(table, /synproxy mss/);
    // The kernel's SYN takes the same decision chain as a client's: the ip6 table's kernel schedule first, else the queue.
    // (nft lists the rendered `ip6 nexthdr tcp` as the dependency of a `tcp dport`; the bytecode keeps the check.)
    assert.match(table, /chain syn_decide \{\s*ct status ! confirmed ip6 daddr \. meta l4proto \. tcp dport vmap @kernel\s*meta mark set 0x51fff000/);
    const filter = nsRun(frontNs, 'ip6tables-save', ['-t', 'filter']);
    assert.match(filter, /-A INPUT -m mark --mark 0x51fff000\/0xfffff000 -j SLUICE_SYNPROXY/);
    assert.match(filter, /-A SLUICE_SYNPROXY -p tcp -m mark --mark 0x51fff001 -j SYNPROXY --sack-perm --timestamp --wscale 7 --mss 1460/);
    assert.match(nsRun(frontNs, 'ip6tables-save', ['-t', 'mangle']), /-A OUTPUT -m mark --mark 0x51fff000 -j SLUICE_QUEUE_OUT/);
    // iptables (IPv4) has no such chain: its cookies are nft's.
    assert.doesNotMatch(nsRun(frontNs, 'iptables-save', ['-t', 'filter']), /SLUICE_SYNPROXY/);
  });

  it('300 short connections and an 8 MiB download over IPv6: all by cookie, complete, intact, decided and recycled', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const url = `http://[${vip6}]/`;
    const sp0 = synproxyStat(frontNs);
    const c0 = await counters();
    const r = await nsRunAsync(client.name, process.execPath, ['--no-warnings', BURST, '--url', url, '--count', '300', '--concurrency', '12']);
    assert.equal(r.code, 0, r.stderr);
    const burst = JSON.parse(r.stdout) as { tally: Record<string, number>; failures: number };
    assert.equal(burst.failures, 0);
    // byrequests spreads evenly: every server got its share (the daemon decided).
    for (const s of st.plan.clusters[0]!.servers.map((x) => x.id)) assert.ok((burst.tally[s] ?? 0) >= 75, JSON.stringify(burst.tally));

    const d = await download(client.name, url).done;
    assert.deepEqual(d, { code: 0, bytes: 8 << 20, sha1: st.blobSha1 });

    const sp1 = synproxyStat(frontNs);
    // Every connection's handshake was a cookie's: none reached a server any other way.
    assert.ok(delta(sp0, sp1, 'cookie_valid') >= 301, `cookies validated: ${JSON.stringify(sp1)}`);
    let c = await counters();
    for (let i = 0; i < 50 && (c['finishes'] ?? 0) - (c0['finishes'] ?? 0) < 301; i++) {
      await new Promise((res) => setTimeout(res, 100));
      c = await counters();
    }
    assert.ok((c['decided'] ?? 0) - (c0['decided'] ?? 0) >= 301, JSON.stringify(c));
    // synPath kernel: SYNPROXY's SYN took the ip6 table's schedule in output
    // (syn_decide), recorded from its log copy. At most a few packets
    // queued: a client's data that reached SYNPROXY before the server's SYN-ACK.
    assert.ok((c['kernelDecided'] ?? 0) - (c0['kernelDecided'] ?? 0) >= 301, JSON.stringify(c));
    assert.ok((c['packets'] ?? 0) - (c0['packets'] ?? 0) < 301 * 0.5, JSON.stringify(c));
    assert.equal((c['noRecord'] ?? 0) - (c0['noRecord'] ?? 0), 0, JSON.stringify(c));
    assert.equal((c['finishes'] ?? 0) - (c0['finishes'] ?? 0), 301, `records recycled by the client's FIN: ${JSON.stringify(c)}`);
    assert.equal((await records())['active'], 0);
    // The decisions reached conntrack: the IPv6 flows carry the servers' marks (nat_out's copy).
    const marks = new Set([...nsRun(frontNs, 'conntrack', ['-L', '-f', 'ipv6', '-d', vip6]).matchAll(/ mark=(\d+)/g)].map((m) => Number(m[1])));
    assert.deepEqual([...marks].sort(), [0x51000001, 0x51000002, 0x51000003], `conntrack marks: ${[...marks].join(', ')}`);
    console.log(`# ipv6 synproxy on: ${String(delta(sp0, sp1, 'cookie_valid'))} cookies validated, ${String(delta(sp0, sp1, 'cookie_invalid'))} invalid`);
  });

  it('20000 spoofed IPv6 SYNs: cookies only (no conntrack entry, queued packet or record) while the client keeps fetching', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const url = `http://[${vip6}]/`;
    const ct0 = conntrack6(frontNs);
    const ids0 = queueIds(frontNs, 0);
    const sp0 = synproxyStat(frontNs);
    const drops0 = softnetDropped();
    const created0 = (await records())['created'] ?? 0;
    const prefix = client.address6.replace(/::[0-9a-f]+$/, '::f:');
    const flood = nsRunAsync(client.name, 'python3', ['-c', FLOOD6, vip6, '20000', prefix, '0']);
    // Bounded: 20 fetches, each at most 3 s.
    let ok = 0;
    let fetches = 0;
    for (; fetches < 20; fetches++) if ((await fetch(client.name, url)).code === '200') ok++;
    const f = await flood;
    assert.equal(f.code, 0, f.stderr);
    assert.equal(f.stdout.trim(), '20000');
    assert.equal(ok, fetches, 'every fetch during the flood succeeded');
    const sp1 = await settledSynproxy(frontNs, sp0, 'syn_received', 20000 + fetches);
    const drops = softnetDropped() - drops0;
    // The spoofed SYNs arrive with a checksum to verify (raw socket): ip6tables' SYNPROXY answers them (nft's synproxy dropped them all).
    // Every one that the kernel did not drop in an input backlog (counted, machine-wide) was answered by cookie.
    assert.ok(delta(sp0, sp1, 'syn_received') + drops >= 20000, `SYNs answered with cookies: ${JSON.stringify(sp1)}; backlog drops ${String(drops)}`);
    const ctGrowth = conntrack6(frontNs) - ct0;
    assert.ok(ctGrowth <= fetches, `IPv6 conntrack entries grew by ${String(ctGrowth)} (fetches: ${String(fetches)})`);
    const queued = queueIds(frontNs, 0) - ids0;
    assert.ok(queued <= fetches * 2, `packets queued: ${String(queued)}`);
    const created = ((await records())['created'] ?? 0) - created0;
    assert.ok(created <= fetches, `records created: ${String(created)}`);
    console.log(`# ipv6 flood: ${String(delta(sp0, sp1, 'syn_received'))} SYNs answered by cookie (backlog drops ${String(drops)}), conntrack +${String(ctGrowth)}, queued ${String(queued)}, records +${String(created)}, ${String(ok)}/${String(fetches)} fetches ok`);
  });

  interface SynproxyService { service: string; mode: string; engaged: boolean; synRate: number; engagedTotal: number; disengagedTotal: number }
  const autoStatus = async (): Promise<SynproxyService> => {
    const sp = (await front!.status())['synproxy'] as { services: SynproxyService[] };
    const a = sp.services.find((x) => x.service === 'auto6');
    assert.ok(a, JSON.stringify(sp));
    return a;
  };
  const synproxied = (): string => nsRun(frontNs, 'nft', ['list', 'set', 'ip6', 'sluice', 'synproxied']);

  it('auto: idle without cookies; under an IPv6 flood engaged (fetches by cookie, conntrack flat); disengaged after calmSeconds; a download across both intact', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const url = `http://[${auto6}]/`;
    let a = await autoStatus();
    assert.deepEqual([a.mode, a.engaged, a.engagedTotal], ['auto', false, 0]);
    // No earlier flood's SYN still in a backlog: the counter has stood still for 1 s.
    const sp0 = await settledSynproxy(frontNs, synproxyStat(frontNs), 'syn_received', Infinity);
    for (let i = 0; i < 10; i++) assert.equal((await fetch(client.name, url)).code, '200');
    assert.equal(delta(sp0, synproxyStat(frontNs), 'syn_received'), 0, 'idle: no SYN answered with a cookie');

    // Established before the flood (no cookie, plain NAT): it must outlive the engagement (8 MiB at 300 KiB/s: some 27 s, until released below).
    const before = new Download(client.name, '300k', 60, `${url}blob.bin`, ['-6', '-g']);
    await new Promise((res) => setTimeout(res, 300));
    assert.ok(before.bytes > 0, 'the download before the flood is under way');
    // Bounded: 18000 SYNs at 3000/s (6x `above`), some 6 s.
    const prefix = client.address6.replace(/::[0-9a-f]+$/, '::e:');
    const flood = nsRunAsync(client.name, 'python3', ['-c', FLOOD6, auto6, '18000', prefix, '3000']);
    for (let i = 0; i < 40 && !a.engaged; i++) {
      await new Promise((res) => setTimeout(res, 100));
      a = await autoStatus();
    }
    assert.equal(a.engaged, true, `engaged during the flood: ${JSON.stringify(a)}`);
    assert.ok(a.synRate > ABOVE, JSON.stringify(a));
    const engagedRate = a.synRate;
    // The status says engaged when the decision is taken; the set's write follows (nft, off the packet path).
    await until(() => new RegExp(`${auto6.replace(/\./g, '\\.')} \\. 80`).test(synproxied()), 'the cookies set holds the service', 5_000, 50);

    const ct0 = conntrack6(frontNs);
    const sp1 = synproxyStat(frontNs);
    let fetches = 0;
    for (; fetches < 10; fetches++) assert.equal((await fetch(client.name, url)).code, '200', `fetch ${String(fetches)} while engaged`);
    const f = await flood;
    assert.equal(f.code, 0, f.stderr);
    const sp2 = synproxyStat(frontNs);
    const ctGrowth = conntrack6(frontNs) - ct0;
    assert.ok(ctGrowth <= fetches, `IPv6 conntrack grew by ${String(ctGrowth)} while engaged`);
    assert.ok(delta(sp1, sp2, 'syn_received') >= 1000, `the flood met cookies: ${JSON.stringify(sp2)}`);
    assert.ok(delta(sp1, sp2, 'cookie_valid') >= fetches, 'the fetches were let in by cookies');

    const tEnd = performance.now();
    for (let i = 0; i < (CALM_SECONDS + 5) * 5 && a.engaged; i++) {
      await new Promise((res) => setTimeout(res, 200));
      a = await autoStatus();
    }
    assert.equal(a.engaged, false, `disengaged after the flood: ${JSON.stringify(a)}`);
    assert.deepEqual([a.engagedTotal, a.disengagedTotal], [1, 1]);
    await until(() => !new RegExp(auto6.replace(/\./g, '\\.')).test(synproxied()), 'the cookies set no longer holds the service', 5_000, 50);
    console.log(`# ipv6 auto: engaged at a reading of ${String(engagedRate)} SYN/s, disengaged ${String(Math.round(performance.now() - tEnd))} ms after the flood ended; ${String(delta(sp1, sp2, 'syn_received'))} SYNs answered while engaged, conntrack +${String(ctGrowth)}`);
    assert.ok(before.bytes < 8 << 20, `the download begun before the flood was still running at the disengagement (${String(before.bytes)} bytes)`);
    const sp3 = synproxyStat(frontNs);
    for (let i = 0; i < 5; i++) assert.equal((await fetch(client.name, url)).code, '200');
    assert.equal(delta(sp3, synproxyStat(frontNs), 'syn_received'), 0, 'disengaged: no cookie again');
    // Both transitions are over and judged: the download's rest at full speed.
    before.release();
    const code = await before.done;
    assert.deepEqual({ code, bytes: before.bytes, sha1: before.sha1() }, { code: 0, bytes: 8 << 20, sha1: st.blobSha1 });
  });
});
