/**
 * The kernel's flow table read over ctnetlink (native/src/ct_dump.c,
 * src/front/kernel-flows.ts streamKernelFlows), as the front node reads it
 * at start and in its resync, against /proc/net/nf_conntrack's text in a
 * bare namespace: the same flows, field for field, for IPv4 and IPv6, TCP
 * and UDP (ICMP left out as the text parser leaves it), across many reads;
 * with CAP_NET_ADMIN alone (the unprivileged unit, which cannot read /proc's
 * root-only file); and a clear refusal without it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { DUMP_ROWS } from '../../src/front/kernel-flows.ts';
import { insertFlows, withCaps } from '../helpers/conntrack.ts';
import { nsRun, useNamespace } from '../helpers/testbed.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/ct-dump.ts', import.meta.url));
const UID = 64123;
const ns = useNamespace('ctdump');
const dir = mkdtempSync(join(tmpdir(), 'ct-dump-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

type Read = { netlink: string[] | { error: string; message: string }; proc: string[] | { error: string; message: string }; paces: number[] };

/** The fixture in the namespace: as root, or as UID with only these capabilities ('' for none). */
function read(caps?: string): Read {
  const node = [process.execPath, '--no-warnings', FIXTURE];
  const argv = withCaps(UID, caps, node);
  return JSON.parse(nsRun(ns(), argv[0] ?? '', argv.slice(1))) as Read;
}

/** Inserts flows with one `conntrack -R` of `-I` lines. */
function insert(lines: readonly string[]): void {
  insertFlows(ns(), dir, lines);
}

describe('the flow table over ctnetlink', () => {
  it('reads the flows /proc lists, field for field: IPv4 and IPv6, TCP states and UDP; ICMP left out', () => {
    insert([
      '-I -p tcp -s 198.18.64.1 -d 198.19.1.1 --sport 40001 --dport 80 -r 198.18.4.2 -q 198.18.64.1 --reply-port-src 8080 --reply-port-dst 40001 --state ESTABLISHED -t 300 -m 0x51000001',
      '-I -p tcp -s 198.18.64.2 -d 198.19.1.1 --sport 40002 --dport 80 -r 198.18.4.3 -q 198.18.64.2 --reply-port-src 80 --reply-port-dst 40002 --state SYN_SENT -t 300',
      '-I -p tcp -s 198.18.64.3 -d 198.19.1.1 --sport 40003 --dport 80 -r 198.18.4.3 -q 198.18.64.3 --reply-port-src 80 --reply-port-dst 40003 --state TIME_WAIT -t 300',
      '-I -p udp -s 198.18.64.4 -d 198.19.1.2 --sport 5353 --dport 53 -r 198.18.4.4 -q 198.18.64.4 --reply-port-src 53 --reply-port-dst 5353 -t 300',
      '-I -p icmp -s 198.18.64.5 -d 198.19.1.1 --icmp-type 8 --icmp-code 0 --icmp-id 7 -t 30',
      '-I -p tcp -s 2001:2::c -d 2001:2:1::1 --sport 40004 --dport 443 -r 2001:2:2::b -q 2001:2::c --reply-port-src 443 --reply-port-dst 40004 --state ESTABLISHED -t 300',
      '-I -p udp -s 2001:2::d -d 2001:2:1::2 --sport 5354 --dport 53 -r 2001:2:2::c -q 2001:2::d --reply-port-src 53 --reply-port-dst 5354 -t 300',
    ]);
    const r = read();
    assert.deepEqual(r.netlink, [
      'tcp ESTABLISHED 198.18.64.1:40001 > 198.19.1.1:80 reply from 198.18.4.2:8080',
      'tcp ESTABLISHED 2001:2::c:40004 > 2001:2:1::1:443 reply from 2001:2:2::b:443',
      'tcp SYN_SENT 198.18.64.2:40002 > 198.19.1.1:80 reply from 198.18.4.3:80',
      'tcp TIME_WAIT 198.18.64.3:40003 > 198.19.1.1:80 reply from 198.18.4.3:80',
      'udp UDP 198.18.64.4:5353 > 198.19.1.2:53 reply from 198.18.4.4:53',
      'udp UDP 2001:2::d:5354 > 2001:2:1::2:53 reply from 2001:2:2::c:53',
    ]);
    assert.deepEqual(r.netlink, r.proc, 'the same flows as /proc/net/nf_conntrack');
  });

  it('a table of thousands: every flow, in batches of DUMP_ROWS with the pace awaited after each', () => {
    const lines: string[] = [];
    for (let i = 0; i < 5000; i++) {
      const c = `198.18.${String(100 + Math.floor(i / 250))}.${String((i % 250) + 1)}`;
      lines.push(`-I -p tcp -s ${c} -d 198.19.1.1 --sport ${String(20000 + i)} --dport 80 -r 198.18.4.${String(2 + (i % 3))} -q ${c} --reply-port-src 80 --reply-port-dst ${String(20000 + i)} --state ESTABLISHED -t 300`);
    }
    insert(lines);
    const r = read();
    assert.ok(Array.isArray(r.netlink) && Array.isArray(r.proc));
    assert.equal(r.netlink.length, 5006);
    assert.deepEqual(r.netlink, r.proc, 'the same flows as /proc/net/nf_conntrack');
    const full = Math.floor(5006 / DUMP_ROWS);
    assert.deepEqual(r.paces, [...Array.from({ length: full }, (_, i) => (i + 1) * DUMP_ROWS), ...(5006 % DUMP_ROWS > 0 ? [5006] : [])], 'full batches, then the rest');
  });

  it('with CAP_NET_ADMIN alone (the unprivileged unit): the same flows, where /proc is refused', () => {
    const root = read();
    const r = read('+net_admin');
    assert.ok(Array.isArray(r.netlink), JSON.stringify(r.netlink));
    assert.deepEqual(r.netlink, root.netlink);
    assert.equal((r.proc as { error: string }).error, 'ERR_SLUICE_CONNTRACK_READ', '/proc/net/nf_conntrack is root-only');
  });

  it('without CAP_NET_ADMIN: refused with ERR_SLUICE_CONNTRACK_READ naming the capability, never an empty table', () => {
    const r = read('');
    assert.equal((r.netlink as { error: string }).error, 'ERR_SLUICE_CONNTRACK_READ');
    assert.match((r.netlink as { message: string }).message, /CAP_NET_ADMIN.*(not permitted|EPERM)/);
  });
});
