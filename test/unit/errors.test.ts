/**
 * Every error class Sluice exports: a SluiceError with its own stable
 * ERR_SLUICE_* code, named after its class. The table is checked against
 * the source: an error class added to src/ without a row here, a class
 * extending Error directly (other than the base), or a plain `new Error(`
 * in src/ fails this test.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AccessLogFormatError } from '../../src/agent/access-log.ts';
import { ReuseportSteerError } from '../../src/dns/server.ts';
import { DnsWorkerStartError } from '../../src/dns/workers.ts';
import { UdpBatchSocketError } from '../../src/dns/udp_batch.ts';
import { LoopTurnsError } from '../../src/front/loop-turns.ts';
import { LoadSourceError } from '../../src/agent/agent.ts';
import { OperatorReasonError } from '../../src/agent/operator-state.ts';
import { AdminReplyError, AdminTimeoutError, AdminUnreachableError } from '../../src/admin/client.ts';
import { UsageError } from '../../src/cli/command.ts';
import { ConfigError } from '../../src/config/load.ts';
import { KeyFileError } from '../../src/control/keys.ts';
import { StatusRefusedError, StatusTimeoutError, StatusTooLargeError, StatusUnreachableError, StatusUnreadableError } from '../../src/dashboard/source.ts';
import { ZoneDataError, ZoneIncludeError, ZoneRangeError, ZoneSyntaxError, ZoneTooLargeError, ZoneUnsupportedError } from '../../src/dns/zone/parse.ts';
import {
  BatchHandlerError,
  CommandFailedError,
  CommandTimeoutError,
  ConntrackEventsPermissionError,
  ConntrackEventsSocketError,
  ConntrackEventsUnsupportedError,
  InvalidArgumentError,
  InvariantError,
  LogGroupBusyError,
  LogGroupConfigError,
  LogGroupPermissionError,
  LogGroupSocketError,
  NativeAddonMissingError,
  QueueBusyError,
  QueueClosedError,
  QueueConfigError,
  QueuePermissionError,
  QueueSocketError,
  QueueUnsupportedError,
  ReadinessTimeoutError,
  SluiceError,
} from '../../src/errors/errors.ts';
import { ConntrackReadError } from '../../src/front/kernel-flows.ts';
import { FlowExpiryError } from '../../src/front/flow-expiry.ts';
import { PingerUnavailableError } from '../../src/front/icmp_echo.ts';
import { HaMissingError } from '../../src/front/ha/render.ts';
import { NftCountersError, NftGenerationError, NftLayoutError, NftSetError } from '../../src/front/nft-netlink.ts';
import { PreflightError } from '../../src/front/preflight.ts';
import { FrontRunningError, RulesNotRemovedError } from '../../src/front/remove-rules.ts';
import { RulesReadBackError } from '../../src/front/rules-check.ts';
import { StateFileError } from '../../src/front/state-file.ts';
import { HttpListenError } from '../../src/http/ops_server.ts';
import { RedisNoReplyError } from '../../src/throttle/redis_batch.ts';

type AnyErrorClass = new (...args: never[]) => SluiceError;
const zone = ['z.zone', 3, 'what', 'fix'] as const;

// [class, code, constructor arguments]
const classes: [AnyErrorClass, string, readonly unknown[]][] = [
  [InvalidArgumentError, 'ERR_SLUICE_INVALID_ARGUMENT', ['m']],
  [InvariantError, 'ERR_SLUICE_INVARIANT', ['m']],
  [ReuseportSteerError, 'ERR_SLUICE_REUSEPORT_STEER', ['m']],
  [DnsWorkerStartError, 'ERR_SLUICE_DNS_WORKER_START', ['m']],
  [UdpBatchSocketError, 'ERR_SLUICE_UDP_BATCH', ['m', 98, 'bind']],
  [NftCountersError, 'ERR_SLUICE_NFT_COUNTERS', ['m', 1, 'sendto']],
  [NftGenerationError, 'ERR_SLUICE_NFT_GENERATION', ['m', 1, 'sendto']],
  [NftSetError, 'ERR_SLUICE_NFT_SET', ['m', 2, 'netlink']],
  [NftLayoutError, 'ERR_SLUICE_NFT_LAYOUT', ['m', 1, 'sendto']],
  [LoopTurnsError, 'ERR_SLUICE_LOOP_TURNS', ['m']],
  [NativeAddonMissingError, 'ERR_SLUICE_NATIVE_MISSING', ['m']],
  [QueueClosedError, 'ERR_SLUICE_QUEUE_CLOSED', ['m']],
  [FrontRunningError, 'ERR_SLUICE_FRONT_RUNNING', ['m']],
  [RulesNotRemovedError, 'ERR_SLUICE_RULES_NOT_REMOVED', ['m']],
  [QueueBusyError, 'ERR_SLUICE_QUEUE_BUSY', ['m']],
  [QueuePermissionError, 'ERR_SLUICE_QUEUE_PERMISSION', ['m']],
  [QueueUnsupportedError, 'ERR_SLUICE_QUEUE_UNSUPPORTED', ['m']],
  [QueueConfigError, 'ERR_SLUICE_QUEUE_CONFIG', ['m']],
  [QueueSocketError, 'ERR_SLUICE_QUEUE_SOCKET', ['m']],
  [LogGroupBusyError, 'ERR_SLUICE_NFLOG_BUSY', ['m']],
  [LogGroupPermissionError, 'ERR_SLUICE_NFLOG_PERMISSION', ['m']],
  [LogGroupConfigError, 'ERR_SLUICE_NFLOG_CONFIG', ['m']],
  [LogGroupSocketError, 'ERR_SLUICE_NFLOG_SOCKET', ['m']],
  [ConntrackEventsPermissionError, 'ERR_SLUICE_CTEVENTS_PERMISSION', ['m']],
  [ConntrackEventsUnsupportedError, 'ERR_SLUICE_CTEVENTS_UNSUPPORTED', ['m']],
  [ConntrackEventsSocketError, 'ERR_SLUICE_CTEVENTS_SOCKET', ['m']],
  [BatchHandlerError, 'ERR_SLUICE_BATCH_HANDLER', ['m']],
  [CommandFailedError, 'ERR_SLUICE_COMMAND_FAILED', ['ip link', 'stderr']],
  [CommandTimeoutError, 'ERR_SLUICE_COMMAND_TIMEOUT', ['nft list table ip sluice', 200]],
  [ReadinessTimeoutError, 'ERR_SLUICE_NOT_READY', ['m']],
  [StateFileError, 'ERR_SLUICE_STATE_FILE', ['/f', 'm']],
  [ConfigError, 'ERR_SLUICE_CONFIG', ['f.yaml', [{ path: 'a', message: 'b' }]]],
  [KeyFileError, 'ERR_SLUICE_KEY_FILE', ['m']],
  [ZoneSyntaxError, 'ERR_SLUICE_ZONE_SYNTAX', zone],
  [ZoneUnsupportedError, 'ERR_SLUICE_ZONE_UNSUPPORTED', zone],
  [ZoneRangeError, 'ERR_SLUICE_ZONE_RANGE', zone],
  [ZoneDataError, 'ERR_SLUICE_ZONE_DATA', zone],
  [ZoneTooLargeError, 'ERR_SLUICE_ZONE_TOO_LARGE', zone],
  [ZoneIncludeError, 'ERR_SLUICE_ZONE_INCLUDE', zone],
  [LoadSourceError, 'ERR_SLUICE_LOAD_SOURCE', ['m']],
  [OperatorReasonError, 'ERR_SLUICE_OPERATOR_REASON', ['m']],
  [AccessLogFormatError, 'ERR_SLUICE_ACCESS_LOG_FORMAT', ['m']],
  [HttpListenError, 'ERR_SLUICE_HTTP_LISTEN', ['m']],
  [ConntrackReadError, 'ERR_SLUICE_CONNTRACK_READ', ['m']],
  [FlowExpiryError, 'ERR_SLUICE_FLOW_EXPIRY', ['m']],
  [PreflightError, 'ERR_SLUICE_PREFLIGHT', [[{ check: 'ip_forward', ok: false, detail: 'd' }]]],
  [HaMissingError, 'ERR_SLUICE_HA_MISSING', ['m']],
  [RulesReadBackError, 'ERR_SLUICE_RULES_READ_BACK', ['m']],
  [PingerUnavailableError, 'ERR_SLUICE_PINGER_UNAVAILABLE', ['m']],
  [RedisNoReplyError, 'ERR_SLUICE_REDIS_NO_REPLY', ['m']],
  [UsageError, 'ERR_SLUICE_USAGE', ['m']],
  [AdminUnreachableError, 'ERR_SLUICE_ADMIN_UNREACHABLE', ['m']],
  [AdminTimeoutError, 'ERR_SLUICE_ADMIN_TIMEOUT', ['m']],
  [AdminReplyError, 'ERR_SLUICE_ADMIN_REPLY', ['m']],
  [StatusUnreachableError, 'ERR_SLUICE_STATUS_UNREACHABLE', ['m']],
  [StatusTimeoutError, 'ERR_SLUICE_STATUS_TIMEOUT', ['m']],
  [StatusRefusedError, 'ERR_SLUICE_STATUS_REFUSED', ['m']],
  [StatusUnreadableError, 'ERR_SLUICE_STATUS_UNREADABLE', ['m']],
  [StatusTooLargeError, 'ERR_SLUICE_STATUS_TOO_LARGE', ['m']],
];
/** Base classes: never thrown themselves, so no code of their own. */
const ABSTRACT = ['SluiceError', 'QueueSystemError', 'ZoneError'];

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

/** Every class in src/ that extends an *Error class: [file, name, base, exported, abstract]. */
function declaredErrorClasses(): { file: string; name: string; base: string; exported: boolean; abstract: boolean }[] {
  const out = [];
  for (const file of sources(SRC)) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^(export )?(abstract )?class (\w+) extends (\w*Error)\b/gm)) {
      out.push({ file: relative(SRC, file), name: m[3] ?? '', base: m[4] ?? '', exported: m[1] !== undefined, abstract: m[2] !== undefined });
    }
  }
  return out;
}

describe('error classes', () => {
  for (const [cls, code, args] of classes) {
    it(`${cls.name}: ${code}`, () => {
      const e = new cls(...(args as never[]));
      assert.ok(e instanceof SluiceError);
      assert.equal(e.code, code);
      assert.match(e.code, /^ERR_SLUICE_[A-Z0-9]+(_[A-Z0-9]+)*$/);
      assert.equal(e.name, cls.name);
    });
  }

  it('no two classes share a code or a name', () => {
    const codes = classes.map(([, code]) => code);
    assert.deepEqual(codes.filter((c, i) => codes.indexOf(c) !== i), []);
    const names = classes.map(([cls]) => cls.name);
    assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), []);
  });

  it('the table lists every error class declared in src/; only the base extends Error', () => {
    const declared = declaredErrorClasses();
    const concrete = declared.filter((d) => !d.abstract);
    assert.deepEqual(concrete.filter((d) => !d.exported).map((d) => `${d.file}: ${d.name}`), [], 'a concrete error class is exported (callers test for it)');
    assert.deepEqual(concrete.map((d) => d.name).sort(), classes.map(([cls]) => cls.name).sort());
    assert.deepEqual(declared.filter((d) => d.abstract).map((d) => d.name).sort(), [...ABSTRACT].sort());
    assert.deepEqual(declared.filter((d) => d.base === 'Error').map((d) => `${d.file}: ${d.name}`), ['errors/errors.ts: SluiceError']);
  });

  it('src/ raises no plain Error (nor another built-in error class)', () => {
    const plain = sources(SRC).flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .flatMap((line, i) => (/\bnew (Error|TypeError|RangeError|SyntaxError)\(/.test(line) ? [`${relative(SRC, file)}:${i + 1}: ${line.trim()}`] : [])),
    );
    assert.deepEqual(plain, []);
  });
});
