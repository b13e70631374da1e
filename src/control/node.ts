/**
 * One daemon's place on the control plane: its ZeroMQ sockets, CURVE keys,
 * ZAP allowlists, and the checked receive loops.
 *
 * Topology (every link is CURVE-encrypted and authenticated unless the
 * config says plaintext):
 *   agent  --PUSH-->  front PULL (bound; ZAP domain "agents")
 *   front  PUB (bound; ZAP domain "subscribers")  -->  SUB of DNS and of other fronts
 *   DNS    PUB (bound)                            -->  SUB of every front
 * Bound sockets are CURVE servers and check each client's key against the
 * domain's allowlist; connecting sockets are CURVE clients that know the
 * server's public key. ZeroMQ reconnects by itself after either side
 * restarts; heartbeats notice a peer that vanished without a TCP reset.
 *
 * Receivers never trust a message: decodeMessage (codec.ts) checks frames,
 * size, JSON, envelope, version, type, staleness and the body's schema; a
 * failure is counted by reason and logged at a bounded rate, and the loop
 * goes on. A handler that throws is counted and logged the same way.
 */
import { Publisher, Pull, Push, Subscriber, type Socket } from 'zeromq';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import { decodeMessage, encodeMessage, REJECT_REASONS, type DecodeLimits, type RejectReason } from './codec.ts';
import type { ControlBase } from './config.ts';
import { CurveSockets } from './curve.ts';
import { MESSAGE_TYPES, type Body, type Envelope, type MessageType } from './messages.ts';
import type { ZapHandler } from './zap.ts';

export type Handlers = { [T in MessageType]?: (msg: Envelope<T>) => void };

export interface PeerSeen {
  lastSeen: number;
  messages: number;
  lastType: MessageType;
}

export interface ControlCounters {
  received: Record<MessageType, number>;
  sent: Record<MessageType, number>;
  rejected: Record<RejectReason, number>;
  /** Sends dropped: no connected peer, or the socket's queue full. */
  sendDropped: number;
  handlerErrors: number;
  /** Receives that failed (EAGAIN from zeromq.js, or worse) and were retried. */
  receiveErrors: number;
}

function zeroes<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

/** Messages queued on one Sender and not yet attempted, at most; more are dropped (counted). */
export const SENDER_BACKLOG = 64;

/**
 * A connecting socket's link to its one peer, from the socket's events:
 * connected once the handshake passed, until the connection drops.
 */
export interface PeerLink {
  readonly endpoint: string;
  connected: boolean;
  /** Handshakes that passed (the first connection and every reconnection). */
  connects: number;
  disconnects: number;
}

/**
 * Bounded sender over one socket: sends are serialised, a backlog beyond
 * SENDER_BACKLOG is dropped. Each sender has its own chain and backlog, so
 * a socket whose peer is gone (its sends fail at once or pile up) never
 * delays another sender's messages. Counts are kept per sender (here) and
 * per node (ControlNode.counters).
 */
export class Sender {
  readonly #node: ControlNode;
  readonly #socket: Push | Publisher;
  #chain: Promise<void> = Promise.resolve();
  #pending = 0;
  /** Messages this sender delivered to its socket, and dropped (backlog full, socket closed, no peer). */
  sent = 0;
  dropped = 0;
  /** Connecting senders only (connectPush): the link to the peer. */
  readonly link: PeerLink | undefined;

  constructor(node: ControlNode, socket: Push | Publisher, link?: PeerLink) {
    this.#node = node;
    this.#socket = socket;
    this.link = link;
  }

  /** Queues one message; false when it was dropped at once. */
  send<T extends MessageType>(type: T, body: Body<T>): boolean {
    if (this.#socket.closed || this.#pending >= SENDER_BACKLOG) {
      this.#node.counters.sendDropped++;
      this.dropped++;
      return false;
    }
    const frames = encodeMessage(type, this.#node.name, body);
    this.#pending++;
    this.#chain = this.#chain.then(async () => {
      try {
        await this.#socket.send(frames);
        this.#node.counters.sent[type]++;
        this.sent++;
      } catch {
        // EAGAIN: no peer connected (immediate) or high-water mark reached.
        this.#node.counters.sendDropped++;
        this.dropped++;
      } finally {
        this.#pending--;
      }
    });
    return true;
  }

  /** Messages queued and not yet attempted. */
  get pending(): number {
    return this.#pending;
  }

  /** Resolves when every queued send has been attempted (tests, shutdown). */
  drain(): Promise<void> {
    return this.#chain;
  }
}

export class ControlNode {
  readonly name: string;
  readonly counters: ControlCounters = {
    received: zeroes(MESSAGE_TYPES),
    sent: zeroes(MESSAGE_TYPES),
    rejected: zeroes(REJECT_REASONS),
    sendDropped: 0,
    handlerErrors: 0,
    receiveErrors: 0,
  };
  readonly peers = new Map<string, PeerSeen>();
  /** Keys, ZAP allowlists, socket options, handshake counts (curve.ts). */
  readonly curve: CurveSockets;
  readonly #limited: LimitedLog;
  readonly #limits: DecodeLimits;
  readonly #sockets: Socket[] = [];

  private constructor(name: string, base: ControlBase, curve: CurveSockets, log: Logger) {
    this.name = name;
    this.curve = curve;
    this.#limited = new LimitedLog(log);
    this.#limits = { maxBytes: base.maxMessageBytes, maxAgeMs: base.maxAgeSeconds * 1000, maxFutureMs: 5000 };
  }

  /** Reads our key pair (KeyFileError if it is bad) and takes the process's ZAP handler. */
  static async create(name: string, base: ControlBase, log: Logger): Promise<ControlNode> {
    const curve = await CurveSockets.create(
      name,
      base,
      {
        label: 'control',
        plaintextWarning: 'control plane in PLAINTEXT mode: no encryption and no authentication; anyone who reaches these ports can send reports. Set control.plaintext: false and configure keys.',
        // Larger than the decode limit, so oversized messages are seen and counted.
        maxMessageSize: base.maxMessageBytes * 4,
        // A peer whose host died (no FIN, no RST) is noticed within 3 s and
        // then redialled; with 6 s, an agent heard a revived front node only
        // 6 s after it came back (its TCP retransmissions had backed off), and
        // that node, made master meanwhile, had marked every server down
        // ("agent silent"). One heartbeat a second per connection is cheap.
        heartbeatInterval: 1000,
        heartbeatTimeout: 3000,
        reconnectInterval: 200,
        // At most 1 s between reconnects: a peer that restarts (a front
        // node's daemon, a DNS server) is heard again within about a
        // second, well inside the DNS server's staleness bound (3 report
        // intervals by default). With 5 s, a front pair's backup restarted
        // just before its master died stayed unheard by the DNS servers for
        // seconds after it took over, and they showed the cluster down.
        // The cost is one TCP connect per second per peer that is down.
        reconnectMaxInterval: 1000,
        // A peer back after a silent outage is heard within ~3 s (this plus
        // one reconnect interval), not at the next SYN retransmission. 2 s
        // is ample for a handshake on a LAN or a WAN path.
        connectTimeout: 2000,
      },
      log,
    );
    return new ControlNode(name, base, curve, log);
  }

  get publicKey(): string | undefined {
    return this.curve.publicKey;
  }

  get zap(): ZapHandler {
    return this.curve.zap;
  }

  /** Replaces a domain's allowlist (at start and on reload). */
  allow(domain: string, entries: readonly string[]): void {
    this.curve.allow(domain, entries);
  }

  /** Accepted and refused handshakes of one of our domains. */
  zapCounters(domain: string): { accepted: number; refused: number } {
    return this.curve.zapCounters(domain);
  }


  /** Bound PULL: agents push here. */
  async bindPull(endpoint: string, domain: string, allow: readonly string[], handlers: Handlers): Promise<void> {
    const sock = new Pull({ ...this.curve.server(domain, allow), receiveHighWaterMark: 10_000 });
    this.curve.watch(sock, `pull ${endpoint}`);
    this.#sockets.push(sock);
    await sock.bind(endpoint);
    void this.#receive(sock, handlers, endpoint);
  }

  /** Bound PUB: subscribers (DNS, other fronts) connect here. */
  async bindPub(endpoint: string, domain: string, allow: readonly string[]): Promise<Sender> {
    const sock = new Publisher({ ...this.curve.server(domain, allow), sendHighWaterMark: 10_000 });
    this.curve.watch(sock, `pub ${endpoint}`);
    this.#sockets.push(sock);
    await sock.bind(endpoint);
    return new Sender(this, sock);
  }

  /**
   * Connecting PUSH (agent to front). Messages sent while no peer is
   * connected are dropped and counted. `onHandshake` runs each time a
   * connection to the peer is (re)established and its handshake passed:
   * the sender may then say at once what the peer must not miss.
   */
  connectPush(endpoint: string, serverKeyRef: string | undefined, onHandshake?: () => void): Sender {
    const sock = new Push({ ...this.curve.client(serverKeyRef), immediate: true, sendTimeout: 0, sendHighWaterMark: 1000 });
    this.curve.watch(sock, `push ${endpoint}`);
    const link: PeerLink = { endpoint, connected: false, connects: 0, disconnects: 0 };
    sock.events.on('handshake', () => {
      link.connected = true;
      link.connects++;
      onHandshake?.();
    });
    sock.events.on('disconnect', () => {
      if (link.connected) link.disconnects++;
      link.connected = false;
    });
    this.#sockets.push(sock);
    sock.connect(endpoint);
    return new Sender(this, sock, link);
  }

  /** Connecting SUB to a peer's PUB, subscribed to the types handled. */
  connectSub(endpoint: string, serverKeyRef: string | undefined, handlers: Handlers): void {
    const sock = new Subscriber({ ...this.curve.client(serverKeyRef), receiveHighWaterMark: 10_000 });
    this.curve.watch(sock, `sub ${endpoint}`);
    this.#sockets.push(sock);
    for (const t of Object.keys(handlers)) sock.subscribe(t);
    sock.connect(endpoint);
    void this.#receive(sock, handlers, endpoint);
  }

  /**
   * The receive loop of one socket, until it is closed. A receive that
   * fails with EAGAIN is retried: zeromq.js 6 sometimes rejects a pending
   * receive with it on CURVE sockets (seen on PULL sockets whose peers
   * reconnect), and ending the loop there would leave the socket deaf for
   * good. Other errors are logged (bounded) and retried after a pause.
   */
  async #receive(sock: Pull | Subscriber, handlers: Handlers, where: string): Promise<void> {
    const accepted = new Set(Object.keys(handlers) as MessageType[]);
    // A function, so the check after an await is not narrowed away: close() may run meanwhile.
    const closed = (): boolean => sock.closed;
    while (!closed()) {
      let frames: Buffer[];
      try {
        frames = await sock.receive();
      } catch (err) {
        if (closed()) return;
        this.counters.receiveErrors++;
        if ((err as { code?: string }).code !== 'EAGAIN') {
          this.#limited.warn('receive', { err, socket: where }, 'control receive failed; retrying');
          await new Promise((r) => setTimeout(r, 100));
        }
        continue;
      }
      this.deliver(frames, accepted, handlers, where);
    }
  }

  /** Checks and dispatches one received message. Public for the fuzz test; never throws. */
  deliver(frames: readonly Buffer[], accepted: ReadonlySet<MessageType>, handlers: Handlers, where: string, now: number = Date.now()): boolean {
    const d = decodeMessage(frames, this.#limits, accepted, now);
    if (!d.ok) {
      this.counters.rejected[d.reason]++;
      this.#limited.warn(`reject:${d.reason}`, { socket: where, reason: d.reason, detail: d.detail }, 'control message dropped');
      return false;
    }
    const m = d.message;
    this.counters.received[m.type]++;
    const seen = this.peers.get(m.from);
    if (seen) {
      seen.lastSeen = now;
      seen.messages++;
      seen.lastType = m.type;
    } else if (this.peers.size < 4096) {
      this.peers.set(m.from, { lastSeen: now, messages: 1, lastType: m.type });
    }
    try {
      (handlers[m.type] as ((msg: Envelope) => void) | undefined)?.(m);
    } catch (err) {
      this.counters.handlerErrors++;
      this.#limited.warn('handler', { err, type: m.type, from: m.from }, 'control message handler failed');
    }
    return true;
  }

  close(): void {
    for (const s of this.#sockets) s.close();
    this.#sockets.length = 0;
    this.curve.release();
  }
}
