/**
 * What the daemon reads of nf_tables over netlink through the addon
 * (native/src/nft_netlink.c) instead of from the nft command.
 *
 * The named counters of our nft table (guard, fallback_flows,
 * stray_replies), read over netlink by the addon (native/src/nft_netlink.c)
 * instead of `nft list counters table ...`: nft 1.0.6 fetches every element
 * of every set of the table before it prints, so with 1,000 services
 * (a 256k-element fallback map) that listing took 5-7 s, and the daemon's
 * start made one per family before its install (measured in a scratch
 * namespace: 6.2 s against 0.1 ms for the netlink dump).
 *
 * The result is rendered in nft's own text form (`counter NAME { packets P
 * bytes B }`), which vip-guard.ts and table-counters.ts already read from
 * the rule check's table dumps: one parser for both sources.
 *
 * The ruleset generation: the kernel raises it at every committed
 * nf_tables transaction in the namespace (nft's, and those of
 * iptables-nft); the rule check (rules-health.ts) skips its read-back while
 * it stays where the last intact check left it.
 */
import { QueueSystemError } from '../errors/errors.ts';
import { loadNative } from '../nfqueue/native.ts';
import { NFT_TABLE, type NftFamily } from './nft.ts';

/** The kernel refused or broke off the counter dump (errno and syscall from the addon). */
export class NftCountersError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFT_COUNTERS';
}

/** The kernel would not tell the ruleset generation (errno and syscall from the addon). */
export class NftGenerationError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFT_GENERATION';
}

const NFPROTO = { ip: 2, ip6: 10 } as const;

function native<T>(call: () => T, wrap: (message: string, errno: number | undefined, syscall: string | undefined, cause: unknown) => Error): T {
  try {
    return call();
  } catch (err) {
    const e = err as { message?: string; errno?: number; syscall?: string };
    throw wrap(e.message ?? String(err), e.errno, e.syscall, err);
  }
}

/** The namespace's nf_tables ruleset generation (a uint32 that wraps). */
export function rulesetGeneration(): number {
  return native(() => loadNative().nftGeneration(), (m, errno, syscall, cause) => new NftGenerationError(m, errno, syscall, { cause }));
}

/** Counters as nft prints them, for `fam`'s table of ours; undefined when the table is absent (or has no counter). */
export function readCounters(fam: NftFamily): string | undefined {
  const rows = native(() => loadNative().nftCounters(NFPROTO[fam], NFT_TABLE), (m, errno, syscall, cause) => new NftCountersError(m, errno, syscall, { cause }));
  if (rows.length === 0) return undefined;
  return rows.map(([name, packets, bytes]) => `counter ${name} { packets ${String(packets)} bytes ${String(bytes)} }`).join('\n') + '\n';
}
