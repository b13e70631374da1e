/** The policies by name (the `policy:` of a steered name). */
import { capacityPolicy } from './capacity.ts';
import type { Policy } from './policy.ts';
import { rttPolicy } from './rtt.ts';

export const POLICY_NAMES = ['rtt', 'capacity'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export function makePolicy(name: PolicyName, opts: { capacityWeight: number }): Policy {
  switch (name) {
    case 'rtt':
      return rttPolicy(opts.capacityWeight);
    case 'capacity':
      return capacityPolicy;
  }
}
