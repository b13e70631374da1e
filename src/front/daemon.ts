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
 *   start   bind the log group, join the conntrack destroy events; adopt records from the kernel's flows;
 *           install rules (over a previous daemon's: each table's chains
 *           are refilled in one commit, the jumps stay, so there is no
 *           instant without rules); bind the queue; adopt again (flows the
 *           fallback decided while no daemon was bound: their records are
 *           added, or corrected to the server the kernel NATs them to);
 *           admin socket, control plane, ops HTTP server (http.listen)
 *   run     active health checks of the servers (src/front/health/): every
 *           transition is logged once and counted, and usableSetChanged()
 *           re-derives the usable servers, rebuilds the selectors and
 *           sends cluster_load at once; slow start shares are refreshed
 *           every SHARE_TICK_MS;
 *           sweep recycled records every second; free the record of each
 *           flow the kernel destroys (conntrack events, flow-ends.ts) and
 *           resync with the kernel's table after an event overrun, every
 *           connections.reconcileSeconds while adopted (legacy) records
 *           remain, or always without events; expire idle checkpoint keys
 *           every shaping.sweepMs; checkpoint queues' timers give held SYNs
 *           their verdicts (staged outside the batch, flushed by NfQueue);
 *           read our rules back every rules.checkSeconds and reinstall
 *           them if someone removed or changed them (rules-health.ts)
 *   SIGHUP  reload: a refused config is logged and the running one stays;
 *           an accepted one re-renders the rules and re-maps records by
 *           service and server name (established connections are untouched);
 *           RESTART_KEYS keep their running values (named in a warning)
 *   ctl     `sluice ctl` changes are overrides of the file, kept in the state
 *           file and re-applied over it at start and every reload
 *           (override-store.ts; precedence in overrides.ts)
 *   SIGTERM held SYNs get their verdict (decided without checkpoints),
 *           unbind, close the ops HTTP server, exit 0. The rules STAY, as
 *           after a crash: with failMode bypass the queue rules let new
 *           connections through to the nft fallback map (usable servers) while no
 *           daemon is bound, and established ones continue in the kernel.
 *           The next start adopts rules and flows. Removing the rules is
 *           its own step: `sluice front --remove-rules` (src/cli/front.ts).
 *
 * Under systemd (Type=notify, src/systemd/): READY=1 once rules, queue,
 * admin socket and control plane are up; RELOADING=1 then READY=1 around a
 * reload (accepted or refused: the daemon serves either way); STOPPING=1 at
 * stop; WATCHDOG=1 only while the packet loop is alive (queue-liveness.ts)
 * and the rules could be reinstalled, when they had to be, within
 * rules.restartAfterFailures checks (rules-health.ts).
 */
import { networkInterfaces } from 'node:os';
import { ConfigError, keepRestartKeys, loadConfig } from '../config/load.ts';
import { OpsServer } from '../http/ops_server.ts';
import { componentLogger, type Logger } from '../log/logger.ts';
import { newRegistry } from '../metrics/collect.ts';
import { registerFrontMetrics, type FrontMetricsSource } from './metrics.ts';
import { LoopTurns } from './loop-turns.ts';
import { readKernelQueue, type KernelQueueStats } from '../metrics/kernel_queue.ts';
import type { ConntrackEventsStats } from '../conntrack/events.ts';
import { NfLog, type LogStats } from '../nflog/log.ts';
import { NfQueue, type QueueStats } from '../nfqueue/queue.ts';
import { QueueLossLog } from '../nfqueue/loss-log.ts';
import { ShedLog, shedCounts, type ShedReason } from './shed.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { formatIPv6Address } from '../packet/address6.ts';
import { IpProtocol, parseStatusName } from '../packet/ipv4.ts';
import { frontConfigSchema, frontNodeName, type FrontConfig } from './config.ts';
import { parseCidr } from './ha/config.ts';
import { HOOK_ALLOWANCE_MS, HaRoleMachine, messageRole, type HaRole, type HaState, type RoleTransition } from './ha/role.ts';
import { SyncStateReader } from './ha/sync-state.ts';
import { AdminServer } from './admin.ts';
import { ConnectionTable, connectionKey } from './connections.ts';
import { LIVE_STATES, REBUILD_STATES, streamKernelFlows } from './kernel-flows.ts';
import { FrontControl } from './control.ts';
import { FlowEnds, type ResyncReason } from './flow-ends.ts';
import { FlowExpiry } from './flow-expiry.ts';
import { serverMark } from './marks.ts';
import { loadNative } from '../nfqueue/native.ts';
import { FrontEngine, HELD } from './engine.ts';
import { iptablesIsNft, saveTable, saveTableAsync } from './iptables.ts';
import { FallbackWriter, type FallbackWriterStatus } from './fallback.ts';
import { KernelScheduleWriter, SCHEDULE_TICK_MS, type KernelScheduleStatus } from './kernel-schedule.ts';
import { readCounters, readCountersAsync, readSetCountersAsync, readTableLayout, rulesetGenerationAsync } from './nft-netlink.ts';
import { SYN_SEEN_SET, heldSchedule, listChainsAsync, listTableAsync, nftLoadAsync, scheduleRewriteScript, scheduleUpdateScript, synproxyFamilies, type HeldSchedule } from './nft.ts';
import { SynproxyAuto, type SynproxyAutoStatus } from './synproxy-auto.ts';
import { RulesHealth, type RulesHealthStatus } from './rules-health.ts';
import { TEARDOWN_LOG } from './rules.ts';
import { installRuleset, listNft, renderRuleset, type RuleSet } from './ruleset.ts';
import { iptablesOf } from './rules-check.ts';
import { VipGuard, type GuardCount } from './vip-guard.ts';
import { TableCounters, type TableCountsStatus } from './table-counters.ts';
import { assertHostReady } from './preflight.ts';
import { OVERFLOW_BASE, ServiceRuntime } from './service.ts';
import { HealthChecker } from './health/checker.ts';
import { healthKeeper } from './health/keep.ts';
import { HEALTH_STATES, slowStartShare, type HealthState, type HealthTransition, type ServerHealth } from './health/server-health.ts';
import type { FrontHaStatus, FrontStatus } from './status.ts';
import { FrontThrottle } from './throttle.ts';
import { FrontAdmission } from './admission.ts';
import { OverrideStore } from './override-store.ts';
import type { ServerChange } from './overrides.ts';
import { overrideOf, removedOf } from './overrides.ts';
import { RateWindow, serverRateKey, serviceRateKey } from './rates.ts';
import { stateFilePath } from './state-file.ts';
import { Criterion, type Checkpoint } from '../shaping/checkpoint.ts';
import { Shaper, shapingStatus } from '../shaping/shaper.ts';
import { TimerScheduler } from '../shaping/timer_scheduler.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { QueueLiveness } from '../systemd/queue-liveness.ts';
import { Watchdog } from '../systemd/watchdog.ts';
import type { Gatekeeper } from '../throttle/gatekeeper.ts';
import type { HaRole as ReportedRole } from '../control/cluster-reports.ts';

/** Top-level keys a reload cannot apply (the control section has its own rule: restartPart). */
export const RESTART_KEYS = ['queue', 'nflogGroup', 'connections', 'adminSocket', 'cluster', 'node', 'http', 'stateFile', 'ha'] as const;

/** Seconds of the connections/s window in status (samples once a second). */
export const RATE_WINDOW_SECONDS = 5;

/** How often slow start shares are refreshed from the servers' ramps (the packet path reads the field, never a clock). */
export const SHARE_TICK_MS = 250;
/**
 * How often the passive check reads the servers' refusals and unanswered SYNs
 * (health.refusedLimit, health.unansweredLimit): a dead server is out within
 * this of its limit-th one.
 */
export const REFUSAL_TICK_MS = 50;

/**
 * A resync keeps records decided less than this (or reconcileSeconds, if
 * shorter) before its read of the kernel's table started: their flows may
 * not be in it yet. Any end they have since is reported by its event.
 */
export const RESYNC_YOUNG_SECONDS = 10;

/** Record slots the resync's sweep judges per loop turn (~0.3 ms). */
const RESYNC_SWEEP_SLOTS = 65_536;
/**
 * Longest the resync waits, after each chunk of the table and each slice of
 * its sweep, for the destroy events waiting in their socket to be read
 * (FlowEnds.yieldWhileBacklogged). The events come first: a resync that took the
 * loop's turns from them while a million flows end made the socket
 * overrun (measured: 2-3 overruns per run, records freed seconds late);
 * the bound keeps a flood of events that never drains from stopping the
 * resync for good.
 */
export const RESYNC_YIELD_MAX_MS = 100;
/**
 * Least time between two selector rebuilds. A maglev table of 65,537 slots
 * takes ~5-15 ms to fill here: one per transition of 63 servers failing a
 * millisecond apart would stall the packet loop for most of a second.
 * Waiting is safe: every method skips an unusable server at pick time
 * (maglev probes past its slots); the rebuild only rebalances.
 */
export const SELECTOR_REBUILD_MIN_MS = 100;

/** Which servers were usable when a service's selector was last built. */
function usableKey(svc: ServiceRuntime): string {
  let k = '';
  for (const b of svc.servers) k += b.usable ? '1' : '0';
  return k;
}

export class FrontDaemon implements FrontMetricsSource {
  readonly log: Logger = componentLogger('front');
  readonly configFile: string;
  config: Readonly<FrontConfig>;
  readonly table: ConnectionTable;
  readonly engine: FrontEngine;
  /** Conntrack destroy events: records of ended flows freed at once (flow-ends.ts). */
  readonly flowEnds: FlowEnds;
  /** A server gone down: its flows that it cannot answer deleted from conntrack (flow-expiry.ts). */
  readonly flowExpiry: FlowExpiry = new FlowExpiry((mark, address, port) => loadNative().ctExpire(mark, address, port), this.log);
  /** The event loop's per-turn CPU time, while metrics are served (loop-turns.ts). */
  loopTurns: LoopTurns | undefined;
  /** A resync (full read of the kernel's table) is running: another waits for it. */
  #resyncing = false;
  #queue: NfQueue | undefined;
  #log: NfLog | undefined;
  #admin: AdminServer | undefined;
  #control: FrontControl | undefined;
  #ops: OpsServer | undefined;
  #timers: ReturnType<typeof setInterval>[] = [];
  readonly #lossLog = new QueueLossLog(this.log);
  readonly #shedLog = new ShedLog(this.log);
  #schedulers: TimerScheduler[] = [];
  #shapingLayout = '';
  #stopping = false;
  /** Records adopted from the kernel's flows at start (before and right after the queue bind). */
  adopted = 0;
  /** Records moved to the server the kernel NATs their flow to (adopted right after the bind). */
  corrected = 0;
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
  /** `sluice ctl` changes kept over the file (state file). */
  readonly overrides: OverrideStore;
  /** Connections/s per server and service, sampled once a second. */
  readonly rates = new RateWindow(RATE_WINDOW_SECONDS + 1);
  /** The active health checks of the servers (src/front/health/checker.ts). */
  readonly health: HealthChecker;
  /** Health transitions since start, by the state entered (metrics, status). */
  readonly healthTransitions: Record<HealthState, number> = Object.fromEntries(HEALTH_STATES.map((st) => [st, 0])) as Record<HealthState, number>;
  /** Times usableSetChanged() ran (status: each is one selector rebuild and one cluster_load). */
  usableChanges = 0;
  /** Selector rebuilds done (a service whose usable set changed, at most every SELECTOR_REBUILD_MIN_MS). */
  selectorRebuilds = 0;
  #usablePending: ReturnType<typeof setImmediate> | undefined;
  readonly #selectorBuilt = new WeakMap<ServiceRuntime, string>();
  #lastRebuild = -Infinity;
  #rebuildTimer: ReturnType<typeof setTimeout> | undefined;
  /** The start's install is done (the next installs without `over` are repairs). */
  #startInstalled = false;
  /** The rules this process installed last (installRuleset's element-only update). */
  #installed: RuleSet | undefined;
  /** The daemon-down fallback's contents: rewritten when the usable servers change (usableChanged). */
  readonly fallback: FallbackWriter;
  /** The kernel SYN schedule (kernel-schedule.ts): rewritten as the servers' state changes. */
  readonly schedule: KernelScheduleWriter;
  /** SYN cookies engaged while a service is under a SYN flood (synproxy-auto.ts): read each second. */
  readonly synproxy: SynproxyAuto;
  /** The VIP guard's drop counter, read from each rule check's dump of our nft table. */
  readonly vipGuard = new VipGuard();
  /** The fallback's flows and the stray LAN drops, counted by the kernel: running totals (table-counters.ts). */
  readonly tableCounters = new TableCounters();
  /** This node's role in a front-node pair (ha/role.ts): 'single' without `ha`, else keepalived's word via the notify hook. */
  readonly ha: HaRoleMachine;
  /** conntrackd's sync figures, read every 5 s off the packet path (ha/sync-state.ts); state 'off' without `ha`. */
  readonly sync: SyncStateReader;
  /** The uplink virtual address ('' without `ha`), parsed once (#holdsUplinkVip). */
  #uplinkVip: string | undefined;

  /** The last apply()'s rules: render and install (ms), logged with "configuration reloaded". */
  #lastApplyMs: Record<string, number> = {};
  /** Set by apply() for its element update only: what the kernel holds of the schedule (nft.ts heldSchedule). */
  #heldSchedule: HeldSchedule | undefined;
  readonly #rateKeys = new WeakMap<ServiceRuntime, readonly string[]>();
  /** A table counter read is waiting for the kernel (#readTableCounters). */
  #countersReading = false;
  /** Services without slow start whose shares were set to 1 (#refreshShares). */
  readonly #sharesWhole = new WeakSet<ServiceRuntime>();
  /** Where a start's time went (ms since the process began: performance.now()), logged with "front node ready". */
  readonly #startup: Record<string, number> = {};

  constructor(configFile: string) {
    this.#startup['begin'] = Math.round(performance.now());
    this.configFile = configFile;
    const file = loadConfig(frontConfigSchema, configFile);
    assertHostReady(file);
    this.overrides = new OverrideStore(stateFilePath(configFile, file.stateFile), this.log);
    this.config = this.overrides.load(file);
    this.#startup['configLoaded'] = Math.round(performance.now());
    const ha = this.config.ha;
    // Role and address may disagree for one detection time (3 adverts) and the hook's run around a takeover.
    this.ha = new HaRoleMachine(ha !== undefined, 3 * (ha?.advertSeconds ?? 1) * 1000 + HOOK_ALLOWANCE_MS, Date.now());
    this.sync = new SyncStateReader(ha?.files.conntrackd, {
      onChange: (from, to) => {
        if (to.state === 'ok') this.log.info({ from: from.state, sync: to.figures }, 'conntrackd sync state readable');
        else if (to.state === 'unknown') this.log.warn({ from: from.state, reason: to.reason }, 'conntrackd sync state unknown');
      },
    });
    this.systemd = new SystemdNotifier(this.log);
    this.throttle = new FrontThrottle(this.log);
    this.admission = new FrontAdmission(this.log);
    this.fallback = new FallbackWriter({
      log: this.log,
      config: () => this.config,
      // A fill of 256k elements (13.8 MB of script) takes ~3 s of nft here, far more on a loaded machine: the timeout grows with the script.
      write: (script) => nftLoadAsync(script, 10_000 + Math.ceil(script.length / 500)),
    });
    this.schedule = new KernelScheduleWriter({
      log: this.log,
      config: () => this.config,
      // A whole rewrite of 1,000 services' slots is 256k elements: the timeout grows with the script, as the fallback writer's.
      write: (script) => nftLoadAsync(script, 10_000 + Math.ceil(script.length / 500)),
      script: (l, oldKeys, els, slots) => scheduleUpdateScript(this.config, l, oldKeys, els, slots),
      rewrite: (layout, targets, chains) => scheduleRewriteScript(this.config, layout, targets, chains),
    });
    this.synproxy = new SynproxyAuto({
      log: this.log,
      config: () => this.config,
      // Each table with a capable service has its own syn_seen: both read, one text (parseSynSeen).
      // Over netlink (microseconds): `nft list set` was a child process forked every second.
      read: async () => (await Promise.all(synproxyFamilies(this.config).map((fam) => readSetCountersAsync(fam, SYN_SEEN_SET)))).join('\n'),
      write: (script) => nftLoadAsync(script, 10_000),
      now: () => performance.now(),
    });
    this.rules = new RulesHealth({
      log: this.log,
      // A repair renders the running configuration with the latest usable servers and schedule.
      render: () => {
        const targets = this.schedule.render(this.config, this.engine.services);
        this.schedule.installed(targets);
        const engaged = this.synproxy.engaged();
        this.synproxy.installed();
        return renderRuleset(this.config, this.fallback.spread(), this.vipGuard.last(), targets, engaged, this.vipGuard.last6());
      },
      // Over the rules this process installed last, a reload or ctl change
      // replaces only set and map elements (installRuleset); a repair, or
      // the first install, writes the whole table (the first only the
      // elements, over a table of its own structure the last daemon left).
      apply: (rules, whole) => {
        const over = whole ? undefined : this.#installed;
        // The start's install (nothing of ours installed yet, no repair):
        // over a table of the same structure, left by the previous daemon,
        // it writes the elements instead of replacing the table.
        const keep =
          !whole && this.#installed === undefined && !this.#startInstalled
            ? {
                read: readTableLayout,
                onRefused: (err: Error): void => {
                  this.log.warn({ err: err.message }, 'the nft table of the same structure could not be kept (its elements not written); replacing it');
                },
              }
            : undefined;
        // Unknown while installing: an install that fails half-way (nft done, iptables refused) must not be diffed against.
        this.#installed = undefined;
        const mode = installRuleset(rules, undefined, over, over === undefined ? undefined : this.#heldSchedule, keep);
        if (keep !== undefined) {
          this.#startInstalled = true;
          // The kernel's counters were kept: what #carryKernelCounters seeded is in them already.
          if (mode === 'kept') this.tableCounters.kept();
          this.log.info({ table: mode === 'kept' ? 'kept (same structure): elements written' : 'replaced' }, 'nft table installed');
        }
        const elements = mode === 'elements';
        this.#installed = rules;
        // The fallback map: filled by a whole install only when small; the writer brings it to the running spread.
        this.fallback.afterInstall(!elements, rules.nft.v6 === undefined ? rules.nft.fallbackHeld : new Map([...rules.nft.fallbackHeld, ...rules.nft.v6.fallbackHeld]));
        // A large schedule, too: a whole install left its slots to the writer (SYNs queue until they are written).
        if (!elements && !rules.nft.scheduleInline) this.schedule.installedEmpty();
        return elements;
      },
      save: (table) => (table === 'nft' ? listNft() : table === 'nft6' ? listNft(undefined, 'ip6') : saveTable(iptablesOf(table) ?? table, undefined, table.endsWith('6') ? 6 : 4)),
      saveAsync: (table, timeoutMs) =>
        table === 'nft' ? listTableAsync(timeoutMs) : table === 'nft6' ? listTableAsync(timeoutMs, undefined, 'ip6') : saveTableAsync(iptablesOf(table) ?? table, timeoutMs, undefined, table.endsWith('6') ? 6 : 4),
      nftChains: (timeoutMs) => listChainsAsync(timeoutMs),
      fallback: () => this.fallback.state(),
      // A check reads the ruleset generation first: while no transaction
      // was committed since an intact check, it reads nothing else.
      generation: () => rulesetGenerationAsync(),
      generationCoversIptables: iptablesIsNft(),
      // The table's named counters (VIP guard, fallback flows, stray
      // replies) at every check, over netlink: microseconds at any size.
      onChecked: () => {
        void this.#readTableCounters();
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
    this.health = new HealthChecker({ now: () => performance.now() });
    const services = buildServices(this.config, this.#healthOptions(undefined));
    for (const svc of services) this.#selectorBuilt.set(svc, usableKey(svc));
    this.table = new ConnectionTable(this.config.connections.max, this.config.connections.recycleSeconds * 1000, {
      released: (svc, srv, slot) => {
        const s = this.engine.services[svc]?.servers[srv];
        if (s && s.active > 0) s.active--;
        // Checkpoint counts the connection held (concurrency): FIN, RST, reconcile (idle free), port reuse.
        this.engine.shaper?.releaseConnection(slot, performance.now());
      },
    });
    this.engine = new FrontEngine(services, this.table);
    const engine = this.engine;
    this.flowEnds = new FlowEnds({ table: this.table, serviceOf: (vip, port, protocol) => engine.serviceOf(vip, port, protocol), serviceOf6: (vip, port, protocol) => engine.serviceOf6(vip, port, protocol) });
    this.#shapingLayout = shapingLayoutKey(this.config);
    this.engine.setShaper(this.#buildShaper(this.config));
    this.#startup['constructed'] = Math.round(performance.now());
  }

  /**
   * What buildServices gives each service's servers: the transition sink
   * (tagged with the service's name) and, on reload, the health of servers
   * that remain (same service, name, address and port), so their state,
   * reason, stamps and slow start ramp carry over, like the estimates.
   */
  #healthOptions(old: readonly ServiceRuntime[] | undefined): (svc: string) => NonNullable<ConstructorParameters<typeof ServiceRuntime>[3]> {
    const keep = healthKeeper(old ?? []);
    return (svc) => ({
      now: performance.now(),
      sink: (h, t) => {
        this.#onHealthTransition(svc, h, t);
      },
      keep: keep(svc),
    });
  }

  /**
   * A server's combined health changed (check, agent or silence): logged
   * once, counted, and the usable set re-derived at once (a down server
   * gets no new connection from the next packet on); the heavier part
   * (selectors, cluster_load) runs once per event-loop turn however many
   * servers changed in it.
   */
  #onHealthTransition(service: string, h: ServerHealth, t: HealthTransition): void {
    this.healthTransitions[t.to]++;
    const fields = { service, server: t.server, from: t.from, to: t.to, reason: t.reason, check: h.check, agent: h.agent };
    if (t.to === 'up') this.log.info(fields, 'server health changed');
    else this.log.warn(fields, 'server health changed');
    // Only the runtime that owns this health changes now (one service's
    // servers scanned); usableSetChanged() re-derives every server once per turn.
    const i = this.engine.services.findIndex((x) => x.name === service);
    const servers = this.engine.services[i]?.servers;
    const owner = servers?.find((b) => b.health === h);
    if (servers !== undefined && owner !== undefined) {
      owner.refreshUsable();
      // Its slow start share now, not at the next refresh: until then a
      // server back up kept the share 1 of its down time, and a status or a
      // SYN handled later in this same turn saw it unramped (CI 2026-11-28:
      // front-health read "share 1" at its first sight of the server up).
      owner.share = slowStartShare(performance.now(), h.rampFrom, (this.config.services[i]?.health.slowStartSeconds ?? 0) * 1000);
      // Its unreplied flows go too, so that a client reusing one's port is
      // decided again rather than sent to the dead server (flow-expiry.ts).
      if (t.to === 'down') this.flowExpiry.serverDown({ service, server: t.server, mark: serverMark(i, servers.indexOf(owner)), address: owner.address6, port: owner.port });
    }
    this.#usablePending ??= setImmediate(() => {
      this.#usablePending = undefined;
      this.usableSetChanged();
    });
  }

  /**
   * THE reaction to a change of the set of usable servers (health
   * transitions; also run after a reload): re-derive `usable`, refresh the
   * slow start shares, rebuild the selectors of the services whose usable
   * set changed (maglev's table holds only usable servers; at most every
   * SELECTOR_REBUILD_MIN_MS), and send cluster_load now rather than at the
   * next period, so DNS learns within one check interval that capacity
   * went (a cluster with no usable server reports serversUp 0: down for
   * DNS), and rewrite the daemon-down fallback map (the usable servers the
   * kernel spreads new connections over while the daemon is away;
   * fallback.ts coalesces writes and skips an unchanged set).
   */
  usableSetChanged(): void {
    this.usableChanges++;
    const now = performance.now();
    for (const svc of this.engine.services) for (const b of svc.servers) b.refreshUsable();
    this.#rebuildSelectors(now);
    this.#refreshShares(now);
    this.#control?.sendClusterLoadNow(now);
    this.fallback.update(this.engine.services);
    this.schedule.update(this.engine.services);
  }

  #rebuildSelectors(now: number): void {
    const wait = this.#lastRebuild + SELECTOR_REBUILD_MIN_MS - now;
    if (wait > 0) {
      this.#rebuildTimer ??= setTimeout(() => {
        this.#rebuildTimer = undefined;
        this.#rebuildSelectors(performance.now());
      }, wait);
      return;
    }
    this.#lastRebuild = now;
    for (const svc of this.engine.services) {
      const key = usableKey(svc);
      if (this.#selectorBuilt.get(svc) === key) continue;
      svc.selector.rebuild(svc.servers);
      this.#selectorBuilt.set(svc, key);
      this.selectorRebuilds++;
    }
  }

  /** Slow start: each server's share from its ramp (health.slowStartSeconds of its service). */
  #refreshShares(now: number): void {
    const services = this.engine.services;
    for (let i = 0; i < services.length; i++) {
      const svc = services[i];
      const ms = (this.config.services[i]?.health.slowStartSeconds ?? 0) * 1000;
      if (!svc) continue;
      // Without slow start every share is 1 for good: set once per
      // ServiceRuntime (a reload builds new ones), not walked every tick.
      if (!(ms > 0)) {
        if (this.#sharesWhole.has(svc)) continue;
        this.#sharesWhole.add(svc);
      }
      for (const b of svc.servers) b.share = slowStartShare(now, b.health.rampFrom, ms);
    }
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
    // The gatekeeper first: its checkpoints would let everything through
    // without it. It connects in the background (a master down: fail open).
    await this.throttle.apply(this.config, () => this.engine.shaper);
    await this.admission.apply(this.config, () => this.engine.shaper);
    const engine = this.engine;
    const schedule = this.schedule;
    // Bound before the records are adopted and before the rules exist
    // (or, after a planned stop, while the previous daemon's rules are
    // still in place): a FIN logged after this point reaches us, so a flow
    // that closes while we read the kernel's table is either seen closing
    // there (not adopted) or its FIN recycles the adopted record. No FIN
    // of a connection decided by this daemon is logged to nobody. Records it misses all the same (the
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
        for (let i = 0; i < batch.count; i++) engine.teardown(batch.data, batch.payloadOffset(i), batch.payloadLength(i), now, batch.mark(i));
        // A SYN the kernel decided filled its server: its slots go now, not at the next tick.
        if (engine.scheduleDirty) {
          engine.scheduleDirty = false;
          schedule.update(engine.services);
        }
      },
      onError: (err) => {
        this.log.error({ err }, 'log group error');
      },
    });
    // Joined before the records are adopted: a flow that ends while we read
    // the kernel's table reports its end (if it has the event extension:
    // flows created before any listener have not; the records adopted
    // below are marked legacy and left to the resync).
    try {
      this.flowEnds.open(this.config.connections.eventBufferMiB * 2 ** 20, (err) => {
        this.log.error({ err }, 'conntrack events error');
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, `conntrack events unavailable: records of ended flows are freed by the reconcile every ${String(this.config.connections.reconcileSeconds)} s`);
    }
    this.#startup['eventsJoined'] = Math.round(performance.now());
    const rebuilt = (await this.#rebuildFromKernel(false)).added;
    this.#startup['adopted'] = Math.round(performance.now());
    this.fallback.installed(this.engine.services);
    const targets = this.schedule.render(this.config, this.engine.services);
    this.schedule.installed(targets);
    this.synproxy.installed();
    this.#carryKernelCounters();
    this.#startup['renderBegin'] = Math.round(performance.now());
    const first = renderRuleset(this.config, this.fallback.spread(), this.vipGuard.last(), targets, this.synproxy.engaged(), this.vipGuard.last6());
    this.#startup['rendered'] = Math.round(performance.now());
    this.rules.install(first);
    this.#startup['installed'] = Math.round(performance.now());
    this.#queue = NfQueue.open({
      queue: this.config.queue,
      // Packets wait here for their verdict: those of one batch, plus the
      // SYNs checkpoints hold (at most shaping.maxHeld <= 32768, half of
      // this). Fail-open: were the queue ever full, packets are accepted,
      // not dropped, so held SYNs never block other traffic.
      maxLength: 65536,
      failOpen: true,
      // Headers are all the engine reads: IPv4 (20) or IPv6 (40) with up to
      // 8 extension headers, and TCP with options (<= 60). 128 bytes cut an
      // IPv6 SYN behind more than ~28 bytes of extension headers (a 9-header
      // chain read as truncated, test/netns/front-ipv6.test.ts); 256 holds
      // any chain the codec accepts with common option sizes. A SYN is
      // shorter than either, so its copy is unchanged.
      copyRange: 256,
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
    // (After onSettled is set: a held SYN's timer may fire during the await.)
    // Between the first adoption and the bind, the previous daemon's rules
    // (or ours, just installed) passed new connections to the fallback
    // spread: adopt those flows too, so their records name the server the
    // kernel NATs them to. A retransmitted SYN of such a flow that reached
    // us before this pass got our own choice as its record (its packets
    // follow the kernel's NAT binding regardless): corrected here.
    const late = await this.#rebuildFromKernel(true);
    this.#timers.push(
      setInterval(() => {
        this.#refreshShares(performance.now());
      }, SHARE_TICK_MS),
      setInterval(() => {
        const now = performance.now();
        this.table.sweep(now);
        if (this.flowEnds.overrunResyncDue(now, this.#resyncing)) void this.#reconcile('overrun');
      }, 1000),
      setInterval(() => {
        this.schedule.update(this.engine.services);
      }, SCHEDULE_TICK_MS),
      setInterval(() => {
        this.health.observeRefusals(this.engine.refusals, performance.now());
      }, REFUSAL_TICK_MS),
      setInterval(() => {
        this.#sampleRates(performance.now());
        const qs = this.#queue?.stats();
        this.#lossLog.poll(this.config.queue, qs?.lost, qs?.overruns ?? 0, performance.now());
        this.#shedLog.poll(this.shed(), performance.now());
      }, 1000),
      setInterval(() => this.engine.shaper?.sweep(performance.now(), 10_000), this.config.shaping.sweepMs),
      setInterval(() => {
        const reason = this.flowEnds.periodicReason(this.#resyncing);
        if (reason !== undefined) void this.#reconcile(reason);
      }, this.config.connections.reconcileSeconds * 1000),
    );
    this.rules.start();
    this.synproxy.start();
    this.health.configure(this.engine.services, (name) => this.config.services.find((s) => s.name === name)?.health);
    this.health.start();
    this.#admin = new AdminServer(this.config.adminSocket, this);
    await this.#admin.listen();
    if (this.config.control) this.#control = await FrontControl.start(this, this.config.control, this.log);
    if (this.config.http) {
      // Measured only where it is read (the metrics).
      try {
        this.loopTurns = LoopTurns.start();
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'event-loop turn CPU time not measured');
      }
      const registry = newRegistry(1);
      registerFrontMetrics(registry, this);
      this.#ops = new OpsServer({ listen: this.config.http.listen, registry, status: () => this.status(), log: this.log });
      await this.#ops.start();
    }
    if (this.config.ha) {
      // Restarted alone on the master: keepalived will not notify again, and
      // the records of the flows it holds were adopted above.
      if (this.#holdsUplinkVip()) this.#roleTransition(this.ha.adoptRunningMaster(Date.now()), false);
      this.#timers.push(
        setInterval(() => {
          this.#observeVip();
        }, 1000),
      );
      this.sync.start();
    }
    this.#startup['ready'] = Math.round(performance.now());
    this.log.info({ cluster: this.config.cluster, node: frontNodeName(this.config), role: this.ha.role, queue: this.config.queue, services: this.config.services.length, rebuilt, adoptedAfterBind: late.added, corrected: late.corrected, startupMs: this.#startup }, 'front node ready');
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
    const t0 = performance.now();
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
    const t1 = performance.now();
    try {
      // The ctl overrides again, over the new file (stale ones logged and dropped).
      this.apply(this.overrides.load(applied));
    } finally {
      // The reload is over either way (an apply() error still reaches the
      // caller): systemd must not be left in "reloading".
      this.systemd.ready(this.#statusLine());
    }
    // Where a reload's time went (ms): the file read and validated, then the services rebuilt and the rules rendered and installed.
    this.log.info({ services: next.services.length, ms: { config: Math.round(t1 - t0), apply: Math.round(performance.now() - t1), ...this.#lastApplyMs } }, 'configuration reloaded');
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
    const services = buildServices(next, this.#healthOptions(old));
    for (const svc of services) this.#selectorBuilt.set(svc, usableKey(svc));
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
      for (const b of ns.servers) {
        const ob = os?.servers.find((x) => x.id === b.id);
        b.decided = ob?.decided ?? 0;
        b.refused = ob?.refused ?? 0;
        b.unanswered = ob?.unanswered ?? 0;
      }
      for (const o of ns.overflow) o.decided = os?.overflow.find((x) => x.cluster === o.cluster)?.decided ?? 0;
      ns.overflowed = os?.overflowed ?? 0;
    }
    this.fallback.installed(services);
    // What the kernel holds of the schedule now (the writer's writes since
    // the last install, for the running configuration): the element update
    // writes only the slots and chains that differ from it.
    const held = this.schedule.held();
    this.#heldSchedule = held === undefined ? undefined : heldSchedule(this.config, held);
    const targets = this.schedule.render(next, services);
    this.schedule.installed(targets, next);
    // Gates follow the services by name: an auto service engaged now stays engaged in the new table.
    this.synproxy.installed(next);
    try {
      const t0 = performance.now();
      const rules = renderRuleset(next, this.fallback.spread(), this.vipGuard.last(), targets, this.synproxy.engaged(), this.vipGuard.last6());
      const t1 = performance.now();
      try {
        this.rules.install(rules);
      } finally {
        this.#heldSchedule = undefined;
      }
      this.#lastApplyMs = { render: Math.round(t1 - t0), install: Math.round(performance.now() - t1) };
    } catch (err) {
      // The running services stay: so do the fallback's and the schedule's states (a repair renders them with the running configuration).
      this.fallback.installed(old);
      this.schedule.installed(this.schedule.render(this.config, old));
      this.synproxy.installed(this.config);
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
    // Checks follow the new servers: removed ones stop, new ones start in health.startAs, remaining ones keep their state.
    this.health.configure(services, (name) => next.services.find((s) => s.name === name)?.health);
    this.usableSetChanged();
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
    const released = this.#releaseHeld(old, oldServices);
    if (released > 0) this.log.info({ released }, 'checkpoints rebuilt: held connections let through');
    else this.log.info('checkpoints rebuilt');
  }

  /**
   * Every SYN `shaper` holds is decided now by the running services
   * without checkpoints (found by its service's name in `oldServices`),
   * its verdict staged on the queue. Returns how many.
   */
  #releaseHeld(shaper: Shaper, oldServices: readonly ServiceRuntime[]): number {
    const now = performance.now();
    let released = 0;
    shaper.pool.forEachHeld((slot) => {
      const p = shaper.pool;
      const name = oldServices[p.service[slot] ?? 0]?.name;
      const s = this.engine.services.findIndex((x) => x.name === name);
      this.engine.admitHeld(p.id[slot] ?? 0, s, p.key[slot] ?? 0, p.src[slot] ?? 0, now);
      released++;
    });
    return released;
  }

  /**
   * A `sluice ctl` change (admin.ts validated it): kept in the state file
   * first, then applied; refused (nothing applied) when it cannot be kept.
   */
  change(c: ServerChange): string | undefined {
    const next = this.overrides.change(c, this.config);
    if (typeof next === 'string') return next;
    this.apply(keepRestartKeys(this.config, next, RESTART_KEYS).applied);
    return undefined;
  }

  /** One sample of every server's and service's decided count (rates.ts). */
  #sampleRates(now: number): void {
    const r = this.rates;
    r.begin();
    for (const svc of this.engine.services) {
      let total = svc.overflowed;
      const keys = this.#rateKeysOf(svc);
      for (let i = 0; i < svc.servers.length; i++) {
        const b = svc.servers[i];
        if (b === undefined) continue;
        r.sample(keys[i] ?? serverRateKey(svc.name, b.id), b.decided, now);
        total += b.decided;
      }
      r.sample(serviceRateKey(svc.name), total, now);
    }
  }

  /**
   * The servers' rate keys of `svc`, built once per ServiceRuntime (a
   * reload builds new ones): the same strings every second, so no string
   * is built or hashed again (with 1,000 services of 100 servers the keys
   * built at each sample were most of its ~40 ms, measured 2026-11-26).
   */
  #rateKeysOf(svc: ServiceRuntime): readonly string[] {
    let keys = this.#rateKeys.get(svc);
    if (keys === undefined) {
      keys = svc.servers.map((b) => serverRateKey(svc.name, b.id));
      this.#rateKeys.set(svc, keys);
    }
    return keys;
  }

  /** The running services (the engine's), for the control plane. */
  get services(): readonly ServiceRuntime[] {
    return this.engine.services;
  }

  /**
   * The control plane's hook after each agent report and tick (the usable
   * servers may have changed): the fallback map follows (coalesced; nothing
   * written if they did not). Health transitions go through usableSetChanged().
   */
  usableChanged(): void {
    this.fallback.update(this.engine.services);
  }

  /**
   * Adopts the kernel's live flows to our VIPs as records (a restart: the
   * previous daemon's table is gone, the kernel's flows are not). With
   * `correct`, a record whose target differs from the server the kernel
   * NATs the flow to is moved to that server: the kernel's binding is what
   * the flow's packets follow.
   */
  async #rebuildFromKernel(correct: boolean, states: ReadonlySet<string> = REBUILD_STATES, legacy = true): Promise<{ added: number; corrected: number }> {
    let added = 0;
    let corrected = 0;
    // Streamed (a chunk per loop turn): SYNs are decided between chunks.
    // Each flow is judged against the services of that moment: a reload
    // during the read renumbers services, and serviceOf follows it.
    await streamKernelFlows((f) => {
      if (!states.has(f.state)) return;
      const v6 = f.v6;
      const s = v6 ? this.engine.serviceOf6(v6.dst, f.dstPort, protocolNumber(f.protocol)) : this.engine.serviceOf(f.dst, f.dstPort, protocolNumber(f.protocol));
      const svc = this.engine.services[s];
      if (svc === undefined) return;
      let target = v6 ? svc.serverAt6(v6.replySrc, f.replySrcPort) : svc.serverAt(f.replySrc, f.replySrcPort);
      if (target < 0) {
        const vip = v6 ? formatIPv6Address(v6.replySrc) : formatIPv4Address(f.replySrc);
        const j = svc.overflow.findIndex((o) => o.vip === vip);
        if (j < 0) return;
        target = OVERFLOW_BASE + j;
      }
      // An IPv6 client's key interns its address (client6.ts); create() below takes it.
      const key = v6 ? this.table.key6(v6.client, f.clientPort) : connectionKey(f.client, f.clientPort);
      if (key < 0) return;
      const known = this.table.lookup(s, key);
      if (known >= 0 && (!correct || known === target || !this.table.isActive(s, key))) return;
      if (known >= 0) this.table.remove(s, key); // released(): its old server's count drops
      const slot = this.table.create(key, s, target, performance.now());
      if (slot >= 0) {
        this.table.markAdopted(slot);
        if (legacy) this.table.markLegacy(slot);
        const srv = svc.servers[target];
        if (srv) srv.active++;
        if (known >= 0) corrected++;
        else added++;
      }
    });
    this.adopted += added;
    this.corrected += corrected;
    return { added, corrected };
  }

  /**
   * The resync: frees active records whose flow the kernel no longer has.
   * With conntrack events it runs only after an overrun or while legacy
   * records remain (flow-ends.ts); without them every reconcileSeconds.
   */
  async #reconcile(reason: ResyncReason): Promise<void> {
    // A periodic or legacy resync due while one runs is answered by it; an
    // overrun is not (FlowEnds.answerOverruns) and is never asked for then.
    if (this.#resyncing) return;
    this.#resyncing = true;
    try {
      await this.#resync(reason);
    } finally {
      this.#resyncing = false;
    }
  }

  async #resync(reason: ResyncReason): Promise<void> {
    this.flowEnds.resyncs[reason]++;
    // Records younger than this when the read starts may not be in the
    // kernel's table yet (decided, the SYN not yet through conntrack).
    const olderThan = performance.now() - Math.min(this.config.connections.reconcileSeconds, RESYNC_YOUNG_SECONDS) * 1000;
    // Mark (streamed, a chunk per loop turn) and sweep (a slice of slots
    // per loop turn): a million flows never stall the SYN decisions.
    this.table.resyncBegin();
    try {
      await streamKernelFlows((f) => {
        if (!LIVE_STATES.has(f.state)) return;
        const v6 = f.v6;
        if (v6) {
          const s = this.engine.serviceOf6(v6.dst, f.dstPort, protocolNumber(f.protocol));
          const key = s >= 0 ? this.table.findKey6(v6.client, f.clientPort) : -1; // -1: no record uses the address
          if (key >= 0) this.table.resyncSeen(s, key);
          return;
        }
        const s = this.engine.serviceOf(f.dst, f.dstPort, protocolNumber(f.protocol));
        if (s >= 0) this.table.resyncSeen(s, connectionKey(f.client, f.clientPort));
      }, { pace: () => this.flowEnds.yieldWhileBacklogged(RESYNC_YIELD_MAX_MS) });
    } catch (err) {
      // Without the kernel's table nothing can be judged gone: keep every record.
      this.log.error({ err: (err as Error).message }, 'reconcile skipped: cannot read the kernel flows');
      return;
    }
    let freed = 0;
    for (let from = 0; from < this.table.capacity; from += RESYNC_SWEEP_SLOTS) {
      freed += this.table.resyncSweep(olderThan, from, RESYNC_SWEEP_SLOTS);
      await new Promise<void>((r) => setImmediate(r));
      await this.flowEnds.yieldWhileBacklogged(RESYNC_YIELD_MAX_MS);
    }
    this.flowEnds.resyncDone(reason, freed);
    if (freed > 0 || reason === 'overrun') this.log.info({ freed, reason, legacy: this.table.legacy }, 'resync: records freed whose kernel flows are gone');
  }

  queueStats(): QueueStats | undefined {
    return this.#queue?.stats();
  }

  logStats(): LogStats | undefined {
    return this.#log?.stats();
  }

  ctEventStats(): ConntrackEventsStats | undefined {
    return this.flowEnds.stats();
  }

  kernelQueue(): KernelQueueStats | undefined {
    return readKernelQueue(this.config.queue);
  }

  /**
   * Before our first install replaces the tables: the kernel's counters of
   * the tables a previous run left (table-counters.ts). The VIP guard's
   * values are rendered into the new table; the fallback's and the stray
   * drops become the base of their totals. Logged when the fallback
   * carried flows with no daemon bound.
   */
  #countersUnreadable = false;

  /** The named counters of both tables into the VIP guard and table counts (a table that is absent leaves its values). */
  async #readTableCounters(): Promise<void> {
    // One read at a time (a read waits behind a running commit; the next check's read comes after it).
    if (this.#countersReading) return;
    this.#countersReading = true;
    try {
      for (const fam of ['ip', 'ip6'] as const) {
        const list = await readCountersAsync(fam);
        if (list === undefined) continue;
        this.vipGuard.read(list, fam);
        this.tableCounters.read(list, fam);
      }
      if (this.#countersUnreadable) this.log.info('the nft table counters can be read again');
      this.#countersUnreadable = false;
    } catch (err) {
      if (!this.#countersUnreadable) this.log.warn({ err }, 'cannot read the nft table counters: status and /metrics keep their last values (logged once until it works again)');
      this.#countersUnreadable = true;
    } finally {
      this.#countersReading = false;
    }
  }

  #carryKernelCounters(): void {
    for (const fam of ['ip', 'ip6'] as const) {
      let list: string | undefined;
      try {
        list = readCounters(fam);
      } catch (err) {
        // Not fatal: the install goes on, and these totals start from zero.
        this.log.warn({ err, family: fam === 'ip' ? 'ipv4' : 'ipv6' }, 'could not read the kernel counters of the previous rules; their counts are not carried over');
        continue;
      }
      if (list === undefined) continue;
      this.vipGuard.read(list, fam);
      const c = this.tableCounters.seed(list, fam);
      if (c.fallbackFlows > 0 || c.strayReplies > 0) {
        this.log.info({ family: fam === 'ip' ? 'ipv4' : 'ipv6', fallbackFlows: c.fallbackFlows, strayReplies: c.strayReplies, vipGuardDrops: (fam === 'ip' ? this.vipGuard.last() : this.vipGuard.last6()).packets }, 'since the rules were last installed (while no daemon ran, among others), the kernel counted');
      }
    }
  }

  tableCounts(): TableCountsStatus {
    return this.tableCounters.status();
  }

  vipGuardCount(): GuardCount {
    return this.vipGuard.last();
  }

  vipGuardCount6(): GuardCount {
    return this.vipGuard.last6();
  }

  /** What the node shed so far, by reason (shed.ts). */
  shed(): Record<ShedReason, number> {
    return shedCounts(this.engine.counters, this.#queue?.stats().lost ?? 0, this.#log?.stats().lost ?? 0);
  }

  scheduleStatus(): KernelScheduleStatus {
    return this.schedule.status();
  }

  synproxyStatus(): SynproxyAutoStatus {
    return this.synproxy.status();
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

  /** The role every cluster_load carries (a node in fault is not master: reported as backup). */
  haRole(): ReportedRole {
    return messageRole(this.ha.role);
  }

  /**
   * keepalived's new state for this node, from the notify hook (the admin
   * command {"cmd":"ha","state":...}), sent after conntrackd committed the
   * replicated flows. Returns the role before and after, or why it was refused.
   */
  haNotify(state: HaState): { from: HaRole; to: HaRole; changed: boolean } | string {
    if (this.config.ha === undefined) return 'this front node has no ha section (role single): only the nodes of a pair take a VRRP state';
    const from = this.ha.role;
    const t = this.ha.notify(state, `keepalived: ${state.toUpperCase()} (notify hook)`, Date.now());
    if (t) this.#roleTransition(t);
    else if (state === 'master') {
      // A repeat: e.g. this process started while the takeover was under
      // way (address present, commit not yet done). Adoption is idempotent:
      // the flows committed since start get their records now.
      void this.#adoptCommitted().then((r) => {
        if (r && r.added + r.corrected > 0) this.log.info({ adopted: r.added, corrected: r.corrected }, 'ha: master again (repeat notify): records adopted from the committed flows');
      });
    }
    return { from, to: this.ha.role, changed: t !== undefined };
  }

  /**
   * One role transition: logged once and counted (by the machine), DNS told
   * at once (cluster_load with the role). On becoming master the records
   * are rebuilt from the kernel's flows, which the hook committed before
   * telling us, through the restart path. On becoming backup the table is
   * kept: a flow that comes back finds its record; records whose kernel flow
   * ends are freed by reconcile. `failover` false: the role found at start
   * (the records were just adopted; nothing moved).
   */
  #roleTransition(t: RoleTransition | undefined, failover = true): void {
    if (t === undefined) return;
    const fields = { from: t.from, to: t.to, reason: t.reason };
    if (t.to === 'master') this.log.info(fields, 'ha role changed');
    else this.log.warn(fields, 'ha role changed');
    // cluster_load at once with the new role: DNS and the other clusters take a pair's figures from its master.
    this.#control?.roleChanged();
    if (t.to !== 'master' || !failover) return;
    const at = new Date(t.at).toISOString();
    void this.#adoptCommitted().then((r) => {
      this.ha.recordFailover({ at, from: t.from, to: t.to, adopted: r?.added ?? 0, corrected: r?.corrected ?? 0 });
      if (r) this.log.info({ from: t.from, adopted: r.added, corrected: r.corrected }, 'ha: master: connection records rebuilt from the committed flows');
    });
  }

  /**
   * Records for the flows the notify hook committed, through the restart
   * path, in every live state: conntrackd 1.4.7 commits the replicated TCP
   * flows as CLOSE_WAIT (measured: ESTABLISHED in the external cache,
   * CLOSE_WAIT with the 60 s close-wait timeout in the kernel after -c).
   * They carry traffic all the same; their records matter most for the one
   * that idles past that timeout: its next packet finds no flow, and the
   * record sends it to its server again (counted as resumed). Undefined when
   * the kernel's flows could not be read (logged here).
   */
  async #adoptCommitted(): Promise<{ added: number; corrected: number } | undefined> {
    try {
      // conntrackd commits the replicated flows over ctnetlink while our
      // event socket listens: they get the event extension, so not legacy.
      return await this.#rebuildFromKernel(true, LIVE_STATES, false);
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'ha: master, but the records were not rebuilt: the kernel flows could not be read (reconcile and FIN/RST keep the table; capacity counts are low until then)');
      return undefined;
    }
  }

  /** Whether this host holds the uplink virtual address now (os.networkInterfaces(): one netlink dump, once a second). */
  #holdsUplinkVip(): boolean {
    // `ha` is a restart key: the running config's address is the one for this process's life.
    const vip = this.#uplinkVip ??= (this.config.ha === undefined ? '' : (parseCidr(this.config.ha.uplink.virtualAddress)?.address ?? ''));
    if (vip === '') return false;
    return Object.values(networkInterfaces()).some((addrs) => addrs?.some((a) => a.family === 'IPv4' && a.address === vip) === true);
  }

  #observeVip(): void {
    const e = this.ha.observe(this.#holdsUplinkVip(), performance.now());
    if (e === undefined) return;
    const fields = { role: e.role, holdsUplinkVirtualAddress: e.holdsVip, forMs: Math.round(e.forMs) };
    if (e.kind === 'began') this.log.error(fields, 'ha role mismatch: keepalived\'s address and the role the notify hook gave disagree (a hook missing or failed? see journalctl -t sluice-ha)');
    else this.log.info(fields, 'ha role mismatch ended');
  }

  #haStatus(): FrontHaStatus {
    const ha = this.config.ha;
    const me = frontNodeName(this.config);
    const peer = ha?.nodes.find((n) => n.name !== me);
    return {
      node: me,
      role: this.ha.role,
      reason: this.ha.reason,
      since: new Date(this.ha.since).toISOString(),
      transitions: { ...this.ha.transitions },
      notifies: this.ha.notifies,
      holdsUplinkVirtualAddress: this.ha.holdsVip ?? null,
      mismatch: this.ha.mismatched,
      mismatches: this.ha.mismatches,
      peer: peer ? { name: peer.name, uplinkAddress: peer.uplinkAddress, lanAddress: peer.lanAddress, syncAddress: peer.syncAddress } : null,
      virtual: ha ? { uplink: ha.uplink.virtualAddress, lan: ha.lan.virtualAddress } : null,
      sync: this.sync.state,
      lastFailover: this.ha.lastFailover ?? null,
    };
  }

  status(): FrontStatus {
    const now = performance.now();
    const { malformed, ...counters } = this.engine.counters;
    return {
      cluster: this.config.cluster,
      ha: this.#haStatus(),
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
      counters,
      malformed: Object.fromEntries(parseStatusName.map((n, i) => [n, malformed[i] ?? 0] as const).filter(([, v]) => v !== 0)),
      records: { active: this.table.active, recycled: this.table.recycled, adopted: this.adopted, corrected: this.corrected, ...this.table.counts },
      admin: { handled: this.#admin?.handled ?? 0, rejected: this.#admin?.rejected ?? 0 },
      rules: this.rules.status(),
      vipGuard: { ...this.vipGuard.last() },
      vipGuard6: { ...this.vipGuard.last6() },
      kernelCounts: this.tableCounters.status(),
      fallback: this.fallback.status(),
      kernelSchedule: this.schedule.status(),
      shed: this.shed(),
      synproxy: this.synproxy.status(),
      queue: this.#queue?.stats(),
      log: this.#log?.stats(),
      flowEnds: { events: this.flowEnds.stats(), ...this.flowEnds.counts, resyncs: { ...this.flowEnds.resyncs }, resyncYields: this.flowEnds.resyncYields, legacyRecords: this.table.legacy, legacyResyncPeriods: this.flowEnds.legacyBackoff.periods, legacyResyncsSkipped: this.flowEnds.legacyBackoff.skipped },
      ...(this.engine.shaper ? { shaping: { heldNow: this.engine.shaper.pool.held, maxHeld: this.engine.shaper.pool.capacity, ...this.engine.shaper.counts, checkpoints: shapingStatus(this.engine.shaper, performance.now(), 10, (cp, key, slot) => keyName(this.engine.services, cp, key, slot)) } } : {}),
      ...(this.#control ? { control: this.#control.status() } : {}),
      ...(this.throttle.gatekeeper ? { throttle: this.throttle.gatekeeper.status() } : {}),
      ...(this.admission.hierarchy ? { admission: this.admission.status() } : {}),
      overrides: this.overrides.status(),
      rateWindowSeconds: RATE_WINDOW_SECONDS,
      health: {
        transitions: { ...this.healthTransitions },
        outcomes: { ...this.health.outcomes },
        inFlight: this.health.scheduler.inFlight,
        peakInFlight: this.health.scheduler.peakInFlight,
        maxInFlight: this.health.scheduler.maxInFlight,
        skipped: this.health.scheduler.skipped,
        targets: this.health.scheduler.size,
        usableChanges: this.usableChanges,
        selectorRebuilds: this.selectorRebuilds,
        flowExpiry: { runs: this.flowExpiry.runs, failures: this.flowExpiry.failures, deleted: this.flowExpiry.deleted, gone: this.flowExpiry.gone },
      },
      services: this.engine.services.map((s) => ({
        name: s.name,
        // RFC 5952 text for an IPv6 VIP and its servers (the config's form).
        vip: s.family === 6 ? formatIPv6Address(s.vip6) : formatIPv4Address(s.vip),
        port: s.port,
        protocol: s.protocol === IpProtocol.Udp ? ('udp' as const) : ('tcp' as const),
        method: this.config.services.find((c) => c.name === s.name)?.method ?? '-',
        cps: round2(this.rates.rate(serviceRateKey(s.name))),
        removed: removedOf(this.overrides.list, s.name),
        overflowed: s.overflowed,
        servers: s.servers.map((b) => ({
          name: b.id,
          state: b.down || b.health.state === 'down' || b.health.state === 'maint' ? 'down' : b.state,
          active: b.active,
          decided: b.decided,
          refused: b.refused,
          unanswered: b.unanswered,
          capacity: Number.isFinite(b.capacity) ? b.capacity : null,
          estimated: b.estimated,
          rate: round2(b.rate),
          address: s.family === 6 ? formatIPv6Address(b.address6) : formatIPv4Address(b.address),
          port: b.port,
          weight: b.weight,
          admin: b.state,
          health: {
            state: b.health.state,
            reason: b.health.reason,
            sinceSeconds: Math.round(now - b.health.since) / 1000,
            transitions: b.health.transitions,
            check: b.health.check,
            checkReason: b.health.checkReason,
            agent: b.health.agent,
            agentReason: b.health.agentReason,
            silent: b.health.silent,
            share: Math.round(b.share * 1000) / 1000,
            checks: this.health.status(b, now),
          },
          cps: round2(this.rates.rate(serverRateKey(s.name, b.id))),
          override: overrideOf(this.overrides.list, s.name, b.id),
        })),
        overflow: s.overflow.map((o) => ({ cluster: o.cluster, decided: o.decided, freeCapacity: o.freeCapacity })),
      })),
    };
  }

  /**
   * Unbinds and closes; the rules stay (see the lifecycle above). SYNs held
   * by checkpoints get their verdict first: closing the queue would make
   * the kernel drop them, and their clients would wait a retransmit
   * timeout (1 s, then 3 s) for the fallback. Idempotent.
   */
  stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.systemd.stopping();
    this.watchdog.stop();
    // A check in flight must not reinstall anything after this.
    this.rules.stop();
    this.health.stop();
    this.sync.stop();
    if (this.#usablePending) clearImmediate(this.#usablePending);
    clearTimeout(this.#rebuildTimer);
    this.fallback.stop();
    this.schedule.stop();
    this.synproxy.stop();
    for (const t of this.#timers) clearInterval(t);
    this.#ops?.close();
    // No queue timer fires after this: the held SYNs are ours to decide.
    for (const t of this.#schedulers) t.close();
    let released = 0;
    const shaper = this.engine.shaper;
    if (shaper && this.#queue) {
      released = this.#releaseHeld(shaper, this.engine.services);
      try {
        this.#queue.flush();
      } catch (err) {
        this.log.error({ err: (err as Error).message }, 'held connections: verdicts not sent (the kernel drops them at unbind; clients retransmit to the fallback)');
      }
    }
    this.#control?.close();
    this.throttle.stop();
    void this.admission.stop();
    this.#queue?.close();
    this.#log?.close();
    this.flowEnds.close();
    this.#admin?.close();
    this.log.info({ ...this.status(), heldReleased: released }, 'front node stopped; its rules stay (new connections go to the fallback until the next start; `sluice front --remove-rules` removes them)');
  }
}

/** `health` gives each service its transition sink and the kept health of remaining servers (the daemon's #healthOptions). */
export function buildServices(cfg: Readonly<FrontConfig>, health?: (svc: string) => ConstructorParameters<typeof ServiceRuntime>[3]): ServiceRuntime[] {
  return cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow, health?.(s.name)));
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
function keyName(services: readonly ServiceRuntime[], cp: Checkpoint, key: number, slot: number): string {
  switch (cp.criterion) {
    // An IPv6 client's key is a one-way hash of its address or prefix
    // (>= 2^32, checkpoint.ts): the slot keeps the masked words beside it.
    case Criterion.Source:
      return key >= 2 ** 32 ? cp.prefix6Of(slot) : formatIPv4Address(key);
    case Criterion.SourcePrefix:
      return key >= 2 ** 32 ? cp.prefix6Of(slot) : `${formatIPv4Address(key)}/${String(Math.clz32(~cp.keyMask >>> 0))}`;
    case Criterion.Service:
      return services[key]?.name ?? String(key);
    case Criterion.Server:
      return services[cp.service]?.servers[key]?.id ?? String(key);
    default:
      return '*';
  }
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

function protocolNumber(p: 'tcp' | 'udp'): number {
  return p === 'udp' ? IpProtocol.Udp : IpProtocol.Tcp;
}

/** The part of the control section a reload cannot apply (everything but the allowlists). */
function restartPart(c: FrontConfig['control']): string {
  return JSON.stringify(c ? { ...c, agents: c.agents?.listen, publish: c.publish?.listen } : null);
}
