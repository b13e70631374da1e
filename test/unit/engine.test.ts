import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable, connectionKey } from '../../src/front/connections.ts';
import { FrontEngine } from '../../src/front/engine.ts';
import { QUEUE_MARK, overflowMark, serverMark } from '../../src/front/marks.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { ParseStatus, TcpFlag } from '../../src/packet/ipv4.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { tcp, udp } from '../helpers/packets.ts';

function engine(yaml: string, max = 1000) {
  const cfg = parseConfig(frontConfigSchema, yaml, 't');
  const services = cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
  const table = new ConnectionTable(max, 1000, {
    released(svc, srv) {
      const s = services[svc]?.servers[srv];
      if (s) s.active--;
    },
  });
  return { e: new FrontEngine(services, table), services, table };
}

const base = (method: string, caps: number[], overflow = '') => `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: ${method}
    servers:
${caps.map((c, i) => `      - { name: s${i}, address: 198.18.201.${11 + i}, capacity: ${c} }`).join('\n')}
${overflow}`;

const syn = (port: number, src = '198.18.11.2') => tcp({ src, dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });
const fin = (port: number) => tcp({ dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Fin | TcpFlag.Ack });
const ack = (port: number) => tcp({ dst: '198.19.1.1' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Ack });

function decide(e: FrontEngine, p: Uint8Array, now = 0) {
  const v = e.decide(p, 0, p.length, now);
  return { v, mark: e.mark };
}

describe('front engine', () => {
  it('SYN: accepted with the chosen server mark; retransmission gets the same mark', () => {
    const { e, services } = engine(base('byrequests', [10, 10]));
    const first = decide(e, syn(40000));
    assert.deepEqual(first, { v: Verdict.Accept, mark: serverMark(0, 0) });
    assert.deepEqual(decide(e, syn(40000)), first);
    assert.equal(e.counters.synRetransmits, 1);
    assert.equal(services[0]!.servers[0]!.active, 1);
    assert.deepEqual(decide(e, syn(40001)), { v: Verdict.Accept, mark: serverMark(0, 1) });
  });

  it('capacity method: 600 connections split 100/200/300', () => {
    const { e } = engine(base('capacity', [1000, 2000, 3000]));
    const counts = new Map<number, number>();
    for (let p = 0; p < 600; p++) {
      const { mark } = decide(e, syn(10000 + p));
      counts.set(mark, (counts.get(mark) ?? 0) + 1);
      decide(e, fin(10000 + p)); // short connections
    }
    assert.deepEqual(
      [0, 1, 2].map((i) => counts.get(serverMark(0, i))),
      [100, 200, 300],
    );
  });

  it('FIN moves the record to recycling and releases the server', () => {
    const { e, services, table } = engine(base('byrequests', [10]));
    decide(e, syn(40000));
    assert.deepEqual(decide(e, fin(40000)), { v: Verdict.Accept, mark: 0 });
    assert.equal(services[0]!.servers[0]!.active, 0);
    assert.equal(table.recycled, 1);
    // A new SYN on the same port after FIN is a new connection.
    decide(e, syn(40000));
    assert.equal(e.counters.synRetransmits, 0);
    assert.equal(services[0]!.servers[0]!.active, 1);
  });

  it('a logged FIN (teardown) recycles the record like a queued one; no verdict, not a queued packet', () => {
    const { e, services, table } = engine(base('byrequests', [10]));
    decide(e, syn(40000));
    const f = fin(40000);
    e.teardown(f, 0, f.length, 5);
    assert.equal(e.counters.finishes, 1);
    assert.equal(e.counters.logged, 1);
    assert.equal(e.counters.packets, 1, 'only the SYN went through decide()');
    assert.equal(services[0]!.servers[0]!.active, 0);
    assert.equal(table.recycled, 1);
    e.teardown(f, 0, f.length, 6); // a retransmitted FIN: already recycled
    assert.equal(e.counters.finishes, 1);
  });

  it('a logged FIN cut at the copy size (it carried data) still recycles; garbage and non-FIN copies are counted', () => {
    const { e, table } = engine(base('byrequests', [10]));
    decide(e, syn(40001));
    const long = tcp({ dst: '198.19.1.1' }, { srcPort: 40001, dstPort: 80, flags: TcpFlag.Fin | TcpFlag.Ack, payload: Array<number>(400).fill(65) });
    const copy = long.slice(0, 128); // what --nflog-size 128 hands over
    e.teardown(copy, 0, copy.length, 1);
    assert.equal(e.counters.finishes, 1);
    assert.equal(table.recycled, 1);
    const junk = new Uint8Array([0x45, 0, 0, 10]);
    e.teardown(junk, 0, junk.length, 1);
    assert.equal(e.counters.loggedMalformed, 1);
    const a = ack(40002);
    e.teardown(a, 0, a.length, 1);
    assert.equal(e.counters.unexpected, 1);
  });

  it('a logged server RST finishes the record of the client it goes to', () => {
    const { e, services } = engine(base('byrequests', [10]));
    decide(e, syn(40000));
    const rst = tcp({ src: '198.18.201.11', dst: '198.18.11.2' }, { srcPort: 80, dstPort: 40000, flags: TcpFlag.Rst });
    e.teardown(rst, 0, rst.length, 1);
    assert.equal(e.counters.serverResets, 1);
    assert.equal(services[0]!.servers[0]!.active, 0);
    const stranger = tcp({ src: '198.18.201.99', dst: '198.18.11.2' }, { srcPort: 80, dstPort: 40001, flags: TcpFlag.Rst });
    e.teardown(stranger, 0, stranger.length, 1);
    assert.equal(e.counters.unexpected, 1);
  });

  it('a copy of a retransmitted SYN left unanswered (mark QUEUE_MARK, from syn_decide) is noted against its record\'s server; without an active record only counted', () => {
    const { e, services } = engine(base('byrequests', [10, 10]));
    const s0 = services[0]!.servers[0]!;
    const s1 = services[0]!.servers[1]!;
    decide(e, syn(42000)); // -> s0
    decide(e, syn(42001)); // -> s1
    // [client port, noted on, why]
    const cases: readonly (readonly [number, typeof s0 | undefined, string])[] = [
      [42000, s0, 'active record on s0'],
      [42001, s1, 'active record on s1'],
      [42000, s0, 'each retransmission counts'],
      [42099, undefined, 'no record (a flow the fallback decided while the daemon was away)'],
    ];
    let copies = 0;
    for (const [port, on, why] of cases) {
      const before = [s0.unanswered, s1.unanswered];
      const p = syn(port);
      e.teardown(p, 0, p.length, 1000, QUEUE_MARK);
      copies++;
      assert.equal(e.counters.synUnanswered, copies, why);
      assert.equal(s0.unanswered - before[0]!, on === s0 ? 1 : 0, why);
      assert.equal(s1.unanswered - before[1]!, on === s1 ? 1 : 0, why);
    }
    assert.equal(e.counters.synUnansweredNoted, 3);
    assert.equal(e.counters.syn, 2, 'a copy is not a new SYN: no record made');
    assert.equal(e.counters.unexpected, 0);
    const noted: unknown[] = [];
    e.refusals.drain((srv) => noted.push(srv));
    assert.deepEqual(noted, [s0, s1, s0]);
    // A finished record (its FIN seen: recycled) is not a connection waiting for an answer.
    decide(e, fin(42001));
    const late = syn(42001);
    e.teardown(late, 0, late.length, 1001, QUEUE_MARK);
    assert.equal(s1.unanswered, 1);
    // An adopted record (a pair's takeover: its SYN-ACK may have gone to the other node) is not judged.
    const { e: e2, services: sv2, table: t2 } = engine(base('byrequests', [10]));
    t2.markAdopted(t2.create(connectionKey(parseIPv4Address('198.18.11.2')!, 42050), 0, 0, 0));
    const adopted = syn(42050);
    e2.teardown(adopted, 0, adopted.length, 1, QUEUE_MARK);
    assert.equal(e2.counters.synUnanswered, 1);
    assert.equal(sv2[0]!.servers[0]!.unanswered, 0);
    // The schedule's copies carry a decision, not QUEUE_MARK: still learned as new connections.
    const k = syn(42002);
    e.teardown(k, 0, k.length, 1002, serverMark(0, 1));
    assert.equal(e.counters.kernelDecided, 1);
    assert.equal(e.counters.synUnanswered, 5);
  });

  it('a server\'s reset that answers the SYN (RST+ACK, sequence 0) is a refusal: counted on the server and noted for the passive check; other resets are not', () => {
    const { e, services } = engine(base('byrequests', [10, 10]));
    const s0 = services[0]!.servers[0]!;
    const s1 = services[0]!.servers[1]!;
    // [flags, seq, refusal?]: only RST+ACK with sequence 0 answers a segment without ACK (a SYN).
    const table: readonly (readonly [number, number, boolean])[] = [
      [TcpFlag.Rst | TcpFlag.Ack, 0, true],
      [TcpFlag.Rst | TcpFlag.Ack, 12345, false], // resets an established connection
      [TcpFlag.Rst, 0, false], // no ACK: answers a segment that had one
      [TcpFlag.Rst, 777, false],
    ];
    let port = 41000;
    let refusals = 0;
    for (const [flags, seq, refusal] of table) {
      decide(e, syn(port)); // byrequests over 2: s0, s1, s0, s1
      const srv = services[0]!.servers[(port - 41000) % 2]!;
      const rst = tcp({ src: `198.18.201.${String(11 + ((port - 41000) % 2))}`, dst: '198.18.11.2' }, { srcPort: 80, dstPort: port, flags, seq });
      const before = srv.refused;
      e.teardown(rst, 0, rst.length, 1);
      if (refusal) refusals++;
      assert.equal(srv.refused - before, refusal ? 1 : 0, `flags ${String(flags)} seq ${String(seq)}`);
      assert.equal(e.counters.serverRefusals, refusals);
      port++;
    }
    assert.equal(e.counters.serverResets, table.length, 'every one of them finished its record');
    // A second copy of the refusal (its record already finished) is not counted again.
    const again = tcp({ src: '198.18.201.11', dst: '198.18.11.2' }, { srcPort: 80, dstPort: 41000, flags: TcpFlag.Rst | TcpFlag.Ack, seq: 0 });
    e.teardown(again, 0, again.length, 2);
    assert.equal(s0.refused, 1);
    const noted: unknown[] = [];
    assert.equal(e.refusals.drain((srv) => noted.push(srv)), false);
    assert.deepEqual(noted, [s0]);
    assert.equal(s1.refused, 0);
    assert.equal(e.refusals.drain(() => assert.fail('drained twice')), false);
  });

  it('a server of two services: its reset finishes the record of the service whose connection it ended, not the first one', () => {
    // Two VIPs over the same servers (front-health's tcp and http services): the RST names the server and the client port only.
    const two = `${base('byrequests', [10, 10])}
  - name: www2
    vip: 198.19.1.2
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11, capacity: 10 }
      - { name: s1, address: 198.18.201.12, capacity: 10 }
`;
    const { e, table } = engine(two);
    const syn2 = (port: number) => tcp({ src: '198.18.11.2', dst: '198.19.1.2' }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });
    // Client port 40000 has a live connection in www (to s0) and a new one in www2 (to s1, which refuses it).
    assert.equal(decide(e, syn(40000)).v, Verdict.Accept);
    decide(e, syn2(39999)); // www2's byrequests turn goes to s0, the next to s1
    assert.equal(decide(e, syn2(40000)).v, Verdict.Accept);
    const k = connectionKey(parseIPv4Address('198.18.11.2')!, 40000);
    assert.equal(table.lookup(0, k), 0);
    assert.equal(table.lookup(1, k), 1);
    const rst = tcp({ src: '198.18.201.12', dst: '198.18.11.2' }, { srcPort: 80, dstPort: 40000, flags: TcpFlag.Rst });
    e.teardown(rst, 0, rst.length, 1);
    assert.equal(e.counters.serverResets, 1);
    assert.equal(table.isActive(1, k), false, "www2's refused connection is finished");
    assert.equal(table.isActive(0, k), true, "www's live connection to s0 is left alone");
    // The client port reused in www2: a new decision, not a retransmit to the server that refused it.
    const again = decide(e, syn2(40000));
    assert.equal(again.v, Verdict.Accept);
    assert.equal(e.counters.synRetransmits, 0);
  });

  it('non-SYN without a record is dropped and counted; with one it resumes', () => {
    const { e } = engine(base('byrequests', [10]));
    assert.equal(decide(e, ack(1234)).v, Verdict.Drop);
    assert.equal(e.counters.noRecord, 1);
    decide(e, syn(1235));
    assert.deepEqual(decide(e, ack(1235)), { v: Verdict.Accept, mark: serverMark(0, 0) });
  });

  it('UDP service: a flow\'s first packet is decided; the same client port keeps its server; a TCP packet to it is not', () => {
    const { e, services } = engine(base('byrequests', [10, 10]).replace('port: 80', 'port: 53\n    protocol: udp'));
    const dgram = (port: number) => udp({ dst: '198.19.1.1' }, { srcPort: port, dstPort: 53 });
    const a = decide(e, dgram(5000));
    assert.deepEqual(a, { v: Verdict.Accept, mark: serverMark(0, 0) });
    assert.deepEqual(decide(e, dgram(5000)), a, 'a first packet again (flow timed out, or retransmitted): same server');
    assert.equal(e.counters.resumed, 1);
    assert.deepEqual(decide(e, dgram(5001)), { v: Verdict.Accept, mark: serverMark(0, 1) });
    assert.deepEqual([e.counters.udpFlows, e.counters.decided], [3, 2]);
    assert.deepEqual(services[0]!.servers.map((x) => x.active), [1, 1]);
    assert.equal(decide(e, syn(5002)).v, Verdict.Accept, 'TCP to the UDP port: not ours (counted, passed on)');
    assert.equal(decide(e, udp({ dst: '198.19.1.1' }, { srcPort: 1, dstPort: 54 })).v, Verdict.Drop);
  });

  it('malformed packets are dropped and counted by reason', () => {
    const { e } = engine(base('byrequests', [10]));
    const frag = tcp({ dst: '198.19.1.1', flags: 1 }, { flags: TcpFlag.Syn });
    assert.equal(decide(e, frag).v, Verdict.Drop);
    assert.equal(decide(e, new Uint8Array(7)).v, Verdict.Drop);
    assert.equal(decide(e, udp({ dst: '198.19.1.1' }, {})).v, Verdict.Drop);
    assert.equal(e.counters.malformed[ParseStatus.Fragment], 1);
    // Both families are parsed (parseIP): version 0 is an unknown version, no longer "not IPv4".
    assert.equal(e.counters.malformed[ParseStatus.UnknownVersion], 1);
    assert.equal(e.counters.unexpected, 1);
  });

  it('overflow: all servers full -> other clusters in proportion to free capacity', () => {
    const { e } = engine(
      base('capacity', [1, 1], 'overflow:\n  - { cluster: c2, vip: 198.19.2.1, freeCapacity: 100 }\n  - { cluster: c3, vip: 198.19.3.1, freeCapacity: 300 }\n'),
    );
    decide(e, syn(1));
    decide(e, syn(2)); // both servers at capacity now
    const counts = new Map<number, number>();
    for (let p = 100; p < 140; p++) {
      const { v, mark } = decide(e, syn(p));
      assert.equal(v, Verdict.Accept);
      counts.set(mark, (counts.get(mark) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(counts), { [overflowMark(0, 0)]: 10, [overflowMark(0, 1)]: 30 });
    assert.equal(e.counters.overflowed, 40);
  });

  it('no server and no overflow target: SYN dropped and counted', () => {
    const { e } = engine(base('capacity', [1]));
    decide(e, syn(1));
    assert.equal(decide(e, syn(2)).v, Verdict.Drop);
    assert.equal(e.counters.noTarget, 1);
  });

  it('a server RST finishes the record of the client it goes to', () => {
    const { e, services } = engine(base('byrequests', [10]));
    decide(e, syn(40000));
    const rst = tcp({ src: '198.18.201.11', dst: '198.18.11.2' }, { srcPort: 80, dstPort: 40000, flags: TcpFlag.Rst });
    assert.equal(decide(e, rst).v, Verdict.Accept);
    assert.equal(e.counters.serverResets, 1);
    assert.equal(services[0]!.servers[0]!.active, 0);
  });

  it('table full: the connection is still decided, untracked (counted)', () => {
    const { e, services } = engine(base('byrequests', [100]), 16);
    for (let p = 0; p < 17; p++) assert.equal(decide(e, syn(p)).v, Verdict.Accept);
    assert.equal(e.counters.untracked, 1);
    assert.equal(services[0]!.servers[0]!.active, 16, 'untracked connections are not counted as active');
  });
});

describe('kernel flow lines (/proc/net/nf_conntrack)', () => {
  it('parses original and reply tuples; rebuilds only flows neither side has closed', async () => {
    const { parseConntrackLine, REBUILD_STATES, LIVE_STATES } = await import('../../src/front/kernel-flows.ts');
    const line =
      'ipv4     2 tcp      6 431999 ESTABLISHED src=198.18.11.2 dst=198.19.1.1 sport=55532 dport=80 src=198.18.201.11 dst=198.18.11.2 sport=80 dport=55532 [ASSURED] mark=0 zone=0 use=2';
    const f = parseConntrackLine(line);
    assert.deepEqual(f, { family: 4, protocol: 'tcp', state: 'ESTABLISHED', client: 0xc6120b02, clientPort: 55532, dst: 0xc6130101, dstPort: 80, replySrc: 0xc612c90b, replySrcPort: 80 });
    assert.deepEqual(parseConntrackLine('ipv4     2 udp      17 20 src=1.2.3.4 dst=5.6.7.8 sport=1 dport=2 [UNREPLIED] src=5.6.7.9 dst=1.2.3.4 sport=2 dport=1 mark=0 use=1'), {
      family: 4,
      protocol: 'udp',
      state: 'UDP',
      client: 0x01020304,
      clientPort: 1,
      dst: 0x05060708,
      dstPort: 2,
      replySrc: 0x05060709,
      replySrcPort: 2,
    });
    assert.ok(LIVE_STATES.has('UDP') && REBUILD_STATES.has('UDP'));
    assert.equal(parseConntrackLine('ipv4 2 icmp 1 29 src=1.2.3.4 dst=5.6.7.8 type=8 code=0 id=1 src=5.6.7.8 dst=1.2.3.4 type=0 code=0 id=1 mark=0 use=1'), undefined);
    assert.equal(parseConntrackLine('garbage'), undefined);
    for (const st of ['FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK']) {
      assert.ok(LIVE_STATES.has(st) && !REBUILD_STATES.has(st), st);
    }
    assert.ok(!LIVE_STATES.has('TIME_WAIT'));
  });
});
