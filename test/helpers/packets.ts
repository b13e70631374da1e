/**
 * Builds IPv4 test packets with correct checksums, written independently of
 * src/packet (plain array arithmetic) so tests do not check the codec
 * against itself.
 */
export interface IpSpec {
  src?: string;
  dst?: string;
  protocol?: number;
  ttl?: number;
  id?: number;
  /** 3-bit flags field: 4 = reserved, 2 = DF, 1 = MF. */
  flags?: number;
  fragmentOffset?: number;
  /** Raw option bytes (multiple of 4). */
  options?: number[];
  /** Force the version nibble or IHL (to craft bad headers). */
  version?: number;
  ihl?: number;
  totalLength?: number;
  /** Extra bytes after the packet (link-layer padding). */
  trailer?: number;
}

export function addr(text: string): number[] {
  return text.split('.').map(Number);
}

function sum16(bytes: number[]): number {
  let s = 0;
  for (let i = 0; i < bytes.length; i += 2) s += ((bytes[i] ?? 0) << 8) + (bytes[i + 1] ?? 0);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

export function checksumOf(bytes: number[]): number {
  return ~sum16(bytes) & 0xffff;
}

function u16(v: number): number[] {
  return [(v >>> 8) & 0xff, v & 0xff];
}
function u32(v: number): number[] {
  return [(v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];
}

function pseudo(spec: IpSpec, protocol: number, l4: number[]): number[] {
  return [...addr(spec.src ?? '198.18.11.2'), ...addr(spec.dst ?? '198.18.201.11'), 0, protocol, ...u16(l4.length)];
}

export function ipv4(spec: IpSpec, l4: number[]): Uint8Array {
  const options = spec.options ?? [];
  const ihl = spec.ihl ?? 5 + options.length / 4;
  const total = spec.totalLength ?? 20 + options.length + l4.length;
  const fragWord = ((spec.flags ?? 0) << 13) | (spec.fragmentOffset ?? 0);
  const header = [
    ((spec.version ?? 4) << 4) | ihl,
    0,
    ...u16(total),
    ...u16(spec.id ?? 0x1234),
    ...u16(fragWord),
    spec.ttl ?? 64,
    spec.protocol ?? 6,
    0,
    0,
    ...addr(spec.src ?? '198.18.11.2'),
    ...addr(spec.dst ?? '198.18.201.11'),
    ...options,
  ];
  const c = checksumOf(header);
  header[10] = c >>> 8;
  header[11] = c & 0xff;
  return Uint8Array.from([...header, ...l4, ...new Array<number>(spec.trailer ?? 0).fill(0xee)]);
}

export interface TcpSpec {
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

export function tcp(ip: IpSpec, t: TcpSpec): Uint8Array {
  const options = t.options ?? [];
  const doff = t.dataOffset ?? 5 + options.length / 4;
  const seg = [
    ...u16(t.srcPort ?? 40000),
    ...u16(t.dstPort ?? 80),
    ...u32(t.seq ?? 1000),
    ...u32(t.ack ?? 0),
    doff << 4,
    t.flags ?? 0x02,
    ...u16(t.window ?? 64240),
    0,
    0,
    0,
    0,
    ...options,
    ...(t.payload ?? []),
  ];
  const c = checksumOf([...pseudo(ip, 6, seg), ...seg]);
  seg[16] = c >>> 8;
  seg[17] = c & 0xff;
  return ipv4({ ...ip, protocol: 6 }, seg);
}

export function udp(ip: IpSpec, u: { srcPort?: number; dstPort?: number; payload?: number[]; length?: number; zeroChecksum?: boolean }): Uint8Array {
  const payload = u.payload ?? [];
  const seg = [...u16(u.srcPort ?? 53000), ...u16(u.dstPort ?? 53), ...u16(u.length ?? 8 + payload.length), 0, 0, ...payload];
  if (u.zeroChecksum !== true) {
    let c = checksumOf([...pseudo(ip, 17, seg), ...seg]);
    if (c === 0) c = 0xffff;
    seg[6] = c >>> 8;
    seg[7] = c & 0xff;
  }
  return ipv4({ ...ip, protocol: 17 }, seg);
}

export function icmp(ip: IpSpec, m: { type?: number; code?: number; id?: number; seq?: number; payload?: number[] }): Uint8Array {
  const msg = [m.type ?? 8, m.code ?? 0, 0, 0, ...u16(m.id ?? 0x4242), ...u16(m.seq ?? 1), ...(m.payload ?? [])];
  const c = checksumOf(msg);
  msg[2] = c >>> 8;
  msg[3] = c & 0xff;
  return ipv4({ ...ip, protocol: 1 }, msg);
}

/** Deterministic PRNG (mulberry32) for reproducible randomized tests. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
