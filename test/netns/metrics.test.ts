/**
 * Metrics and status over the ops HTTP server, on the testbed site as
 * scripts/testbed/site.ts configures it (the demo's configs): `sluice dns`,
 * a front node and an agent per server, all over the CURVE control plane,
 * each serving http.listen on 127.0.0.1 of its own namespace.
 *
 * Real traffic (curl through the VIP, dig at the DNS server), then scrapes
 * with curl inside the namespaces: every exposition passes the strict
 * format checker; decided connections grow by at least the connections
 * made, DNS responses by rcode and steered answers by cluster count the
 * digs, control messages, probes and RTTs show up; /status is the admin
 * status as JSON; 404/405; a second daemon on a taken http.listen exits
 * naming the key; a reload with a changed http.listen says a restart is
 * needed and keeps serving; stopping a daemon closes its port.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { OPS_PORTS, startSite, stopDaemons, type Daemon } from '../../scripts/testbed/site.ts';
import { FrontProcess, writeConfig } from '../helpers/front.ts';
import { parsePromText, type PromText } from '../helpers/prom_text.ts';
import { nsRunAsync, useTestbed } from '../helpers/testbed.ts';
import { until } from '../helpers/wait.ts';

const BIN = fileURLToPath(new URL('../../bin/sluice', import.meta.url));
const tb = useTestbed({ clients: 1, clusters: 1, serversPerCluster: 2 });

/** GET a page of the ops server in a namespace: HTTP code and body (code 0: no connection). */
async function http(ns: string, port: number, path: string, method = 'GET'): Promise<{ code: number; body: string }> {
  const r = await nsRunAsync(ns, 'curl', ['-s', '-m', '5', '-X', method, '-w', '\n%{http_code}', `http://127.0.0.1:${port}${path}`]);
  const i = r.stdout.lastIndexOf('\n');
  return { code: Number(r.stdout.slice(i + 1)) || 0, body: r.stdout.slice(0, Math.max(0, i)) };
}

async function scrape(ns: string, port: number): Promise<PromText> {
  const r = await http(ns, port, '/metrics');
  assert.equal(r.code, 200, `GET /metrics in ${ns}: ${r.body}`);
  return parsePromText(`${r.body}\n`);
}

async function status(ns: string, port: number): Promise<Record<string, unknown>> {
  const r = await http(ns, port, '/status');
  assert.equal(r.code, 200, `GET /status in ${ns}`);
  return JSON.parse(r.body) as Record<string, unknown>;
}

describe('ops HTTP server: metrics and status of the whole site', () => {
  let daemons: Daemon[] = [];
  let frontNs = '';
  let dnsNs = '';
  let agentNs = '';

  before(async () => {
    const st = tb();
    frontNs = st.plan.clusters[0]!.front.name;
    dnsNs = st.plan.dns.name;
    agentNs = st.plan.clusters[0]!.servers[0]!.name;
    daemons = startSite(st);
    for (const [ns, port] of [[dnsNs, OPS_PORTS.dns], [frontNs, OPS_PORTS.front], [agentNs, OPS_PORTS.agent]] as const) {
      await until(async () => (await http(ns, port, '/status')).code === 200, `${ns} serves /status on 127.0.0.1:${port}`, 20_000, 200);
    }
    // Steered answers pick a cluster once DNS has its load report.
    await until(async () => ((await status(dnsNs, OPS_PORTS.dns))['clusters'] as { state: string }[])[0]?.state === 'up', 'DNS sees cluster c1 up', 20_000, 200);
  });
  after(async () => {
    await stopDaemons(daemons);
  });

  it('decided connections, DNS responses by rcode and steered answers by cluster count real curl and dig traffic', async () => {
    const st = tb();
    const client = st.plan.clients[0]!;
    const vip = st.plan.clusters[0]!.vip;
    const CONNECTIONS = 20;
    const DIGS = 10;
    const f0 = await scrape(frontNs, OPS_PORTS.front);
    const d0 = await scrape(dnsNs, OPS_PORTS.dns);
    const curl = await nsRunAsync(client.name, 'sh', ['-c', `for i in $(seq ${CONNECTIONS}); do curl -s -o /dev/null -w '%{http_code}\\n' -m 5 http://${vip}/; done`]);
    assert.deepEqual(curl.stdout.trim().split('\n'), Array<string>(CONNECTIONS).fill('200'), curl.stderr);
    for (let i = 0; i < DIGS; i++) {
      const r = await nsRunAsync(client.name, 'dig', ['+short', '+time=2', '+tries=1', `@${st.plan.dns.address}`, 'www.example.test', 'A']);
      assert.equal(r.stdout.trim(), vip, `dig ${i}: ${r.stdout}${r.stderr}`);
    }
    const nx = await nsRunAsync(client.name, 'dig', ['+time=2', '+tries=1', `@${st.plan.dns.address}`, 'nope.example.test', 'A']);
    assert.match(nx.stdout, /status: NXDOMAIN/);
    const f1 = await scrape(frontNs, OPS_PORTS.front);
    const d1 = await scrape(dnsNs, OPS_PORTS.dns);

    const grew = (a: PromText, b: PromText, name: string, labels?: Record<string, string>): number => b.sum(name, labels) - a.sum(name, labels);
    assert.ok(grew(f0, f1, 'sluice_front_connections_decided_total', { service: 'www', method: 'capacity' }) >= CONNECTIONS, 'decided connections grew by the connections made');
    for (const s of st.plan.clusters[0]!.servers) assert.ok(f1.has('sluice_front_connections_decided_total', { service: 'www', server: s.id }), `a series for ${s.id}`);
    assert.ok(grew(f0, f1, 'sluice_front_syn_packets_total') >= CONNECTIONS);
    // Each SYN decided by the kernel schedule (the default path) or queued to the daemon (near capacity).
    assert.ok(grew(f0, f1, 'sluice_front_kernel_decided_total') + grew(f0, f1, 'sluice_front_queue_packets_total') >= CONNECTIONS);
    assert.ok(f1.has('sluice_front_kernel_queue_length', { queue: '0' }), 'the kernel queue line of our namespace is read');
    assert.ok(f1.has('sluice_front_server_capacity', { service: 'www', unit: 'connections_per_second' }), 'capacities estimated from agent reports');
    assert.ok(f1.has('sluice_front_server_utilization', { service: 'www' }));
    assert.ok(f1.has('process_resident_memory_bytes'), 'default process metrics');

    assert.ok(grew(d0, d1, 'sluice_dns_responses_total', { rcode: 'NOERROR' }) >= DIGS, 'NOERROR responses count the digs');
    assert.equal(grew(d0, d1, 'sluice_dns_responses_total', { rcode: 'NXDOMAIN' }), 1);
    assert.ok(grew(d0, d1, 'sluice_dns_queries_total', { transport: 'udp' }) >= DIGS + 1);
    assert.ok(grew(d0, d1, 'sluice_dns_steered_answers_total', { cluster: 'c1' }) >= DIGS, 'steered answers by chosen cluster count the digs');
    assert.ok(d1.has('sluice_dns_cluster_state', { cluster: 'c1', state: 'up' }));
    assert.ok(d1.sum('sluice_control_messages_received_total', { type: 'cluster_load' }) > 0);
    assert.ok(f1.sum('sluice_control_messages_sent_total', { type: 'cluster_load' }) > 0);
    for (const p of [f1, d1]) for (const s of p.samples) assert.ok(!Object.values(s.labels).some((v) => v.includes(client.address)), `no client address in ${s.name}`);
  });

  it('control messages from the agents, RTT probes and their results show up on both sides', async () => {
    await until(async () => {
      const f = await scrape(frontNs, OPS_PORTS.front);
      const d = await scrape(dnsNs, OPS_PORTS.dns);
      return (
        f.sum('sluice_control_messages_received_total', { type: 'load_report' }) > 0 &&
        f.sum('sluice_front_agent_reports_total') > 0 &&
        f.sum('sluice_front_probe_echoes_total', { outcome: 'replied' }) > 0 &&
        f.sum('sluice_front_probe_rtt_seconds_count') > 0 &&
        d.sum('sluice_dns_probe_targets_total', { outcome: 'sent' }) > 0 &&
        d.sum('sluice_dns_rtt_seconds_count', { cluster: 'c1' }) > 0
      );
    }, 'agent reports at the front; probes sent and answered; RTT histograms filled', 30_000, 500);
    const a = await scrape(agentNs, OPS_PORTS.agent);
    assert.ok(a.sum('sluice_agent_reports_total', { type: 'load_report' }) > 0);
    assert.ok(a.sum('sluice_control_messages_sent_total', { type: 'load_report' }) > 0);
    assert.ok(a.has('sluice_agent_utilization'));
  });

  it('/status is the admin status as JSON; other paths 404, other methods 405, all counted', async () => {
    const st = tb();
    const front = await status(frontNs, OPS_PORTS.front);
    const admin = JSON.parse((await nsRunAsync(frontNs, BIN, ['status', '--json', '--socket', join(st.runDir, 'front1.sock')])).stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(front).sort(), Object.keys(admin).sort());
    assert.ok(((front['counters'] as Record<string, number>)['decided'] ?? 0) >= 20);
    const dns = await status(dnsNs, OPS_PORTS.dns);
    assert.equal(dns['name'], 'dns');
    const agent = await status(agentNs, OPS_PORTS.agent);
    assert.equal(agent['name'], st.plan.clusters[0]!.servers[0]!.id);
    assert.equal((await http(frontNs, OPS_PORTS.front, '/nope')).code, 404);
    assert.equal((await http(frontNs, OPS_PORTS.front, '/metrics', 'POST')).code, 405);
    const p = await scrape(frontNs, OPS_PORTS.front);
    assert.ok(p.sum('sluice_front_http_requests_total', { route: 'unmatched', code: '404' }) >= 1);
    assert.ok(p.sum('sluice_front_http_requests_total', { route: '/metrics', code: '405' }) >= 1);
    assert.ok(p.sum('sluice_front_http_requests_total', { route: '/status', code: '200' }) >= 1);
  });

  it('a second daemon on a taken http.listen exits 1 naming the key', async () => {
    const st = tb();
    const cfg = writeConfig(
      join(st.runDir, 'dns-second.yaml'),
      `name: dns2
listen: ["127.0.0.1:5353"]
zones: [{ file: ${join(st.runDir, 'example.test.zone')} }]
adminSocket: ${join(st.runDir, 'dns-second.sock')}
http: { listen: '127.0.0.1:${OPS_PORTS.dns}' }
`,
    );
    const p = new FrontProcess(dnsNs, cfg, 'dns');
    const code = await new Promise<number | null>((r) => p.child.once('exit', r));
    assert.equal(code, 1);
    assert.ok(p.lines.some((l) => typeof l['raw'] === 'string' && /http\.listen 127\.0\.0\.1:9101: EADDRINUSE/.test(l['raw'])), JSON.stringify(p.lines));
  });

  it('a reload with a changed http.listen needs a restart: logged, the old address keeps serving', async () => {
    const st = tb();
    const dns = daemons.find((d) => d.name === 'dns')!;
    const file = join(st.runDir, 'dns.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace(`127.0.0.1:${OPS_PORTS.dns}`, '127.0.0.1:9199'));
    dns.child.kill('SIGHUP');
    await until(() => /"keys":\[[^\]]*"http"[^\]]*\][^\n]*need a restart/.test(readFileSync(dns.log, 'utf8')), 'the restart-needed warning names http', 10_000, 100);
    assert.equal((await http(dnsNs, OPS_PORTS.dns, '/status')).code, 200);
    assert.equal((await http(dnsNs, 9199, '/status')).code, 0);
  });

  it('stopping a daemon closes its ops port', async () => {
    const front = daemons.find((d) => d.name === 'front1')!;
    await stopDaemons([front]);
    assert.equal(front.child.exitCode, 0);
    assert.equal((await http(frontNs, OPS_PORTS.front, '/status')).code, 0);
  });
});
