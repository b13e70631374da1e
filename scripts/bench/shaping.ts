/**
 * Checkpoint decisions per second, in process (issue 7): sluice's Shaper
 * (key extraction, stick-table lookup, frequency-counter update, verdict)
 * against rate-limiter-flexible's RateLimiterMemory doing the same limit
 * (50 new connections per second per source), on the same inputs, in one
 * run, alternating rounds.
 *
 * Inputs: DECISIONS requests from SOURCES client addresses (a fixed
 * pseudo-random sequence, the same array for both). Both read the real
 * clock (RateLimiterMemory reads Date.now itself; sluice gets
 * performance.now() once per batch of BATCH, as the front node does per
 * NFQUEUE batch). Sluice's rule has no queue (maxLength 0): over the limit
 * is a rejection, as with RateLimiterMemory. RateLimiterMemory's API is a
 * promise per decision; it is driven in batches of BATCH promises awaited
 * together (its fastest use in an event loop).
 *
 * Admitted counts differ: each limiter admits 50 per second of its own
 * elapsed time, and the slower one spans more seconds. RateLimiterMemory's
 * admitted path (a resolved promise) is cheaper than its rejected one, so
 * admitting more makes it look faster, not slower: the ratio is, if
 * anything, in its favour.
 *
 * Prints a table, writes bench/results/shaping.json. Target: sluice >= 3x.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { checkpointSchema } from '../../src/shaping/config.ts';
import { Outcome, Shaper } from '../../src/shaping/shaper.ts';

/** IPv4 clients: checkpoints key them by the number (the words serve IPv6 clients). */
const V4_WORDS = new Uint32Array(4);

const SOURCES = Number(process.env['SOURCES'] ?? 10_000);
const DECISIONS = Number(process.env['DECISIONS'] ?? 2_000_000);
const ROUNDS = Number(process.env['ROUNDS'] ?? 5);
const BATCH = 256;
const LIMIT = 50;

// xorshift32: the same input sequence every run.
function inputs(): Uint32Array {
  const srcs = new Uint32Array(SOURCES);
  for (let i = 0; i < SOURCES; i++) srcs[i] = (0x0a000000 + i * 7 + 1) >>> 0;
  const out = new Uint32Array(DECISIONS);
  let x = 0x12345678;
  for (let i = 0; i < DECISIONS; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = srcs[x % SOURCES] ?? 0;
  }
  return out;
}

function makeShaper(): Shaper {
  const rule = checkpointSchema.parse({ name: 'per-source', kind: 'rate-limit', criterion: 'source', limit: LIMIT, periodMs: 1000, queue: { maxLength: 0 }, table: { size: SOURCES * 2 } });
  const shaper = new Shaper({ cluster: [], services: [{ checkpoints: [rule], servers: [{ checkpoints: [] }] }], overflow: [] }, { maxHeld: 1024, connections: 1024, overflowBase: 0x80, scheduler: () => ({ arm: () => undefined }) });
  shaper.host = { choose: () => 0, settle: () => undefined };
  return shaper;
}

interface Round {
  readonly name: string;
  readonly seconds: number;
  readonly perSecond: number;
  readonly admitted: number;
}

function runSluice(src: Uint32Array): Round {
  const shaper = makeShaper();
  let admitted = 0;
  const t0 = performance.now();
  for (let b = 0; b < src.length; b += BATCH) {
    const now = performance.now();
    const end = Math.min(src.length, b + BATCH);
    for (let i = b; i < end; i++) {
      const s = src[i] ?? 0;
      const port = i & 0xffff;
      if (shaper.begin(i, s * 0x10000 + port, s, V4_WORDS, 80, 0, now) === Outcome.Pass) admitted++;
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  return { name: 'sluice', seconds, perSecond: src.length / seconds, admitted };
}

async function runFlexible(src: Uint32Array): Promise<Round> {
  const limiter = new RateLimiterMemory({ points: LIMIT, duration: 1 });
  let admitted = 0;
  const ok = (): void => {
    admitted++;
  };
  const no = (): void => undefined;
  const batch: Promise<void>[] = new Array<Promise<void>>(BATCH);
  const t0 = performance.now();
  for (let b = 0; b < src.length; b += BATCH) {
    const end = Math.min(src.length, b + BATCH);
    batch.length = end - b;
    for (let i = b; i < end; i++) batch[i - b] = limiter.consume(src[i] ?? 0).then(ok, no);
    await Promise.all(batch);
  }
  const seconds = (performance.now() - t0) / 1000;
  return { name: 'rate-limiter-flexible', seconds, perSecond: src.length / seconds, admitted };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

async function main(): Promise<void> {
  const src = inputs();
  // Warm-up (JIT) on a tenth of the inputs, not counted.
  runSluice(src.subarray(0, DECISIONS / 10));
  await runFlexible(src.subarray(0, DECISIONS / 10));
  const rounds: Round[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate which goes first, so drift in the machine hits both alike.
    if (r % 2 === 0) rounds.push(runSluice(src), await runFlexible(src));
    else rounds.push(await runFlexible(src), runSluice(src));
  }
  const sl = rounds.filter((r) => r.name === 'sluice').map((r) => r.perSecond);
  const fx = rounds.filter((r) => r.name !== 'sluice').map((r) => r.perSecond);
  const ratio = median(sl) / median(fx);
  console.log(`checkpoint decisions/s: ${DECISIONS} decisions from ${SOURCES} sources, limit ${LIMIT}/s per source, ${ROUNDS} rounds`);
  console.log('round  limiter                  decisions/s   admitted');
  rounds.forEach((r, i) => {
    console.log(`${String(Math.floor(i / 2) + 1).padStart(5)}  ${r.name.padEnd(23)}  ${Math.round(r.perSecond).toString().padStart(11)}  ${String(r.admitted).padStart(9)}`);
  });
  console.log(`median sluice ${Math.round(median(sl))}/s, rate-limiter-flexible ${Math.round(median(fx))}/s: ratio ${ratio.toFixed(2)} (target >= 3)`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/shaping.json',
    JSON.stringify({ date: new Date().toISOString(), node: process.version, sources: SOURCES, decisions: DECISIONS, limitPerSecond: LIMIT, batch: BATCH, rounds, medianPerSecond: { sluice: median(sl), rateLimiterFlexible: median(fx) }, ratio, target: 3 }, null, 2) + '\n',
  );
}

await main();
