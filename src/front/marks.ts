/**
 * Packet marks carry the front node's decisions from the NFQUEUE verdict to
 * the nat rules (queued packets carry no conntrack data on our kernels).
 *
 *   bits 31..24  MARK_TAG (0x51, "S"): ours, never matched otherwise
 *   bits 23..12  virtual service index (0..0xffe; 0xfff: the specials below)
 *   bits 11..0   target: 0x001..0x7ff server index + 1
 *                        0x800..0xffe overflow target index + 0x800
 *
 * Specials (service field 0xfff, never a service):
 *   QUEUE_MARK   set by sluice's nft classify chain on a packet the daemon
 *                must decide; the one iptables NFQUEUE rule matches it
 *                (nft's own `queue` statement is not available on our
 *                kernels). A packet still carrying it after the queue (the
 *                daemon away with --queue-bypass, or a full fail-open
 *                queue) is what the daemon-down fallback DNATs (a SYN or a
 *                new UDP flow) and what the VIP guard drops (the rest).
 *   REJECT_MARK  a checkpoint rejected the SYN; the filter table answers it
 *                with a TCP reset (rules.ts)
 *
 * The DNAT is one map lookup in sluice's nft table (`mark -> address .
 * port`, nft.ts), so neither the number of services nor of servers adds
 * rules to a packet's walk.
 */
export const MARK_TAG = 0x5100_0000;
export const MARK_TAG_MASK = 0xff00_0000;
export const MARK_MASK = 0xffff_ffff;
/** Where the service index sits in a mark. */
export const SERVICE_SHIFT = 12;
/** The service field value of the specials (QUEUE_MARK, REJECT_MARK): never a service. */
const SPECIAL_SERVICE = 0xfff;
/** The first target value of an overflow target (servers sit below it). */
export const OVERFLOW_TARGET_BASE = 0x800;
/*
 * The layout's real limits, which the configuration schema enforces
 * (src/front/config.ts): a server, service or overflow target past them
 * would get a mark that means something else (another field, or a special).
 */
/** Servers per virtual service: indices 0..0x7fe, targets 0x001..0x7ff. */
export const MAX_SERVERS_MARKED = 0x7ff;
/** Virtual services per front node: indices 0..0xffe (0xfff is the specials'). */
export const MAX_SERVICES_MARKED = SPECIAL_SERVICE;
/** Overflow targets (other clusters): indices 0..0x7fe, targets 0x800..0xffe (0xfff is REJECT_MARK's). */
export const MAX_OVERFLOW_TARGETS = 0x7ff;

export function serverMark(service: number, server: number): number {
  return (MARK_TAG | (service << SERVICE_SHIFT) | (server + 1)) >>> 0;
}

export function overflowMark(service: number, target: number): number {
  return (MARK_TAG | (service << SERVICE_SHIFT) | (OVERFLOW_TARGET_BASE + target)) >>> 0;
}

/** What a mark of ours means (status, tests); undefined for a mark that is not ours. */
export type DecodedMark =
  | { readonly kind: 'server'; readonly service: number; readonly server: number }
  | { readonly kind: 'overflow'; readonly service: number; readonly target: number }
  | { readonly kind: 'queue' }
  | { readonly kind: 'reject' };

export function decodeMark(mark: number): DecodedMark | undefined {
  const m = mark >>> 0;
  if (((m & MARK_TAG_MASK) >>> 0) !== MARK_TAG) return undefined;
  if (m === QUEUE_MARK) return { kind: 'queue' };
  if (m === REJECT_MARK) return { kind: 'reject' };
  const service = (m >>> SERVICE_SHIFT) & 0xfff;
  const target = m & 0xfff;
  if (service === SPECIAL_SERVICE || target === 0) return undefined;
  if (target < OVERFLOW_TARGET_BASE) return { kind: 'server', service, server: target - 1 };
  return { kind: 'overflow', service, target: target - OVERFLOW_TARGET_BASE };
}

export function hex(mark: number): string {
  return `0x${mark.toString(16)}`;
}

/** A packet to decide: set by the nft classify chain, matched by the iptables NFQUEUE rule. */
export const QUEUE_MARK = (MARK_TAG | (SPECIAL_SERVICE << SERVICE_SHIFT)) >>> 0;
/** A checkpoint rejection: accepted by the verdict, reset by the kernel's REJECT rule. */
export const REJECT_MARK = (MARK_TAG | 0xff_ffff) >>> 0;
