/**
 * The front engine on IPv6 packets (issue 23 part 1, the engine half):
 * services with an IPv6 VIP built from a hand-made ServiceConfig (the
 * config schema still refuses IPv6 VIPs: the rules do not carry them yet),
 * packets from test/helpers/packets6.ts (written apart from the codec).
 * Addresses from the benchmarking range 2001:2::/48 (RFC 5180).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { ClientIds, clientNumber6, CLIENT6_BASE } from '../../src/front/client6.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable, KEY6_BASE, connectionKey } from '../../src/front/connections.ts';
import { parseConntrackLine } from '../../src/front/kernel-flows.ts';
import { FrontEngine, HELD } from '../../src/front/engine.ts';
import { FlowEnds } from '../../src/front/flow-ends.ts';
import { QUEUE_MARK, serverMark } from '../../src/front/marks.ts';
import { OVERFLOW_BASE, ServiceRuntime } from '../../src/front/service.ts';
import { Shaper } from '../../src/shaping/shaper.ts';
import { Maglev } from '../../src/front/select/maglev.ts';
import { ConntrackEventBatch } from '../../src/conntrack/events.ts';
import { EV_META_WORDS, EventMeta } from '../../src/conntrack/layout.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { parseIPv6Address } from '../../src/packet/address6.ts';
import { ParseStatus, TcpFlag } from '../../src/packet/ipv4.ts';
import { tcp } from '../helpers/packets.ts';
import { fragment, routing, tcp6, udp6 } from '../helpers/packets6.ts';

const VIP = '2001:2:0:1::1';
const CLIENT = '2001:2::c';
const SERVERS = ['2001:2:0:2::b', '2001:2:0:2::c', '2001:2:0:2::d'];

/** An IPv4 service (from the schema, as in production) and an IPv6 twin (hand-made: the schema refuses IPv6 VIPs). */
function engine(method = 'byrequests', caps = [10, 10], max = 1000, protocol: 'tcp' | 'udp' = 'tcp') {
  const cfg = parseConfig(
    frontConfigSchema,
    `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www4
    vip: 198.19.1.1
    port: 80
    protocol: ${protocol}
    method: ${method}
    servers:
${caps.map((c, i) => `      - { name: s${String(i)}, address: 198.18.201.${String(11 + i)}, capacity: ${String(c)} }`).join('\n')}
`,
    't',
  );
  const v4 = cfg.services[0]!;
  const v6 = { ...v4, name: 'www6', vip: VIP, servers: v4.servers.map((s, i) => ({ ...s, address: SERVERS[i]! })) };
  const services = [new ServiceRuntime(0, v4, cfg.overflow), new ServiceRuntime(1, v6, cfg.overflow)];
  const table = new ConnectionTable(max, 1000, {
    released(svc, srv) {
      const s = services[svc]?.servers[srv];
      if (s) s.active--;
    },
  });
  return { e: new FrontEngine(services, table), services, table };
}

const syn6 = (port: number, src = CLIENT) => tcp6({ src, dst: VIP }, { srcPort: port, dstPort: 80, flags: TcpFlag.Syn });
const pkt6 = (port: number, flags: number, src = CLIENT) => tcp6({ src, dst: VIP }, { srcPort: port, dstPort: 80, flags });

function decide(e: FrontEngine, p: Uint8Array, now = 0) {
  const v = e.decide(p, 0, p.length, now);
  return { v, mark: e.mark };
}

describe('front engine, IPv6', () => {
  it('SYN to an IPv6 VIP: decided with the IPv6 service\'s server mark and recorded; a retransmit gets the same server', () => {
    const { e, services, table } = engine();
    const first = decide(e, syn6(40000));
    assert.deepEqual(first, { v: Verdict.Accept, mark: serverMark(1, 0) });
    assert.equal(services[1]!.servers[0]!.active, 1);
    assert.equal(services[0]!.servers[0]!.active, 0, 'the IPv4 service is untouched');
    assert.deepEqual(decide(e, syn6(40000)), first);
    assert.equal(e.counters.synRetransmits, 1);
    assert.deepEqual(decide(e, syn6(40001)), { v: Verdict.Accept, mark: serverMark(1, 1) });
    assert.equal(table.active, 2);
    assert.equal(table.clients6, 1, 'one client address, two ports: one id');
    const key = table.findKey6(parseIPv6Address(CLIENT)!, 40000);
    assert.ok(key >= KEY6_BASE);
    assert.equal(table.lookup(1, key), 0);
  });

  it('IPv4 and IPv6 clients side by side: an IPv4 SYN is decided as before, its key below the IPv6 range', () => {
    const { e, table } = engine();
    decide(e, syn6(40000));
    const p4 = tcp({ src: '198.18.11.2', dst: '198.19.1.1' }, { srcPort: 40000, dstPort: 80, flags: TcpFlag.Syn });
    assert.deepEqual(decide(e, p4), { v: Verdict.Accept, mark: serverMark(0, 0) });
    assert.equal(table.lookup(0, connectionKey(0xc6120b02, 40000)), 0);
    assert.ok(connectionKey(0xffffffff, 0xffff) < KEY6_BASE);
  });

  it('FIN and RST (queued or logged) recycle the record; the port reused after a FIN is a new connection', () => {
    const { e, services, table } = engine();
    decide(e, syn6(40000));
    assert.deepEqual(decide(e, pkt6(40000, TcpFlag.Fin | TcpFlag.Ack)), { v: Verdict.Accept, mark: 0 });
    assert.equal(services[1]!.servers[0]!.active, 0);
    assert.equal(table.recycled, 1);
    decide(e, syn6(40000));
    assert.equal(e.counters.synRetransmits, 0);
    assert.equal(services[1]!.servers[1]!.active, 1, 'a new decision (byrequests: next server)');
    // The teardown log copy of an RST, cut short as NFLOG hands it over.
    const rst = pkt6(40000, TcpFlag.Rst | TcpFlag.Ack);
    e.teardown(rst.slice(0, 60), 0, 60, 5);
    assert.equal(e.counters.finishes, 2);
    assert.equal(e.counters.loggedMalformed, 0);
    assert.equal(table.active, 0);
    assert.equal(services[1]!.servers[1]!.active, 0);
  });

  it('a server\'s RST toward an IPv6 client recycles the client\'s record', () => {
    const { e, table } = engine();
    decide(e, syn6(40000)); // -> server 0
    const rst = tcp6({ src: SERVERS[0]!, dst: CLIENT }, { srcPort: 80, dstPort: 40000, flags: TcpFlag.Rst });
    assert.equal(decide(e, rst).v, Verdict.Accept);
    assert.equal(e.counters.serverResets, 1);
    assert.equal(table.active, 0);
  });

  it('a copy of an IPv6 SYN retransmitted unanswered (mark QUEUE_MARK) is noted against its record\'s server', () => {
    const { e, services } = engine();
    decide(e, syn6(40000)); // -> server 0
    const again = syn6(40000);
    e.teardown(again, 0, again.length, 1, QUEUE_MARK);
    const srv = services[1]!.servers[0]!;
    assert.equal(srv.unanswered, 1);
    assert.equal(e.counters.synUnansweredNoted, 1);
    const noted: unknown[] = [];
    e.refusals.drain((s) => noted.push(s));
    assert.deepEqual(noted, [srv]);
    // Another client port: no record, so only counted (and no client id made for it).
    const stranger = syn6(40001);
    e.teardown(stranger, 0, stranger.length, 2, QUEUE_MARK);
    assert.equal(e.counters.synUnanswered, 2);
    assert.equal(e.counters.synUnansweredNoted, 1);
  });

  it('an IPv6 server\'s refusal (RST+ACK, sequence 0, answering the SYN) is counted on that server', () => {
    const { e, services } = engine();
    decide(e, syn6(40000)); // -> server 0
    const rst = tcp6({ src: SERVERS[0]!, dst: CLIENT }, { srcPort: 80, dstPort: 40000, flags: TcpFlag.Rst | TcpFlag.Ack, seq: 0 });
    e.teardown(rst, 0, rst.length, 1);
    assert.equal(e.counters.serverRefusals, 1);
    const srv = services[1]!.servers[0]!;
    assert.equal(srv.refused, 1);
    const noted: unknown[] = [];
    e.refusals.drain((s) => noted.push(s));
    assert.deepEqual(noted, [srv]);
  });

  it('unknown flow: an ACK is dropped (noRecord), a FIN too (teardownNoRecord); no client id is kept for them', () => {
    const { e, table } = engine();
    assert.equal(decide(e, pkt6(41000, TcpFlag.Ack)).v, Verdict.Drop);
    assert.equal(decide(e, pkt6(41001, TcpFlag.Fin | TcpFlag.Ack, '2001:2::d')).v, Verdict.Drop);
    assert.equal(e.counters.noRecord, 1);
    assert.equal(e.counters.teardownNoRecord, 1);
    assert.ok(table.clients6 <= 1, 'at most the one provisional id');
    decide(e, syn6(40000));
    assert.equal(table.clients6, 1);
  });

  it('malformed IPv6 packets are dropped and counted by their status', () => {
    const { e } = engine();
    const frag = tcp6({ src: CLIENT, dst: VIP, ext: [fragment(0, true)] }, { flags: TcpFlag.Syn });
    const routed = tcp6({ src: CLIENT, dst: VIP, ext: [routing(4, 1, ['2001:2::99'])] }, { flags: TcpFlag.Syn });
    const cut = syn6(40000).slice(0, 50);
    for (const p of [frag, routed, cut]) assert.equal(decide(e, p).v, Verdict.Drop);
    assert.equal(e.counters.malformed[ParseStatus.Fragment], 1);
    assert.equal(e.counters.malformed[ParseStatus.RoutingHeader], 1);
    assert.equal(e.counters.malformed[ParseStatus.Truncated], 1);
    assert.equal(e.counters.decided, 0);
  });

  it('UDP to an IPv6 VIP: the first packet of a flow is decided, the same client port keeps its server', () => {
    const { e } = engine('byrequests', [10, 10], 100, 'udp');
    const d = (port: number) => udp6({ src: CLIENT, dst: VIP }, { srcPort: port, dstPort: 80, payload: [1, 2, 3] });
    const a = decide(e, d(5000));
    assert.deepEqual(a, { v: Verdict.Accept, mark: serverMark(1, 0) });
    assert.deepEqual(decide(e, d(5000)), a);
    assert.deepEqual(decide(e, d(5001)), { v: Verdict.Accept, mark: serverMark(1, 1) });
  });

  it('conntrack destroy events of AF_INET6 flows free the IPv6 record (and its client id)', () => {
    const { e, table, services } = engine();
    decide(e, syn6(40000));
    const ends = new FlowEnds({ table, serviceOf: (v, p, pr) => e.serviceOf(v, p, pr), serviceOf6: (v, p, pr) => e.serviceOf6(v, p, pr) });
    const meta = new Uint32Array(EV_META_WORDS * 2);
    const put = (i: number, client: string, port: number) => {
      const b = i * EV_META_WORDS;
      meta[b + EventMeta.Family] = 10;
      meta[b + EventMeta.Protocol] = 6;
      meta.set(parseIPv6Address(client)!, b + EventMeta.Src);
      meta.set(parseIPv6Address(VIP)!, b + EventMeta.Dst);
      meta[b + EventMeta.SrcPort] = port;
      meta[b + EventMeta.DstPort] = 80;
      meta[b + EventMeta.Mark] = serverMark(1, 0);
    };
    put(0, CLIENT, 40000);
    put(1, '2001:2::77', 40000); // no record for this client
    const batch = new ConntrackEventBatch(meta);
    batch.count = 2;
    ends.handle(batch, 10_000);
    assert.equal(ends.counts.freed, 1);
    assert.equal(ends.counts.noRecord, 1);
    assert.equal(ends.counts.otherFamily, 0);
    assert.equal(table.active, 0);
    assert.equal(services[1]!.servers[0]!.active, 0);
    // The id of the last address interned stays until the next one (client6.ts: the provisional id).
    decide(e, syn6(40000, '2001:2::e'));
    assert.equal(table.findKey6(parseIPv6Address(CLIENT)!, 40000), -1, 'the last record of the address gave its id back');
    assert.equal(table.clients6, 1);
  });

  it('client ids do not leak: 2000 IPv6 clients come and go, dropped SYNs included', () => {
    const { e, table } = engine('byrequests', [1, 1], 64);
    for (let i = 0; i < 2000; i++) {
      const src = `2001:2:${(i % 7).toString(16)}::${i.toString(16)}`;
      decide(e, syn6(1000 + (i % 50), src)); // servers of capacity 1: most are dropped (no target)
      if (i % 3 === 0) decide(e, pkt6(1000 + (i % 50), TcpFlag.Rst, src));
    }
    assert.ok(e.counters.noTarget > 1000);
    // Every live id is a record's address, plus at most the provisional one.
    let records = 0;
    table.forEachActive(() => records++);
    assert.ok(table.clients6 <= records + table.recycled + 1, `${String(table.clients6)} ids for ${String(records)} records`);
  });
});

describe('IPv6 kernel flow lines', () => {
  it('parses an ipv6 line of /proc/net/nf_conntrack into words', () => {
    const f = parseConntrackLine(
      'ipv6     10 tcp      6 431999 ESTABLISHED src=2001:2::c dst=2001:2:0:1::1 sport=55532 dport=80 src=2001:2:0:2::b dst=2001:2::c sport=80 dport=55532 [ASSURED] mark=1358954497 zone=0 use=2',
    );
    assert.ok(f?.v6);
    assert.equal(f.family, 6);
    assert.deepEqual([f.clientPort, f.dstPort, f.replySrcPort, f.state], [55532, 80, 80, 'ESTABLISHED']);
    assert.deepEqual([...f.v6.client], [...parseIPv6Address('2001:2::c')!]);
    assert.deepEqual([...f.v6.dst], [...parseIPv6Address('2001:2:0:1::1')!]);
    assert.deepEqual([...f.v6.replySrc], [...parseIPv6Address('2001:2:0:2::b')!]);
    assert.equal(parseConntrackLine('ipv6 10 tcp 6 1 ESTABLISHED src=2001:2::zz dst=2001:2::1 sport=1 dport=2 src=2001:2::1 dst=2001:2::c sport=2 dport=1 mark=0 use=1'), undefined);
  });
});

describe('ClientIds', () => {
  it('an address keeps its id while used; the provisional id survives until the next new address', () => {
    const ids = new ClientIds(4);
    const a = parseIPv6Address('2001:2::a')!;
    const b = parseIPv6Address('2001:2::b')!;
    const ia = ids.intern(a);
    assert.equal(ids.find(a), ia);
    ids.retain(ia);
    ids.release(ia); // refs 0, but provisional: kept
    assert.equal(ids.find(a), ia);
    const ib = ids.intern(b); // a had no user: freed now
    assert.equal(ids.find(a), -1);
    ids.retain(ib);
    ids.intern(a);
    assert.equal(ids.find(b), ib, 'a retained id stays');
    ids.release(ib);
    assert.equal(ids.find(b), -1);
  });

  it('matches a Map model through churn (backward-shift deletion keeps every address findable)', () => {
    const ids = new ClientIds(64);
    const model = new Map<string, number>();
    let r = 12345;
    const rnd = () => (r = (Math.imul(r, 1103515245) + 12345) >>> 0);
    for (let step = 0; step < 20000; step++) {
      const text = `2001:2::${(rnd() % 96).toString(16)}`;
      const a = parseIPv6Address(text)!;
      if (model.has(text) && rnd() % 2 === 0) {
        const id = model.get(text)!;
        ids.release(id);
        model.delete(text);
      } else if (model.size < 60) {
        const id = ids.intern(a);
        ids.retain(id);
        if (model.has(text)) ids.release(id);
        else model.set(text, id);
      }
      if (step % 997 === 0) for (const [t, id] of model) assert.equal(ids.find(parseIPv6Address(t)!), id, t);
    }
  });
});

describe('maglev over IPv6 clients', () => {
  // Table-driven: the client number (fixed seeds) and the server each
  // client maps to are pinned, so a change of hash moves clients and fails here
  // (a restarted or upgraded front node must map every client as before).
  const servers = ['s0', 's1', 's2'].map((id) => ({ id, weight: 1, capacity: Infinity, active: 0, load: 0, usable: true }));
  it('client numbers are >= 2^32 and below 2^53, distinct for addresses differing in any word', () => {
    const seen = new Set<number>();
    for (const text of ['2001:2::c', '2001:2::d', '2001:3::c', '2001:2:0:1::c', '::ffff:198.18.0.1', '::', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']) {
      const n = clientNumber6(parseIPv6Address(text)!);
      assert.ok(n >= CLIENT6_BASE && Number.isSafeInteger(n), text);
      seen.add(n);
    }
    assert.equal(seen.size, 7);
  });

  it('pinned vectors: address -> client number -> server', () => {
    const m = new Maglev(65537);
    m.rebuild(servers);
    const vectors: readonly (readonly [string, number, number])[] = PINNED;
    for (const [text, number, server] of vectors) {
      const n = clientNumber6(parseIPv6Address(text)!);
      assert.equal(n, number, text);
      assert.equal(m.pick(servers, n), server, text);
    }
  });

  it('spreads IPv6 clients over the servers and maps each the same after a rebuild (a restart)', () => {
    const a = new Maglev(65537);
    a.rebuild(servers);
    const b = new Maglev(65537);
    b.rebuild(servers);
    const counts = [0, 0, 0];
    for (let i = 0; i < 3000; i++) {
      const n = clientNumber6(parseIPv6Address(`2001:2:${(i >>> 8).toString(16)}::${(i & 0xff).toString(16)}`)!);
      const s = a.pick(servers, n);
      assert.equal(b.pick(servers, n), s);
      counts[s] = (counts[s] ?? 0) + 1;
    }
    for (const c of counts) assert.ok(c > 800 && c < 1200, `spread ${counts.join('/')}`);
  });
});

/** Computed once with the fixed seeds of client6.ts and pinned here. */
const PINNED: readonly (readonly [string, number, number])[] = [
  ['2001:2::c', 328628619035131, 2],
  ['2001:2::d', 382217784087029, 2],
  ['2001:2:0:1::c', 1176073388851125, 2],
  ['2001:2:ffff::1', 3430588851676974, 1],
  ['2001:db8::1', 565607194167985, 2],
  ['::ffff:198.18.0.1', 292462203642270, 2],
  ['fe80::1', 202596039944554, 2],
  ['2001:2::', 1130129964361173, 0],
  ['2001:2::1', 932508564125011, 1],
  ['2001:2::2', 2262440431922800, 0],
  ['2001:2::3', 3372228804677986, 1],
  ['2001:2::4', 2025740663102117, 1],
];

describe('checkpoints over IPv6 clients', () => {
  function setup(checkpoint: string) {
    const cfg = parseConfig(
      frontConfigSchema,
      `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www6
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11 }
    checkpoints:
${checkpoint}
`,
      't',
    );
    const v6 = { ...cfg.services[0]!, vip: VIP, servers: cfg.services[0]!.servers.map((s) => ({ ...s, address: SERVERS[0]! })) };
    const services = [new ServiceRuntime(0, v6, cfg.overflow)];
    const armed = new Map<number, number>();
    const shaper = new Shaper(
      { cluster: [], services: [v6], overflow: [] },
      { maxHeld: cfg.shaping.maxHeld, connections: 100, overflowBase: OVERFLOW_BASE, scheduler: (i) => ({ arm: (at) => armed.set(i, at) }) },
    );
    const table = new ConnectionTable(100, 1000, {
      released(svc, srv, slot) {
        const s = services[svc]?.servers[srv];
        if (s) s.active--;
        shaper.releaseConnection(slot, 0);
      },
    });
    const e = new FrontEngine(services, table, shaper);
    const settled: [number, number, number][] = [];
    e.onSettled = (id, v, mark) => settled.push([id, v, mark]);
    const fire = (t: number): void => {
      for (const [i, at] of armed) {
        if (at > t) continue;
        armed.delete(i);
        shaper.all[i]!.queue!.fire(at);
      }
    };
    return { e, table, shaper, settled, fire };
  }

  it('source-prefix keys an IPv6 client by its /64 (prefixLength6): one /64 shares a limit, another /64 does not', () => {
    const { e, table, settled, fire } = setup(`      - { name: per-64, kind: rate-limit, criterion: source-prefix, limit: 1, periodMs: 1000, queue: { maxLength: 4, maxDelayMs: 5000 } }`);
    const d = (p: Uint8Array, id: number) => e.decide(p, 0, p.length, 0, id);
    assert.equal(d(syn6(1, '2001:2::1'), 1), Verdict.Accept);
    assert.equal(d(syn6(2, '2001:2::2'), 2), HELD, 'same /64: over the limit, held');
    // Other /64s pass, and their addresses churn the client ids while the SYN is held.
    for (let i = 1; i <= 5; i++) assert.equal(d(syn6(10 + i, `2001:2:0:${i.toString(16)}::1`), 10 + i), Verdict.Accept);
    fire(5000);
    assert.deepEqual(settled, [[2, Verdict.Accept, serverMark(0, 0)]]);
    // The held SYN's record names its own address (its id was kept while held).
    assert.equal(table.lookup(0, table.findKey6(parseIPv6Address('2001:2::2')!, 2)), 0);
    assert.equal(table.active, 7);
  });

  it('keys: IPv6 keys are >= 2^32 (apart from IPv4 ones); source keys the /128, source-prefix the configured prefix', () => {
    const { shaper } = setup(`      - { name: p56, kind: counter, criterion: source-prefix, prefixLength6: 56 }
      - { name: src, kind: counter, criterion: source }`);
    const [p56, src] = shaper.all;
    const words = (t: string) => parseIPv6Address(t)!;
    const key = (cp: typeof p56, t: string) => cp!.keyOf(clientNumber6(words(t)), words(t), 0, 0, -1);
    assert.equal(key(p56, '2001:2:0:ff::1'), key(p56, '2001:2:0:1::2'), 'same /56');
    assert.notEqual(key(p56, '2001:2:0:100::1'), key(p56, '2001:2:0:1::1'), 'another /56');
    assert.notEqual(key(src, '2001:2::1'), key(src, '2001:2::2'));
    assert.ok(key(src, '2001:2::1') >= CLIENT6_BASE && Number.isSafeInteger(key(src, '2001:2::1')));
    assert.equal(p56!.keyOf(0xc6120b02, new Uint32Array(4), 0, 0, -1), 0xc6120b00, 'IPv4 unchanged (/24)');
  });
});
