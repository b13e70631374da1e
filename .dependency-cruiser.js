// The import-graph check (`npm run depcruise`, part of `npm run lint`):
// the layering of src/ as the developers' guide states it. Type-only imports
// are edges too (tsPreCompilationDeps): a circle through `import type` is
// still a knot. test/unit/import-graph.test.ts shows each rule failing on a
// fixture, so the check cannot pass by checking nothing.
//
// Layers, bottom up:
//   base            config log errors util packet control metrics: import only base
//   infrastructure  http admin nfqueue nflog conntrack systemd (what every daemon runs on):
//                   import only base and infrastructure
//   daemons         everything else (front dns agent admission throttle shaping
//                   dashboard ...), a new folder included
//   cli             the top: no other folder imports it
const BASE = '(config|log|errors|util|packet|control|metrics)';
const INFRASTRUCTURE = '(http|admin|nfqueue|nflog|conntrack|systemd)';

export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import circle in src/ (type-only imports included).',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'base-imports-base-only',
      comment: 'A base folder imports a daemon or infrastructure folder: base folders know no daemon.',
      severity: 'error',
      from: { path: `^src/${BASE}/` },
      to: { path: '^src/', pathNot: `^src/${BASE}/` },
    },
    {
      name: 'infrastructure-imports-no-daemon',
      comment: 'An infrastructure folder imports a daemon folder.',
      severity: 'error',
      from: { path: `^src/${INFRASTRUCTURE}/` },
      to: { path: '^src/', pathNot: `^src/(${BASE.slice(1, -1)}|${INFRASTRUCTURE.slice(1, -1)})/` },
    },
    {
      name: 'cli-is-the-top',
      comment: 'Something outside src/cli/ imports the CLI.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import the check cannot resolve (it would see no edge there).',
      severity: 'error',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
  },
};
