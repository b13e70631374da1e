/**
 * Every error Sluice raises on purpose is a SluiceError with a stable `code`
 * (callers and tests switch on the code, never on the message). One class per
 * condition, so `instanceof` and `code` always agree.
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

/** The native addon is not built (run the install step). */
export class NativeAddonMissingError extends SluiceError {
  readonly code = 'ERR_SLUICE_NATIVE_MISSING';
}

/** An operation on a queue that was already closed. */
export class QueueClosedError extends SluiceError {
  readonly code = 'ERR_SLUICE_QUEUE_CLOSED';
}

/** Errors reported by the NFQUEUE and NFLOG bindings carry the syscall errno. */
abstract class QueueSystemError extends SluiceError {
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

/** Maps an error thrown or reported by native/src/nfq.c to its class. */
export function fromNativeQueueError(err: unknown): SluiceError {
  if (!(err instanceof Error)) return new QueueSocketError(String(err));
  const e = err as Error & { code?: unknown; errno?: unknown; syscall?: unknown };
  const errno = typeof e.errno === 'number' ? e.errno : undefined;
  const syscall = typeof e.syscall === 'string' && e.syscall !== '' ? e.syscall : undefined;
  const opts = { cause: err };
  switch (e.code) {
    case 'ERR_NFQ_BUSY':
      return new QueueBusyError(e.message, errno, syscall, opts);
    case 'ERR_NFQ_PERMISSION':
      return new QueuePermissionError(e.message, errno, syscall, opts);
    case 'ERR_NFQ_UNSUPPORTED':
      return new QueueUnsupportedError(e.message, errno, syscall, opts);
    case 'ERR_NFQ_CONFIG':
      return new QueueConfigError(e.message, errno, syscall, opts);
    case 'ERR_NFQ_NATIVE_ASSERT':
      // The wrapper validates first; reaching this is a wrapper bug.
      return new InvalidArgumentError(e.message, opts);
    default:
      return new QueueSocketError(e.message, errno, syscall, opts);
  }
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

/** Maps an error thrown or reported by native/src/nflog.c to its class. */
export function fromNativeLogError(err: unknown): SluiceError {
  if (!(err instanceof Error)) return new LogGroupSocketError(String(err));
  const e = err as Error & { code?: unknown; errno?: unknown; syscall?: unknown };
  const errno = typeof e.errno === 'number' ? e.errno : undefined;
  const syscall = typeof e.syscall === 'string' && e.syscall !== '' ? e.syscall : undefined;
  const opts = { cause: err };
  switch (e.code) {
    case 'ERR_NFLOG_BUSY':
      return new LogGroupBusyError(e.message, errno, syscall, opts);
    case 'ERR_NFLOG_PERMISSION':
      return new LogGroupPermissionError(e.message, errno, syscall, opts);
    case 'ERR_NFLOG_CONFIG':
      return new LogGroupConfigError(e.message, errno, syscall, opts);
    case 'ERR_NFLOG_NATIVE_ASSERT':
      // The wrapper validates first; reaching this is a wrapper bug.
      return new InvalidArgumentError(e.message, opts);
    default:
      return new LogGroupSocketError(e.message, errno, syscall, opts);
  }
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

/** Something did not become ready in time (a process, a file, a listener). */
export class ReadinessTimeoutError extends SluiceError {
  readonly code = 'ERR_SLUICE_NOT_READY';
}
