/**
 * Limits that are real (issue 20 part 6, acceptance 6): 300 servers in one
 * service, and connections reach server 300 with the right mark (the
 * kernel's conntrack entry carries it and the DNAT to server 300's
 * address) and the daemon's record names server 300.
 *
 * The 300 servers are 300 addresses on one server namespace, answered by
 * one small HTTP server bound to all of them that replies with the local
 * address it was reached on (so the server side, not the client, says
 * where the connection went). byrequests with equal weights goes round the
 * servers, so at most a few hundred sequential connections reach the last
 * one; the loop is bounded.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { serverMark } from '../../src/front/marks.ts';
import type { FrontStatus } from '../../src/front/status.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { nsRun, nsRunAsync, useTestbed } from '../helpers/testbed.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
// No WAN delay: the test is about marks and records, not RTTs, and up to
// 600 sequential connections each paid the default 20 ms RTT several times
// (about 15 s of the file's 20).
const testbed = useTestbed({ clusters: 1, clients: 1, serversPerCluster: 1, delaysMs: { '1:1': 0 } });
const VIP = '198.19.1.1';
const PORT = 8300;
const SERVERS = 300;

/** Server i's address (1-based), in 198.18.210.0/23. */
function addressOf(i: number): string {
  return `198.18.${String(210 + Math.floor((i - 1) / 250))}.${String(((i - 1) % 250) + 1)}`;
}

const SERVER_PY = `
import http.server, socketserver
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        body = (self.connection.getsockname()[0] + '\\n').encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
S(('0.0.0.0', ${String(PORT)}), H).serve_forever()
`;

// Sequential connections until one is answered from the target address:
// that one is kept open (its record stays active) and its client port
// printed; every other one is closed. At most 2 x SERVERS attempts.
const CLIENT_PY = `
import socket, sys, time
vip, port, target, attempts = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
seen = []
for n in range(attempts):
    s = socket.create_connection((vip, port), timeout=3)
    s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
    data = b''
    # Until the body (one line, after the headers) is in.
    while b'\\r\\n\\r\\n' not in data or not data.split(b'\\r\\n\\r\\n', 1)[1].endswith(b'\\n'):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    addr = data.split(b'\\r\\n\\r\\n', 1)[-1].strip().decode()
    seen.append(addr)
    if addr == target:
        print('REACHED', n + 1, s.getsockname()[1], flush=True)
        time.sleep(60)
        sys.exit(0)
    s.close()
print('NOT REACHED: %d distinct, last %s' % (len(set(seen)), seen[-3:]), flush=True)
sys.exit(1)
`;

function configYaml(socket: string): string {
  const servers = Array.from({ length: SERVERS }, (_, k) => `      - { name: s${String(k + 1)}, address: ${addressOf(k + 1)} }`).join('\n');
  return `cluster: c1
uplinkAddress: 198.18.101.2
adminSocket: ${socket}
services:
  - name: many
    vip: ${VIP}
    port: ${String(PORT)}
    method: byrequests
    servers:
${servers}
`;
}

describe('sluice front: 300 servers in one service', () => {
  let front: FrontProcess | undefined;
  let server: ChildProcess | undefined;
  let clientProc: ChildProcess | undefined;
  let frontNs = '';
  let client = '';
  let socket = '';

  before(async () => {
    const st = testbed();
    const k = st.plan.clusters[0];
    const s1 = k?.servers[0];
    frontNs = k?.front.name ?? '';
    client = st.plan.clients[0]?.name ?? '';
    // 300 addresses on the one server, routed to it by the front node.
    nsRun(s1?.name ?? '', 'ip', ['-batch', '-'], Array.from({ length: SERVERS }, (_, k2) => `addr add ${addressOf(k2 + 1)}/32 dev eth0`).join('\n') + '\n');
    nsRun(frontNs, 'ip', ['route', 'add', '198.18.210.0/23', 'via', s1?.address ?? '', 'dev', 'lan0']);
    server = spawn('ip', ['netns', 'exec', s1?.name ?? '', 'python3', '-c', SERVER_PY], { stdio: 'ignore' });
    socket = join(st.runDir, 'front-limits.sock');
    front = new FrontProcess(frontNs, writeConfig(join(st.runDir, 'front-limits.yaml'), configYaml(socket)));
    await front.waitFor('front node ready', 30_000);
  });

  after(async () => {
    clientProc?.kill('SIGKILL');
    server?.kill('SIGKILL');
    await front?.stop();
  });

  it('a connection reaches server 300: its address answers, conntrack holds the DNAT with server 300\'s mark, the record names s300', async () => {
    const target = addressOf(SERVERS);
    clientProc = spawn('ip', ['netns', 'exec', client, 'python3', '-c', CLIENT_PY, VIP, String(PORT), target, String(2 * SERVERS)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    clientProc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const line = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => {
        reject(new Error(`client: no answer within 120 s; ${stderr}`));
      }, 120_000);
      createInterface({ input: clientProc!.stdout! }).once('line', (l) => {
        clearTimeout(t);
        resolve(l);
      });
    });
    const m = /^REACHED (\d+) (\d+)$/.exec(line);
    assert.ok(m, `the connection reached ${target}: ${line} ${stderr}`);
    const clientPort = m[2] ?? '';

    // The kernel's flow: to the VIP, answered by server 300, with its mark.
    const mark = serverMark(0, SERVERS - 1);
    const flows = nsRun(frontNs, 'conntrack', ['-L', '-p', 'tcp', '--dport', String(PORT)]).split('\n');
    const flow = flows.find((l) => l.includes(`sport=${clientPort} `) && l.includes(`dst=${VIP} `));
    assert.ok(flow, `a conntrack entry for client port ${clientPort}: ${flows.join('\n')}`);
    assert.match(flow, new RegExp(`src=${target.replaceAll('.', '\\.')} dst=\\S+ sport=${String(PORT)} dport=${clientPort}`), 'the reply comes from server 300: the DNAT');
    assert.match(flow, new RegExp(`mark=${String(mark)} `), `server 300's mark 0x${mark.toString(16)}`);

    // The daemon's record: server s300 holds the open connection.
    const r = await nsRunAsync(frontNs, BIN, ['ctl', '--socket', socket, 'status']);
    assert.equal(r.code, 0, r.stderr);
    const st = JSON.parse(r.stdout) as FrontStatus;
    const servers = st.services[0]?.servers ?? [];
    assert.equal(servers.length, SERVERS);
    const s300 = servers.find((s) => s.name === `s${String(SERVERS)}`);
    assert.ok(s300, 'server s300 in the status');
    assert.equal(s300.active, 1, `s300 holds the open connection: ${JSON.stringify(s300)}`);
    assert.equal(servers.reduce((n, s) => n + s.active, 0), 1, 'and no other record is active');
  });
});
