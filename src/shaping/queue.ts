/**
 * A checkpoint's queue of held requests (seed 001: "per-frequency counter
 * queue; head of the queue serves as a global queue timer").
 *
 * Structure: one FIFO per counter (per stick-table entry: requests of one
 * key wait in arrival order, so the earliest is always the head), and a
 * min-heap of the entries that have waiting requests, ordered by the time
 * their head may next leave. Only a head has a wake time; only the heap's
 * minimum arms the queue's one timer (the injected Scheduler). So there is
 * one timer per checkpoint queue however many requests wait.
 *
 * A head's wake time is min(gate.readyAt(entry), since + maxDelayMs): when
 * its counter will admit one more, or its deadline. When the timer fires,
 * fire(now) visits each entry whose wake time has come, and for its FIFO:
 * a head past its deadline leaves rejected; a head the gate lets pass
 * leaves admitted; repeat until the gate refuses. As many as the counter
 * allows proceed. If requests remain, the new head takes over the wake
 * time (hand-over) and the entry goes back into the heap.
 *
 * A concurrency gate has no time of its own (readyAt = Infinity): a release
 * calls poke(entry, now), which makes the entry due at once; the drain then
 * runs from the timer, never inside the caller (the caller may be in the
 * middle of deciding a packet).
 *
 * Bounds: at most maxLength requests wait (enqueue() refuses beyond); no
 * request waits past since + maxDelayMs (+ timer lateness). Links live in
 * the caller's preallocated arrays (HeldPool): no allocation per request.
 */

/** Arms the queue's one timer: fire(at) should be called at or after `at`; Infinity disarms. */
export interface Scheduler {
  arm(at: number): void;
}

export interface QueueGate {
  /** Least time the head of `entry`'s FIFO may pass if nothing else changes (Infinity: only a release). */
  readyAt(entry: number, now: number): number;
  /** Lets one request of `entry` pass now if the counter allows it (and counts it). */
  pass(entry: number, now: number): boolean;
  /** A request left the queue: admitted (passed) or rejected (past its deadline). */
  left(held: number, entry: number, passed: boolean, now: number): void;
}

/** Per held request: next in its FIFO, and when it was enqueued. Owned by HeldPool. */
export interface HeldLinks {
  readonly next: Int32Array;
  readonly since: Float64Array;
}

export class WaitQueue {
  readonly maxLength: number;
  readonly maxDelayMs: number;
  length = 0;
  readonly counts = { enqueued: 0, refused: 0, admitted: 0, expired: 0 };
  readonly #links: HeldLinks;
  readonly #gate: QueueGate;
  readonly #scheduler: Scheduler;
  readonly #head: Int32Array;
  readonly #tail: Int32Array;
  readonly #heap: Int32Array;
  readonly #pos: Int32Array;
  readonly #wake: Float64Array;
  #heapSize = 0;
  #armedAt = Infinity;
  #draining = -1;
  #repoked = false;

  constructor(entries: number, links: HeldLinks, maxLength: number, maxDelayMs: number, gate: QueueGate, scheduler: Scheduler) {
    this.maxLength = maxLength;
    this.maxDelayMs = maxDelayMs;
    this.#links = links;
    this.#gate = gate;
    this.#scheduler = scheduler;
    this.#head = new Int32Array(entries).fill(-1);
    this.#tail = new Int32Array(entries).fill(-1);
    this.#heap = new Int32Array(entries);
    this.#pos = new Int32Array(entries).fill(-1);
    this.#wake = new Float64Array(entries);
  }

  /** At maxLength: the next enqueue() would be refused. */
  get full(): boolean {
    return this.length >= this.maxLength;
  }

  /** Whether entry has requests waiting (a new request of that key must queue behind them). */
  waiting(entry: number): boolean {
    return (this.#head[entry] ?? -1) >= 0;
  }

  /** Appends `held` to entry's FIFO. False (counted) if the queue is at maxLength. */
  enqueue(entry: number, held: number, now: number): boolean {
    if (this.length >= this.maxLength) {
      this.counts.refused++;
      return false;
    }
    const links = this.#links;
    links.next[held] = -1;
    links.since[held] = now;
    const tail = this.#tail[entry] ?? -1;
    this.#tail[entry] = held;
    this.length++;
    this.counts.enqueued++;
    if (tail >= 0) {
      links.next[tail] = held;
      return true;
    }
    this.#head[entry] = held;
    if (entry !== this.#draining) {
      this.#set(entry, Math.min(this.#gate.readyAt(entry, now), now + this.maxDelayMs));
      this.#rearm();
    }
    return true;
  }

  /** entry's counter changed in its favour (a release): its head is due now. */
  poke(entry: number, now: number): void {
    if ((this.#head[entry] ?? -1) < 0) return;
    if (entry === this.#draining) {
      this.#repoked = true;
      return;
    }
    this.#set(entry, now);
    this.#rearm();
  }

  /** The timer: lets due heads leave (see the file comment). */
  fire(now: number): void {
    this.#armedAt = Infinity;
    // Each entry is drained at most once per call: a re-inserted entry's
    // wake time is after now (bounded by the heap size).
    for (let guard = this.#heapSize; guard > 0 && this.#heapSize > 0; guard--) {
      const e = this.#heap[0] ?? 0;
      if ((this.#wake[e] ?? 0) > now) break;
      this.#remove(e);
      this.#drain(e, now);
    }
    this.#rearm();
  }

  /** Enqueue time of the longest-waiting request, or undefined (status). */
  oldestSince(): number | undefined {
    let oldest = Infinity;
    for (let k = 0; k < this.#heapSize; k++) {
      const h = this.#head[this.#heap[k] ?? 0] ?? -1;
      if (h >= 0) oldest = Math.min(oldest, this.#links.since[h] ?? Infinity);
    }
    return oldest === Infinity ? undefined : oldest;
  }

  /** When the queue's timer is armed for (Infinity: not armed). */
  get armedAt(): number {
    return this.#armedAt;
  }

  #drain(e: number, now: number): void {
    const links = this.#links;
    const gate = this.#gate;
    this.#draining = e;
    this.#repoked = false;
    for (let round = 0; round < 2; round++) {
      for (let h = this.#head[e] ?? -1; h >= 0; h = this.#head[e] ?? -1) {
        const expired = (links.since[h] ?? 0) + this.maxDelayMs <= now;
        if (!expired && !gate.pass(e, now)) break;
        const next = links.next[h] ?? -1;
        this.#head[e] = next;
        if (next < 0) this.#tail[e] = -1;
        this.length--;
        if (expired) this.counts.expired++;
        else this.counts.admitted++;
        gate.left(h, e, !expired, now);
      }
      // A release during a leave (the admitted request was rejected
      // further on and gave back a count here) makes room: try once more.
      if (!this.#takeRepoke()) break;
    }
    this.#draining = -1;
    const h = this.#head[e] ?? -1;
    if (h < 0) return;
    const wake = Math.min(gate.readyAt(e, now), (links.since[h] ?? 0) + this.maxDelayMs);
    this.#set(e, wake > now ? wake : now + 1);
  }

  #takeRepoke(): boolean {
    const r = this.#repoked;
    this.#repoked = false;
    return r;
  }

  #rearm(): void {
    const at = this.#heapSize > 0 ? (this.#wake[this.#heap[0] ?? 0] ?? Infinity) : Infinity;
    if (at === this.#armedAt) return;
    this.#armedAt = at;
    this.#scheduler.arm(at);
  }

  // Binary min-heap of entries by #wake, with #pos for updates in place.
  #set(e: number, wake: number): void {
    this.#wake[e] = wake;
    let i = this.#pos[e] ?? -1;
    if (i < 0) {
      i = this.#heapSize++;
      this.#heap[i] = e;
      this.#pos[e] = i;
    }
    this.#siftDown(this.#siftUp(i));
  }

  #remove(e: number): void {
    const i = this.#pos[e] ?? -1;
    if (i < 0) return;
    this.#pos[e] = -1;
    const last = this.#heap[--this.#heapSize] ?? 0;
    if (i === this.#heapSize) return;
    this.#heap[i] = last;
    this.#pos[last] = i;
    this.#siftDown(this.#siftUp(i));
  }

  #less(a: number, b: number): boolean {
    return (this.#wake[this.#heap[a] ?? 0] ?? 0) < (this.#wake[this.#heap[b] ?? 0] ?? 0);
  }

  #swap(a: number, b: number): void {
    const ea = this.#heap[a] ?? 0;
    const eb = this.#heap[b] ?? 0;
    this.#heap[a] = eb;
    this.#heap[b] = ea;
    this.#pos[eb] = a;
    this.#pos[ea] = b;
  }

  #siftUp(i: number): number {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
    return i;
  }

  #siftDown(i: number): void {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.#heapSize && this.#less(l, m)) m = l;
      if (r < this.#heapSize && this.#less(r, m)) m = r;
      if (m === i) return;
      this.#swap(i, m);
      i = m;
    }
  }
}
