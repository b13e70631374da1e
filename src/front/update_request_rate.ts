/**
 * Seed 000's update_request_rate: the front node's table of per-client
 * request counts, aggregated over every server of the cluster.
 *
 * Bounded: at most maxClients records; a report about a new client when the
 * table is full is counted in `dropped` (the table's existing clients, the
 * ones seen before, keep being counted). Expiring: a client with no requests
 * for expireSeconds is removed at the next pass (send_request_rate).
 *
 * Keyed by the client's prefix (receive_request_rate.ts): the canonical
 * text of its network address, IPv4 and IPv6 in one table (the texts
 * cannot collide: only IPv6 text has a colon).
 *
 * Counts accumulate in the current window; a pass (send_request_rate) turns
 * them into rates and starts a new window.
 */
export interface ClientRecord {
  /** Prefix length the client is counted at (32 or 128: one address). */
  readonly length: number;
  /** Requests in the current window. */
  requests: number;
  /** Rate (requests/s) computed at the last pass. */
  rate: number;
  /** Last time a report mentioned this client (performance.now() ms). */
  lastSeen: number;
}

export class ClientRateTable {
  readonly maxClients: number;
  readonly expireMs: number;
  readonly clients = new Map<string, ClientRecord>();
  /** Client mentions dropped because the table was full. */
  dropped = 0;
  expired = 0;
  /** Requests reported in the current window, over all clients. */
  windowRequests = 0;
  windowStart: number;

  constructor(maxClients: number, expireSeconds: number, now: number) {
    this.maxClients = maxClients;
    this.expireMs = expireSeconds * 1000;
    this.windowStart = now;
  }

  /** Seed 000 update_request_rate: creates or finds the client's record (network text, prefix length) and adds to it. */
  updateRequestRate(client: string, length: number, requests: number, now: number): void {
    let r = this.clients.get(client);
    if (!r) {
      if (this.clients.size >= this.maxClients) {
        this.dropped++;
        return;
      }
      r = { length, requests: 0, rate: 0, lastSeen: now };
      this.clients.set(client, r);
    }
    r.requests += requests;
    r.lastSeen = now;
    this.windowRequests += requests;
  }

  /**
   * Ends the window: each client's rate over it (requests / window seconds),
   * expired records removed; returns the rates' total and how many clients
   * made requests in it (`active`). The average client (send_request_rate's
   * threshold) is an active one: a client remembered for expireSeconds but
   * idle in this window has no rate to average, and counting it would sink
   * the threshold as the remembered set grows (ten steady clients beside a
   * thousand one-off visitors of the last ten minutes would all be reported).
   */
  closeWindow(now: number): { seconds: number; active: number; total: number } {
    const seconds = Math.max(0.001, (now - this.windowStart) / 1000);
    let total = 0;
    let active = 0;
    for (const [k, r] of this.clients) {
      if (now - r.lastSeen > this.expireMs) {
        this.clients.delete(k);
        this.expired++;
        continue;
      }
      r.rate = r.requests / seconds;
      total += r.rate;
      if (r.requests > 0) active++;
      r.requests = 0;
    }
    this.windowStart = now;
    this.windowRequests = 0;
    return { seconds, active, total };
  }

  /** The n clients with the highest rate at the last pass. */
  top(n: number): [string, number][] {
    return [...this.clients].map(([k, r]): [string, number] => [k, r.rate]).sort((a, b) => b[1] - a[1]).slice(0, n);
  }
}
