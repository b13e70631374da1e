/**
 * The front node's role in a pair (src/front/ha/role.ts), the sync-state
 * parser and reader (src/front/ha/sync-state.ts), and the admin command
 * {"cmd":"ha"}: transitions counted once, the address cross-check with an
 * injected clock, conntrackd's real `-s` output parsed, failures as
 * 'unknown' with the reason, reads never overlapping.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AdminServer, type AdminTarget } from '../../src/front/admin.ts';
import { HaRoleMachine, messageRole, type Failover, type HaState } from '../../src/front/ha/role.ts';
import { parseSyncStats, SyncStateReader, type RunCommand, type SyncState } from '../../src/front/ha/sync-state.ts';
import { componentLogger } from '../../src/log/logger.ts';

describe('ha role machine', () => {
  it('single without ha: notifies change nothing', () => {
    const m = new HaRoleMachine(false, 900, 0);
    assert.equal(m.role, 'single');
    assert.equal(m.notify('master', 'x', 1), undefined);
    assert.equal(m.observe(true, 5000), undefined);
    assert.equal(m.role, 'single');
    assert.equal(messageRole(m.role), 'single');
  });

  it('starts as backup and follows the notifies; repeats are no transitions; each transition counted by the role entered', () => {
    const m = new HaRoleMachine(true, 900, 0);
    assert.equal(m.role, 'backup');
    const steps: [HaState, string | undefined][] = [
      ['backup', undefined],
      ['master', 'backup->master'],
      ['master', undefined],
      ['fault', 'master->fault'],
      ['backup', 'fault->backup'],
      ['master', 'backup->master'],
    ];
    steps.forEach(([state, want], i) => {
      const t = m.notify(state, `keepalived ${state}`, 1000 + i);
      assert.equal(t === undefined ? undefined : `${t.from}->${t.to}`, want, `step ${String(i)}`);
      if (t) assert.equal(t.at, 1000 + i);
    });
    assert.deepEqual(m.transitions, { single: 0, master: 2, backup: 1, fault: 1 });
    assert.equal(m.notifies, 6);
    assert.equal(m.since, 1005);
    assert.equal(messageRole('fault'), 'backup');
  });

  it('a host already holding the address at start is master without a notify (a restart of the front node alone)', () => {
    const m = new HaRoleMachine(true, 900, 0);
    const t = m.adoptRunningMaster(10);
    assert.ok(t);
    assert.equal(t.to, 'master');
    assert.match(t.reason, /^start: /);
    assert.equal(m.adoptRunningMaster(11), undefined);
  });

  it('role and address: a disagreement within 3 adverts is a takeover in progress; longer is one mismatch, reported once, ended when they agree', () => {
    const m = new HaRoleMachine(true, 900, 0);
    // Backup and no address: agreement.
    assert.equal(m.observe(false, 0), undefined);
    // keepalived added the address; the hook has not told us yet.
    assert.equal(m.observe(true, 1000), undefined);
    assert.equal(m.observe(true, 1900), undefined, 'exactly the grace: not yet');
    const began = m.observe(true, 2000);
    assert.deepEqual(began, { kind: 'began', role: 'backup', holdsVip: true, forMs: 1000 });
    assert.equal(m.observe(true, 3000), undefined, 'reported once');
    assert.equal(m.mismatches, 1);
    assert.equal(m.mismatched, true);
    // The hook arrives late: master, the address held: the episode ends.
    m.notify('master', 'late hook', 3500);
    assert.deepEqual(m.observe(true, 4000), { kind: 'ended', role: 'master', holdsVip: true, forMs: 0 });
    assert.equal(m.mismatched, false);
    // A master that lost the address (a hook missing): a second episode.
    assert.equal(m.observe(false, 5000), undefined);
    assert.equal(m.observe(false, 6000)?.kind, 'began');
    assert.equal(m.mismatches, 2);
  });

  it('a role change restarts the disagreement clock', () => {
    const m = new HaRoleMachine(true, 900, 0);
    assert.equal(m.observe(true, 0), undefined);
    m.notify('fault', 'x', 1);
    assert.equal(m.observe(true, 800), undefined);
    assert.equal(m.observe(true, 1600), undefined, '800 ms since the clock restarted at the first observation after the change');
    assert.equal(m.observe(true, 1800)?.kind, 'began');
  });

  it('keeps the last failover', () => {
    const m = new HaRoleMachine(true, 900, 0);
    const last = (): Failover | undefined => m.lastFailover;
    assert.equal(last(), undefined);
    m.recordFailover({ at: '2026-01-01T00:00:00.000Z', from: 'backup', to: 'master', adopted: 20, corrected: 0 });
    assert.equal(last()?.adopted, 20);
  });
});

/** `conntrackd -C FILE -s` as conntrackd 1.4.7 printed it in a namespace (two downloads through the master). */
const STATS = `cache internal:
current active connections:\t           4
connections created:\t\t           6\tfailed:\t           0
connections updated:\t\t           4\tfailed:\t           0
connections destroyed:\t\t           2\tfailed:\t           0

cache external:
current active connections:\t           3
connections created:\t\t           0\tfailed:\t           0
connections updated:\t\t           0\tfailed:\t           0
connections destroyed:\t\t           0\tfailed:\t           0

traffic processed:
                   0 Bytes                         0 Pckts

UDP traffic (active device=sync0):
                 740 Bytes sent                  176 Bytes recv
                  20 Pckts sent                   11 Pckts recv
                   0 Error send                    1 Error recv

message tracking:
                   0 Malformed msgs                    6 Lost msgs

`;

describe('conntrackd sync state', () => {
  it('parses the figures of conntrackd -s', () => {
    assert.deepEqual(parseSyncStats(STATS), {
      internal: 4,
      external: 3,
      bytesSent: 740,
      bytesReceived: 176,
      packetsSent: 20,
      packetsReceived: 11,
      sendErrors: 0,
      receiveErrors: 1,
      malformed: 0,
      lost: 6,
      device: 'sync0',
    });
  });

  const bad: [string, string, RegExp][] = [
    ['empty', '', /no "cache internal"/],
    ['no external cache (DisableExternalCache on)', STATS.replace(/cache external:[\s\S]*?\n\n/, ''), /cache external/],
    ['no UDP section (another transport)', STATS.replace(/UDP traffic[\s\S]*?\n\n/, ''), /no UDP traffic/],
  ];
  for (const [name, text, says] of bad) {
    it(`refuses output with ${name}`, () => {
      const r = parseSyncStats(text);
      assert.equal(typeof r, 'string');
      assert.match(r as string, says);
    });
  }

  const now = (): Date => new Date('2026-01-01T00:00:00.000Z');

  it('off without a pair: nothing runs', async () => {
    let runs = 0;
    const r = new SyncStateReader(undefined, {
      run: () => {
        runs++;
        return Promise.resolve(STATS);
      },
    });
    await r.read();
    assert.deepEqual(r.state, { state: 'off' });
    assert.equal(runs, 0);
  });

  it('ok with the figures; a failure is unknown with the reason (no throw); changes reported', async () => {
    let next: () => Promise<string> = () => Promise.resolve(STATS);
    const changes: string[] = [];
    const r = new SyncStateReader('/etc/conntrackd/conntrackd.conf', { run: () => next(), now, onChange: (a, b) => changes.push(`${a.state}->${b.state}`) });
    // Read through a function: the assertions below must not narrow the getter's type.
    const st = (): SyncState => r.state;
    assert.equal(st().state, 'unknown');
    await r.read();
    assert.equal(st().state, 'ok');
    next = () => Promise.reject(new Error('command failed: conntrackd -C /etc/conntrackd/conntrackd.conf -s: connect: No such file or directory'));
    await r.read();
    assert.deepEqual(st(), { state: 'unknown', at: '2026-01-01T00:00:00.000Z', reason: 'command failed: conntrackd -C /etc/conntrackd/conntrackd.conf -s: connect: No such file or directory' });
    next = () => Promise.resolve('garbage');
    await r.read();
    const last = st();
    assert.match(last.state === 'unknown' ? last.reason : '', /conntrackd -C \/etc\/conntrackd\/conntrackd\.conf -s: no "cache internal"/);
    assert.deepEqual(changes, ['unknown->ok', 'ok->unknown', 'unknown->unknown']);
    assert.equal(r.failures, 2);
  });

  it('never two reads at once: one due while one runs is skipped and counted', async () => {
    let release: (s: string) => void = () => undefined;
    let runs = 0;
    const run: RunCommand = () => {
      runs++;
      return new Promise((res) => (release = res));
    };
    const r = new SyncStateReader('/c', { run, now });
    const first = r.read();
    await r.read();
    assert.equal(runs, 1);
    assert.equal(r.skipped, 1);
    release(STATS);
    await first;
    assert.equal(r.state.state, 'ok');
  });
});

describe('admin command ha', () => {
  const target = (haNotify?: AdminTarget['haNotify']): AdminTarget => ({
    log: componentLogger('test'),
    config: {} as AdminTarget['config'],
    change: () => undefined,
    reload: () => true,
    status: () => ({}),
    ...(haNotify ? { haNotify } : {}),
  });

  it('hands the state to the daemon and replies with the roles', () => {
    const seen: string[] = [];
    const admin = new AdminServer('/nonexistent/front.sock', target((s) => (seen.push(s), { from: 'backup', to: s, changed: true })));
    assert.deepEqual(admin.handle('{"cmd":"ha","state":"master"}'), { ok: true, from: 'backup', to: 'master', changed: true });
    assert.deepEqual(seen, ['master']);
  });

  const refused: [string, string, RegExp][] = [
    ['an unknown state', '{"cmd":"ha","state":"primary"}', /ha takes state master, backup, fault/],
    ['no state', '{"cmd":"ha"}', /ha takes state/],
  ];
  for (const [name, line, says] of refused) {
    it(`refuses ${name}`, () => {
      const r = new AdminServer('/nonexistent/front.sock', target(() => 'unused')).handle(line);
      assert.equal(r['ok'], false);
      assert.match(String(r['error']), says);
    });
  }

  it('refuses on a single node (the daemon says why)', () => {
    const r = new AdminServer('/nonexistent/front.sock', target(() => 'this front node has no ha section (role single)')).handle('{"cmd":"ha","state":"backup"}');
    assert.deepEqual(r, { ok: false, error: 'this front node has no ha section (role single)' });
  });
});
