import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServiceIndex, type ServiceKey } from '../../src/front/service-index.ts';

/** The linear scan the index replaces: the reference. */
function scan(services: readonly ServiceKey[], vip: number, port: number, protocol: number): number {
  return services.findIndex((s) => s.vip === vip && s.port === port && s.protocol === protocol);
}

describe('ServiceIndex ((VIP, port, protocol) -> service)', () => {
  const cases: [string, ServiceKey[]][] = [
    ['none', []],
    ['one', [{ vip: 0xc6130101, port: 80, protocol: 6 }]],
    ['same VIP and port, TCP and UDP', [{ vip: 0xc6130101, port: 53, protocol: 6 }, { vip: 0xc6130101, port: 53, protocol: 17 }]],
    ['4,095 services over 17 VIPs', Array.from({ length: 4095 }, (_, i) => ({ vip: 0xc6130000 + (i % 17), port: 1000 + Math.floor(i / 17), protocol: i % 3 === 0 ? 17 : 6 }))],
    ['a duplicate: the first keeps it', [{ vip: 1, port: 2, protocol: 6 }, { vip: 1, port: 2, protocol: 6 }]],
    ['edge values', [{ vip: 0xffffffff, port: 0xffff, protocol: 6 }, { vip: 0, port: 0, protocol: 17 }]],
  ];
  for (const [name, services] of cases) {
    it(name, () => {
      const index = new ServiceIndex(services);
      const probes: [number, number, number][] = [...services.map((s) => [s.vip, s.port, s.protocol] as [number, number, number]), [0xc6130101, 81, 6], [0xc6130102, 80, 6], [0xc6130101, 80, 17], [5, 5, 1]];
      for (const [v, p, pr] of probes) assert.equal(index.find(v, p, pr), scan(services, v, p, pr), `${String(v)}:${String(p)}/${String(pr)}`);
    });
  }
});
