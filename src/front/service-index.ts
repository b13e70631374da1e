/**
 * The engine's lookup of a packet's virtual service by (VIP, port,
 * protocol): per queued packet, so its cost must not grow with the number
 * of services (up to 4,095: marks.ts). Open addressing with linear probing
 * over typed arrays, built once per configuration (start, reload): no
 * allocation per lookup, no string or boxed key (a Map keyed by a computed
 * double boxes it: see key-index.ts).
 *
 * Invariants: the table has a power-of-two size at least twice the number
 * of services, so a probe always reaches an empty slot; when two services
 * share (VIP, port, protocol) (the schema refuses it) the first keeps the
 * key, as the linear scan it replaces did.
 */
export interface ServiceKey {
  readonly vip: number;
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

  constructor(services: readonly ServiceKey[]) {
    let n = 2;
    while (n < services.length * 2) n *= 2;
    this.#vip = new Uint32Array(n);
    this.#portProto = new Int32Array(n);
    this.#slot = new Int32Array(n);
    this.#mask = n - 1;
    services.forEach((s, i) => {
      const pp = (s.port & 0xffff) | ((s.protocol & 0xff) << 16);
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
