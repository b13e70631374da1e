/**
 * `sluice front`: wires the configuration, the rules, the NFQUEUE and the
 * decision engine together, and owns the slow paths (timers, reload,
 * shutdown). The packet path is FrontEngine.decide(), once per queued
 * packet, called from one onBatch per batch.
 *
 * Lifecycle:
 *   start   load config (refused -> exit 1, nothing installed); rebuild
 *           records from the kernel's flows; install rules; bind the queue
 *   run     sweep recycled records every second; reconcile with the kernel
 *           every connections.reconcileSeconds
 *   SIGHUP  reload: a refused config is logged and the running one stays;
 *           an accepted one re-renders the rules and re-maps records by
 *           service and server name (established connections are untouched)
 *   SIGTERM unbind, remove our rules, exit 0. (After a crash the rules stay
 *           and failMode governs new connections; established ones continue.)
 *
 * Under systemd (Type=notify, src/systemd/): READY=1 once rules, queue,
 * admin socket and control plane are up; RELOADING=1 then READY=1 around a
 * reload (accepted or refused: the daemon serves either way); STOPPING=1 at
 * stop; WATCHDOG=1 only while the packet loop is alive (queue-liveness.ts).
 */
import { ConfigError, loadConfig } from '../config/load.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { NfQueue } from '../nfqueue/queue.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { IpProtocol, parseStatusName } from '../packet/ipv4.ts';
import { frontConfigSchema, type FrontConfig } from './config.ts';
import { AdminServer } from './admin.ts';
import { ConnectionTable, connectionKey } from './connections.ts';
import { LIVE_STATES, REBUILD_STATES, readKernelFlows } from './conntrack-proc.ts';
import { FrontControl } from './control.ts';
import { FrontEngine } from './engine.ts';
import { installRules, removeRules } from './iptables.ts';
import { renderRules } from './rules.ts';
import { OVERFLOW_BASE, ServiceRuntime } from './service.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { QueueLiveness } from '../systemd/queue-liveness.ts';
import { Watchdog } from '../systemd/watchdog.ts';

export interface FrontOptions {
  /** Called once rules, queue, admin socket and control plane are up (after READY=1 to systemd). */
  readonly onReady?: () => void;
}

export class FrontDaemon {
  readonly log: Logger = componentLogger('front');
  readonly configFile: string;
  config: Readonly<FrontConfig>;
  readonly table: ConnectionTable;
  readonly engine: FrontEngine;
  #queue: NfQueue | undefined;
  #admin: AdminServer | undefined;
  #control: FrontControl | undefined;
  #timers: ReturnType<typeof setInterval>[] = [];
  #stopping = false;
  /** sd_notify; a no-op unless started by systemd with Type=notify. */
  readonly systemd: SystemdNotifier;
  readonly watchdog: Watchdog;

  constructor(configFile: string) {
    this.configFile = configFile;
    this.config = loadConfig(frontConfigSchema, configFile);
    this.systemd = new SystemdNotifier(this.log);
    const liveness = new QueueLiveness(() => this.#queue);
    this.watchdog = new Watchdog(this.systemd, () => liveness.check(), this.log);
    const services = buildServices(this.config);
    this.table = new ConnectionTable(this.config.connections.max, this.config.connections.recycleSeconds * 1000, {
      released: (svc, srv) => {
        const s = this.engine.services[svc]?.servers[srv];
        if (s && s.active > 0) s.active--;
      },
    });
    this.engine = new FrontEngine(services, this.table);
  }

  async start(opts: FrontOptions): Promise<void> {
    const rebuilt = await this.#rebuildFromKernel();
    installRules(renderRules(this.config));
    const engine = this.engine;
    this.#queue = NfQueue.open({
      queue: this.config.queue,
      // Held verdicts never exceed one batch here; a generous kernel queue
      // and fail-open keep a slow moment from dropping setup packets.
      maxLength: 65536,
      failOpen: true,
      copyRange: 128, // headers are all the engine reads
      onBatch(batch, q) {
        const now = performance.now();
        for (let i = 0; i < batch.count; i++) {
          const v = engine.decide(batch.data, batch.payloadOffset(i), batch.payloadLength(i), now);
          if (engine.mark !== 0) q.verdict(batch.id(i), v, engine.mark);
          else q.verdict(batch.id(i), v);
        }
      },
      onError: (err) => {
        this.log.error({ err }, 'queue error');
      },
    });
    this.#timers.push(
      setInterval(() => this.table.sweep(performance.now()), 1000),
      setInterval(() => void this.#reconcile(), this.config.connections.reconcileSeconds * 1000),
    );
    process.on('SIGHUP', () => {
      this.reload();
    });
    this.#admin = new AdminServer(this.config.adminSocket, this);
    await this.#admin.listen();
    if (this.config.control) this.#control = await FrontControl.start(this, this.config.control, this.log);
    this.log.info({ cluster: this.config.cluster, queue: this.config.queue, services: this.config.services.length, rebuilt }, 'front node ready');
    this.systemd.ready(this.#statusLine());
    const every = this.watchdog.start();
    if (every !== undefined) this.log.info({ everyMs: every }, 'systemd watchdog: WATCHDOG=1 while the packet loop is alive');
    opts.onReady?.();
  }

  #statusLine(): string {
    return `cluster ${this.config.cluster}: ${this.config.services.length} service(s) on queue ${this.config.queue}`;
  }

  /** Re-reads the config file; keeps the running config if it is refused. */
  reload(): boolean {
    this.systemd.reloading();
    let next: Readonly<FrontConfig>;
    try {
      next = loadConfig(frontConfigSchema, this.configFile);
    } catch (err) {
      this.log.error({ err: err instanceof ConfigError ? err.message : err }, 'reload refused: the running configuration stays');
      this.systemd.ready(`${this.#statusLine()}; last reload refused (see the log)`);
      return false;
    }
    try {
      this.apply(next);
    } finally {
      // The reload is over either way (an apply() error still reaches the
      // caller): systemd must not be left in "reloading".
      this.systemd.ready(this.#statusLine());
    }
    this.log.info({ services: next.services.length }, 'configuration reloaded');
    return true;
  }

  /**
   * Makes `next` the running configuration: new service state, records
   * carried over by service and server name (a record whose server is gone
   * stops being tracked; its kernel flow continues), rules re-rendered.
   * Established connections are never touched: the kernel's NAT binding
   * was made at their SYN.
   */
  apply(next: Readonly<FrontConfig>): void {
    const old = this.engine.services;
    const services = buildServices(next);
    // Old (service, target) -> new, by names, computed once: remap() then
    // costs one array read per record, however many records there are.
    const moved = old.map((os) => {
      const ns = services.findIndex((s) => s.name === os.name);
      const nsvc = services[ns];
      const to = new Map<number, readonly [number, number]>();
      if (!nsvc) return to;
      os.servers.forEach((b, i) => {
        const ni = nsvc.servers.findIndex((s) => s.id === b.id);
        if (ni >= 0) to.set(i, [ns, ni]);
      });
      os.overflow.forEach((o, j) => {
        const nj = nsvc.overflow.findIndex((x) => x.cluster === o.cluster);
        if (nj >= 0) to.set(OVERFLOW_BASE + j, [ns, OVERFLOW_BASE + nj]);
      });
      return to;
    });
    this.table.remap((svc, target) => moved[svc]?.get(target));
    this.table.forEachActive((_key, svc, srv) => {
      const s = services[svc]?.servers[srv];
      if (s) s.active++;
    });
    for (const ns of services) {
      const os = old.find((o) => o.name === ns.name);
      for (const b of ns.servers) b.decided = os?.servers.find((x) => x.id === b.id)?.decided ?? 0;
    }
    installRules(renderRules(next));
    this.engine.setServices(services);
    const before = this.config.control;
    this.config = next;
    this.#control?.servicesChanged();
    if (this.#control && next.control) {
      // Allowlists follow the reload; sockets, endpoints and keys need a restart.
      if (next.control.agents) this.#control.node.allow('agents', next.control.agents.allow);
      if (next.control.publish) this.#control.node.allow('subscribers', next.control.publish.allow);
    }
    if (restartPart(before) !== restartPart(next.control)) {
      this.log.warn('control section changed: allowlists are applied now; endpoints, keys and intervals take effect at the next restart');
    }
  }

  /** The running services (the engine's), for the control plane. */
  get services(): readonly ServiceRuntime[] {
    return this.engine.services;
  }

  async #rebuildFromKernel(): Promise<number> {
    const flows = await readKernelFlows();
    const now = performance.now();
    let n = 0;
    for (const f of flows) {
      if (!REBUILD_STATES.has(f.state)) continue;
      const services = this.engine.services;
      for (let s = 0; s < services.length; s++) {
        const svc = services[s];
        if (svc === undefined || svc.vip !== f.dst || svc.port !== f.dstPort || svc.protocol !== protocolNumber(f.protocol)) continue;
        let target = svc.serverAt(f.replySrc, f.replySrcPort);
        if (target < 0) {
          const j = svc.overflow.findIndex((o) => o.vip === formatIPv4Address(f.replySrc));
          if (j < 0) break;
          target = OVERFLOW_BASE + j;
        }
        const key = connectionKey(s, f.client, f.clientPort);
        if (this.table.lookup(key) < 0 && this.table.create(key, s, target, now) >= 0) {
          const srv = svc.servers[target];
          if (srv) srv.active++;
          n++;
        }
        break;
      }
    }
    return n;
  }

  async #reconcile(): Promise<void> {
    let flows;
    try {
      flows = await readKernelFlows();
    } catch (err) {
      // Without the kernel's table nothing can be judged gone: keep every record.
      this.log.error({ err: (err as Error).message }, 'reconcile skipped: cannot read the kernel flows');
      return;
    }
    const live = new Set<number>();
    const services = this.engine.services;
    for (const f of flows) {
      if (!LIVE_STATES.has(f.state)) continue;
      const s = services.findIndex((x) => x.vip === f.dst && x.port === f.dstPort && x.protocol === protocolNumber(f.protocol));
      if (s >= 0) live.add(connectionKey(s, f.client, f.clientPort));
    }
    // Records younger than one period may not have reached the kernel's table yet.
    const freed = this.table.reconcile((k) => live.has(k), performance.now() - this.config.connections.reconcileSeconds * 1000);
    if (freed > 0) this.log.info({ freed }, 'records freed: kernel flows gone');
  }

  stats(): Record<string, unknown> {
    const c = this.engine.counters;
    return {
      counters: Object.fromEntries(Object.entries(c).filter(([k]) => k !== 'malformed')),
      malformed: Object.fromEntries(parseStatusName.map((n, i) => [n, c.malformed[i] ?? 0]).filter(([, v]) => v !== 0)),
      records: { active: this.table.active, recycled: this.table.recycled, ...this.table.counts },
      admin: { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 },
      queue: this.#queue?.stats(),
      ...(this.#control ? { control: this.#control.status() } : {}),
      services: this.engine.services.map((s) => ({
        name: s.name,
        overflowed: s.overflowed,
        servers: s.servers.map((b) => ({ name: b.id, state: b.down ? 'down' : b.state, active: b.active, decided: b.decided, capacity: b.capacity, estimated: b.estimated, rate: Math.round(b.rate * 100) / 100 })),
        overflow: s.overflow.map((o) => ({ cluster: o.cluster, decided: o.decided, freeCapacity: o.freeCapacity })),
      })),
    };
  }

  /** Unbinds, removes our rules. Idempotent. */
  stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.systemd.stopping();
    this.watchdog.stop();
    for (const t of this.#timers) clearInterval(t);
    this.#control?.close();
    this.#queue?.close();
    this.#admin?.close();
    removeRules();
    this.log.info(this.stats(), 'front node stopped');
  }
}

export function buildServices(cfg: Readonly<FrontConfig>): ServiceRuntime[] {
  return cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
}

function protocolNumber(p: 'tcp' | 'udp'): number {
  return p === 'udp' ? IpProtocol.Udp : IpProtocol.Tcp;
}

/** The part of the control section a reload cannot apply (everything but the allowlists). */
function restartPart(c: FrontConfig['control']): string {
  return JSON.stringify(c ? { ...c, agents: c.agents?.listen, publish: c.publish?.listen } : null);
}
