/**
 * No packet to a VIP leaves unsteered (issue 20 part 5), and the
 * daemon-down fallback spreads over usable servers only (part 3), on the
 * testbed: real NFQUEUE, the real nft table, curl and nginx.
 *
 * The front node has no local or blackhole route for the VIP here (the
 * testbed's default route points back at the WAN), so without the guard a
 * VIP packet that gets no DNAT decision would go back out the uplink. The
 * truth is read from two kernel counters: one in the WAN namespace
 * counting packets to the VIP that arrive from the front node's uplink,
 * and the guard's own drop counter in the front namespace.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { TcpFlag } from '../../src/packet/ipv4.ts';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { icmp, tcp, udp } from '../helpers/packets.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const testbed = useTestbed({ clusters: 1, clients: 1, serversPerCluster: 3, extraClientAddresses: 24 });
const VIP = '198.19.1.1';

function configYaml(socket: string): string {
  return `cluster: c1
uplinkAddress: 198.18.101.2
adminSocket: ${socket}
rules: { checkSeconds: 1 }
services:
  - name: www
    vip: ${VIP}
    port: 80
    method: byrequests
    # The queued path for every packet without a flow (SYN cookies answer
    # those in the kernel: test/netns/front-synproxy.test.ts).
    synproxy: false
    servers:
      - { name: s1a, address: 198.18.201.11 }
      - { name: s1b, address: 198.18.201.12 }
      - { name: s1c, address: 198.18.201.13 }
`;
}

function sendRaw(ns: string, packets: Uint8Array[]): void {
  const hex = packets.map((p) => Buffer.from(p).toString('hex'));
  nsRun(ns, 'python3', [
    '-c',
    'import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_RAW)\nfor h in sys.argv[2:]: s.sendto(bytes.fromhex(h),(sys.argv[1],0))',
    VIP,
    ...hex,
  ]);
}

/** The packets no steering decision covers: a FIN without a flow, a SYN to another port, UDP, an ICMP echo and an ICMP error quoting the VIP. */
function unsteered(src: string, port: number): Uint8Array[] {
  const quoted = tcp({ src: VIP, dst: src }, { srcPort: 80, dstPort: port, flags: TcpFlag.Syn | TcpFlag.Ack });
  return [
    tcp({ src, dst: VIP }, { srcPort: port, dstPort: 80, flags: TcpFlag.Fin | TcpFlag.Ack }),
    tcp({ src, dst: VIP }, { srcPort: port, dstPort: 81, flags: TcpFlag.Syn }),
    udp({ src, dst: VIP }, { srcPort: port, dstPort: 53, payload: [1, 2, 3, 4] }),
    icmp({ src, dst: VIP }, { type: 8, code: 0, id: port, seq: 1 }),
    // Port unreachable, quoting a packet "from the VIP" that no flow of ours carries.
    icmp({ src, dst: VIP }, { type: 3, code: 3, payload: [0, 0, 0, 0, ...Array.from(quoted.slice(0, 28))] }),
  ];
}

describe('sluice front: the VIP guard and the daemon-down fallback', () => {
  let front: FrontProcess | undefined;
  let frontNs = '';
  let client = '';
  let wan = '';
  let socket = '';
  let clientAddr = '';
  let extra: readonly string[] = [];

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0];
    frontNs = k?.front.name ?? '';
    client = st.plan.clients[0]?.name ?? '';
    clientAddr = st.plan.clients[0]?.address ?? '';
    extra = st.plan.clients[0]?.extraAddresses ?? [];
    wan = st.plan.wan.name;
    socket = join(st.runDir, 'front-guard.sock');
    // Packets to the VIP that come back from the front node's uplink: the loop the guard prevents.
    nsRun(wan, 'nft', ['-f', '-'], `table ip guardtest {\n chain pre {\n  type filter hook prerouting priority -300; policy accept;\n  iifname "${k?.wanIf ?? ''}" ip daddr ${VIP} counter\n }\n}\n`);
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-guard.yaml'), configYaml(socket)));
    await front.waitFor('front node ready');
  });

  after(async () => {
    await front?.stop();
  });

  /** Packets to the VIP that left the front node's uplink (the WAN's counter). */
  function leaked(): number {
    return Number(/counter packets (\d+)/.exec(nsRun(wan, 'nft', ['list', 'chain', 'ip', 'guardtest', 'pre']))?.[1] ?? 'NaN');
  }

  /** The guard's drop counter, read from the kernel. */
  function guardDrops(): number {
    return Number(/packets (\d+)/.exec(nsRun(frontNs, 'nft', ['list', 'counter', 'ip', 'sluice', 'vip_guard_drops']))?.[1] ?? 'NaN');
  }

  async function status(): Promise<FrontStatus> {
    const r = await nsRunAsync(frontNs, BIN, ['ctl', '--socket', socket, 'status']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as FrontStatus;
  }

  async function curlFrom(src: string): Promise<string> {
    const r = await nsRunAsync(client, 'curl', ['-s', '-m', '3', '--interface', src, `http://${VIP}/`]);
    assert.equal(r.code, 0, `curl from ${src}: ${r.stderr}`);
    return r.stdout.split(' ')[1] ?? '?';
  }

  it('daemon running: unsteered packets are dropped and counted at the node, none leaves the uplink; the FIN by the engine', async () => {
    assert.equal(await curlFrom(clientAddr).then((s) => /^s1[abc]$/.test(s)), true);
    const drops0 = guardDrops();
    const before = await status();
    sendRaw(client, unsteered(clientAddr, 40001));
    const ping = await nsRunAsync(client, 'ping', ['-c', '1', '-W', '1', VIP]);
    assert.notEqual(ping.code, 0, 'no echo reply: the echo request was dropped');
    // The engine drops the FIN (queued: no kernel flow) and counts it; the guard drops the rest.
    await until(async () => (await status()).counters.teardownNoRecord > before.counters.teardownNoRecord, 'the FIN without a record counted by the engine', 10_000, 100);
    await until(() => guardDrops() >= drops0 + 5, 'the guard drops the SYN to port 81, the UDP datagram, the ICMP errors and both echoes', 10_000, 100);
    assert.equal(leaked(), 0, 'no packet to the VIP left the front node');
    // The daemon exports the kernel's counter (read at its rule check).
    await until(async () => (await status()).vipGuard.packets >= drops0 + 5, 'status shows the guard drops', 10_000, 200);
  });

  it('a drain changes the fallback to the usable servers only; with the daemon killed (SIGKILL) new connections spread over them, and unsteered packets are still dropped', async () => {
    const drained = await nsRunAsync(frontNs, BIN, ['ctl', '--socket', socket, 'drain', 'www', 's1b']);
    assert.equal(drained.code, 0, drained.stderr);
    // The map now holds s1a and s1c only (the drain's reload rendered it), 256 slots.
    await until(() => !nsRun(frontNs, 'nft', ['list', 'map', 'ip', 'sluice', 'fallback']).includes('198.18.201.12 . 80'), 'the drained server out of the fallback map', 10_000, 100);
    const map = nsRun(frontNs, 'nft', ['list', 'map', 'ip', 'sluice', 'fallback']);
    assert.match(map, /198\.18\.201\.11 \. 80/);
    assert.match(map, /198\.18\.201\.13 \. 80/);

    front?.signal('SIGKILL');
    await new Promise((r) => front?.child.once('exit', r));
    // Nobody reads the queue: the kernel's fallback decides, by source address.
    const seen: Record<string, number> = {};
    for (const src of [clientAddr, ...extra]) {
      const s = await curlFrom(src);
      seen[s] = (seen[s] ?? 0) + 1;
    }
    assert.equal(seen['s1b'], undefined, `no connection to the drained server: ${JSON.stringify(seen)}`);
    assert.ok((seen['s1a'] ?? 0) > 0 && (seen['s1c'] ?? 0) > 0, `both usable servers get connections: ${JSON.stringify(seen)}`);

    const drops0 = guardDrops();
    sendRaw(client, unsteered(clientAddr, 40002));
    await until(() => guardDrops() >= drops0 + 5, 'the guard drops the FIN, the SYN to port 81, the UDP datagram and the ICMP packets', 10_000, 100);
    assert.equal(leaked(), 0, 'no packet to the VIP left the front node with the daemon away');
  });
});
