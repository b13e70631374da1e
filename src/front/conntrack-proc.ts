/**
 * Reads the kernel's flows from /proc/net/nf_conntrack (per network
 * namespace; CONFIG_NF_CONNTRACK_PROCFS is on here). Used to rebuild
 * connection records after a restart and to reconcile records with flows.
 *
 * Line format (tcp):
 *   ipv4 2 tcp 6 115 ESTABLISHED src=C dst=VIP sport=CP dport=80
 *        src=SERVER dst=C sport=80 dport=CP [ASSURED] mark=0 zone=0 use=2
 * Line format (udp, no state field):
 *   ipv4 2 udp 17 29 src=C dst=VIP sport=CP dport=53 src=SERVER dst=C
 *        sport=53 dport=CP [ASSURED] mark=0 zone=0 use=2
 * The first tuple is the original direction, the second the reply.
 *
 * /proc/net/nf_conntrack is mode 0440 root: a front node running as its own
 * user with CAP_NET_ADMIN only (deploy/systemd/sluice-front.service) cannot
 * read it. The same table then comes from `conntrack -L -o extended`
 * (conntrack-tools, over ctnetlink, which CAP_NET_ADMIN allows), whose lines
 * have the same format.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { SluiceError } from '../errors/errors.ts';

/** The kernel's flow table could be read neither from /proc nor with conntrack(8). */
export class ConntrackReadError extends SluiceError {
  readonly code = 'ERR_SLUICE_CONNTRACK_READ';
}
import { parseIPv4Address } from '../packet/address.ts';

export interface KernelFlow {
  readonly protocol: 'tcp' | 'udp';
  /** TCP state, or UDP for every UDP flow (conntrack keeps a UDP flow until it times out). */
  readonly state: string;
  readonly client: number;
  readonly clientPort: number;
  readonly dst: number;
  readonly dstPort: number;
  /** Reply source: the server (DNAT) or the other cluster's VIP (overflow). */
  readonly replySrc: number;
  readonly replySrcPort: number;
}

/**
 * TCP states in which a connection is still alive: a record whose flow is
 * in one of them is kept by reconcile. (Conntrack's closing states do not
 * say which side sent the FIN, so a half-closed flow may still await the
 * client's FIN that recycles its record.)
 */
export const LIVE_STATES: ReadonlySet<string> = new Set(['SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK', 'UDP']);

/**
 * States rebuilt as active records after a restart: only where neither side
 * has closed. A half-closed flow is ending; counting it as load would keep
 * its server looking busy until the next reconcile.
 */
export const REBUILD_STATES: ReadonlySet<string> = new Set(['SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'UDP']);

export function parseConntrackLine(line: string): KernelFlow | undefined {
  const f = line.split(/\s+/);
  const protocol = f[2];
  if ((protocol !== 'tcp' && protocol !== 'udp') || f[0] !== 'ipv4') return undefined;
  const state = protocol === 'tcp' ? (f[5] ?? '') : 'UDP';
  const kv: string[] = [];
  for (let i = protocol === 'tcp' ? 6 : 5; i < f.length && kv.length < 8; i++) {
    const t = f[i] ?? '';
    const eq = t.indexOf('=');
    if (eq > 0 && /^(src|dst|sport|dport)$/.test(t.slice(0, eq))) kv.push(t.slice(eq + 1));
  }
  if (kv.length < 8) return undefined;
  const [os, od, osp, odp, rs, , rsp] = kv;
  const client = parseIPv4Address(os ?? '');
  const dst = parseIPv4Address(od ?? '');
  const replySrc = parseIPv4Address(rs ?? '');
  if (client === undefined || dst === undefined || replySrc === undefined) return undefined;
  return { protocol, state, client, clientPort: Number(osp), dst, dstPort: Number(odp), replySrc, replySrcPort: Number(rsp) };
}

/** `conntrack -L -o extended` output (the flows of this network namespace). */
function conntrackList(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('conntrack', ['-L', '-o', 'extended'], { encoding: 'utf8', maxBuffer: 1 << 30, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new ConntrackReadError(`cannot list the kernel's flows with conntrack -L (install conntrack-tools; the daemon needs CAP_NET_ADMIN): ${stderr.trim() || err.message}`, { cause: err }));
      else resolve(stdout);
    });
  });
}

/**
 * The kernel's flows. Throws ConntrackReadError when the table exists but
 * cannot be read: an empty answer would make reconcile free every record.
 */
export async function readKernelFlows(path = '/proc/net/nf_conntrack', list: () => Promise<string> = conntrackList): Promise<KernelFlow[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return []; // no conntrack in this namespace yet: no flows
    if (code !== 'EACCES' && code !== 'EPERM') throw new ConntrackReadError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
    text = await list();
  }
  const out: KernelFlow[] = [];
  for (const line of text.split('\n')) {
    const fl = parseConntrackLine(line);
    if (fl) out.push(fl);
  }
  return out;
}
