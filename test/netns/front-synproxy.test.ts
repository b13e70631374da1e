/**
 * Kernel SYN cookies in front of the decision (services' `synproxy`): real
 * curl and nginx through the testbed, whose front namespace has
 * nf_conntrack_tcp_loose=0 and a local route for its VIPs. Service `www`
 * has cookies always (`synproxy: true`); `auto` (the default mode) only
 * while it is under a SYN flood.
 *
 *   - connections complete, downloads are intact, every connection was
 *     decided by the daemon (one queued SYN each: SYNPROXY's own, from
 *     OUTPUT) and its record recycled by the client's FIN (NFLOG);
 *   - a burst of spoofed SYNs costs cookies only: no conntrack entry, no
 *     queued packet, no record, while a client keeps fetching.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { spawn } from 'node:child_process';
import { buildC } from '../../scripts/bench/cc.ts';
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

const CONFIG = `cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    synproxy: true
    synPath: kernel
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
      - { name: s1c, address: 198.18.201.13 }
  - name: auto
    vip: 198.19.1.2
    port: 80
    method: byrequests
    synproxy: { mode: auto, above: ${String(ABOVE)}, calmSeconds: ${String(CALM_SECONDS)} }
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
`;

/**
 * Spoofed SYNs from sources in the client's own /24 that no host has: the
 * cookie SYN-ACKs go back to the client namespace, which does not forward,
 * and die there (nothing leaves the testbed).
 */
const FLOOD = `
import socket,struct,random,sys
dst=sys.argv[1]; n=int(sys.argv[2]); prefix=sys.argv[3]
s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_RAW)
def csum(b):
  t=sum(struct.unpack('!%dH'%(len(b)//2),b)); t=(t>>16)+(t&0xffff); t+=t>>16; return ~t&0xffff
d=socket.inet_aton(dst)
for i in range(n):
  src=socket.inet_aton(prefix+str(100+i%150)); sp=1024+random.randrange(60000)
  tcp=struct.pack('!HHIIBBHHH',sp,80,random.getrandbits(32),0,5<<4,2,64240,0,0)
  c=csum(src+d+struct.pack('!BBH',0,6,len(tcp))+tcp); tcp=tcp[:16]+struct.pack('!H',c)+tcp[18:]
  s.sendto(struct.pack('!BBHHHBBH4s4s',0x45,0,40,i&0xffff,0,64,6,0,src,d)+tcp,(dst,0))
`;

/** Queue `num`'s id sequence (the last packet id the kernel gave: every packet ever queued). */
function queueIds(ns: string, num: number): number {
  for (const l of nsRun(ns, 'cat', ['/proc/net/netfilter/nfnetlink_queue']).split('\n')) {
    const f = l.trim().split(/\s+/);
    if (Number(f[0]) === num && f[0] !== '') return Number(f[7]);
  }
  return 0;
}

const conntrackCount = (ns: string): number => Number(nsRun(ns, 'conntrack', ['-C']).trim());

describe('sluice front with SYN cookies (synproxy)', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';

  before(async () => {
    const st = testbed();
    frontNs = st.plan.clusters[0]?.front.name ?? '';
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-c1.yaml'), CONFIG));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  it('the SYNPROXY chains are installed: cookies answer, the daemon decides the kernel\'s SYN', () => {
    const table = nsRun(frontNs, 'nft', ['list', 'table', 'ip', 'sluice']);
    assert.match(table, /synproxy mss 1460 wscale 7 timestamp sack-perm/);
    // The kernel's SYN takes the same decision chain as a client's: the kernel schedule first, else the queue.
    assert.match(table, /chain syn_decide \{\s*ip hdrlength 5 .* vmap @kernel\s*meta mark set 0x51fff000/);
    assert.match(nsRun(frontNs, 'iptables-save', ['-t', 'mangle']), /-A OUTPUT -m mark --mark 0x51fff000 -j SLUICE_QUEUE_OUT/);
  });

  it('600 short connections and an 8 MiB download: all complete, intact, decided and recycled', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const before = synproxyStat(frontNs);
    const r = await nsRunAsync(client.name, process.execPath, ['--no-warnings', BURST, '--url', 'http://198.19.1.1/', '--count', '600', '--concurrency', '16']);
    assert.equal(r.code, 0, r.stderr);
    const burst = JSON.parse(r.stdout) as { tally: Record<string, number>; failures: number };
    assert.equal(burst.failures, 0);
    // byrequests spreads evenly: every server got a share (the decision ran).
    for (const s of ['s1a', 's1b', 's1c']) assert.ok((burst.tally[s] ?? 0) >= 150, JSON.stringify(burst.tally));

    const dl = spawn('ip', ['netns', 'exec', client.name, 'curl', '-s', '-m', '60', 'http://198.19.1.1/blob.bin'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const hash = createHash('sha1');
    let bytes = 0;
    dl.stdout.on('data', (d: Buffer) => {
      bytes += d.length;
      hash.update(d);
    });
    const code = await new Promise<number>((resolve) => dl.on('close', (c) => { resolve(c ?? -1); }));
    assert.equal(code, 0);
    assert.equal(bytes, 8 << 20);
    assert.equal(hash.digest('hex'), st.blobSha1);

    const stat = synproxyStat(frontNs);
    assert.ok((stat['cookie_valid'] ?? 0) - (before['cookie_valid'] ?? 0) >= 601, `cookies validated: ${JSON.stringify(stat)}`);
    let status = await front!.status();
    for (let i = 0; i < 50 && ((status['counters'] as Record<string, number>)['finishes'] ?? 0) < 601; i++) {
      await new Promise((res) => setTimeout(res, 100));
      status = await front!.status();
    }
    const counters = status['counters'] as Record<string, number>;
    const records = status['records'] as Record<string, number>;
    assert.ok((counters['decided'] ?? 0) >= 601, JSON.stringify(counters));
    // byrequests without checkpoints: SYNPROXY's SYN took the kernel
    // schedule in output (syn_decide), recorded from its log copy. At most a
    // few packets queued: a client's data that reached SYNPROXY before the
    // server's SYN-ACK did.
    assert.ok((counters['kernelDecided'] ?? 0) >= 601, JSON.stringify(counters));
    assert.ok((counters['packets'] ?? 0) < 601 * 0.5, JSON.stringify(counters));
    assert.equal(counters['noRecord'], 0, JSON.stringify(counters));
    assert.equal(counters['finishes'], 601, `records recycled by the client's FIN: ${JSON.stringify(counters)}`);
    assert.equal(records['active'], 0, JSON.stringify(records));
    // The decision reached conntrack: the flows carry the servers' marks (nat_out's copy).
    const marks = new Set([...nsRun(frontNs, 'conntrack', ['-L', '-d', '198.19.1.1']).matchAll(/ mark=(\d+)/g)].map((m) => Number(m[1])));
    assert.deepEqual([...marks].sort(), [0x51000001, 0x51000002, 0x51000003], `conntrack marks: ${[...marks].join(', ')}`);
  });

  it('20000 spoofed SYNs: cookies only (no conntrack entry, queued packet or record) while a client keeps fetching', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const ctBefore = conntrackCount(frontNs);
    const idsBefore = queueIds(frontNs, 0);
    const spBefore = synproxyStat(frontNs);
    const dropsBefore = softnetDropped();
    const recordsBefore = ((await front!.status())['records'] as Record<string, number>)['created'] ?? 0;
    const flood = nsRunAsync(client.name, 'python3', ['-c', FLOOD, '198.19.1.1', '20000', client.address.replace(/\d+$/, '')]);
    // Bounded: 20 fetches, each at most 2 s.
    let ok = 0;
    let fetches = 0;
    for (; fetches < 20; fetches++) {
      const r = await nsRunAsync(client.name, 'curl', ['-s', '-o', '/dev/null', '-m', '2', '-w', '%{http_code}', 'http://198.19.1.1/']);
      if (r.stdout === '200') ok++;
    }
    const f = await flood;
    assert.equal(f.code, 0, f.stderr);
    assert.equal(ok, fetches, 'every fetch during the flood succeeded');
    const sp = await settledSynproxy(frontNs, spBefore, 'syn_received', 20000 + fetches);
    // Every spoofed SYN that the kernel did not drop in an input backlog (counted, machine-wide) was answered by cookie.
    const drops = softnetDropped() - dropsBefore;
    assert.ok(statDelta(spBefore, sp, 'syn_received') + drops >= 20000, `SYNs answered with cookies: ${JSON.stringify(sp)}; backlog drops ${String(drops)}`);
    // Only the fetches left traces: one flow, one queued SYN, one record each.
    const ctGrowth = conntrackCount(frontNs) - ctBefore;
    assert.ok(ctGrowth <= fetches, `conntrack entries grew by ${String(ctGrowth)} (fetches: ${String(fetches)})`);
    const queued = queueIds(frontNs, 0) - idsBefore;
    assert.ok(queued <= fetches * 2, `packets queued: ${String(queued)}`);
    const created = (((await front!.status())['records'] as Record<string, number>)['created'] ?? 0) - recordsBefore;
    assert.ok(created <= fetches, `records created: ${String(created)}`);
  });

  interface SynproxyService { service: string; mode: string; engaged: boolean; synRate: number; engagedTotal: number; disengagedTotal: number }
  const autoStatus = async (): Promise<SynproxyService> => {
    const sp = (await front!.status())['synproxy'] as { services: SynproxyService[] };
    const a = sp.services.find((x) => x.service === 'auto');
    assert.ok(a, JSON.stringify(sp));
    return a;
  };
  const synproxied = (): string => nsRun(frontNs, 'nft', ['list', 'set', 'ip', 'sluice', 'synproxied']);
  const synSeen = (): number => Number(/198\.19\.1\.2 \. 80 counter packets (\d+)/.exec(nsRun(frontNs, 'nft', ['list', 'set', 'ip', 'sluice', 'syn_seen']))?.[1] ?? -1);
  /**
   * A slow download (8 MiB at 600 KiB/s: some 14 s unless released) of the
   * auto service, hashed as it comes; release() lifts the rate (Download).
   */
  const download = (client: string): { bytes: () => number; release: () => void; done: Promise<{ code: number; bytes: number; sha1: string }> } => {
    const dl = new Download(client, '600k', 60, 'http://198.19.1.2/blob.bin');
    return { bytes: () => dl.bytes, release: () => { dl.release(); }, done: dl.done.then((code) => ({ code, bytes: dl.bytes, sha1: dl.sha1() })) };
  };
  /** One fetch from the auto service: HTTP code and time to first byte (logged, never asserted). */
  const fetchAuto = async (client: string): Promise<{ code: string; ttfb: number }> => {
    const r = await nsRunAsync(client, 'curl', ['-s', '-o', '/dev/null', '-m', '3', '-w', '%{http_code} %{time_starttransfer}', 'http://198.19.1.2/']);
    const [code = '', t = '0'] = r.stdout.split(' ');
    return { code, ttfb: Number(t) };
  };

  it('auto, idle: no cookies (SYNs counted, none answered by SYNPROXY), connections decided as without synproxy', async () => {
    const client = testbed().plan.clients[0]!.name;
    const a = await autoStatus();
    assert.deepEqual([a.mode, a.engaged, a.engagedTotal], ['auto', false, 0]);
    assert.doesNotMatch(synproxied(), /198\.19\.1\.2/);
    // No earlier flood's SYN still in a backlog: the counter has stood still for 1 s.
    const sp0 = await settledSynproxy(frontNs, synproxyStat(frontNs), 'syn_received', Infinity);
    const seen0 = synSeen();
    const ttfb: number[] = [];
    for (let i = 0; i < 20; i++) {
      const f = await fetchAuto(client);
      assert.equal(f.code, '200');
      ttfb.push(f.ttfb);
    }
    const sp1 = synproxyStat(frontNs);
    assert.equal((sp1['syn_received'] ?? 0) - (sp0['syn_received'] ?? 0), 0, 'no SYN answered with a cookie');
    assert.equal((sp1['cookie_valid'] ?? 0) - (sp0['cookie_valid'] ?? 0), 0);
    assert.ok(synSeen() - seen0 >= 20, `the kernel counted the SYNs: ${String(synSeen() - seen0)}`);
    console.log(`# auto idle: time to first byte median ${String(ttfb.sort((x, y) => x - y)[10])} s`);
  });

  it('auto under a flood: engaged, fetches succeed, conntrack flat; after it, disengaged after calmSeconds; a download across both transitions is intact', async () => {
    const st = testbed();
    const client = st.plan.clients[0]!;
    const bin = buildC('synflood');
    const src = `${client.address.replace(/\.\d+$/, '')}.128/25`;
    const floodSeconds = 6;
    // Established before the flood (no cookie, plain NAT): it must outlive the engagement.
    const before = download(client.name);
    await new Promise((res) => setTimeout(res, 300));
    assert.ok(before.bytes() > 0, 'the download before the flood is under way');
    const t0 = performance.now();
    // Bounded: 6 s at 3000 SYNs/s (6x `above`); spoofed sources in the client's own /24 that no host has.
    const flood = nsRunAsync(client.name, bin, ['--dst', '198.19.1.2', '--dport', '80', '--src', src, '--seconds', String(floodSeconds), '--rate', '3000']);
    let a = await autoStatus();
    for (let i = 0; i < 30 && !a.engaged; i++) {
      await new Promise((res) => setTimeout(res, 100));
      a = await autoStatus();
    }
    const engagedAfterMs = performance.now() - t0;
    assert.equal(a.engaged, true, `engaged during the flood: ${JSON.stringify(a)}`);
    assert.ok(a.synRate > ABOVE, JSON.stringify(a));
    // The status says engaged when the decision is taken; the set's write follows (nft, off the packet path).
    await until(() => /198\.19\.1\.2 \. 80/.test(synproxied()), 'the cookies set holds the service', 5_000, 50);
    console.log(`# auto: engaged ${String(Math.round(engagedAfterMs))} ms after the flood began (SYN rate ${String(a.synRate)}/s)`);

    // A download started while engaged (its handshake by cookies), slow
    // enough to outlive the flood and the calm: it must survive the
    // disengagement (its flow keeps its conntrack entry, with seqadj).
    const during = download(client.name);

    // Engaged: the flood costs cookies only; legitimate fetches succeed (by cookies).
    const ct0 = conntrackCount(frontNs);
    const sp0 = synproxyStat(frontNs);
    let fetches = 0;
    const ttfb: number[] = [];
    for (; fetches < 10; fetches++) {
      const f = await fetchAuto(client.name);
      assert.equal(f.code, '200', `fetch ${String(fetches)} while engaged`);
      ttfb.push(f.ttfb);
    }
    const f = await flood;
    assert.equal(f.code, 0, f.stderr);
    const gen = JSON.parse(f.stdout) as { sent: number };
    const sp1 = synproxyStat(frontNs);
    const ctGrowth = conntrackCount(frontNs) - ct0;
    // The fetches' flows and the download's; the flood's SYNs leave none.
    assert.ok(ctGrowth <= fetches + 1, `conntrack grew by ${String(ctGrowth)} while engaged (flood sent ${String(gen.sent)})`);
    assert.ok((sp1['syn_received'] ?? 0) - (sp0['syn_received'] ?? 0) >= 1000, `the flood met cookies: ${JSON.stringify(sp1)}`);
    assert.ok((sp1['cookie_valid'] ?? 0) - (sp0['cookie_valid'] ?? 0) >= fetches, 'the fetches were let in by cookies');
    console.log(`# auto engaged: time to first byte median ${String(ttfb.sort((x, y) => x - y)[5])} s`);

    // After the flood: disengaged once calm for CALM_SECONDS (bounded wait).
    const tEnd = performance.now();
    for (let i = 0; i < (CALM_SECONDS + 5) * 5 && a.engaged; i++) {
      await new Promise((res) => setTimeout(res, 200));
      a = await autoStatus();
    }
    assert.equal(a.engaged, false, `disengaged after the flood: ${JSON.stringify(a)}`);
    assert.deepEqual([a.engagedTotal, a.disengagedTotal], [1, 1]);
    await until(() => !/198\.19\.1\.2/.test(synproxied()), 'the cookies set no longer holds the service', 5_000, 50);
    console.log(`# auto: disengaged ${String(Math.round(performance.now() - tEnd))} ms after the flood ended`);
    assert.ok(during.bytes() < 8 << 20, 'the download begun under cookies was still running at the disengagement');
    assert.ok(before.bytes() < 8 << 20, 'the download begun before the flood was still running at the disengagement');

    // Disengaged: no cookie again.
    const sp2 = synproxyStat(frontNs);
    for (let i = 0; i < 5; i++) assert.equal((await fetchAuto(client.name)).code, '200');
    assert.equal((synproxyStat(frontNs)['syn_received'] ?? 0) - (sp2['syn_received'] ?? 0), 0);

    // Both transitions are over and judged: the downloads' rest at full speed.
    before.release();
    during.release();
    for (const d of [await before.done, await during.done]) assert.deepEqual(d, { code: 0, bytes: 8 << 20, sha1: st.blobSha1 });
    // The metrics' sources: one engagement, one disengagement, logged once each.
    assert.equal(front!.lines.filter((l) => l['msg'] === 'SYN flood: SYN cookies engaged').length, 1);
    assert.equal(front!.lines.filter((l) => l['msg'] === 'SYN flood over: SYN cookies disengaged').length, 1);
  });
});
