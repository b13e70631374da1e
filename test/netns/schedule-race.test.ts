/**
 * The kernel-schedule writer against a rule install, with real nft in a
 * bare namespace: a write (an `nft` child) in flight while a reload
 * installs new rules may commit after the install, and then puts the
 * schedule of the old configuration into the new table. The writer must
 * follow such a write with a whole rewrite (kernel-schedule.ts, class
 * comment). The test holds the write back until the install is done, so
 * the bad order happens every time, and reads the kernel's map at each step.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema, type FrontConfig } from '../../src/front/config.ts';
import { KernelScheduleWriter, scheduleElements, scheduleLayout, type ScheduleTargets } from '../../src/front/kernel-schedule.ts';
import { configuredSpread, nftLoadAsync, scheduleRewriteScript, scheduleUpdateScript } from '../../src/front/nft.ts';
import { installRuleset, renderRuleset } from '../../src/front/ruleset.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import type { Logger } from '../../src/log/logger.ts';
import { nsRun, useNamespace } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const ns = useNamespace('skr');
const silent = { info: () => undefined, warn: () => undefined, debug: () => undefined, error: () => undefined } as unknown as Logger;

/** byrequests: the cycle's length (the chain's slot count) follows the eligible servers' weights. */
const configOf = (weights: Record<string, number>): FrontConfig =>
  parseConfig(
    frontConfigSchema,
    `cluster: c1\nuplinkAddress: 198.18.101.2\nservices:\n  - name: web\n    vip: 198.19.1.1\n    port: 80\n    method: byrequests\n    synPath: kernel\n    servers:\n${Object.entries(weights)
      .map(([s, w], i) => `      - { name: ${s}, address: 198.18.201.${String(i + 1)}, weight: ${String(w)} }`)
      .join('\n')}\n`,
    'test',
  );
const runtimes = (cfg: FrontConfig): ServiceRuntime[] => cfg.services.map((s, i) => new ServiceRuntime(i, s, cfg.overflow));

/** Map `schedule` as the kernel holds it: sorted "slot : mark" lines. */
function kernelMap(): string[] {
  const text = nsRun(ns(), 'nft', ['list', 'map', 'ip', 'sluice', 'schedule']);
  return [...text.matchAll(/(\d+) : (0x[0-9a-f]+)/g)].map((m) => `${m[1] ?? ''} : ${m[2] ?? ''}`).sort();
}

/** The slot count chain k_0 walks in the kernel (numgen inc mod N). */
function kernelSlots(): number {
  return Number(/numgen inc mod (\d+)/.exec(nsRun(ns(), 'nft', ['list', 'chain', 'ip', 'sluice', 'k_0']))?.[1] ?? -1);
}

/** What `targets` puts in the map, in the same form. */
function expected(cfg: FrontConfig, targets: ScheduleTargets): string[] {
  return scheduleElements(scheduleLayout(cfg), targets)
    .map((e) => e.replace(/0x0*([0-9a-f]+)/, (_m, h: string) => `0x${h}`))
    .sort();
}

interface Held {
  readonly script: string;
  readonly go: () => void;
  readonly done: Promise<void>;
}

describe('kernel schedule writer: a write that commits after an install', () => {
  it('is followed by a whole rewrite: the kernel ends with the new configuration\'s schedule, not the stale write\'s', async () => {
    let cfg = configOf({ a: 3, b: 2, c: 1 });
    const held: Held[] = [];
    const w = new KernelScheduleWriter({
      log: silent,
      config: () => cfg,
      script: (l, keys, els, slots) => scheduleUpdateScript(cfg, l, keys, els, slots),
      rewrite: (layout, targets, chains) => scheduleRewriteScript(cfg, layout, targets, chains),
      // Each write waits for the test's go, then runs the real nft in the namespace.
      write: (script) => {
        let go = (): void => undefined;
        const gate = new Promise<void>((r) => {
          go = r;
        });
        const done = gate.then(() => nftLoadAsync(script, 10_000, ns()));
        held.push({ script, go, done });
        return done;
      },
    });
    // Start: the table with the schedule of a, b, c (a cycle of 6).
    const s0 = runtimes(cfg);
    const t0 = w.render(cfg, s0);
    w.installed(t0, cfg);
    const r0 = renderRuleset(cfg, configuredSpread(cfg), undefined, t0);
    installRuleset(r0, ns());
    assert.deepEqual(kernelMap(), expected(cfg, t0));
    assert.equal(kernelSlots(), t0[0]?.length);

    // Server a leaves: the writer's write (a cycle of b and c, old numbering: the chain and the slots) is held in flight.
    s0[0]!.servers[0]!.usable = false;
    w.update(s0);
    await until(() => held.length === 1, 'the first write', 5000);
    assert.match(held[0]!.script, /^flush chain ip sluice k_0\n/, 'the first write changes the slot count');
    assert.equal(w.held(), undefined, 'a write in flight: what the kernel holds is not known');

    // A reload puts d between b and c (c is server 3 now), a still out. The install lands first.
    // Its cycle (b, d, c) is longer than the old one: every slot the held write deletes exists, so that write commits.
    const next = configOf({ a: 3, b: 2, d: 4, c: 1 });
    const s1 = runtimes(next);
    s1[0]!.servers[0]!.usable = false;
    const t1 = w.render(next, s1);
    w.installed(t1, next);
    const r1 = renderRuleset(next, configuredSpread(next), undefined, t1);
    installRuleset(r1, ns(), r0, undefined);
    cfg = next;
    const want = expected(next, t1);
    assert.deepEqual(kernelMap(), want, 'after the install');
    assert.equal(kernelSlots(), t1[0]?.length);

    // The held write commits now, after the install: the bad order.
    held[0]!.go();
    await held[0]!.done.catch(() => undefined);
    const afterStale = kernelMap();
    assert.notDeepEqual(afterStale, want, 'the stale write landed in the new table (else this test shows nothing)');
    assert.notEqual(kernelSlots(), t1[0]?.length, 'and its chain');

    // The writer follows it with a whole rewrite of the new configuration's schedule.
    await until(() => held.length === 2, 'the whole rewrite', 5000);
    // The stale write's chain put back first, then the map flushed and refilled (chains before elements: nft.ts scheduleRewriteScript).
    assert.match(held[1]!.script, /^flush chain ip sluice k_0\n/);
    assert.match(held[1]!.script, /\nflush map ip sluice schedule\n/);
    held[1]!.go();
    await held[1]!.done;
    await until(() => w.held() !== undefined, 'the rewrite settled', 5000);
    assert.deepEqual(kernelMap(), expected(next, w.current()));
    assert.deepEqual(w.current(), t1);
    assert.equal(kernelSlots(), t1[0]?.length, 'the chain walks the new cycle again');
    const st = w.status();
    assert.equal(st.rewrites, 1);
    assert.equal(st.writeFailures, 0, 'a write raced by an install is not a failure');
    assert.equal(st.writes, 2);
  });
});
