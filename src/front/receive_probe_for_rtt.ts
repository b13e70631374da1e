/**
 * Seed 000's receive_probe_for_rtt: "for each client IP address in list send
 * predefined number of echo requests to client periodically; clients reply
 * with echo reply for each echo request, RTT is measured and averaged;
 * average RTT along with number of successful probes are sent to DNS
 * periodically."
 *
 * The DNS publishes `rtt_probe_request {targets, count}`; this class turns
 * them into echo requests and back into `rtt_results` bodies. It is pure
 * logic on an injected clock (`now`, ms, monotonic) and an injected Pinger
 * (icmp_echo.ts), driven by FrontControl: receive() on each request, tick()
 * whenever nextDue() says, drainResults() every reportSeconds.
 *
 * A target goes through: queued -> sending (its echoes go out `spacingMs`
 * apart) -> awaiting (all sent, some unanswered) -> finished (its result is
 * queued for the report and the target forgotten, so a later request probes
 * it again, once `dedupMs` have passed).
 *
 * Several DNS servers (issue 21) each ask for the clients that query them,
 * and one client's resolver may query all of them: without more, each
 * would cost a probe. A finished result is therefore kept `dedupMs`
 * (probe.dedupSeconds) in a bounded cache; a target asked for again within
 * that time is not probed but answered from the cache: its result goes
 * into the next rtt_results report (counted as `cached`). Reports go out on
 * the PUB socket that every DNS server subscribes to, so the server that
 * asked second hears the answer too. A result still waiting for its report
 * is not queued twice.
 *
 * Bounds, so that a flood of probe requests never becomes a flood of ICMP
 * or of memory:
 *   - at most `maxTargets` targets queued, sending or awaiting; a target
 *     already among them is not added twice (deduped), the excess is dropped;
 *   - every echo request passes one token bucket of rate `maxPerSecond`
 *     and depth `burst`, whatever the number of targets: in any window of
 *     w ms at most burst + w x maxPerSecond / 1000 echoes leave. The bucket
 *     is kept as GCRA (a theoretical arrival time, no fractional tokens), so
 *     the time nextDue() names is exactly the time tick() may send at, with
 *     no float rounding that could leave a timer firing just too early;
 *   - at most `slots` targets send at once, as many as the rate can serve
 *     at their spacing, so targets finish in arrival order instead of all
 *     crawling along together;
 *   - at most `maxResults` finished results wait for the report;
 *   - at most `maxTargets` finished results are cached for dedupMs, the
 *     oldest evicted first.
 * Counters record every target and echo, so status adds up:
 *   requested = deduped + cached + dropped + (targets finished or still pending).
 */
import { byFamily, MAX_LIST, type Body } from '../control/messages.ts';
import { Buckets, RTT_SECONDS_BOUNDS } from '../metrics/buckets.ts';
import type { Pinger } from './icmp_echo.ts';

export interface ProbeOptions {
  /** Echo requests per target: the request's count, capped by this. */
  readonly count: number;
  /** Least time between two echo requests to one target. */
  readonly spacingMs: number;
  /** An echo unanswered for this long counts as lost. */
  readonly timeoutMs: number;
  /** Targets queued, sending or awaiting replies, at most. */
  readonly maxTargets: number;
  /** Echo requests per second over all targets, at most (token bucket rate). */
  readonly maxPerSecond: number;
  /** Token bucket depth (echoes that may go out back to back). Default: a tenth of a second's worth. */
  readonly burst?: number;
  /** Finished results waiting for the report, at most. Default maxTargets. */
  readonly maxResults?: number;
  /**
   * A target that finished less than this long ago (ms) is answered from
   * its cached result instead of probed again. 0 (the default): no cache.
   */
  readonly dedupMs?: number;
}

export interface ProbeCounters {
  /** rtt_probe_request messages received. */
  requests: number;
  /** Targets in them. */
  requested: number;
  /** Targets already queued or in progress when requested again. */
  deduped: number;
  /** Targets that had finished less than dedupMs ago: answered from the cache, not probed. */
  cached: number;
  /** Cached results evicted before dedupMs passed, because maxTargets were cached. */
  cacheEvicted: number;
  /** Targets refused because maxTargets were pending. */
  dropped: number;
  echoesSent: number;
  replies: number;
  /** Echoes without a reply: timed out or failed. */
  timeouts: number;
  /** Targets whose echoes were all answered or timed out. */
  finished: number;
  /** Results handed to the report (drainResults). */
  reported: number;
  /** Results lost because maxResults were waiting for the report. */
  resultsDropped: number;
}

export type ProbeResult = Body<'rtt_results'>['results'][number];

/**
 * A report body as the messages to send: IPv4 and IPv6 targets apart (IPv4
 * first), so the IPv4 results go at control-protocol version 1 and a DNS
 * server not yet speaking version 2 still takes them (src/control/messages.ts).
 * Targets are IPv4 or IPv6 text; the prober itself does not care which.
 */
export function resultMessages(body: Body<'rtt_results'>): Body<'rtt_results'>[] {
  const { v4, v6 } = byFamily(body.results, (r) => r.target);
  if (v4.length === 0 || v6.length === 0) return [body];
  return [
    { ...body, results: v4 },
    { ...body, results: v6 },
  ];
}

interface Target {
  readonly target: string;
  readonly count: number;
  sent: number;
  received: number;
  sumMs: number;
  /** Echoes sent and neither answered nor expired. */
  outstanding: number;
  /** Earliest time of this target's next echo request. */
  nextAt: number;
}

interface Echo {
  readonly t: Target;
  readonly deadline: number;
}

/** The schema's bound on rttMs (messages.ts). */
const MAX_RTT_MS = 60_000;

export class RttProber {
  readonly counters: ProbeCounters = { requests: 0, requested: 0, deduped: 0, cached: 0, cacheEvicted: 0, dropped: 0, echoesSent: 0, replies: 0, timeouts: 0, finished: 0, reported: 0, resultsDropped: 0 };
  /** Every echo reply's RTT, seconds (metrics: no per-target labels, so bounded whatever the targets). */
  readonly rtt = new Buckets(RTT_SECONDS_BOUNDS);
  readonly #cluster: string;
  readonly #opts: ProbeOptions;
  readonly #pinger: Pinger;
  readonly #burst: number;
  readonly #slots: number;
  readonly #maxResults: number;
  /** Every pending target (queued, sending, awaiting), by address: the dedupe set; size <= maxTargets. */
  readonly #targets = new Map<string, Target>();
  /** Targets waiting for a sending slot, FIFO from #head. */
  #queue: Target[] = [];
  #head = 0;
  /** Targets with echoes left to send; size <= #slots. */
  readonly #sending = new Set<Target>();
  /**
   * Unanswered echoes by id. Every echo has the same timeout and ids grow
   * with send time, so insertion order is deadline order: expiry stops at
   * the first entry not yet due.
   */
  readonly #echoes = new Map<number, Echo>();
  #nextEcho = 1;
  #results: ProbeResult[] = [];
  /** The targets of #results (a cached answer is not queued twice for one report). */
  #resultTargets = new Set<string>();
  /**
   * Finished results by target, oldest finish first (Map order: a target
   * finishing again is moved to the end); size <= maxTargets.
   */
  readonly #recent = new Map<string, { readonly result: ProbeResult; readonly at: number }>();
  readonly #dedupMs: number;
  readonly #clock: () => number;
  /** ms between echoes at maxPerSecond. */
  readonly #interval: number;
  /** GCRA: the next echo may leave once now >= #tat - #slack (slack = the burst beyond the first). */
  #tat: number;
  readonly #slack: number;
  #closed = false;

  /**
   * `clock` (ms, the clock `now` arguments are on) dates results that
   * finish in a pinger callback, which carries no time: it feeds only the
   * dedup cache.
   */
  constructor(cluster: string, opts: ProbeOptions, pinger: Pinger, now: number, clock: () => number = () => performance.now()) {
    this.#cluster = cluster;
    this.#dedupMs = opts.dedupMs ?? 0;
    this.#clock = clock;
    this.#opts = opts;
    this.#pinger = pinger;
    this.#burst = Math.max(1, opts.burst ?? Math.ceil(opts.maxPerSecond / 10));
    // Targets one echo per spacing each can keep busy at the global rate.
    this.#slots = Math.max(1, Math.ceil((opts.maxPerSecond * opts.spacingMs) / 1000));
    this.#maxResults = opts.maxResults ?? opts.maxTargets;
    this.#interval = 1000 / opts.maxPerSecond;
    this.#slack = (this.#burst - 1) * this.#interval;
    this.#tat = now; // a full bucket
  }

  /** Queues a request's targets (deduped, bounded). Sending starts at the next tick. */
  receive(body: Body<'rtt_probe_request'>, now: number): { queued: number; deduped: number; cached: number; dropped: number } {
    const r = { queued: 0, deduped: 0, cached: 0, dropped: 0 };
    if (this.#closed) return r;
    this.counters.requests++;
    const count = Math.max(1, Math.min(body.count, this.#opts.count));
    for (const target of body.targets) {
      this.counters.requested++;
      if (this.#targets.has(target)) {
        r.deduped++;
      } else if (this.#fromCache(target, now)) {
        r.cached++;
      } else if (this.#targets.size >= this.#opts.maxTargets) {
        r.dropped++;
      } else {
        const t: Target = { target, count, sent: 0, received: 0, sumMs: 0, outstanding: 0, nextAt: now };
        this.#targets.set(target, t);
        this.#queue.push(t);
        r.queued++;
      }
    }
    this.counters.deduped += r.deduped;
    this.counters.cached += r.cached;
    this.counters.dropped += r.dropped;
    return r;
  }

  /**
   * A recent result answers the request: queued for the next report unless
   * it already waits there. False when there is none within dedupMs (an
   * expired entry is removed).
   */
  #fromCache(target: string, now: number): boolean {
    if (this.#dedupMs <= 0) return false;
    const c = this.#recent.get(target);
    if (!c) return false;
    if (now - c.at >= this.#dedupMs) {
      this.#recent.delete(target);
      return false;
    }
    if (!this.#resultTargets.has(target)) this.#queueResult(c.result);
    return true;
  }

  /** Cached results (status). */
  get cachedResults(): number {
    return this.#recent.size;
  }

  /** Expires overdue echoes and sends the echo requests that are due and have tokens. */
  tick(now: number): void {
    if (this.#closed) return;
    for (const [id, e] of this.#echoes) {
      if (e.deadline > now) break;
      this.#answer(id, null);
    }
    for (;;) {
      this.#fillSlots(now);
      let sent = false;
      for (const t of this.#sending) {
        if (this.#sendAllowedAt() > now) break;
        if (t.nextAt > now) continue;
        this.#tat = Math.max(this.#tat, now) + this.#interval;
        sent = true;
        this.#send(t, now);
      }
      // A pass that sent nothing cannot be followed by one that does (nothing
      // became due); one that did may have freed slots for queued targets.
      if (!sent || this.#sendAllowedAt() > now) break;
    }
    this.#compactQueue();
  }

  /** When tick() next has work (absolute ms), or undefined when idle. */
  nextDue(now: number): number | undefined {
    if (this.#closed) return undefined;
    let due: number | undefined;
    for (const e of this.#echoes.values()) {
      due = e.deadline;
      break;
    }
    if (this.#sending.size > 0 || this.#head < this.#queue.length) {
      let sendAt = this.#sending.size < this.#slots && this.#head < this.#queue.length ? now : Infinity;
      for (const t of this.#sending) sendAt = Math.min(sendAt, t.nextAt);
      sendAt = Math.max(sendAt, this.#sendAllowedAt());
      due = due === undefined ? sendAt : Math.min(due, sendAt);
    }
    return due;
  }

  /** The finished results as rtt_results bodies (at most MAX_LIST results each); empties the queue. */
  drainResults(): Body<'rtt_results'>[] {
    const all = this.#results;
    this.#results = [];
    this.#resultTargets = new Set();
    const out: Body<'rtt_results'>[] = [];
    for (let i = 0; i < all.length; i += MAX_LIST) out.push({ cluster: this.#cluster, results: all.slice(i, i + MAX_LIST) });
    this.counters.reported += all.length;
    return out;
  }

  get pendingResults(): number {
    return this.#results.length;
  }

  /** Targets queued, sending or awaiting replies. */
  get pendingTargets(): number {
    return this.#targets.size;
  }

  status(): ProbeCounters & { queued: number; sending: number; awaiting: number; outstandingEchoes: number; pendingResults: number; cachedResults: number } {
    const queued = this.#queue.length - this.#head;
    return {
      ...this.counters,
      queued,
      sending: this.#sending.size,
      awaiting: this.#targets.size - queued - this.#sending.size,
      outstandingEchoes: this.#echoes.size,
      pendingResults: this.#results.length,
      cachedResults: this.#recent.size,
    };
  }

  /** Forgets all work; later replies and calls are ignored. The pinger belongs to the caller. */
  close(): void {
    this.#closed = true;
    this.#targets.clear();
    this.#queue = [];
    this.#head = 0;
    this.#sending.clear();
    this.#echoes.clear();
    this.#results = [];
    this.#resultTargets.clear();
    this.#recent.clear();
  }

  /** The earliest time the bucket lets the next echo go (may be in the past). */
  #sendAllowedAt(): number {
    return this.#tat - this.#slack;
  }

  #fillSlots(now: number): void {
    while (this.#sending.size < this.#slots && this.#head < this.#queue.length) {
      const t = this.#queue[this.#head++];
      if (!t) break;
      t.nextAt = Math.max(t.nextAt, now);
      this.#sending.add(t);
    }
  }

  #compactQueue(): void {
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
  }

  #send(t: Target, now: number): void {
    const id = this.#nextEcho++;
    t.sent++;
    t.outstanding++;
    t.nextAt = now + this.#opts.spacingMs;
    // Leave the sending set before pinging: the pinger may answer
    // synchronously, and then the target must already count as all sent.
    if (t.sent >= t.count) this.#sending.delete(t);
    this.#echoes.set(id, { t, deadline: now + this.#opts.timeoutMs });
    this.counters.echoesSent++;
    this.#pinger.ping(t.target, (rtt) => {
      this.#answer(id, rtt);
    });
  }

  /** An echo's outcome; the first of reply, pinger timeout and our deadline wins, the rest are ignored. */
  #answer(id: number, rttMs: number | null): void {
    const e = this.#echoes.get(id);
    if (!e) return;
    this.#echoes.delete(id);
    const t = e.t;
    t.outstanding--;
    if (rttMs !== null && Number.isFinite(rttMs)) {
      const ms = Math.min(Math.max(rttMs, 0), MAX_RTT_MS);
      t.received++;
      t.sumMs += ms;
      this.counters.replies++;
      this.rtt.observe(ms / 1000);
    } else {
      this.counters.timeouts++;
    }
    if (t.sent >= t.count && t.outstanding === 0) this.#finish(t);
  }

  #finish(t: Target): void {
    this.#targets.delete(t.target);
    this.counters.finished++;
    const rttMs = t.received > 0 ? Math.round((t.sumMs / t.received) * 1000) / 1000 : null;
    const result: ProbeResult = { target: t.target, sent: t.sent, received: t.received, rttMs };
    if (this.#dedupMs > 0) {
      this.#recent.delete(t.target);
      if (this.#recent.size >= this.#opts.maxTargets) {
        const oldest = this.#recent.entries().next();
        if (oldest.done !== true) {
          this.#recent.delete(oldest.value[0]);
          if (this.#clock() - oldest.value[1].at < this.#dedupMs) this.counters.cacheEvicted++;
        }
      }
      this.#recent.set(t.target, { result, at: this.#clock() });
    }
    this.#queueResult(result);
  }

  #queueResult(result: ProbeResult): void {
    if (this.#results.length >= this.#maxResults) {
      this.counters.resultsDropped++;
      return;
    }
    this.#results.push(result);
    this.#resultTargets.add(result.target);
  }
}
