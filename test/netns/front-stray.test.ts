/**
 * A server's packet that the front node's kernel has no flow for never
 * leaves un-NATed (nft.ts classify, counter stray_replies), in both
 * families, on the testbed: real nginx, curl, conntrack, the real nft table.
 *
 * This is what a pair's new master sees between keepalived moving the LAN
 * gateway and the notify hook committing the replicated flows (the pair
 * tests' failovers). Here the flow's entry is deleted on a single front
 * node (`conntrack -D`, nf_conntrack_tcp_loose=0 as on every testbed front
 * node) in the middle of a rate-limited download: the server's
 * retransmissions then have no NAT binding. Sent on, each would reach the
 * client from the server's own address and draw a reset to that address,
 * which would kill the server's end of the connection. The truth is read
 * from the client's own kernel: a counting table there sees every TCP
 * packet from port 80 of an address other than the VIP, and every reset
 * the client sends.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { NFT_TABLE, STRAY_COUNTER } from '../../src/front/nft.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, useTestbed } from '../helpers/testbed.ts';
import { sleep, until } from '../helpers/wait.ts';

const testbed = useTestbed({ clusters: 1, clients: 1, serversPerCluster: 1, blobMiB: 20 });
const PROBE = 'sluice_test_stray';

describe('sluice front: a server packet without a flow is dropped and counted, never sent on un-NATed', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';
  let client = '';

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0];
    const c = st.plan.clients[0];
    assert.ok(k && c);
    frontNs = k.front.name;
    client = c.name;
    const cfg = `cluster: c1
uplinkAddress: ${k.uplinkAddress}
uplinkAddress6: "${k.uplinkAddress6}"
adminSocket: ${join(st.runDir, 'front-stray.sock')}
rules: { checkSeconds: 1 }
services:
  - { name: www, vip: ${k.vip}, port: 80, method: byrequests, synproxy: false, servers: [${k.servers.map((s) => `{ name: ${s.id}, address: ${s.address} }`).join(', ')}] }
  - { name: www6, vip: "${k.vip6}", port: 80, method: byrequests, servers: [${k.servers.map((s) => `{ name: ${s.id}6, address: "${s.address6}" }`).join(', ')}] }
`;
    // The client's view: TCP from port 80 of anything but a VIP (an
    // un-NATed server packet), and the resets it sends.
    nsRun(client, 'nft', ['-f', '-'], `table inet ${PROBE} {
  counter unnatted { }
  counter resets { }
  chain in {
    type filter hook input priority -300; policy accept;
    ip saddr != ${k.vip} tcp sport 80 counter name unnatted
    ip6 saddr != ${k.vip6} tcp sport 80 counter name unnatted
  }
  chain out {
    type filter hook output priority -300; policy accept;
    tcp flags & rst == rst counter name resets
  }
}
`);
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-stray.yaml'), cfg));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  const clientCount = (name: string): number => Number(/packets (\d+)/.exec(nsRun(client, 'nft', ['list', 'counter', 'inet', PROBE, name]))?.[1] ?? 'NaN');
  const strays = (fam: 'ip' | 'ip6'): number => Number(/packets (\d+)/.exec(nsRun(frontNs, 'nft', ['list', 'counter', fam, NFT_TABLE, STRAY_COUNTER]))?.[1] ?? 'NaN');

  for (const fam of ['ip', 'ip6'] as const) {
    it(`${fam === 'ip' ? 'IPv4' : 'IPv6'}: the flow's entry deleted mid-download, the server's packets are dropped at the front node; none reaches the client, which sends no reset`, async () => {
      const st = testbed();
      const k = st.plan.clusters[0];
      assert.ok(k);
      const vip = fam === 'ip' ? k.vip : k.vip6;
      // 20 MiB at 1 MB/s: the download outlasts the case; killed at its end.
      const curl = spawn('ip', ['netns', 'exec', client, 'curl', fam === 'ip' ? '-4' : '-6', '-g', '-s', '-o', '/dev/null', '--limit-rate', '1M', '-m', '60', `http://${fam === 'ip' ? vip : `[${vip}]`}/blob.bin`], { stdio: 'ignore' });
      try {
        const flows = (): string => nsRun(frontNs, 'conntrack', ['-L', '-f', fam === 'ip' ? 'ipv4' : 'ipv6', '-p', 'tcp', '-d', vip, '--state', 'ESTABLISHED']);
        await until(() => flows().includes('ESTABLISHED'), `the download's flow through ${vip}`, 10_000, 100);
        await sleep(500); // well into the transfer
        const unnatted0 = clientCount('unnatted');
        const resets0 = clientCount('resets');
        const strays0 = strays(fam);
        nsRun(frontNs, 'conntrack', ['-D', '-f', fam === 'ip' ? 'ipv4' : 'ipv6', '-p', 'tcp', '-d', vip]);
        // The server retransmits what the client can no longer acknowledge
        // (its ACKs meet no flow either: queued, and dropped by the daemon).
        // Either way: dropped at the front node, or (the fault) arriving un-NATed at the client.
        await until(() => strays(fam) >= strays0 + 2 || clientCount('unnatted') > unnatted0, 'server packets without a flow, dropped or at the client', 15_000, 100);
        await sleep(1000);
        const dropped = strays(fam) - strays0;
        const unnatted = clientCount('unnatted') - unnatted0;
        const resets = clientCount('resets') - resets0;
        console.log(`# ${fam}: ${String(dropped)} stray server packets dropped at the front node; the client got ${String(unnatted)} un-NATed, sent ${String(resets)} resets`);
        assert.equal(unnatted, 0, 'server packets reached the client un-NATed');
        assert.equal(resets, 0, 'the client sent resets');
        assert.ok(dropped >= 2, `${String(dropped)} stray server packets counted`);
        // The operator's view: status (and /metrics) carry the kernel's count, read at each rule check.
        const kernel = strays(fam);
        const key = fam === 'ip' ? 'ipv4' : 'ipv6';
        await until(async () => ((await front!.status())['kernelCounts'] as { strayReplies: Record<string, number> }).strayReplies[key]! >= kernel, 'status shows the stray drops', 10_000, 200);
      } finally {
        curl.kill();
      }
    });
  }
});
