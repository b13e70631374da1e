/**
 * ServerIndex (src/front/server-index.ts): every (service, server) pair by
 * the server's address and port, per family, against the linear scan it
 * replaces (ServiceRuntime.serverAt / serverAt6 over every service).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIPv4Address } from '../../src/packet/address.ts';
import { parseIPv6Address, setIPv4Mapped } from '../../src/packet/address6.ts';
import { ServerIndex, type ServerIndexService } from '../../src/front/server-index.ts';

const v4 = (text: string): number => parseIPv4Address(text) ?? assert.fail(text);
const v6 = (text: string): Uint32Array => parseIPv6Address(text) ?? assert.fail(text);
const server4 = (text: string, port: number): { address6: Uint32Array; port: number } => {
  const a = new Uint32Array(4);
  setIPv4Mapped(a, v4(text));
  return { address6: a, port };
};
const server6 = (text: string, port: number): { address6: Uint32Array; port: number } => ({ address6: v6(text), port });

/** Every pair of a key, in chain order, as [service, server]. */
function chain(idx: ServerIndex, first: number): [number, number][] {
  const out: [number, number][] = [];
  for (let p = first; p >= 0; p = idx.next(p)) out.push([idx.service(p), idx.server(p)]);
  return out;
}

describe('ServerIndex', () => {
  const services: ServerIndexService[] = [
    { family: 4, servers: [server4('198.18.201.11', 80), server4('198.18.201.12', 80)] }, // www-tcp
    { family: 4, servers: [server4('198.18.201.12', 80), server4('198.18.201.11', 80)] }, // http, same servers, another order
    { family: 4, servers: [server4('198.18.201.11', 8080)] }, // same address, another port
    { family: 6, servers: [server6('2001:2:0:201::11', 80), server6('::ffff:198.18.201.11', 80)] }, // IPv6 service; one server IPv4-mapped
  ];
  const idx = new ServerIndex(services);
  const cases: { name: string; got: () => number; want: [number, number][] }[] = [
    { name: 'a server of two services: both pairs, in service order', got: () => idx.first4(v4('198.18.201.11'), 80), want: [[0, 0], [1, 1]] },
    { name: 'the other server of both', got: () => idx.first4(v4('198.18.201.12'), 80), want: [[0, 1], [1, 0]] },
    { name: 'same address, another port: its own key', got: () => idx.first4(v4('198.18.201.11'), 8080), want: [[2, 0]] },
    { name: 'no such port', got: () => idx.first4(v4('198.18.201.11'), 81), want: [] },
    { name: 'no such address', got: () => idx.first4(v4('198.18.201.13'), 80), want: [] },
    { name: 'an IPv6 packet finds the IPv6 service\'s server', got: () => idx.first6(v6('2001:2:0:201::11'), 80), want: [[3, 0]] },
    { name: 'an IPv6 packet from a mapped address finds only the IPv6 service (the scan looked in family-6 services only)', got: () => idx.first6(v6('::ffff:198.18.201.11'), 80), want: [[3, 1]] },
    { name: 'an IPv4 packet never finds an IPv6 service', got: () => idx.first4(v4('198.18.201.11'), 80), want: [[0, 0], [1, 1]] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(chain(idx, c.got()), c.want);
    });
  }

  it('1,000 services x 100 servers: every server found at its one pair, as the linear scan finds it', () => {
    const many: ServerIndexService[] = Array.from({ length: 1000 }, (_, s) => ({
      family: 4 as const,
      servers: Array.from({ length: 100 }, (_, k) => server4(`198.18.${String(200 + (k >> 7))}.${String((k & 0x7f) + 1)}`, 8000 + s)),
    }));
    const big = new ServerIndex(many);
    for (let s = 0; s < 1000; s += 37) {
      for (let k = 0; k < 100; k += 7) {
        const a = many[s]?.servers[k]?.address6[3] ?? 0;
        assert.deepEqual(chain(big, big.first4(a, 8000 + s)), [[s, k]]);
      }
    }
    assert.equal(big.first4(v4('198.18.200.1'), 7999), -1);
  });

  it('random configurations: the same pairs as a scan of every service', () => {
    let seed = 7;
    const rnd = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    for (let round = 0; round < 20; round++) {
      const svcs: ServerIndexService[] = Array.from({ length: 1 + rnd(12) }, () => ({
        family: 4 as const,
        servers: Array.from({ length: 1 + rnd(6) }, () => server4(`198.18.201.${String(1 + rnd(5))}`, 80 + rnd(3))),
      }));
      const ix = new ServerIndex(svcs);
      for (let a = 1; a <= 6; a++) {
        for (let port = 80; port <= 83; port++) {
          const addr = v4(`198.18.201.${String(a)}`);
          const scan: [number, number][] = [];
          svcs.forEach((svc, si) => { svc.servers.forEach((b, bi) => {
            if (b.address6[3] === addr && b.port === port) scan.push([si, bi]);
          }); });
          assert.deepEqual(chain(ix, ix.first4(addr, port)), scan, `round ${String(round)} ${String(a)}:${String(port)}`);
        }
      }
    }
  });

  it('no service: every lookup misses', () => {
    const empty = new ServerIndex([]);
    assert.equal(empty.first4(v4('198.18.201.11'), 80), -1);
    assert.equal(empty.first6(v6('2001:2::1'), 80), -1);
  });
});
