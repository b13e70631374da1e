import { InvalidArgumentError } from '../errors/errors.ts';

/** Throws InvalidArgumentError unless `value` is an integer in [min, max]. */
export function checkInt(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}], got ${String(value)}`);
  }
  return value;
}

/** Throws InvalidArgumentError unless `value` is a boolean. */
export function checkBool(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') {
    throw new InvalidArgumentError(`${name} must be a boolean, got ${typeof value}`);
  }
  return value;
}

/** Throws InvalidArgumentError unless `value` is a function. */
export function checkFunction(name: string, value: unknown): void {
  if (typeof value !== 'function') {
    throw new InvalidArgumentError(`${name} must be a function, got ${typeof value}`);
  }
}

export const U32_MAX = 0xffffffff;
