/**
 * CURVE socket options of the throttling sockets, on the control plane's
 * keys (src/control/keys.ts) and ZAP handler (src/control/zap.ts): a bound
 * socket is a CURVE server whose clients' keys are checked against a ZAP
 * domain's allowlist; a connecting socket is a CURVE client that knows the
 * server's public key. Plaintext only when the config says so (logged as an
 * error by the caller). The timing options match src/control/node.ts:
 * heartbeats notice a vanished peer, reconnects are quick.
 */
import type { Socket } from 'zeromq';
import type { ControlBase } from '../control/config.ts';
import { readKeyPair, resolveAllowlist, resolvePublicKey, type KeyPair } from '../control/keys.ts';
import { ZapHandler } from '../control/zap.ts';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';

export interface HandshakeCounters {
  authFailures: number;
  protocolFailures: number;
}

export class CurveSockets {
  readonly #name: string;
  readonly #base: ControlBase;
  readonly #keys: KeyPair | undefined;
  readonly #limited: LimitedLog;
  readonly zap: ZapHandler;
  readonly handshakes: HandshakeCounters = { authFailures: 0, protocolFailures: 0 };
  #released = false;

  private constructor(name: string, base: ControlBase, zap: ZapHandler, log: Logger) {
    this.#name = name;
    this.#base = base;
    this.zap = zap;
    this.#limited = new LimitedLog(log);
    this.#keys = base.plaintext || base.keyFile === undefined ? undefined : readKeyPair(base.keyFile);
  }

  /** Reads our key pair (KeyFileError when bad) and takes the process's ZAP handler. */
  static async create(name: string, base: ControlBase, log: Logger): Promise<CurveSockets> {
    if (base.plaintext) log.error('throttling sockets in PLAINTEXT mode: no encryption and no authentication; set control.plaintext: false and configure keys');
    const zap = await ZapHandler.acquire(log);
    try {
      return new CurveSockets(name, base, zap, log);
    } catch (err) {
      zap.release();
      throw err;
    }
  }

  get publicKey(): string | undefined {
    return this.#keys?.publicKey;
  }

  common(): Record<string, unknown> {
    return {
      linger: 0,
      maxMessageSize: this.#base.maxMessageBytes,
      heartbeatInterval: 1000,
      heartbeatTimeout: 3000,
      reconnectInterval: 100,
      reconnectMaxInterval: 2000,
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
    if (serverKeyRef === undefined) throw new Error('a peer public key is required unless plaintext');
    return { ...this.common(), curveServerKey: resolvePublicKey(serverKeyRef), curvePublicKey: k.publicKey, curveSecretKey: k.secretKey };
  }

  /** Counts and logs (bounded) failed handshakes of a socket. */
  watch(socket: Socket, what: string): void {
    socket.events.on('handshake:error:auth', (e) => {
      this.handshakes.authFailures++;
      this.#limited.warn(`auth:${what}`, { socket: what, address: e.address }, 'throttling handshake refused');
    });
    socket.events.on('handshake:error:protocol', (e) => {
      this.handshakes.protocolFailures++;
      this.#limited.warn(`proto:${what}`, { socket: what, address: e.address }, 'throttling handshake failed (not a ZMTP/CURVE peer?)');
    });
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.zap.release();
  }
}
