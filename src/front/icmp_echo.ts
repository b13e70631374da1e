/**
 * ICMP echo for the RTT prober (receive_probe_for_rtt.ts), behind a small
 * `Pinger` interface so the prober's logic is tested with a fake.
 *
 * The implementation is the npm package `net-ping` (on `raw-socket`): one
 * session per process, a raw ICMP socket, which needs root (CAP_NET_RAW).
 * When the session cannot be created, createNetPinger throws
 * PingerUnavailableError and the caller runs without probing (the front
 * node's job is steering traffic; RTT probing is an aid to DNS).
 *
 * Timing. net-ping stamps an echo with `new Date()` when the raw socket has
 * sent it and again when the reply is read, so RTTs have 1 ms resolution.
 * That is enough for what the DNS does with them: it compares WAN RTTs of
 * tens to hundreds of ms between clusters, and averages `count` echoes per
 * target, so a truncation error below 1 ms per sample is small beside both
 * the differences it looks for and the WAN's own jitter. The larger error is
 * event-loop delay before the reply is read, which a busy front node adds to
 * every target alike. Date is the wall clock: if it is stepped during an
 * echo, the difference is meaningless, so a Date RTT outside [0, the
 * monotonic time around the whole ping + 1 ms] is replaced by the monotonic
 * one (which includes our own scheduling delay but never goes backwards).
 *
 * Families. IPv4 targets go to an ICMP session, IPv6 targets (control
 * protocol version 2) to a second, ICMPv6 session (net-ping's
 * `networkProtocol: IPv6`: a raw ICMPv6 socket, echo type 128, the kernel
 * fills in the ICMPv6 checksum), opened beside the first. Failure to open
 * the IPv6 one (a host with IPv6 disabled) leaves IPv4 probing on: IPv6
 * targets are then answered null at once and the reason is kept
 * (`ipv6Unavailable`) for status. The family is read from the target text
 * (a colon is IPv6); targets arrive in canonical text from the decoder.
 *
 * Sessions use retries 0 (the prober sends `count` echoes itself; a retry
 * would hide loss) and the prober's timeout. net-ping identifies its echoes
 * by (pid, sequence); at most 65535 may be outstanding, which the config's
 * bounds keep us under (maxPerSecond x timeoutMs).
 */
import { createRequire } from 'node:module';
import { SluiceError } from '../errors/errors.ts';

export interface Pinger {
  /**
   * Sends one echo request to `target` (IPv4 or IPv6 text). `done` is called exactly once:
   * with the RTT in ms when the echo reply came back, or null on timeout or
   * any error (unreachable, TTL exceeded, send failure, pinger closed). It
   * may be called synchronously.
   */
  ping(target: string, done: (rttMs: number | null) => void): void;
  /** Stops the pinger; outstanding echoes are answered null. Idempotent. */
  close(): void;
  /** Why IPv6 targets cannot be probed (undefined when they can). */
  readonly ipv6Unavailable?: string | undefined;
}

/** The raw ICMP socket could not be opened (not root, or raw-socket not built). */
export class PingerUnavailableError extends SluiceError {
  readonly code = 'ERR_SLUICE_PINGER_UNAVAILABLE';
}

export interface NetPingerOptions {
  /** An echo unanswered for this long is a timeout (null). */
  readonly timeoutMs: number;
  /** Errors of the raw socket itself (not of single echoes); without a listener they would crash the process. */
  readonly onSocketError?: (err: Error) => void;
}

/** The part of net-ping's API used here (the package ships no types). */
interface NetPingSession {
  pingHost(target: string, callback: (error: Error | null, target: string, sent?: Date, rcvd?: Date) => void): unknown;
  close(): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}
interface NetPingModule {
  createSession(options: { retries: number; timeout: number; packetSize?: number; networkProtocol?: number }): NetPingSession;
  readonly NetworkProtocol: { readonly IPv4: number; readonly IPv6: number };
}

/**
 * Opens the net-ping sessions: IPv4 (required: throws PingerUnavailableError
 * if it cannot be opened) and IPv6 (optional: see the module comment).
 */
export function createNetPinger(opts: NetPingerOptions): Pinger {
  let netPing: NetPingModule;
  let session: NetPingSession;
  try {
    netPing = createRequire(import.meta.url)('net-ping') as NetPingModule;
    session = netPing.createSession({ retries: 0, timeout: opts.timeoutMs });
  } catch (err) {
    throw new PingerUnavailableError(`cannot open a raw ICMP socket for RTT probes (needs root or CAP_NET_RAW): ${(err as Error).message}`, { cause: err });
  }
  session.on('error', (err) => opts.onSocketError?.(err));
  let session6: NetPingSession | undefined;
  let why6: string | undefined;
  try {
    session6 = netPing.createSession({ retries: 0, timeout: opts.timeoutMs, networkProtocol: netPing.NetworkProtocol.IPv6 });
    session6.on('error', (err) => opts.onSocketError?.(err));
  } catch (err) {
    why6 = `cannot open a raw ICMPv6 socket: ${(err as Error).message}`;
  }
  return new NetPinger(session, session6, why6);
}

class NetPinger implements Pinger {
  readonly #session: NetPingSession;
  readonly #session6: NetPingSession | undefined;
  readonly ipv6Unavailable: string | undefined;
  #closed = false;

  constructor(session: NetPingSession, session6: NetPingSession | undefined, why6: string | undefined) {
    this.#session = session;
    this.#session6 = session6;
    this.ipv6Unavailable = why6;
  }

  ping(target: string, done: (rttMs: number | null) => void): void {
    let called = false;
    const once = (rtt: number | null): void => {
      if (called) return;
      called = true;
      done(rtt);
    };
    const session = target.includes(':') ? this.#session6 : this.#session;
    if (this.#closed || session === undefined) {
      once(null);
      return;
    }
    const t0 = performance.now();
    try {
      session.pingHost(target, (error, _target, sent, rcvd) => {
        if (error !== null || sent === undefined || rcvd === undefined) {
          once(null);
          return;
        }
        const mono = performance.now() - t0;
        const wall = rcvd.getTime() - sent.getTime();
        once(wall >= 0 && wall <= mono + 1 ? wall : Math.round(mono * 1000) / 1000);
      });
    } catch {
      // A synchronous throw from the socket layer is an echo that was not sent.
      once(null);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // net-ping answers every outstanding request with an error (-> null) here.
    this.#session.close();
    this.#session6?.close();
  }
}
