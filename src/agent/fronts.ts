/**
 * The agent's reports to every front node of its cluster (issue 21: a
 * keepalived pair runs two, and the backup must know the servers as well
 * as the master the moment it takes over).
 *
 * ONE ZeroMQ PUSH socket per front node. A single PUSH socket connected to
 * two peers does not copy messages to both: it round-robins them, so each
 * front would see every other report and read the servers as half as
 * lively. With a socket each, every message goes to every front.
 *
 * Independence: each socket has its own Sender (src/control/node.ts), with
 * its own serialised chain and a backlog bounded at SENDER_BACKLOG. The
 * sockets are `immediate` with a zero send timeout, so a send to a front
 * that is down fails at once and is counted as dropped for that front; it
 * neither blocks nor delays the sends to the others. Drops are counted per
 * front and shown in status and metrics.
 */
import type { PeerConfig } from '../control/config.ts';
import type { Body, MessageType } from '../control/messages.ts';
import type { ControlNode, Sender } from '../control/node.ts';

/** One front node as the agent's status shows it. */
export interface FrontLinkStatus {
  readonly endpoint: string;
  /** The handshake passed and the connection has not dropped since. */
  readonly connected: boolean;
  /** Messages delivered to the socket (queued for the front node by ZeroMQ). */
  readonly sent: number;
  /** Messages not sent: the front was not connected, or its backlog was full. */
  readonly dropped: number;
  /** Connections established (the first and every reconnection), and lost. */
  readonly connects: number;
  readonly disconnects: number;
}

export class FrontFanout {
  readonly #senders: readonly Sender[];

  /**
   * Connects one PUSH per front. `onConnect(endpoint)` runs each time one of
   * them (re)connects: the agent then reports at once, so a restarted front
   * learns the server's health without waiting for the next interval.
   */
  constructor(node: ControlNode, fronts: readonly PeerConfig[], onConnect: (endpoint: string) => void) {
    this.#senders = fronts.map((f) =>
      node.connectPush(f.endpoint, f.publicKey, () => {
        onConnect(f.endpoint);
      }),
    );
  }

  /** Queues the message on every front's socket; returns how many took it (the rest are counted as dropped). */
  send<T extends MessageType>(type: T, body: Body<T>): number {
    let n = 0;
    for (const s of this.#senders) if (s.send(type, body)) n++;
    return n;
  }

  /** Resolves when every socket's queued sends have been attempted (shutdown, tests). */
  async drain(): Promise<void> {
    await Promise.all(this.#senders.map((s) => s.drain()));
  }

  status(): FrontLinkStatus[] {
    return this.#senders.map((s) => ({
      endpoint: s.link?.endpoint ?? '',
      connected: s.link?.connected ?? false,
      sent: s.sent,
      dropped: s.dropped,
      connects: s.link?.connects ?? 0,
      disconnects: s.link?.disconnects ?? 0,
    }));
  }
}
