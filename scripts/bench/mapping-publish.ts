/**
 * Benchmark: several DNS servers must give a prefix the same answer (issue 24,
 * part 4). Either each computes the assignment itself (MappingTable.recompute,
 * src/dns/mapping/table.ts) or one computes it and publishes the table over
 * the control plane. This measures both sides on one machine:
 *
 *   compute  a whole recompute (candidates, map units, the exact solve, the
 *            table, TTLs) of N prefixes × C clusters: cold (an empty table:
 *            every prefix new) and warm (the table of the previous recompute,
 *            demand moved by a few percent: the steady state);
 *   publish  the table as control-plane messages: JSON as every message today
 *            (src/control/messages.ts: [type, JSON envelope], lists of at most
 *            MAX_LIST = 4096 entries, each entry [prefix text, cluster, ttl],
 *            decoded with JSON.parse and a strict zod schema as the receivers
 *            decode), and a packed binary form (5 bytes per IPv4 /24 entry);
 *            the full table (a server starting, or resynchronising) and the
 *            delta of the warm recompute (moved prefixes and changed TTLs).
 *
 *   flock /tmp/sluice-netns.lock node_modules/.bin/node scripts/bench/mapping-publish.ts [--scenario scenarios/steady-day.yaml] [--at 68400] [--jitter-ms 4] [--prefixes N] [--queries-per-window 10]
 *
 * And the other side of computing locally: two servers whose demand inputs
 * differ by the sampling noise of the queries each receives
 * (--queries-per-window), and the share of prefixes they answer differently.
 *
 * The world (clusters, capacities, map units, RTT rows, demand at time --at)
 * is the scenario's (src/sim/world.ts); each prefix gets its unit's RTT row
 * plus its own access delay, uniform in [0, jitter-ms), so prefixes of a unit
 * group into several map units of the solve as real prefixes would. Times are
 * CPU time of this process (user + system), so other load on the shared cores
 * does not count; one run each (the recompute is seconds long). Prints a table
 * and JSON.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { MAX_LIST } from '../../src/control/messages.ts';
import { mappingOptionsSchema } from '../../src/dns/config.ts';
import { MappingTable, type MappingClusterInput, type MappingEntry, type MappingPrefixInput } from '../../src/dns/mapping/table.ts';
import { Simulation } from '../../src/sim/engine.ts';
import { loadScenario } from '../../src/sim/scenario.ts';
import { buildWorld, rng } from '../../src/sim/world.ts';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'scenarios/steady-day.yaml' },
    at: { type: 'string', default: '68400' },
    'jitter-ms': { type: 'string', default: '4' },
    prefixes: { type: 'string' },
    'queries-per-window': { type: 'string', default: '10' },
  },
});

function cpuMs<T>(f: () => T): [T, number] {
  const c0 = process.cpuUsage();
  const r = f();
  const c1 = process.cpuUsage(c0);
  return [r, (c1.user + c1.system) / 1e3];
}

const s = loadScenario(values.scenario);
const w = buildWorld(s, s.seed);
const C = w.clusterNames.length;
const N = values.prefixes !== undefined ? Number(values.prefixes) : w.prefixes;
const at = Number(values.at);
const jitter = Number(values['jitter-ms']);
const sim = new Simulation(s, w, s.seed, () => ({ cost: 0, served: 0, unserved: 0, solveMs: 0 }));
const region = new Float64Array(w.regionNames.length);
sim.regionDemand(at, region);

// Prefix i: the i-th of the world's prefixes (scaled to N), an IPv4 /24 key as client_prefix.ts writes it.
const key = (i: number): string => `4:${String(1 + (i >>> 16))}.${String((i >>> 8) & 255)}.${String(i & 255)}.0/24`;
const rand = rng(s.seed ^ 0xbe7c);
const rows = new Float64Array(N * C);
const unitOf = new Int32Array(N);
const prefixes: MappingPrefixInput[] = [];
let u = 0; // g rises with i: the unit search goes on from the last one
for (let i = 0; i < N; i++) {
  const g = Math.min(w.prefixes - 1, Math.floor((i * w.prefixes) / N));
  while ((w.unitStart[u + 1] ?? 0) <= g) u++;
  unitOf[i] = u;
  const extra = rand() * jitter;
  const row = rows.subarray(i * C, (i + 1) * C);
  for (let c = 0; c < C; c++) row[c] = (w.rtt[u * C + c] ?? 0) + extra;
  const perPrefix = ((region[w.unitRegion[u] ?? 0] ?? 0) * (w.unitShare[u] ?? 0)) / ((w.unitStart[u + 1] ?? 0) - (w.unitStart[u] ?? 0));
  // RTTs measured long ago: no prefix gets ttlMin for a fresh RTT.
  prefixes.push({ key: key(i), demand: (perPrefix * w.prefixes) / N, rtt: row, rttAt: -1e9 });
}
let load = 0;
for (const p of prefixes) load += p.demand;
let cap = 0;
for (let c = 0; c < C; c++) cap += w.capacity[c] ?? 0;
const clusters: MappingClusterInput[] = Array.from({ length: C }, (_, c) => ({ usable: true, capacity: w.capacity[c] ?? 0, load: (load * (w.capacity[c] ?? 0)) / cap }));

const opts = mappingOptionsSchema.parse({});
const table = new MappingTable(C, opts);
const rss0 = process.memoryUsage.rss();
const [cold, coldMs] = cpuMs(() => table.recompute(prefixes, clusters, 0));
const before = new Map<string, MappingEntry>();
for (const [k, e] of table.entries()) before.set(k, { ...e });
// The steady state: 5 s later, every prefix's demand changed by up to ±2%.
const warmInput = prefixes.map((p) => ({ ...p, demand: p.demand * (0.98 + 0.04 * rand()) }));
const [warm, warmMs] = cpuMs(() => table.recompute(warmInput, clusters, 5000));
const rss1 = process.memoryUsage.rss();

// Publishing: the full table and the delta of the warm recompute.
const full: [string, number, number][] = [];
const delta: [string, number, number][] = [];
let movedOnly = 0;
for (const [k, e] of table.entries()) {
  const t: [string, number, number] = [k.slice(2), e.cluster, e.ttl];
  full.push(t);
  const b = before.get(k);
  if (b === undefined || b.cluster !== e.cluster || b.ttl !== e.ttl) delta.push(t);
  if (b === undefined || b.cluster !== e.cluster) movedOnly++;
}
// The receivers' check, as messages.ts writes its schemas: strict, bounded.
const entry = z.tuple([z.string().max(64), z.int().min(0).max(255), z.int().min(0).max(86400)]);
const body = z.strictObject({ epoch: z.int().min(0), part: z.int().min(0), parts: z.int().min(1), entries: z.array(entry).max(MAX_LIST) });
const envelope = z.strictObject({ v: z.int(), type: z.string().max(64), from: z.string().max(64), sentAt: z.number(), body: z.unknown() });

function jsonMessages(list: readonly [string, number, number][]): string[] {
  const parts = Math.max(1, Math.ceil(list.length / MAX_LIST));
  const out: string[] = [];
  for (let p = 0; p < parts; p++) {
    out.push(JSON.stringify({ v: 2, type: 'mapping_table', from: 'dns-1', sentAt: Date.now(), body: { epoch: 1, part: p, parts, entries: list.slice(p * MAX_LIST, (p + 1) * MAX_LIST) } }));
  }
  return out;
}
function jsonDecode(msgs: readonly string[]): Map<string, MappingEntry> {
  const m = new Map<string, MappingEntry>();
  for (const t of msgs) {
    const e = envelope.parse(JSON.parse(t));
    const b = body.parse(e.body);
    for (const [k, c, ttl] of b.entries) m.set(`4:${k}`, { cluster: c, ttl, demand: 0, rttMs: 0, since: 0 });
  }
  return m;
}
// Packed: per entry the /24's three octets, the cluster (one octet: at most 250 clusters), the TTL (one octet, seconds, at most 255).
function packed(list: readonly [string, number, number][]): Buffer {
  const b = Buffer.alloc(list.length * 5);
  list.forEach(([k, c, ttl], i) => {
    const [a0, a1, a2] = k.split('.').map(Number);
    b[i * 5] = a0 ?? 0;
    b[i * 5 + 1] = a1 ?? 0;
    b[i * 5 + 2] = a2 ?? 0;
    b[i * 5 + 3] = c;
    b[i * 5 + 4] = Math.min(255, ttl);
  });
  return b;
}
function unpack(b: Buffer): Map<string, MappingEntry> {
  const m = new Map<string, MappingEntry>();
  for (let i = 0; i + 5 <= b.length; i += 5) m.set(`4:${String(b[i])}.${String(b[i + 1])}.${String(b[i + 2])}.0/24`, { cluster: b[i + 3] ?? 0, ttl: b[i + 4] ?? 0, demand: 0, rttMs: 0, since: 0 });
  return m;
}

// Two servers computing for themselves: each estimates a prefix's demand
// from the queries it received (service.ts: smoothed query rates scaled to
// the clusters' load), so their inputs differ by the sampling noise of the
// queries. Model: each server sees a Poisson number of queries per prefix
// per smoothing window, with mean --queries-per-window, and scales the
// counts so they sum to the total demand. Both start from an empty table
// (the same history); the share of prefixes they answer differently is what
// computing locally costs in agreement at this demand.
function poisson(mean: number): number {
  if (mean > 30) return Math.max(0, Math.round(mean + Math.sqrt(mean) * Math.sqrt(-2 * Math.log(Math.max(rand(), 1e-12))) * Math.cos(2 * Math.PI * rand())));
  const l = Math.exp(-mean);
  let k = 0;
  let p = rand();
  while (p > l) {
    k++;
    p *= rand();
  }
  return k;
}
const qpw = Number(values['queries-per-window']);
function serverView(): MappingPrefixInput[] {
  const counts = prefixes.map(() => poisson(qpw));
  const sum = counts.reduce((a, b) => a + b, 0);
  // Query counts are demand-blind when every prefix's resolver asks once per TTL; here they are taken as
  // proportional to demand (the best case for the estimate): count × its demand share.
  let w = 0;
  const raw = prefixes.map((p, i) => {
    const x = ((counts[i] ?? 0) / Math.max(1, sum / prefixes.length)) * p.demand;
    w += x;
    return x;
  });
  return prefixes.map((p, i) => ({ ...p, demand: ((raw[i] ?? 0) * load) / Math.max(1e-300, w) }));
}
const s1 = new MappingTable(C, opts);
const s2 = new MappingTable(C, opts);
const [, twoMs] = cpuMs(() => {
  s1.recompute(serverView(), clusters, 0);
  s2.recompute(serverView(), clusters, 0);
});
let differ = 0;
let both = 0;
let differDemand = 0;
for (const p of prefixes) {
  const a = s1.lookup(p.key);
  const b = s2.lookup(p.key);
  if (a === undefined || b === undefined) continue;
  both++;
  if (a.cluster !== b.cluster) {
    differ++;
    differDemand += p.demand;
  }
}

const results: Record<string, number | string> = {
  node: process.version,
  scenario: s.name,
  prefixes: N,
  clusters: C,
  demandOverCapacity: Number((load / cap).toFixed(3)),
  coldUnits: cold.units,
  coldRecomputeMs: Math.round(coldMs),
  coldSolveMs: Math.round(cold.solveMs),
  warmUnits: warm.units,
  warmRecomputeMs: Math.round(warmMs),
  warmSolveMs: Math.round(warm.solveMs),
  warmMoved: warm.moved,
  // Entries whose cluster changed (new or moved): the delta if receivers derived TTLs themselves.
  deltaClusterEntries: movedOnly,
  tableEntries: table.size,
  rssGrowthMiB: Math.round((rss1 - rss0) / 2 ** 20),
  twoServersQueriesPerWindow: qpw,
  twoServersHeadroom: Number((s1.last?.headroom ?? 0).toFixed(3)),
  twoServersDifferShare: Number((differ / Math.max(1, both)).toFixed(5)),
  twoServersDifferDemandShare: Number((differDemand / load).toFixed(5)),
  twoServersRecomputeMs: Math.round(twoMs),
};
for (const [name, list] of [
  ['full', full],
  ['delta', delta],
] as const) {
  const [msgs, encMs] = cpuMs(() => jsonMessages(list));
  const bytes = msgs.reduce((a, m) => a + Buffer.byteLength(m), 0);
  const [dec, decMs] = cpuMs(() => jsonDecode(msgs));
  const [pk, pencMs] = cpuMs(() => packed(list));
  const [pdec, pdecMs] = cpuMs(() => unpack(pk));
  if (dec.size !== list.length || pdec.size !== list.length) throw new Error(`decode lost entries: ${String(dec.size)} / ${String(pdec.size)} of ${String(list.length)}`);
  results[`${name}Entries`] = list.length;
  results[`${name}JsonMessages`] = msgs.length;
  results[`${name}JsonBytes`] = bytes;
  results[`${name}JsonEncodeMs`] = Math.round(encMs);
  results[`${name}JsonDecodeMs`] = Math.round(decMs);
  results[`${name}PackedBytes`] = pk.length;
  results[`${name}PackedEncodeMs`] = Math.round(pencMs);
  results[`${name}PackedDecodeMs`] = Math.round(pdecMs);
}
for (const [k, v] of Object.entries(results)) process.stdout.write(`${k.padEnd(24)} ${String(v)}\n`);
process.stdout.write(JSON.stringify({ bench: 'mapping-publish', ...results }) + '\n');
