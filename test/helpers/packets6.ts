/**
 * Builds IPv6 test packets with correct checksums, written independently of
 * src/packet (plain array arithmetic, its own address expansion) so tests
 * do not check the codec against itself.
 */
import { checksumOf } from './packets.ts';

/** One extension header: its Next Header value and the bytes after its first (next-header) byte. */
export interface Ext {
  nh: number;
  rest: number[];
}

export interface Ip6Spec {
  src?: string;
  dst?: string;
  hopLimit?: number;
  trafficClass?: number;
  flowLabel?: number;
  ext?: Ext[];
  /** Force the payload length field, the version nibble. */
  payloadLength?: number;
  version?: number;
  /** Extra bytes after the packet (link-layer padding). */
  trailer?: number;
}

/** Expands IPv6 text (hex groups and one "::") to 16 bytes. */
export function addr6(text: string): number[] {
  const [l = '', r] = text.split('::');
  const left = l === '' ? [] : l.split(':');
  const right = r === undefined || r === '' ? [] : r.split(':');
  const groups = r === undefined ? left : [...left, ...new Array<string>(8 - left.length - right.length).fill('0'), ...right];
  if (groups.length !== 8) throw new Error(`bad test address ${text}`);
  return groups.flatMap((g) => {
    const v = parseInt(g, 16);
    return [v >>> 8, v & 0xff];
  });
}

function u16(v: number): number[] {
  return [(v >>> 8) & 0xff, v & 0xff];
}
function u32(v: number): number[] {
  return [(v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];
}

const SRC = '2001:2:0:11::2';
const DST = '2001:2:0:201::11';

/** Pads TLV options so that 2 + options is a multiple of 8 (PadN, or Pad1 for one byte). */
function padOptions(options: number[]): number[] {
  const n = (8 - ((2 + options.length) % 8)) % 8;
  if (n === 0) return options;
  if (n === 1) return [...options, 0];
  return [...options, 1, n - 2, ...new Array<number>(n - 2).fill(0)];
}

function optionsHeader(nh: number, options: number[]): Ext {
  const body = padOptions(options);
  return { nh, rest: [(2 + body.length) / 8 - 1, ...body] };
}

export const hopByHop = (options: number[] = []): Ext => optionsHeader(0, options);
export const destOpts = (options: number[] = []): Ext => optionsHeader(60, options);
/** Routing header: type, segments left, and `addresses` 16-byte entries (type 0 / SRH-like layout). */
export function routing(type: number, segmentsLeft: number, addresses: string[] = []): Ext {
  const data = addresses.flatMap(addr6);
  return { nh: 43, rest: [(4 + 4 + data.length) / 8 - 1, type, segmentsLeft, 0, 0, 0, 0, ...data] };
}
/** Fragment header: offset in 8-byte units, M flag, id. */
export function fragment(offset: number, more: boolean, id = 0x01020304): Ext {
  return { nh: 44, rest: [0, ...u16((offset << 3) | (more ? 1 : 0)), ...u32(id)] };
}
/** Authentication header (RFC 4302): length in 4-byte units minus 2. */
export const ah = (): Ext => ({ nh: 51, rest: [4, 0, 0, ...u32(0x100), ...u32(1), ...new Array<number>(12).fill(0)] });
export const esp = (): Ext => ({ nh: 50, rest: [0, 0, 0, ...u32(1), 0xaa, 0xbb, 0xcc, 0xdd] });
/** A raw header with the given type and (8-byte-unit) length byte, padded. */
export const rawExt = (nh: number, lengthUnits = 0): Ext => ({ nh, rest: [lengthUnits, ...new Array<number>(6 + lengthUnits * 8).fill(0)] });

/** The IPv6 packet with extension headers ip.ext and upper layer `protocol` carrying `l4`. */
export function ipv6(ip: Ip6Spec, protocol: number, l4: number[]): Uint8Array {
  const ext = ip.ext ?? [];
  const chain: number[] = [];
  for (let i = 0; i < ext.length; i++) {
    const next = ext[i + 1]?.nh ?? protocol;
    chain.push(next, ...(ext[i]?.rest ?? []));
  }
  const first = ext[0]?.nh ?? protocol;
  const payloadLength = ip.payloadLength ?? chain.length + l4.length;
  const w0 = (((ip.version ?? 6) << 28) | ((ip.trafficClass ?? 0) << 20) | (ip.flowLabel ?? 0)) >>> 0;
  const header = [...u32(w0), ...u16(payloadLength), first, ip.hopLimit ?? 64, ...addr6(ip.src ?? SRC), ...addr6(ip.dst ?? DST)];
  return Uint8Array.from([...header, ...chain, ...l4, ...new Array<number>(ip.trailer ?? 0).fill(0xee)]);
}

function l4Checksum(ip: Ip6Spec, protocol: number, seg: number[]): number {
  const pseudo = [...addr6(ip.src ?? SRC), ...addr6(ip.dst ?? DST), ...u32(seg.length), 0, 0, 0, protocol];
  return checksumOf([...pseudo, ...seg]);
}

export interface Tcp6Spec {
  srcPort?: number;
  dstPort?: number;
  seq?: number;
  ack?: number;
  flags?: number;
  window?: number;
  options?: number[];
  dataOffset?: number;
  payload?: number[];
}

export function tcp6(ip: Ip6Spec, t: Tcp6Spec): Uint8Array {
  const options = t.options ?? [];
  const doff = t.dataOffset ?? 5 + options.length / 4;
  const seg = [
    ...u16(t.srcPort ?? 40000),
    ...u16(t.dstPort ?? 80),
    ...u32(t.seq ?? 1000),
    ...u32(t.ack ?? 0),
    doff << 4,
    t.flags ?? 0x02,
    ...u16(t.window ?? 64800),
    0,
    0,
    0,
    0,
    ...options,
    ...(t.payload ?? []),
  ];
  const c = l4Checksum(ip, 6, seg);
  seg[16] = c >>> 8;
  seg[17] = c & 0xff;
  return ipv6(ip, 6, seg);
}

export function udp6(ip: Ip6Spec, u: { srcPort?: number; dstPort?: number; payload?: number[]; length?: number; zeroChecksum?: boolean }): Uint8Array {
  const payload = u.payload ?? [];
  const seg = [...u16(u.srcPort ?? 53000), ...u16(u.dstPort ?? 53), ...u16(u.length ?? 8 + payload.length), 0, 0, ...payload];
  if (u.zeroChecksum !== true) {
    let c = l4Checksum(ip, 17, seg);
    if (c === 0) c = 0xffff;
    seg[6] = c >>> 8;
    seg[7] = c & 0xff;
  }
  return ipv6(ip, 17, seg);
}

export function icmp6(ip: Ip6Spec, m: { type?: number; code?: number; id?: number; seq?: number; payload?: number[] }): Uint8Array {
  const msg = [m.type ?? 128, m.code ?? 0, 0, 0, ...u16(m.id ?? 0x4242), ...u16(m.seq ?? 1), ...(m.payload ?? [])];
  const c = l4Checksum(ip, 58, msg);
  msg[2] = c >>> 8;
  msg[3] = c & 0xff;
  return ipv6(ip, 58, msg);
}

/** A captured packet: its first bytes as hex, then `fill` repeated up to `length` bytes (ping's -p pattern, a UDP payload of one byte). */
export function captured(hexPrefix: string, length: number, fill: number): Uint8Array {
  const b = new Uint8Array(length).fill(fill);
  b.set(Buffer.from(hexPrefix, 'hex'));
  return b;
}
