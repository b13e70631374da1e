/**
 * The UDP batch socket (src/dns/udp_batch.ts, native/src/udp_batch.c) on
 * loopback, with real client sockets:
 * - datagrams sent before the server's loop turns arrive in batches (more
 *   than one per crossing), and every answer goes back to the socket that
 *   asked, IPv4 and IPv6;
 * - the source text the handler sees is dgram's (inet_ntop) form;
 * - answers that overflow the tx slab within one batch are sent early and
 *   none is lost or misaddressed;
 * - with the real Answerer: garbage datagrams are counted (ignored,
 *   FORMERR) and the socket keeps answering; an answer to a closed port
 *   (an ICMP error back) does not stop it;
 * - bind errors and bad arguments are UdpBatchSocketError with errno.
 */
import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DnsDaemon } from '../../src/dns/daemon.ts';
import { UdpBatchSocket, UdpBatchSocketError, UdpStat, type DatagramHandler } from '../../src/dns/udp_batch.ts';

const sockets: { close(): void }[] = [];
const dirs: string[] = [];
after(() => {
  for (const s of sockets) s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function open(family: 4 | 6, handler: DatagramHandler, reply: Uint8Array, slots = 64): UdpBatchSocket {
  const s = new UdpBatchSocket({ host: family === 4 ? '127.0.0.1' : '::1', port: 0, family, reusePort: false, slots, reply, handler, onError: (err) => assert.fail(err) });
  sockets.push(s);
  return s;
}

async function client(family: 4 | 6): Promise<Socket> {
  const c = createSocket(family === 4 ? 'udp4' : 'udp6');
  sockets.push({ close: () => c.close(() => undefined) });
  await new Promise<void>((resolve) => c.bind(0, family === 4 ? '127.0.0.1' : '::1', resolve));
  return c;
}

/** Collects `n` datagrams on c, or fails after ms. */
function collect(c: Socket, n: number, ms = 5000): Promise<Buffer[]> {
  const got: Buffer[] = [];
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      reject(new Error(`${got.length} of ${n} answers after ${ms} ms`));
    }, ms);
    c.on('message', (m) => {
      got.push(m);
      if (got.length === n) {
        clearTimeout(t);
        resolve(got);
      }
    });
  });
}

/** An echo handler: answers "<source>|<query>" padded to `size` octets. */
function echo(reply: Buffer, sources: string[], size = 0): DatagramHandler {
  return (msg, len, source) => {
    sources.push(source);
    const head = Buffer.from(`${source}|`);
    head.copy(reply, 0);
    reply.set(msg.subarray(0, len), head.length);
    const n = Math.max(head.length + len, size);
    reply.fill(0x23, head.length + len, n);
    return n;
  };
}

for (const family of [4, 6] as const) {
  const loop = family === 4 ? '127.0.0.1' : '::1';
  describe(`UDP batch socket, IPv${family}`, () => {
    it('takes datagrams in batches and answers each to the socket that asked', async () => {
      const reply = Buffer.alloc(65536);
      const sources: string[] = [];
      const s = open(family, echo(reply, sources), reply);
      const CLIENTS = 12;
      const EACH = 10;
      const clients = await Promise.all(Array.from({ length: CLIENTS }, () => client(family)));
      const answers = clients.map((c) => collect(c, EACH));
      // All sent before the loop polls the server: they wait in its receive buffer together.
      clients.forEach((c, i) => {
        for (let k = 0; k < EACH; k++) c.send(`q ${i} ${k}`, s.port, loop);
      });
      const got = await Promise.all(answers);
      got.forEach((list, i) => {
        const texts = list.map((b) => b.toString()).sort();
        assert.deepEqual(texts, Array.from({ length: EACH }, (_, k) => `${loop}|q ${i} ${k}`).sort(), `client ${i} got exactly its own answers`);
      });
      assert.ok(sources.every((x) => x === loop), `the source text is inet_ntop's: ${loop}`);
      assert.equal(s.stats[UdpStat.DATAGRAMS], CLIENTS * EACH);
      assert.equal(s.stats[UdpStat.SENT], CLIENTS * EACH);
      assert.ok((s.stats[UdpStat.MAX_BATCH] ?? 0) > 1, `several datagrams in one batch (max ${s.stats[UdpStat.MAX_BATCH]})`);
      assert.ok((s.stats[UdpStat.BATCHES] ?? 0) < CLIENTS * EACH, `fewer crossings than datagrams (${s.stats[UdpStat.BATCHES]})`);
      assert.equal(s.stats[UdpStat.BAD_TX], 0);
      assert.equal(s.errors, 0);
    });

    it('sends early when a batch\'s answers overflow the tx slab, losing none', async () => {
      const reply = Buffer.alloc(65536);
      // 3000-octet answers: 21 fill the 64 KiB slab, a batch of 30 needs two sends
      // (and 30 of them fit the client's default receive buffer).
      const s = open(family, echo(reply, [], 3000), reply);
      const c = await client(family);
      const N = 30;
      const answers = collect(c, N);
      for (let k = 0; k < N; k++) c.send(`big ${k}`, s.port, loop);
      const got = await answers;
      assert.deepEqual(got.map((b) => b.length), Array.from({ length: N }, () => 3000));
      assert.deepEqual(got.map((b) => b.toString().split('#')[0]?.replace(`${loop}|`, '')).sort(), Array.from({ length: N }, (_, k) => `big ${k}`).sort());
      assert.equal(s.stats[UdpStat.SENT], N);
      assert.ok((s.stats[UdpStat.SEND_CALLS] ?? 0) > (s.stats[UdpStat.BATCHES] ?? 0), 'some batch was sent in several sendmmsg calls');
    });
  });
}

describe('UDP batch socket with the Answerer', () => {
  const ZONE = `$ORIGIN example.test.
$TTL 300
@    IN SOA ns1 hostmaster 1 3600 600 86400 60
     IN NS  ns1
ns1  IN A   198.18.2.2
www  IN A   198.18.2.80
`;
  const daemon = (): DnsDaemon => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-udpb-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'z.zone'), ZONE);
    writeFileSync(join(dir, 'dns.yaml'), `name: dns1\nlisten: ["127.0.0.1:53"]\nzones: [{ file: ${join(dir, 'z.zone')} }]\nrrl: { enabled: false }\nadminSocket: ${join(dir, 'dns.sock')}\n`);
    return new DnsDaemon(join(dir, 'dns.yaml'));
  };
  const query = (id: number, name = 'www.example.test', qdcount = 1): Buffer =>
    Buffer.concat([Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, qdcount, 0, 0, 0, 0, 0, 0]), ...name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)])), Buffer.from([0, 0, 1, 0, 1])]);

  it('counts garbage, answers the queries around it, and survives an ICMP error', async () => {
    const d = daemon();
    const a = d.answerer;
    const s = open(4, (msg, len, source, now) => a.respond(msg, len, source, false, now), a.writer.buf);
    const c = await client(4);
    const before = { ...a.counters };
    const answers = collect(c, 3);
    c.send(query(1), s.port, '127.0.0.1');
    c.send(Buffer.from([1, 2, 3, 4, 5]), s.port, '127.0.0.1'); // shorter than a header: ignored
    const response = query(2);
    response[2] = 0x81; // QR set: a response sent to us, ignored
    c.send(response, s.port, '127.0.0.1');
    c.send(query(3, 'www.example.test', 2), s.port, '127.0.0.1'); // two questions: FORMERR
    c.send(query(4), s.port, '127.0.0.1');
    const got = await answers;
    const byId = new Map(got.map((b) => [b.readUInt16BE(0), b]));
    assert.deepEqual([...byId.keys()].sort(), [1, 3, 4]);
    assert.equal((byId.get(1)?.[3] ?? 0xff) & 0x0f, 0, 'NOERROR');
    assert.equal(byId.get(1)?.readUInt16BE(6), 1, 'one answer');
    assert.equal((byId.get(3)?.[3] ?? 0) & 0x0f, 1, 'FORMERR');
    assert.equal(a.counters.ignored - before.ignored, 2);
    assert.equal(a.counters.formerr - before.formerr, 1);
    assert.equal(a.counters.udp - before.udp, 5);

    // A client gone before its answer: the answer meets a closed port (ICMP port unreachable back to us).
    const gone = await client(4);
    gone.send(query(5), s.port, '127.0.0.1', () => {
      gone.removeAllListeners();
      gone.unref();
    });
    await new Promise((r) => setTimeout(r, 100));
    const again = collect(c, 1);
    c.send(query(6), s.port, '127.0.0.1');
    assert.equal((await again)[0]?.readUInt16BE(0), 6, 'still answering');
    assert.equal(s.stats[UdpStat.CALLBACK_ERRORS], 0);
  });
});

describe('UDP batch socket errors', () => {
  it('a port in use is ERR_SLUICE_UDP_BATCH with errno EADDRINUSE from bind', () => {
    const reply = Buffer.alloc(512);
    const s = open(4, () => 0, reply);
    assert.throws(
      () => new UdpBatchSocket({ host: '127.0.0.1', port: s.port, family: 4, reusePort: false, slots: 4, reply, handler: () => 0, onError: () => undefined }),
      (e: unknown) => e instanceof UdpBatchSocketError && e.syscall === 'bind' && e.errno === 98 && /127\.0\.0\.1:\d+/.test(e.message),
    );
  });

  it('rejects a batch size outside 1..1024', () => {
    for (const slots of [0, 1025, 1.5]) {
      assert.throws(() => new UdpBatchSocket({ host: '127.0.0.1', port: 0, family: 4, reusePort: false, slots, reply: Buffer.alloc(512), handler: () => 0, onError: () => undefined }), UdpBatchSocketError);
    }
  });
});
