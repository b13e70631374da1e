/**
 * Servers that refused connections or left them unanswered, from the
 * packet path to the health checker's passive check (health.refusedLimit
 * and health.unansweredLimit, health/checker.ts).
 *
 * A refusal is a server's reset answering a client's SYN: RST with ACK and
 * sequence number 0, which is how a TCP stack answers a segment without
 * ACK (a SYN) to a port with no listener (RFC 9293, 3.10.7.1; Linux
 * tcp_v4_send_reset). A reset of an established connection carries the
 * sequence number the peer acknowledged: nonzero, but for one ISN in 2^32.
 *
 * An unanswered SYN is a client's SYN retransmitted while its flow has
 * seen no reply from the server (nft.ts syn_decide copies it: conntrack
 * confirmed, no seen-reply): the first one left the node and the server
 * neither accepted nor refused it (a host down or unreachable, a listener
 * whose accept queue is full). A SYN-ACK lost on the client's side leaves
 * a reply seen, so the WAN's losses do not count; a retransmission counts
 * each time (a client retransmits after 1, 3, 7 ... s).
 *
 * The engine notes each (note(), noteUnanswered(): a count on the server and its
 * reference in a fixed ring: no allocation, no logging, no callback on the
 * packet path); the daemon's timer drains the ring into the checker. Past
 * the ring's size in one drain period the log only says so (`overflowed`),
 * and the reader then compares every server's count instead: refusals are
 * never lost, only the shortcut is.
 */
export interface Refusable {
  refused: number;
  unanswered: number;
}

/** Servers noted per drain period before the reader falls back to a walk of every server. */
export const REFUSAL_RING = 256;

export class RefusalLog<T extends Refusable> {
  readonly #ring: (T | undefined)[] = new Array<T | undefined>(REFUSAL_RING).fill(undefined);
  #n = 0;
  #overflowed = false;

  /** The packet path: `srv` refused a connection. */
  note(srv: T): void {
    srv.refused++;
    this.#push(srv);
  }

  /** The packet path: a SYN to `srv` was retransmitted unanswered. */
  noteUnanswered(srv: T): void {
    srv.unanswered++;
    this.#push(srv);
  }

  #push(srv: T): void {
    if (this.#n < REFUSAL_RING) this.#ring[this.#n++] = srv;
    else this.#overflowed = true;
  }

  /**
   * Hands every server noted since the last drain to `visit` (a server
   * noted several times may come several times), then empties the ring.
   * Returns true when some were not kept (the ring was full): the reader
   * must then look at every server's count.
   */
  drain(visit: (srv: T) => void): boolean {
    const n = this.#n;
    const overflowed = this.#overflowed;
    this.#n = 0;
    this.#overflowed = false;
    for (let i = 0; i < n; i++) {
      const s = this.#ring[i];
      this.#ring[i] = undefined;
      if (s !== undefined) visit(s);
    }
    return overflowed;
  }
}
