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
export const MAX_SERVERS_MARKED = 0x3f;
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
