/**
 * The DNS server's control-plane side (seed 000, DNS end):
 *   subscribes to every front node's PUB:
 *     cluster_load       -> cluster table (load, free capacity, up/down)
 *     high_rate_clients  -> high-rate table
 *     rtt_results        -> RTT table (cluster named by the report)
 *   binds a PUB the front nodes subscribe to:
 *     rtt_probe_request  <- probe scheduler, every probe.intervalSeconds
 * Every change bumps the steering epoch, so memoised decisions are
 * recomputed with the new state.
 */
import { ControlNode, type ControlCounters, type Sender } from '../control/node.ts';
import type { DomainCounters } from '../control/zap.ts';
import type { Logger } from '../log/logger.ts';
import type { ClusterTable } from './cluster_state.ts';
import type { DnsConfig } from './config.ts';
import type { HighRateTable } from './high_rate.ts';
import { byFamily } from '../control/messages.ts';
import type { ProbeScheduler } from './probe_scheduler.ts';
import type { RttTable } from './rtt_table.ts';

type ControlConfig = NonNullable<DnsConfig['control']>;

export interface DnsState {
  readonly clusters: ClusterTable;
  readonly rtt: RttTable;
  readonly highRate: HighRateTable;
  readonly probes: ProbeScheduler;
  changed(): void;
  /** Called with every state message applied (the primary forwards it to its workers, workers.ts). */
  applied?(type: 'cluster_load' | 'high_rate_clients' | 'rtt_results', body: unknown, from: string): void;
}

/** The `control` part of the DNS server's status (DnsStatus, status.ts): what DnsControl.status() returns. */
export interface DnsControlStatus {
  readonly probeRequestsSent: number;
  readonly unknownClusterResults: number;
  readonly peers: readonly { readonly name: string; readonly lastType: string; readonly messages: number; readonly ageSeconds: number }[];
  readonly counters: Readonly<ControlCounters>;
  /** ZAP handshakes by domain ("<name>/<socket>"). */
  readonly zap: Readonly<Record<string, DomainCounters>>;
}

export class DnsControl {
  readonly node: ControlNode;
  #pub: Sender | undefined;
  readonly #timers: NodeJS.Timeout[] = [];
  probeRequestsSent = 0;
  unknownClusterResults = 0;

  private constructor(node: ControlNode) {
    this.node = node;
  }

  static async start(name: string, cfg: ControlConfig, probe: DnsConfig['probe'], state: DnsState, log: Logger): Promise<DnsControl> {
    const node = await ControlNode.create(name, cfg, log);
    const dc = new DnsControl(node);
    if (cfg.publish) dc.#pub = await node.bindPub(cfg.publish.listen, 'fronts', cfg.publish.allow);
    for (const p of cfg.subscribe) {
      node.connectSub(p.endpoint, p.publicKey, {
        cluster_load: (m) => {
          if (state.clusters.receive(m.body, performance.now(), m.from)) state.changed();
          state.applied?.('cluster_load', m.body, m.from);
        },
        high_rate_clients: (m) => {
          state.highRate.receive(m.body, performance.now());
          state.changed();
          state.applied?.('high_rate_clients', m.body, m.from);
        },
        rtt_results: (m) => {
          const c = state.clusters.byName(m.body.cluster);
          if (!c) {
            dc.unknownClusterResults++;
            return;
          }
          state.rtt.receive(c.index, m.body, performance.now());
          state.changed();
          state.applied?.('rtt_results', m.body, m.from);
        },
      });
    }
    dc.#timers.push(
      setInterval(() => {
        const due = state.probes.flush(performance.now());
        if (due.length > 0 && dc.#pub) {
          // One message per family: an IPv4-only request is control-protocol
          // version 1, so front nodes not yet upgraded still probe IPv4 targets.
          const { v4, v6 } = byFamily(due, ([t]) => t);
          for (const part of [v4, v6]) {
            if (part.length === 0) continue;
            dc.#pub.send('rtt_probe_request', { targets: part.map(([t]) => t), count: probe.count });
            dc.probeRequestsSent++;
          }
        }
      }, probe.intervalSeconds * 1000),
    );
    log.info({ publish: cfg.publish?.listen, subscribe: cfg.subscribe.map((p) => p.endpoint), plaintext: cfg.plaintext }, 'control plane up');
    return dc;
  }

  status(): DnsControlStatus {
    return {
      probeRequestsSent: this.probeRequestsSent,
      unknownClusterResults: this.unknownClusterResults,
      peers: [...this.node.peers].map(([name, p]) => ({ name, lastType: p.lastType, messages: p.messages, ageSeconds: Math.round((Date.now() - p.lastSeen) / 100) / 10 })),
      counters: this.node.counters,
      zap: Object.fromEntries(this.node.zap.counters),
    };
  }

  close(): void {
    for (const t of this.#timers) clearInterval(t);
    this.node.close();
  }
}
