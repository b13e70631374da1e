/** The policies by name (the `policy:` of a steered name). */
import { capacityPolicy } from './capacity.ts';
import { mappingPolicy, type MappingLookup } from './mapping.ts';
import type { Policy } from './policy.ts';
import { rttPolicy } from './rtt.ts';

export const POLICY_NAMES = ['rtt', 'capacity', 'mapping'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export function makePolicy(name: PolicyName, opts: { capacityWeight: number; mapping?: MappingLookup | undefined }): Policy {
  switch (name) {
    case 'rtt':
      return rttPolicy(opts.capacityWeight);
    case 'capacity':
      return capacityPolicy;
    case 'mapping':
      return mappingPolicy(opts.capacityWeight, opts.mapping);
  }
}
