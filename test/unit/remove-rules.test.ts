/**
 * `sluice front --remove-rules`: which of our chains an iptables-save shows
 * (with rule and jump counts), which queues our rules name, and the refusal
 * while a front node is bound to one of them (a fake host: the real removal
 * runs in test/netns/front-restart.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findChains, queuesInRules, removeFrontRules, FrontRunningError } from '../../src/front/remove-rules.ts';
import type { HostReader } from '../../src/front/preflight.ts';

const MANGLE = `*mangle
:PREROUTING ACCEPT [0:0]
:SLUICE_QUEUE - [0:0]
-A PREROUTING -j SLUICE_QUEUE
-A PREROUTING -s 10.0.0.1/32 -j MARK --set-xmark 0x1/0xffffffff
-A SLUICE_QUEUE -d 198.19.1.1/32 -p tcp -m tcp --dport 80 --tcp-flags SYN,ACK,FIN,RST SYN -j NFQUEUE --queue-num 3 --queue-bypass
-A SLUICE_QUEUE -d 198.19.1.2/32 -p udp -m udp --dport 53 -m conntrack --ctstate NEW -j NFQUEUE --queue-num 3 --queue-bypass
-A SLUICE_QUEUE -d 198.19.1.1/32 -p tcp -j RETURN
COMMIT
`;
const NAT = `*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:SLUICE_DNAT - [0:0]
:SLUICE_SNAT - [0:0]
-A PREROUTING -j SLUICE_DNAT
-A POSTROUTING -j SLUICE_SNAT
-A SLUICE_DNAT -d 198.19.1.1/32 -p tcp -m mark --mark 0x51750001 -j DNAT --to-destination 198.18.201.11:80
COMMIT
`;
const FILTER_STALE = `*filter
:FORWARD ACCEPT [0:0]
:SLUICE_REJECT - [0:0]
-A FORWARD -j SLUICE_REJECT
-A FORWARD -m mark --mark 0x5175ffff -j SLUICE_REJECT
-A SLUICE_REJECT -p tcp -m mark --mark 0x5175ffff -j REJECT --reject-with tcp-reset
COMMIT
`;

describe('remove-rules: reading the ruleset', () => {
  const cases: { name: string; tables: Record<string, string>; chains: string[]; queues: number[] }[] = [
    { name: 'nothing of ours', tables: { mangle: '*mangle\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n', nat: '', filter: '' }, chains: [], queues: [] },
    { name: 'a running configuration', tables: { mangle: MANGLE, nat: NAT, filter: '' }, chains: ['mangle/SLUICE_QUEUE 3 1', 'nat/SLUICE_DNAT 1 1', 'nat/SLUICE_SNAT 0 1'], queues: [3] },
    { name: 'a stale unconditional reject jump counts as a jump', tables: { mangle: '', nat: '', filter: FILTER_STALE }, chains: ['filter/SLUICE_REJECT 1 2'], queues: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const found = findChains((t) => c.tables[t] ?? '');
      assert.deepEqual(found.map((f) => `${f.table}/${f.chain} ${String(f.rules)} ${String(f.jumps)}`), c.chains);
      assert.deepEqual(queuesInRules(c.tables['mangle'] ?? ''), c.queues);
    });
  }
});

function host(queueTable: string | undefined): HostReader {
  return {
    sysctl: () => undefined,
    interfaces: () => [],
    interfaceWith: () => undefined,
    command: () => undefined,
    conntrackProc: () => 'readable',
    conntrackNetlink: () => 'allowed',
    localRoute: () => true,
    bindings: (kind) => (kind === 'queue' ? queueTable : ''),
    netlinkOwner: (portid) => (portid === 4242 ? { pid: 777, argv: ['node', 'sluice', 'front', '--config', '/etc/sluice/front.yaml'], cwd: '/' } : undefined),
  };
}

describe('remove-rules: refused while a front node is bound, else removed and reported', () => {
  const tables = (): Record<string, string> => ({ mangle: MANGLE, nat: NAT, filter: '' });
  const cases: { name: string; queueTable: string | undefined; queue?: number; refused: RegExp | undefined; notes: RegExp[] }[] = [
    { name: 'the queue the rules name is bound: refused, naming the owner and the fix', queueTable: '    3   4242     0 2 65531     0     0        0  1\n', refused: /NFQUEUE 3 .*pid 777.*\n.*systemctl stop sluice-front/s, notes: [] },
    { name: 'the configuration\'s queue is bound (rules name another): refused', queueTable: '    0   4242     0 2 65531     0     0        0  1\n', queue: 0, refused: /NFQUEUE 0 /, notes: [] },
    { name: 'another queue is bound: removed', queueTable: '    9   4242     0 2 65531     0     0        0  1\n', refused: undefined, notes: [/removed mangle chain SLUICE_QUEUE \(3 rules\) and 1 jump to it/, /removed nat chain SLUICE_SNAT \(0 rules\)/, /no longer steered/] },
    { name: 'owners unreadable (not root): removed, with a note', queueTable: undefined, refused: undefined, notes: [/root-only/, /removed nat chain SLUICE_DNAT/] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      let t = tables();
      let removed = 0;
      const run = (): ReturnType<typeof removeFrontRules> =>
        removeFrontRules({ ...(c.queue !== undefined ? { queue: c.queue } : {}), host: host(c.queueTable), save: (x) => t[x] ?? '', remove: () => { removed++; t = { mangle: '', nat: '', filter: '' }; } });
      if (c.refused) {
        assert.throws(run, (err: unknown) => err instanceof FrontRunningError && (c.refused?.test(err.message) ?? false));
        assert.equal(removed, 0, 'nothing removed');
        return;
      }
      const out = run();
      assert.equal(removed, 1);
      assert.equal(out.removed.length, 3);
      for (const n of c.notes) assert.ok(out.notes.some((l) => n.test(l)), `${String(n)} in ${JSON.stringify(out.notes)}`);
      // Idempotent: a second run finds nothing and removes nothing.
      const again = run();
      assert.equal(removed, 1);
      assert.deepEqual(again.removed, []);
      assert.ok(again.notes.some((l) => /nothing to remove/.test(l)));
    });
  }
});

describe('remove-rules: the IPv6 services\' ip6tables chains and ip6 nft table', () => {
  // A node whose configuration had IPv6 services: the same queue chain in ip6tables (queue 5 there;
  // the legacy nat chains are IPv4's only).
  const mangle6 = MANGLE.replace(/--queue-num 3/g, '--queue-num 5');
  const cases: { name: string; queueTable: string; refused: RegExp | undefined }[] = [
    { name: 'the queue only the ip6tables rules name is bound: refused', queueTable: '    5   4242     0 2 65531     0     0        0  1\n', refused: /NFQUEUE 5 / },
    { name: 'no front node bound: both families removed and reported', queueTable: '', refused: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => {
      let t4: Record<string, string> = { mangle: MANGLE, nat: NAT, filter: '' };
      let t6: Record<string, string> = { mangle: mangle6, nat: '', filter: '' };
      let nft6 = true;
      let removed = 0;
      const run = (): ReturnType<typeof removeFrontRules> =>
        removeFrontRules({
          host: host(c.queueTable),
          save: (x) => t4[x] ?? '',
          save6: (x) => t6[x] ?? '',
          nftPresent: () => false,
          nftPresent6: () => nft6,
          remove: () => {
            removed++;
            t4 = { mangle: '', nat: '', filter: '' };
            t6 = { mangle: '', nat: '', filter: '' };
            nft6 = false;
          },
        });
      if (c.refused) {
        assert.throws(run, (err: unknown) => err instanceof FrontRunningError && (c.refused?.test(err.message) ?? false));
        assert.equal(removed, 0, 'nothing removed');
        return;
      }
      const out = run();
      assert.equal(removed, 1);
      assert.deepEqual(out.removed.map((f) => `${String(f.family)} ${f.table}/${f.chain}`), ['4 mangle/SLUICE_QUEUE', '4 nat/SLUICE_DNAT', '4 nat/SLUICE_SNAT', '6 mangle/SLUICE_QUEUE']);
      for (const n of [/removed nft table ip6 sluice/, /removed ip6tables mangle chain SLUICE_QUEUE \(3 rules\)/, /removed mangle chain SLUICE_QUEUE/]) assert.ok(out.notes.some((l) => n.test(l)), `${String(n)} in ${JSON.stringify(out.notes)}`);
      assert.ok(run().notes.some((l) => /nothing to remove/.test(l)), 'idempotent');
    });
  }
});
