/**
 * Every (service, server) pair of a configuration by the server's address
 * and port: the engine's lookup of a packet that a server sent (its RST
 * copy, engine.ts), which may name a server of several services (two VIPs
 * or ports over the same servers). A linear scan of every service's
 * servers cost O(services x servers) per packet: 100k comparisons per
 * refused connection with 1,000 VIPs x 100 servers, so a server refusing
 * connections at a few thousand per second would have occupied the daemon.
 *
 * Open addressing with linear probing over typed arrays, built once per
 * configuration (start, reload): no allocation per lookup. The key is the
 * family of the service (an IPv4 service's server is looked up by IPv4
 * packets only, an IPv6 service's by IPv6 packets only, as the scan did),
 * the server's address as four words (IPv4 mapped) and its port. Each key
 * has a chain of pairs in service order.
 *
 * Invariants: the table has a power-of-two size at least twice the number
 * of distinct keys, so a probe always reaches an empty slot; each pair is
 * on exactly one chain.
 */

/** What the index reads of a service: its family and its servers' addresses and ports. */
export interface ServerIndexService {
  readonly family: 4 | 6;
  readonly servers: readonly { readonly address6: Uint32Array; readonly port: number }[];
}

export class ServerIndex {
  /** key + 1 (0: empty) */
  readonly #slots: Int32Array;
  readonly #mask: number;
  /** Per key: address words (stride 4), port | family << 16, first pair. */
  readonly #words: Uint32Array;
  readonly #portFam: Int32Array;
  readonly #head: Int32Array;
  /** Per pair: service index, server index, next pair of the same key (-1: last). */
  readonly #svc: Int32Array;
  readonly #srv: Int32Array;
  readonly #next: Int32Array;

  constructor(services: readonly ServerIndexService[]) {
    let pairs = 0;
    for (const s of services) pairs += s.servers.length;
    let n = 2;
    while (n < pairs * 2) n *= 2;
    this.#slots = new Int32Array(n);
    this.#mask = n - 1;
    this.#words = new Uint32Array(pairs * 4);
    this.#portFam = new Int32Array(pairs);
    this.#head = new Int32Array(pairs);
    this.#svc = new Int32Array(pairs);
    this.#srv = new Int32Array(pairs);
    this.#next = new Int32Array(pairs).fill(-1);
    const tail = new Int32Array(pairs);
    let keys = 0;
    let p = 0;
    services.forEach((svc, si) => {
      svc.servers.forEach((b, bi) => {
        const a = b.address6;
        const pf = ServerIndex.#pf(b.port, svc.family);
        this.#svc[p] = si;
        this.#srv[p] = bi;
        let i = ServerIndex.#hash(a[0] ?? 0, a[1] ?? 0, a[2] ?? 0, a[3] ?? 0, pf) & this.#mask;
        for (; ; i = (i + 1) & this.#mask) {
          const k = (this.#slots[i] ?? 0) - 1;
          if (k < 0) {
            // A new key: its chain starts here.
            this.#words.set(a.subarray(0, 4), keys * 4);
            this.#portFam[keys] = pf;
            this.#head[keys] = p;
            tail[keys] = p;
            this.#slots[i] = ++keys;
            break;
          }
          if (this.#is(k, a[0] ?? 0, a[1] ?? 0, a[2] ?? 0, a[3] ?? 0, pf)) {
            // In service order: appended to the key's chain.
            this.#next[tail[k] ?? 0] = p;
            tail[k] = p;
            break;
          }
        }
        p++;
      });
    });
  }

  /** The first pair of an IPv4 service's server at `address`:`port` (address as u32), or -1; then next(). */
  first4(address: number, port: number): number {
    return this.#first(0, 0, 0xffff, address >>> 0, ServerIndex.#pf(port, 4));
  }

  /** The first pair of an IPv6 service's server at `address` (four words):`port`, or -1; then next(). */
  first6(address: Uint32Array, port: number): number {
    return this.#first(address[0] ?? 0, address[1] ?? 0, address[2] ?? 0, address[3] ?? 0, ServerIndex.#pf(port, 6));
  }

  /** The next pair of the same server address and port, or -1. */
  next(pair: number): number {
    return this.#next[pair] ?? -1;
  }

  /** A pair's service index. */
  service(pair: number): number {
    return this.#svc[pair] ?? -1;
  }

  /** A pair's server index within its service. */
  server(pair: number): number {
    return this.#srv[pair] ?? -1;
  }

  #first(w0: number, w1: number, w2: number, w3: number, pf: number): number {
    const mask = this.#mask;
    for (let i = ServerIndex.#hash(w0, w1, w2, w3, pf) & mask; ; i = (i + 1) & mask) {
      const k = (this.#slots[i] ?? 0) - 1;
      if (k < 0) return -1;
      if (this.#is(k, w0, w1, w2, w3, pf)) return this.#head[k] ?? -1;
    }
  }

  #is(k: number, w0: number, w1: number, w2: number, w3: number, pf: number): boolean {
    const w = this.#words;
    const o = k * 4;
    return this.#portFam[k] === pf && w[o + 3] === w3 && w[o + 2] === w2 && w[o + 1] === w1 && w[o] === w0;
  }

  static #pf(port: number, family: 4 | 6): number {
    return (port & 0xffff) | (family << 16);
  }

  /** A 32-bit mix of the address words and port (the low word varies most between servers). */
  static #hash(w0: number, w1: number, w2: number, w3: number, pf: number): number {
    let h = Math.imul(w3 ^ Math.imul(pf, 0x27d4eb2f), 0x9e3779b1);
    h ^= Math.imul(w2 ^ (w1 >>> 7) ^ (w0 << 3), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return h ^ (h >>> 16);
  }
}
