/**
 * The expiry of a dead server's flows over ctnetlink (native/src/ct_expire.c,
 * src/front/flow-expiry.ts), in a bare namespace with flows inserted by
 * `conntrack`: exactly the flows with the server's mark and the server's
 * address and port as their reply's source that it cannot answer go (TCP
 * unreplied, UDP all; both families); replied TCP flows, other marks and
 * other servers' flows under its mark stay; thousands at once (deletes while the dump goes on);
 * with CAP_NET_ADMIN alone, and a clear refusal without it.
 * front-flow-expiry.test.ts is the end-to-end case through the daemon.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { insertFlows, withCaps } from '../helpers/conntrack.ts';
import { nsRun, useNamespace } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/ct-expire.ts', import.meta.url));
const UID = 64124;
const MARK = 0x5100_3002;
const OTHER = 0x5100_3003;
const ns = useNamespace('ctexp');
const dir = mkdtempSync(join(tmpdir(), 'ct-expire-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

type Result = { matched: number; deleted: number; gone: number } | { error: string; errno: number; message: string };

/** The fixture in the namespace, for the server at address:port: as root, or as UID with only these capabilities ('' for none). */
function expire(mark: number, address: string, port: number, caps?: string): Result {
  const argv = withCaps(UID, caps, [process.execPath, '--no-warnings', FIXTURE, String(mark), address, String(port)]);
  return JSON.parse(nsRun(ns(), argv[0] ?? '', argv.slice(1))) as Result;
}

/** Inserts flows with one `conntrack -R` of `-I` lines (the mark after the status: conntrack 1.4.7 drops it otherwise). */
function insert(lines: readonly string[]): void {
  insertFlows(ns(), dir, lines);
}

/** The table as sorted "proto sport" lines (conntrack -L, both families). */
function table(): string[] {
  const out = (f: string): string[] =>
    nsRun(ns(), 'conntrack', ['-L', '-f', f])
      .split('\n')
      .filter((l) => /^(tcp|udp)/.test(l))
      .map((l) => `${l.split(/\s+/)[0] ?? '?'} ${/sport=(\d+)/.exec(l)?.[1] ?? '?'}`);
  return [...out('ipv4'), ...out('ipv6')].sort();
}

function flush(): void {
  nsRun(ns(), 'conntrack', ['-F']);
  nsRun(ns(), 'conntrack', ['-F', '-f', 'ipv6']);
}

const mark = (m: number): string => `0x${m.toString(16)}`;

describe('expiring a dead server\'s flows over ctnetlink', () => {
  it('deletes its unreplied TCP flows and its UDP flows, both families; keeps its replied TCP flows, other marks and other servers\' flows under its mark', () => {
    flush();
    const S4 = '198.18.4.2';
    const S6 = '2001:2:2::b';
    /** A flow from a client to a VIP, DNATed to `server`:`port` (the reply's source). */
    const flow = (p: 'tcp' | 'udp', sport: number, state: string | undefined, m: number | undefined, server = S4, port = 80): string => {
      const v6 = server.includes(':');
      const client = v6 ? '2001:2::c' : '198.18.64.1';
      const replied = state !== undefined && state !== 'SYN_SENT';
      return `-I -p ${p} -s ${client} -d ${v6 ? '2001:2:1::1' : '198.19.1.1'} --sport ${String(sport)} --dport 80 -r ${server} -q ${client} --reply-port-src ${String(port)} --reply-port-dst ${String(sport)}${state !== undefined && p === 'tcp' ? ` --state ${state}` : ''} -t 300${replied ? ' -u SEEN_REPLY' : ''}${m !== undefined ? ` -m ${mark(m)}` : ''}`;
    };
    // Table-driven: [flow, as listed, expired by the IPv4 server's call, by the IPv6 server's]
    const cases: [string, string, boolean, boolean][] = [
      [flow('tcp', 40001, 'SYN_SENT', MARK), 'tcp 40001', true, false],
      [flow('tcp', 40002, 'SYN_SENT', MARK, S6), 'tcp 40002', false, true],
      [flow('tcp', 40003, 'ESTABLISHED', MARK), 'tcp 40003', false, false],
      [flow('tcp', 40004, 'TIME_WAIT', MARK), 'tcp 40004', false, false],
      [flow('tcp', 40005, 'ESTABLISHED', MARK, S6), 'tcp 40005', false, false],
      [flow('udp', 5001, undefined, MARK), 'udp 5001', true, false],
      [flow('udp', 5002, 'replied', MARK), 'udp 5002', true, false],
      [flow('tcp', 40006, 'SYN_SENT', OTHER), 'tcp 40006', false, false],
      [flow('tcp', 40007, 'SYN_SENT', undefined), 'tcp 40007', false, false],
      [flow('udp', 5003, undefined, OTHER), 'udp 5003', false, false],
      // Under its mark but another server's (a reload renumbered them): kept.
      [flow('tcp', 40008, 'SYN_SENT', MARK, '198.18.4.3'), 'tcp 40008', false, false],
      [flow('tcp', 40009, 'SYN_SENT', MARK, S4, 8080), 'tcp 40009', false, false],
      [flow('udp', 5004, 'replied', MARK, '2001:2:2::c'), 'udp 5004', false, false],
    ];
    insert(cases.map((c) => c[0]));
    assert.deepEqual(table(), cases.map((c) => c[1]).sort(), 'every flow inserted');
    assert.deepEqual(expire(MARK, S4, 80), { matched: 3, deleted: 3, gone: 0 });
    assert.deepEqual(table(), cases.filter((c) => !c[2]).map((c) => c[1]).sort());
    assert.deepEqual(expire(MARK, S6, 80), { matched: 1, deleted: 1, gone: 0 });
    assert.deepEqual(table(), cases.filter((c) => !c[2] && !c[3]).map((c) => c[1]).sort());
    assert.deepEqual(expire(MARK, S4, 80), { matched: 0, deleted: 0, gone: 0 }, 'nothing left to expire');
  });

  it('thousands at once: every unreplied flow of the mark, none of the others (deletes while the dump goes on)', () => {
    flush();
    const lines: string[] = [];
    for (let i = 0; i < 6000; i++) {
      const c = `198.18.${String(100 + Math.floor(i / 250))}.${String((i % 250) + 1)}`;
      // Every third flow another server's; of the mark's, every fourth replied.
      const m = i % 3 === 0 ? OTHER : MARK;
      const state = i % 4 === 0 ? 'ESTABLISHED -u SEEN_REPLY' : 'SYN_SENT';
      lines.push(`-I -p tcp -s ${c} -d 198.19.1.1 --sport ${String(20000 + i)} --dport 80 -r 198.18.4.2 -q ${c} --reply-port-src 80 --reply-port-dst ${String(20000 + i)} --state ${state} -t 300 -m ${mark(m)}`);
    }
    insert(lines);
    const expired = lines.filter((_, i) => i % 3 !== 0 && i % 4 !== 0).length;
    assert.deepEqual(expire(MARK, '198.18.4.2', 80), { matched: expired, deleted: expired, gone: 0 });
    assert.equal(table().length, 6000 - expired);
  });

  it('with CAP_NET_ADMIN alone (the unprivileged unit): it works; without: ERR_SLUICE_CT_EXPIRE, EPERM, nothing deleted', () => {
    flush();
    insert([`-I -p tcp -s 198.18.64.1 -d 198.19.1.1 --sport 41000 --dport 80 -r 198.18.4.2 -q 198.18.64.1 --reply-port-src 80 --reply-port-dst 41000 --state SYN_SENT -t 300 -m ${mark(MARK)}`]);
    const refused = expire(MARK, '198.18.4.2', 80, '');
    assert.ok('error' in refused, JSON.stringify(refused));
    assert.equal(refused.error, 'ERR_SLUICE_CT_EXPIRE');
    assert.equal(refused.errno, 1);
    assert.deepEqual(table(), ['tcp 41000']);
    assert.deepEqual(expire(MARK, '198.18.4.2', 80, '+net_admin'), { matched: 1, deleted: 1, gone: 0 });
    assert.deepEqual(table(), []);
  });
});
