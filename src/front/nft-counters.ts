/**
 * The named counters of our nft table (guard, fallback_flows,
 * stray_replies), read over netlink by the addon (native/src/nft_counters.c)
 * instead of `nft list counters table ...`: nft 1.0.6 fetches every element
 * of every set of the table before it prints, so with 1,000 services
 * (a 256k-element fallback map) that listing took 5-7 s, and the daemon's
 * start made one per family before its install (measured in a scratch
 * namespace: 6.2 s against 0.1 ms for the netlink dump).
 *
 * The result is rendered in nft's own text form (`counter NAME { packets P
 * bytes B }`), which vip-guard.ts and table-counters.ts already read from
 * the rule check's table dumps: one parser for both sources.
 */
import { QueueSystemError } from '../errors/errors.ts';
import { loadNative } from '../nfqueue/native.ts';
import { NFT_TABLE, type NftFamily } from './nft.ts';

/** The kernel refused or broke off the counter dump (errno and syscall from the addon). */
export class NftCountersError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFT_COUNTERS';
}

const NFPROTO = { ip: 2, ip6: 10 } as const;

/** Counters as nft prints them, for `fam`'s table of ours; undefined when the table is absent (or has no counter). */
export function readCounters(fam: NftFamily): string | undefined {
  let rows: [string, number, number][];
  try {
    rows = loadNative().nftCounters(NFPROTO[fam], NFT_TABLE);
  } catch (err) {
    const e = err as { message?: string; errno?: number; syscall?: string };
    throw new NftCountersError(e.message ?? String(err), e.errno, e.syscall, { cause: err });
  }
  if (rows.length === 0) return undefined;
  return rows.map(([name, packets, bytes]) => `counter ${name} { packets ${String(packets)} bytes ${String(bytes)} }`).join('\n') + '\n';
}
