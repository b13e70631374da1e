/**
 * The front node's control-plane side: binds the agents' PULL and our PUB,
 * subscribes to the peers' PUBs, and runs seed 000's procedures on what
 * arrives:
 *   load_report   -> receive_server_load (capacity estimates, down servers)
 *   request_rate  -> receive_request_rate / update_request_rate
 *   cluster_load  -> least-loaded-cluster list (overflow proportions)
 * and on timers:
 *   every second  rates and down flags into the services; cluster load to
 *                 subscribers when due (send_cluster_load)
 *   every pass    send_request_rate (high-rate clients to DNS)
 *   rtt_probe_request -> receive_probe_for_rtt (ICMP echo to DNS's targets),
 *                 from any subscribed peer (DNS is one of them); the prober
 *                 is ticked on a setTimeout chain only while it has work, and
 *                 its finished results go out as rtt_results every
 *                 probe.reportSeconds when there are any.
 * Probing needs a raw ICMP socket (root) and our PUB to report on; without
 * either the front node runs on, probe requests are counted as ignored and
 * the reason is logged once at start and shown in status.
 */
import type { HaRole } from '../control/cluster-reports.ts';
import type { Body, Envelope } from '../control/messages.ts';
import { ControlNode, type ControlCounters, type Sender } from '../control/node.ts';
import type { DomainCounters } from '../control/zap.ts';
import { LimitedLog } from '../log/limited.ts';
import type { Logger } from '../log/logger.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { frontNodeName, type FrontConfig } from './config.ts';
import { createNetPinger } from './icmp_echo.ts';
import { MethodPinger, type ProbeMethod } from './probe_methods.ts';
import { createTcpPinger, TcpPinger, type TcpProbeCounters } from './tcp_probe.ts';
import { LeastLoadedClusters } from './least_loaded_clusters.ts';
import { resultMessages, RttProber } from './receive_probe_for_rtt.ts';
import { receiveRequestRate } from './receive_request_rate.ts';
import { clusterLoadOf, ServerLoadEstimator, type ServerLoadRecord } from './receive_server_load.ts';
import { ClusterLoadReporter } from './send_cluster_load.ts';
import { sendRequestRate, type PassResult } from './send_request_rate.ts';
import type { ServiceRuntime } from './service.ts';
import { ClientRateTable } from './update_request_rate.ts';

type ControlConfig = NonNullable<FrontConfig['control']>;

/** Targets listed with their probe method in status. */
const PROBE_STATUS_TARGETS = 32;
/** Shortest wait between two prober ticks: bounds wakeups while probing (~100/s at most). */
const PROBE_MIN_TICK_MS = 10;

/** The `control` part of the front node's status (FrontStatus, status.ts): what FrontControl.status() returns. */
export interface FrontControlStatus {
  /** Every server with an agent, as its load reports describe it. */
  readonly servers: readonly {
    readonly name: string;
    /** Estimated new connections/s it can take. */
    readonly capacity: number;
    readonly utilization: number;
    readonly cpu: number;
    readonly connections: number;
    readonly reportRate: number;
    readonly reports: number;
    /** null before its first report. */
    readonly lastReportAgeSeconds: number | null;
    readonly down: boolean;
    /** What its agent last said about its health ('none': nothing, an older agent), and why. */
    readonly health: ServerLoadRecord['health'];
    readonly healthReason: string;
  }[];
  readonly cluster: ReturnType<typeof clusterLoadOf>;
  readonly topClients: readonly { readonly client: string; readonly rate: number }[];
  readonly clients: { readonly tracked: number; readonly dropped: number; readonly expired: number };
  /** The last pass of send_request_rate; absent before the first. */
  readonly lastPass?: PassResult | undefined;
  /** Our name on the control plane (the front's `node`, else its cluster) and the HA role our cluster_load reports carry. */
  readonly node: string;
  readonly role: HaRole;
  /** cluster_load reports sent at once because our role changed. */
  readonly roleChanges: number;
  /** The other clusters as their front nodes report them (a pair: figures from its master's report, `source`). */
  readonly peerClusters: readonly { readonly cluster: string; readonly available: number; readonly capacity: number; readonly ageSeconds: number; readonly fresh: boolean; readonly source: string; readonly nodes: readonly { readonly node: string; readonly role: HaRole; readonly ageSeconds: number }[] }[];
  readonly peers: readonly { readonly name: string; readonly lastType: string; readonly messages: number; readonly ageSeconds: number }[];
  readonly counters: Readonly<ControlCounters>;
  /** ZAP handshakes by domain ("<name>/<socket>"). */
  readonly zap: Readonly<Record<string, DomainCounters>>;
  /** RTT probing: on or off (and why), and while on the prober's counts and queues. */
  readonly probe: {
    /** Per method (absent while probing is off, and from older daemons). */
    readonly methods?: readonly ProbeMethodStatus[];
    /** Configured methods that could not open their sockets. */
    readonly methodsOff?: readonly string[];
    readonly fellBack?: number;
    readonly cheaperRetries?: number;
    readonly evicted?: number;
    /** The most recently answered targets and the method that answered, newest first. */
    readonly recentTargets?: readonly { readonly target: string; readonly method: string; readonly ageSeconds: number }[];
    readonly enabled: boolean; readonly off?: string; readonly ignoredRequests: number; readonly pingerErrors: number; /** Requests ignored as the backup of a pair (absent from older daemons). */ readonly notMaster?: number } & Partial<ReturnType<RttProber['status']>>;
}

export interface ProbeMethodStatus {
  readonly method: string;
  readonly sent: number;
  readonly answered: number;
  readonly timeouts: number;
  /** Targets whose last answer came by this method. */
  readonly targets: number;
  readonly tcp?: TcpProbeCounters & { readonly outstanding: number };
  readonly ipv6Off?: string;
}

export interface ServicesSource {
  readonly config: Readonly<FrontConfig>;
  readonly services: readonly ServiceRuntime[];
  /**
   * The usable servers may have changed (an agent fell silent or came
   * back, a reload re-applied the live state): the daemon rewrites the
   * fallback map if they did (fallback.ts FallbackWriter.update).
   */
  usableChanged?(): void;
  /**
   * This node's place in its cluster's front-node pair, sent in every
   * cluster_load ('single' without a pair). Absent: 'single'. A backup
   * ignores rtt_probe_request: the master probes, and its results reach
   * every DNS server over PUB (two nodes probing would double the echoes).
   */
  haRole?(): HaRole;
}

export class FrontControl {
  readonly node: ControlNode;
  readonly estimator: ServerLoadEstimator | undefined;
  readonly clients: ClientRateTable;
  readonly clusters: LeastLoadedClusters;
  readonly reporter: ClusterLoadReporter;
  lastPass: PassResult | undefined;
  #pub: Sender | undefined;
  readonly #src: ServicesSource;
  readonly #cfg: ControlConfig;
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #log: Logger;
  /** Set when probing runs (pinger open and a PUB to report on); #pinger with it. */
  #prober: RttProber | undefined;
  #pinger: MethodPinger | undefined;
  /** Configured probe methods that could not open their sockets (status). */
  #probeMethodsOff: string[] | undefined;
  #probeTimer: NodeJS.Timeout | undefined;
  /** Why probing is off, for status (undefined while it runs). */
  #probeOff: string | undefined;
  /** Probe requests received while probing is off. */
  #probeIgnored = 0;
  /** Probe requests ignored because this node is the backup of a pair (the master probes). */
  #probeNotMaster = 0;
  #pingerErrors = 0;
  #closed = false;

  private constructor(node: ControlNode, src: ServicesSource, cfg: ControlConfig, log: Logger) {
    const now = performance.now();
    this.node = node;
    this.#src = src;
    this.#cfg = cfg;
    this.#log = log;
    this.estimator = cfg.agents ? new ServerLoadEstimator({ ...cfg.estimate, loadSeconds: cfg.loadSeconds, downAfter: cfg.downAfterIntervals }, now) : undefined;
    this.clients = new ClientRateTable(cfg.requestRate.maxClients, cfg.requestRate.expireSeconds, now);
    this.clusters = new LeastLoadedClusters(src.config.cluster, cfg.clusterLoad.everySeconds, cfg.downAfterIntervals);
    this.reporter = new ClusterLoadReporter(cfg.clusterLoad.everySeconds, cfg.clusterLoad.changeFraction);
  }

  static async start(src: ServicesSource, cfg: ControlConfig, log: Logger): Promise<FrontControl> {
    // Our name on the control plane (each envelope's `from`): the two front nodes of a pair differ here, not in `cluster`.
    const node = await ControlNode.create(frontNodeName(src.config), cfg, log);
    const fc = new FrontControl(node, src, cfg, log);
    await fc.#bind();
    return fc;
  }

  async #bind(): Promise<void> {
    const cfg = this.#cfg;
    this.servicesChanged();
    if (cfg.agents) {
      await this.node.bindPull(cfg.agents.listen, 'agents', cfg.agents.allow, {
        load_report: (m) => {
          this.estimator?.receiveServerLoad(m.body, this.#src.services, performance.now());
          this.#src.usableChanged?.();
        },
        request_rate: (m) => {
          receiveRequestRate(this.clients, m.body, performance.now(), { ipv4: cfg.requestRate.ipv4Prefix, ipv6: cfg.requestRate.ipv6Prefix });
        },
      });
    }
    if (cfg.publish) this.#pub = await this.node.bindPub(cfg.publish.listen, 'subscribers', cfg.publish.allow);
    this.#startProber();
    for (const p of cfg.subscribe) {
      this.node.connectSub(p.endpoint, p.publicKey, {
        cluster_load: (m) => {
          this.clusters.receive(m.body, performance.now(), m.from);
          this.clusters.applyTo(this.#src.services, performance.now());
        },
        rtt_probe_request: (m) => {
          this.#probeRequest(m);
        },
      });
    }
    this.#timers.push(
      setInterval(() => {
        this.#tick();
      }, 1000),
      setInterval(() => {
        this.#pass();
      }, cfg.requestRate.passSeconds * 1000),
    );
    if (this.#prober) {
      this.#timers.push(
        setInterval(() => {
          this.#report();
        }, cfg.probe.reportSeconds * 1000),
      );
    }
    this.#log.info({ agents: cfg.agents?.listen, publish: cfg.publish?.listen, subscribe: cfg.subscribe.map((p) => p.endpoint), plaintext: cfg.plaintext, probe: this.#probeOff ?? 'on' }, 'control plane up');
  }

  /**
   * Opens the ICMP session once, at start: a front node that cannot probe
   * (not root, or nowhere to report) still steers traffic; the reason is
   * logged once here and kept for status.
   */
  #startProber(): void {
    const cfg = this.#cfg;
    if (cfg.subscribe.length === 0) {
      this.#probeOff = 'no control.subscribe peers (DNS sends probe requests)';
      return;
    }
    if (!this.#pub) {
      this.#probeOff = 'no control.publish socket to report results on';
      this.#log.warn('RTT probing off: control.publish is not configured, so results could not reach DNS');
      return;
    }
    const limited = new LimitedLog(this.#log);
    const onSocketError = (err: Error): void => {
      this.#pingerErrors++;
      limited.warn('pinger', { err }, 'RTT probe raw socket error');
    };
    // Each configured method's pinger; one that cannot open is left out (and said so), the others probe.
    const methods: ProbeMethod[] = [];
    const unavailable: string[] = [];
    for (const name of cfg.probe.methods) {
      try {
        const pinger = name === 'icmp' ? createNetPinger({ timeoutMs: cfg.probe.timeoutMs, onSocketError }) : createTcpPinger({ port: Number(name.slice(4)), timeoutMs: cfg.probe.timeoutMs, maxOutstanding: cfg.probe.tcpMaxOutstanding, onSocketError });
        methods.push({ name, pinger });
      } catch (err) {
        unavailable.push(`${name}: ${(err as Error).message}`);
        this.#log.error({ err, method: name }, 'RTT probe method off: cannot open its raw socket');
      }
    }
    if (methods.length === 0) {
      this.#probeOff = unavailable.join('; ');
      this.#log.error('RTT probing off: no probe method could open its socket; probe requests will be ignored (counted in status)');
      return;
    }
    if (unavailable.length > 0) this.#probeMethodsOff = unavailable;
    this.#pinger = new MethodPinger(methods, { memory: cfg.probe.methodMemory, retryCheaperMs: cfg.probe.retryCheaperSeconds * 1000, timeoutMs: cfg.probe.timeoutMs });
    for (const m of methods) if (m.pinger.ipv6Unavailable !== undefined) this.#log.warn({ method: m.name, reason: m.pinger.ipv6Unavailable }, 'RTT probing of IPv6 targets by this method off');
    // One probe may try every method in turn, each up to timeoutMs: the prober waits for all of them (and a little longer, so a method's own timeout always comes first).
    this.#prober = new RttProber(this.#src.config.cluster, { ...cfg.probe, timeoutMs: this.#pinger.worstCaseMs + 100, dedupMs: cfg.probe.dedupSeconds * 1000 }, this.#pinger, performance.now());
  }

  #probeRequest(m: Envelope<'rtt_probe_request'>): void {
    if (this.#src.haRole?.() === 'backup') {
      this.#probeNotMaster++;
      return;
    }
    if (!this.#prober) {
      this.#probeIgnored++;
      return;
    }
    this.#prober.receive(m.body, performance.now());
    this.#probeTick();
  }

  /**
   * Ticks the prober and arms one timer for its next due time; none while it
   * is idle. Invariant: at most one probe timer exists (each call replaces it).
   */
  #probeTick(): void {
    clearTimeout(this.#probeTimer);
    this.#probeTimer = undefined;
    const prober = this.#prober;
    if (!prober || this.#closed) return;
    const now = performance.now();
    prober.tick(now);
    const due = prober.nextDue(now);
    if (due === undefined) return;
    this.#probeTimer = setTimeout(() => {
      this.#probeTick();
    }, Math.max(PROBE_MIN_TICK_MS, Math.ceil(due - now)));
  }

  /** rtt_results for DNS, when any target finished since the last report. */
  #report(): void {
    const pub = this.#pub;
    if (!this.#prober || !pub) return;
    for (const body of this.#prober.drainResults()) for (const m of resultMessages(body)) pub.send('rtt_results', m);
  }

  /** The RTT prober while probing runs (metrics). */
  get prober(): RttProber | undefined {
    return this.#prober;
  }

  /**
   * Per probe method (configured order): probes sent, answered, timed out,
   * the targets remembered at it, and for TCP how the answers came
   * (SYN-ACK or RST) and the RSTs we sent (status and metrics).
   */
  probeMethods(): ProbeMethodStatus[] {
    const p = this.#pinger;
    if (!p) return [];
    const remembered = p.remembered();
    return p.methodList.map(({ name, pinger }) => {
      const c = p.counters.get(name);
      return {
        method: name,
        sent: c?.sent ?? 0,
        answered: c?.answered ?? 0,
        timeouts: c?.timeouts ?? 0,
        targets: remembered[name] ?? 0,
        ...(pinger instanceof TcpPinger ? { tcp: { ...pinger.counters, outstanding: pinger.outstanding } } : {}),
        ...(pinger.ipv6Unavailable !== undefined ? { ipv6Off: pinger.ipv6Unavailable } : {}),
      };
    });
  }

  /** The composite pinger's choices (metrics): fallbacks, cheaper retries, memory evictions. */
  get probeChoice(): { fellBack: number; cheaperRetries: number; evicted: number } | undefined {
    const p = this.#pinger;
    return p ? { fellBack: p.fellBack, cheaperRetries: p.cheaperRetries, evicted: p.evicted } : undefined;
  }

  /** Probe requests ignored because probing is off, and ICMP socket errors (metrics). */
  get probeCounts(): { ignoredRequests: number; pingerErrors: number; notMaster: number } {
    return { ignoredRequests: this.#probeIgnored, pingerErrors: this.#pingerErrors, notMaster: this.#probeNotMaster };
  }

  /** After start, a reload or an admin change: re-applies live state to the fresh service runtimes. */
  servicesChanged(): void {
    const now = performance.now();
    this.clusters.configure(this.#src.services);
    this.clusters.applyTo(this.#src.services, now);
    this.estimator?.applyTo(this.#src.services, now);
    this.#src.usableChanged?.();
  }

  /**
   * cluster_load now, whatever the period (the usable set changed: DNS
   * should not wait for the next report to learn it).
   */
  sendClusterLoadNow(now: number = performance.now()): void {
    const pub = this.#pub;
    if (!pub || this.#closed) return;
    const services = this.#src.services;
    this.clusters.applyTo(services, now);
    const f = clusterLoadOf(services);
    pub.send('cluster_load', this.#clusterLoadBody(f));
    this.reporter.sent(f, 'change', now);
  }

  /**
   * Our HA role changed (keepalived made us master or backup): the DNS
   * servers and the other clusters' front nodes take a pair's figures from
   * its master, so they hear the new role at once, not a report period later.
   */
  roleChanged(): void {
    this.roleChanges++;
    this.sendClusterLoadNow();
  }

  /** Role changes reported at once (roleChanged()). */
  roleChanges = 0;

  /** The role our reports carry now. */
  get role(): HaRole {
    return this.#src.haRole?.() ?? 'single';
  }

  #clusterLoadBody(f: ReturnType<typeof clusterLoadOf>): Body<'cluster_load'> {
    // IPv4 VIPs only: the message's `vips` are IPv4 (IPv6 VIPs in control messages: issue 23 part 2).
    const vips = [...new Set(this.#src.services.filter((s) => s.family === 4).map((s) => formatIPv4Address(s.vip)))];
    return { cluster: this.#src.config.cluster, vips, ...f, role: this.role };
  }

  #tick(): void {
    const now = performance.now();
    const services = this.#src.services;
    this.estimator?.tick(services, now);
    this.#src.usableChanged?.();
    this.clusters.applyTo(services, now);
    const f = clusterLoadOf(services);
    const why = this.reporter.due(f, now);
    if (why && this.#pub) {
      this.#pub.send('cluster_load', this.#clusterLoadBody(f));
      this.reporter.sent(f, why, now);
    }
  }

  #pass(): void {
    const pub = this.#pub;
    this.lastPass = sendRequestRate(this.clients, { cluster: this.#src.config.cluster, factor: this.#cfg.requestRate.factor, queueSize: this.#cfg.requestRate.queueSize }, performance.now(), (body) => {
      pub?.send('high_rate_clients', body);
    });
  }

  status(now: number = performance.now()): FrontControlStatus {
    const est = this.estimator;
    return {
      servers: est
        ? [...est.records.values()].map((r) => ({
            name: r.name,
            capacity: round(r.capacity),
            utilization: round(r.utilization),
            cpu: round(r.cpu),
            connections: r.connections,
            reportRate: round(r.reportRate),
            reports: r.reports,
            lastReportAgeSeconds: r.reports > 0 ? round((now - r.lastReport) / 1000) : null,
            down: est.isDown(r, now),
            health: r.health,
            healthReason: r.healthReason,
          }))
        : [],
      cluster: clusterLoadOf(this.#src.services),
      topClients: this.clients.top(10).map(([a, rate]) => ({ client: clientText(a, this.clients.clients.get(a)?.length), rate: round(rate) })),
      clients: { tracked: this.clients.clients.size, dropped: this.clients.dropped, expired: this.clients.expired },
      lastPass: this.lastPass,
      node: this.node.name,
      role: this.role,
      roleChanges: this.roleChanges,
      peerClusters: [...this.clusters.peersAt(now).values()].map((p) => ({
        cluster: p.cluster,
        available: round(p.available),
        capacity: round(p.capacity),
        ageSeconds: round((now - p.lastReport) / 1000),
        fresh: this.clusters.isFresh(p, now),
        source: p.source,
        nodes: p.nodes.map((r) => ({ node: r.node, role: r.role, ageSeconds: round((now - r.at) / 1000) })),
      })),
      peers: [...this.node.peers].map(([name, p]) => ({ name, lastType: p.lastType, messages: p.messages, ageSeconds: round((Date.now() - p.lastSeen) / 1000) })),
      counters: this.node.counters,
      zap: Object.fromEntries(this.node.zap.counters),
      probe: {
        enabled: this.#prober !== undefined,
        ...(this.#probeOff !== undefined ? { off: this.#probeOff } : {}),
        ...(this.#pinger?.ipv6Unavailable !== undefined ? { ipv6Off: this.#pinger.ipv6Unavailable } : {}),
        ...(this.#probeMethodsOff !== undefined ? { methodsOff: this.#probeMethodsOff } : {}),
        ...(this.#pinger ? { methods: this.probeMethods(), ...this.probeChoice, recentTargets: this.#pinger.recent(PROBE_STATUS_TARGETS, performance.now()) } : {}),
        ignoredRequests: this.#probeIgnored,
        pingerErrors: this.#pingerErrors,
        notMaster: this.#probeNotMaster,
        ...this.#prober?.status(),
      },
    };
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearInterval(t);
    clearTimeout(this.#probeTimer);
    this.#probeTimer = undefined;
    // The prober first, so the pinger's close-time answers (null) find nothing to record.
    this.#prober?.close();
    this.#pinger?.close();
    this.node.close();
  }
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** A rate-table client for status: the address, with its prefix length when it is a network (not one address). */
function clientText(network: string, length: number | undefined): string {
  const host = network.includes(':') ? 128 : 32;
  return length === undefined || length === host ? network : `${network}/${length}`;
}
