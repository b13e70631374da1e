/**
 * Packet marks carry the front node's decisions from the NFQUEUE verdict to
 * the nat rules (queued packets carry no conntrack data on our kernels).
 *
 *   bits 31..16  MARK_TAG (0x5175, "Sl"): ours, never matched otherwise
 *   bits 15..8   virtual service index (0..30)
 *   bits  7..0   target: 1..0x3f server index + 1
 *                        0x40..0x7f fallback slot (daemon down, HMARK spread)
 *                        0x80..0xbf overflow target index + 0x80
 *   REJECT_MARK (service bits 0xff, never a service): a checkpoint rejected
 *   the SYN; the filter table answers it with a TCP reset (rules.ts)
 */
export const MARK_TAG = 0x5175_0000;
export const MARK_MASK = 0xffff_ffff;
/*
 * The layout's real limits, which the configuration schema enforces
 * (src/front/config.ts): a server, service or overflow target past them
 * would get a mark that means something else (another field, or REJECT_MARK).
 */
/** Servers per virtual service: indices 0..0x3e, marks 0x01..0x3f. */
export const MAX_SERVERS_MARKED = 0x3f;
/**
 * Virtual services per front node: indices 0..30. The service field has
 * room for more, but connectionKey() (src/front/connections.ts) keeps the
 * index below 32 to stay exact in a double, and 0xff is REJECT_MARK's.
 */
export const MAX_SERVICES_MARKED = 31;
/** Overflow targets (other clusters): indices 0..0x3f, marks 0x80..0xbf. */
export const MAX_OVERFLOW_TARGETS = 0x40;

export function serverMark(service: number, server: number): number {
  return (MARK_TAG | (service << 8) | (server + 1)) >>> 0;
}

export function fallbackMark(service: number, slot: number): number {
  return (MARK_TAG | (service << 8) | (0x40 + slot)) >>> 0;
}

export function overflowMark(service: number, target: number): number {
  return (MARK_TAG | (service << 8) | (0x80 + target)) >>> 0;
}

export function hex(mark: number): string {
  return `0x${mark.toString(16)}`;
}

/** A checkpoint rejection: accepted by the verdict, reset by the kernel's REJECT rule. */
export const REJECT_MARK = (MARK_TAG | 0xffff) >>> 0;
