/**
 * `sluice master-proxy`: shards accounting by domain over several masters
 * (seed 004: "a ZeroMQ router may be employed ... provided that all
 * messages for the same domain go to the same master").
 *
 *   gatekeeper PUB --> accounting.frontend XSUB | XPUB accounting.backend <-- SUB master (subscribes its domains)
 *   gatekeeper SUB --> publish.backend    XPUB  | XSUB publish.frontend  <-- PUB master
 *
 * Every socket is bound here (CURVE server): gatekeepers and masters both
 * connect. Data flows XSUB -> XPUB; subscriptions flow back XPUB -> XSUB,
 * so each master's SUB filter (its domains' topics, NUL-terminated, hence
 * exact) travels up to the gatekeepers' PUB sockets and a domain's
 * accounting reaches only the master(s) subscribed to it. The operator
 * gives each domain to exactly one master (or to several sharing Redis and
 * in standby: a domain two live masters subscribe to is charged twice).
 *
 * Each socket has exactly one sending loop, as zeromq.js requires.
 */
import { XPublisher, XSubscriber, type Socket } from 'zeromq';
import type { Logger } from '../log/logger.ts';
import type { ProxyConfig } from './config.ts';
import { CurveSockets } from '../control/curve.ts';
import { throttleProfile } from './curve_profile.ts';

export interface ProxyCounters {
  accounting: number;
  control: number;
  subscriptionsUp: number;
  errors: number;
}

export class MasterProxy {
  readonly counters: ProxyCounters = { accounting: 0, control: 0, subscriptionsUp: 0, errors: 0 };
  readonly #sockets: CurveSockets;
  readonly #all: Socket[] = [];
  readonly #log: Logger;

  private constructor(sockets: CurveSockets, log: Logger) {
    this.#sockets = sockets;
    this.#log = log;
  }

  static async start(cfg: Readonly<ProxyConfig>, log: Logger): Promise<MasterProxy> {
    const sockets = await CurveSockets.create(cfg.name, cfg.control, throttleProfile(cfg.control), log);
    const p = new MasterProxy(sockets, log);
    try {
      const gk = cfg.control.allowGatekeepers;
      const ms = cfg.control.allowMasters;
      const accIn = p.#add(new XSubscriber({ ...sockets.server('gatekeepers-accounting', gk), receiveHighWaterMark: 100_000 }), 'accounting frontend');
      const accOut = p.#add(new XPublisher({ ...sockets.server('masters-accounting', ms), sendHighWaterMark: 100_000 }), 'accounting backend');
      const ctlIn = p.#add(new XSubscriber({ ...sockets.server('masters-control', ms), receiveHighWaterMark: 100_000 }), 'control frontend');
      const ctlOut = p.#add(new XPublisher({ ...sockets.server('gatekeepers-control', gk), sendHighWaterMark: 100_000 }), 'control backend');
      await accIn.bind(cfg.accounting.frontend);
      await accOut.bind(cfg.accounting.backend);
      await ctlIn.bind(cfg.publish.frontend);
      await ctlOut.bind(cfg.publish.backend);
      void p.#pipe(accIn, accOut, 'accounting');
      void p.#pipe(accOut, accIn, 'subscriptionsUp');
      void p.#pipe(ctlIn, ctlOut, 'control');
      void p.#pipe(ctlOut, ctlIn, 'subscriptionsUp');
    } catch (err) {
      p.stop();
      throw err;
    }
    log.info({ accounting: cfg.accounting, publish: cfg.publish }, 'master proxy ready');
    return p;
  }

  #add<S extends Socket>(s: S, what: string): S {
    this.#sockets.watch(s, what);
    this.#all.push(s);
    return s;
  }

  async #pipe(from: XSubscriber | XPublisher, to: XSubscriber | XPublisher, counter: 'accounting' | 'control' | 'subscriptionsUp'): Promise<void> {
    try {
      for await (const frames of from) {
        try {
          await to.send(frames);
          this.counters[counter]++;
        } catch {
          this.counters.errors++;
        }
      }
    } catch (err) {
      if (!from.closed) this.#log.error({ err }, 'proxy loop ended');
    }
  }

  status(): Record<string, unknown> {
    return { counters: this.counters, handshakes: this.#sockets.handshakes };
  }

  stop(): void {
    for (const s of this.#all) s.close();
    this.#sockets.release();
  }
}
