/**
 * CURVE options for one daemon's ZeroMQ sockets, shared by the control plane
 * (node.ts) and the throttling sockets (src/throttle/): our key pair
 * (keys.ts) and the process's ZAP handler (zap.ts). A bound socket is a
 * CURVE server whose clients' keys are checked against a ZAP domain's
 * allowlist (domains are per process, so ours are prefixed with our name);
 * a connecting socket is a CURVE client that knows the server's public key.
 * Plaintext only when the config says so (logged as an error). Failed
 * handshakes are counted and logged at a bounded rate.
 */
import type { Socket } from 'zeromq';
import type { ControlBase } from './config.ts';
import { readKeyPair, resolveAllowlist, resolvePublicKey, type KeyPair } from './keys.ts';
import { ZapHandler } from './zap.ts';
import { InvalidArgumentError } from '../errors/errors.ts';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';

export interface HandshakeCounters {
  authFailures: number;
  protocolFailures: number;
}

/** What differs between the users: timing, size bound, and the words in the log. */
export interface CurveProfile {
  /** 'control' or 'throttling': names the sockets in log lines. */
  readonly label: string;
  /** Logged as an error when the config asks for plaintext. */
  readonly plaintextWarning: string;
  /** libzmq drops a connection whose message exceeds this. */
  readonly maxMessageSize: number;
  /** Heartbeats notice a vanished peer; reconnects retry within these bounds (ms). */
  readonly heartbeatInterval: number;
  readonly heartbeatTimeout: number;
  readonly reconnectInterval: number;
  readonly reconnectMaxInterval: number;
  /**
   * A dial not answered within this many ms is given up and redialled
   * (ZMQ_CONNECT_TIMEOUT). Without it a dial to a peer whose host went
   * silent (died, link pulled: no reset) sits in the kernel's SYN
   * retransmissions (1, 3, 7, 15, 31 s after it began), and the peer, once
   * back, is heard only at the next one: measured 10.8 s late after a 25 s
   * outage (test/netns/control-reconnect.test.ts).
   */
  readonly connectTimeout: number;
}

export class CurveSockets {
  readonly #name: string;
  readonly #profile: CurveProfile;
  readonly #keys: KeyPair | undefined;
  readonly #limited: LimitedLog;
  readonly zap: ZapHandler;
  readonly handshakes: HandshakeCounters = { authFailures: 0, protocolFailures: 0 };
  #released = false;

  private constructor(name: string, base: ControlBase, profile: CurveProfile, zap: ZapHandler, log: Logger) {
    this.#name = name;
    this.#profile = profile;
    this.zap = zap;
    this.#limited = new LimitedLog(log);
    this.#keys = base.plaintext || base.keyFile === undefined ? undefined : readKeyPair(base.keyFile);
  }

  /** Reads our key pair (KeyFileError when bad) and takes the process's ZAP handler. */
  static async create(name: string, base: ControlBase, profile: CurveProfile, log: Logger): Promise<CurveSockets> {
    if (base.plaintext) log.error(profile.plaintextWarning);
    const zap = await ZapHandler.acquire(log);
    try {
      return new CurveSockets(name, base, profile, zap, log);
    } catch (err) {
      zap.release();
      throw err;
    }
  }

  get publicKey(): string | undefined {
    return this.#keys?.publicKey;
  }

  common(): Record<string, unknown> {
    const p = this.#profile;
    return {
      linger: 0,
      maxMessageSize: p.maxMessageSize,
      heartbeatInterval: p.heartbeatInterval,
      heartbeatTimeout: p.heartbeatTimeout,
      reconnectInterval: p.reconnectInterval,
      reconnectMaxInterval: p.reconnectMaxInterval,
      connectTimeout: p.connectTimeout,
    };
  }

  /** Options of a bound socket; (re)sets the ZAP domain's allowlist. */
  server(zapDomain: string, allow: readonly string[]): Record<string, unknown> {
    const k = this.#keys;
    if (!k) return this.common();
    this.allow(zapDomain, allow);
    return { ...this.common(), curveServer: true, curveSecretKey: k.secretKey, curvePublicKey: k.publicKey, zapDomain: `${this.#name}/${zapDomain}` };
  }

  /** Replaces a bound socket's allowlist (reload). */
  allow(zapDomain: string, allow: readonly string[]): void {
    if (this.#keys) this.zap.allow(`${this.#name}/${zapDomain}`, resolveAllowlist(allow));
  }

  zapCounters(zapDomain: string): { accepted: number; refused: number } {
    return this.zap.counters.get(`${this.#name}/${zapDomain}`) ?? { accepted: 0, refused: 0 };
  }

  /** Options of a connecting socket to a server with this key. */
  client(serverKeyRef: string | undefined): Record<string, unknown> {
    const k = this.#keys;
    if (!k) return this.common();
    if (serverKeyRef === undefined) throw new InvalidArgumentError('a peer public key is required unless plaintext');
    return { ...this.common(), curveServerKey: resolvePublicKey(serverKeyRef), curvePublicKey: k.publicKey, curveSecretKey: k.secretKey };
  }

  /** Counts and logs (bounded) failed handshakes of a socket. */
  watch(socket: Socket, what: string): void {
    socket.events.on('handshake:error:auth', (e) => {
      this.handshakes.authFailures++;
      this.#limited.warn(`auth:${what}`, { socket: what, address: e.address }, `${this.#profile.label} handshake refused`);
    });
    socket.events.on('handshake:error:protocol', (e) => {
      this.handshakes.protocolFailures++;
      this.#limited.warn(`proto:${what}`, { socket: what, address: e.address }, `${this.#profile.label} handshake failed (not a ZMTP/CURVE peer?)`);
    });
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.zap.release();
  }
}
