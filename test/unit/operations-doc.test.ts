import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { renderRules } from '../../src/front/rules.ts';

const DOC = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');

// The configuration docs/operations.md describes in words above its listing.
const CONFIG = `
cluster: c1
uplinkAddress: 198.18.101.2
queue: 0
failMode: bypass
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    servers:
      - { name: s1a, address: 198.18.201.11, capacity: 100 }
      - { name: s1b, address: 198.18.201.12, capacity: 200 }
overflow:
  - { cluster: c2, vip: 198.19.2.1 }
`;

describe('docs/operations.md', () => {
  it('lists the rules the front node renders for its example configuration', () => {
    const listing = /```\n(\*mangle\n[\s\S]*?COMMIT\n\*nat\n[\s\S]*?COMMIT\n)```/.exec(DOC)?.[1];
    assert.ok(listing !== undefined, 'the iptables-restore listing is in docs/operations.md');
    assert.equal(listing, renderRules(parseConfig(frontConfigSchema, CONFIG, 'operations.md')).restore, 'update the listing in docs/operations.md from renderRules');
  });
});
