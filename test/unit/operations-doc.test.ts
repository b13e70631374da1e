import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { z } from 'zod';
import { agentConfigSchema } from '../../src/agent/config.ts';
import { parseConfig } from '../../src/config/load.ts';
import { dnsConfigSchema } from '../../src/dns/config.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { configuredSpread, renderNft } from '../../src/front/nft.ts';
import { renderRules } from '../../src/front/rules.ts';
import { stateFilePath } from '../../src/front/state-file.ts';
import { masterConfigSchema } from '../../src/throttle/config.ts';

const DOC = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');

// The configuration docs/operations.md describes in words above its listing.
const CONFIG = `
cluster: c1
uplinkAddress: 198.18.101.2
queue: 0
failMode: bypass
services:
  - name: www
    vip: 198.19.1.1
    port: 80
    servers:
      - { name: s1a, address: 198.18.201.11, capacity: 100 }
      - { name: s1b, address: 198.18.201.12, capacity: 200 }
overflow:
  - { cluster: c2, vip: 198.19.2.1 }
`;

// The IPv6 example of docs/operations.md ("IPv6 services"): its ip6tables-restore listing.
const CONFIG6 = `
cluster: c1
uplinkAddress: 198.18.101.2
uplinkAddress6: 2001:2:0:101::2
services:
  - name: www6
    vip: 2001:2:0:1001::1
    port: 80
    servers:
      - { name: s1a, address: 2001:2:0:201::11, capacity: 100 }
      - { name: s1b, address: 2001:2:0:201::12, capacity: 200 }
`;

describe('docs/operations.md', () => {
  it('lists the ip6tables rules the front node renders for its IPv6 example (SLUICE_SYNPROXY included)', () => {
    const cfg = parseConfig(frontConfigSchema, CONFIG6, 'operations.md');
    const listing = [...DOC.matchAll(/```\n(\*mangle\n[\s\S]*?COMMIT\n)```/g)].map((m) => m[1]).find((l) => l?.includes(':SLUICE_SYNPROXY'));
    assert.ok(listing !== undefined, 'the ip6tables-restore listing is in docs/operations.md');
    assert.equal(listing, renderRules(cfg).restore6, 'update the ip6tables listing in docs/operations.md from renderRules(...).restore6');
  });

  it('lists the rules the front node renders for its example configuration', () => {
    const cfg = parseConfig(frontConfigSchema, CONFIG, 'operations.md');
    const listing = /```\n(\*mangle\n[\s\S]*?COMMIT\n)```/.exec(DOC)?.[1];
    assert.ok(listing !== undefined, 'the iptables-restore listing is in docs/operations.md');
    assert.equal(listing, renderRules(cfg).restore, 'update the listing in docs/operations.md from renderRules');
    const nft = /```\n(table ip sluice \{\n[\s\S]*?\n\})\n```/.exec(DOC)?.[1];
    assert.ok(nft !== undefined, 'the nft table is in docs/operations.md');
    // Every line but the fallback and schedule maps' (cut short in the doc) as rendered.
    const cut = (t: string): string[] => t.split('\n').filter((l) => !l.includes('map fallback') && !l.includes('map schedule') && l !== '');
    assert.deepEqual(cut(nft), cut(renderNft(cfg, configuredSpread(cfg)).table), 'update the nft listing in docs/operations.md from renderNft');
  });
});

/** One systemd unit file: each key's values in order (ExecReload= appears twice). */
function unitFile(path: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, k = '', v = ''] = m;
    out.set(k, [...(out.get(k) ?? []), v]);
  }
  return out;
}

/** The rows of the markdown table whose header row starts with `| first |`. */
function docTable(doc: string, first: string): string[][] {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`| ${first} |`));
  assert.ok(start >= 0, `a table starting with "| ${first} |"`);
  const rows: string[][] = [];
  for (const l of lines.slice(start + 2)) {
    if (!l.startsWith('|')) break;
    rows.push(l.slice(1, -1).split('|').map((c) => c.trim().replace(/^`(.*)`$/, '$1')));
  }
  return rows;
}

const DEPLOY = new URL('../../deploy/', import.meta.url);
const ROLE_SCHEMAS: Record<string, z.ZodObject> = { front: frontConfigSchema, dns: dnsConfigSchema, agent: agentConfigSchema, master: masterConfigSchema };

describe('docs/operations.md and deploy/ agree with the units', () => {
  const unitNames = readdirSync(new URL('systemd/', DEPLOY)).filter((f) => f.endsWith('.service')).sort();
  const units = new Map(unitNames.map((u) => [u, unitFile(fileURLToPath(new URL(`systemd/${u}`, DEPLOY)))]));
  const one = (u: string, key: string): string => {
    const v = units.get(u)?.get(key) ?? [];
    assert.equal(v.length, 1, `${u}: one ${key}=`);
    return v[0] ?? '';
  };
  const sysusers = /^u (\S+) /m.exec(readFileSync(new URL('systemd/sluice.sysusers.conf', DEPLOY), 'utf8'))?.[1];

  it('a unit per daemon, each run as the sysusers user, with its capabilities both ambient and bounding', () => {
    assert.deepEqual(unitNames, ['sluice-agent.service', 'sluice-dns.service', 'sluice-front.service', 'sluice-master.service']);
    assert.equal(sysusers, 'sluice');
    for (const u of unitNames) {
      assert.equal(one(u, 'User'), sysusers, u);
      assert.equal(one(u, 'Group'), sysusers, u);
      assert.equal(one(u, 'AmbientCapabilities'), one(u, 'CapabilityBoundingSet'), u);
      assert.equal(one(u, 'RuntimeDirectory'), 'sluice', u);
    }
  });

  it('the front unit may write its state file: StateDirectory=sluice, where the daemon puts it by default under systemd', () => {
    const u = 'sluice-front.service';
    assert.equal(one(u, 'ProtectSystem'), 'strict', 'the rest of the file system is read-only');
    assert.equal(one(u, 'StateDirectory'), 'sluice');
    assert.equal(one(u, 'StateDirectoryMode'), '0700');
    // systemd sets STATE_DIRECTORY=/var/lib/<StateDirectory>.
    assert.equal(stateFilePath('/etc/sluice/front.yaml', undefined, { STATE_DIRECTORY: `/var/lib/${one(u, 'StateDirectory')}` }), '/var/lib/sluice/front.state.json');
    assert.match(DOC, /\/var\/lib\/sluice\/front\.state\.json/);
  });

  it('the operations guide\'s unit table says what each unit runs, as whom, with what, from which file, on which socket', () => {
    const rows = docTable(DOC, 'unit');
    assert.deepEqual(rows.map((r) => r[0]).sort(), unitNames);
    for (const [unit, runs, user, caps, config, socket] of rows) {
      const u = unit ?? '';
      const start = /^\/opt\/sluice\/bin\/sluice (\S+) --config (\S+)$/.exec(one(u, 'ExecStart'));
      assert.ok(start, `${u}: ExecStart=/opt/sluice/bin/sluice ROLE --config FILE`);
      const [, role = '', file = ''] = start;
      assert.equal(u, `sluice-${role}.service`);
      assert.equal(runs, `sluice ${role}`, u);
      assert.equal(user, one(u, 'User'), u);
      assert.equal(caps, one(u, 'AmbientCapabilities') || 'none', u);
      assert.equal(config, file, u);
      // systemctl reload checks that same file as that role, then signals.
      assert.deepEqual(units.get(u)?.get('ExecReload'), [`/opt/sluice/bin/sluice check-config --role ${role} ${file}`, '/bin/kill -HUP $MAINPID'], u);
      // The admin socket is the daemon's default, inside the unit's RuntimeDirectory.
      const schema = ROLE_SCHEMAS[role];
      assert.ok(schema, `${u}: a known role`);
      assert.equal(socket, (schema.shape['adminSocket'] as z.ZodType).parse(undefined), `${u}: adminSocket default`);
      assert.ok(socket?.startsWith(`/run/${one(u, 'RuntimeDirectory')}/`), `${u}: socket under the RuntimeDirectory`);
    }
  });

  it('the agent\'s default state file (its drain/maint verb) is in its unit\'s StateDirectory, which survives restarts', () => {
    const stateFile = agentConfigSchema.shape.stateFile.parse(undefined).path;
    assert.ok(stateFile.startsWith(`/var/lib/${one('sluice-agent.service', 'StateDirectory')}/`), stateFile);
  });

  it('nowhere says a daemon runs as root; the least-privilege summary names each unit\'s capabilities', () => {
    assert.doesNotMatch(DOC, /\bruns? as root\b/);
    const summary = /capabilities only where needed \(([^)]*)\)/.exec(DOC.replace(/\s+/g, ' '))?.[1] ?? '';
    for (const u of unitNames) {
      const role = /^sluice-(\w+)\.service$/.exec(u)?.[1] ?? '';
      const caps = one(u, 'AmbientCapabilities');
      if (caps === '') assert.match(summary, new RegExp(`\\b${role}\\b[^,;]*\\bnone\\b`), `${role}: none`);
      else assert.ok(summary.includes(`${role} \`${caps}\``), `${role} \`${caps}\` in "${summary}"`);
    }
  });

  it('deploy/install.sh installs every unit and an example for every unit\'s configuration; deploy/README.md lists them alike', () => {
    const install = readFileSync(new URL('install.sh', DEPLOY), 'utf8');
    const installed = (/^UNITS=\(([^)]*)\)/m.exec(install)?.[1] ?? '').trim().split(/\s+/);
    assert.deepEqual([...installed].sort(), unitNames);
    const examples = (/^EXAMPLES=\(([^)]*)\)/m.exec(install)?.[1] ?? '').trim().split(/\s+/).map((p) => `/etc/sluice/${p.split(':')[1] ?? ''}`);
    const readme = readFileSync(new URL('README.md', DEPLOY), 'utf8');
    const readmeRows = docTable(readme, 'unit');
    assert.deepEqual(readmeRows.map((r) => r[0]).sort(), unitNames);
    for (const u of unitNames) {
      const file = /--config (\S+)$/.exec(one(u, 'ExecStart'))?.[1] ?? '';
      assert.ok(examples.includes(file), `install.sh installs an example as ${file}`);
      const row = readmeRows.find((r) => r[0] === u);
      assert.ok(row, `${u}: a row in deploy/README.md`);
      assert.equal(row[1], one(u, 'ExecStart').replace('/opt/sluice/bin/', ''), `${u}: deploy/README.md runs`);
      assert.equal(row[2], one(u, 'AmbientCapabilities').split(' ').join(', ') || 'none', `${u}: deploy/README.md capabilities`);
    }
    // The header comment and the closing hint name every unit too.
    for (const u of unitNames) {
      const role = /^sluice-(\w+)\.service$/.exec(u)?.[1] ?? '';
      assert.ok(new RegExp(`sluice-\\{[a-z,]*\\b${role}\\b[a-z,]*\\}\\.service`).test(install), `install.sh header comment: ${role}`);
      assert.ok(new RegExp(`/etc/sluice/\\{[a-z,]*\\b${role}\\b[a-z,]*\\}\\.yaml`).test(install), `install.sh header comment: ${role}.yaml`);
      assert.ok(new RegExp(`start with: .*\\bsluice-${role}\\b`).test(install), `install.sh closing hint: ${role}`);
    }
  });
});
