/**
 * The simulated world a scenario describes, laid out in typed arrays so a
 * million prefixes cost a few megabytes:
 *
 *   - clusters: place, capacity;
 *   - map units: prefixes that share an RTT row and a demand curve (one
 *     region's curve, scaled by the unit's weight). Prefixes are numbered so
 *     each unit's are contiguous: unit u holds prefixes
 *     [unitStart[u], unitStart[u + 1]). Every prefix of a unit carries the
 *     same demand (the unit's / its prefix count);
 *   - rtt: U × C row-major, ms.
 *
 * Everything random comes from one seeded generator, in a fixed order, so
 * a scenario and seed give the same world on every run.
 */
import { expandNames, type Scenario } from './scenario.ts';

/** mulberry32: small, fast, good enough for placement and phases (not crypto). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface World {
  readonly clusterNames: readonly string[];
  readonly clusterRegion: Int32Array; // -1: placed by lat/lon
  readonly capacity: Float64Array;
  readonly regionNames: readonly string[];
  /** Each region's peak demand (new connections/s). */
  readonly regionPeak: Float64Array;
  readonly regionUtcOffset: Float64Array;
  readonly units: number;
  readonly prefixes: number;
  readonly unitRegion: Int32Array;
  /** The unit's share of its region's demand (the shares of a region's units sum to 1). */
  readonly unitShare: Float64Array;
  readonly unitStart: Uint32Array; // U + 1
  readonly rtt: Float64Array; // U × C
}

const EARTH_KM = 6371;

export function greatCircleKm(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const r = Math.PI / 180;
  const dLat = (lat2 - lat1) * r;
  const dLon = (lon2 - lon1) * r;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(lat1 * r) * Math.cos(lat2 * r) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** A uniform point within radiusKm of the centre (flat approximation: radii are a few hundred km). */
function placeNear(rand: () => number, lat: number, lon: number, radiusKm: number): [number, number] {
  const d = radiusKm * Math.sqrt(rand());
  const a = 2 * Math.PI * rand();
  const la = Math.max(-89.9, Math.min(89.9, lat + (d * Math.cos(a)) / 111));
  const lo = lon + (d * Math.sin(a)) / (111 * Math.max(0.1, Math.cos((lat * Math.PI) / 180)));
  return [la, ((lo + 540) % 360) - 180];
}

/** Splits `total` into `parts` integers >= 1 with random (log-normal-ish) sizes; parts <= total. */
function split(rand: () => number, total: number, parts: number): Uint32Array {
  const w = new Float64Array(parts);
  let sum = 0;
  for (let i = 0; i < parts; i++) {
    // Box-Muller: sizes of client networks are skewed; sigma 0.8 keeps the largest unit a few times the mean.
    const g = Math.sqrt(-2 * Math.log(Math.max(rand(), 1e-12))) * Math.cos(2 * Math.PI * rand());
    w[i] = Math.exp(0.8 * g);
    sum += w[i] ?? 0;
  }
  const out = new Uint32Array(parts).fill(1);
  let left = total - parts;
  for (let i = 0; i < parts && left > 0; i++) {
    const n = Math.min(left, Math.floor(((w[i] ?? 0) / sum) * (total - parts)));
    out[i] = (out[i] ?? 1) + n;
    left -= n;
  }
  for (let i = 0; left > 0; i = (i + 1) % parts, left--) out[i] = (out[i] ?? 1) + 1;
  return out;
}

export function buildWorld(s: Readonly<Scenario>, seed: number): World {
  const rand = rng(seed);
  const regionIndex = new Map(s.regions.map((r, i) => [r.name, i]));
  const shareSum = s.regions.reduce((a, r) => a + r.share, 0) || 1;
  const regionPeak = Float64Array.from(s.regions, (r) => (s.demand.peak * r.share) / shareSum);
  const regionUtcOffset = Float64Array.from(s.regions, (r) => r.utcOffsetHours);

  const clusterNames: string[] = [];
  const cLat: number[] = [];
  const cLon: number[] = [];
  const cRegion: number[] = [];
  const cap: number[] = [];
  for (const g of s.clusters) {
    for (const n of expandNames(g.name, g.count)) {
      clusterNames.push(n);
      cap.push(g.capacity);
      const ri = g.region !== undefined ? (regionIndex.get(g.region) ?? -1) : -1;
      cRegion.push(ri);
      const r = s.regions[ri];
      const [la, lo] = g.lat !== undefined && g.lon !== undefined ? [g.lat, g.lon] : r ? placeNear(rand, r.lat, r.lon, r.radiusKm) : [0, 0];
      cLat.push(la);
      cLon.push(lo);
    }
  }
  const C = clusterNames.length;

  let unitRegion: Int32Array;
  let unitShare: Float64Array;
  let unitPrefixes: Uint32Array;
  let rtt: Float64Array;
  const explicit = s.prefixes.explicit;
  if (explicit !== undefined) {
    const U = explicit.length;
    unitRegion = Int32Array.from(explicit, (u) => regionIndex.get(u.region) ?? 0);
    unitPrefixes = Uint32Array.from(explicit, (u) => u.prefixes);
    const regionWeight = new Float64Array(s.regions.length);
    explicit.forEach((u, i) => (regionWeight[unitRegion[i] ?? 0] = (regionWeight[unitRegion[i] ?? 0] ?? 0) + u.weight));
    unitShare = Float64Array.from(explicit, (u, i) => u.weight / (regionWeight[unitRegion[i] ?? 0] || 1));
    rtt = new Float64Array(U * C);
    explicit.forEach((u, i) => {
      rtt.set(u.rttMs, i * C);
    });
  } else {
    const total = s.prefixes.count ?? 1;
    const U = s.prefixes.units ?? 1;
    // Units and prefixes per region in proportion to the shares, at least one unit per region.
    const R = s.regions.length;
    const uPer = s.regions.map((r) => Math.max(1, Math.round((U * r.share) / shareSum)));
    const pPer = s.regions.map((r, i) => Math.max(uPer[i] ?? 1, Math.round((total * r.share) / shareSum)));
    const nu = uPer.reduce((a, b) => a + b, 0);
    unitRegion = new Int32Array(nu);
    unitShare = new Float64Array(nu);
    unitPrefixes = new Uint32Array(nu);
    rtt = new Float64Array(nu * C);
    let u = 0;
    for (let ri = 0; ri < R; ri++) {
      const r = s.regions[ri];
      if (!r) continue;
      const sizes = split(rand, pPer[ri] ?? 1, uPer[ri] ?? 1);
      for (let k = 0; k < sizes.length; k++, u++) {
        unitRegion[u] = ri;
        unitPrefixes[u] = sizes[k] ?? 1;
        unitShare[u] = (sizes[k] ?? 1) / (pPer[ri] ?? 1);
        const [la, lo] = placeNear(rand, r.lat, r.lon, r.radiusKm);
        const access = rand() * s.network.accessMsMax;
        for (let c = 0; c < C; c++) rtt[u * C + c] = s.network.baseMs + access + greatCircleKm(la, lo, cLat[c] ?? 0, cLon[c] ?? 0) * s.network.msPerKm;
      }
    }
  }
  const U = unitRegion.length;
  const unitStart = new Uint32Array(U + 1);
  for (let u = 0; u < U; u++) unitStart[u + 1] = (unitStart[u] ?? 0) + (unitPrefixes[u] ?? 0);
  return {
    clusterNames,
    clusterRegion: Int32Array.from(cRegion),
    capacity: Float64Array.from(cap),
    regionNames: s.regions.map((r) => r.name),
    regionPeak,
    regionUtcOffset,
    units: U,
    prefixes: unitStart[U] ?? 0,
    unitRegion,
    unitShare,
    unitStart,
    rtt,
  };
}

/** The daily curve: 1 at peakHour local time, troughRatio 12 hours away, cosine between. */
export function dailyFactor(tSeconds: number, utcOffsetHours: number, peakHour: number, troughRatio: number): number {
  const h = tSeconds / 3600 + utcOffsetHours;
  return troughRatio + (1 - troughRatio) * (0.5 + 0.5 * Math.cos((2 * Math.PI * (h - peakHour)) / 24));
}
