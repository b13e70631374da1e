/**
 * `sluice status` (src/cli/status.ts) shows each server's health: the
 * combined state, since when, the check's and the agent's parts, the slow
 * start share, and the reason of every server that is not up.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderFrontStatus } from '../../src/cli/status.ts';
import type { FrontServerHealthStatus, FrontStatus } from '../../src/front/status.ts';

const health = (h: Partial<FrontServerHealthStatus>): FrontServerHealthStatus => ({
  state: 'up',
  reason: 'check passed',
  sinceSeconds: 12.5,
  transitions: 0,
  check: 'up',
  checkReason: 'passed',
  agent: 'none',
  agentReason: '',
  silent: false,
  share: 1,
  ...h,
});

describe('sluice status: server health', () => {
  it('renders health, since, check, agent, share, and why a server is out', () => {
    const server = (name: string, h: FrontServerHealthStatus): FrontStatus['services'][number]['servers'][number] => ({ name, state: h.state === 'down' ? 'down' : 'active', active: 0, decided: 3, refused: 0, unanswered: 0, capacity: null, estimated: false, rate: 0, address: '198.18.201.11', port: 80, weight: 1, admin: 'active', cps: 0, override: null, health: h });
    const status = {
      cluster: 'c1',
      uptimeSeconds: 1,
      counters: { decided: 6, noRecord: 0, overflowed: 0 },
      malformed: {},
      records: { active: 0, recycled: 0 },
      admin: { handled: 0, rejected: 0 },
      rules: { checks: 1, repaired: 0, repairFailures: 0, checkFailures: 0, failingRepairs: 0, lastRepair: null },
      health: { transitions: { up: 1, down: 1, drain: 0, maint: 0 }, outcomes: { ok: 9, refused: 2 }, inFlight: 0, peakInFlight: 2, maxInFlight: 64, skipped: 0, targets: 2, usableChanges: 2, selectorRebuilds: 2, flowExpiry: { runs: 1, failures: 0, deleted: 5, gone: 1 } },
      services: [
        {
          name: 'www',
          overflowed: 0,
          overflow: [],
          servers: [
            server('s1a', health({ share: 0.35, checks: { kind: 'http', state: 'up', passesInRow: 3, failuresInRow: 0, lastOutcome: 'ok', lastReason: 'passed', lastAgeSeconds: 0.2, lastOkAgeSeconds: 0.2, failuresAtDown: 2, passed: 9, failed: 2, refusedSinceOk: 0, refusedLimit: 10, refusedDowns: 0, unansweredSinceOk: 0, unansweredLimit: 10, unansweredDowns: 0 } })),
            server('s1b', health({ state: 'down', reason: 'check failed: HTTP 503 (2 in a row)', check: 'down', sinceSeconds: 4 })),
          ],
        },
      ],
    } as unknown as FrontStatus;
    const text = renderFrontStatus(status);
    assert.match(text, /SERVER +STATE +CAPACITY .* HEALTH .* DECIDED .* REPORT AGE .* SINCE +CHECK +AGENT +SHARE$/m);
    assert.match(text, /^s1a +active .* up .* 12\.5s +up \(http, last ok\) +none +0\.35$/m);
    assert.match(text, /^s1b +down .* down .* 4\.0s +down +none +1\.00$/m);
    assert.match(text, /^ {2}s1b: down: check failed: HTTP 503 \(2 in a row\)$/m);
    assert.doesNotMatch(text, /^ {2}s1a: /m, 'a server that is up needs no reason line');
    assert.match(text, /^health: checks ok 9, refused 2; in flight 0\/64 \(peak 2\), skipped 0; transitions to up 1, down 1, drain 0, maint 0$/m);
    assert.match(text, /^flows of servers gone down expired: 5 deleted, 1 already gone, in 1 expiries$/m);
  });
});
