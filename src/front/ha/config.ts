/**
 * The `ha:` section of the front config (issue 21): a pair of front nodes
 * per cluster, active/backup, with keepalived (VRRPv3) moving the uplink
 * and LAN virtual addresses together and conntrackd (FTFW) replicating the
 * kernel's flows to the backup. The same block goes on both nodes; the
 * top-level `node` says which one this is. `sluice ha render` writes the
 * two daemons' files from it (render.ts), so addresses, priorities and
 * interfaces are never aligned by hand.
 *
 * checkHa() holds the checks that need the rest of the front config
 * (`node`, `uplinkAddress`, `lanInterface`); the section's own checks are
 * in its superRefine. Every message names the key and the fix.
 */
import { isIPv6 } from 'node:net';
import { z } from 'zod';
import { InvalidArgumentError } from '../../errors/errors.ts';
import { inPrefix as inNet, parseIPv4Address } from '../../packet/address.ts';

const ipv4 = z.ipv4({ error: 'expected an IPv4 address like 198.18.101.2' });
const ifname = z.string({ error: 'expected an interface name' }).regex(/^[A-Za-z0-9_.-]{1,15}$/, 'an interface name (at most 15 characters)');
const nodeName = z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/, 'names are 1-32 letters, digits, _ . - (starting with a letter or digit)');
/**
 * An absolute path without white space or quotes: the paths are written
 * into keepalived's quoted notify command, which keepalived splits at
 * spaces (and conntrackd's config, which has no quoting at all).
 */
const absolute = (key: string): z.ZodString =>
  z
    .string()
    .startsWith('/', `ha.files.${key} must be an absolute path`)
    .regex(/^[^\s"'\\]+$/, `ha.files.${key} is a path without spaces, quotes or backslashes (it is written into keepalived's notify command)`);
/** ADDRESS/PREFIX, prefix 1..32 (keepalived's virtual_ipaddress form). */
const cidr = z
  .string({ error: 'expected an address with its prefix length, like 198.18.101.10/24' })
  .refine((v) => parseCidr(v) !== undefined, 'expected an address with its prefix length, like 198.18.101.10/24 (prefix 1..32)');

/** ADDRESS/PREFIX for IPv6, prefix 1..128: the IPv6 twin of a virtual address (keepalived's virtual_ipaddress_excluded). */
const cidr6 = z
  .string({ error: 'expected an IPv6 address with its prefix length, like 2001:2:0:101::10/64' })
  .refine((v) => parseCidr6(v) !== undefined, 'expected an IPv6 address with its prefix length, like 2001:2:0:101::10/64 (prefix 1..128)')
  .transform((v) => {
    const c = parseCidr6(v);
    return c === undefined ? v : `${c.address}/${String(c.prefix)}`;
  });

const haNode = z.strictObject({
  name: nodeName.describe('The node\'s name: the top-level `node` of its own front config (its control-plane name).'),
  priority: z
    .int({ error: 'ha.nodes[].priority is an integer 1..254' })
    .min(1, 'ha.nodes[].priority is 1..254 (255 is reserved for an address owner)')
    .max(254, 'ha.nodes[].priority is 1..254 (255 is reserved for an address owner)')
    .describe('VRRP priority. The higher one becomes master when both start together; with `preempt: false` a running master keeps the role whatever the priorities.'),
  uplinkAddress: ipv4.describe('The node\'s own address on the uplink interface (inside `ha.uplink.virtualAddress`\'s prefix): VRRP adverts are sent from it (to the multicast group, or to the peer\'s with `ha.unicast`).'),
  lanAddress: ipv4.describe('The node\'s own address on the LAN interface (inside `ha.lan.virtualAddress`\'s prefix): VRRP adverts and health checks are sent from it.'),
  syncAddress: ipv4.describe('The node\'s address on the sync interface: conntrackd sends its flow updates from it to the peer\'s. Over the LAN (no dedicated link): `ha.sync.interface` = the LAN interface and this = `lanAddress`.'),
});

const instance = (what: string, defaultIf: string) =>
  z.strictObject({
    interface: ifname.default(defaultIf).describe(`The interface the ${what} virtual address lives on (both nodes name it the same).`),
    virtualAddress: cidr.describe(`The ${what} virtual address with its prefix length (ADDRESS/PREFIX): held by the master only; the node addresses must be inside the prefix.`),
    virtualAddress6: cidr6
      .optional()
      .describe(`The ${what} virtual address's IPv6 twin with its prefix length (ADDRESS/PREFIX), for a dual-stack ${what}: held by the master with the IPv4 one (keepalived's \`virtual_ipaddress_excluded\` of the same instance: VRRP carries one family per instance, and keepalived adds and removes the excluded addresses with the others, with unsolicited neighbour adverts). Absent: the ${what} side is IPv4 only.`),
    routerId: z
      .int({ error: 'routerId is an integer 1..255' })
      .min(1, 'routerId is 1..255')
      .max(255, 'routerId is 1..255')
      .describe('VRRP virtual_router_id: unique per network segment among VRRP routers (both nodes use the same). Uplink and LAN instances take different ids.'),
  });

export const haSchema = z
  .strictObject({
    nodes: z
      .array(haNode)
      .length(2, 'ha.nodes lists exactly 2 front nodes (active/backup): this one and its peer')
      .describe('The two front nodes of this cluster, the same list on both (this node is the one named by the top-level `node`).'),
    uplink: instance('uplink', 'wan0').describe('The VRRP instance of the uplink side: the address the WAN routes the cluster\'s VIPs to (the top-level `uplinkAddress`).'),
    lan: instance('LAN', 'lan0').describe('The VRRP instance of the LAN side: the servers\' default gateway address. It moves with the uplink instance (one vrrp_sync_group).'),
    advertSeconds: z
      .number()
      .min(0.01, 'ha.advertSeconds is 0.01..40')
      .max(40, 'ha.advertSeconds is 0.01..40')
      .refine((v) => Math.abs(Math.round(v * 100) - v * 100) < 1e-6, 'ha.advertSeconds is in steps of 0.01 s (VRRPv3 counts centiseconds)')
      .default(1)
      .describe('VRRPv3 advert interval (seconds, steps of 0.01). The backup takes over after about 3 × this (plus skew) without adverts.'),
    preempt: z
      .boolean()
      .default(false)
      .describe('false (default): both nodes start as backup with `nopreempt`, so a returning node stays backup (no second interruption, no flapping). true: the higher priority takes the role back after `preemptDelaySeconds`.'),
    unicast: z
      .boolean()
      .default(false)
      .describe('false (default): VRRP adverts go to the VRRP multicast group (224.0.0.18) on the uplink and LAN segments, as VRRP does by default. true: unicast from each node\'s address to the peer\'s (`unicast_src_ip`/`unicast_peer`), for networks that drop multicast; measured here: a node whose links came back after its death missed the master\'s unicast adverts for seconds (the master\'s neighbour entry for it had failed) and took the role too (both masters), which multicast does not do.'),
    preemptDelaySeconds: z
      .int({ error: 'ha.preemptDelaySeconds is an integer 0..1000' })
      .min(0, 'ha.preemptDelaySeconds is 0..1000')
      .max(1000, 'ha.preemptDelaySeconds is 0..1000')
      .default(30)
      .describe('With `preempt: true`: seconds a returning higher-priority node waits before it takes the role back (keepalived `preempt_delay`). Ignored otherwise.'),
    sync: z
      .strictObject({
        interface: ifname.describe('Interface conntrackd replicates flows over: a dedicated link (recommended), or the LAN interface (then each node\'s `syncAddress` is its `lanAddress`).'),
        port: z.int({ error: 'ha.sync.port is a port number' }).min(1, 'a port is 1..65535').max(65535, 'a port is 1..65535').default(3780).describe('UDP port of conntrackd\'s FTFW channel (both directions).'),
      })
      .describe('conntrackd\'s sync channel: FTFW over UDP between the nodes\' `syncAddress`.'),
    files: z
      .strictObject({
        keepalived: absolute('keepalived').default('/etc/keepalived/keepalived.conf').describe('Where `sluice ha render` writes keepalived.conf.'),
        conntrackd: absolute('conntrackd').default('/etc/conntrackd/conntrackd.conf').describe('Where `sluice ha render` writes conntrackd.conf; the notify hook runs `conntrackd -C` with it, and so does the daemon\'s sync-state read.'),
        conntrackdSocket: absolute('conntrackdSocket').default('/run/conntrackd.ctl').describe('conntrackd\'s UNIX control socket (its `UNIX { Path }`).'),
        conntrackdLock: absolute('conntrackdLock').default('/run/lock/conntrackd.lock').describe('conntrackd\'s lock file (its `LockFile`).'),
        conntrackdLog: absolute('conntrackdLog').default('/var/log/conntrackd.log').describe('conntrackd\'s log file (its `LogFile`).'),
        notify: absolute('notify').default('/opt/sluice/deploy/ha/sluice-ha-notify').describe('The keepalived notify hook (deploy/ha/sluice-ha-notify, installed under /opt/sluice): commits conntrackd\'s state on MASTER, then tells this front node its role.'),
      })
      .prefault({})
      .describe('Paths of the rendered files and of what the notify hook uses (Debian defaults).'),
  })
  .superRefine((ha, ctx) => {
    const [a, b] = ha.nodes;
    if (a !== undefined && b !== undefined) {
      if (a.name === b.name) ctx.addIssue({ code: 'custom', path: ['nodes', 1, 'name'], message: `both nodes are named "${a.name}": give each front node its own name (its top-level \`node\`)` });
      if (a.priority === b.priority) ctx.addIssue({ code: 'custom', path: ['nodes', 1, 'priority'], message: `both nodes have priority ${String(a.priority)}: give them different priorities (e.g. 150 and 100) so the start-up election is decided` });
      for (const key of ['uplinkAddress', 'lanAddress', 'syncAddress'] as const) {
        if (a[key] === b[key]) ctx.addIssue({ code: 'custom', path: ['nodes', 1, key], message: `both nodes have ${key} ${a[key]}: each node has its own address` });
      }
    }
    if (ha.uplink.routerId === ha.lan.routerId) ctx.addIssue({ code: 'custom', path: ['lan', 'routerId'], message: `ha.uplink.routerId and ha.lan.routerId are both ${String(ha.lan.routerId)}: give the two VRRP instances different ids (e.g. 51 and 52)` });
    if (ha.uplink.virtualAddress6 !== undefined && ha.uplink.virtualAddress6.split('/')[0] === ha.lan.virtualAddress6?.split('/')[0]) ctx.addIssue({ code: 'custom', path: ['lan', 'virtualAddress6'], message: `ha.uplink.virtualAddress6 and ha.lan.virtualAddress6 are both ${ha.lan.virtualAddress6}: the uplink and the LAN each have their own IPv6 virtual address` });
    if (ha.uplink.interface === ha.lan.interface) ctx.addIssue({ code: 'custom', path: ['lan', 'interface'], message: `ha.uplink.interface and ha.lan.interface are both ${ha.lan.interface}: the uplink and the LAN are two interfaces` });
    const sides = [
      { key: 'uplink', vip: parseCidr(ha.uplink.virtualAddress), own: 'uplinkAddress' },
      { key: 'lan', vip: parseCidr(ha.lan.virtualAddress), own: 'lanAddress' },
    ] as const;
    const all = ha.nodes.flatMap((n) => [n.uplinkAddress, n.lanAddress, n.syncAddress]);
    for (const side of sides) {
      const v = side.vip;
      if (v === undefined) continue;
      if (all.includes(v.address)) ctx.addIssue({ code: 'custom', path: [side.key, 'virtualAddress'], message: `ha.${side.key}.virtualAddress ${v.address} is also a node's own address: the virtual address is a third address that moves between the nodes` });
      ha.nodes.forEach((n, i) => {
        if (!inPrefix(n[side.own], v)) ctx.addIssue({ code: 'custom', path: ['nodes', i, side.own], message: `${n[side.own]} is outside ha.${side.key}.virtualAddress ${ha[side.key].virtualAddress}: a node's ${side.own} is on the same subnet as the virtual address (VRRP adverts and the address move on it)` });
      });
    }
  });

export type HaConfig = z.output<typeof haSchema>;
export type HaNode = HaConfig['nodes'][number];

/** What checkHa needs from the rest of the front config. */
export interface HaContext {
  readonly cluster: string;
  readonly node?: string | undefined;
  readonly uplinkAddress: string;
  readonly uplinkAddress6?: string | undefined;
  readonly lanInterface: string;
  readonly adminSocket: string;
  readonly ha?: HaConfig | undefined;
}

/** Checks of the ha section against the rest of the front config (called from the front schema's superRefine). */
export function checkHa(cfg: HaContext, ctx: z.RefinementCtx): void {
  const ha = cfg.ha;
  if (ha === undefined) return;
  const me = cfg.node ?? cfg.cluster;
  const names = ha.nodes.map((n) => n.name);
  if (!names.includes(me)) {
    ctx.addIssue({ code: 'custom', path: ['node'], message: `this node is "${me}"${cfg.node === undefined ? ' (node defaults to cluster)' : ''}, which is not one of ha.nodes[].name (${names.join(', ')}): set the top-level node to this host's entry` });
  }
  const up6 = ha.uplink.virtualAddress6 === undefined ? undefined : parseCidr6(ha.uplink.virtualAddress6);
  if (cfg.uplinkAddress6 !== undefined && up6?.address !== cfg.uplinkAddress6) {
    ctx.addIssue({
      code: 'custom',
      path: ['uplinkAddress6'],
      message:
        up6 === undefined
          ? `${cfg.uplinkAddress6} is an IPv6 uplink address the pair does not hold: with ha, set ha.uplink.virtualAddress6 (${cfg.uplinkAddress6}/PREFIX) so that the master holds it`
          : `${cfg.uplinkAddress6} is an IPv6 uplink address outside the VRRP instance: with ha, uplinkAddress6 is the uplink's IPv6 virtual address (${up6.address}, ha.uplink.virtualAddress6)`,
    });
  }
  const up = parseCidr(ha.uplink.virtualAddress);
  if (up !== undefined && up.address !== cfg.uplinkAddress) {
    ctx.addIssue({ code: 'custom', path: ['uplinkAddress'], message: `${cfg.uplinkAddress} is an uplink address outside the VRRP instance: with ha, uplinkAddress is the uplink virtual address (${up.address}, ha.uplink.virtualAddress), which the WAN routes to and overflow is SNATed to` });
  }
  if (!/^[^\s"'\\]+$/.test(cfg.adminSocket)) {
    ctx.addIssue({ code: 'custom', path: ['adminSocket'], message: 'with ha, adminSocket is a path without spaces, quotes or backslashes: the notify hook is given it in keepalived\'s notify command' });
  }
  if (ha.lan.interface !== cfg.lanInterface) {
    ctx.addIssue({ code: 'custom', path: ['ha', 'lan', 'interface'], message: `ha.lan.interface ${ha.lan.interface} is not lanInterface ${cfg.lanInterface}: the LAN virtual address lives on the interface toward the servers; make them the same` });
  }
}

/** This node's entry and its peer's (the config was validated: `node` names one of the two). */
export function haPair(ha: HaConfig, me: string): { self: HaNode; peer: HaNode } {
  const self = ha.nodes.find((n) => n.name === me);
  const peer = ha.nodes.find((n) => n.name !== me);
  if (self === undefined || peer === undefined) throw new InvalidArgumentError(`ha.nodes has no entry "${me}" and a peer (the config was not validated)`);
  return { self, peer };
}

export interface Cidr {
  readonly address: string;
  readonly prefix: number;
}

export function parseCidr(text: string): Cidr | undefined {
  const m = /^([0-9.]+)\/(\d{1,2})$/.exec(text);
  if (!m?.[1] || !m[2]) return undefined;
  const prefix = Number(m[2]);
  if (parseIPv4Address(m[1]) === undefined || prefix < 1 || prefix > 32) return undefined;
  return { address: m[1], prefix };
}

/**
 * ADDRESS/PREFIX for IPv6 (prefix 1..128), the address in canonical text
 * (RFC 5952, as the front config's uplinkAddress6 is kept) so the two
 * compare as strings.
 */
export function parseCidr6(text: string): Cidr | undefined {
  const m = /^([0-9A-Fa-f:.]+)\/(\d{1,3})$/.exec(text);
  if (!m?.[1] || !m[2] || !isIPv6(m[1])) return undefined;
  const prefix = Number(m[2]);
  if (prefix < 1 || prefix > 128) return undefined;
  return { address: new URL(`http://[${m[1]}]/`).hostname.slice(1, -1), prefix };
}

/** `address` is inside `net`'s prefix. */
export function inPrefix(address: string, net: Cidr): boolean {
  const a = parseIPv4Address(address);
  const b = parseIPv4Address(net.address);
  return a !== undefined && b !== undefined && inNet(a, b, net.prefix);
}
