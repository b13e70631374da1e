/**
 * Every error Sluice raises on purpose is a SluiceError with a stable `code`
 * (callers and tests switch on the code, never on the message). One class per
 * condition, so `instanceof` and `code` always agree. Every code starts with
 * ERR_SLUICE_ (test/unit/errors.test.ts lists them all).
 *
 * Where a class lives: in the one file of the concern that raises it, next to
 * the code that raises it (zone files: src/dns/zone/parse.ts; configuration:
 * src/config/load.ts; key files: src/control/keys.ts; the admin socket's
 * client; the dashboard's status sources; ...). This file holds the base
 * class and the errors of concerns that span folders: argument checks,
 * the addon's bindings (NFQUEUE and NFLOG share one mapping), external
 * commands, readiness waits.
 */
export abstract class SluiceError extends Error {
  abstract readonly code: string;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A caller passed a value outside the documented domain. */
export class InvalidArgumentError extends SluiceError {
  readonly code = 'ERR_SLUICE_INVALID_ARGUMENT';
}

/** An internal invariant does not hold: a bug in Sluice, never the input's fault (the message names the invariant). */
export class InvariantError extends SluiceError {
  readonly code = 'ERR_SLUICE_INVARIANT';
}

/** The native addon is not built (run the install step). */
export class NativeAddonMissingError extends SluiceError {
  readonly code = 'ERR_SLUICE_NATIVE_MISSING';
}

/** An operation on a queue that was already closed. */
export class QueueClosedError extends SluiceError {
  readonly code = 'ERR_SLUICE_QUEUE_CLOSED';
}

/** Errors reported by the addon's bindings (NFQUEUE, NFLOG, conntrack events, UDP batch sockets) carry the syscall errno. */
export abstract class QueueSystemError extends SluiceError {
  readonly errno: number | undefined;
  readonly syscall: string | undefined;
  constructor(message: string, errno?: number, syscall?: string, options?: ErrorOptions) {
    super(message, options);
    this.errno = errno;
    this.syscall = syscall;
  }
}

/** Another socket (another process) is bound to this queue number. */
export class QueueBusyError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_QUEUE_BUSY';
}
/** Missing CAP_NET_ADMIN (or the netlink socket was refused). */
export class QueuePermissionError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_QUEUE_PERMISSION';
}
/** The kernel does not support a requested flag (e.g. GSO on an old kernel). */
export class QueueUnsupportedError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_QUEUE_UNSUPPORTED';
}
/** Binding or configuring the queue failed for another reason. */
export class QueueConfigError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_QUEUE_CONFIG';
}
/** Netlink socket or poll failure, at open or while running. */
export class QueueSocketError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_QUEUE_SOCKET';
}

/** A QueueSystemError subclass, as the native error mapping constructs it. */
type SystemErrorClass = new (message: string, errno?: number, syscall?: string, options?: ErrorOptions) => QueueSystemError;

/**
 * Maps an error thrown or reported by one of the addon's bindings to its
 * class: `byCode` names the class per native code, `assertCode` is the
 * binding's argument assertion (the wrapper validates first, so reaching it
 * is a wrapper bug), and anything else is the binding's socket error.
 */
function fromNative(err: unknown, byCode: ReadonlyMap<string, SystemErrorClass>, assertCode: string, fallback: SystemErrorClass): SluiceError {
  if (!(err instanceof Error)) return new fallback(String(err));
  const e = err as Error & { code?: unknown; errno?: unknown; syscall?: unknown };
  const errno = typeof e.errno === 'number' ? e.errno : undefined;
  const syscall = typeof e.syscall === 'string' && e.syscall !== '' ? e.syscall : undefined;
  const opts = { cause: err };
  if (e.code === assertCode) return new InvalidArgumentError(e.message, opts);
  const cls = typeof e.code === 'string' ? byCode.get(e.code) : undefined;
  return new (cls ?? fallback)(e.message, errno, syscall, opts);
}

const QUEUE_ERRORS: ReadonlyMap<string, SystemErrorClass> = new Map<string, SystemErrorClass>([
  ['ERR_NFQ_BUSY', QueueBusyError],
  ['ERR_NFQ_PERMISSION', QueuePermissionError],
  ['ERR_NFQ_UNSUPPORTED', QueueUnsupportedError],
  ['ERR_NFQ_CONFIG', QueueConfigError],
]);

/** Maps an error thrown or reported by native/src/nfq.c to its class. */
export function fromNativeQueueError(err: unknown): SluiceError {
  return fromNative(err, QUEUE_ERRORS, 'ERR_NFQ_NATIVE_ASSERT', QueueSocketError);
}

/** Another socket (another process) is bound to this NFLOG group. */
export class LogGroupBusyError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFLOG_BUSY';
}
/** Missing CAP_NET_ADMIN for the NFLOG socket. */
export class LogGroupPermissionError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFLOG_PERMISSION';
}
/** Binding or configuring the NFLOG group failed for another reason. */
export class LogGroupConfigError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFLOG_CONFIG';
}
/** NFLOG netlink socket or poll failure, at open or while running. */
export class LogGroupSocketError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_NFLOG_SOCKET';
}

const LOG_ERRORS: ReadonlyMap<string, SystemErrorClass> = new Map<string, SystemErrorClass>([
  ['ERR_NFLOG_BUSY', LogGroupBusyError],
  ['ERR_NFLOG_PERMISSION', LogGroupPermissionError],
  ['ERR_NFLOG_CONFIG', LogGroupConfigError],
]);

/** Maps an error thrown or reported by native/src/nflog.c to its class. */
export function fromNativeLogError(err: unknown): SluiceError {
  return fromNative(err, LOG_ERRORS, 'ERR_NFLOG_NATIVE_ASSERT', LogGroupSocketError);
}

/** Missing CAP_NET_ADMIN for joining the conntrack event group. */
export class ConntrackEventsPermissionError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_CTEVENTS_PERMISSION';
}
/** The kernel has no conntrack netlink (nf_conntrack_netlink) to subscribe to. */
export class ConntrackEventsUnsupportedError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_CTEVENTS_UNSUPPORTED';
}
/** Conntrack event socket or poll failure, at open or while running. */
export class ConntrackEventsSocketError extends QueueSystemError {
  readonly code = 'ERR_SLUICE_CTEVENTS_SOCKET';
}

const CTEV_ERRORS: ReadonlyMap<string, SystemErrorClass> = new Map<string, SystemErrorClass>([
  ['ERR_CTEV_PERMISSION', ConntrackEventsPermissionError],
  ['ERR_CTEV_UNSUPPORTED', ConntrackEventsUnsupportedError],
]);

/** Maps an error thrown or reported by native/src/ctevents.c to its class. */
export function fromNativeCtEventsError(err: unknown): SluiceError {
  return fromNative(err, CTEV_ERRORS, 'ERR_CTEV_NATIVE_ASSERT', ConntrackEventsSocketError);
}

/**
 * A queue's or log group's onBatch threw something that is not an Error
 * (the thrown value is the cause); a thrown Error reaches onError as it is.
 */
export class BatchHandlerError extends SluiceError {
  readonly code = 'ERR_SLUICE_BATCH_HANDLER';
}

/** An external command (ip, iptables, nginx, ...) exited non-zero. */
export class CommandFailedError extends SluiceError {
  readonly code = 'ERR_SLUICE_COMMAND_FAILED';
  readonly command: string;
  readonly stderr: string;
  constructor(command: string, stderr: string, options?: ErrorOptions) {
    super(`command failed: ${command}${stderr ? `: ${stderr.trim()}` : ''}`, options);
    this.command = command;
    this.stderr = stderr;
  }
}

/**
 * An external command did not finish within its time limit and was killed
 * (run-off-loop.ts): a hung tool, or a machine too loaded for the limit,
 * not a refusal; callers that reword the failure tell the two apart by class.
 */
export class CommandTimeoutError extends SluiceError {
  readonly code = 'ERR_SLUICE_COMMAND_TIMEOUT';
  readonly command: string;
  readonly timeoutMs: number;
  constructor(command: string, timeoutMs: number, options?: ErrorOptions) {
    super(`command timed out: ${command}: killed after ${String(timeoutMs)} ms`, options);
    this.command = command;
    this.timeoutMs = timeoutMs;
  }
}

/** Something did not become ready in time (a process, a file, a listener). */
export class ReadinessTimeoutError extends SluiceError {
  readonly code = 'ERR_SLUICE_NOT_READY';
}
