/**
 * What one check found. `outcome` is a bounded label (metrics count checks
 * by it); `reason` is for people (logs, status) and names what was seen:
 * "connect refused", "timeout after 1 s", "HTTP 503", "body did not match".
 */
export const CHECK_OUTCOMES = ['ok', 'refused', 'timeout', 'status', 'body', 'error'] as const;
export type CheckOutcome = (typeof CHECK_OUTCOMES)[number];

export interface CheckResult {
  readonly outcome: CheckOutcome;
  readonly reason: string;
}

export const CHECK_OK: CheckResult = { outcome: 'ok', reason: 'passed' };

/** A socket error as a result: refused (RST to our SYN, ECONNRESET before an answer) or another error. */
export function socketFailure(err: NodeJS.ErrnoException): CheckResult {
  switch (err.code) {
    case 'ECONNREFUSED':
      return { outcome: 'refused', reason: 'connect refused' };
    case 'ECONNRESET':
      return { outcome: 'refused', reason: 'connection reset' };
    case 'EADDRNOTAVAIL':
      return { outcome: 'error', reason: 'source address not available (health.source)' };
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return { outcome: 'error', reason: `unreachable (${err.code})` };
    default:
      return { outcome: 'error', reason: err.code ?? err.message };
  }
}

/**
 * "timeout after 1 s (no connection)": the timeout as configured, and how
 * far the check got (a dead host or a filtered port never connects; a hung
 * server connects, as the kernel accepts for it, and never answers).
 */
export function timeoutReason(timeoutMs: number, connected: boolean): CheckResult {
  return { outcome: 'timeout', reason: `timeout after ${String(timeoutMs / 1000)} s (${connected ? 'connected, no answer' : 'no connection'})` };
}
