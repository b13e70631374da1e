/**
 * The engine's lookup of a packet's virtual service by (VIP, port,
 * protocol): per queued packet, so its cost must not grow with the number
 * of services (up to 4,095: marks.ts). Open addressing with linear probing
 * over typed arrays, built once per configuration (start, reload): no
 * allocation per lookup, no string or boxed key (a Map keyed by a computed
 * double boxes it: see key-index.ts).
 *
 * IPv6 VIPs (a service with `vip6` and family 6) go in a second table of
 * the same kind keyed by the VIP's four words (find6): IPv4 lookups do not
 * change, and an IPv6 lookup compares four words instead of one.
 *
 * Invariants: each table has a power-of-two size at least twice the number
 * of services, so a probe always reaches an empty slot; when two services
 * share (VIP, port, protocol) (the schema refuses it) the first keeps the
 * key, as the linear scan it replaces did.
 */
export interface ServiceKey {
  /** IPv4 VIP as u32 (0 for an IPv6 service). */
  readonly vip: number;
  /** 6 for an IPv6 VIP (then `vip6` holds it); absent or 4: IPv4. */
  readonly family?: number;
  readonly vip6?: Uint32Array;
  readonly port: number;
  /** IpProtocol number (6 TCP, 17 UDP). */
  readonly protocol: number;
}

export class ServiceIndex {
  readonly #vip: Uint32Array;
  /** port | protocol << 16 */
  readonly #portProto: Int32Array;
  /** service index + 1 (0: empty) */
  readonly #slot: Int32Array;
  readonly #mask: number;
  /** The IPv6 table: VIP words (stride 4), port | protocol << 16, service index + 1. */
  readonly #vip6: Uint32Array;
  readonly #portProto6: Int32Array;
  readonly #slot6: Int32Array;
  readonly #mask6: number;

  constructor(services: readonly ServiceKey[]) {
    let n6 = 2;
    const v6 = services.filter((s) => s.family === 6).length;
    while (n6 < v6 * 2) n6 *= 2;
    this.#vip6 = new Uint32Array(n6 * 4);
    this.#portProto6 = new Int32Array(n6);
    this.#slot6 = new Int32Array(n6);
    this.#mask6 = n6 - 1;
    let n = 2;
    while (n < services.length * 2) n *= 2;
    this.#vip = new Uint32Array(n);
    this.#portProto = new Int32Array(n);
    this.#slot = new Int32Array(n);
    this.#mask = n - 1;
    services.forEach((s, i) => {
      const pp = (s.port & 0xffff) | ((s.protocol & 0xff) << 16);
      if (s.family === 6) {
        if (s.vip6 !== undefined) this.#add6(s.vip6, pp, i);
        return;
      }
      const vip = s.vip >>> 0;
      for (let j = ServiceIndex.#hash(vip, pp) & this.#mask; ; j = (j + 1) & this.#mask) {
        const at = this.#slot[j] ?? 0;
        if (at === 0) {
          this.#vip[j] = vip;
          this.#portProto[j] = pp;
          this.#slot[j] = i + 1;
          return;
        }
        if (this.#vip[j] === vip && this.#portProto[j] === pp) return; // a duplicate: the first keeps it
      }
    });
  }

  #add6(a: Uint32Array, pp: number, i: number): void {
    const mask = this.#mask6;
    const w = this.#vip6;
    for (let j = ServiceIndex.#hash6(a, pp) & mask; ; j = (j + 1) & mask) {
      if ((this.#slot6[j] ?? 0) === 0) {
        w[j * 4] = a[0] ?? 0;
        w[j * 4 + 1] = a[1] ?? 0;
        w[j * 4 + 2] = a[2] ?? 0;
        w[j * 4 + 3] = a[3] ?? 0;
        this.#portProto6[j] = pp;
        this.#slot6[j] = i + 1;
        return;
      }
      if (this.#portProto6[j] === pp && w[j * 4] === a[0] && w[j * 4 + 1] === a[1] && w[j * 4 + 2] === a[2] && w[j * 4 + 3] === a[3]) return;
    }
  }

  static #hash6(a: Uint32Array, pp: number): number {
    return ServiceIndex.#hash((a[0] ?? 0) ^ Math.imul(a[1] ?? 0, 0x27d4eb2f) ^ Math.imul(a[2] ?? 0, 0x165667b1) ^ Math.imul(a[3] ?? 0, 0x9e3779b1), pp);
  }

  /** The index of the service at (IPv6 VIP `a` as four words, port, protocol), or -1. */
  find6(a: Uint32Array, port: number, protocol: number): number {
    const pp = (port & 0xffff) | ((protocol & 0xff) << 16);
    const mask = this.#mask6;
    const w = this.#vip6;
    for (let j = ServiceIndex.#hash6(a, pp) & mask; ; j = (j + 1) & mask) {
      const at = this.#slot6[j] ?? 0;
      if (at === 0) return -1;
      if (this.#portProto6[j] === pp && w[j * 4] === a[0] && w[j * 4 + 1] === a[1] && w[j * 4 + 2] === a[2] && w[j * 4 + 3] === a[3]) return at - 1;
    }
  }

  static #hash(vip: number, pp: number): number {
    let h = Math.imul(vip ^ Math.imul(pp, 0x9e3779b1), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return h ^ (h >>> 16);
  }

  /** The index of the service at (vip, port, protocol), or -1. */
  find(vip: number, port: number, protocol: number): number {
    const v = vip >>> 0;
    const pp = (port & 0xffff) | ((protocol & 0xff) << 16);
    const mask = this.#mask;
    for (let j = ServiceIndex.#hash(v, pp) & mask; ; j = (j + 1) & mask) {
      const at = this.#slot[j] ?? 0;
      if (at === 0) return -1;
      if (this.#vip[j] === v && this.#portProto[j] === pp) return at - 1;
    }
  }
}
