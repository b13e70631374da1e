/**
 * Micro-benchmark of the front engine's SYN path in-process (no kernel):
 * decide() on a batch of distinct SYNs, then the FIN log copy of each
 * (teardown()) so the table stays the same size round after round.
 * Measures ns per SYN decided (decide only) for IPv4 and IPv6 clients.
 * Used to show that IPv6 support left the IPv4 path as fast as before:
 * run it against another checkout's src with --src.
 *
 *   node scripts/bench/engine-syn.ts [--src /path/to/src] [--rounds 15] [--batch 20000] [--family 4|6]
 * Prints one JSON line: median and spread of ns/SYN over the rounds.
 */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const { values } = parseArgs({
  options: {
    src: { type: 'string', default: join(fileURLToPath(new URL('.', import.meta.url)), '../../src') },
    rounds: { type: 'string', default: '15' },
    batch: { type: 'string', default: '20000' },
    family: { type: 'string', default: '4' },
  },
});
const src = values.src;
const rounds = Number(values.rounds);
const batch = Number(values.batch);
const family = Number(values.family);

const { parseConfig } = (await import(join(src, 'config/load.ts'))) as typeof import('../../src/config/load.ts');
const { frontConfigSchema } = (await import(join(src, 'front/config.ts'))) as typeof import('../../src/front/config.ts');
const { ConnectionTable } = (await import(join(src, 'front/connections.ts'))) as typeof import('../../src/front/connections.ts');
const { FrontEngine } = (await import(join(src, 'front/engine.ts'))) as typeof import('../../src/front/engine.ts');
const { ServiceRuntime } = (await import(join(src, 'front/service.ts'))) as typeof import('../../src/front/service.ts');
const { tcp } = await import('../../test/helpers/packets.ts');
const { tcp6 } = await import('../../test/helpers/packets6.ts');

const cfg = parseConfig(
  frontConfigSchema,
  `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: capacity
    servers:
      - { name: s0, address: 198.18.201.11, capacity: 1000000 }
      - { name: s1, address: 198.18.201.12, capacity: 2000000 }
`,
  'bench',
);
const svc = cfg.services[0];
if (svc === undefined) throw new Error('no service');
const conf = family === 6 ? { ...svc, vip: '2001:2:0:1::1', servers: svc.servers.map((s, i) => ({ ...s, address: `2001:2:0:2::${String(11 + i)}` })) } : svc;
const services = [new ServiceRuntime(0, conf, cfg.overflow)];
const table = new ConnectionTable(batch * 2, 1, {
  released(s: number, srv: number) {
    const x = services[s]?.servers[srv];
    if (x) x.active--;
  },
});
const engine = new FrontEngine(services, table);

// Distinct clients: 256 addresses x ports.
const syns: Uint8Array[] = [];
const fins: Uint8Array[] = [];
for (let i = 0; i < batch; i++) {
  const port = 1024 + Math.floor(i / 256);
  const a = i % 256;
  const ip = family === 6 ? { src: `2001:2::${a.toString(16)}`, dst: '2001:2:0:1::1' } : { src: `198.18.11.${String(a)}`, dst: '198.19.1.1' };
  const mk = family === 6 ? tcp6 : tcp;
  syns.push(mk(ip, { srcPort: port, dstPort: 80, flags: 0x02 }));
  fins.push(mk(ip, { srcPort: port, dstPort: 80, flags: 0x11 }));
}

const perSyn: number[] = [];
let now = 0;
for (let r = 0; r < rounds + 3; r++) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < batch; i++) {
    const p = syns[i] as Uint8Array;
    engine.decide(p, 0, p.length, now);
  }
  const t1 = process.hrtime.bigint();
  for (let i = 0; i < batch; i++) {
    const p = fins[i] as Uint8Array;
    engine.teardown(p, 0, p.length, now);
  }
  now += 10;
  table.sweep(now);
  if (r >= 3) perSyn.push(Number(t1 - t0) / batch); // 3 warm-up rounds
}
if (engine.counters.decided !== batch * (rounds + 3)) throw new Error(`decided ${String(engine.counters.decided)}`);
perSyn.sort((a, b) => a - b);
const q = (f: number): number => Math.round((perSyn[Math.floor(f * (perSyn.length - 1))] ?? 0) * 10) / 10;
console.log(JSON.stringify({ src, family, batch, rounds, nsPerSynMedian: q(0.5), nsPerSynMin: q(0), nsPerSynMax: q(1) }));
