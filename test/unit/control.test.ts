/**
 * The control plane on real ZeroMQ sockets over loopback: CURVE with ZAP
 * allowlists, the checked decoder's table of rejections, reconnection after
 * a restart, and a 100k-message malformed fuzz run.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Push } from 'zeromq';
import { decodeMessage, encodeMessage } from '../../src/control/codec.ts';
import { controlBaseSchema } from '../../src/control/config.ts';
import { isZ85Key, readKeyPair, resolveAllowlist, resolvePublicKey, writeKeyPair, z85Encode } from '../../src/control/keys.ts';
import { MESSAGE_TYPES, type Body, type Envelope, type MessageType } from '../../src/control/messages.ts';
import { ControlNode } from '../../src/control/node.ts';
import { componentLogger } from '../../src/log/logger.ts';
import { prng } from '../helpers/packets.ts';
import { nextPort } from '../helpers/ports.ts';
import { until } from '../helpers/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'sluice-ctl-'));
const keys = {
  front: writeKeyPair(dir, 'front'),
  agent: writeKeyPair(dir, 'agent'),
  intruder: writeKeyPair(dir, 'intruder'),
  dns: writeKeyPair(dir, 'dns'),
};
const log = componentLogger('control-test');
const base = (name: keyof typeof keys) => controlBaseSchema.parse({ keyFile: keys[name].keyFile });
// This file's own block of ports (test/helpers/ports.ts says why).
const endpoint = () => `tcp://127.0.0.1:${nextPort()}`;
const nodes: ControlNode[] = [];
async function node(name: keyof typeof keys, b = base(name)): Promise<ControlNode> {
  const n = await ControlNode.create(name, b, log);
  nodes.push(n);
  return n;
}
after(() => {
  for (const n of nodes) n.close();
});

const load: Body<'load_report'> = { server: 's1a', address: '198.18.201.11', interval: 5, cpu: 0.5, load1: 0.3, load5: 0.2, load15: 0.1, connections: 12, memoryUsed: 0.4, utilization: 0.5 };
const limits = { maxBytes: 4096, maxAgeMs: 30_000, maxFutureMs: 5000 };
const all = new Set<MessageType>(MESSAGE_TYPES);

describe('keys', () => {
  it('keygen writes a 0600 key pair and a public file that round-trip', () => {
    assert.equal(statSync(keys.front.keyFile).mode & 0o777, 0o600);
    const kp = readKeyPair(keys.front.keyFile);
    assert.ok(isZ85Key(kp.publicKey) && isZ85Key(kp.secretKey));
    assert.equal(kp.publicKey, keys.front.publicKey);
    assert.deepEqual([...resolveAllowlist([dir])].sort(), Object.values(keys).map((k) => k.publicKey).sort());
    assert.throws(() => writeKeyPair(dir, 'front'), { code: 'ERR_SLUICE_KEY_FILE' });
    assert.throws(() => readKeyPair(keys.front.pubFile), { code: 'ERR_SLUICE_KEY_FILE' });
    assert.ok(readFileSync(keys.front.pubFile, 'utf8').includes(keys.front.publicKey));
  });
  it('a key file or directory path of exactly 40 characters (valid z85) is read as a path, not taken for a key', () => {
    // mkdtemp names are letters and digits: the whole path stays in z85's alphabet.
    const base = mkdtempSync('/tmp/sk-');
    const pad = (prefix: string, suffix: string): string => `${prefix}${'k'.repeat(40 - prefix.length - suffix.length)}${suffix}`;
    const pub = pad(`${base}/`, '.pub');
    const kp = writeKeyPair(base, pub.slice(base.length + 1, -4));
    assert.equal(kp.pubFile, pub);
    assert.ok(pub.length === 40 && isZ85Key(pub), 'the path is itself a valid z85 key string');
    assert.equal(resolvePublicKey(pub), kp.publicKey);
    assert.deepEqual([...resolveAllowlist([pub])], [kp.publicKey]);
    // A directory of exactly 40 characters: its .pub files are allowed.
    const d = pad(`${base}/`, '');
    mkdirSync(d);
    const inDir = writeKeyPair(d, 'gk');
    assert.ok(isZ85Key(d));
    assert.deepEqual([...resolveAllowlist([d])], [inDir.publicKey]);
    // A missing key file of that length is an error, not a key.
    const missing = pad(`${base}/`, 'x.pub');
    assert.ok(isZ85Key(missing));
    assert.throws(() => resolvePublicKey(missing), { code: 'ERR_SLUICE_KEY_FILE' });
    assert.throws(() => resolveAllowlist([missing]), { code: 'ERR_SLUICE_KEY_FILE' });
    // Inline keys still work.
    assert.equal(resolvePublicKey(kp.publicKey), kp.publicKey);
    assert.deepEqual([...resolveAllowlist([inDir.publicKey])], [inDir.publicKey]);
  });
  it('z85 encodes the RFC 32 test vector', () => {
    // ZeroMQ RFC 32: 86 4F D2 6F B5 59 F7 5B -> "HelloWorld"
    assert.equal(z85Encode(Uint8Array.from([0x86, 0x4f, 0xd2, 0x6f, 0xb5, 0x59, 0xf7, 0x5b])), 'HelloWorld');
  });
});

describe('decodeMessage', () => {
  const now = 1_800_000_000_000;
  const good = encodeMessage('load_report', 'agent-s1a', load, now);
  const env = JSON.parse(good[1]) as Record<string, unknown>;
  const frames = (topic: string, obj: unknown) => [Buffer.from(topic), Buffer.from(typeof obj === 'string' ? obj : JSON.stringify(obj))];
  const cases: [string, Buffer[], ReadonlySet<MessageType>, string][] = [
    ['one frame', [Buffer.from(good[1])], all, 'frames'],
    ['three frames', [...frames(...good), Buffer.from('x')], all, 'frames'],
    ['oversized', frames('load_report', 'x'.repeat(5000)), all, 'oversized'],
    ['not JSON', frames('load_report', '{"v":1,'), all, 'json'],
    ['JSON array', frames('load_report', '[1,2]'), all, 'envelope'],
    ['extra envelope key', frames('load_report', { ...env, extra: 1 }), all, 'envelope'],
    ['bad sender name', frames('load_report', { ...env, from: 'a b' }), all, 'envelope'],
    ['version 3', frames('load_report', { ...env, v: 3 }), all, 'version'],
    ['version 0', frames('load_report', { ...env, v: 0 }), all, 'version'],
    ['unknown type', frames('reboot', { ...env, type: 'reboot' }), all, 'unknown'],
    ['type not for this receiver', frames(...good), new Set<MessageType>(['cluster_load']), 'unexpected'],
    ['topic mismatch', frames('cluster_load', env), all, 'topic'],
    ['stale', frames('load_report', { ...env, sentAt: now - 31_000 }), all, 'stale'],
    ['from the future', frames('load_report', { ...env, sentAt: now + 6000 }), all, 'future'],
    ['body missing a field', frames('load_report', { ...env, body: { ...load, cpu: undefined } }), all, 'schema'],
    ['body bad address', frames('load_report', { ...env, body: { ...load, address: '300.1.1.1' } }), all, 'schema'],
    ['body negative count', frames('load_report', { ...env, body: { ...load, connections: -1 } }), all, 'schema'],
    ['body NaN-ish', frames('load_report', { ...env, body: { ...load, cpu: '0.5' } }), all, 'schema'],
  ];
  for (const [name, f, accepted, reason] of cases) {
    it(`rejects ${name} as ${reason}`, () => {
      const d = decodeMessage(f, limits, accepted, now);
      assert.deepEqual({ ok: d.ok, reason: 'reason' in d ? d.reason : undefined }, { ok: false, reason });
    });
  }
  it('accepts a good message and returns its body', () => {
    const d = decodeMessage(frames(...good), limits, all, now);
    assert.deepEqual('message' in d ? d.message.body : d, load);
  });
});

describe('client addresses in versions 1 and 2', () => {
  const now = 1_800_000_000_000;
  const msg = (type: MessageType, v: number, body: unknown): Buffer[] => [Buffer.from(type), Buffer.from(JSON.stringify({ v, type, from: 'x', sentAt: now, body }))];
  const rr = (clients: unknown): unknown => ({ server: 's1a', interval: 60, clients, rejectedLines: 0 });
  const hr = (clients: unknown): unknown => ({ cluster: 'c1', threshold: 3, average: 1, clients, final: true });
  const probe = (targets: unknown): unknown => ({ targets, count: 3 });
  const res = (target: unknown): unknown => ({ cluster: 'c1', results: [{ target, sent: 3, received: 3, rttMs: 1.5 }] });
  // [name, type, version, body, the decoded body's addresses or the rejection]
  const cases: [string, MessageType, number, unknown, unknown][] = [
    // Version 1: exactly as before version 2 (IPv4 only, bodies unchanged).
    ['v1 request_rate IPv4', 'request_rate', 1, rr([['198.18.11.2', 5]]), [['198.18.11.2', 5]]],
    ['v1 request_rate IPv6 (as before)', 'request_rate', 1, rr([['2001:2::1', 5]]), 'schema'],
    ['v1 request_rate IPv4-mapped (as before)', 'request_rate', 1, rr([['::ffff:198.18.11.2', 5]]), 'schema'],
    ['v1 high_rate_clients pair', 'high_rate_clients', 1, hr([['198.18.11.2', 5]]), [['198.18.11.2', 5]]],
    ['v1 high_rate_clients with a prefix length', 'high_rate_clients', 1, hr([['198.18.11.0', 5, 24]]), 'schema'],
    ['v1 rtt_probe_request IPv4', 'rtt_probe_request', 1, probe(['198.18.11.2']), ['198.18.11.2']],
    ['v1 rtt_probe_request IPv6', 'rtt_probe_request', 1, probe(['2001:2::1']), 'schema'],
    ['v1 rtt_results IPv4', 'rtt_results', 1, res('198.18.11.2'), ['198.18.11.2']],
    ['v1 rtt_results IPv6', 'rtt_results', 1, res('2001:2::1'), 'schema'],
    // Version 2: both families, canonical text handed on.
    ['v2 request_rate both families', 'request_rate', 2, rr([['198.18.11.2', 5], ['2001:2::1', 7]]), [['198.18.11.2', 5], ['2001:2::1', 7]]],
    ['v2 request_rate non-canonical IPv6', 'request_rate', 2, rr([['2001:0002:0:0:0:0:0:0001', 7]]), [['2001:2::1', 7]]],
    ['v2 request_rate IPv4-mapped', 'request_rate', 2, rr([['::ffff:198.18.11.2', 5]]), [['198.18.11.2', 5]]],
    ['v2 high_rate_clients with and without length', 'high_rate_clients', 2, hr([['2001:2:0:11::', 5, 64], ['198.18.11.2', 4]]), [['2001:2:0:11::', 5, 64], ['198.18.11.2', 4]]],
    ['v2 rtt_probe_request', 'rtt_probe_request', 2, probe(['2001:2::1', '198.18.11.2']), ['2001:2::1', '198.18.11.2']],
    ['v2 rtt_results IPv6', 'rtt_results', 2, res('2001:2:0:0::1'), ['2001:2::1']],
    ['v2 load_report (same body as v1)', 'load_report', 2, load, '198.18.201.11'],
    // Version 2, malformed: no family, short, zone, brackets, long, wrong type.
    ['v2 no family', 'request_rate', 2, rr([['client-7', 5]]), 'schema'],
    ['v2 short IPv6', 'request_rate', 2, rr([['2001:2:0:0:0:0:1', 5]]), 'schema'],
    ['v2 short IPv6 trailing colon', 'rtt_probe_request', 2, probe(['2001:2::1:']), 'schema'],
    ['v2 short IPv4', 'rtt_results', 2, res('198.18.11'), 'schema'],
    ['v2 zone id', 'rtt_probe_request', 2, probe(['fe80::1%eth0']), 'schema'],
    ['v2 brackets', 'request_rate', 2, rr([['[2001:2::1]', 5]]), 'schema'],
    ['v2 two ::', 'high_rate_clients', 2, hr([['2001::2::1', 5]]), 'schema'],
    ['v2 over-long address', 'request_rate', 2, rr([[`${'0:'.repeat(30)}1`, 5]]), 'schema'],
    ['v2 address not a string', 'request_rate', 2, rr([[0x20010002, 5]]), 'schema'],
    ['v2 prefix length 129', 'high_rate_clients', 2, hr([['2001:2::', 5, 129]]), 'schema'],
    ['v2 four-element entry', 'high_rate_clients', 2, hr([['2001:2::', 5, 64, 1]]), 'schema'],
  ];
  const addresses = (type: MessageType, body: Record<string, unknown>): unknown => {
    if (type === 'request_rate' || type === 'high_rate_clients') return body['clients'];
    if (type === 'rtt_probe_request') return body['targets'];
    if (type === 'rtt_results') return (body['results'] as { target: string }[]).map((r) => r.target);
    return body['address'];
  };
  for (const [name, type, v, body, want] of cases) {
    it(`${name} -> ${JSON.stringify(want)}`, () => {
      const d = decodeMessage(msg(type, v, body), limits, all, now);
      assert.deepEqual(d.ok ? addresses(type, d.message.body as Record<string, unknown>) : d.reason, want);
    });
  }
  it('senders use the lowest version that carries the body: 1 for IPv4 only (so version-1 receivers take it), 2 with IPv6 or a prefix length', () => {
    const rows: [MessageType, Body<MessageType>, number][] = [
      ['request_rate', { server: 's', interval: 1, clients: [['198.18.11.2', 1]], rejectedLines: 0 }, 1],
      ['request_rate', { server: 's', interval: 1, clients: [], rejectedLines: 0 }, 1],
      ['request_rate', { server: 's', interval: 1, clients: [['2001:2::1', 1]], rejectedLines: 0 }, 2],
      ['high_rate_clients', { cluster: 'c', threshold: 1, average: 1, clients: [['198.18.11.2', 1]], final: true }, 1],
      ['high_rate_clients', { cluster: 'c', threshold: 1, average: 1, clients: [['198.18.11.0', 1, 24]], final: true }, 2],
      ['rtt_probe_request', { targets: ['198.18.11.2', '2001:2::1'], count: 1 }, 2],
      ['rtt_results', { cluster: 'c', results: [{ target: '2001:2::1', sent: 1, received: 0, rttMs: null }] }, 2],
      ['load_report', load, 1],
    ];
    for (const [type, body, v] of rows) {
      const [topic, text] = encodeMessage(type, 'x', body, now);
      assert.equal((JSON.parse(text) as { v: number }).v, v, `${type} ${JSON.stringify(body)}`);
      const d = decodeMessage([Buffer.from(topic), Buffer.from(text)], limits, all, now);
      assert.ok(d.ok, `${type} round-trips`);
    }
  });
});

describe('CURVE sockets with ZAP allowlists', () => {
  it('delivers from an allowed agent; refuses and counts an intruder', async () => {
    const front = await node('front');
    const got: Envelope<'load_report'>[] = [];
    const ep = endpoint();
    await front.bindPull(ep, 'agents', [keys.agent.pubFile], { load_report: (m) => got.push(m) });
    const agent = await node('agent');
    const intruder = await node('intruder');
    const a = agent.connectPush(ep, keys.front.pubFile);
    const x = intruder.connectPush(ep, keys.front.publicKey);
    await until(async () => {
      a.send('load_report', load);
      x.send('load_report', { ...load, server: 'evil' });
      await a.drain();
      await x.drain();
      return got.length >= 3 && front.zapCounters('agents').refused >= 1;
    }, 'agent reports delivered and intruder refused');
    assert.ok(got.every((m) => m.body.server === 's1a' && m.from === 'agent'));
    assert.equal(front.counters.received.load_report, got.length);
    assert.equal(intruder.counters.sent.load_report, 0, 'nothing the intruder queued left its socket');
    assert.ok(intruder.counters.sendDropped > 0);
    assert.ok(front.peers.has('agent') && !front.peers.has('intruder'));
  });

  it('publishes to allowed subscribers only', async () => {
    const front = await node('front');
    const ep = endpoint();
    const pub = await front.bindPub(ep, 'subscribers', [keys.dns.publicKey]);
    const dns = await node('dns');
    const intruder = await node('intruder');
    const seen: string[] = [];
    const stolen: string[] = [];
    dns.connectSub(ep, keys.front.pubFile, { cluster_load: (m) => seen.push(m.body.cluster) });
    intruder.connectSub(ep, keys.front.pubFile, { cluster_load: (m) => stolen.push(m.body.cluster) });
    const body: Body<'cluster_load'> = { cluster: 'c1', vips: ['198.19.1.1'], capacity: 100, load: 20, available: 80, serversUp: 2, serversTotal: 2 };
    await until(async () => {
      pub.send('cluster_load', body);
      await pub.drain();
      return seen.length >= 2 && front.zapCounters('subscribers').refused >= 1;
    }, 'subscriber receives');
    assert.equal(stolen.length, 0);
  });

  it('reconnects by itself after the receiving side restarts', async () => {
    const ep = endpoint();
    const agent = await node('agent');
    const a = agent.connectPush(ep, keys.front.pubFile);
    for (let round = 0; round < 2; round++) {
      const front = await node('front');
      let n = 0;
      // The previous round's socket closes asynchronously (ZeroMQ's I/O
      // thread releases the port a moment after close()): bind again until
      // the port is free, within a bound.
      for (let tries = 0; ; tries++) {
        try {
          await front.bindPull(ep, 'agents', [keys.agent.pubFile], { load_report: () => n++ });
          break;
        } catch (err) {
          if (tries >= 50 || !/EADDRINUSE|in use/i.test(`${(err as Error).message} ${String((err as NodeJS.ErrnoException).code)}`)) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      await until(async () => {
        a.send('load_report', load);
        await a.drain();
        return n > 0;
      }, `delivery in round ${round}`);
      front.close(); // the "restart": the bound side goes away and comes back
    }
  });

  it('plaintext mode (explicit switch) delivers without keys', async () => {
    const plain = controlBaseSchema.parse({ plaintext: true });
    const rx = await node('front', plain);
    const tx = await node('agent', plain);
    const ep = endpoint();
    let n = 0;
    await rx.bindPull(ep, 'agents', [], { load_report: () => n++ });
    const s = tx.connectPush(ep, undefined);
    await until(async () => {
      s.send('load_report', load);
      await s.drain();
      return n > 0;
    }, 'plaintext delivery');
    assert.equal(rx.publicKey, undefined);
  });
});

describe('fuzz: 100k malformed messages over a real socket', () => {
  it('counts every one, crashes nothing, and still delivers a good one after', async () => {
    const front = await node('front');
    const ep = endpoint();
    const good: number[] = [];
    const goodRates: number[] = [];
    await front.bindPull(ep, 'agents', [keys.agent.publicKey], { load_report: (m) => good.push(m.body.connections), request_rate: (m) => goodRates.push(m.body.clients.length) });
    const kp = readKeyPair(keys.agent.keyFile);
    const raw = new Push({ curveServerKey: keys.front.publicKey, curvePublicKey: kp.publicKey, curveSecretKey: kp.secretKey, linger: 0, sendHighWaterMark: 200_000 });
    raw.connect(ep);
    const rnd = prng(7);
    const valid = JSON.parse(encodeMessage('load_report', 'agent', load)[1]) as Record<string, unknown>;
    const N = 100_000;
    const mutate = (i: number): Buffer[] => {
      const k = i % 8;
      if (k === 0) return [Buffer.from(Array.from({ length: Math.floor(rnd() * 64) }, () => Math.floor(rnd() * 256)))];
      if (k === 1) return [Buffer.from('load_report'), Buffer.from(Array.from({ length: Math.floor(rnd() * 200) }, () => Math.floor(rnd() * 256)))];
      const text = JSON.stringify({ ...valid, sentAt: Date.now(), body: { ...load } });
      if (k === 2) return [Buffer.from('load_report'), Buffer.from(text.slice(0, Math.floor(rnd() * text.length)))];
      if (k === 3) {
        const b = Buffer.from(text);
        for (let j = 0; j < 3; j++) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
        // A flip can land in whitespace-free JSON harmlessly only by luck; keep it malformed for sure.
        return [Buffer.from('load_report'), Buffer.concat([b, Buffer.from('}')])];
      }
      if (k === 4) return [Buffer.from('load_report'), Buffer.from(JSON.stringify({ ...valid, sentAt: Date.now(), body: { ...load, connections: -rnd() - 1 } }))];
      if (k === 5) {
        // Unknown versions, and version-2 request_rate messages with a malformed client address (no family, short, zone id, brackets, garbage text).
        if (i % 16 === 5) return [Buffer.from('load_report'), Buffer.from(JSON.stringify({ ...valid, sentAt: Date.now(), v: 2 + Math.ceil(rnd() * 5) }))];
        const good6 = '2001:2:0:11::1';
        // Every variant is malformed for sure: a strict prefix of a full 8-group address, a zone, brackets, 7 groups, text with an 'x'.
        const full = '2001:2:0:11:0:0:0:1';
        const bad = [full.slice(0, 1 + Math.floor(rnd() * (full.length - 1))), 'fe80::1%eth0', `[${good6}]`, '2001:2:0:0:0:0:1', `${String.fromCharCode(...Array.from({ length: Math.floor(rnd() * 40) }, () => 33 + Math.floor(rnd() * 90)))}x`][i % 5];
        const body = { server: 's1a', interval: 60, clients: [['198.18.11.2', 1], [good6, 2], [bad, 3]], rejectedLines: 0 };
        return [Buffer.from('request_rate'), Buffer.from(JSON.stringify({ v: 2, type: 'request_rate', from: 'agent', sentAt: Date.now(), body }))];
      }
      if (k === 6) return [Buffer.from('x'.repeat(Math.floor(rnd() * 100))), Buffer.from('{}'), Buffer.from('')];
      return [Buffer.from('load_report'), Buffer.from(`{"v":1,"type":"load_report","from":"agent","sentAt":${Date.now()},"body":${'['.repeat(1 + Math.floor(rnd() * 5000))}`)];
    };
    for (let i = 0; i < N; i++) await raw.send(mutate(i));
    const rejected = () => Object.values(front.counters.rejected).reduce((a, b) => a + b, 0);
    await until(() => rejected() >= N, `all ${N} rejections counted (now ${rejected()})`, 120_000, 100);
    assert.equal(rejected(), N);
    assert.equal(good.length, 0);
    assert.equal(goodRates.length, 0, 'no request_rate with a malformed address got through');
    assert.ok(front.counters.rejected.schema > N / 10, 'the bad-address messages are schema rejections');
    await raw.send(encodeMessage('load_report', 'agent', { ...load, connections: 4242 }));
    await until(() => good.length === 1, 'good message after the fuzz run');
    assert.equal(good[0], 4242);
    await raw.send(encodeMessage('request_rate', 'agent', { server: 's1a', interval: 60, clients: [['2001:2:0:11::1', 2]], rejectedLines: 0 }));
    await until(() => goodRates.length === 1, 'good IPv6 request_rate after the fuzz run');
    raw.close();
  });
});
