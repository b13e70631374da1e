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
 * A set's element counters (syn_seen: each SYN-cookie-capable service's
 * SYNs, read every second by synproxy-auto.ts), rendered as `nft list set`
 * prints them, for parseSynSeen.
 *
 * The ruleset generation: the kernel raises it at every committed
 * nf_tables transaction in the namespace (nft's, and those of
 * iptables-nft); the rule check (rules-health.ts) skips its read-back while
 * it stays where the last intact check left it.
 *
 * Each read has a synchronous form (the start, tools) and an asynchronous
 * one (`...Async`: the running daemon's periodic reads). The kernel answers
 * these requests only after a running nf_tables transaction commits; behind
 * a 256k-element fill that took ~405 ms (measured), which on the event
 * loop would stall SYN decisions: the asynchronous forms wait on libuv's
 * threadpool instead.
 */
import { QueueSystemError } from '../errors/errors.ts';
import { loadNative } from '../nfqueue/native.ts';
import { formatIPv4Address } from '../packet/address.ts';
import { formatIPv6Groups } from '../packet/address6.ts';
import { NFT_TABLE, type LayoutItem, type NftFamily } from './nft.ts';

/** The kernel refused or broke off the counter dump (errno and syscall from the addon). */
export class NftCountersError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFT_COUNTERS';
}

/** The kernel refused or broke off a set's element dump, or its keys are not `address . port` (errno and syscall from the addon). */
export class NftSetError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFT_SET';
}

/** The kernel refused or broke off the read of our table or its chains (errno and syscall from the addon). */
export class NftLayoutError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFT_LAYOUT';
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

/** The asynchronous form of a read: the same errors, as a rejection. */
async function nativeAsync<T>(call: () => Promise<T>, wrap: (message: string, errno: number | undefined, syscall: string | undefined, cause: unknown) => Error): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const e = err as { message?: string; errno?: number; syscall?: string };
    throw wrap(e.message ?? String(err), e.errno, e.syscall, err);
  }
}

/** The generation off the event loop (see the module comment). */
export function rulesetGenerationAsync(): Promise<number> {
  return nativeAsync(() => loadNative().nftGenerationAsync(), (m, errno, syscall, cause) => new NftGenerationError(m, errno, syscall, { cause }));
}

const countersText = (rows: readonly [string, number, number][]): string | undefined =>
  rows.length === 0 ? undefined : rows.map(([name, packets, bytes]) => `counter ${name} { packets ${String(packets)} bytes ${String(bytes)} }`).join('\n') + '\n';

/** Counters as nft prints them, for `fam`'s table of ours; undefined when the table is absent (or has no counter). */
export function readCounters(fam: NftFamily): string | undefined {
  return countersText(native(() => loadNative().nftCounters(NFPROTO[fam], NFT_TABLE), (m, errno, syscall, cause) => new NftCountersError(m, errno, syscall, { cause })));
}

/** readCounters off the event loop. */
export async function readCountersAsync(fam: NftFamily): Promise<string | undefined> {
  return countersText(await nativeAsync(() => loadNative().nftCountersAsync(NFPROTO[fam], NFT_TABLE), (m, errno, syscall, cause) => new NftCountersError(m, errno, syscall, { cause })));
}

/**
 * What the kernel holds of our `fam` table: its comment (which names the
 * structure of the rendering that wrote it: nft.ts keptScript) and its
 * chains by name, without a rule or an element. Empty when the table is
 * absent. Synchronous: the start reads it right before its install.
 */
export function readTableLayout(fam: NftFamily): LayoutItem[] {
  const rows = native(() => loadNative().nftLayout(NFPROTO[fam], NFT_TABLE), (m, errno, syscall, cause) => new NftLayoutError(m, errno, syscall, { cause }));
  return rows.map((r): LayoutItem => (r[0] === 'table' ? { kind: 'table', comment: r[1] } : { kind: 'chain', name: r[1], base: r[2] }));
}

/**
 * The elements of set `set` of our `fam` table, typed `address .
 * inet_service`, with their counters, as `nft list set` prints them
 * (`elements = { 198.19.1.1 . 80 counter packets 5 bytes 300, ... }`; an
 * IPv6 address in RFC 5952 text, as nft prints it). Throws NftSetError
 * when the set is absent or unreadable.
 */
export function readSetCounters(fam: NftFamily, set: string): string {
  const rows = native(() => loadNative().nftSetCounters(NFPROTO[fam], NFT_TABLE, set, keyLengthOf(fam)), (m, errno, syscall, cause) => new NftSetError(m, errno, syscall, { cause }));
  return setText(fam, set, rows);
}

/** readSetCounters off the event loop. */
export async function readSetCountersAsync(fam: NftFamily, set: string): Promise<string> {
  const rows = await nativeAsync(() => loadNative().nftSetCountersAsync(NFPROTO[fam], NFT_TABLE, set, keyLengthOf(fam)), (m, errno, syscall, cause) => new NftSetError(m, errno, syscall, { cause }));
  return setText(fam, set, rows);
}

// A concatenation's fields are padded to 4 bytes: address, then the port's 2 bytes and 2 of padding.
const keyLengthOf = (fam: NftFamily): number => (fam === 'ip' ? 4 : 16) + 4;

function setText(fam: NftFamily, set: string, rows: readonly [Buffer, number, number][]): string {
  const addrLen = fam === 'ip' ? 4 : 16;
  const els = rows.map(([key, packets, bytes]) => {
    const addr = fam === 'ip' ? formatIPv4Address(key.readUInt32BE(0)) : formatIPv6Groups(Array.from({ length: 8 }, (_, i) => key.readUInt16BE(2 * i)));
    return `${addr} . ${String(key.readUInt16BE(addrLen))} counter packets ${String(packets)} bytes ${String(bytes)}`;
  });
  return `table ${fam} ${NFT_TABLE} {\n\tset ${set} {\n\t\telements = { ${els.join(',\n\t\t\t     ')} }\n\t}\n}\n`;
}
