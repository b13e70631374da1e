import type { MethodName, Selector } from './backend.ts';
import { ByRequests } from './byrequests.ts';
import { CapacityProportional } from './capacity.ts';
import { LeastConnections } from './leastconn.ts';
import { Maglev } from './maglev.ts';

/** A fresh selector of the named method (one per virtual service). */
export function createSelector(method: MethodName): Selector {
  switch (method) {
    case 'capacity':
      return new CapacityProportional();
    case 'byrequests':
      return new ByRequests();
    case 'leastconn':
      return new LeastConnections();
    case 'maglev':
      return new Maglev();
  }
}

export { METHOD_NAMES, eligible, type Backend, type MethodName, type Selector } from './backend.ts';
