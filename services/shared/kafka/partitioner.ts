/**
 * Kafka's default partitioning of keyed records (the Java client's): murmur2 of the key's bytes, sign bit cleared, modulo
 * the topic's partitions. A key lands on the same partition whichever client wrote it, so a stage's state stays
 * co-partitioned with its input.
 *
 * Our own because @platformatic/kafka computes it in BigInt arithmetic whose intermediate values grow with the key
 * (~2 KB of garbage a record in enrich, docs/decisions.md); this is the same function in 32-bit integer arithmetic.
 */

const M = 0x5bd1e995;
const SEED = 0x9747b28c;

/** murmur2 of `data` as the Java client's Utils.murmur2 returns it (a signed 32-bit integer). */
export function murmur2(data: Uint8Array): number {
  const length = data.length;
  let h = SEED ^ length;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  const tail = length & 3;
  if (tail > 0) {
    if (tail === 3) h ^= data[whole + 2]! << 16;
    if (tail >= 2) h ^= data[whole + 1]! << 8;
    h ^= data[whole]!;
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/**
 * The producer's partitioner (@platformatic/kafka's `partitioner` option, which takes the result modulo the topic's
 * partitions): a keyed record's positive murmur2, an unkeyed one's 0.
 */
export function keyPartitioner(_message: unknown, key: unknown): number {
  return Buffer.isBuffer(key) ? murmur2(key) & 0x7fffffff : 0;
}
