/**
 * The steering's only source of chance, made deterministic: a uniform
 * number in (0, 1) from a hash of (steered name, client prefix, cluster
 * name). Every DNS server computes the same number for the same client, so
 * capacity-weighted answers agree across the NS set (issue 21) and a
 * client keeps its cluster while the inputs stand. The cluster's name
 * rather than its index, so two servers whose configs list the clusters
 * in another order still agree.
 *
 * FNV-1a (32 bits) over the UTF-16 code units, then murmur3's finaliser to
 * spread the low-entropy differences of neighbouring prefixes over all bits.
 */
export function prefixDraw(name: string, prefixKey: string, cluster: string): number {
  let h = 0x811c9dc5;
  const mix = (s: string): void => {
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    // A separator no name contains, so ("a", "bc") and ("ab", "c") differ.
    h ^= 0xff;
    h = Math.imul(h, 0x01000193);
  };
  mix(name);
  mix(prefixKey);
  mix(cluster);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  // (0, 1): never 0 (its log is -Infinity) and never 1.
  return ((h >>> 0) + 0.5) / 4294967296;
}
