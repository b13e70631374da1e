/**
 * The import-graph check (.dependency-cruiser.js, run by `npm run lint`):
 * src/ passes it, and each of its rules fails on the fixture tree
 * test/fixtures/import-graph/src (a type-only circle, a base folder importing
 * a daemon, an infrastructure folder importing a daemon, a daemon importing
 * the CLI, an unresolvable import), so the check cannot pass by checking
 * nothing.
 */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONFIG = fileURLToPath(new URL('../../.dependency-cruiser.js', import.meta.url));
const DEPCRUISE = fileURLToPath(new URL('../../node_modules/.bin/depcruise', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/import-graph/', import.meta.url));

interface Violation {
  readonly rule: { readonly name: string };
  readonly from: string;
  readonly to: string;
}

/** depcruise on `src` of `cwd` with the project's config: its exit code (as lint sees it) and the violations it lists. */
function cruise(cwd: string): { status: number | null; violations: Violation[] } {
  const run = (outputType: string): SpawnSyncReturns<string> => {
    const r = spawnSync(process.execPath, [DEPCRUISE, '--config', CONFIG, '--output-type', outputType, 'src'], { cwd, encoding: 'utf8' });
    assert.equal(r.error, undefined);
    return r;
  };
  // The exit code counts errors with the text report (what `npm run lint` runs); the JSON report always exits 0.
  const status = run('err').status;
  const out = JSON.parse(run('json').stdout) as { summary: { violations: Violation[] } };
  return { status, violations: out.summary.violations };
}

describe('import graph', () => {
  it('src/ has no circle and no import against the layering', () => {
    const r = cruise(ROOT);
    assert.deepEqual(r.violations, []);
    assert.equal(r.status, 0);
  });

  it('every rule fails on the fixture that breaks it, and nothing else is flagged', () => {
    const r = cruise(FIXTURE);
    assert.notEqual(r.status, 0);
    const found = r.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
    assert.deepEqual(found, [
      'base-imports-base-only: src/metrics/set.ts -> src/front/engine.ts',
      'cli-is-the-top: src/front/command.ts -> src/cli/usage.ts',
      'infrastructure-imports-no-daemon: src/http/route.ts -> src/dns/zone.ts',
      'no-circular: src/packet/frame.ts -> src/packet/wire.ts',
      'not-to-unresolvable: src/dns/stale.ts -> ./gone.ts',
    ]);
  });
});
