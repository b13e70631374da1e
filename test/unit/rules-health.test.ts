/**
 * The periodic rule check (src/front/rules-health.ts) against a fake
 * iptables: a repair after damage, counted and logged once; a reload or a
 * stop during a check; no overlap; the watchdog after failed repairs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import type { Table } from '../../src/front/rules-check.ts';
import { NFT_CHECK_SHARE, NFT_DUMP_MS_PER_ELEMENT, RulesHealth } from '../../src/front/rules-health.ts';
import { chainsOf, configuredSpread } from '../../src/front/nft.ts';
import { renderRuleset, type RuleSet } from '../../src/front/ruleset.ts';
import { componentLogger, type Logger } from '../../src/log/logger.ts';

const CONFIG = `
cluster: c1
uplinkAddress: 198.18.101.2
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    # The fixtures below are dumps of a table without SYN cookies.
    synproxy: false
    servers:
      - { name: s1a, address: 198.18.201.11, capacity: 100 }
`;
function render(text: string): RuleSet {
  const cfg = parseConfig(frontConfigSchema, text, 'x');
  return renderRuleset(cfg, configuredSpread(cfg));
}
const rules = render(CONFIG);

/**
 * The rendered table as `nft list table` prints it: tabs, a block head at
 * one, its lines at two, a one-line set or map declaration split into
 * its statements.
 */
function nftListing(table: string): string {
  return table
    .split('\n')
    .map((l) => {
      const m = /^ {2}(set|map|counter) (\S+) \{ (.*) \}$/.exec(l);
      if (m) return `\t${m[1] ?? ''} ${m[2] ?? ''} {\n${(m[3] ?? '').split('; ').map((x) => `\t\t${x.replace(/;$/, '')}`).join('\n')}\n\t}`;
      return l.replace(/^ {4}/, '\t\t').replace(/^ {2}/, '\t');
    })
    .join('\n');
}

/**
 * A fake iptables: install() writes each table's save output as the
 * rendering itself (iptables-save's own normalisation does not matter
 * here: the check compares iptables' output with iptables' output).
 */
class FakeIptables {
  tables = new Map<Table, string>();
  installs = 0;
  failInstall = false;
  failSave = false;
  /** While set, saveAsync waits for release() (a check in flight). */
  hold: Promise<void> | undefined;
  release: () => void = () => undefined;

  apply(r: RuleSet): void {
    if (this.failInstall) throw new Error('iptables-restore: line 2 failed');
    this.installs++;
    for (const t of ['mangle', 'filter'] as const) {
      const lines = [`*${t}`];
      for (const c of r.iptables.chains.filter((x) => x.table === t)) {
        lines.push(`:${c.chain} - [0:0]`, `-A ${c.hook} -j ${c.chain}`);
        for (const rule of r.iptables.byChain[c.chain] ?? []) lines.push(`-A ${c.chain} ${rule}`);
      }
      this.tables.set(t, [...lines, 'COMMIT', ''].join('\n'));
    }
    this.tables.set('nft', nftListing(r.nft.table));
  }

  save(t: Table): string {
    if (this.failSave) throw new Error('iptables-save: cannot open');
    return this.tables.get(t) ?? '';
  }

  async saveAsync(t: Table): Promise<string> {
    if (this.hold) await this.hold;
    return this.save(t);
  }

  holdNext(): void {
    this.hold = new Promise((r) => {
      this.release = () => {
        this.hold = undefined;
        r();
      };
    });
  }
}

interface Logged {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

/** A logger that records warn, error and info lines. */
function recordingLogger(into: Logged[]): Logger {
  const base = componentLogger('test');
  const rec =
    (level: string) =>
    (a: unknown, b?: unknown): void => {
      if (typeof a === 'string') into.push({ level, msg: a, fields: {} });
      else into.push({ level, msg: String(b), fields: a as Record<string, unknown> });
    };
  return Object.assign(Object.create(base) as Logger, { warn: rec('warn'), error: rec('error'), info: rec('info') });
}

function setup(failuresBeforeDead = 3): { ipt: FakeIptables; health: RulesHealth; logs: Logged[] } {
  const ipt = new FakeIptables();
  const logs: Logged[] = [];
  const health = new RulesHealth({
    log: recordingLogger(logs),
    render: () => rules,
    apply: (r) => {
      ipt.apply(r);
      return false;
    },
    save: (t) => ipt.save(t),
    saveAsync: (t) => ipt.saveAsync(t),
    periodMs: () => 2000,
    failuresBeforeDead: () => failuresBeforeDead,
  });
  health.install(rules);
  return { ipt, health, logs };
}

describe('rule check: repair', () => {
  it('intact rules: nothing reinstalled, nothing logged', async () => {
    const { ipt, health, logs } = setup();
    assert.equal(await health.check(), 'intact');
    assert.equal(await health.check(), 'intact');
    assert.equal(ipt.installs, 1);
    assert.deepEqual(logs, []);
    assert.deepEqual({ ...health.status(), lastRepair: null }, { checks: 2, repaired: 0, repairFailures: 0, checkFailures: 0, failingRepairs: 0, lastRepair: null, unchanged: 0, nftDumpMs: 0, wholeInstalls: 1, elementUpdates: 0 });
  });

  it('a flushed table is reinstalled, counted, and logged once with counts', async () => {
    const { ipt, health, logs } = setup();
    ipt.tables.set('mangle', '*mangle\n:SLUICE_QUEUE - [0:0]\nCOMMIT\n'); // iptables -t mangle -F
    assert.equal(await health.check(), 'repaired');
    assert.equal(ipt.installs, 2);
    assert.equal(await health.check(), 'intact');
    assert.equal(health.status().repaired, 1);
    assert.notEqual(health.status().lastRepair, null);
    assert.equal(logs.length, 1);
    const [w] = logs;
    assert.ok(w);
    assert.equal(w.level, 'warn');
    assert.match(w.msg, /reinstalled/);
    assert.deepEqual(w.fields['tables'], ['mangle']);
    assert.equal(w.fields['missingJumps'], 1);
    assert.equal(w.fields['missingRules'], rules.iptables.byChain['SLUICE_QUEUE']?.length);
  });

  it('a deleted ruleset (nft flush ruleset) is reinstalled', async () => {
    const { ipt, health } = setup();
    ipt.tables.clear();
    assert.equal(await health.check(), 'repaired');
    assert.equal(await health.check(), 'intact');
    assert.equal(health.status().repaired, 1);
  });

  it('our nft table deleted alone is reinstalled; a chain of it flushed too', async () => {
    const { ipt, health, logs } = setup();
    ipt.tables.delete('nft');
    assert.equal(await health.check(), 'repaired');
    assert.deepEqual(logs[0]?.fields['tables'], ['nft']);
    ipt.tables.set('nft', (ipt.tables.get('nft') ?? '').replace(/\t\tip daddr @vips[^\n]*\n/, '').replace(/(\t\t)meta mark != \S+ ip daddr @vips[^\n]*\n/, ''));
    assert.equal(await health.check(), 'repaired');
    assert.equal(await health.check(), 'intact');
    assert.equal(health.status().repaired, 2);
  });

  it('the fallback map is judged by its element count, unless a write ran during the dump', async () => {
    const ipt = new FakeIptables();
    let fb = { elements: 256, generation: 1, writing: false };
    const health = new RulesHealth({
      log: recordingLogger([]),
      render: () => rules,
      apply: (r) => {
        ipt.apply(r);
        return false;
      },
      save: (t) => ipt.save(t),
      saveAsync: (t) => ipt.saveAsync(t),
      fallback: () => fb,
      periodMs: () => 2000,
      failuresBeforeDead: () => 3,
    });
    health.install(rules);
    // The fake lists the rendering on one line per map: write the count the way nft lists elements.
    const withElements = (n: number): string => (ipt.tables.get('nft') ?? '').replace(/(\tmap fallback \{)[^\n]*/, `$1\n\t\telements = { ${Array.from({ length: n }, (_, k) => `198.19.1.1 . tcp . 80 . ${String(k)} : 198.18.201.11 . 80`).join(', ')} }\n\t}`);
    ipt.tables.set('nft', withElements(256));
    assert.equal(await health.check(), 'intact');
    ipt.tables.set('nft', withElements(0)); // nft flush map ip sluice fallback
    fb = { ...fb, writing: true };
    assert.equal(await health.check(), 'intact', 'a write in flight: not judged');
    fb = { ...fb, writing: false };
    assert.equal(await health.check(), 'repaired');
  });

  it('a large nft table is dumped at most NFT_CHECK_SHARE of the time; the iptables tables every check', async () => {
    const ipt = new FakeIptables();
    let now = 0;
    const dumped: string[] = [];
    const health = new RulesHealth({
      log: recordingLogger([]),
      render: () => rules,
      apply: (r) => {
        ipt.apply(r);
        return false;
      },
      save: (t) => ipt.save(t),
      saveAsync: (t) => {
        dumped.push(t);
        if (t === 'nft') now += 1000; // a dump that takes 1 s
        return Promise.resolve(ipt.save(t));
      },
      now: () => now,
      periodMs: () => 2000,
      failuresBeforeDead: () => 3,
    });
    health.install(rules);
    const seen: string[][] = [];
    for (let i = 0; i < 12; i++) {
      dumped.length = 0;
      assert.equal(await health.check(), 'intact');
      seen.push([...dumped]);
      now += 2000; // the period
    }
    // 1 s of dump -> at least 10 s from one dump's start to the next: every fifth check (2 s periods, plus the dump's own second).
    const withNft = seen.map((d, i) => (d.includes('nft') ? i : -1)).filter((i) => i >= 0);
    assert.deepEqual(withNft, [0, 5, 10]);
    assert.ok(seen.every((d) => d.includes('mangle')));
    assert.equal(health.status().nftDumpMs, 1000);
    // A deleted nft table is found at its next due check, and repaired.
    ipt.tables.delete('nft');
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) {
      outcomes.push(await health.check());
      now += 2000;
    }
    assert.deepEqual(outcomes.filter((o) => o === 'repaired').length, 1);
  });

  it('a large nft table: its first dump waits; between dumps its chains are read, and a deleted table or chain is repaired within a period', async () => {
    const ipt = new FakeIptables();
    let now = 0;
    const dumped: string[] = [];
    // As large as 1,000 services x 100 servers with the fallback: 356k elements.
    const large: RuleSet = { iptables: rules.iptables, nft: Object.assign(Object.create(rules.nft) as RuleSet['nft'], { elements: { ...rules.nft.elements, targets: 100_000, fallback: 256_000 } }) };
    const health = new RulesHealth({
      log: recordingLogger([]),
      render: () => large,
      apply: (r) => {
        ipt.apply(r);
        return false;
      },
      save: (t) => ipt.save(t),
      saveAsync: (t) => {
        dumped.push(t);
        return Promise.resolve(ipt.save(t));
      },
      nftChains: () => {
        dumped.push('chains');
        return Promise.resolve(chainsOf(ipt.tables.get('nft') ?? ''));
      },
      now: () => now,
      periodMs: () => 2000,
      failuresBeforeDead: () => 3,
    });
    health.install(large);
    // The dump is expected to take ~356k x NFT_DUMP_MS_PER_ELEMENT: the first waits that over NFT_CHECK_SHARE.
    const firstDumpAfter = (356_000 * NFT_DUMP_MS_PER_ELEMENT) / NFT_CHECK_SHARE;
    assert.equal(await health.check(), 'intact');
    assert.deepEqual(dumped, ['chains', 'mangle'], 'no dump right after the install: its chains only');
    // A chain deleted (nft delete chain): found by the next check, repaired whole.
    ipt.tables.set('nft', (ipt.tables.get('nft') ?? '').replace('\tchain nat_post {', '\tchain gone {'));
    now += 2000;
    assert.equal(await health.check(), 'repaired');
    // The table deleted (nft delete table, nft flush ruleset): the same.
    ipt.tables.delete('nft');
    now += 2000;
    assert.equal(await health.check(), 'repaired');
    // The dump (the read-back) once due.
    dumped.length = 0;
    now += firstDumpAfter + 2000; // (plus the small sets' elements)
    // (The fake's dump holds the small rendering's elements, which the
    // read-back refuses against the claimed 100k: what matters here is
    // that the dump is taken once due, instead of the chains.)
    await health.check();
    assert.ok(dumped.includes('nft') && !dumped.includes('chains'), JSON.stringify(dumped));
  });

  it('a foreign rule added to a built-in chain is left alone', async () => {
    const { ipt, health } = setup();
    ipt.tables.set('mangle', (ipt.tables.get('mangle') ?? '').replace('COMMIT', '-A PREROUTING -p udp -j ACCEPT\nCOMMIT'));
    assert.equal(await health.check(), 'intact');
    assert.equal(ipt.installs, 1);
  });
});

describe('rule check: races', () => {
  it('a reload during a check: the check is dropped, not judged against the new set', async () => {
    const { ipt, health, logs } = setup();
    ipt.holdNext();
    const inFlight = health.check();
    // The reload installs another set while the dump of the old one is in flight.
    const reloaded = render(CONFIG.replace('capacity: 100 }', 'capacity: 100 }\n      - { name: s1b, address: 198.18.201.12, capacity: 100 }'));
    health.install(reloaded);
    ipt.release();
    assert.equal(await inFlight, 'superseded');
    assert.equal(ipt.installs, 2);
    assert.deepEqual(logs, []);
    assert.equal(health.status().checks, 0);
  });

  it('never overlaps itself', async () => {
    const { ipt, health } = setup();
    ipt.holdNext();
    const first = health.check();
    assert.equal(await health.check(), 'skipped');
    ipt.release();
    assert.equal(await first, 'intact');
  });

  it('a stop during a check: nothing is reinstalled after it', async () => {
    const { ipt, health } = setup();
    ipt.holdNext();
    const inFlight = health.check();
    health.stop();
    ipt.tables.clear(); // what stop's removeRules does
    ipt.release();
    assert.equal(await inFlight, 'superseded');
    assert.equal(ipt.installs, 1);
    assert.equal(await health.check(), 'skipped');
  });

  it('a check that cannot read the rules is counted and logged once per streak', async () => {
    const { ipt, health, logs } = setup();
    ipt.failSave = true;
    assert.equal(await health.check(), 'check-failed');
    assert.equal(await health.check(), 'check-failed');
    ipt.failSave = false;
    assert.equal(await health.check(), 'intact');
    assert.equal(health.status().checkFailures, 2);
    assert.deepEqual(logs.map((l) => l.level), ['warn', 'info']);
    assert.ok(health.liveness().alive);
  });
});

describe('rule check: the watchdog', () => {
  it('not alive after the configured failed repairs in a row; alive again after a repair', async () => {
    const { ipt, health, logs } = setup(3);
    ipt.tables.clear();
    ipt.failInstall = true;
    assert.equal(await health.check(), 'repair-failed');
    assert.equal(await health.check(), 'repair-failed');
    assert.ok(health.liveness().alive);
    assert.equal(await health.check(), 'repair-failed');
    const l = health.liveness();
    assert.equal(l.alive, false);
    assert.match(l.reason ?? '', /could not be reinstalled 3 checks in a row: iptables-restore: line 2 failed/);
    assert.equal(health.status().repairFailures, 3);
    ipt.failInstall = false;
    assert.equal(await health.check(), 'repaired');
    assert.ok(health.liveness().alive);
    // One error for the streak, one warn for the repair that ended it.
    assert.deepEqual(logs.map((x) => x.level), ['error', 'warn']);
    assert.equal(logs[1]?.fields['failedAttempts'], 3);
  });

  it('a failed reload install is retried by the next check', async () => {
    const { ipt, health } = setup();
    ipt.failInstall = true;
    assert.throws(() => {
      health.install(rules);
    });
    ipt.failInstall = false;
    assert.equal(await health.check(), 'repaired');
    assert.equal(await health.check(), 'intact');
  });
});

describe('rule check: the nf_tables ruleset generation', () => {
  /** A fake kernel generation raised by every install (a commit), and by the test for a foreign one. */
  function setupGen(opts: { covers?: boolean; gen?: () => number | undefined | Promise<number | undefined> } = {}): { ipt: FakeIptables; health: RulesHealth; saves: Table[]; checked: { n: number }; bump: () => void } {
    const ipt = new FakeIptables();
    const saves: Table[] = [];
    const checked = { n: 0 };
    let gen = 100;
    const health = new RulesHealth({
      log: recordingLogger([]),
      render: () => rules,
      apply: (r) => {
        ipt.apply(r);
        gen++;
        return false;
      },
      save: (t) => ipt.save(t),
      saveAsync: (t) => {
        saves.push(t);
        return ipt.saveAsync(t);
      },
      generation: opts.gen ?? (() => gen),
      generationCoversIptables: opts.covers ?? true,
      onChecked: () => {
        checked.n++;
      },
      periodMs: () => 2000,
      failuresBeforeDead: () => 3,
    });
    health.install(rules);
    return { ipt, health, saves, checked, bump: () => { gen++; } };
  }

  it('no commit since an intact check: the next checks read nothing, and say so', async () => {
    const { health, saves, checked } = setupGen();
    assert.equal(await health.check(), 'intact');
    const read = saves.length;
    assert.deepEqual([...saves].sort(), ['mangle', 'nft'], 'the first check after the install reads every table of ours');
    assert.equal(await health.check(), 'unchanged');
    assert.equal(await health.check(), 'unchanged');
    assert.equal(saves.length, read);
    assert.equal(checked.n, 3);
    assert.equal(health.status().checks, 3);
    assert.equal(health.status().unchanged, 2);
  });

  it('a foreign commit that damaged the rules: read, repaired; then verified again and quiet', async () => {
    const { ipt, health, saves, bump } = setupGen();
    assert.equal(await health.check(), 'intact');
    assert.equal(await health.check(), 'unchanged');
    ipt.tables.set('mangle', '*mangle\n:SLUICE_QUEUE - [0:0]\nCOMMIT\n'); // iptables -t mangle -F (iptables-nft: a commit)
    bump();
    const before = saves.length;
    assert.equal(await health.check(), 'repaired');
    assert.ok(saves.length > before);
    // The repair was an install: the next check reads again before trusting the generation.
    assert.equal(await health.check(), 'intact');
    assert.equal(await health.check(), 'unchanged');
  });

  it('a commit that changed nothing of ours (another table, our own element write): read once, intact, then quiet', async () => {
    const { health, saves, bump } = setupGen();
    assert.equal(await health.check(), 'intact');
    bump();
    const before = saves.length;
    assert.equal(await health.check(), 'intact');
    assert.ok(saves.length > before);
    assert.equal(await health.check(), 'unchanged');
  });

  it('iptables-legacy (outside nf_tables): its tables are read every period, and damage to them found without a commit', async () => {
    const { ipt, health, saves } = setupGen({ covers: false });
    assert.equal(await health.check(), 'intact');
    const before = saves.length;
    assert.equal(await health.check(), 'unchanged');
    const read = saves.slice(before);
    assert.ok(read.length > 0 && !read.includes('nft'), `only the iptables tables: ${read.join(',')}`);
    ipt.tables.set('mangle', '*mangle\n:SLUICE_QUEUE - [0:0]\nCOMMIT\n'); // a legacy flush raises no generation
    assert.equal(await health.check(), 'repaired');
  });

  it('an unknown generation (unreadable): every check reads everything', async () => {
    const { health, saves } = setupGen({ gen: () => { throw new Error('EPERM'); } });
    assert.equal(await health.check(), 'intact');
    const first = saves.length;
    assert.equal(await health.check(), 'intact');
    assert.equal(saves.length, 2 * first);
    assert.equal(health.status().unchanged, 0);
  });

  it('the generation read off the event loop (a Promise): an install while it is pending supersedes the check; a rejection is an unknown generation', async () => {
    let answer: (g: number) => void = () => undefined;
    let mode: 'pending' | 'reject' = 'pending';
    const { health, saves } = setupGen({
      gen: () =>
        mode === 'reject'
          ? Promise.reject(new Error('EPERM'))
          : new Promise<number>((resolve) => {
              answer = resolve;
            }),
    });
    const pending = health.check();
    await new Promise((r) => setImmediate(r));
    health.install(rules); // a reload while the kernel has not answered (it waits behind a commit)
    answer(101);
    assert.equal(await pending, 'superseded');
    const read = (): number => saves.length;
    assert.equal(read(), 0, 'nothing was read for the superseded check');
    mode = 'reject';
    assert.equal(await health.check(), 'intact', 'unknown: everything read');
    assert.ok(read() > 0);
  });

  it('a reload (install) between checks: the next check reads, even if the generation were the same', async () => {
    const { health, saves } = setupGen();
    assert.equal(await health.check(), 'intact');
    health.install(rules);
    const before = saves.length;
    assert.equal(await health.check(), 'intact');
    assert.ok(saves.length > before);
  });
});
