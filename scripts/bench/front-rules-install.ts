/**
 * Benchmark: rendering, installing and reading back the front node's rules
 * (iptables part and sluice's nft table) for a large configuration, in a
 * scratch network namespace that it creates and deletes.
 *
 *   node scripts/bench/front-rules-install.ts [--services 1000] [--servers 256] [--prefix rib]
 *
 * Prints the times of: schema validation, rendering, the first install
 * (nft -f + iptables-restore), a second install (a reload: the table
 * replaced), the read-back (`nft list table`), and one fallback map
 * rewrite (every service's slots), with the elements per set and map.
 */
import { parseArgs } from 'node:util';
import { parseConfig } from '../../src/config/load.ts';
import { frontConfigSchema } from '../../src/front/config.ts';
import { configuredSpread, fallbackDiffScript, fallbackUpdateScript, listChainsAsync, listTable, nftLoad } from '../../src/front/nft.ts';
import { installRuleset, removeRules, renderRuleset } from '../../src/front/ruleset.ts';
import { run } from '../testbed/sh.ts';

const { values } = parseArgs({ options: { services: { type: 'string', default: '1000' }, servers: { type: 'string', default: '256' }, prefix: { type: 'string', default: 'rib' } } });
const services = Number(values.services);
const servers = Number(values.servers);
const ns = `${values.prefix}-rules`;

function ms(t0: bigint): string {
  return `${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(0)} ms`;
}

const doc = {
  cluster: 'c1',
  uplinkAddress: '198.18.101.2',
  services: Array.from({ length: services }, (_, si) => ({
    name: `svc${String(si)}`,
    vip: `198.19.${String(Math.floor(si / 250))}.${String((si % 250) + 1)}`,
    port: 80,
    method: 'byrequests',
    servers: Array.from({ length: servers }, (_, k) => ({ name: `s${String(k)}`, address: `198.18.${String(200 + (k >> 7))}.${String((k & 0x7f) + 1)}`, port: 8000 + (si % 1000) })),
  })),
};
let t = process.hrtime.bigint();
const cfg = parseConfig(frontConfigSchema, JSON.stringify(doc), 'bench');
console.log(`${String(services)} services x ${String(servers)} servers: schema ${ms(t)}`);
t = process.hrtime.bigint();
const rules = renderRuleset(cfg, configuredSpread(cfg));
console.log(`render ${ms(t)}: ${(rules.nft.script.length / 1e6).toFixed(1)} MB of nft script; elements ${JSON.stringify(rules.nft.elements)}`);
run('ip', ['netns', 'add', ns]);
let gone = false;
const cleanup = (): void => {
  if (gone) return;
  gone = true;
  run('ip', ['netns', 'del', ns]);
};
// timeout(1) and Ctrl-C skip `finally`: the namespace goes anyway.
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const)
  process.on(sig, () => {
    cleanup();
    process.exit(code);
  });
try {
  t = process.hrtime.bigint();
  installRuleset(rules, ns);
  console.log(`first install ${ms(t)}${rules.nft.fallbackInline ? '' : ' (fallback map declared empty: filled next)'}`);
  if (!rules.nft.fallbackInline) {
    t = process.hrtime.bigint();
    nftLoad(fallbackDiffScript(cfg, configuredSpread(cfg), new Map()).script, ns);
    console.log(`fallback map fill (the writer, after the install) ${ms(t)}`);
  }
  t = process.hrtime.bigint();
  installRuleset(rules, ns);
  console.log(`second install (table replaced: a repair) ${ms(t)}`);
  // A reload that moves one service to another port: over the last rendering, only the changed elements.
  const doc2 = structuredClone(doc);
  const last = doc2.services[services - 1];
  if (last) last.port = 81;
  t = process.hrtime.bigint();
  const cfg2 = parseConfig(frontConfigSchema, JSON.stringify(doc2), 'bench');
  const rules2 = renderRuleset(cfg2, configuredSpread(cfg2));
  const parsed = ms(t);
  t = process.hrtime.bigint();
  const diffOnly = installRuleset(rules2, ns, rules) === 'elements';
  console.log(`reload install (one service changed; schema and render ${parsed}): ${ms(t)}, ${diffOnly ? 'changed elements only' : 'table replaced'}`);
  t = process.hrtime.bigint();
  const chains = await listChainsAsync(10_000, ns);
  console.log(`structural check (nft list chains) ${ms(t)}: ${String(chains.length)} chains`);
  t = process.hrtime.bigint();
  nftLoad(fallbackUpdateScript(cfg, configuredSpread(cfg)), ns);
  console.log(`fallback map rewrite (all services: flush and add) ${ms(t)}`);
  t = process.hrtime.bigint();
  const list = listTable(ns);
  console.log(`read-back (nft list table, with the fallback map) ${ms(t)}: ${(list.length / 1e6).toFixed(1)} MB`);
  removeRules(ns);
} finally {
  cleanup();
}
