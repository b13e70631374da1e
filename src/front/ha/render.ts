/**
 * keepalived.conf and conntrackd.conf for one node of a front-node pair,
 * from the front config's `ha:` section (`sluice ha render`). Pure: text
 * in, text out. Both nodes render from the same block, so the peer's
 * addresses, the priorities, the router ids and the interfaces can never
 * disagree between the four files.
 *
 * The shapes are the ones proven in network namespaces (kill -9 of the
 * master's keepalived and conntrackd: takeover in ~1.1 s at advert 0.3 s,
 * downloads intact; the old master back as backup with no preemption):
 *
 * keepalived: one vrrp_sync_group of two VRRPv3 instances (uplink and LAN),
 *   so the servers' gateway moves with the address the WAN routes to: a
 *   master holding only one of them would black-hole the return path.
 *   Unicast adverts between the node addresses (no multicast needed on the
 *   segments). `state BACKUP` on both nodes: the first election is by
 *   priority, and no node claims the addresses before it has listened.
 *   A dual-stack side's IPv6 twin (`virtualAddress6`) is in the same
 *   instance's virtual_ipaddress_excluded, so both families move in one
 *   election.
 *   Without preemption (`nopreempt`), a node that returns stays backup. The
 *   group's notify hook gets keepalived's `GROUP NAME STATE PRIORITY`
 *   appended to the arguments given here.
 *
 * conntrackd: FTFW (reliable, with resends) over UDP on the sync link,
 *   external cache on (the backup keeps the peer's flows apart until the
 *   notify hook commits them), kernel-space filtering that ignores the
 *   nodes' own and the virtual addresses (their flows are the node's own:
 *   VRRP, control plane, health checks) and loopback, of both families.
 *   IPv6 client flows are replicated as IPv4 ones are.
 */
import { SluiceError } from '../../errors/errors.ts';
import type { FrontConfig } from '../config.ts';
import { frontNodeName } from '../config.ts';
import { haPair, parseCidr, parseCidr6, type HaConfig } from './config.ts';

export interface RenderedHa {
  readonly node: string;
  readonly peer: string;
  readonly keepalived: string;
  readonly conntrackd: string;
}

/** The notify command keepalived runs (its arguments before keepalived's own four). */
export function notifyCommand(ha: HaConfig, adminSocket: string): string {
  return `${ha.files.notify} --conntrackd-config ${ha.files.conntrackd} --admin-socket ${adminSocket}`;
}

/** The VRRP instance and group names of a cluster (keepalived's logs and the notify hook's GROUP name). */
export function vrrpNames(cluster: string): { group: string; uplink: string; lan: string } {
  return { group: `sluice_${cluster}`, uplink: `sluice_${cluster}_uplink`, lan: `sluice_${cluster}_lan` };
}

/** Seconds in keepalived's notation (at most two decimals: VRRPv3 counts centiseconds). */
function seconds(x: number): string {
  return String(Math.round(x * 100) / 100);
}

function header(cfg: Readonly<FrontConfig>, node: string, source: string | undefined): string[] {
  return [
    `# Written by \`sluice ha render\` for front node ${node} of cluster ${cfg.cluster}${source !== undefined ? `, from ${source}` : ''}.`,
    '# Do not edit: change the ha section of the front config (the same on both nodes) and render again.',
  ];
}

export function renderKeepalived(cfg: Readonly<FrontConfig>, source?: string): string {
  const ha = requireHa(cfg);
  const me = frontNodeName(cfg);
  const { self, peer } = haPair(ha, me);
  const names = vrrpNames(cfg.cluster);
  const preempt = ha.preempt ? [`  preempt_delay ${String(ha.preemptDelaySeconds)}`] : ['  nopreempt'];
  const instance = (name: string, side: 'uplink' | 'lan', own: string, theirs: string): string[] => [
    `vrrp_instance ${name} {`,
    '  state BACKUP',
    ...preempt,
    `  interface ${ha[side].interface}`,
    `  virtual_router_id ${String(ha[side].routerId)}`,
    `  priority ${String(self.priority)}`,
    `  advert_int ${seconds(ha.advertSeconds)}`,
    // Multicast by default (224.0.0.18, VRRP's own group): no neighbour
    // entry to resolve, so a peer whose links come back hears the master's
    // first advert. Unicast only where the network drops multicast.
    ...(ha.unicast ? [`  unicast_src_ip ${own}`, '  unicast_peer {', `    ${theirs}`, '  }'] : []),
    '  virtual_ipaddress {',
    `    ${ha[side].virtualAddress} dev ${ha[side].interface}`,
    '  }',
    // The IPv6 twin rides in the same instance, outside the adverts: VRRP
    // carries one family per instance, and keepalived's manual names
    // virtual_ipaddress_excluded for a mixture of IPv4 and IPv6. keepalived
    // adds and removes it with the IPv4 address (nodad by default: no DAD
    // delay before the new master can use it) and sends unsolicited
    // neighbour adverts for it, so one election moves both families.
    ...(ha[side].virtualAddress6 !== undefined ? ['  virtual_ipaddress_excluded {', `    ${ha[side].virtualAddress6} dev ${ha[side].interface}`, '  }'] : []),
    '}',
  ];
  return [
    ...header(cfg, me, source),
    `# Peer: ${peer.name} (priority ${String(peer.priority)}, uplink ${peer.uplinkAddress}, LAN ${peer.lanAddress}).`,
    'global_defs {',
    `  router_id sluice-${cfg.cluster}-${me}`,
    '  vrrp_version 3',
    // The notify hook runs as root (conntrackd -C needs it); keepalived then
    // refuses a script any other user could write.
    '  enable_script_security',
    '  script_user root',
    // Gratuitous ARPs for the moved addresses: once at once, again after 1 s.
    '  vrrp_garp_master_delay 1',
    '  vrrp_garp_master_repeat 3',
    '}',
    '',
    `vrrp_sync_group ${names.group} {`,
    '  group {',
    `    ${names.uplink}`,
    `    ${names.lan}`,
    '  }',
    `  notify "${notifyCommand(ha, cfg.adminSocket)}"`,
    '}',
    '',
    ...instance(names.uplink, 'uplink', self.uplinkAddress, peer.uplinkAddress),
    '',
    ...instance(names.lan, 'lan', self.lanAddress, peer.lanAddress),
    '',
  ].join('\n');
}

export function renderConntrackd(cfg: Readonly<FrontConfig>, source?: string): string {
  const ha = requireHa(cfg);
  const me = frontNodeName(cfg);
  const { self, peer } = haPair(ha, me);
  const virtual = [ha.uplink.virtualAddress, ha.lan.virtualAddress].map((v) => parseCidr(v)?.address ?? v);
  const ignore = [...new Set(['127.0.0.1', ...virtual, ...[self, peer].flatMap((n) => [n.uplinkAddress, n.lanAddress, n.syncAddress])])];
  // The IPv6 virtual addresses' own flows too. IPv6 client flows are
  // replicated like IPv4 ones: the protocol filter names no family, and an
  // address filter of one family leaves the other's flows alone.
  const virtual6 = [ha.uplink.virtualAddress6, ha.lan.virtualAddress6].flatMap((v) => (v === undefined ? [] : [parseCidr6(v)?.address ?? v]));
  const ignore6 = virtual6.length === 0 ? [] : [...new Set(['::1', ...virtual6])];
  const f = ha.files;
  return [
    ...header(cfg, me, source),
    `# Peer: ${peer.name} (sync ${peer.syncAddress}).`,
    'Sync {',
    '  Mode FTFW {',
    // The peer's flows stay in the external cache until the notify hook
    // commits them (conntrackd -c) when this node becomes master.
    '    DisableExternalCache off',
    // A (re)started conntrackd asks the peer for its whole table.
    '    StartupResync on',
    '  }',
    '  UDP {',
    `    IPv4_address ${self.syncAddress}`,
    `    IPv4_Destination_Address ${peer.syncAddress}`,
    `    Port ${String(ha.sync.port)}`,
    `    Interface ${ha.sync.interface}`,
    '    SndSocketBuffer 1249280',
    '    RcvSocketBuffer 1249280',
    '    Checksum on',
    '  }',
    '}',
    '',
    'General {',
    // Debian's conntrackd.service is Type=notify: without sd_notify the unit
    // never becomes ready and systemd kills it. Outside systemd (no
    // NOTIFY_SOCKET) the notification is a no-op.
    '  Systemd on',
    '  HashSize 32768',
    '  HashLimit 131072',
    `  LogFile ${f.conntrackdLog}`,
    `  LockFile ${f.conntrackdLock}`,
    '  UNIX {',
    `    Path ${f.conntrackdSocket}`,
    '  }',
    '  NetlinkBufferSize 2097152',
    '  NetlinkBufferSizeMaxGrowth 8388608',
    '  NetlinkOverrunResync on',
    '  NetlinkEventsReliable on',
    '  Filter From Kernelspace {',
    '    Protocol Accept {',
    '      TCP UDP',
    '    }',
    // The nodes' own flows (VRRP, control plane, health checks, sync) are not
    // the clients': replicating them would only confuse the peer's table.
    '    Address Ignore {',
    ...ignore.map((a) => `      IPv4_address ${a}`),
    ...ignore6.map((a) => `      IPv6_address ${a}`),
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

export function renderHa(cfg: Readonly<FrontConfig>, source?: string): RenderedHa {
  const ha = requireHa(cfg);
  const me = frontNodeName(cfg);
  return { node: me, peer: haPair(ha, me).peer.name, keepalived: renderKeepalived(cfg, source), conntrackd: renderConntrackd(cfg, source) };
}

function requireHa(cfg: Readonly<FrontConfig>): HaConfig {
  if (cfg.ha === undefined) throw new HaMissingError('the front config has no ha section: nothing to render (add ha: with the pair, docs/operations.md "Front-node pairs")');
  return cfg.ha;
}

/** `sluice ha` on a front config without an `ha:` section. */
export class HaMissingError extends SluiceError {
  readonly code = 'ERR_SLUICE_HA_MISSING';
}
