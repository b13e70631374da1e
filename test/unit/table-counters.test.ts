/**
 * The kernel's fallback and stray-drop counters as running totals
 * (src/front/table-counters.ts): a reading below the last one is a table
 * replacement, counts from before this start are a base.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { RestartingTotal, TableCounters } from '../../src/front/table-counters.ts';

const dump = (fallback: number, stray: number): string =>
  `table ip sluice {\n\tcounter vip_guard_drops {\n\t\tpackets 1 bytes 60\n\t}\n\tcounter fallback_flows {\n\t\tpackets ${String(fallback)} bytes ${String(fallback * 60)}\n\t}\n\tcounter stray_replies {\n\t\tpackets ${String(stray)} bytes 0\n\t}\n}\n`;

describe('RestartingTotal', () => {
  const cases: { name: string; seed?: number; kept?: boolean; readings: number[]; total: number }[] = [
    { name: 'steady growth', readings: [0, 3, 7], total: 7 },
    { name: 'a replacement (drop to 0) keeps what was read', readings: [5, 9, 0, 2], total: 11 },
    { name: 'two replacements', readings: [4, 1, 0, 6], total: 11 },
    { name: 'an equal reading is no restart', readings: [4, 4, 4], total: 4 },
    { name: 'seeded with the counts before our first install', seed: 12, readings: [0, 3], total: 15 },
    { name: 'seeded, then the install kept the counter: it goes on from the seed', seed: 12, kept: true, readings: [12, 15], total: 15 },
    { name: 'kept, then a replacement (a repair)', seed: 12, kept: true, readings: [14, 0, 2], total: 16 },
    { name: 'kept before any reading: the seed is the reading', seed: 12, kept: true, readings: [], total: 12 },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = new RestartingTotal();
      if (c.seed !== undefined) t.seed(c.seed);
      if (c.kept === true) t.kept();
      for (const r of c.readings) t.update(r);
      assert.equal(t.total(), c.total);
    });
  }
});

describe('TableCounters', () => {
  it('reads both counters per family from a table dump; a dump without them leaves the totals', () => {
    const t = new TableCounters();
    t.read(dump(3, 1), 'ip');
    t.read(dump(0, 5), 'ip6');
    t.read('table ip sluice {\n}\n', 'ip');
    assert.deepEqual(t.status(), { fallbackFlows: { ipv4: 3, ipv6: 0 }, strayReplies: { ipv4: 1, ipv6: 5 } });
  });

  it('the counts a previous run left are the base: our install restarts the kernel counter at 0', () => {
    const t = new TableCounters();
    assert.deepEqual(t.seed(dump(40, 2), 'ip'), { fallbackFlows: 40, strayReplies: 2 });
    t.read(dump(0, 0), 'ip');
    t.read(dump(1, 0), 'ip');
    assert.deepEqual(t.status().fallbackFlows, { ipv4: 41, ipv6: 0 });
    assert.deepEqual(t.status().strayReplies, { ipv4: 2, ipv6: 0 });
  });

  it('the start kept the table (same structure): the counts before it are the kernel counter\'s own, counted once', () => {
    const t = new TableCounters();
    t.seed(dump(40, 2), 'ip');
    t.kept();
    t.read(dump(41, 2), 'ip');
    assert.deepEqual(t.status().fallbackFlows, { ipv4: 41, ipv6: 0 });
    assert.deepEqual(t.status().strayReplies, { ipv4: 2, ipv6: 0 });
  });
});
