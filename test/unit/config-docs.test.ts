import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { CONFIG_DOCS_PATH, configRows, renderConfigDocs } from '../../scripts/gen-config-docs.ts';
import { agentConfigSchema } from '../../src/agent/config.ts';
import { dnsConfigSchema } from '../../src/dns/config.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { masterConfigSchema } from '../../src/throttle/config.ts';

const SCHEMAS = { front: frontConfigSchema, dns: dnsConfigSchema, agent: agentConfigSchema, master: masterConfigSchema };

describe('docs/configuration.md', () => {
  it('is what the schemas generate (else: run npm run docs:config)', () => {
    const onDisk = readFileSync(CONFIG_DOCS_PATH, 'utf8');
    const generated = renderConfigDocs();
    if (onDisk !== generated) {
      const a = onDisk.split('\n');
      const b = generated.split('\n');
      const i = a.findIndex((line, k) => line !== b[k]);
      assert.fail(`docs/configuration.md differs from the schemas at line ${(i < 0 ? a.length : i) + 1}; run npm run docs:config\n  file:      ${a[i] ?? '(end)'}\n  generated: ${b[i] ?? '(end)'}`);
    }
  });

  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`${name}: every key has a description in the schema`, () => {
      const missing = configRows(schema)
        .filter((r) => r.description === '')
        .map((r) => r.path);
      assert.deepEqual(missing, [], 'add .describe(...) to these keys in the schema');
    });
  }

  it('lists every key the schemas accept, with required keys and defaults as parsing shows them', () => {
    // The walk goes through JSON Schema; check it against zod's own view of
    // the top-level keys so a schema feature the walk misses cannot hide a key.
    for (const schema of Object.values(SCHEMAS)) {
      const shape = Object.keys(schemaShape(schema));
      const rows = configRows(schema);
      assert.deepEqual(
        rows.filter((r) => !r.path.includes('.') && !r.path.includes('[')).map((r) => r.path),
        shape,
      );
    }
    // Defaults shown are the ones parsing applies.
    const rows = new Map(configRows(frontConfigSchema).map((r) => [r.path, r]));
    const parsed = frontConfigSchema.parse({ cluster: 'c1', uplinkAddress: '198.18.101.2', services: [{ name: 'www', vip: '198.19.1.1', port: 80, method: 'byrequests', servers: [{ name: 'a', address: '198.18.201.11' }] }] });
    assert.equal(rows.get('queue')?.def, `\`${parsed.queue}\``);
    assert.equal(rows.get('failMode')?.def, `\`${parsed.failMode}\``);
    assert.equal(rows.get('connections.max')?.def, `\`${parsed.connections.max}\``);
    assert.equal(rows.get('services')?.required, true);
    assert.equal(rows.get('services[].servers[].port')?.required, false);
    assert.equal(rows.get('services[].servers[].address')?.type, 'IPv4 or IPv6 address');
    // A default hidden behind a transform on the input side is still shown.
    const dnsRows = new Map(configRows(dnsConfigSchema).map((r) => [r.path, r]));
    assert.equal(dnsRows.get('steering.names')?.def, '`[]`');
    // A discriminated union: its tag once, required, with every value; the
    // alternatives' keys below it, with the defaults parsing applies.
    const masterRows = configRows(masterConfigSchema);
    const m = new Map(masterRows.map((r) => [r.path, r]));
    assert.equal(masterRows.filter((r) => r.path === 'store.kind').length, 1);
    assert.equal(m.get('store.kind')?.required, true);
    assert.equal(m.get('store.kind')?.allowed, '`memory`, `redis`');
    const redis = masterConfigSchema.parse({ name: 'm', control: { plaintext: true }, accounting: { listen: 'tcp://127.0.0.1:1' }, publish: { listen: 'tcp://127.0.0.1:2' }, store: { kind: 'redis' }, domains: [{ name: 'www', requests: 1 }] }).store;
    assert.ok(redis.kind === 'redis');
    assert.equal(m.get('store.port')?.def, `\`${redis.port}\``);
    assert.equal(m.get('store.commandTimeoutMs')?.def, `\`${redis.commandTimeoutMs}\``);
  });
});

/** The object shape under a schema's refinements (superRefine keeps the object). */
function schemaShape(schema: z.ZodType): Record<string, unknown> {
  assert.ok(schema instanceof z.ZodObject, 'a daemon schema is an object');
  return schema.shape;
}
