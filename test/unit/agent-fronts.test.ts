/**
 * An agent that reports to every front node of its cluster (issue 21):
 * the `front` / `fronts` keys, and the fan-out over one PUSH socket per
 * front with real ZeroMQ sockets on loopback (plaintext): every message
 * reaches every front; a front that is down costs the others nothing and
 * its drops are counted for it alone.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { agentConfigSchema, agentFronts } from '../../src/agent/config.ts';
import { FrontFanout } from '../../src/agent/fronts.ts';
import { ConfigError, validateConfig } from '../../src/config/load.ts';
import { controlBaseSchema } from '../../src/control/config.ts';
import type { Body } from '../../src/control/messages.ts';
import { ControlNode } from '../../src/control/node.ts';
import { nextPort } from '../helpers/ports.ts';
import { until } from '../helpers/wait.ts';

const silent = pino({ level: 'silent' });
const base = { name: 's1a', address: '198.18.201.11', control: { plaintext: true } };
const A = 'tcp://198.18.201.1:7101';
const B = 'tcp://198.18.201.2:7101';

describe('agent configuration: front or fronts', () => {
  const rows: { name: string; cfg: Record<string, unknown>; ok?: string[]; problem?: { path: string; says: RegExp } }[] = [
    { name: 'the single front key, as before', cfg: { front: { endpoint: A } }, ok: [A] },
    { name: 'a pair', cfg: { fronts: [{ endpoint: A }, { endpoint: B }] }, ok: [A, B] },
    { name: 'one entry in fronts', cfg: { fronts: [{ endpoint: A }] }, ok: [A] },
    { name: 'both keys', cfg: { front: { endpoint: A }, fronts: [{ endpoint: B }] }, problem: { path: 'fronts', says: /either front .* or fronts .*not both/ } },
    { name: 'neither key', cfg: {}, problem: { path: 'fronts', says: /required: the front nodes/ } },
    { name: 'an empty list', cfg: { fronts: [] }, problem: { path: 'fronts', says: /at least one/ } },
    { name: 'nine fronts', cfg: { fronts: Array.from({ length: 9 }, (_, i) => ({ endpoint: `tcp://198.18.201.${i + 1}:7101` })) }, problem: { path: 'fronts', says: /at most 8/ } },
    { name: 'an endpoint twice', cfg: { fronts: [{ endpoint: A }, { endpoint: A }] }, problem: { path: 'fronts[1].endpoint', says: /listed twice/ } },
  ];
  for (const r of rows) {
    it(r.name, () => {
      if (r.ok) {
        const c = validateConfig(agentConfigSchema, { ...base, ...r.cfg }, 'agent.yaml');
        assert.deepEqual(agentFronts(c).map((f) => f.endpoint), r.ok);
        return;
      }
      assert.throws(
        () => validateConfig(agentConfigSchema, { ...base, ...r.cfg }, 'agent.yaml'),
        (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === r.problem?.path && r.problem.says.test(p.message)),
      );
    });
  }
  it('without plaintext, every front of the list needs its public key', () => {
    assert.throws(
      () => validateConfig(agentConfigSchema, { ...base, control: { keyFile: '/x.key' }, fronts: [{ endpoint: A, publicKey: '/a.pub' }, { endpoint: B }] }, 'agent.yaml'),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === 'fronts[1].publicKey'),
    );
  });
});

describe('agent fan-out: one socket per front node', () => {
  const load: Body<'load_report'> = { server: 's1a', address: '198.18.201.11', interval: 5, cpu: 0.1, load1: 0, load5: 0, load15: 0, connections: 1, memoryUsed: 0.2, utilization: 0.1 };
  const plain = controlBaseSchema.parse({ plaintext: true });
  // This file's own block of ports (test/helpers/ports.ts says why).
  const epA = `tcp://127.0.0.1:${nextPort()}`;
  const epB = `tcp://127.0.0.1:${nextPort()}`;

  it('every message reaches both fronts; with one down, the other still gets every message and the drops are counted for the one down', async () => {
    const agent = await ControlNode.create('s1a', plain, silent);
    const fa = await ControlNode.create('fa', plain, silent);
    const fb = await ControlNode.create('fb', plain, silent);
    const got = { a: [] as number[], b: [] as number[] };
    const connected: string[] = [];
    try {
      await fa.bindPull(epA, 'agents', [], { load_report: (m) => got.a.push(m.body.connections) });
      await fb.bindPull(epB, 'agents', [], { load_report: (m) => got.b.push(m.body.connections) });
      const out = new FrontFanout(agent, [{ endpoint: epA }, { endpoint: epB }], (ep) => connected.push(ep));
      await until(() => out.status().every((f) => f.connected), 'both fronts connected', 10_000, 10);
      assert.deepEqual([...connected].sort(), [epA, epB].sort());
      // 20 messages, numbered: a single PUSH to both would alternate them (10 each).
      for (let i = 0; i < 20; i++) out.send('load_report', { ...load, connections: i });
      await out.drain();
      await until(() => got.a.length === 20 && got.b.length === 20, 'all 20 at each front', 10_000, 10);
      assert.deepEqual(got.a, Array.from({ length: 20 }, (_, i) => i));
      assert.deepEqual(got.b, got.a);

      // Front B goes away: A still gets every message, B's socket counts the drops.
      fb.close();
      await until(() => out.status()[1]?.connected === false, 'B seen disconnected', 10_000, 10);
      for (let i = 20; i < 30; i++) out.send('load_report', { ...load, connections: i });
      await out.drain();
      await until(() => got.a.length === 30, 'A gets the next 10', 10_000, 10);
      const [sa, sb] = out.status();
      assert.ok(sa && sb);
      assert.deepEqual([sa.endpoint, sa.connected, sa.sent, sa.dropped], [epA, true, 30, 0]);
      assert.deepEqual([sb.endpoint, sb.connected, sb.sent, sb.dropped], [epB, false, 20, 10]);
      assert.equal(sb.disconnects, 1);
    } finally {
      agent.close();
      fa.close();
      fb.close();
    }
  });
});
