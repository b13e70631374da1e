// Seed 000's forward_request (src/front/forward_request.ts), branch by
// branch: each kind of TCP packet against each state of its connection
// record, through FrontEngine.decide(). Written from the engine's behaviour
// before the procedure had its own file, and run against both.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable, connectionKey } from '../../src/front/connections.ts';
import { EngineCounters, FrontEngine } from '../../src/front/engine.ts';
import { serverMark } from '../../src/front/marks.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { TcpFlag } from '../../src/packet/ipv4.ts';
import { tcp } from '../helpers/packets.ts';

const CLIENT = '198.18.11.2';
const PORT = 40000;

function setup() {
  const cfg = parseConfig(
    frontConfigSchema,
    `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s0, address: 198.18.201.11 }
`,
    't',
  );
  const services = cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
  const table = new ConnectionTable(100, 60_000, {
    released(svc, srv) {
      const s = services[svc]?.servers[srv];
      if (s) s.active--;
    },
  });
  return { e: new FrontEngine(services, table), table, server: services[0]!.servers[0]! };
}

const packet = (flags: number) => tcp({ src: CLIENT, dst: '198.19.1.1' }, { srcPort: PORT, dstPort: 80, flags });

type State = 'none' | 'active' | 'recycled';
type Count = Exclude<keyof EngineCounters, 'malformed' | 'packets'>;

function recordOf(table: ConnectionTable): State {
  const key = connectionKey(parseIPv4Address(CLIENT)!, PORT);
  if (table.lookup(0, key) < 0) return 'none';
  return table.isActive(0, key) ? 'active' : 'recycled';
}

function counts(c: EngineCounters): Map<string, number> {
  return new Map(Object.entries(c).filter((kv): kv is [string, number] => typeof kv[1] === 'number' && kv[0] !== 'packets'));
}

const { Syn, Ack, Fin, Rst } = TcpFlag;
const MARK = serverMark(0, 0);

// [packet, record before, verdict, mark, counters moved, record after]
const cases: [string, number, State, number, number, Partial<Record<Count, number>>, State][] = [
  // The connection exists.
  ['FIN', Fin | Ack, 'active', Verdict.Accept, 0, { finishes: 1 }, 'recycled'],
  ['RST', Rst, 'active', Verdict.Accept, 0, { finishes: 1 }, 'recycled'],
  ['SYN+FIN', Syn | Fin, 'active', Verdict.Accept, 0, { finishes: 1 }, 'recycled'],
  ['SYN (retransmitted)', Syn, 'active', Verdict.Accept, MARK, { syn: 1, synRetransmits: 1 }, 'active'],
  ['ACK', Ack, 'active', Verdict.Accept, MARK, { resumed: 1 }, 'active'],
  ['SYN-ACK', Syn | Ack, 'active', Verdict.Accept, MARK, { resumed: 1 }, 'active'],
  ['no flags', 0, 'active', Verdict.Accept, MARK, { resumed: 1 }, 'active'],
  // A SYN: a new connection (a recycled record is replaced: the port reused after a FIN).
  ['SYN', Syn, 'none', Verdict.Accept, MARK, { syn: 1, decided: 1 }, 'active'],
  ['SYN', Syn, 'recycled', Verdict.Accept, MARK, { syn: 1, decided: 1 }, 'active'],
  // A FIN or RST with nothing to recycle: dropped and counted (accepted
  // unmarked it would be routed back out toward the VIP and loop).
  ['FIN', Fin | Ack, 'none', Verdict.Drop, 0, { teardownNoRecord: 1 }, 'none'],
  ['FIN', Fin | Ack, 'recycled', Verdict.Drop, 0, { teardownNoRecord: 1 }, 'recycled'],
  ['RST', Rst, 'none', Verdict.Drop, 0, { teardownNoRecord: 1 }, 'none'],
  // Anything else: dropped.
  ['ACK', Ack, 'none', Verdict.Drop, 0, { noRecord: 1 }, 'none'],
  ['ACK', Ack, 'recycled', Verdict.Drop, 0, { noRecord: 1 }, 'recycled'],
  ['SYN-ACK', Syn | Ack, 'none', Verdict.Drop, 0, { noRecord: 1 }, 'none'],
];

describe('forward_request: each packet against each record state', () => {
  for (const [name, flags, before, verdict, mark, moved, after] of cases) {
    it(`${name}, record ${before}: ${verdict === Verdict.Drop ? 'drop' : `accept, mark ${mark.toString(16)}`}; record ${after}`, () => {
      const { e, table, server } = setup();
      if (before !== 'none') e.decide(packet(Syn), 0, packet(Syn).length, 0);
      if (before === 'recycled') e.teardown(packet(Fin | Ack), 0, packet(Fin | Ack).length, 1);
      assert.equal(recordOf(table), before);
      const was = counts(e.counters);
      const p = packet(flags);
      assert.equal(e.decide(p, 0, p.length, 2), verdict);
      assert.equal(e.mark, mark);
      const delta: Record<string, number> = {};
      for (const [k, v] of counts(e.counters)) if (v !== was.get(k)) delta[k] = v - (was.get(k) ?? 0);
      assert.deepEqual(delta, moved);
      assert.equal(recordOf(table), after);
      assert.equal(server.active, after === 'active' ? 1 : 0, 'the server counts the live record');
    });
  }
});
