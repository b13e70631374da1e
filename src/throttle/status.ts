/**
 * `sluice master`'s status: what MasterDaemon.status() builds, the admin
 * socket's `status` command sends as JSON, and `sluice status --master`
 * renders (src/cli/master-status.ts). One type for both ends, so a changed
 * field fails the type check in each.
 *
 * Invariant: every value survives JSON as it is (numbers are finite).
 */
import type { MasterCoreStatus } from './master.ts';

/** The daemon's own part, there from the start. */
export interface MasterDaemonStatus {
  readonly uptimeSeconds: number;
  readonly reloads: number;
  readonly reloadsRefused: number;
  readonly admin: { readonly handled: number; readonly rejected: number };
}

/**
 * The status of a running master: the master's part and the daemon's. The
 * admin socket opens after the master started, so what it answers is this;
 * only a status taken before start has the daemon's part alone.
 */
export type MasterStatus = MasterCoreStatus & MasterDaemonStatus;
