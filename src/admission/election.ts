/**
 * Who coordinates the cluster limits (seed 002: "a single coordinator is
 * elected amongst the cluster members").
 *
 *  static  the configured member, always (single machine, demo): when it is
 *          down the members fall back to their shares.
 *  etcd    every member campaigns in an etcd election (the etcd3 client's
 *          lease-backed campaign: the leader's key lives with its lease, so
 *          a dead leader's key is gone within the configured leaseTtlSeconds
 *          (the lease is granted 1 s shorter, see the constructor) and the next
 *          campaigner in creation order is elected). Every member also
 *          observes the election, so it knows whom to talk to.
 *
 * Both report through one callback: (leader or undefined, whether it is
 * us). A failed campaign or observer (etcd unreachable, lease lost) is
 * logged and retried after a pause; meanwhile the member keeps serving on
 * its allocation (isolation rules apply).
 */
import { Etcd3, type Campaign, type ElectionObserver } from 'etcd3';
import type { Logger } from '../log/logger.ts';
import type { AdmissionClusterConfig, EtcdConfig } from './config.ts';

export type LeaderChange = (leader: string | undefined, self: boolean) => void;

export interface Election {
  readonly kind: 'static' | 'etcd';
  start(onChange: LeaderChange): void;
  stop(): Promise<void>;
  status(): { kind: string; leader: string | undefined; campaigning: boolean; errors: number; elected: number };
}

export class StaticElection implements Election {
  readonly kind = 'static';
  readonly #leader: string;
  readonly #self: string;

  constructor(leader: string, self: string) {
    this.#leader = leader;
    this.#self = self;
  }

  start(onChange: LeaderChange): void {
    onChange(this.#leader, this.#leader === this.#self);
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }

  status(): { kind: string; leader: string | undefined; campaigning: boolean; errors: number; elected: number } {
    return { kind: 'static', leader: this.#leader, campaigning: false, errors: 0, elected: this.#leader === this.#self ? 1 : 0 };
  }
}

const RETRY_MS = 1000;

export class EtcdElection implements Election {
  readonly kind = 'etcd';
  readonly #client: Etcd3;
  readonly #name: string;
  readonly #ttl: number;
  readonly #self: string;
  readonly #log: Logger;
  #campaign: Campaign | undefined;
  #observer: ElectionObserver | undefined;
  #leader: string | undefined;
  #isLeader = false;
  #stopped = false;
  #onChange: LeaderChange = () => {};
  #timers = new Set<NodeJS.Timeout>();
  /** Bumped by every observe: an older observe() that resolves late is cancelled, not used. */
  #observeGen = 0;
  errors = 0;
  elected = 0;

  constructor(cfg: EtcdConfig, self: string, log: Logger) {
    this.#client = new Etcd3({ hosts: [...cfg.endpoints], dialTimeout: 2000 });
    this.#name = cfg.election;
    // The configured TTL is the promised bound on replacing a dead coordinator. The lease
    // expires at most its TTL after the last keep-alive; etcd then revokes it within its
    // 500 ms revoke loop, and the next campaigner's watch sees the key go. Granting 1 s less
    // keeps all of that inside the bound (measured 3.18 s once with TTL 3 granted as 3).
    this.#ttl = cfg.leaseTtlSeconds - 1;
    this.#self = self;
    this.#log = log;
  }

  start(onChange: LeaderChange): void {
    this.#onChange = onChange;
    this.#runCampaign();
    void this.#runObserver();
    // The observer is the only way a member that is not elected learns the
    // coordinator, and it can go wrong silently: CI saw one member whose
    // observe() never named a leader for 45 s, and later one that kept
    // naming a member that was no longer the leader (no change event, no
    // error) while the two others agreed on the real one. So every lease
    // TTL a member that is not the leader asks etcd for the leader itself
    // (one read) and, when that differs from what it holds, takes etcd's
    // answer and observes again.
    const every = (this.#ttl + 1) * 1000;
    const check = setInterval(() => {
      void this.#verifyLeader(every);
    }, every);
    this.#timers.add(check);
  }

  async #verifyLeader(every: number): Promise<void> {
    if (this.#stopped || this.#isLeader) return;
    let current: string | undefined;
    try {
      current = await this.#client.election(this.#name, this.#ttl).leader();
    } catch {
      current = undefined; // etcd unreachable: judged like "no leader known" below
    }
    // Re-read after the await (stop() or our campaign may have settled meanwhile).
    if (this.#isStopped() || this.#leaderNow()) return;
    if (current !== undefined && current === this.#leader) return;
    this.errors++;
    this.#log.warn({ afterMs: every, held: this.#leader ?? null, etcd: current ?? null }, 'admission coordinator not confirmed by etcd: observing the election again');
    // Our own campaign decides about us (its result or its error), not this read.
    if (current !== undefined && current !== this.#self) this.#set(current, false);
    const o = this.#observer;
    this.#observer = undefined;
    void o?.cancel().catch(() => {});
    void this.#runObserver();
  }

  #later(fn: () => void): void {
    if (this.#stopped) return;
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, RETRY_MS);
    this.#timers.add(t);
  }

  #set(leader: string | undefined, self: boolean): void {
    if (leader === this.#leader && self === this.#isLeader) return;
    this.#leader = leader;
    this.#isLeader = self;
    this.#onChange(leader, self);
  }

  #runCampaign(): void {
    if (this.#stopped) return;
    const c = this.#client.election(this.#name, this.#ttl).campaign(this.#self);
    this.#campaign = c;
    c.on('elected', () => {
      if (this.#campaign !== c || this.#stopped) return;
      this.elected++;
      this.#log.info({ election: this.#name, ttl: this.#ttl }, 'elected admission coordinator');
      this.#set(this.#self, true);
    });
    c.on('error', (err: Error) => {
      if (this.#campaign !== c || this.#stopped) return;
      this.errors++;
      this.#log.warn({ err: err.message }, 'admission election campaign failed; campaigning again');
      this.#campaign = undefined;
      // Lost our lease: we are no longer the leader, whatever the observer says next.
      if (this.#isLeader) this.#set(undefined, false);
      this.#later(() => { this.#runCampaign(); });
    });
  }

  async #runObserver(): Promise<void> {
    if (this.#stopped) return;
    const gen = ++this.#observeGen;
    try {
      const o = await this.#client.election(this.#name, this.#ttl).observe();
      // stop() may have run while we awaited, or a newer observe replaced this one.
      if (this.#isStopped() || gen !== this.#observeGen) {
        await o.cancel();
        return;
      }
      this.#observer = o;
      const seen = (leader: string | undefined): void => {
        // While our campaign holds the leadership, it is the authority (its 'error' says when we
        // lose it): the observer was seen naming another member right after we were elected.
        // Our own key leading is likewise left to the campaign's 'elected'.
        if (gen !== this.#observeGen || this.#isLeader || leader === this.#self) return;
        this.#set(leader, false);
      };
      seen(o.leader());
      o.on('change', seen);
      o.on('error', (err: Error) => {
        if (gen !== this.#observeGen) return;
        this.errors++;
        this.#log.warn({ err: err.message }, 'admission election observer failed; observing again');
        this.#observer = undefined;
        void o.cancel().catch(() => {});
        this.#later(() => void this.#runObserver());
      });
    } catch (err) {
      if (gen !== this.#observeGen) return;
      this.errors++;
      this.#log.warn({ err: err instanceof Error ? err.message : String(err) }, 'cannot observe the admission election (etcd unreachable?); retrying');
      this.#later(() => void this.#runObserver());
    }
  }

  #leaderNow(): boolean {
    return this.#isLeader;
  }

  #isStopped(): boolean {
    return this.#stopped;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t); // clears the interval too
    this.#timers.clear();
    const c = this.#campaign;
    this.#campaign = undefined;
    await Promise.allSettled([c?.resign(), this.#observer?.cancel()]);
    this.#client.close();
  }

  status(): { kind: string; leader: string | undefined; campaigning: boolean; errors: number; elected: number } {
    return { kind: 'etcd', leader: this.#leader, campaigning: this.#campaign !== undefined, errors: this.errors, elected: this.elected };
  }
}

export function electionOf(cfg: AdmissionClusterConfig, log: Logger): Election {
  if ('static' in cfg.coordinator) return new StaticElection(cfg.coordinator.static, cfg.member);
  return new EtcdElection(cfg.coordinator.etcd, cfg.member, log);
}
