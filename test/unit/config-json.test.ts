import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseDocument } from 'yaml';
import { ConfigError, parseConfig, parseJsonConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';

const exampleText = readFileSync(new URL('../../deploy/examples/front-cluster1.yaml', import.meta.url), 'utf8');

describe('config: JSON read by JSON.parse (JSON is YAML)', () => {
  it('the example as JSON gives the same configuration as the YAML file, by the JSON path', () => {
    const data: unknown = parseDocument(exampleText).toJS();
    const json = JSON.stringify(data, null, 2);
    assert.deepEqual(parseJsonConfig(json), data);
    assert.deepEqual(parseConfig(frontConfigSchema, json, 'x.json'), parseConfig(frontConfigSchema, exampleText, 'x.yaml'));
  });

  it('colons and escaped quotes inside strings are not keys', () => {
    assert.deepEqual(parseJsonConfig('{"a": "x:\\"y:z", "b": ["c:d"]}'), { a: 'x:"y:z', b: ['c:d'] });
  });

  it('a repeated key falls back to the YAML parser, which refuses it with its line', () => {
    const text = '{\n  "cluster": "c1",\n  "cluster": "c2"\n}\n';
    assert.equal(parseJsonConfig(text), undefined);
    assert.throws(
      () => parseConfig(frontConfigSchema, text, 'dup.json'),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => /line 3/.test(p.path) && /unique/i.test(p.message)),
    );
  });

  it('YAML flow style that is not JSON, and YAML block style, take the YAML parser', () => {
    assert.equal(parseJsonConfig('{cluster: c1}'), undefined);
    assert.equal(parseJsonConfig('cluster: c1\n'), undefined);
    assert.equal(parseJsonConfig('{"a": 1,}'), undefined);
  });
});
