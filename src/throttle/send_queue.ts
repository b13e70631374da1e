/**
 * A bounded FIFO of multipart messages in front of one ZeroMQ socket.
 * zeromq.js allows one send in flight per socket, so sends are pumped one
 * after another by a single loop; callers never await. A full queue drops
 * the new message and counts it (a PUB socket drops too when a peer is
 * slow: PUB/SUB is lossy by design, and the throttle fails open).
 */
import type { Publisher } from 'zeromq';

/** Placeholder for sent slots, so the queue does not hold on to their frames. */
const SENT: string[] = [];

export class SendQueue {
  readonly #socket: Publisher;
  readonly #max: number;
  #queue: string[][] = [];
  #head = 0;
  #pumping = false;
  #idle: (() => void)[] = [];
  sent = 0;
  dropped = 0;
  errors = 0;

  constructor(socket: Publisher, max: number) {
    this.#socket = socket;
    this.#max = max;
  }

  get length(): number {
    return this.#queue.length - this.#head;
  }

  /** Queues one message; false when dropped (queue full or socket closed). */
  push(frames: string[]): boolean {
    if (this.#socket.closed || this.length >= this.#max) {
      this.dropped++;
      return false;
    }
    this.#queue.push(frames);
    if (!this.#pumping) void this.#pump();
    return true;
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      while (this.#head < this.#queue.length) {
        const frames = this.#queue[this.#head] as string[];
        this.#queue[this.#head++] = SENT;
        if (this.#head > 4096 && this.#head * 2 > this.#queue.length) {
          this.#queue = this.#queue.slice(this.#head);
          this.#head = 0;
        }
        if (this.#socket.closed) {
          this.dropped++;
          continue;
        }
        try {
          await this.#socket.send(frames);
          this.sent++;
        } catch {
          this.errors++;
        }
      }
      this.#queue = [];
      this.#head = 0;
    } finally {
      this.#pumping = false;
      const waiters = this.#idle;
      this.#idle = [];
      for (const w of waiters) w();
    }
  }

  /** Resolves once everything queued so far was handed to the socket. */
  drain(): Promise<void> {
    if (!this.#pumping) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }
}
