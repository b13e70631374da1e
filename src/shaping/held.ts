/**
 * Requests in checkpoint evaluation: a bounded pool of preallocated slots
 * (struct-of-arrays) holding everything needed to resume a request after
 * it waited in a queue (the seed's "linked list element in each session":
 * one slot can wait in one queue at a time, linked through `next`).
 *
 * Slot `scratch` (= capacity) is the one synchronous evaluation uses; a
 * request that must wait is copied into a free slot by hold(). The pool
 * bound is the total number of held requests across all queues; beyond it
 * hold() fails and the request is rejected. A Map from connection key to
 * slot finds a held connection's retransmitted SYN (it must not queue
 * twice).
 *
 * Each slot also lists the counts it took (concurrent counts of counter
 * and concurrency-limit rules: rule index + stick entry, at most
 * MAX_ACQUIRED), to give them back if it is rejected later or to hand them
 * to its connection record when it is admitted.
 */
import type { HeldLinks } from './queue.ts';

export const MAX_ACQUIRED = 8;

export class HeldPool implements HeldLinks {
  readonly capacity: number;
  readonly scratch: number;
  readonly next: Int32Array;
  readonly since: Float64Array;
  readonly id: Float64Array;
  readonly key: Float64Array;
  /** Client number (forward_request.ts clientNumber: IPv4 u32, IPv6 >= 2^32). */
  readonly src: Float64Array;
  /** The client address as four words per slot (stride 4; IPv4 mapped): IPv6 checkpoint keys. */
  readonly src6: Uint32Array;
  readonly dstPort: Int32Array;
  readonly service: Int32Array;
  /** Chosen target (server index or overflow code), -1 before the choice. */
  readonly target: Int32Array;
  /** Where evaluation resumes: level and rule index in that level. */
  readonly level: Int32Array;
  readonly rule: Int32Array;
  /** Global index of the checkpoint whose queue it waits in. */
  readonly waitRule: Int32Array;
  readonly acquiredCount: Uint8Array;
  readonly acquiredRule: Int32Array;
  readonly acquiredEntry: Int32Array;
  readonly #free: Int32Array;
  #freeTop: number;
  readonly #byKey = new Map<number, number>();

  constructor(capacity: number) {
    this.capacity = capacity;
    this.scratch = capacity;
    const n = capacity + 1;
    this.next = new Int32Array(n);
    this.since = new Float64Array(n);
    this.id = new Float64Array(n);
    this.key = new Float64Array(n);
    this.src = new Float64Array(n);
    this.src6 = new Uint32Array(n * 4);
    this.dstPort = new Int32Array(n);
    this.service = new Int32Array(n);
    this.target = new Int32Array(n);
    this.level = new Int32Array(n);
    this.rule = new Int32Array(n);
    this.waitRule = new Int32Array(n);
    this.acquiredCount = new Uint8Array(n);
    this.acquiredRule = new Int32Array(n * MAX_ACQUIRED);
    this.acquiredEntry = new Int32Array(n * MAX_ACQUIRED);
    this.#free = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.#free[i] = capacity - 1 - i;
    this.#freeTop = capacity;
  }

  /** Requests held now. */
  get held(): number {
    return this.capacity - this.#freeTop;
  }

  /** The held slot of a connection, or -1. */
  heldSlot(connKey: number): number {
    return this.#byKey.get(connKey) ?? -1;
  }

  /** Calls fn for every held slot (reload; not on the packet path). */
  forEachHeld(fn: (slot: number) => void): void {
    for (const slot of [...this.#byKey.values()]) fn(slot);
  }

  /** Fills the scratch slot for a new request. */
  start(id: number, connKey: number, src: number, src6: Uint32Array, dstPort: number, service: number): number {
    const s = this.scratch;
    this.id[s] = id;
    this.key[s] = connKey;
    this.src[s] = src;
    const w = this.src6;
    w[s * 4] = src6[0] ?? 0;
    w[s * 4 + 1] = src6[1] ?? 0;
    w[s * 4 + 2] = src6[2] ?? 0;
    w[s * 4 + 3] = src6[3] ?? 0;
    this.dstPort[s] = dstPort;
    this.service[s] = service;
    this.target[s] = -1;
    this.level[s] = 0;
    this.rule[s] = 0;
    this.waitRule[s] = -1;
    this.acquiredCount[s] = 0;
    return s;
  }

  /** Moves request `from` (the scratch slot, or already held) into a held slot; -1 if the pool is full. */
  hold(from: number): number {
    if (from !== this.scratch) return from;
    if (this.#freeTop === 0) return -1;
    const to = this.#free[--this.#freeTop] ?? 0;
    this.id[to] = this.id[from] ?? 0;
    this.key[to] = this.key[from] ?? 0;
    this.src[to] = this.src[from] ?? 0;
    this.src6.copyWithin(to * 4, from * 4, from * 4 + 4);
    this.dstPort[to] = this.dstPort[from] ?? 0;
    this.service[to] = this.service[from] ?? 0;
    this.target[to] = this.target[from] ?? -1;
    this.level[to] = this.level[from] ?? 0;
    this.rule[to] = this.rule[from] ?? 0;
    this.waitRule[to] = this.waitRule[from] ?? -1;
    const n = this.acquiredCount[from] ?? 0;
    this.acquiredCount[to] = n;
    for (let k = 0; k < n; k++) {
      this.acquiredRule[to * MAX_ACQUIRED + k] = this.acquiredRule[from * MAX_ACQUIRED + k] ?? 0;
      this.acquiredEntry[to * MAX_ACQUIRED + k] = this.acquiredEntry[from * MAX_ACQUIRED + k] ?? 0;
    }
    this.#byKey.set(this.key[to] ?? 0, to);
    return to;
  }

  /** Returns a held slot to the pool (no-op for the scratch slot). */
  free(slot: number): void {
    if (slot === this.scratch) return;
    this.#byKey.delete(this.key[slot] ?? 0);
    this.#free[this.#freeTop++] = slot;
  }

  /** Records a count taken by `slot`; false if its list is full (the count is then not taken). */
  acquire(slot: number, rule: number, entry: number): boolean {
    const n = this.acquiredCount[slot] ?? 0;
    if (n >= MAX_ACQUIRED) return false;
    this.acquiredRule[slot * MAX_ACQUIRED + n] = rule;
    this.acquiredEntry[slot * MAX_ACQUIRED + n] = entry;
    this.acquiredCount[slot] = n + 1;
    return true;
  }
}
