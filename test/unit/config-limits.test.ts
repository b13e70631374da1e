/**
 * No silent limits (issue 20, part 6): the front configuration is refused
 * past what the packet mark can carry (src/front/marks.ts), naming the key;
 * at the limit it is accepted, and the marks of the last server, service
 * and overflow target still land in their own fields.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { MARK_TAG, MARK_TAG_MASK, MAX_OVERFLOW_TARGETS, MAX_SERVERS_MARKED, MAX_SERVICES_MARKED, QUEUE_MARK, REJECT_MARK, decodeMark, overflowMark, serverMark } from '../../src/front/marks.ts';

/** The i-th address of 10.0.0.0/8 (i < 2^24). */
const addr = (i: number): string => `10.${String((i >> 16) & 0xff)}.${String((i >> 8) & 0xff)}.${String(i & 0xff)}`;

function config(services: number, serversPerService: number, overflow: number): string {
  const cfg = {
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    services: Array.from({ length: services }, (_, si) => ({
      name: `svc${String(si)}`,
      vip: '198.19.1.1',
      port: 1000 + si,
      method: 'byrequests',
      servers: Array.from({ length: serversPerService }, (_, k) => ({ name: `s${String(k)}`, address: addr(si * 256 + k + 1) })),
    })),
    overflow: Array.from({ length: overflow }, (_, oi) => ({ cluster: `o${String(oi)}`, vip: addr(0x100000 + oi) })),
  };
  return JSON.stringify(cfg); // JSON is YAML
}

const cases: { name: string; services: number; servers: number; overflow: number; refused?: { path: string; message: RegExp } }[] = [
  { name: `${String(MAX_SERVERS_MARKED)} servers in a service`, services: 1, servers: MAX_SERVERS_MARKED, overflow: 0 },
  {
    name: `${String(MAX_SERVERS_MARKED + 1)} servers in a service`,
    services: 1,
    servers: MAX_SERVERS_MARKED + 1,
    overflow: 0,
    refused: { path: 'services[0].servers', message: new RegExp(`^at most ${String(MAX_SERVERS_MARKED)} servers per service \\(the packet mark's server field.*split`) },
  },
  { name: `${String(MAX_SERVICES_MARKED)} services`, services: MAX_SERVICES_MARKED, servers: 1, overflow: 0 },
  {
    name: `${String(MAX_SERVICES_MARKED + 1)} services`,
    services: MAX_SERVICES_MARKED + 1,
    servers: 1,
    overflow: 0,
    refused: { path: 'services', message: new RegExp(`^at most ${String(MAX_SERVICES_MARKED)} virtual services per front node \\(the packet mark's service field`) },
  },
  { name: `${String(MAX_OVERFLOW_TARGETS)} overflow clusters`, services: 1, servers: 1, overflow: MAX_OVERFLOW_TARGETS },
  {
    name: `${String(MAX_OVERFLOW_TARGETS + 1)} overflow clusters`,
    services: 1,
    servers: 1,
    overflow: MAX_OVERFLOW_TARGETS + 1,
    refused: { path: 'overflow', message: new RegExp(`^at most ${String(MAX_OVERFLOW_TARGETS)} overflow clusters \\(the packet mark's overflow field`) },
  },
  // Issue 20 part 6: at least 1,000 services and 256 servers per service, each an exact decision.
  { name: '300 servers in a service', services: 1, servers: 300, overflow: 0 },
  { name: '1000 services', services: 1000, servers: 2, overflow: 0 },
];

describe('front config: the mark layout\'s limits', () => {
  for (const c of cases) {
    it(`${c.refused ? 'refuses' : 'accepts'} ${c.name}`, () => {
      const text = config(c.services, c.servers, c.overflow);
      if (!c.refused) {
        const cfg = parseConfig(frontConfigSchema, text, 'front.yaml');
        assert.equal(cfg.services.length, c.services);
        assert.equal(cfg.services[0]?.servers.length, c.servers);
        assert.equal(cfg.overflow.length, c.overflow);
        return;
      }
      const { path, message } = c.refused;
      assert.throws(
        () => parseConfig(frontConfigSchema, text, 'front.yaml'),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, String(err));
          assert.ok(
            err.problems.some((p) => p.path === path && message.test(p.message)),
            `no problem at ${path} matching ${String(message)} in ${JSON.stringify(err.problems)}`,
          );
          return true;
        },
      );
    });
  }

  it('the issue\'s floor fits: 1,000 services and 256 servers per service', () => {
    const floor: [string, number, number][] = [
      ['services', MAX_SERVICES_MARKED, 1000],
      ['servers per service', MAX_SERVERS_MARKED, 256],
    ];
    for (const [what, limit, atLeast] of floor) assert.ok(limit >= atLeast, `${what}: ${String(limit)}`);
  });

  it('at the limits every mark stays in its own field: server, overflow, never a special mark', () => {
    const lastService = MAX_SERVICES_MARKED - 1;
    const table: { mark: number; want: ReturnType<typeof decodeMark> }[] = [
      { mark: serverMark(0, 0), want: { kind: 'server', service: 0, server: 0 } },
      { mark: serverMark(lastService, MAX_SERVERS_MARKED - 1), want: { kind: 'server', service: lastService, server: MAX_SERVERS_MARKED - 1 } },
      { mark: serverMark(999, 299), want: { kind: 'server', service: 999, server: 299 } },
      { mark: overflowMark(0, 0), want: { kind: 'overflow', service: 0, target: 0 } },
      { mark: overflowMark(lastService, MAX_OVERFLOW_TARGETS - 1), want: { kind: 'overflow', service: lastService, target: MAX_OVERFLOW_TARGETS - 1 } },
      { mark: QUEUE_MARK, want: { kind: 'queue' } },
      { mark: REJECT_MARK, want: { kind: 'reject' } },
      { mark: 0, want: undefined },
      { mark: 0x5200_1001, want: undefined },
      { mark: 0x5100_1000, want: undefined },
    ];
    for (const { mark, want } of table) {
      assert.deepEqual(decodeMark(mark), want, `mark 0x${mark.toString(16)}`);
      if (want !== undefined) assert.equal((mark & MARK_TAG_MASK) >>> 0, MARK_TAG);
    }
    const all = new Set<number>([QUEUE_MARK, REJECT_MARK]);
    for (const s of [0, 1, lastService]) {
      for (const i of [0, 1, MAX_SERVERS_MARKED - 1]) all.add(serverMark(s, i));
      for (const o of [0, 1, MAX_OVERFLOW_TARGETS - 1]) all.add(overflowMark(s, o));
    }
    assert.equal(all.size, 2 + 3 * 6, 'no two decisions share a mark');
  });
});
