import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { type AgentHealth, type CheckState, type HealthState, type HealthTransition, ServerHealth, slowStartShare } from '../../src/front/health/server-health.ts';

test('combined state: maint > down > drain > up, whatever the order of sources', () => {
  const rows: Array<[CheckState, AgentHealth | 'none', boolean, HealthState]> = [
    ['off', 'none', false, 'up'],
    ['up', 'none', false, 'up'],
    ['up', 'up', false, 'up'],
    ['down', 'up', false, 'down'],
    ['up', 'down', false, 'down'],
    ['off', 'none', true, 'down'],
    ['up', 'up', true, 'down'],
    ['up', 'drain', false, 'drain'],
    ['down', 'drain', false, 'down'],
    ['off', 'drain', true, 'down'],
    ['down', 'maint', false, 'maint'],
    ['up', 'maint', true, 'maint'],
    ['off', 'maint', false, 'maint'],
  ];
  for (const [check, agent, silent, want] of rows) {
    assert.equal(ServerHealth.combine(check, agent, silent).state, want, `${check}/${agent}/${silent ? 'silent' : 'reporting'}`);
  }
});

test('reasons name the source that decided', () => {
  assert.equal(ServerHealth.combine('down', 'up', false, 'connect refused').reason, 'check failed: connect refused');
  assert.equal(ServerHealth.combine('up', 'maint', false, '', 'file /run/sluice/maint').reason, 'agent says maint: file /run/sluice/maint');
  assert.equal(ServerHealth.combine('off', 'none', true).reason, 'agent silent');
  assert.equal(ServerHealth.combine('up', 'up', false).reason, 'check passed, agent says up');
});

test('transitions: counted, stamped, handed to the sink once per change; ramp only on coming back', () => {
  const seen: HealthTransition[] = [];
  const h = new ServerHealth('s1', 0, (_h, t) => seen.push(t));
  assert.equal(h.setCheck('up', 'HTTP 200', 10), false, 'up to up is no transition');
  assert.equal(h.rampFrom, -Infinity, 'up from the start: no slow start');
  assert.equal(h.setCheck('down', 'connect refused', 20), true);
  assert.equal(h.setCheck('down', 'timeout', 30), false);
  assert.equal(h.reason, 'check failed: timeout', 'reason follows the latest result');
  assert.equal(h.setAgent('maint', 'ctl', 40), true);
  assert.equal(h.setAgent('up', '', 50), true, 'maint lifted: still down by the check');
  assert.equal(h.state, 'down');
  assert.equal(h.setCheck('up', 'HTTP 200', 60), true);
  assert.deepEqual(
    seen.map((t) => `${t.from}>${t.to}`),
    ['up>down', 'down>maint', 'maint>down', 'down>up'],
  );
  assert.equal(h.transitions, 4);
  assert.equal(h.since, 60);
  assert.equal(h.rampFrom, 60);
  assert.equal(h.setSilent(true, 70), true);
  assert.equal(h.rampFrom, -Infinity);
  assert.equal(h.setSilent(true, 80), false);
});

test('slow start share ramps linearly from the floor to 1', () => {
  const rows: Array<[number, number, number, number]> = [
    // now, rampFrom, period, share
    [100, -Infinity, 10_000, 1],
    [100, 0, 0, 1],
    [0, 0, 10_000, 0.05],
    [250, 0, 10_000, 0.05],
    [5_000, 0, 10_000, 0.5],
    [10_000, 0, 10_000, 1],
    [20_000, 0, 10_000, 1],
  ];
  for (const [now, from, period, want] of rows) assert.equal(slowStartShare(now, from, period), want, `${now} ${from} ${period}`);
});
