/**
 * The kernel SYN schedule (src/front/kernel-schedule.ts): the slots the
 * kernel's counter walks must be the method's own choices, in order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { KernelScheduleWriter, MAX_CYCLE, SCHEDULE_SLOTS, configuredSchedule, fillSmooth, isKernelService, materialChange, scheduleElements, scheduleLayout, serviceSchedule, slotsOf } from '../../src/front/kernel-schedule.ts';
import { ByRequests } from '../../src/front/select/byrequests.ts';
import { ServiceRuntime } from '../../src/front/service.ts';
import { SCHEDULE_INLINE_MAX, elementDiffScript, heldSchedule, renderNft, configuredSpread, scheduleRewriteScript, scheduleUpdateScript } from '../../src/front/nft.ts';
import type { Logger } from '../../src/log/logger.ts';

const silent = { info: () => undefined, warn: () => undefined, debug: () => undefined, error: () => undefined } as unknown as Logger;

function config(services: string): ReturnType<typeof parseConfig<typeof frontConfigSchema>> {
  return parseConfig(frontConfigSchema, `cluster: c1\nuplinkAddress: 198.18.101.2\nservices:\n${services}`, 'test');
}

// Every service here opts into the kernel schedule (synPath: kernel; the default is queue) unless `extra` says otherwise.
const BYREQ = (weights: number[], extra = '    synPath: kernel\n'): string =>
  `  - name: web\n    vip: 198.19.1.1\n    port: 80\n    method: byrequests\n${extra}    servers:\n${weights.map((w, i) => `      - { name: s${String(i)}, address: 198.18.201.${String(i + 1)}, weight: ${String(w)} }`).join('\n')}\n`;

/** What the kernel does: slot (n mod slots) for the n-th first SYN. */
function walk(slots: Int32Array, n: number): number[] {
  return Array.from({ length: n }, (_, k) => slots[k % slots.length] ?? -1);
}

describe('kernel schedule: byrequests vectors (seed 003)', () => {
  for (const weights of [[70, 30], [1, 4, 1], [25, 25, 25, 25], [3, 2, 1], [1]]) {
    it(`weights ${weights.join('/')}: the kernel's walk is the selector's sequence, cycle after cycle`, () => {
      const cfg = config(BYREQ(weights));
      const svc = new ServiceRuntime(0, cfg.services[0]!, []);
      const slots = serviceSchedule(svc);
      assert.equal(slots.length, slotsOf(cfg.services[0]!));
      assert.equal(slots.length, weights.reduce((a, b) => a + b, 0));
      // The selector from its initial state, on identical servers.
      const ref = new ServiceRuntime(0, cfg.services[0]!, []);
      const sel = new ByRequests();
      const n = slots.length * 3;
      const expected = Array.from({ length: n }, () => sel.pick(ref.servers, 0));
      assert.deepEqual(walk(slots, n), expected);
      // The same from the configuration alone (the first install).
      assert.deepEqual(Array.from(configuredSchedule(cfg)[0] ?? []), Array.from(slots));
    });
  }

  it('70/30: 7 a and 3 b in every ten, the seed order', () => {
    const slots = new Int32Array(10);
    fillSmooth([70, 30], 10, slots);
    assert.deepEqual(Array.from(slots), [0, 1, 0, 0, 0, 1, 0, 0, 1, 0]);
  });

  it('weights beyond one exact cycle (non-integer, or a sum over MAX_CYCLE) get SCHEDULE_SLOTS slots', () => {
    assert.equal(slotsOf(config(BYREQ([1.5, 1])).services[0]!), SCHEDULE_SLOTS);
    assert.equal(slotsOf(config(BYREQ([MAX_CYCLE, 1])).services[0]!), SCHEDULE_SLOTS);
  });
});

// Two servers with 300 and 100 connections of room.
const CAP = `  - name: web\n    vip: 198.19.1.1\n    port: 80\n    synPath: kernel\n    servers:\n      - { name: a, address: 198.18.201.1, capacity: 300 }\n      - { name: b, address: 198.18.201.2, capacity: 100 }\n`;

describe('kernel schedule: capacity, eligibility, overflow', () => {
  it('slots in proportion to remaining capacity, following load', () => {
    const cfg = config(CAP);
    const svc = new ServiceRuntime(0, cfg.services[0]!, []);
    const count = (s: Int32Array, t: number): number => s.filter((x) => x === t).length;
    let s = serviceSchedule(svc);
    assert.equal(count(s, 0), 192);
    assert.equal(count(s, 1), 64);
    svc.servers[0]!.active = 200; // remaining 100 and 100
    s = serviceSchedule(svc);
    assert.equal(count(s, 0), 128);
    svc.servers[1]!.active = 100; // b full
    s = serviceSchedule(svc);
    assert.equal(count(s, 0), SCHEDULE_SLOTS);
  });

  it('a server within its headroom of capacity leaves the schedule; when only such servers have room, the schedule is empty (the daemon decides their last connections)', () => {
    const cfg = parseConfig(frontConfigSchema, `cluster: c1\nuplinkAddress: 198.18.101.2\noverflow:\n  - { cluster: c2, vip: 198.19.2.1, freeCapacity: 10 }\nservices:\n${CAP}`, 'x');
    const svc = new ServiceRuntime(0, cfg.services[0]!, cfg.overflow);
    svc.servers[1]!.active = 95; // 5 left, headroom 10
    let s = serviceSchedule(svc, () => 10);
    assert.ok(s.every((t) => t === 0), 'only a');
    svc.servers[0]!.active = 295;
    s = serviceSchedule(svc, () => 10);
    assert.ok(s.every((t) => t === -1), 'both within headroom: not the overflow, the queue');
    svc.servers[0]!.active = 300;
    svc.servers[1]!.active = 100;
    assert.ok(serviceSchedule(svc, () => 10).every((t) => t === 0x800), 'both full: the overflow cluster');
  });

  it('byrequests: a drained server shortens the cycle to the eligible servers\' (the chain is rewritten with it)', () => {
    const cfg = config(BYREQ([3, 2, 1]));
    const svc = new ServiceRuntime(0, cfg.services[0]!, []);
    assert.equal(serviceSchedule(svc).length, 6);
    svc.servers[0]!.usable = false;
    const s = serviceSchedule(svc);
    assert.deepEqual(Array.from(s), [1, 2, 1]);
  });

  it('failMode drop: nothing on the kernel schedule (it would outlive the daemon)', () => {
    const cfg = config(BYREQ([1, 1]));
    assert.equal(scheduleLayout({ ...cfg, failMode: 'drop' }).length, 0);
  });

  it('every server full or unusable: the overflow clusters by free capacity; none: empty slots (the queue decides)', () => {
    const cfg = parseConfig(frontConfigSchema, `cluster: c1\nuplinkAddress: 198.18.101.2\noverflow:\n  - { cluster: c2, vip: 198.19.2.1, freeCapacity: 10 }\nservices:\n${CAP}`, 'x');
    const svc = new ServiceRuntime(0, cfg.services[0]!, cfg.overflow);
    for (const b of svc.servers) b.usable = false;
    assert.ok(serviceSchedule(svc).every((t) => t === 0x800));
    svc.overflow[0]!.freeCapacity = 0;
    assert.ok(serviceSchedule(svc).every((t) => t === -1));
    const layout = scheduleLayout(cfg);
    assert.deepEqual(scheduleElements(layout, [serviceSchedule(svc)]), []);
  });

  it('only TCP services of capacity or byrequests without checkpoints, and not synPath queue, are on it', () => {
    const cfg = config(
      BYREQ([1, 1]) +
        BYREQ([1, 1], '    synPath: queue\n').replace('198.19.1.1', '198.19.1.2').replace('name: web', 'name: q') +
        BYREQ([1, 1]).replace('method: byrequests', 'method: leastconn').replace('198.19.1.1', '198.19.1.3').replace('name: web', 'name: lc'),
    );
    assert.deepEqual(cfg.services.map((s) => isKernelService(cfg, s)), [true, false, false]);
    assert.deepEqual(scheduleLayout(cfg).map((l) => [l.index, l.offset]), [[0, 0]]);
    const n = renderNft(cfg, configuredSpread(cfg));
    assert.ok(n.table.includes('198.19.1.1 . tcp . 80 : goto k_0'));
    assert.ok(!n.table.includes('goto k_1'));
    assert.ok(n.table.includes('meta mark set numgen inc mod 2 offset 0 map @schedule log group 0'));
  });
});

/** A writer of `cfg`'s schedule whose writes go to `write` (the real script renderers). */
function writerOf(cfg: ReturnType<typeof config>, write: (script: string) => Promise<void>, now?: () => number): KernelScheduleWriter {
  return new KernelScheduleWriter({
    log: silent,
    config: () => cfg,
    ...(now !== undefined ? { now } : {}),
    script: (l, keys, els, slots) => scheduleUpdateScript(cfg, l, keys, els, slots),
    rewrite: (layout, targets, chains) => scheduleRewriteScript(cfg, layout, targets, chains),
    write,
  });
}

describe('kernel schedule writer', () => {
  it('writes only material changes, one transaction of the changed service, and retries a failure', async () => {
    const cfg = config(`  - name: web\n    vip: 198.19.1.1\n    port: 80\n    synPath: kernel\n    servers:\n      - { name: a, address: 198.18.201.1, capacity: 1000 }\n      - { name: b, address: 198.18.201.2, capacity: 1000 }\n`);
    const svc = new ServiceRuntime(0, cfg.services[0]!, []);
    const scripts: string[] = [];
    let fail = false;
    const w = writerOf(cfg, (s) => {
      if (fail) return Promise.reject(new Error('nft: no'));
      scripts.push(s);
      return Promise.resolve();
    });
    w.installed(configuredSchedule(cfg));
    w.update([svc]);
    assert.equal(scripts.length, 0, 'the same state: nothing written');
    svc.servers[0]!.active = 10; // 1% of its capacity: not material
    w.update([svc]);
    await new Promise((r) => setImmediate(r));
    assert.equal(scripts.length, 0);
    svc.servers[0]!.usable = false; // leaves the schedule: material
    w.update([svc]);
    await new Promise((r) => setImmediate(r));
    assert.equal(scripts.length, 1);
    assert.match(scripts[0] ?? '', /^delete element ip sluice schedule \{ 0, 1, 2,/);
    assert.match(scripts[0] ?? '', /\nadd element ip sluice schedule \{ 0 : 0x51000002, 1 : 0x51000002,/);
    fail = true;
    svc.servers[0]!.usable = true;
    w.update([svc]);
    await new Promise((r) => setImmediate(r));
    assert.equal(w.status().writeFailures, 1);
    fail = false;
    w.update([svc]); // within a second of the failure: not retried yet
    await new Promise((r) => setImmediate(r));
    assert.equal(scripts.length, 1);
  });

  it('unchanged inputs are not recomputed, yet small steps add up to a material change; with every server full the overflow\'s free capacity is an input', async () => {
    const cfg = parseConfig(frontConfigSchema, `cluster: c1\nuplinkAddress: 198.18.101.2\noverflow:\n  - { cluster: c2, vip: 198.19.2.1, freeCapacity: 10 }\n  - { cluster: c3, vip: 198.19.3.1, freeCapacity: 10 }\nservices:\n${CAP}`, 'x');
    const svc = new ServiceRuntime(0, cfg.services[0]!, cfg.overflow);
    const scripts: string[] = [];
    const w = writerOf(cfg, (s) => (scripts.push(s), Promise.resolve()));
    w.installed(configuredSchedule(cfg));
    const tick = async (): Promise<void> => {
      w.update([svc]);
      await new Promise((r) => setImmediate(r));
    };
    // a: 300, b: 100 remaining. Each step of 4 connections on a moves < 1/32 of the slots;
    // compared with what was last written (not with the last step), the steps add up.
    let steps = 0;
    while (scripts.length === 0 && steps < 100) {
      svc.servers[0]!.active += 4;
      steps++;
      await tick();
    }
    assert.ok(steps > 1 && scripts.length === 1, `written once, after ${String(steps)} steps`);
    await tick();
    assert.equal(scripts.length, 1, 'nothing changed: nothing written');
    for (const b of svc.servers) b.usable = false;
    await tick();
    assert.equal(scripts.length, 2, 'every server unusable: the overflow clusters');
    assert.match(scripts[1] ?? '', /add element ip sluice schedule \{ 0 : 0x51000800, 1 : 0x51000801,/);
    svc.overflow[1]!.freeCapacity = 0; // only the inputs of the overflow changed
    await tick();
    assert.equal(scripts.length, 3);
    assert.ok(!(scripts[2] ?? '').includes('0x51000801'), 'c3 (no free capacity) left the slots');
  });

  it('a write refused by the table an install replaced under it is no failure: a whole rewrite follows (the netns side: schedule-race.test.ts)', async () => {
    const cfg = config(`  - name: web\n    vip: 198.19.1.1\n    port: 80\n    synPath: kernel\n    servers:\n      - { name: a, address: 198.18.201.1, capacity: 1000 }\n      - { name: b, address: 198.18.201.2, capacity: 1000 }\n`);
    const svc = new ServiceRuntime(0, cfg.services[0]!, []);
    const scripts: string[] = [];
    const pending: ((ok: boolean) => void)[] = [];
    const w = writerOf(cfg, (s) => {
      scripts.push(s);
      return new Promise<void>((resolve, reject) => {
        pending.push((ok) => {
          if (ok) resolve();
          else reject(new Error('nft: No such file or directory'));
        });
      });
    });
    const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
    w.installed(configuredSchedule(cfg));
    svc.servers[0]!.usable = false;
    w.update([svc]);
    assert.equal(scripts.length, 1);
    // A reload while it is in flight: held() is unknown from now until a whole rewrite lands.
    const targets = w.render(cfg, [svc]);
    w.installed(targets);
    assert.equal(w.held(), undefined);
    pending.shift()?.(false);
    await tick();
    assert.equal(w.status().writeFailures, 0, 'refused by the new table: expected, not a failure');
    assert.equal(scripts.length, 2, 'the whole rewrite followed at once');
    assert.match(scripts[1] ?? '', /^flush map ip sluice schedule\nadd element ip sluice schedule \{ 0 : 0x51000002, 1 : 0x51000002,/);
    // capacity: the slot count never changes, so the raced write rewrote no chain, and the rewrite none (the install's stand).
    assert.doesNotMatch(scripts[1] ?? '', /chain/);
    assert.equal(w.held(), undefined, 'still unknown while the rewrite is in flight');
    // The rewrite itself fails (nft broken): a real failure, and the next attempt is whole again.
    pending.shift()?.(false);
    await tick();
    assert.equal(w.status().writeFailures, 1);
    assert.equal(w.held(), undefined);
    w.update([svc]); // within a second of the failure: not retried yet
    assert.equal(scripts.length, 2);
    assert.equal(w.status().rewrites, 0);
  });

  it('headroom follows each server\'s sampled rate: a server deciding 1,000/s leaves the schedule 200 connections before its capacity', async () => {
    const cfg = config(`  - name: web\n    vip: 198.19.1.1\n    port: 80\n    synPath: kernel\n    servers:\n      - { name: a, address: 198.18.201.1, capacity: 1000 }\n      - { name: b, address: 198.18.201.2, capacity: 1000 }\n`);
    const svc = new ServiceRuntime(0, cfg.services[0]!, []);
    const scripts: string[] = [];
    let now = 0;
    const w = writerOf(cfg, (s) => (scripts.push(s), Promise.resolve()), () => now);
    w.installed(configuredSchedule(cfg));
    const a = svc.servers[0]!;
    // [ms, a's decided, a's active, a in the schedule, a's headroom]
    const rows: [number, number, number, boolean, number][] = [
      [0, 0, 750, true, 2], // first sample: rate 0, headroom HEADROOM_MIN; 250 left
      [100, 100, 850, false, 200], // 1,000/s: headroom 0.2 s of it; 150 left: the daemon decides a's last ones
      [2100, 100, 850, true, 2], // nothing decided for 2 s: the rate decays to 0
    ];
    for (const [t, decided, active, inSchedule, headroom] of rows) {
      now = t;
      a.decided = decided;
      a.active = active;
      w.update([svc]);
      await new Promise((r) => setImmediate(r));
      assert.equal(w.headroom(svc, 0), headroom, `at ${String(t)} ms`);
      assert.equal(Array.from(w.current()[0] ?? []).includes(0), inSchedule, `at ${String(t)} ms: a in the schedule`);
    }
  });

  it('material change: a target entering or leaving, or more than 1/32 of the slots moving', () => {
    const a = Int32Array.from({ length: 64 }, (_, k) => k % 2);
    const b = Int32Array.from(a);
    assert.equal(materialChange(a, b), false);
    b[0] = 1;
    b[2] = 1; // two slots moved: 64/32 = 2, not more
    assert.equal(materialChange(a, b), false);
    b[4] = 1;
    assert.equal(materialChange(a, b), true);
    assert.equal(materialChange(a, Int32Array.from({ length: 64 }, () => 0)), true);
    assert.equal(materialChange(undefined, a), true);
  });
});

describe('kernel schedule: a reload writes only what differs from what the kernel holds', () => {
  // Three byrequests services (2, 3 and 4 slots); the reload changes a server address of the third.
  const three = (addr: string): string =>
    BYREQ([1, 1]) +
    BYREQ([1, 1, 1]).replace('198.19.1.1', '198.19.1.2').replace('name: web', 'name: b') +
    BYREQ([2, 2]).replace('198.19.1.1', '198.19.1.3').replace('name: web', 'name: c').replace('198.18.201.2,', `${addr},`);
  const lines = (script: string): string[] => script.split('\n').filter((l) => l !== '' && !l.includes('synproxied'));

  it('unchanged schedule: no chain and no slot written (without what is held, every chain and the whole map)', () => {
    const a = config(three('198.18.201.2'));
    const b = config(three('198.18.201.9'));
    const t = configuredSchedule(a);
    const over = renderNft(a, configuredSpread(a), undefined, t);
    const next = renderNft(b, configuredSpread(b), undefined, configuredSchedule(b));
    const diff = lines(elementDiffScript(over, next, heldSchedule(a, t)));
    assert.deepEqual(diff, ['delete element ip sluice targets { 0x51002002 }', 'add element ip sluice targets { 0x51002002 : 198.18.201.9 . 80 }']);
    const blind = lines(elementDiffScript(over, next));
    assert.equal(blind.filter((l) => l.startsWith('flush chain')).length, 3);
    assert.ok(blind.includes('flush map ip sluice schedule'));
  });

  it('the writer changed a service\'s slot count since the install: the reload puts back what the new rendering wants, only there', () => {
    const a = config(three('198.18.201.2'));
    const t = configuredSchedule(a);
    const over = renderNft(a, configuredSpread(a), undefined, t);
    // The writer took server s0 of service b out (2 slots instead of 3), so the kernel holds that.
    const held = [...t];
    held[1] = Int32Array.from([1, 2]);
    const next = renderNft(a, configuredSpread(a), undefined, t);
    const diff = lines(elementDiffScript(over, next, heldSchedule(a, held)));
    assert.deepEqual(diff.filter((l) => l.includes('chain')), ['add chain ip sluice k_1', 'flush chain ip sluice k_1']);
    assert.ok(diff.includes('add rule ip sluice k_1 meta mark set numgen inc mod 3 offset 1024 map @schedule log group 0 snaplen 128 queue-threshold 64 return'), diff.join('\n'));
    assert.deepEqual(diff.filter((l) => l.includes('element ip sluice schedule')), ['delete element ip sluice schedule { 1024, 1025 }', 'add element ip sluice schedule { 1024 : 0x51001001, 1025 : 0x51001002, 1026 : 0x51001003 }']);
  });
});

describe('kernel schedule for IPv6 services: the ip6 table holds their map elements and chains', () => {
  const doc = {
    cluster: 'c1',
    uplinkAddress: '198.18.101.2',
    uplinkAddress6: '2001:2:0:101::2',
    services: [
      { name: 'v4', vip: '198.19.1.1', port: 80, method: 'byrequests', synPath: 'kernel', servers: [{ name: 'a', address: '198.18.201.11' }] },
      { name: 'v6', vip: '2001:2:0:1001::1', port: 80, method: 'byrequests', synPath: 'kernel', servers: [{ name: 'a', address: '2001:2:0:201::11', weight: 1 }, { name: 'b', address: '2001:2:0:201::12', weight: 3 }] },
    ],
  };
  const cfg = parseConfig(frontConfigSchema, JSON.stringify(doc), 'x');

  it('synPath kernel is accepted on an IPv6 service, and each table gets its own family\'s service', () => {
    assert.deepEqual(cfg.services.map((s) => isKernelService(cfg, s)), [true, true]);
    const n = renderNft(cfg, configuredSpread(cfg));
    const t6 = n.v6?.table ?? '';
    assert.match(t6, /map kernel \{ type ipv6_addr \. inet_proto \. inet_service : verdict; elements = \{ 2001:2:0:1001::1 \. tcp \. 80 : goto k_1 \} \}/);
    assert.match(t6, /chain syn_decide \{\n\s+ip6 nexthdr tcp ct status & confirmed == 0 ip6 daddr \. meta l4proto \. th dport vmap @kernel\n\s+meta mark set 0x51fff000/);
    assert.match(t6, /chain k_1 \{\n\s+meta mark set numgen inc mod 4 offset 1024 map @schedule/);
    assert.doesNotMatch(t6, /k_0|198\.19/);
    assert.match(n.table, /chain k_0 \{/);
    assert.doesNotMatch(n.table, /k_1|2001:2/);
    // byrequests 1:3, one exact cycle of four slots at the service's offset.
    assert.deepEqual(n.v6?.sets['schedule'], ['1024 : 0x51001002', '1025 : 0x51001001', '1026 : 0x51001002', '1027 : 0x51001002']);
  });

  it('the writer\'s script goes to the service\'s own table', () => {
    const [l4, l6] = scheduleLayout(cfg);
    assert.match(scheduleUpdateScript(cfg, l6!, [1024], ['1024 : 0x51001001'], 4), /^flush chain ip6 sluice k_1\n(add rule ip6 sluice k_1 .*\n){2}delete element ip6 sluice schedule \{ 1024 \}\nadd element ip6 sluice schedule \{ 1024 : 0x51001001 \}\n$/);
    assert.match(scheduleUpdateScript(cfg, l4!, [], ['0 : 0x51000001']), /^add element ip sluice schedule \{ 0 : 0x51000001 \}\n$/);
  });
});

describe('kernel schedule: a large schedule is filled after the install, chains always before slots', () => {
  // capacity services of 256 slots each: 65 of them are 16,640 slots, over SCHEDULE_INLINE_MAX.
  const many = (n: number): string =>
    Array.from({ length: n }, (_, i) => CAP.replace('name: web', `name: w${String(i)}`).replace('198.19.1.1', `198.19.${String(1 + (i >> 8))}.${String(1 + (i & 255))}`)).join('');

  it('above SCHEDULE_INLINE_MAX slots the whole script declares the map empty (chains in place); the rendering still holds every slot', () => {
    const big = config(many(65));
    const n = renderNft(big, configuredSpread(big));
    assert.equal(n.elements['schedule'], 65 * SCHEDULE_SLOTS);
    assert.ok(65 * SCHEDULE_SLOTS > SCHEDULE_INLINE_MAX);
    assert.equal(n.scheduleInline, false);
    assert.equal(n.sets['schedule']?.length, 65 * SCHEDULE_SLOTS, 'a diff install compares with the full schedule');
    assert.ok(!n.script.includes('add element ip sluice schedule'), 'no slot in the whole script');
    assert.ok(n.script.includes('chain k_64 {') && n.script.includes('numgen inc mod 256 offset 65536 map @schedule'), 'every chain in it');
    const small = config(many(64));
    const m = renderNft(small, configuredSpread(small));
    assert.equal(m.scheduleInline, true);
    assert.ok(m.script.includes('add element ip sluice schedule { 0 : 0x51000001,'));
  });

  it('installedEmpty: the writer writes every slot at once, adds only (the chains are the install\'s), then holds the schedule', async () => {
    const cfg = config(many(3));
    const scripts: string[] = [];
    const w = writerOf(cfg, (s) => (scripts.push(s), Promise.resolve()));
    const targets = configuredSchedule(cfg);
    w.installed(targets);
    w.installedEmpty();
    await new Promise((r) => setImmediate(r));
    assert.equal(scripts.length, 1);
    const lines = (scripts[0] ?? '').split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 3);
    assert.ok(lines.every((l) => l.startsWith('add element ip sluice schedule {')), lines.join('\n'));
    assert.deepEqual(scheduleElements(scheduleLayout(cfg), w.held() ?? []), scheduleElements(scheduleLayout(cfg), targets));
  });

  it('a write that changes slot counts rewrites every chain before any slot; so does a whole rewrite', async () => {
    const cfg = config(BYREQ([1, 1, 1]) + BYREQ([1, 1, 1]).replace('198.19.1.1', '198.19.1.2').replace('name: web', 'name: b'));
    const svcs = cfg.services.map((s, i) => new ServiceRuntime(i, s, []));
    const scripts: string[] = [];
    const w = writerOf(cfg, (s) => (scripts.push(s), Promise.resolve()));
    w.installed(configuredSchedule(cfg));
    for (const s of svcs) s.servers[0]!.usable = false; // both cycles shrink from 3 slots to 2
    w.update(svcs);
    await new Promise((r) => setImmediate(r));
    assert.equal(scripts.length, 1);
    const kinds = (script: string): string => script.split('\n').filter((l) => l !== '').map((l) => (l.includes('chain') || l.includes('add rule') ? 'c' : 'e')).join('');
    assert.match(kinds(scripts[0] ?? ''), /^c{6}e{4}$/, scripts[0]);
    const whole = scheduleRewriteScript(cfg, scheduleLayout(cfg), configuredSchedule(cfg), new Set([0, 1]));
    assert.match(kinds(whole), /^c{6}e{2}$/, whole);
  });
});
