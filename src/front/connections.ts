/**
 * Connection records (seed 000's forward_request, forward_request.ts),
 * keyed by virtual service, client address and client port: the key
 * (a double, exact) and the service index (up to 0xffe, marks.ts) are
 * stored and compared side by side (key-index.ts), so neither limits the
 * other. Keys of both families, in disjoint ranges:
 *   IPv4: connectionKey(address u32, port) = address * 2^16 + port < 2^48
 *   IPv6: key6(address words, port) = 2^48 + id * 2^16 + port, where id
 *         names the 128-bit address in the table's ClientIds (client6.ts)
 *         for as long as a record or a held SYN uses it: exact, not a hash.
 * An IPv6 record holds one reference on its id from create() to its free;
 * ClientIds is allocated at the first IPv6 client (an IPv4-only node pays
 * nothing for it).
 *
 *   SYN  -> create(): record with the chosen server and a timestamp
 *           (a retransmitted SYN finds the record: same server)
 *   FIN/RST -> finish(): the record moves to the recycle list and is freed
 *           `recycleMs` later (late retransmissions still find it)
 *   sweep() frees recycled records whose time has come
 *   conntrack destroy event -> ended(): the kernel forgot the flow; its
 *           record is freed at once, active or recycled (O(1))
 *   resyncBegin/Seen/Sweep free active records whose kernel flow is gone
 *           (the resync for lost destroy events), a slice at a time
 *
 * Storage: struct-of-arrays in typed arrays sized to the configured maximum,
 * plus an open-addressing index from the numeric key to the slot
 * (key-index.ts). No strings, no per-record objects, nothing allocated per
 * connection: 1M records take well under 100 MB.
 *
 * At the bound (every slot used), create() first frees the oldest recycled
 * record early (counted as `recycledEarly`); if none is recycled it returns
 * -1 (counted as `full`): the caller still decides the connection and lets
 * the kernel carry it, untracked. A record is never evicted while active,
 * so server active counts stay exact.
 *
 * Invariants: index.size === active + recycled; a slot is in exactly one of
 * {free list, active, recycle ring (current generation)}; legacy counts the
 * slots flagged by markLegacy, and a free slot is never flagged.
 */
import { ClientIds } from './client6.ts';
import { KeyIndex } from './key-index.ts';

/** Key of (IPv4 u32, port u16): exact in a double (< 2^48); the service index goes beside it. */
export function connectionKey(client: number, port: number): number {
  return (client >>> 0) * 0x10000 + (port & 0xffff);
}

/** IPv6 connection keys are at or above this (see the file comment); IPv4 ones below. */
export const KEY6_BASE = 0x1000000000000;

/** Whether `key` is an IPv6 connection key. */
export function isKey6(key: number): boolean {
  return key >= KEY6_BASE;
}

/** The ClientIds id of an IPv6 key. */
export function key6Id(key: number): number {
  return Math.floor((key - KEY6_BASE) / 0x10000);
}

/**
 * Ids beyond the records' capacity: the SYNs checkpoints hold (shaping.maxHeld
 * is at most 32768, shaping/config) and the one provisional id (client6.ts).
 */
const HELD_CLIENTS = 32768 + 1;

export const RecordState = { Free: 0, Active: 1, Recycled: 2 } as const;

/**
 * How long after a port reuse (remove() then create() of the same key) a
 * destroy event for the key is taken to be the previous flow's. A SYN that
 * reuses the port of a flow in TIME_WAIT or CLOSE makes the kernel destroy
 * the old entry and create the new one: its destroy event and the new SYN
 * reach the daemon by different sockets, in either order. Arriving second,
 * the event must not free the new record. A real end of the new flow comes
 * later than this: the shortest TCP timeout that ends a flow by itself is
 * CLOSE's 10 s (only `conntrack -D` or an early drop end one sooner; those
 * wait for the resync).
 */
export const REUSE_GUARD_MS = 5000;

export interface ConnectionEvents {
  /**
   * A record left the active state (finished, removed, reconciled away):
   * decrement the server's count, and give back the checkpoint counts the
   * connection holds (src/shaping/shaper.ts releaseConnection, by slot).
   */
  released(service: number, server: number, slot: number): void;
}

export class ConnectionTable {
  readonly capacity: number;
  readonly #index: KeyIndex;
  readonly #key: Float64Array;
  readonly #service: Uint16Array;
  readonly #server: Int32Array;
  readonly #created: Float64Array;
  readonly #finished: Float64Array;
  readonly #state: Uint8Array;
  readonly #gen: Uint32Array;
  /** 1: the record reused a removed record's key (see REUSE_GUARD_MS); the next destroy event within the guard is the old flow's. */
  readonly #reused: Uint8Array;
  /** 1: the record was adopted from a read of the kernel's table (markLegacy). */
  readonly #legacy: Uint8Array;
  /** 1: the record was adopted from the kernel's table (markAdopted), legacy or not: no decision of this daemon made it. */
  readonly #adopted: Uint8Array;
  /** The resync pass that last saw the record's flow in the kernel's table (resyncBegin). */
  readonly #seen: Uint32Array;
  #epoch = 0;
  /** The key and service remove() removed last, until the next create(): a port reuse when create() gets the same. */
  #removedKey = -1;
  #removedService = -1;
  readonly #free: Int32Array;
  #freeTop: number;
  // Recycle FIFO: finish times are non-decreasing, so the head is the oldest.
  readonly #ringSlot: Int32Array;
  readonly #ringGen: Uint32Array;
  #ringHead = 0;
  #ringSize = 0;
  readonly #events: ConnectionEvents;
  readonly #recycleMs: number;
  /** IPv6 client addresses of the records (and held SYNs), made at the first IPv6 client. */
  #clients: ClientIds | undefined;

  active = 0;
  recycled = 0;
  /** Records marked legacy (markLegacy) and not yet freed. */
  legacy = 0;
  /** Counters for metrics. */
  readonly counts = { created: 0, finished: 0, freed: 0, recycledEarly: 0, full: 0, reconciled: 0, ended: 0, endedStale: 0 };

  constructor(capacity: number, recycleMs: number, events: ConnectionEvents) {
    this.capacity = capacity;
    this.#recycleMs = recycleMs;
    this.#events = events;
    this.#key = new Float64Array(capacity);
    this.#service = new Uint16Array(capacity);
    this.#index = new KeyIndex(capacity, this.#key, this.#service);
    this.#server = new Int32Array(capacity);
    this.#created = new Float64Array(capacity);
    this.#finished = new Float64Array(capacity);
    this.#state = new Uint8Array(capacity);
    this.#gen = new Uint32Array(capacity);
    this.#reused = new Uint8Array(capacity);
    this.#legacy = new Uint8Array(capacity);
    this.#adopted = new Uint8Array(capacity);
    this.#seen = new Uint32Array(capacity);
    this.#free = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.#free[i] = capacity - 1 - i;
    this.#freeTop = capacity;
    this.#ringSlot = new Int32Array(capacity);
    this.#ringGen = new Uint32Array(capacity);
  }

  get size(): number {
    return this.#index.size;
  }

  /** IPv6 client addresses in use (status). */
  get clients6(): number {
    return this.#clients?.size ?? 0;
  }

  /**
   * The key of (IPv6 address `a`, `port`): made for a packet being decided
   * (its address interned: client6.ts). -1 when every id is in use (cannot
   * happen within the bounds: the packet is then treated as untracked).
   */
  key6(a: Uint32Array, port: number): number {
    const ids = (this.#clients ??= new ClientIds(this.capacity + HELD_CLIENTS));
    const id = ids.intern(a);
    return id < 0 ? -1 : KEY6_BASE + id * 0x10000 + (port & 0xffff);
  }

  /** The key of (IPv6 address `a`, `port`) if a record or held SYN uses the address, else -1 (no record can have it). */
  findKey6(a: Uint32Array, port: number): number {
    const id = this.#clients?.find(a) ?? -1;
    return id < 0 ? -1 : KEY6_BASE + id * 0x10000 + (port & 0xffff);
  }

  /** The client address of an IPv6 key (status, logs): written into `out`. */
  address6(key: number, out: Uint32Array): void {
    this.#clients?.address(key6Id(key), out);
  }

  /** A held SYN keeps its IPv6 key's address (no-op for IPv4 keys). */
  retainKey(key: number): void {
    if (key >= KEY6_BASE) this.#clients?.retain(key6Id(key));
  }

  /** The held SYN of retainKey() is settled. */
  releaseKey(key: number): void {
    if (key >= KEY6_BASE) this.#clients?.release(key6Id(key));
  }

  /** The server of an existing record of service `service`, or -1. */
  lookup(service: number, key: number): number {
    const slot = this.#index.get(key, service);
    return slot < 0 ? -1 : (this.#server[slot] ?? -1);
  }

  /** Whether the record of `key` is active (not recycled). */
  isActive(service: number, key: number): boolean {
    const slot = this.#index.get(key, service);
    return slot >= 0 && this.#state[slot] === RecordState.Active;
  }

  /**
   * Records a new connection. Returns the slot, or -1 if the table is full
   * (see the class comment). A key already present must be handled by the
   * caller first (retransmit: lookup(); reuse after FIN: remove()).
   */
  create(key: number, service: number, server: number, now: number): number {
    if (this.#freeTop === 0 && !this.#evictOldestRecycled()) {
      this.counts.full++;
      return -1;
    }
    const slot = this.#free[--this.#freeTop] ?? -1;
    this.#key[slot] = key;
    this.#service[slot] = service;
    this.#server[slot] = server;
    this.#created[slot] = now;
    this.#finished[slot] = 0;
    this.#state[slot] = RecordState.Active;
    // (A held SYN is created after other records: no flag then. Its old
    // flow's destroy event, sent before the SYN was queued, has by then
    // almost surely been read and found no record.)
    this.#reused[slot] = key === this.#removedKey && service === this.#removedService ? 1 : 0;
    this.#removedKey = -1;
    this.#index.set(key, service, slot);
    if (key >= KEY6_BASE) this.#clients?.retain(key6Id(key));
    this.active++;
    this.counts.created++;
    return slot;
  }

  /** FIN or RST seen: the record goes to the recycle list. False if unknown or already recycled. */
  finish(service: number, key: number, now: number): boolean {
    const slot = this.#index.get(key, service);
    if (slot < 0 || this.#state[slot] !== RecordState.Active) return false;
    this.#state[slot] = RecordState.Recycled;
    this.#finished[slot] = now;
    this.active--;
    this.recycled++;
    this.counts.finished++;
    // Stale entries (records removed before their sweep) also occupy the
    // ring; when it is full, drop them. Live entries <= recycled < capacity,
    // so compaction always makes room.
    if (this.#ringSize === this.capacity) this.#compactRing();
    const at = (this.#ringHead + this.#ringSize) % this.capacity;
    this.#ringSlot[at] = slot;
    this.#ringGen[at] = this.#gen[slot] ?? 0;
    this.#ringSize++;
    this.#events.released(this.#service[slot] ?? 0, this.#server[slot] ?? -1, slot);
    return true;
  }

  /** Removes a record now, whatever its state (e.g. a new SYN reusing a recycled port). */
  remove(service: number, key: number): void {
    const slot = this.#index.get(key, service);
    if (slot < 0) return;
    this.#removedKey = key;
    this.#removedService = service;
    if (this.#state[slot] === RecordState.Active) {
      this.active--;
      this.#events.released(this.#service[slot] ?? 0, this.#server[slot] ?? -1, slot);
    } else {
      this.recycled--;
    }
    this.#release(slot);
  }

  /**
   * The kernel destroyed the flow of `key` (a conntrack destroy event): its
   * record is freed now, active (the server's count drops: released()) or
   * recycled. False if there is none, or if the record reused the key less
   * than REUSE_GUARD_MS ago: the event is then the previous flow's (counted
   * in endedStale; the guard is spent). O(1).
   *
   * `closedFlow`: the destroyed flow had seen a FIN or RST (its TCP state).
   * An active record has not (its FIN or RST copy would have recycled it),
   * so a young one is not that flow's either: it is the previous flow of a
   * reused port whose record was already gone (no remove(), no reuse flag),
   * destroyed by the kernel when the new SYN came, with its event read
   * after the new record was made (the event reader gathers up to 10 ms).
   * Freeing it would give back a concurrency slot and a server's count
   * that the new connection holds (seen: 6 downloads at once under a limit
   * of 5).
   */
  ended(service: number, key: number, now: number, closedFlow = false): boolean {
    const slot = this.#index.get(key, service);
    if (slot < 0) return false;
    if (this.#state[slot] === RecordState.Active) {
      if (this.#reused[slot] === 1 || closedFlow) {
        this.#reused[slot] = 0;
        if (now - (this.#created[slot] ?? 0) < REUSE_GUARD_MS) {
          this.counts.endedStale++;
          return false;
        }
      }
      this.active--;
      this.#events.released(this.#service[slot] ?? 0, this.#server[slot] ?? -1, slot);
    } else {
      this.recycled--; // its recycle ring entry goes stale with the generation
    }
    this.#release(slot);
    this.counts.ended++;
    return true;
  }

  /**
   * Marks the record in `slot` as adopted from a read of the kernel's table:
   * its flow may predate every conntrack event listener, and such a flow
   * reports no end (src/conntrack/events.ts), so only a resync frees it.
   * The daemon keeps resyncing while `legacy` > 0. A legacy record reuses no key.
   */
  markLegacy(slot: number): void {
    if (this.#state[slot] === RecordState.Free) return;
    if (this.#legacy[slot] === 0) {
      this.#legacy[slot] = 1;
      this.legacy++;
    }
    this.#reused[slot] = 0;
  }

  /**
   * Marks the record in `slot` as adopted from the kernel's table (a
   * restart's read, or a pair's takeover of replicated flows): no decision
   * of this daemon made it, so what the flow saw before (a SYN-ACK sent to
   * the other node) is unknown here (waitingOnDecision).
   */
  markAdopted(slot: number): void {
    if (this.#state[slot] !== RecordState.Free) this.#adopted[slot] = 1;
  }

  /**
   * Whether `key` has an active record that this daemon decided (not
   * adopted): the only kind whose retransmitted SYN without a reply says
   * the server left it unanswered (engine.ts #unanswered).
   */
  waitingOnDecision(service: number, key: number): boolean {
    const slot = this.#index.get(key, service);
    return slot >= 0 && this.#state[slot] === RecordState.Active && this.#adopted[slot] === 0;
  }

  /** Frees recycled records older than recycleMs. Returns how many. */
  sweep(now: number): number {
    let n = 0;
    while (this.#ringSize > 0) {
      const slot = this.#ringSlot[this.#ringHead] ?? -1;
      const gen = this.#ringGen[this.#ringHead] ?? 0;
      const stale = this.#gen[slot] !== gen || this.#state[slot] !== RecordState.Recycled;
      if (!stale && now - (this.#finished[slot] ?? 0) < this.#recycleMs) break;
      this.#ringHead = (this.#ringHead + 1) % this.capacity;
      this.#ringSize--;
      if (!stale) {
        this.recycled--;
        this.#release(slot);
        n++;
      }
    }
    this.counts.freed += n;
    return n;
  }

  /**
   * The resync (reads of the kernel's table, which the daemon streams in
   * chunks so a million flows never stall the packet loop) as mark and
   * sweep: resyncBegin() opens a pass, resyncSeen() stamps the record of
   * each live flow read, resyncSweep() then frees, a range of slots at a
   * time, the active records created before `olderThan` that the pass did
   * not stamp: their flow ended without a FIN, RST or destroy event we saw.
   * Young records are kept: their flow may not be in the kernel's table
   * yet. A slot freed and reused during the pass holds a young record, so
   * a stale stamp never keeps a wrong record.
   */
  resyncBegin(): void {
    this.#epoch = this.#epoch === 0xffffffff ? 1 : this.#epoch + 1;
  }

  /** The kernel has a live flow for (service, key) (see resyncBegin). */
  resyncSeen(service: number, key: number): void {
    const slot = this.#index.get(key, service);
    if (slot >= 0) this.#seen[slot] = this.#epoch;
  }

  /** Frees the unstamped old active records among slots [from, from + count) (see resyncBegin). */
  resyncSweep(olderThan: number, from: number, count: number): number {
    let n = 0;
    const end = Math.min(this.capacity, from + count);
    for (let slot = from; slot < end; slot++) {
      if (this.#state[slot] !== RecordState.Active || (this.#created[slot] ?? 0) >= olderThan || this.#seen[slot] === this.#epoch) continue;
      this.active--;
      this.#events.released(this.#service[slot] ?? 0, this.#server[slot] ?? -1, slot);
      this.#release(slot);
      n++;
    }
    this.counts.reconciled += n;
    return n;
  }

  /** Calls fn for each active record (for status and rebuilding server counts). */
  forEachActive(fn: (key: number, service: number, server: number, created: number) => void): void {
    for (let slot = 0; slot < this.capacity; slot++) {
      if (this.#state[slot] === RecordState.Active) fn(this.#key[slot] ?? -1, this.#service[slot] ?? 0, this.#server[slot] ?? -1, this.#created[slot] ?? 0);
    }
  }

  /**
   * Re-points every record after a reload: fn(service, server) gives the new
   * [service, server] or undefined when that server or service is gone (the
   * record is then dropped from tracking; its kernel flow continues).
   * The service index is part of a record's identity in the index, so
   * records whose service moved are re-indexed too.
   */
  remap(fn: (service: number, server: number) => readonly [number, number] | undefined): void {
    const moves: [slot: number, newService: number][] = [];
    for (let slot = 0; slot < this.capacity; slot++) {
      if (this.#state[slot] === RecordState.Free) continue;
      const to = fn(this.#service[slot] ?? 0, this.#server[slot] ?? -1);
      if (to === undefined) {
        if (this.#state[slot] === RecordState.Active) this.active--;
        else this.recycled--;
        this.#release(slot);
        continue;
      }
      const [svc, srv] = to;
      this.#server[slot] = srv;
      if (svc !== this.#service[slot]) moves.push([slot, svc]);
    }
    // Every old entry leaves the index before any slot's service changes
    // (the index reads keys[] and tags[] while it shifts entries); the
    // service mapping is one-to-one, so no new (key, service) equals
    // another record's.
    for (const [slot] of moves) this.#index.delete(this.#key[slot] ?? -1, this.#service[slot] ?? 0);
    for (const [slot, svc] of moves) {
      this.#service[slot] = svc;
      this.#index.set(this.#key[slot] ?? -1, svc, slot);
    }
  }

  #compactRing(): void {
    let kept = 0;
    for (let k = 0; k < this.#ringSize; k++) {
      const at = (this.#ringHead + k) % this.capacity;
      const slot = this.#ringSlot[at] ?? -1;
      const gen = this.#ringGen[at] ?? 0;
      if (this.#gen[slot] !== gen || this.#state[slot] !== RecordState.Recycled) continue;
      // Writing index `kept` (from head) never overtakes reading index `k`.
      const to = (this.#ringHead + kept) % this.capacity;
      this.#ringSlot[to] = slot;
      this.#ringGen[to] = gen;
      kept++;
    }
    this.#ringSize = kept;
  }

  #evictOldestRecycled(): boolean {
    while (this.#ringSize > 0) {
      const slot = this.#ringSlot[this.#ringHead] ?? -1;
      const gen = this.#ringGen[this.#ringHead] ?? 0;
      this.#ringHead = (this.#ringHead + 1) % this.capacity;
      this.#ringSize--;
      if (this.#gen[slot] === gen && this.#state[slot] === RecordState.Recycled) {
        this.recycled--;
        this.#release(slot);
        this.counts.recycledEarly++;
        return true;
      }
    }
    return false;
  }

  #release(slot: number): void {
    if (this.#legacy[slot] === 1) {
      this.#legacy[slot] = 0;
      this.legacy--;
    }
    this.#adopted[slot] = 0;
    const key = this.#key[slot] ?? -1;
    this.#index.delete(key, this.#service[slot] ?? 0);
    if (key >= KEY6_BASE) this.#clients?.release(key6Id(key));
    this.#state[slot] = RecordState.Free;
    this.#gen[slot] = ((this.#gen[slot] ?? 0) + 1) >>> 0;
    this.#free[this.#freeTop++] = slot;
  }
}
