/**
 * Memory of the front node's connection state: builds the daemon's real
 * engine (services, selector, connection table sized for 1M records), then
 * decides 1M SYNs from distinct clients, and prints the RSS before and after
 * as JSON. Run as its own process so the baseline is clean.
 *   front-rss.ts [--records 1000000]
 */
import { parseArgs } from 'node:util';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { ConnectionTable } from '../../src/front/connections.ts';
import { FrontEngine } from '../../src/front/engine.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import { Verdict } from '../../src/nfqueue/layout.ts';
import { writeU16, writeU32 } from '../../src/packet/checksum.ts';

const { values } = parseArgs({ options: { records: { type: 'string', default: '1000000' } } });
const n = Number(values.records);
const cfg = parseConfig(
  frontConfigSchema,
  `cluster: c1
uplinkAddress: 198.18.101.2
connections: { max: ${n} }
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    method: byrequests
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
`,
  'bench',
);
gc?.();
const base = process.memoryUsage().rss;
const services = cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
const table = new ConnectionTable(cfg.connections.max, 120_000, { released: () => undefined });
const engine = new FrontEngine(services, table);
// One SYN template; source address and port vary (checksums are not checked by the engine).
const pkt = new Uint8Array(40);
pkt.set([0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
writeU32(pkt, 16, 0xc6130101); // 198.19.1.1
writeU16(pkt, 22, 80);
pkt[32] = 0x50;
pkt[33] = 0x02; // SYN
const t0 = performance.now();
let accepted = 0;
for (let i = 0; i < n; i++) {
  writeU32(pkt, 12, (0xc6120000 + Math.floor(i / 60000)) >>> 0); // 198.18.x.y, 60000 ports each
  writeU16(pkt, 20, 1024 + (i % 60000));
  if (engine.decide(pkt, 0, 40, i) === Verdict.Accept) accepted++;
}
const ms = performance.now() - t0;
gc?.();
const rss = process.memoryUsage().rss;
console.log(JSON.stringify({ records: table.size, accepted, rssBaseMiB: base / 2 ** 20, rssMiB: rss / 2 ** 20, deltaMiB: (rss - base) / 2 ** 20, decideNsPerSyn: (ms * 1e6) / n }));
