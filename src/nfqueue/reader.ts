/**
 * The part of the NFQUEUE and NFLOG wrappers (queue.ts, src/nflog/log.ts)
 * that is the same for both, as the addon's native/src/nl_reader.c is for
 * their bindings: the native handle's lifecycle (open with typed errors, ref,
 * idempotent close), the user's onBatch (an exception it throws is counted in
 * the binding's callback-error slot and goes to onError, never into C), and
 * the statistics array the C side updates, read by name.
 */
import { BatchHandlerError, InvalidArgumentError, type SluiceError } from '../errors/errors.ts';
import { checkBool, checkFunction } from '../util/validate.ts';
import type { NativeHandle, NativeNfq } from './native.ts';

/** What tells the two bindings apart here. */
export interface ReaderBinding<K extends string> {
  /** Length of the statistics array. */
  readonly statsWords: number;
  /** The counters stats() returns, by name: their slots, in output order. */
  readonly stats: Readonly<Record<K, number>>;
  /** The slot counting exceptions thrown by onBatch. */
  readonly callbackErrors: number;
  /** The binding's mapping of native errors to error classes (src/errors/errors.ts). */
  readonly mapError: (err: unknown) => SluiceError;
  readonly close: (native: NativeNfq, handle: NativeHandle) => void;
  readonly ref: (native: NativeNfq, handle: NativeHandle, on: boolean) => void;
}

/** Throws InvalidArgumentError unless the options of open() are an object. */
export function checkOptions(opts: unknown): void {
  if (typeof opts !== 'object') throw new InvalidArgumentError('options must be an object');
}

/** Throws InvalidArgumentError unless the options' onBatch and onError are functions. */
export function checkCallbacks(opts: { readonly onBatch: unknown; readonly onError: unknown }): void {
  checkFunction('onBatch', opts.onBatch);
  checkFunction('onError', opts.onError);
}

export class ReaderCore<K extends string> {
  /** The statistics array, shared with the C side (which counts without crossing into JS). */
  readonly counters: Float64Array;
  readonly #binding: ReaderBinding<K>;
  readonly #slots: readonly (readonly [K, number])[];
  readonly #native: NativeNfq;
  readonly #handle: NativeHandle;
  readonly #onError: (err: SluiceError | Error) => void;
  #closed = false;

  /**
   * Opens the handle with `open`, which is given the statistics array and
   * the error callback to pass to the binding; throws the binding's typed
   * error if that fails. `onError` was checked (checkCallbacks).
   */
  constructor(
    binding: ReaderBinding<K>,
    native: NativeNfq,
    onError: (err: SluiceError | Error) => void,
    open: (counters: Float64Array, onError: (err: Error) => void) => NativeHandle,
  ) {
    this.#binding = binding;
    this.#slots = Object.entries(binding.stats) as [K, number][];
    this.#native = native;
    this.#onError = onError;
    this.counters = new Float64Array(binding.statsWords);
    try {
      this.#handle = open(this.counters, (err) => {
        this.#onError(binding.mapError(err));
      });
    } catch (err) {
      throw binding.mapError(err);
    }
  }

  get handle(): NativeHandle {
    return this.#handle;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Runs the user's onBatch (through `call`); what it throws is counted and goes to onError. */
  run(call: () => void): void {
    try {
      call();
    } catch (err) {
      const slot = this.#binding.callbackErrors;
      this.counters[slot] = (this.counters[slot] ?? 0) + 1;
      this.#onError(err instanceof Error ? err : new BatchHandlerError(String(err), { cause: err }));
    }
  }

  /** Whether the open handle keeps the process alive; false (and nothing done) once closed. */
  ref(on: boolean): boolean {
    checkBool('on', on);
    if (this.#closed) return false;
    this.#binding.ref(this.#native, this.#handle, on);
    return true;
  }

  /** Snapshot of the native counters, by name. */
  stats(): Record<K, number> {
    const out = {} as Record<K, number>;
    for (const [name, slot] of this.#slots) out[name] = this.counters[slot] ?? 0;
    return out;
  }

  /** Closes the handle (the binding unbinds and stops polling). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#binding.close(this.#native, this.#handle);
  }
}
