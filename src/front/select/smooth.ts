/**
 * Smooth weighted choice, the scheme of Apache's byrequests (seed 003) and
 * nginx's weighted round robin: every candidate with weight w > 0 adds w to
 * its status; the largest status wins (strictly: ties go to the earlier
 * candidate) and gives back the sum of the weights. Candidates of weight 0
 * neither accumulate nor count. Deterministic; the sum of statuses of the
 * candidates stays constant, so a fixed set of weights repeats its schedule.
 *
 * `status` and `weights` hold one slot per candidate and are owned by the
 * caller (filled before each pick: no allocation on the SYN path).
 */
export function smoothPick(count: number, status: Float64Array, weights: Float64Array): number {
  let best = -1;
  let total = 0;
  for (let i = 0; i < count; i++) {
    const w = weights[i] ?? 0;
    if (!(w > 0)) continue;
    const s = (status[i] ?? 0) + w;
    status[i] = s;
    total += w;
    if (best < 0 || s > (status[best] ?? 0)) best = i;
  }
  if (best >= 0) status[best] = (status[best] ?? 0) - total;
  return best;
}
