/**
 * A daemon's status as the dashboard receives it: JSON from another
 * process, which claims to be the daemon's status type (FrontStatus,
 * DnsStatus) but may be from an older or newer daemon, or broken. The
 * dashboard reads it by the daemon's own field names, so a renamed or
 * removed status field fails the type check where the dashboard reads it;
 * and it trusts no value: every field may be missing, every nested object
 * null, and every leaf is `unknown` until a reader below has checked it.
 *
 * Invariant: a malformed status becomes nulls and empty lists, never an
 * exception. Nested objects and lists are taken through obj() and arr()
 * (which turn anything else into undefined or []), leaves through num(),
 * str() and strs().
 */

/** `T` as received: T's field names, every field optional, nested objects possibly null, leaves unknown. */
export type Untrusted<T> = T extends readonly (infer E)[] ? readonly Field<E>[] : T extends object ? { readonly [K in keyof T]?: Field<T[K]> } : unknown;

/** A field of an untrusted object: absent (the optional key), null, or an untrusted value. */
type Field<T> = T extends null | undefined ? never : T extends object ? Untrusted<T> | null : unknown;

/** A received status, read as daemon status type T (any JSON object is one: see Untrusted). */
export function untrusted<T>(status: Readonly<Record<string, unknown>>): Untrusted<T> {
  return status as Untrusted<T>;
}

/** A JSON object (not an array), else undefined. */
export function record(x: unknown): Readonly<Record<string, unknown>> | undefined {
  return typeof x === 'object' && x !== null && !Array.isArray(x) ? (x as Record<string, unknown>) : undefined;
}

/** A nested object of an untrusted value, if it is one (not null, a list or a leaf). */
export function obj<T extends object>(x: T | null | undefined): T | undefined {
  return typeof x === 'object' && x !== null && !Array.isArray(x) ? x : undefined;
}

/** A nested list of an untrusted value, if it is one; else empty. */
export function arr<E>(x: readonly E[] | null | undefined): readonly E[] {
  // Array.isArray narrows to any[]: the elements are the E the type claims, read through the readers.
  return Array.isArray(x) ? (x as readonly E[]) : [];
}

export function num(x: unknown): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

export function str(x: unknown): string | null {
  return typeof x === 'string' ? x : null;
}

/** The strings of a list (anything else in it is left out). */
export function strs(x: unknown): string[] {
  return (Array.isArray(x) ? (x as unknown[]) : []).filter((v): v is string => typeof v === 'string');
}
