/**
 * `sluice front`: wires the configuration, the rules, the NFQUEUE and the
 * decision engine together, and owns the slow paths (timers, reload,
 * shutdown). The packet path is FrontEngine.decide(), once per queued
 * packet, called from one onBatch per batch.
 *
 * FIN and RST copies come from the NFLOG group instead (no verdict):
 * FrontEngine.teardown(), once per record, from one onBatch per batch.
 *
 * Lifecycle:
 *   create  load config, then preflight the host (src/front/preflight.ts):
 *           either refused -> exit 1 with every reason and its fix, nothing
 *           installed and nothing removed (a refused start must not undo
 *           the rules of a front node already bound to the queue)
 *   start   rebuild
 *           records from the kernel's flows; bind the log group; install
 *           rules; bind the queue; admin socket, control plane, ops HTTP
 *           server (http.listen)
 *   run     sweep recycled records every second; reconcile with the kernel
 *           every connections.reconcileSeconds; expire idle checkpoint keys
 *           every shaping.sweepMs; checkpoint queues' timers give held SYNs
 *           their verdicts (staged outside the batch, flushed by NfQueue);
 *           read our rules back every rules.checkSeconds and reinstall
 *           them if someone removed or changed them (rules-health.ts)
 *   SIGHUP  reload: a refused config is logged and the running one stays;
 *           an accepted one re-renders the rules and re-maps records by
 *           service and server name (established connections are untouched);
 *           RESTART_KEYS keep their running values (named in a warning)
 *   SIGTERM unbind, remove our rules, close the ops HTTP server, exit 0.
 *           (After a crash the rules stay and failMode governs new
 *           connections; established ones continue.)
 *
 * Under systemd (Type=notify, src/systemd/): READY=1 once rules, queue,
 * admin socket and control plane are up; RELOADING=1 then READY=1 around a
 * reload (accepted or refused: the daemon serves either way); STOPPING=1 at
 * stop; WATCHDOG=1 only while the packet loop is alive (queue-liveness.ts)
 * and the rules could be reinstalled, when they had to be, within
 * rules.restartAfterFailures checks (rules-health.ts).
 */
import { ConfigError, keepRestartKeys, loadConfig } from '../config/load.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { newRegistry } from '../metrics/collect.ts';
import { registerFrontMetrics, type FrontMetricsSource } from './metrics.ts';
import { readKernelQueue, type KernelQueueStats } from '../metrics/kernel_queue.ts';
import { NfLog, type LogStats } from '../nflog/log.ts';
import { NfQueue, type QueueStats } from '../nfqueue/queue.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { IpProtocol, parseStatusName } from '../packet/ipv4.ts';
import { frontConfigSchema, type FrontConfig } from './config.ts';
import { AdminServer } from './admin.ts';
import { ConnectionTable, connectionKey } from './connections.ts';
import { LIVE_STATES, REBUILD_STATES, readKernelFlows } from './conntrack-proc.ts';
import { FrontControl } from './control.ts';
import { FrontEngine, HELD } from './engine.ts';
import { saveTable, saveTableAsync } from './iptables.ts';
import { FallbackWriter, type FallbackWriterStatus } from './fallback.ts';
import { listTableAsync, nftLoadAsync } from './nft.ts';
import { RulesHealth, type RulesHealthStatus } from './rules-health.ts';
import { TEARDOWN_LOG } from './rules.ts';
import { installRuleset, listNft, removeRules, renderRuleset } from './ruleset.ts';
import { VipGuard, type GuardCount } from './vip-guard.ts';
import { assertHostReady } from './preflight.ts';
import { OVERFLOW_BASE, ServiceRuntime } from './service.ts';
import type { FrontStatus } from './status.ts';
import { FrontThrottle } from './throttle.ts';
import { FrontAdmission } from './admission.ts';
import { Criterion, type Checkpoint } from '../shaping/checkpoint.ts';
import { Shaper, shapingStatus } from '../shaping/shaper.ts';
import { TimerScheduler } from '../shaping/timer_scheduler.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { QueueLiveness } from '../systemd/queue-liveness.ts';
import { Watchdog } from '../systemd/watchdog.ts';
import type { Gatekeeper } from '../throttle/gatekeeper.ts';

/** Top-level keys a reload cannot apply (the control section has its own rule: restartPart). */
export const RESTART_KEYS = ['queue', 'nflogGroup', 'connections', 'adminSocket', 'cluster', 'http'] as const;

export class FrontDaemon implements FrontMetricsSource {
  readonly log: Logger = componentLogger('front');
  readonly configFile: string;
  config: Readonly<FrontConfig>;
  readonly table: ConnectionTable;
  readonly engine: FrontEngine;
  #queue: NfQueue | undefined;
  #log: NfLog | undefined;
  #admin: AdminServer | undefined;
  #control: FrontControl | undefined;
  #ops: OpsServer | undefined;
  #timers: ReturnType<typeof setInterval>[] = [];
  #schedulers: TimerScheduler[] = [];
  #shapingLayout = '';
  #stopping = false;
  readonly startedAt = Date.now();
  /** sd_notify; a no-op unless started by systemd with Type=notify. */
  readonly systemd: SystemdNotifier;
  readonly watchdog: Watchdog;
  /** The gatekeeper of the `gatekeeper` checkpoints (distributed throttling). */
  readonly throttle: FrontThrottle;
  /** The hierarchy and cluster membership of the `admission` checkpoints. */
  readonly admission: FrontAdmission;
  /** Installs our rules, reads them back, and reinstalls them when someone removes or changes them. */
  readonly rules: RulesHealth;
  /** The daemon-down fallback's contents: rewritten when the usable servers change (usableChanged). */
  readonly fallback: FallbackWriter;
  /** The VIP guard's drop counter, read from each rule check's dump of our nft table. */
  readonly vipGuard = new VipGuard();

  constructor(configFile: string) {
    this.configFile = configFile;
    this.config = loadConfig(frontConfigSchema, configFile);
    assertHostReady(this.config);
    this.systemd = new SystemdNotifier(this.log);
    this.throttle = new FrontThrottle(this.log);
    this.admission = new FrontAdmission(this.log);
    this.fallback = new FallbackWriter({
      log: this.log,
      config: () => this.config,
      write: (script) => nftLoadAsync(script, 10_000),
    });
    this.rules = new RulesHealth({
      log: this.log,
      // A repair renders the running configuration with the latest usable servers.
      render: () => renderRuleset(this.config, this.fallback.spread(), this.vipGuard.last()),
      apply: (rules) => {
        installRuleset(rules);
      },
      save: (table) => (table === 'nft' ? listNft() : saveTable(table)),
      saveAsync: (table, timeoutMs) => (table === 'nft' ? listTableAsync(timeoutMs) : saveTableAsync(table, timeoutMs)),
      fallback: () => this.fallback.state(),
      onNftDump: (list) => {
        this.vipGuard.read(list);
      },
      periodMs: () => this.config.rules.checkSeconds * 1000,
      failuresBeforeDead: () => this.config.rules.restartAfterFailures,
    });
    const liveness = new QueueLiveness(() => this.#queue);
    // Both checks run at every tick (the queue's compares with its previous one).
    this.watchdog = new Watchdog(
      this.systemd,
      () => {
        const q = liveness.check();
        return q.alive ? this.rules.liveness() : q;
      },
      this.log,
    );
    const services = buildServices(this.config);
    this.table = new ConnectionTable(this.config.connections.max, this.config.connections.recycleSeconds * 1000, {
      released: (svc, srv, slot) => {
        const s = this.engine.services[svc]?.servers[srv];
        if (s && s.active > 0) s.active--;
        // Checkpoint counts the connection held (concurrency): FIN, RST, reconcile (idle free), port reuse.
        this.engine.shaper?.releaseConnection(slot, performance.now());
      },
    });
    this.engine = new FrontEngine(services, this.table);
    this.#shapingLayout = shapingLayoutKey(this.config);
    this.engine.setShaper(this.#buildShaper(this.config));
  }

  /** Checkpoints of `cfg`, each queue with its own timer. */
  #buildShaper(cfg: Readonly<FrontConfig>): Shaper {
    for (const t of this.#schedulers) t.close();
    this.#schedulers = [];
    const shaper: Shaper = new Shaper(
      {
        cluster: cfg.checkpoints,
        services: cfg.services,
        overflow: cfg.overflow.map((o) => o.cluster),
      },
      {
        maxHeld: cfg.shaping.maxHeld,
        connections: cfg.connections.max,
        overflowBase: OVERFLOW_BASE,
        scheduler: (index) => {
          const t = new TimerScheduler((now) => shaper.all[index]?.fire(now));
          this.#schedulers.push(t);
          return t;
        },
      },
    );
    return shaper;
  }

  async start(): Promise<void> {
    const rebuilt = await this.#rebuildFromKernel();
    // The gatekeeper first: its checkpoints would let everything through
    // without it. It connects in the background (a master down: fail open).
    await this.throttle.apply(this.config, () => this.engine.shaper);
    await this.admission.apply(this.config, () => this.engine.shaper);
    const engine = this.engine;
    // Bound before the rules exist, so no FIN of a connection decided by
    // this daemon is logged to nobody. Records it misses all the same (the
    // socket overflowed: counted as log overruns and lost records) stay
    // active until reconcile frees them (their kernel flow is no longer live).
    this.#log = NfLog.open({
      group: this.config.nflogGroup,
      copyRange: TEARDOWN_LOG.size,
      threshold: TEARDOWN_LOG.threshold,
      timeoutCentiseconds: TEARDOWN_LOG.timeoutCentiseconds,
      // Datagrams go when `threshold` records are in them; 16 KiB holds
      // 64 records of ~220 bytes. A smaller skb also keeps the receive
      // buffer's accounting (truesize) close to the bytes it holds: 8 MiB
      // then buffers some 30k records, seconds of closes at full rate.
      bufferBytes: 16 << 10,
      receiveBufferBytes: 8 << 20,
      onBatch(batch) {
        const now = performance.now();
        for (let i = 0; i < batch.count; i++) engine.teardown(batch.data, batch.payloadOffset(i), batch.payloadLength(i), now);
      },
      onError: (err) => {
        this.log.error({ err }, 'log group error');
      },
    });
    this.fallback.installed(this.engine.services);
    this.rules.install(renderRuleset(this.config, this.fallback.spread(), this.vipGuard.last()));
    this.#queue = NfQueue.open({
      queue: this.config.queue,
      // Packets wait here for their verdict: those of one batch, plus the
      // SYNs checkpoints hold (at most shaping.maxHeld <= 32768, half of
      // this). Fail-open: were the queue ever full, packets are accepted,
      // not dropped, so held SYNs never block other traffic.
      maxLength: 65536,
      failOpen: true,
      copyRange: 128, // headers are all the engine reads
      onBatch(batch, q) {
        const now = performance.now();
        for (let i = 0; i < batch.count; i++) {
          const id = batch.id(i);
          const v = engine.decide(batch.data, batch.payloadOffset(i), batch.payloadLength(i), now, id);
          if (v === HELD) continue; // its verdict comes from a checkpoint queue's timer
          if (engine.mark !== 0) q.verdict(id, v, engine.mark);
          else q.verdict(id, v);
        }
      },
      onError: (err) => {
        this.log.error({ err }, 'queue error');
      },
    });
    const nfq = this.#queue;
    // Held SYNs' verdicts, from queue timers: staged outside a batch, sent
    // by NfQueue at the end of the tick (one crossing for all of them).
    engine.onSettled = (id, v, mark) => {
      if (mark !== 0) nfq.verdict(id, v, mark);
      else nfq.verdict(id, v);
    };
    this.#timers.push(
      setInterval(() => this.table.sweep(performance.now()), 1000),
      setInterval(() => this.engine.shaper?.sweep(performance.now(), 10_000), this.config.shaping.sweepMs),
      setInterval(() => void this.#reconcile(), this.config.connections.reconcileSeconds * 1000),
    );
    this.rules.start();
    this.#admin = new AdminServer(this.config.adminSocket, this);
    await this.#admin.listen();
    if (this.config.control) this.#control = await FrontControl.start(this, this.config.control, this.log);
    if (this.config.http) {
      const registry = newRegistry();
      registerFrontMetrics(registry, this);
      this.#ops = new OpsServer({ listen: this.config.http.listen, registry, status: () => this.status(), log: this.log });
      await this.#ops.start();
    }
    this.log.info({ cluster: this.config.cluster, queue: this.config.queue, services: this.config.services.length, rebuilt }, 'front node ready');
    this.systemd.ready(this.#statusLine());
    const every = this.watchdog.start();
    if (every !== undefined) this.log.info({ everyMs: every }, 'systemd watchdog: WATCHDOG=1 while the packet loop is alive and the rules can be installed');
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
    // Keys bound at start (the queue the daemon is bound to, the record
    // table, the admin socket, the cluster name its peers know) keep their
    // running values: rendering rules for a queue nobody reads would send
    // every new connection to the fail mode.
    const { applied, changed } = keepRestartKeys(this.config, next, RESTART_KEYS);
    if (changed.length > 0) this.log.warn({ keys: changed }, 'these changes need a restart and were not applied');
    try {
      this.apply(applied);
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
    // Decision counts live on for the same names (metrics counters stay monotonic across reloads).
    for (const ns of services) {
      const os = old.find((o) => o.name === ns.name);
      for (const b of ns.servers) b.decided = os?.servers.find((x) => x.id === b.id)?.decided ?? 0;
      for (const o of ns.overflow) o.decided = os?.overflow.find((x) => x.cluster === o.cluster)?.decided ?? 0;
      ns.overflowed = os?.overflowed ?? 0;
    }
    this.fallback.installed(services);
    try {
      this.rules.install(renderRuleset(next, this.fallback.spread(), this.vipGuard.last()));
    } catch (err) {
      // The running services stay: so does the fallback's state (a repair renders it with the running configuration).
      this.fallback.installed(old);
      throw err;
    }
    this.engine.setServices(services);
    const layout = shapingLayoutKey(next);
    if (layout !== this.#shapingLayout) this.#rebuildShaper(next, old, layout);
    const before = this.config.control;
    this.config = next;
    this.throttle.apply(next, () => this.engine.shaper).catch((err: unknown) => {
      this.log.error({ err: err instanceof Error ? err.message : err }, 'gatekeeper not replaced: the running one stays');
    });
    this.admission.apply(next, () => this.engine.shaper).catch((err: unknown) => {
      this.log.error({ err: err instanceof Error ? err.message : err }, 'admission control not applied');
    });
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

  /**
   * Checkpoints or the services they hang on changed: new checkpoints with
   * empty tables. SYNs held by the old ones are let through now (decided
   * by the new services without checkpoints); counts held by established
   * connections are forgotten (those connections are not counted).
   */
  #rebuildShaper(next: Readonly<FrontConfig>, oldServices: readonly ServiceRuntime[], layout: string): void {
    const old = this.engine.shaper;
    const shaper = this.#buildShaper(next);
    this.#shapingLayout = layout;
    if (old) shaper.inheritCounts(old);
    this.throttle.attach(shaper);
    this.admission.attach(shaper);
    this.engine.setShaper(shaper);
    if (!old) return;
    const now = performance.now();
    let released = 0;
    old.pool.forEachHeld((slot) => {
      const p = old.pool;
      const name = oldServices[p.service[slot] ?? 0]?.name;
      const s = this.engine.services.findIndex((x) => x.name === name);
      const key = p.key[slot] ?? 0;
      const port = key % 0x10000;
      this.engine.admitHeld(p.id[slot] ?? 0, s, p.src[slot] ?? 0, port, now);
      released++;
    });
    if (released > 0) this.log.info({ released }, 'checkpoints rebuilt: held connections let through');
    else this.log.info('checkpoints rebuilt');
  }

  /** The running services (the engine's), for the control plane. */
  get services(): readonly ServiceRuntime[] {
    return this.engine.services;
  }

  /** The usable servers may have changed: the fallback map follows (coalesced; nothing written if they did not). */
  usableChanged(): void {
    this.fallback.update(this.engine.services);
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
        const key = connectionKey(f.client, f.clientPort);
        if (this.table.lookup(s, key) < 0 && this.table.create(key, s, target, now) >= 0) {
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
    // Per service index, the live flows' keys.
    const live = new Map<number, Set<number>>();
    const services = this.engine.services;
    for (const f of flows) {
      if (!LIVE_STATES.has(f.state)) continue;
      const s = services.findIndex((x) => x.vip === f.dst && x.port === f.dstPort && x.protocol === protocolNumber(f.protocol));
      if (s < 0) continue;
      let keys = live.get(s);
      if (keys === undefined) live.set(s, (keys = new Set()));
      keys.add(connectionKey(f.client, f.clientPort));
    }
    // Records younger than one period may not have reached the kernel's table yet.
    const freed = this.table.reconcile((s, k) => live.get(s)?.has(k) === true, performance.now() - this.config.connections.reconcileSeconds * 1000);
    if (freed > 0) this.log.info({ freed }, 'records freed: kernel flows gone');
  }

  queueStats(): QueueStats | undefined {
    return this.#queue?.stats();
  }

  logStats(): LogStats | undefined {
    return this.#log?.stats();
  }

  kernelQueue(): KernelQueueStats | undefined {
    return readKernelQueue(this.config.queue);
  }

  vipGuardCount(): GuardCount {
    return this.vipGuard.last();
  }

  fallbackStatus(): FallbackWriterStatus {
    return this.fallback.status();
  }

  rulesHealth(): RulesHealthStatus {
    return this.rules.status();
  }

  adminCounts(): { handled: number; rejected: number } {
    return { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 };
  }

  control(): FrontControl | undefined {
    return this.#control;
  }

  gatekeeper(): Gatekeeper | undefined {
    return this.throttle.gatekeeper;
  }

  /** The ops HTTP server while it runs (http.listen set): addRoute() adds GET pages to it. */
  ops(): OpsServer | undefined {
    return this.#ops;
  }

  status(): FrontStatus {
    const { malformed, ...counters } = this.engine.counters;
    return {
      cluster: this.config.cluster,
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      counters,
      malformed: Object.fromEntries(parseStatusName.map((n, i) => [n, malformed[i] ?? 0] as const).filter(([, v]) => v !== 0)),
      records: { active: this.table.active, recycled: this.table.recycled, ...this.table.counts },
      admin: { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 },
      rules: this.rules.status(),
      vipGuard: { ...this.vipGuard.last() },
      fallback: this.fallback.status(),
      queue: this.#queue?.stats(),
      log: this.#log?.stats(),
      ...(this.engine.shaper ? { shaping: { heldNow: this.engine.shaper.pool.held, maxHeld: this.engine.shaper.pool.capacity, ...this.engine.shaper.counts, checkpoints: shapingStatus(this.engine.shaper, performance.now(), 10, (cp, key) => keyName(this.engine.services, cp, key)) } } : {}),
      ...(this.#control ? { control: this.#control.status() } : {}),
      ...(this.throttle.gatekeeper ? { throttle: this.throttle.gatekeeper.status() } : {}),
      ...(this.admission.hierarchy ? { admission: this.admission.status() } : {}),
      services: this.engine.services.map((s) => ({
        name: s.name,
        overflowed: s.overflowed,
        servers: s.servers.map((b) => ({ name: b.id, state: b.down ? 'down' : b.state, active: b.active, decided: b.decided, capacity: Number.isFinite(b.capacity) ? b.capacity : null, estimated: b.estimated, rate: Math.round(b.rate * 100) / 100 })),
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
    // Before the rules go: a check returning after this repairs nothing.
    this.rules.stop();
    this.fallback.stop();
    for (const t of this.#timers) clearInterval(t);
    this.#ops?.close();
    for (const t of this.#schedulers) t.close();
    this.#control?.close();
    this.throttle.stop();
    void this.admission.stop();
    this.#queue?.close();
    this.#log?.close();
    this.#admin?.close();
    removeRules();
    this.log.info(this.status(), 'front node stopped');
  }
}

export function buildServices(cfg: Readonly<FrontConfig>): ServiceRuntime[] {
  return cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));
}

/** What the checkpoints hang on: their configs and the services' and servers' names in order. */
function shapingLayoutKey(cfg: Readonly<FrontConfig>): string {
  return JSON.stringify({
    cluster: cfg.checkpoints,
    shaping: cfg.shaping,
    overflow: cfg.overflow.map((o) => o.cluster),
    services: cfg.services.map((s) => ({ name: s.name, checkpoints: s.checkpoints, servers: s.servers.map((x) => ({ name: x.name, checkpoints: x.checkpoints })) })),
  });
}

/** A stick-table key as people read it (status). */
function keyName(services: readonly ServiceRuntime[], cp: Checkpoint, key: number): string {
  switch (cp.criterion) {
    case Criterion.Source:
      return formatIPv4Address(key);
    case Criterion.SourcePrefix:
      return `${formatIPv4Address(key)}/${String(Math.clz32(~cp.keyMask >>> 0))}`;
    case Criterion.Service:
      return services[key]?.name ?? String(key);
    case Criterion.Server:
      return services[cp.service]?.servers[key]?.id ?? String(key);
    default:
      return '*';
  }
}

function protocolNumber(p: 'tcp' | 'udp'): number {
  return p === 'udp' ? IpProtocol.Udp : IpProtocol.Tcp;
}

/** The part of the control section a reload cannot apply (everything but the allowlists). */
function restartPart(c: FrontConfig['control']): string {
  return JSON.stringify(c ? { ...c, agents: c.agents?.listen, publish: c.publish?.listen } : null);
}
